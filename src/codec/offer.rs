//! Offers: `OfferChange` from `offer.changes` and `OfferState`, the
//! post-commit events on `offer.state`.

use jiff::Timestamp;

use super::error::{non_empty, DecodeError};
use super::limits::check_name;
use super::put::{put_bool, put_bytes, put_str, put_ts, put_uint};
use super::structs::{
    body_from_struct, encode_with_json, encode_with_json_into, json_from_value, optional_body,
    put_fields, JsonField,
};
use super::time::{required_ts, timestamp_to_proto};
use super::validate;
use super::wire::{decode, Format};
use crate::action::OfferState;
use crate::offer::{Body, Change, OfferChange};
use crate::proto::v1;

/// Decodes a record of `offer.changes` (protobuf or JSON). A record without
/// a value (tombstone) deletes the offer named by its key. The offer id is
/// the message's `offer_id`, or the key when that is empty; when both are
/// set they must agree, since the key decides the partition that owns the
/// offer. Numbers are normalised ([`crate::offer::normalize`]); the change
/// is then checked by [`validate::offer_change`].
pub fn decode_offer_change(
    key: Option<&[u8]>,
    payload: Option<&[u8]>,
) -> Result<OfferChange, DecodeError> {
    let key = key.filter(|k| !k.is_empty());
    let Some(payload) = payload else {
        let offer_id = key_text(key)?.ok_or(DecodeError::InvalidField {
            field: "key",
            reason: "a tombstone deletes the offer named by its key, and this one has none"
                .to_string(),
        })?;
        return validate::offer_change(OfferChange {
            offer_id,
            change: Change::Deleted,
            source: None,
        });
    };
    let fields = match super::input_plain::plain_offer_change(payload) {
        Some(fields) => fields,
        None => generated_change_fields(payload)?,
    };
    let offer_id = if fields.offer_id.is_empty() {
        key_text(key)?.ok_or(DecodeError::MissingField("offer_id"))?
    } else {
        if let Some(key) = key.filter(|k| *k != fields.offer_id.as_bytes()) {
            check_name("offer_id", &fields.offer_id)?;
            check_name("key", &String::from_utf8_lossy(key))?;
            return Err(DecodeError::InvalidField {
                field: "offer_id",
                reason: format!(
                    "`{}` differs from the record key `{}`; key the record by the offer id",
                    fields.offer_id,
                    String::from_utf8_lossy(key)
                ),
            });
        }
        fields.offer_id
    };
    let change = match (fields.body, fields.patch, fields.deleted) {
        (Some(body), None, false) => Change::Body(body),
        (None, Some(patch), false) => Change::Patch(patch),
        (None, None, true) => Change::Deleted,
        _ => return Err(DecodeError::ExactlyOne("`body`, `patch` and `deleted`")),
    };
    validate::offer_change(OfferChange {
        offer_id,
        change,
        source: Some(fields.source).filter(|s| !s.is_empty()),
    })
}

/// An `OfferChange`'s fields by the generated decoder: any form of the
/// message.
pub(super) fn generated_change_fields(payload: &[u8]) -> Result<ChangeFields, DecodeError> {
    let m: v1::OfferChange = decode(payload)?;
    Ok(ChangeFields {
        body: optional_body("body", m.body)?,
        patch: optional_body("patch", m.patch)?,
        offer_id: m.offer_id,
        deleted: m.deleted,
        source: m.source,
    })
}

/// An `OfferChange`'s fields as read, JSON converted: what both readers
/// (the generated decoder and [`super::input_plain::plain_offer_change`])
/// give before the rules of [`decode_offer_change`].
#[derive(Debug, Default)]
pub(super) struct ChangeFields {
    pub offer_id: String,
    pub body: Option<Body>,
    pub patch: Option<Body>,
    pub deleted: bool,
    pub source: String,
}

/// The record key as an offer id.
fn key_text(key: Option<&[u8]>) -> Result<Option<String>, DecodeError> {
    key.map(|k| {
        String::from_utf8(k.to_vec()).map_err(|_| DecodeError::InvalidField {
            field: "key",
            reason: "not UTF-8".to_string(),
        })
    })
    .transpose()
}

