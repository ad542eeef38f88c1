//! Offer records: an offer is kept as its record between steps and a shard
//! writes one at every step of an offer, so they are written straight from
//! the offer, byte for byte what the generated messages gave (tested).
//!
//! Offer bodies and stage states are stored as JSON text inside the
//! protobuf record, not as Structs, so that every number comes back exactly
//! as it was (a Struct number is a double).

#[cfg(test)]
use super::changelog::run_to_proto;
use super::changelog::{phase_from_proto, phase_to_proto, put_run_fields, run_from_proto};
use super::error::DecodeError;
use super::put::{put_bool, put_bytes, put_json, put_message, put_str, put_ts, put_uint};
#[cfg(test)]
use super::time::timestamp_to_proto;
use super::time::{optional_ts, required_ts};
use super::wire::decode;
#[cfg(test)]
use super::wire::{encode_into, Format};
use crate::offer::{normalize, normalize_body, Body};
use crate::proto::v1;
use crate::proto::v1::offer_record;
use crate::run::RunSlot;
use crate::stage::{Guard, Lane, OfferRecord, SlotFields, SlotRecord};

/// Decodes an `offer/<id>` record's value (what an offer kept as its
/// record holds).
pub fn decode_offer_record(bytes: &[u8]) -> Result<OfferRecord, DecodeError> {
    offer_from_proto(decode(bytes)?)
}

fn lane_to_proto(lane: Lane) -> v1::Lane {
    match lane {
        Lane::Live => v1::Lane::Live,
        Lane::Rescan => v1::Lane::Rescan,
    }
}

fn lane_from_proto(lane: i32) -> Result<Lane, DecodeError> {
    let lane: v1::Lane = super::changelog::known_enum(lane, "stages.lane", "lane")?;
    Ok(match lane {
        v1::Lane::Live => Lane::Live,
        v1::Lane::Rescan => Lane::Rescan,
    })
}

/// JSON text of a core value: cannot fail, keys are strings.
#[cfg(test)]
fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("JSON values serialize")
}

/// Field number of `OfferRecord.stages`.
const OFFER_STAGES: u32 = 4;

/// Appends an offer record in protobuf to `buf`, straight from the record
/// (the record is written at every step of an offer): its fields in field
/// order, then the stage slots as the map's entries (`{string key = 1;
/// SlotRecord value = 2}`, in name order, a default key or value left out
/// as prost leaves it). Byte for byte what the generated messages gave
/// when they were built for it (`encode_offer_via_prost`, tested), less
/// their copies of the body, the states and every string.
pub(super) fn encode_offer_into(r: &OfferRecord, buf: &mut Vec<u8>) {
    encode_offer_fields(
        &OfferFields {
            version: r.version,
            body: &r.body,
            updated_at: r.updated_at,
            guard: &r.guard,
            deleted: r.deleted,
        },
        r.stages.iter(),
        buf,
    );
}

/// An offer record's fields but its slots, borrowed from where they lie.
#[derive(Debug, Clone, Copy)]
pub struct OfferFields<'a> {
    /// See [`OfferRecord::version`].
    pub version: u64,
    /// See [`OfferRecord::body`].
    pub body: &'a crate::offer::Body,
    /// See [`OfferRecord::updated_at`].
    pub updated_at: jiff::Timestamp,
    /// See [`OfferRecord::guard`].
    pub guard: &'a Guard,
    /// See [`OfferRecord::deleted`].
    pub deleted: bool,
}

/// Appends an offer record to `buf` from its fields and its slots, `stages`
/// in name order with default slots left out (as [`OfferRecord::stages`]
/// holds them): what [`encode_value_into`] writes for the record they
/// make, without making it (a shard writes one at every step of an offer,
/// and building it copied every stage name and slot).
///
/// [`encode_value_into`]: super::encode_value_into
pub fn encode_offer_fields<'a>(
    r: &OfferFields<'_>,
    stages: impl IntoIterator<Item = (&'a str, &'a SlotRecord)>,
    buf: &mut Vec<u8>,
) {
    put_uint(1, r.version, buf);
    put_json(2, r.body, buf);
    put_ts(3, r.updated_at, buf);
    if !r.guard.is_default() {
        put_message(5, buf, |buf| {
            if let Some(t) = r.guard.window_start {
                put_ts(1, t, buf);
            }
            put_uint(2, r.guard.runs.into(), buf);
            if let Some(t) = r.guard.parked_until {
                put_ts(3, t, buf);
            }
        });
    }
    put_bool(6, r.deleted, buf);
    for (name, slot) in stages {
        put_message(OFFER_STAGES, buf, |buf| {
            put_str(1, name, buf);
            let at = buf.len();
            put_message(2, buf, |buf| put_slot(slot, buf));
            // An empty value: its key and a zero length, which prost leaves out.
            if buf.len() == at + 2 {
                buf.truncate(at);
            }
        });
    }
}

