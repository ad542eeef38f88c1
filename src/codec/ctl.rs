//! `CtlChange`: a CTL parameter's new value, from `ctl.changes`.

use std::borrow::Cow;

use jiff::Timestamp;
use pbjson_types::Timestamp as ProtoTimestamp;

use super::error::DecodeError;
use super::plain::{fields, once, protobuf, text, timestamp, Wire};
use super::time::{optional_ts, required_ts, timestamp_to_proto};
use super::validate;
use super::wire::{decode, encode, Format};
use crate::engine::Input;
use crate::proto::v1;

/// A decoded CTL change: what the engine needs of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtlRecord {
    /// Entity, e.g. `dwh.orders`.
    pub entity: String,
    /// Parameter of the entity, e.g. `max_dt`.
    pub param: String,
    /// The new value.
    pub value: Timestamp,
}

impl From<CtlRecord> for Input {
    fn from(r: CtlRecord) -> Self {
        Input::Ctl {
            entity: r.entity,
            param: r.param,
            value: r.value,
        }
    }
}

/// A CTL change read where it lies: its names borrow the record's bytes
/// when it is plain protobuf, as nearly every record of `ctl.changes` is.
/// An instance reads every change of that topic and keeps nothing of one
/// but its value, so copying the names out would be all the allocation
/// reading it costs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtlChange<'a> {
    /// Entity, e.g. `dwh.orders`.
    pub entity: Cow<'a, str>,
    /// Parameter of the entity, e.g. `max_dt`.
    pub param: Cow<'a, str>,
    /// The new value.
    pub value: Timestamp,
}

impl CtlChange<'_> {
    /// The change with names of its own.
    pub fn into_owned(self) -> CtlRecord {
        CtlRecord {
            entity: self.entity.into_owned(),
            param: self.param.into_owned(),
            value: self.value,
        }
    }
}

/// Decodes a `CtlChange` (protobuf or JSON). `changed_at` and `source` are
/// informational and only checked to be well-formed.
pub fn decode_ctl_change(bytes: &[u8]) -> Result<CtlRecord, DecodeError> {
    read_ctl_change(bytes).map(CtlChange::into_owned)
}

/// [`decode_ctl_change`] borrowing the names from `bytes` where it can.
/// Plain protobuf with each field at most once is read here; anything else
/// (JSON, repeated fields, unknown fields, malformed bytes) goes through
/// the generated decoder, which decides what it means or why it is refused.
pub fn read_ctl_change(bytes: &[u8]) -> Result<CtlChange<'_>, DecodeError> {
    checked(bytes, protobuf(bytes).and_then(plain))
}

/// [`read_ctl_change`] for a reader that keeps a change only when `known`
/// knows its parameter (the router: most changes of `ctl.changes` may name
/// parameters no task reads), giving what `known` found and the value.
/// `known` is asked with the raw name of a plain record first; it must
/// know only valid names, so a name it knows is not read as UTF-8 and
/// checked again. `Ok(None)` for a well-formed change it does not know,
/// and the same `Err` as [`read_ctl_change`] for anything malformed.
pub fn read_known_ctl_change<T>(
    bytes: &[u8],
    known: impl Fn(&[u8], &[u8]) -> Option<T>,
) -> Result<Option<(T, Timestamp)>, DecodeError> {
    read_known_plain_ctl(bytes, plain_ctl(bytes), known)
}

/// [`read_known_ctl_change`] of `bytes` already read by [`plain_ctl`]
/// (`plain` is what it gave for them).
pub fn read_known_plain_ctl<'a, T>(
    bytes: &'a [u8],
    plain: Option<PlainCtl<'a>>,
    known: impl Fn(&[u8], &[u8]) -> Option<T>,
) -> Result<Option<(T, Timestamp)>, DecodeError> {
    let plain = plain.map(|p| p.0);
    if let Some(p) = &plain {
        if let Some(found) = known(p.entity, p.param) {
            let value = required_ts("value", p.value.as_ref())?;
            optional_ts("changed_at", p.changed_at.as_ref())?;
            return Ok(Some((found, value)));
        }
    }
    // Asked already with a plain record's names, which a well-formed
    // change reads back unchanged: only then checked, not asked again.
    let asked = plain.is_some();
    let change = checked(bytes, plain)?;
    if asked {
        return Ok(None);
    }
    Ok(known(change.entity.as_bytes(), change.param.as_bytes()).map(|found| (found, change.value)))
}