/// Encodes an `OfferChange` (value only; the key is the offer id), for the
/// CLI, demo producers and tests. `Change::Deleted` is encoded as a message
/// with `deleted` set; a producer may send a tombstone instead.
pub fn encode_offer_change(change: &OfferChange, format: Format) -> Vec<u8> {
    let m = v1::OfferChange {
        offer_id: change.offer_id.clone(),
        deleted: change.change == Change::Deleted,
        source: change.source.clone().unwrap_or_default(),
        ..Default::default()
    };
    let fields = match &change.change {
        Change::Body(body) => vec![(2, "body", JsonField::Struct(body))],
        Change::Patch(patch) => vec![(3, "patch", JsonField::Struct(patch))],
        Change::Deleted => vec![],
    };
    encode_with_json(&m, &fields, format)
}

/// Encodes an `OfferState` committed at `at`. The body is always written
/// (`{}` when empty), so a consumer never has to tell absent from empty.
pub fn encode_offer_state(state: &OfferState, at: Timestamp, format: Format) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_offer_state_into(state, at, format, &mut buf);
    buf
}

/// [`encode_offer_state`], appended to `buf`.
pub fn encode_offer_state_into(
    state: &OfferState,
    at: Timestamp,
    format: Format,
    buf: &mut Vec<u8>,
) {
    let fields = offer_state_json_fields(state);
    match format {
        // Written straight from the state, in the order prost writes the
        // message (its fields by tag, then the body and states): an offer
        // state is written at every step of an offer, and copying its id,
        // cause and changed fields into the generated message came first.
        Format::Protobuf => {
            put_str(1, &state.offer, buf);
            put_uint(2, state.version, buf);
            put_str(4, &state.cause, buf);
            for field in &state.changed_fields {
                put_bytes(5, field.as_bytes(), buf);
            }
            put_bool(7, state.deleted, buf);
            put_ts(8, at, buf);
            put_fields(&fields, buf);
        }
        Format::Json => {
            encode_with_json_into(&offer_state_message(state, at), &fields, format, buf)
        }
    }
}

/// An offer state's body and states: JSON values, written after the
/// generated message.
fn offer_state_json_fields(state: &OfferState) -> [(u32, &'static str, JsonField<'_>); 2] {
    [
        (3, "body", JsonField::Struct(&state.body)),
        (6, "states", JsonField::ValueMap(&state.states)),
    ]
}

/// An offer state as the generated message, without its body and states
/// (for JSON, and the reference the straight writing is tested against).
fn offer_state_message(state: &OfferState, at: Timestamp) -> v1::OfferState {
    v1::OfferState {
        offer_id: state.offer.clone(),
        version: state.version,
        cause: state.cause.clone(),
        changed_fields: state.changed_fields.clone(),
        deleted: state.deleted,
        committed_at: Some(timestamp_to_proto(at)),
        ..Default::default()
    }
}