/// A stage slot's fields as prost writes `slot_to_proto`'s message.
fn put_slot(s: &SlotRecord, buf: &mut Vec<u8>) {
    let phase = i32::from(phase_to_proto(s.slot.phase));
    put_uint(1, u64::try_from(phase).unwrap_or_default(), buf);
    if let Some(state) = s.state.as_deref() {
        put_json(2, state, buf);
    }
    if let Some(t) = s.timer() {
        put_ts(3, t, buf);
    }
    let lane = i32::from(lane_to_proto(s.lane));
    put_uint(4, u64::try_from(lane).unwrap_or_default(), buf);
    if let Some(t) = s.queued_at() {
        put_ts(5, t, buf);
    }
    if let Some(run) = s.slot.run() {
        put_message(6, buf, |buf| put_run_fields(run, buf));
    }
    put_uint(7, s.run_version, buf);
    put_uint(8, s.slot.run_seq, buf);
    put_uint(9, s.slot.pass_seq, buf);
    put_uint(10, s.slot.failures.into(), buf);
    if let Some(t) = s.slot.wake_at() {
        put_ts(11, t, buf);
    }
    if let Some(error) = s.slot.last_error() {
        put_bytes(12, error.as_bytes(), buf);
    }
    if let Some(t) = s.slot.failed_at() {
        put_ts(13, t, buf);
    }
    if let Some(source) = s.source() {
        put_bytes(14, source.as_bytes(), buf);
    }
}

/// Whether [`encode_offer_into`] writes `r` byte for byte as the
/// generated messages did (for tests elsewhere in the crate).
#[cfg(test)]
pub(crate) fn offer_written_as_prost(r: &OfferRecord) -> bool {
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    encode_offer_into(r, &mut ours);
    encode_offer_via_prost(r, &mut theirs);
    ours == theirs
}

/// Whether `bytes`, an offer record a shard wrote, are what the generated
/// messages write for the record they decode to (for tests elsewhere in
/// the crate).
#[cfg(test)]
pub(crate) fn offer_bytes_as_prost(bytes: &[u8]) -> bool {
    let Ok(record) = decode_offer_record(bytes) else {
        return false;
    };
    let mut theirs = Vec::new();
    encode_offer_via_prost(&record, &mut theirs);
    theirs == bytes
}

/// The offer record as the generated messages wrote it: the reference
/// [`encode_offer_into`] is tested against.
#[cfg(test)]
fn encode_offer_via_prost(r: &OfferRecord, buf: &mut Vec<u8>) {
    use prost::encoding::{encode_key, encode_varint, message, string};
    let slots: Vec<(&str, offer_record::SlotRecord)> = r
        .stages
        .iter()
        .map(|(name, slot)| (name, slot_to_proto(slot)))
        .collect();
    encode_into(&offer_to_proto(r), Format::Protobuf, buf);
    for (name, slot) in &slots {
        let key = if name.is_empty() {
            0
        } else {
            string::encoded_len(1, &name.to_string())
        };
        let empty = *slot == offer_record::SlotRecord::default();
        let value = if empty {
            0
        } else {
            message::encoded_len(2, slot)
        };
        encode_key(
            OFFER_STAGES,
            prost::encoding::WireType::LengthDelimited,
            buf,
        );
        encode_varint((key + value) as u64, buf);
        if !name.is_empty() {
            string::encode(1, &name.to_string(), buf);
        }
        if !empty {
            message::encode(2, slot, buf);
        }
    }
}

#[cfg(test)]
fn slot_to_proto(s: &SlotRecord) -> offer_record::SlotRecord {
    let ts = |t: &Option<jiff::Timestamp>| t.map(timestamp_to_proto);
    offer_record::SlotRecord {
        phase: phase_to_proto(s.slot.phase).into(),
        state_json: s.state.as_deref().map(json_text).unwrap_or_default(),
        timer: ts(&s.timer()),
        lane: lane_to_proto(s.lane).into(),
        queued_at: ts(&s.queued_at()),
        run: s.slot.run().cloned().map(run_to_proto),
        run_version: s.run_version,
        run_seq: s.slot.run_seq,
        pass_seq: s.slot.pass_seq,
        failures: s.slot.failures,
        wake_at: ts(&s.slot.wake_at()),
        last_error: s.slot.last_error().map(str::to_string),
        failed_at: ts(&s.slot.failed_at()),
        source: s.source().map(str::to_string),
    }
}