/// The change `bytes` holds, read from `plain` when it is plain protobuf
/// with UTF-8 names, through the generated decoder otherwise; checked.
fn checked<'a>(bytes: &'a [u8], plain: Option<Plain<'a>>) -> Result<CtlChange<'a>, DecodeError> {
    let plain = plain.and_then(|p| {
        Some((
            std::str::from_utf8(p.entity).ok()?,
            std::str::from_utf8(p.param).ok()?,
            p.value,
            p.changed_at,
        ))
    });
    let (entity, param, value, changed_at) = match plain {
        Some((entity, param, value, changed_at)) => (
            Cow::Borrowed(entity),
            Cow::Borrowed(param),
            value,
            changed_at,
        ),
        None => {
            let m: v1::CtlChange = decode(bytes)?;
            (
                Cow::Owned(m.entity),
                Cow::Owned(m.param),
                m.value,
                m.changed_at,
            )
        }
    };
    validate::parameter(&entity, &param)?;
    let value = required_ts("value", value.as_ref())?;
    optional_ts("changed_at", changed_at.as_ref())?;
    Ok(CtlChange {
        entity,
        param,
        value,
    })
}

/// A `CtlChange` read as plain protobuf, not checked yet ([`plain_ctl`]).
pub struct PlainCtl<'a>(Plain<'a>);

impl<'a> PlainCtl<'a> {
    /// Its raw `(entity, param)` names (what [`read_known_ctl_change`] asks
    /// `known` first): for fetching ahead what looking them up will read.
    pub fn names(&self) -> (&'a [u8], &'a [u8]) {
        (self.0.entity, self.0.param)
    }
}

/// `bytes` read as a plain protobuf `CtlChange` (the form nearly every
/// record of `ctl.changes` has), `None` for any other; read once, for
/// [`read_known_plain_ctl`] and for fetching its lookup ahead.
pub fn plain_ctl(bytes: &[u8]) -> Option<PlainCtl<'_>> {
    protobuf(bytes).and_then(plain).map(PlainCtl)
}

/// The fields of a plain protobuf `CtlChange`, names not yet read as UTF-8.
struct Plain<'a> {
    entity: &'a [u8],
    param: &'a [u8],
    value: Option<ProtoTimestamp>,
    changed_at: Option<ProtoTimestamp>,
}

/// Reads `bytes` as a `CtlChange` whose fields each come at most once and
/// are all known; `None` for anything else, which the generated decoder
/// then reads (or refuses) as protobuf or JSON.
fn plain(bytes: &[u8]) -> Option<Plain<'_>> {
    let (mut entity, mut param, mut source) = (None, None, None);
    let (mut value, mut changed_at) = (None, None);
    // Every field of the message is length-delimited.
    fields(bytes, |field, wire| match (field, wire) {
        (1, Wire::Bytes(b)) => once(&mut entity, b),
        (2, Wire::Bytes(b)) => once(&mut param, b),
        (3, Wire::Bytes(b)) => once(&mut value, timestamp(b)?),
        (4, Wire::Bytes(b)) => once(&mut changed_at, timestamp(b)?),
        (5, Wire::Bytes(b)) => once(&mut source, text(b)?),
        _ => None,
    })?;
    Some(Plain {
        entity: entity.unwrap_or_default(),
        param: param.unwrap_or_default(),
        value,
        changed_at,
    })
}