/// Decodes an `OfferState` and its commit time (protobuf or JSON), for
/// consumers and tests. Numbers are normalised.
pub fn decode_offer_state(bytes: &[u8]) -> Result<(OfferState, Timestamp), DecodeError> {
    let m: v1::OfferState = decode(bytes)?;
    let at = required_ts("committed_at", m.committed_at.as_ref())?;
    let body = match m.body {
        Some(body) => body_from_struct("body", body)?,
        None => Body::new(),
    };
    let states = m
        .states
        .into_iter()
        .map(|(stage, state)| Ok((stage, json_from_value("states", state)?.into())))
        .collect::<Result<_, DecodeError>>()?;
    let state = OfferState {
        offer: non_empty("offer_id", m.offer_id)?,
        version: m.version,
        body: body.into(),
        cause: m.cause,
        changed_fields: m.changed_fields,
        states,
        deleted: m.deleted,
    };
    Ok((state, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::structs::{struct_from_body, value_from_json};
    use prost::Message;
    use serde_json::json;

    proptest::proptest! {
        /// Written straight from the state, an offer state is byte for
        /// byte what prost writes for the message, body and states after it.
        #[test]
        fn an_offer_state_is_written_as_prost_writes_it(
            offer in "[a-z0-9/]{0,8}",
            version in proptest::prelude::any::<u64>(),
            cause in "[a-z:]{0,10}",
            changed in proptest::collection::vec("[a-z]{0,6}", 0..4),
            deleted in proptest::prelude::any::<bool>(),
            seen in proptest::collection::btree_map("[a-z]{0,4}", -1000i64..1000, 0..4),
            long in 0usize..300,
            at in -100_000i64..100_000_000_000,
        ) {
            let state = OfferState {
                offer,
                version,
                body: body(json!({"price": 100, "name": "x".repeat(long)})).into(),
                cause,
                changed_fields: changed,
                states: seen.into_iter().map(|(k, n)| (k, json!({"seen": n}).into())).collect(),
                deleted,
            };
            let at = Timestamp::from_millisecond(at).unwrap();
            let ours = encode_offer_state(&state, at, Format::Protobuf);
            let mut theirs = Vec::new();
            encode_with_json_into(
                &offer_state_message(&state, at),
                &offer_state_json_fields(&state),
                Format::Protobuf,
                &mut theirs,
            );
            proptest::prop_assert_eq!(ours, theirs);
        }
    }

    fn body(v: serde_json::Value) -> Body {
        v.as_object().unwrap().clone()
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn changes() -> Vec<OfferChange> {
        vec![
            OfferChange {
                offer_id: "o1".into(),
                change: Change::Body(body(json!({
                    "status": "active", "price": 100, "ratio": 0.25,
                    "tags": ["a", "b"], "seller": {"id": 7, "name": null},
                }))),
                source: Some("catalog".into()),
            },
            OfferChange {
                offer_id: "o1".into(),
                change: Change::Body(Body::new()),
                source: None,
            },
            OfferChange {
                offer_id: "o/2".into(),
                change: Change::Patch(body(json!({"price": 120, "promo": null}))),
                source: None,
            },
            OfferChange {
                offer_id: "o1".into(),
                change: Change::Deleted,
                source: Some("catalog".into()),
            },
        ]
    }

    #[test]
    fn changes_round_trip_in_both_formats() {
        for format in [Format::Protobuf, Format::Json] {
            for c in changes() {
                let bytes = encode_offer_change(&c, format);
                let key = c.offer_id.as_bytes();
                assert_eq!(
                    decode_offer_change(Some(key), Some(&bytes)).unwrap(),
                    c,
                    "{format:?}"
                );
                assert_eq!(decode_offer_change(None, Some(&bytes)).unwrap(), c);
            }
        }
    }

    #[test]
    fn change_json_shapes() {
        let json = |c: &OfferChange| -> serde_json::Value {
            serde_json::from_slice(&encode_offer_change(c, Format::Json)).unwrap()
        };
        let all = changes();
        assert_eq!(
            json(&all[2]),
            json!({"offer_id": "o/2", "patch": {"price": 120, "promo": null}})
        );
        assert_eq!(
            json(&all[3]),
            json!({"offer_id": "o1", "deleted": true, "source": "catalog"})
        );
        assert_eq!(json(&all[1]), json!({"offer_id": "o1", "body": {}}));
    }

    #[test]
    fn tombstone_deletes_the_keyed_offer() {
        let c = decode_offer_change(Some(b"o9"), None).unwrap();
        assert_eq!(
            c,
            OfferChange {
                offer_id: "o9".into(),
                change: Change::Deleted,
                source: None,
            }
        );
        for key in [None, Some(&b""[..])] {
            assert_eq!(
                decode_offer_change(key, None).unwrap_err().to_string(),
                "field `key`: a tombstone deletes the offer named by its key, and this one has none"
            );
        }
        assert_eq!(
            decode_offer_change(Some(b"\xff"), None)
                .unwrap_err()
                .to_string(),
            "field `key`: not UTF-8"
        );
    }

    #[test]
    fn offer_id_falls_back_to_the_key() {
        let c = decode_offer_change(Some(b"o5"), Some(br#"{"patch":{"a":1}}"#)).unwrap();
        assert_eq!(c.offer_id, "o5");
        assert_eq!(c.change, Change::Patch(body(json!({"a": 1}))));
        let reason = |key: Option<&[u8]>, json: &str| {
            decode_offer_change(key, Some(json.as_bytes()))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            reason(None, r#"{"patch":{"a":1}}"#),
            "missing field `offer_id`"
        );
        assert_eq!(
            reason(Some(b"o6"), r#"{"offer_id":"o5","deleted":true}"#),
            "field `offer_id`: `o5` differs from the record key `o6`; key the record by the offer id"
        );
    }

    #[test]
    fn exactly_one_change() {
        let reason = |json: &str| {
            decode_offer_change(Some(b"o1"), Some(json.as_bytes()))
                .unwrap_err()
                .to_string()
        };
        let expected = "exactly one of `body`, `patch` and `deleted` must be set";
        for json in [
            r#"{"offer_id":"o1"}"#,
            r#"{"offer_id":"o1","deleted":false}"#,
            r#"{"offer_id":"o1","body":null}"#,
            r#"{"body":{"a":1},"patch":{"a":2}}"#,
            r#"{"body":{"a":1},"deleted":true}"#,
            r#"{"patch":{},"deleted":true}"#,
        ] {
            assert_eq!(reason(json), expected, "{json}");
        }
        assert!(reason(r#"{"body":[1]}"#).starts_with("json: "));
        assert!(reason(r#"{"body":{"a":1},"bdy":{}}"#).starts_with("json: unknown field `bdy`"));
    }

    #[test]
    fn protobuf_doubles_become_integers() {
        // A protobuf producer can only send doubles.
        let m = v1::OfferChange {
            offer_id: "o1".into(),
            body: Some(struct_from_body(&body(json!({
                "price": 100.0, "ratio": 0.5, "nested": {"n": [3.0, -2.0]},
            })))),
            ..Default::default()
        };
        let c = decode_offer_change(None, Some(&m.encode_to_vec())).unwrap();
        let Change::Body(b) = c.change else {
            panic!("{c:?}")
        };
        assert!(b["price"].is_i64(), "{b:?}");
        assert_eq!(
            serde_json::Value::Object(b),
            json!({"price": 100, "ratio": 0.5, "nested": {"n": [3, -2]}})
        );
        // JSON `100.0` too.
        let c =
            decode_offer_change(None, Some(br#"{"offer_id":"o1","patch":{"p":100.0}}"#)).unwrap();
        assert_eq!(c.change, Change::Patch(body(json!({"p": 100}))));
        let Change::Patch(p) = c.change else { panic!() };
        assert!(p["p"].is_i64());
    }

    fn state() -> OfferState {
        OfferState {
            offer: "o1".into(),
            version: 4,
            body: body(json!({"status": "active", "price": 100, "price_predicted": 118.5})).into(),
            cause: "stage:price".into(),
            changed_fields: vec!["price_predicted".into()],
            states: [
                ("price".to_string(), json!({"model": 3}).into()),
                ("expire".to_string(), json!("2024-07-01").into()),
                ("n".to_string(), json!([1, true]).into()),
            ]
            .into(),
            deleted: false,
        }
    }

    #[test]
    fn states_round_trip_in_both_formats() {
        let at = ts("2024-06-01T00:00:00.5Z");
        let deleted = OfferState {
            offer: "o1".into(),
            version: u64::MAX,
            body: Body::new().into(),
            cause: "external".into(),
            changed_fields: vec!["price".into(), "status".into()],
            states: Default::default(),
            deleted: true,
        };
        for format in [Format::Protobuf, Format::Json] {
            for s in [state(), deleted.clone()] {
                let bytes = encode_offer_state(&s, at, format);
                assert_eq!(decode_offer_state(&bytes).unwrap(), (s, at), "{format:?}");
            }
        }
    }

    #[test]
    fn state_json_output() {
        let bytes = encode_offer_state(&state(), ts("2024-06-01T00:00:00Z"), Format::Json);
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            json,
            json!({
                "offer_id": "o1",
                "version": "4",
                "body": {"status": "active", "price": 100, "price_predicted": 118.5},
                "cause": "stage:price",
                "changed_fields": ["price_predicted"],
                "states": {"price": {"model": 3}, "expire": "2024-07-01", "n": [1, true]},
                "committed_at": "2024-06-01T00:00:00+00:00",
            })
        );
    }

    #[test]
    fn state_protobuf_is_deterministic_and_standard() {
        let at = ts("2024-06-01T00:00:00Z");
        let a = encode_offer_state(&state(), at, Format::Protobuf);
        assert_eq!(a, encode_offer_state(&state(), at, Format::Protobuf));
        let m = v1::OfferState::decode(a.as_slice()).unwrap();
        assert_eq!(m.body, Some(struct_from_body(&state().body)));
        assert_eq!(m.states["price"], value_from_json(&json!({"model": 3})));
    }

    #[test]
    fn invalid_states() {
        let reason = |json: &str| decode_offer_state(json.as_bytes()).unwrap_err().to_string();
        assert_eq!(
            reason(r#"{"offer_id":"o1"}"#),
            "missing field `committed_at`"
        );
        assert_eq!(
            reason(r#"{"committed_at":"2024-06-01T00:00:00Z"}"#),
            "missing field `offer_id`"
        );
    }
}