/// An offer record as a message, without its stage slots
/// ([`encode_offer_via_prost`] writes those).
#[cfg(test)]
fn offer_to_proto(r: &OfferRecord) -> v1::OfferRecord {
    let ts = |t: &Option<jiff::Timestamp>| t.map(timestamp_to_proto);
    v1::OfferRecord {
        version: r.version,
        body_json: json_text(&r.body),
        updated_at: Some(timestamp_to_proto(r.updated_at)),
        stages: Default::default(),
        guard: (!r.guard.is_default()).then(|| offer_record::Guard {
            window_start: ts(&r.guard.window_start),
            runs: r.guard.runs,
            parked_until: ts(&r.guard.parked_until),
        }),
        deleted: r.deleted,
    }
}

fn offer_from_proto(m: v1::OfferRecord) -> Result<OfferRecord, DecodeError> {
    if m.body_json.is_empty() {
        return Err(DecodeError::MissingField("body_json"));
    }
    let mut body: Body =
        serde_json::from_slice(&m.body_json).map_err(|e| DecodeError::InvalidField {
            field: "body_json",
            reason: format!("not JSON text of an object: {e}"),
        })?;
    normalize_body(&mut body);
    let slot = |s: offer_record::SlotRecord| {
        let state = if s.state_json.is_empty() {
            None
        } else {
            let mut state: serde_json::Value =
                serde_json::from_slice(&s.state_json).map_err(|e| DecodeError::InvalidField {
                    field: "stages.state_json",
                    reason: format!("not JSON text: {e}"),
                })?;
            normalize(&mut state);
            Some(crate::stage::state(state))
        };
        Ok::<_, DecodeError>(SlotRecord::from(SlotFields {
            slot: RunSlot::from(crate::run::SlotParts {
                phase: phase_from_proto(s.phase)?,
                run_seq: s.run_seq,
                pass_seq: s.pass_seq,
                failures: s.failures,
                run: s.run.map(run_from_proto).transpose()?.map(Box::new),
                wake_at: optional_ts("stages.wake_at", s.wake_at.as_ref())?,
                last_error: s.last_error,
                failed_at: optional_ts("stages.failed_at", s.failed_at.as_ref())?,
            }),
            state,
            timer: optional_ts("stages.timer", s.timer.as_ref())?,
            lane: lane_from_proto(s.lane)?,
            queued_at: optional_ts("stages.queued_at", s.queued_at.as_ref())?,
            run_version: s.run_version,
            source: s.source,
        }))
    };
    let guard = match m.guard {
        None => Guard::default(),
        Some(g) => Guard {
            window_start: optional_ts("guard.window_start", g.window_start.as_ref())?,
            runs: g.runs,
            parked_until: optional_ts("guard.parked_until", g.parked_until.as_ref())?,
        },
    };
    Ok(OfferRecord {
        version: m.version,
        body: crate::offer::share(body),
        updated_at: required_ts("updated_at", m.updated_at.as_ref())?,
        stages: m
            .stages
            .into_iter()
            .map(|(stage, s)| Ok((stage, slot(s)?)))
            .collect::<Result<_, DecodeError>>()?,
        guard,
        deleted: m.deleted,
    })
}

/// Offer records for the tests of the changelog's records.
#[cfg(test)]
pub(super) mod test_support {
    use super::super::changelog::test_support::ts;
    use super::*;
    use crate::run::Run;
    use crate::stage::Phase;