/// Encodes a `CtlChange`, for tools and tests that drive Reactor.
pub fn encode_ctl_change(
    record: &CtlRecord,
    changed_at: Option<Timestamp>,
    source: &str,
    format: Format,
) -> Vec<u8> {
    let m = v1::CtlChange {
        entity: record.entity.clone(),
        param: record.param.clone(),
        value: Some(timestamp_to_proto(record.value)),
        changed_at: changed_at.map(timestamp_to_proto),
        source: source.to_string(),
    };
    encode(&m, format)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::put::put_varint;
    use proptest::prelude::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn record() -> CtlRecord {
        CtlRecord {
            entity: "dwh.orders".into(),
            param: "max_dt".into(),
            value: ts("2021-04-25T03:27:33Z"),
        }
    }

    #[test]
    fn round_trips_in_both_formats() {
        for format in [Format::Protobuf, Format::Json] {
            let bytes = encode_ctl_change(
                &record(),
                Some(ts("2021-04-25T03:30:00Z")),
                "loader",
                format,
            );
            assert_eq!(decode_ctl_change(&bytes).unwrap(), record(), "{format:?}");
        }
    }

    #[test]
    fn json_output_uses_schema_names() {
        let bytes = encode_ctl_change(
            &record(),
            Some(ts("2021-04-25T03:30:00Z")),
            "",
            Format::Json,
        );
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "entity": "dwh.orders",
                "param": "max_dt",
                "value": "2021-04-25T03:27:33+00:00",
                "changed_at": "2021-04-25T03:30:00+00:00",
            })
        );
    }

    #[test]
    fn hand_written_json() {
        let line = br#"{"entity":"dwh.orders","param":"max_dt","value":"2021-04-25T03:27:33Z"}"#;
        assert_eq!(decode_ctl_change(line).unwrap(), record());
        let camel = br#" {"entity":"dwh.orders","param":"max_dt","value":"2021-04-25T06:27:33+03:00","changedAt":"2021-04-25T03:30:00Z","source":"kcat"}
"#;
        assert_eq!(decode_ctl_change(camel).unwrap(), record());
        let input: Input = decode_ctl_change(line).unwrap().into();
        assert!(matches!(input, Input::Ctl { .. }));
    }

    #[test]
    fn invalid_changes() {
        let reason = |json: &str| decode_ctl_change(json.as_bytes()).unwrap_err().to_string();
        assert_eq!(
            reason(r#"{"entity":"dwh.orders","param":"max_dt"}"#),
            "missing field `value`"
        );
        assert_eq!(
            reason(r#"{"param":"max_dt","value":"2021-04-25T03:27:33Z"}"#),
            "missing field `entity`"
        );
        assert!(reason(
            r#"{"entity":"dwh orders","param":"max_dt","value":"2021-04-25T03:27:33Z"}"#
        )
        .starts_with("field `entity, param`: invalid parameter `dwh orders/max_dt`"));
        assert!(
            reason(r#"{"entity":"a/b","param":"c","value":"2021-04-25T03:27:33Z"}"#)
                .contains("invalid parameter")
        );
        assert!(reason(r#"{"entity":"a","param":"b","value":"yesterday"}"#).starts_with("json: "));
        assert!(reason("\u{1}\u{2}\u{3}").starts_with("protobuf: "));
        // Empty bytes are a valid empty protobuf message, which lacks fields.
        assert_eq!(reason(""), "missing field `entity`");
    }

    #[test]
    fn a_plain_record_lends_its_names() {
        let bytes = encode_ctl_change(
            &record(),
            Some(ts("2021-04-25T03:30:00Z")),
            "loader",
            Format::Protobuf,
        );
        let change = read_ctl_change(&bytes).unwrap();
        assert!(matches!(change.entity, Cow::Borrowed("dwh.orders")));
        assert!(matches!(change.param, Cow::Borrowed("max_dt")));
        assert_eq!(change.into_owned(), record());
    }

    #[test]
    fn a_known_name_is_refused_for_what_its_record_lacks() {
        let known = |e: &[u8], p: &[u8]| (e == b"dwh.orders" && p == b"max_dt").then_some(());
        // Entity and parameter only: no value.
        let bytes = b"\x0a\x0adwh.orders\x12\x06max_dt";
        let refused = read_ctl_change(bytes).unwrap_err().to_string();
        assert_eq!(
            read_known_ctl_change(bytes, known).unwrap_err().to_string(),
            refused
        );
        // A name no table can hold is refused whoever reads it.
        let bytes = encode_ctl_change(
            &CtlRecord {
                entity: "dwh orders".into(),
                ..record()
            },
            None,
            "",
            Format::Protobuf,
        );
        assert!(read_known_ctl_change(&bytes, |_, _| None::<()>).is_err());
    }

    /// What the generated decoder alone makes of `bytes`.
    fn via_prost(bytes: &[u8]) -> Result<CtlRecord, DecodeError> {
        let m: v1::CtlChange = decode(bytes)?;
        validate::parameter(&m.entity, &m.param)?;
        let value = required_ts("value", m.value.as_ref())?;
        optional_ts("changed_at", m.changed_at.as_ref())?;
        Ok(CtlRecord {
            entity: m.entity,
            param: m.param,
            value,
        })
    }

    /// A field: its number, wire type and bytes after the key.
    fn field() -> impl Strategy<Value = (u64, u64, Vec<u8>)> {
        let text = prop_oneof![
            Just(b"dwh.orders".to_vec()),
            Just(b"max_dt".to_vec()),
            Just(Vec::new()),
            Just(vec![0xff, 0xfe]),
            proptest::collection::vec(any::<u8>(), 0..12),
        ];
        let ts_field = prop_oneof![
            (any::<i64>(), 0u64..2).prop_map(|(v, n)| (1u64 + n, v as u64)),
            (0u64..4, any::<u64>()).prop_map(|(f, v)| (f, v)),
        ];
        let ts = proptest::collection::vec((ts_field, 0u64..6), 0..4).prop_map(|fields| {
            let mut out = Vec::new();
            for ((number, value), wire) in fields {
                // Mostly varints (wire type 0), sometimes another type.
                let wire = if wire < 5 { 0 } else { 1 };
                put_varint(number << 3 | wire, &mut out);
                if wire == 0 {
                    put_varint(value, &mut out);
                } else {
                    out.extend_from_slice(&value.to_le_bytes());
                }
            }
            out
        });
        (
            0u64..7,
            prop_oneof![Just(2u64), Just(2), Just(2), 0u64..6],
            prop_oneof![text, ts],
        )
            .prop_map(|(number, wire, body)| {
                let mut out = Vec::new();
                if wire == 2 {
                    put_varint(body.len() as u64, &mut out);
                    out.extend_from_slice(&body);
                } else if wire == 0 {
                    put_varint(body.len() as u64, &mut out);
                } else {
                    out.extend_from_slice(&body);
                }
                (number, wire, out)
            })
    }

    proptest! {
        /// Read here or by the generated decoder, a record means the same:
        /// the same change or the same reason to refuse it.
        #[test]
        fn reading_in_place_agrees_with_the_generated_decoder(
            fields in proptest::collection::vec(field(), 0..6),
            cut in any::<prop::sample::Index>(),
            cut_it in any::<bool>(),
            noise in proptest::collection::vec(any::<u8>(), 0..24),
            use_noise in 0u8..8,
        ) {
            let mut bytes = Vec::new();
            for (number, wire, body) in &fields {
                put_varint(number << 3 | wire, &mut bytes);
                bytes.extend_from_slice(body);
            }
            if cut_it && !bytes.is_empty() {
                bytes.truncate(cut.index(bytes.len()));
            }
            if use_noise == 0 {
                bytes = noise;
            }
            let ours = read_ctl_change(&bytes).map(CtlChange::into_owned).map_err(|e| e.to_string());
            let theirs = via_prost(&bytes).map_err(|e| e.to_string());
            prop_assert_eq!(ours, theirs.clone());
            // A reader that knows one (valid) name: a change of it, nothing
            // for another well-formed one, the same refusals.
            let known = |entity: &[u8], param: &[u8]| {
                (entity == b"dwh.orders" && param == b"max_dt").then_some(7)
            };
            let kept = read_known_ctl_change(&bytes, known).map_err(|e| e.to_string());
            let expected = theirs.map(|r| known(r.entity.as_bytes(), r.param.as_bytes()).map(|n| (n, r.value)));
            prop_assert_eq!(kept, expected);
        }

        /// Every well-formed record, whatever its values, reads the same.
        #[test]
        fn well_formed_records_read_the_same(
            secs in -62_135_596_800i64..253_402_300_799,
            nanos in 0i32..1_000_000_000,
            entity in "[a-z._]{1,12}",
            param in "[a-z_]{1,8}",
            changed in any::<bool>(),
        ) {
            let record = CtlRecord {
                entity,
                param,
                value: Timestamp::new(secs, nanos).unwrap(),
            };
            let bytes = encode_ctl_change(&record, changed.then_some(record.value), "loader", Format::Protobuf);
            let ours = read_ctl_change(&bytes).map(CtlChange::into_owned).map_err(|e| e.to_string());
            prop_assert_eq!(&ours, &via_prost(&bytes).map_err(|e| e.to_string()));
            let known = |e: &[u8], p: &[u8]| (e == record.entity.as_bytes() && p == record.param.as_bytes()).then_some(());
            prop_assert_eq!(read_known_ctl_change(&bytes, known), Ok(Some(((), record.value))));
            prop_assert_eq!(read_known_ctl_change(&bytes, |_, _| None::<()>), Ok(None));
            prop_assert_eq!(ours, Ok(record));
        }
    }
}