    pub(in crate::codec) fn offer_record() -> OfferRecord {
        let body = serde_json::json!({
            "status": "active",
            "price": 100,
            "ratio": 0.5,
            "big": u64::MAX,
            "small": i64::MIN,
            "past_2_53": 9_007_199_254_740_993_u64,
            "nested": {"tags": ["a", null, true]},
        });
        let running = SlotRecord::from(SlotFields {
            slot: RunSlot::from(crate::run::SlotParts {
                phase: Phase::Running,
                run: Some(Box::new(Run {
                    run_id: "price/o1#3".into(),
                    attempt: 2,
                    pass: 9,
                    dispatched_at: ts("2024-06-01T00:00:01Z"),
                    deadline: ts("2024-06-01T00:01:01Z"),
                })),
                run_seq: 3,
                pass_seq: 9,
                failures: 1,
                wake_at: Some(ts("2024-06-01T00:02:00Z")),
                last_error: Some("model down".into()),
                failed_at: None,
            }),
            state: Some(serde_json::json!({"model": 3, "seen": 9_007_199_254_740_993_u64}).into()),
            timer: Some(ts("2024-07-01T00:00:00Z")),
            lane: Lane::Rescan,
            queued_at: Some(ts("2024-06-01T00:00:00Z")),
            run_version: 4,
            source: None,
        });
        OfferRecord {
            version: 5,
            body: body.as_object().unwrap().clone().into(),
            updated_at: ts("2024-06-01T00:00:00.25Z"),
            stages: [
                ("price".to_string(), running),
                (
                    "expire".to_string(),
                    SlotRecord::from(SlotFields {
                        timer: Some(ts("2024-12-01T00:00:00Z")),
                        state: Some(serde_json::Value::Null.into()),
                        ..SlotFields::default()
                    }),
                ),
                (
                    "dead".to_string(),
                    SlotRecord::from(SlotFields {
                        slot: RunSlot::from(crate::run::SlotParts {
                            phase: Phase::Dead,
                            failures: 6,
                            ..Default::default()
                        }),
                        state: Some(serde_json::json!("x").into()),
                        ..SlotFields::default()
                    }),
                ),
                ("idle".to_string(), SlotRecord::default()),
            ]
            .into_iter()
            .collect(),
            guard: Guard {
                window_start: Some(ts("2024-06-01T00:00:00Z")),
                runs: 21,
                parked_until: Some(ts("2024-06-01T01:00:00Z")),
            },
            deleted: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::changelog::test_support::{offer, round_trip, ts};
    use super::super::changelog::{decode_changelog, encode_value_into};
    use super::test_support::offer_record;
    use super::*;
    use crate::changelog::Value;
    use proptest::prelude::*;

    proptest! {
        /// An offer record reads back as the offer it was written from,
        /// whatever its body and states hold (as inputs make them:
        /// normalised): a shard keeps an idle offer as this record and
        /// reads it back at its next step, so anything lost here would be
        /// a change nobody made. (serde_json's default float parsing lost
        /// the last bit of some floats: `float_roundtrip` is on.)
        #[test]
        fn an_offer_record_reads_back_as_the_offer(
            body in json_value(),
            state in json_value(),
            version in any::<u64>(),
        ) {
            let mut body = match body {
                serde_json::Value::Object(map) => map,
                other => [("v".to_string(), other)].into_iter().collect(),
            };
            crate::offer::normalize_body(&mut body);
            let mut state = state;
            normalize(&mut state);
            let mut record = offer_record();
            record.version = version;
            record.body = body.into();
            record.stages = [(
                "s".to_string(),
                SlotRecord::from(SlotFields {
                    state: Some(state.into()),
                    ..SlotFields::default()
                }),
            )]
            .into_iter()
            .collect();
            let mut bytes = Vec::new();
            encode_value_into("o", Value::Offer(Box::new(record.clone())), &mut bytes);
            let mut reference = Vec::new();
            encode_offer_via_prost(&record, &mut reference);
            prop_assert_eq!(&bytes, &reference);
            prop_assert_eq!(decode_offer_record(&bytes).unwrap(), record);
        }
    }

    /// Any JSON value: numbers of every kind and magnitude, strings and
    /// keys of any characters (escapes included).
    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let number = prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
        ];
        crate::codec::tests::json_with(number.boxed(), ".{0,8}", ".{0,6}")
    }

    /// Every field set, a deleted offer at rest, and lengths of one to
    /// three bytes: written straight as the generated messages wrote them.
    #[test]
    fn an_offer_record_is_written_as_prost_writes_it() {
        let full = offer_record();
        assert!(offer_written_as_prost(&full));
        let mut deleted = full.clone();
        deleted.deleted = true;
        deleted.guard = Guard::default();
        deleted.stages = Default::default();
        assert!(offer_written_as_prost(&deleted));
        let mut large = full.clone();
        let mut body = (*large.body).clone();
        body.insert("text".into(), serde_json::json!("x".repeat(20_000)));
        large.body = body.into();
        let unnamed = SlotRecord::from(SlotFields {
            state: Some(serde_json::json!("y".repeat(300)).into()),
            source: Some(String::new()),
            ..SlotFields::default()
        });
        large.stages = (large.stages.iter())
            .map(|(name, slot)| (name.to_string(), slot.clone()))
            .chain([(String::new(), unnamed)])
            .collect();
        assert!(offer_written_as_prost(&large));
        let mut bytes = Vec::new();
        encode_value_into("o", Value::Offer(Box::new(large.clone())), &mut bytes);
        assert_eq!(decode_offer_record(&bytes).unwrap(), large);
    }

    #[test]
    fn offer_numbers_are_exact() {
        let Some(Value::Offer(o)) = round_trip(&offer("o1", Some(offer_record()))).value else {
            panic!()
        };
        assert_eq!(o.body["big"].as_u64(), Some(u64::MAX));
        assert_eq!(o.body["small"].as_i64(), Some(i64::MIN));
        assert_eq!(o.body["past_2_53"].as_u64(), Some(9_007_199_254_740_993));
        assert_eq!(
            o.stages.get("price").unwrap().state.as_ref().unwrap()["seen"].as_u64(),
            Some(9_007_199_254_740_993)
        );
        // An integral float (a hand-repaired record) is read back normalised.
        let mut record = offer_record();
        std::sync::Arc::make_mut(&mut record.body).insert("float".into(), serde_json::json!(2.0));
        let Some(Value::Offer(o)) = round_trip(&offer("o1", Some(record))).value else {
            panic!()
        };
        assert!(o.body["float"].is_i64());
    }

    #[test]
    fn bad_offer_values() {
        let reason = |key: &[u8], m: &dyn Fn() -> Vec<u8>| {
            decode_changelog(key, Some(&m())).unwrap_err().to_string()
        };
        let valid = || v1::OfferRecord {
            version: 1,
            body_json: b"{}".to_vec(),
            updated_at: Some(timestamp_to_proto(ts("2024-06-01T00:00:00Z"))),
            ..Default::default()
        };
        let bytes = |m: v1::OfferRecord| prost::Message::encode_to_vec(&m);
        assert_eq!(
            reason(b"offer/o1", &|| bytes(v1::OfferRecord {
                body_json: vec![],
                ..valid()
            })),
            "missing field `body_json`"
        );
        assert!(reason(b"offer/o1", &|| bytes(v1::OfferRecord {
            body_json: b"[1]".to_vec(),
            ..valid()
        }))
        .starts_with("field `body_json`: not JSON text of an object"));
        assert_eq!(
            reason(b"offer/o1", &|| bytes(v1::OfferRecord {
                updated_at: None,
                ..valid()
            })),
            "missing field `updated_at`"
        );
        let slot = |s: offer_record::SlotRecord| v1::OfferRecord {
            stages: [("price".to_string(), s)].into(),
            ..valid()
        };
        assert_eq!(
            reason(b"offer/o1", &|| bytes(slot(offer_record::SlotRecord {
                phase: 9,
                ..Default::default()
            }))),
            "field `stages.phase`: unknown stage phase 9"
        );
        assert_eq!(
            reason(b"offer/o1", &|| bytes(slot(offer_record::SlotRecord {
                lane: 2,
                ..Default::default()
            }))),
            "field `stages.lane`: unknown lane 2"
        );
        assert!(
            reason(b"offer/o1", &|| bytes(slot(offer_record::SlotRecord {
                state_json: b"{".to_vec(),
                ..Default::default()
            })))
            .starts_with("field `stages.state_json`: not JSON text")
        );
        assert_eq!(
            reason(b"offer/o1", &|| bytes(slot(offer_record::SlotRecord {
                run: Some(v1::RunRecord::default()),
                ..Default::default()
            }))),
            "missing field `run.dispatched_at`"
        );
        assert_eq!(
            reason(b"rescan/price", &|| br#"{"checked":1}"#.to_vec()),
            "missing field `started_at`"
        );
        // JSON repairs work, with the body in base64 as proto3 JSON wants.
        let r = decode_changelog(
            b"offer/o1",
            Some(
                br#"{"version":"2","bodyJson":"eyJhIjoxfQ==","updatedAt":"2024-06-01T00:00:00Z"}"#,
            ),
        )
        .unwrap();
        let Some(Value::Offer(o)) = r.value else {
            panic!()
        };
        assert_eq!(*o.body, *serde_json::json!({"a": 1}).as_object().unwrap());
    }
}
