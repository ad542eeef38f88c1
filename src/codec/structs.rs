//! JSON values between serde_json (the core) and `google.protobuf.Struct` /
//! `Value`, and their canonical encoding.
//!
//! Decoding sorts object members by key and normalises numbers
//! ([`crate::offer::normalize`]): Struct numbers are doubles, so `100` sent
//! as protobuf arrives as `100.0` and must read as the `100` of a JSON
//! producer.
//!
//! Encoding does not go through pbjson-types: its `Struct` holds a
//! `HashMap`, whose order changes from one process to the next, so the same
//! body would give different bytes. [`encode_with_json`] writes such fields
//! itself instead: in protobuf with object members in key order, in JSON as
//! the core value has them.

use std::collections::BTreeMap;

use pbjson_types::value::Kind;
use prost::Message;
use serde::Serialize;
use serde_json::{Map, Number, Value as Json};

use super::error::DecodeError;
use super::put::{put_bytes, put_double, put_message, put_varint_field};
use super::wire::{encode_into, Format};
use crate::offer::{normalize, normalize_body, Body};

/// A body from a `Struct`, members sorted by key, numbers normalised.
pub(super) fn body_from_struct(
    field: &'static str,
    s: pbjson_types::Struct,
) -> Result<Body, DecodeError> {
    let mut body = object(field, s)?;
    normalize_body(&mut body);
    Ok(body)
}

/// An optional `Struct` field as an optional body ([`body_from_struct`]).
pub(super) fn optional_body(
    field: &'static str,
    s: Option<pbjson_types::Struct>,
) -> Result<Option<Body>, DecodeError> {
    s.map(|s| body_from_struct(field, s)).transpose()
}

/// A JSON value from a `Value`, numbers normalised; a `Value` without a kind
/// is `null`.
pub(super) fn json_from_value(
    field: &'static str,
    v: pbjson_types::Value,
) -> Result<Json, DecodeError> {
    let mut json = value(field, v)?;
    normalize(&mut json);
    Ok(json)
}

/// `body` as a `Struct`, for messages built in memory (tests, and the
/// repeated `next` of a result, which workers write and whose byte order
/// does not matter). Reactor's own outputs use [`encode_with_json`].
pub(super) fn struct_from_body(body: &Body) -> pbjson_types::Struct {
    body.iter()
        .map(|(k, v)| (k.clone(), value_from_json(v)))
        .collect()
}

/// `json` as a `Value`, for messages built in memory.
pub(super) fn value_from_json(json: &Json) -> pbjson_types::Value {
    let kind = match json {
        Json::Null => Kind::NullValue(0),
        Json::Bool(b) => Kind::BoolValue(*b),
        Json::Number(n) => Kind::NumberValue(as_f64(n)),
        Json::String(s) => Kind::StringValue(s.clone()),
        Json::Array(items) => Kind::ListValue(items.iter().map(value_from_json).collect()),
        Json::Object(map) => Kind::StructValue(struct_from_body(map)),
    };
    kind.into()
}

fn object(field: &'static str, s: pbjson_types::Struct) -> Result<Body, DecodeError> {
    let mut members: Vec<_> = s.fields.into_iter().collect();
    members.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    // Sized once: collected through `Result`, the map would grow by
    // doubling and keep the room (an offer keeps its body and states).
    let mut body = Body::with_capacity(members.len());
    for (k, v) in members {
        body.insert(k, value(field, v)?);
    }
    Ok(body)
}

/// The largest integer a double holds exactly (2^53).
const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

fn value(field: &'static str, v: pbjson_types::Value) -> Result<Json, DecodeError> {
    Ok(match v.kind {
        None | Some(Kind::NullValue(_)) => Json::Null,
        Some(Kind::BoolValue(b)) => Json::Bool(b),
        Some(Kind::NumberValue(f)) => {
            Json::Number(json_number(f).ok_or_else(|| DecodeError::InvalidField {
                field,
                reason: format!("{f} is not a JSON number"),
            })?)
        }
        Some(Kind::StringValue(s)) => Json::String(s),
        Some(Kind::ListValue(list)) => Json::Array(
            list.values
                .into_iter()
                .map(|v| value(field, v))
                .collect::<Result<_, _>>()?,
        ),
        Some(Kind::StructValue(s)) => Json::Object(object(field, s)?),
    })
}

/// A `Value`'s double as JSON: a whole number reads back as an integer
/// (`1`, not `1.0`), as protobuf's JSON mapping prints it, so a parameter
/// keeps the form it was given in whichever format it travelled; `None`
/// for one that is not finite.
pub(super) fn json_number(f: f64) -> Option<Number> {
    if f.fract() == 0.0 && f.abs() <= MAX_EXACT {
        #[allow(clippy::cast_possible_truncation)]
        return Some(Number::from(f as i64));
    }
    Number::from_f64(f)
}

/// A serde_json number as the double a `Value` holds (exact up to 2^53).
fn as_f64(n: &Number) -> f64 {
    // Always `Some` without serde_json's `arbitrary_precision`.
    n.as_f64().unwrap_or(f64::NAN)
}

/// A JSON field of a message, kept out of the generated message so that
/// [`encode_with_json`] writes it canonically.
#[derive(Debug, Clone, Copy)]
pub(super) enum JsonField<'a> {
    /// A `google.protobuf.Struct` field.
    Struct(&'a Body),
    /// A `google.protobuf.Value` field.
    Value(&'a Json),
    /// A `map<string, google.protobuf.Value>` field.
    ValueMap(&'a BTreeMap<String, crate::stage::State>),
}

/// Encodes `message` and then `fields` (field number, name in the schema,
/// value), which `message` must leave unset. Protobuf allows fields in any
/// order; JSON output has them after the message's other fields.
pub(super) fn encode_with_json<M>(
    message: &M,
    fields: &[(u32, &'static str, JsonField<'_>)],
    format: Format,
) -> Vec<u8>
where
    M: Message + Serialize,
{
    let mut buf = Vec::new();
    encode_with_json_into(message, fields, format, &mut buf);
    buf
}

/// [`encode_with_json`], appended to `buf`.
pub(super) fn encode_with_json_into<M>(
    message: &M,
    fields: &[(u32, &'static str, JsonField<'_>)],
    format: Format,
    buf: &mut Vec<u8>,
) where
    M: Message + Serialize,
{
    match format {
        Format::Protobuf => {
            encode_into(message, format, buf);
            put_fields(fields, buf);
        }
        Format::Json => serde_json::to_writer(buf, &json_with(message, fields))
            .expect("a JSON value with string keys serializes"),
    }
}

/// Encodes an outer message whose only field is `message` with `fields` (as
/// [`encode_with_json`]), as field `tag` named `name`: a oneof member such
/// as `Command.set_stage_state`.
pub(super) fn encode_nested_with_json<M>(
    tag: u32,
    name: &'static str,
    message: &M,
    fields: &[(u32, &'static str, JsonField<'_>)],
    format: Format,
) -> Vec<u8>
where
    M: Message + Serialize,
{
    match format {
        Format::Protobuf => {
            let mut buf = Vec::new();
            put_bytes(tag, &encode_with_json(message, fields, format), &mut buf);
            buf
        }
        Format::Json => {
            let outer: Map<String, Json> = [(name.to_string(), json_with(message, fields))]
                .into_iter()
                .collect();
            serde_json::to_vec(&outer).expect("a JSON value with string keys serializes")
        }
    }
}

/// `message` as a JSON object with `fields` added (see [`encode_with_json`]).
fn json_with<M: Serialize>(message: &M, fields: &[(u32, &'static str, JsonField<'_>)]) -> Json {
    let mut json = serde_json::to_value(message).expect(
        "messages built from core values serialize: their enums are known \
         and jiff timestamps are within the JSON timestamp range",
    );
    let object = json
        .as_object_mut()
        .expect("a message serializes as an object");
    for (_, name, field) in fields {
        let value = match field {
            JsonField::Struct(body) => Json::Object((*body).clone()),
            JsonField::Value(v) => (*v).clone(),
            JsonField::ValueMap(map) => Json::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), (**v).clone()))
                    .collect::<Map<_, _>>(),
            ),
        };
        object.insert((*name).to_string(), value);
    }
    json
}

/// Appends `fields` to a protobuf encoding, every value written straight
/// into `buf` and each message's length put in front once it is written
/// ([`put_message`]): nothing is measured first (measuring visited every
/// nested value once per level above it, and the body is written into
/// every offer state and stage run).
pub(super) fn put_fields(fields: &[(u32, &'static str, JsonField<'_>)], buf: &mut Vec<u8>) {
    for (tag, _, field) in fields {
        match field {
            JsonField::Struct(body) => put_message(*tag, buf, |buf| put_struct(body, buf)),
            JsonField::Value(v) => put_message(*tag, buf, |buf| put_value(v, buf)),
            // A map is a repeated entry message {key = 1, value = 2}; the
            // BTreeMap gives key order.
            JsonField::ValueMap(map) => {
                for (k, v) in *map {
                    put_message(*tag, buf, |buf| put_entry(k, v, buf));
                }
            }
        }
    }
}

/// A `Struct`'s fields: `map<string, Value> fields = 1`, in key order —
/// the order decoded bodies' members always have, so a body is written
/// as it is and only one in another order is sorted first.
fn put_struct(body: &Body, buf: &mut Vec<u8>) {
    if body.keys().is_sorted() {
        for (k, v) in body {
            put_message(1, buf, |buf| put_entry(k, v, buf));
        }
    } else {
        let mut members: Vec<_> = body.iter().collect();
        members.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (k, v) in members {
            put_message(1, buf, |buf| put_entry(k, v, buf));
        }
    }
}

/// A map entry `{string key = 1; Value value = 2}`; like prost, an empty key
/// is left out.
fn put_entry(key: &str, value: &Json, buf: &mut Vec<u8>) {
    if !key.is_empty() {
        put_bytes(1, key.as_bytes(), buf);
    }
    put_message(2, buf, |buf| put_value(value, buf));
}

/// A `Value`: a oneof, so the member is written even when it is zero.
fn put_value(json: &Json, buf: &mut Vec<u8>) {
    match json {
        Json::Null => put_varint_field(1, 0, buf),
        Json::Number(n) => put_double(2, as_f64(n), buf),
        Json::String(s) => put_bytes(3, s.as_bytes(), buf),
        Json::Bool(b) => put_varint_field(4, u64::from(*b), buf),
        Json::Object(map) => put_message(5, buf, |buf| put_struct(map, buf)),
        // ListValue: `repeated Value values = 1`.
        Json::Array(items) => put_message(6, buf, |buf| {
            for item in items {
                put_message(1, buf, |buf| put_value(item, buf));
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::v1;
    use serde_json::json;

    fn body(v: Json) -> Body {
        v.as_object().unwrap().clone()
    }

    fn sample() -> Body {
        body(json!({
            "z": 1, "a": "x", "m": null, "t": true, "f": 1.5, "e": {},
            "n": {"y": [1, 2.5, "s", null, false, {"k": -3}], "b": {"": 0}},
            "l": [],
        }))
    }

    #[test]
    fn whole_numbers_read_back_as_integers() {
        let number = |f: f64| pbjson_types::Value {
            kind: Some(Kind::NumberValue(f)),
        };
        assert_eq!(value("f", number(1.0)).unwrap(), json!(1));
        assert_eq!(value("f", number(-3.0)).unwrap(), json!(-3));
        assert_eq!(value("f", number(1.5)).unwrap(), json!(1.5));
        assert_eq!(value("f", number(1e300)).unwrap(), json!(1e300));
        assert!(value("f", number(f64::NAN)).is_err());
    }

    #[test]
    fn canonical_bytes_decode_as_prost_would() {
        let body = sample();
        let state = json!({"model": 3, "tags": ["a", "b"]});
        let states: BTreeMap<String, crate::stage::State> = [
            ("price".to_string(), json!(2).into()),
            ("a".to_string(), json!({"x": null}).into()),
        ]
        .into();
        let bytes = encode_with_json(
            &v1::OfferState {
                offer_id: "o1".into(),
                ..Default::default()
            },
            &[
                (3, "body", JsonField::Struct(&body)),
                (6, "states", JsonField::ValueMap(&states)),
            ],
            Format::Protobuf,
        );
        let m = v1::OfferState::decode(bytes.as_slice()).unwrap();
        assert_eq!(m.offer_id, "o1");
        assert_eq!(m.body, Some(struct_from_body(&body)));
        let expected: BTreeMap<_, _> = states
            .iter()
            .map(|(k, v)| (k.clone(), value_from_json(v)))
            .collect();
        assert_eq!(m.states, expected);
        assert_eq!(body_from_struct("body", m.body.unwrap()).unwrap(), body);

        let bytes = encode_with_json(
            &v1::RunCommand::default(),
            &[(24, "state", JsonField::Value(&state))],
            Format::Protobuf,
        );
        let m = v1::RunCommand::decode(bytes.as_slice()).unwrap();
        assert_eq!(json_from_value("state", m.state.unwrap()).unwrap(), state);
    }

    /// Any JSON value: nested objects and lists of every kind, with
    /// numbers a protobuf double holds exactly.
    fn any_json() -> impl proptest::strategy::Strategy<Value = Json> {
        use proptest::prelude::*;
        let number = prop_oneof![
            any::<i32>().prop_map(|n| json!(n)),
            (-1e6f64..1e6).prop_map(|f| json!(f)),
        ];
        crate::codec::tests::json_with(number.boxed(), "[a-zé ]{0,300}", "[a-z]{0,4}")
    }

    /// The writer before [`put_fields`] wrote in place: every length
    /// measured first, then the bytes (the reference the in-place writer is
    /// tested against; its own bytes are tested against prost's decoding).
    mod measured {
        use super::super::*;
        use crate::codec::put::{delimited_len, put_len};
        use prost::encoding::{encode_key, encode_varint, key_len, WireType};

        pub fn put_fields(fields: &[(u32, &'static str, JsonField<'_>)], buf: &mut Vec<u8>) {
            buf.reserve(fields.iter().map(field_len).sum());
            for (tag, _, field) in fields {
                match field {
                    JsonField::Struct(body) => {
                        put_len(*tag, struct_len(body), buf);
                        put_struct(body, buf);
                    }
                    JsonField::Value(v) => {
                        put_len(*tag, value_len(v), buf);
                        put_value(v, buf);
                    }
                    JsonField::ValueMap(map) => {
                        for (k, v) in *map {
                            put_len(*tag, entry_len(k, v), buf);
                            put_entry(k, v, buf);
                        }
                    }
                }
            }
        }

        pub fn field_len((tag, _, field): &(u32, &'static str, JsonField<'_>)) -> usize {
            match field {
                JsonField::Struct(body) => delimited_len(*tag, struct_len(body)),
                JsonField::Value(v) => delimited_len(*tag, value_len(v)),
                JsonField::ValueMap(map) => map
                    .iter()
                    .map(|(k, v)| delimited_len(*tag, entry_len(k, v)))
                    .sum(),
            }
        }

        fn put_struct(body: &Body, buf: &mut Vec<u8>) {
            let mut members: Vec<_> = body.iter().collect();
            members.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (k, v) in members {
                put_len(1, entry_len(k, v), buf);
                put_entry(k, v, buf);
            }
        }

        fn struct_len(body: &Body) -> usize {
            body.iter()
                .map(|(k, v)| delimited_len(1, entry_len(k, v)))
                .sum()
        }

        fn put_entry(key: &str, value: &Json, buf: &mut Vec<u8>) {
            if !key.is_empty() {
                put_bytes(1, key.as_bytes(), buf);
            }
            put_len(2, value_len(value), buf);
            put_value(value, buf);
        }

        fn entry_len(key: &str, value: &Json) -> usize {
            let key = if key.is_empty() {
                0
            } else {
                delimited_len(1, key.len())
            };
            key + delimited_len(2, value_len(value))
        }

        pub fn put_value(json: &Json, buf: &mut Vec<u8>) {
            match json {
                Json::Null => {
                    encode_key(1, WireType::Varint, buf);
                    encode_varint(0, buf);
                }
                Json::Number(n) => {
                    encode_key(2, WireType::SixtyFourBit, buf);
                    buf.extend_from_slice(&as_f64(n).to_le_bytes());
                }
                Json::String(s) => put_bytes(3, s.as_bytes(), buf),
                Json::Bool(b) => {
                    encode_key(4, WireType::Varint, buf);
                    encode_varint(u64::from(*b), buf);
                }
                Json::Object(map) => {
                    put_len(5, struct_len(map), buf);
                    put_struct(map, buf);
                }
                Json::Array(items) => {
                    put_len(6, list_len(items), buf);
                    for item in items {
                        put_len(1, value_len(item), buf);
                        put_value(item, buf);
                    }
                }
            }
        }

        pub fn value_len(json: &Json) -> usize {
            match json {
                Json::Null | Json::Bool(_) => key_len(1) + 1,
                Json::Number(_) => key_len(2) + 8,
                Json::String(s) => delimited_len(3, s.len()),
                Json::Object(map) => delimited_len(5, struct_len(map)),
                Json::Array(items) => delimited_len(6, list_len(items)),
            }
        }

        fn list_len(items: &[Json]) -> usize {
            items
                .iter()
                .map(|item| delimited_len(1, value_len(item)))
                .sum()
        }
    }

    proptest::proptest! {
        /// Written in place, a value is byte for byte what the measured
        /// writer wrote (its lengths agreeing with its bytes), and decodes
        /// as prost reads it; the same for a field of it, a body, a map.
        #[test]
        fn values_are_written_as_measured_and_round_trip(value in any_json()) {
            let mut buf = Vec::new();
            put_value(&value, &mut buf);
            let mut reference = Vec::new();
            measured::put_value(&value, &mut reference);
            proptest::prop_assert_eq!(&buf, &reference);
            proptest::prop_assert_eq!(reference.len(), measured::value_len(&value));
            let decoded = pbjson_types::Value::decode(buf.as_slice()).unwrap();
            let mut expected = value.clone();
            normalize(&mut expected);
            proptest::prop_assert_eq!(json_from_value("v", decoded).unwrap(), expected);
            let body: Body = match &value {
                Json::Object(map) => map.clone(),
                other => [("v".to_string(), other.clone())].into_iter().collect(),
            };
            let states: BTreeMap<String, crate::stage::State> =
                [("a".to_string(), value.clone().into()), ("b".to_string(), Json::Null.into())].into();
            let fields = [
                (3, "body", JsonField::Struct(&body)),
                (24, "state", JsonField::Value(&value)),
                (6, "states", JsonField::ValueMap(&states)),
            ];
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            put_fields(&fields, &mut ours);
            measured::put_fields(&fields, &mut theirs);
            proptest::prop_assert_eq!(&ours, &theirs);
            let len: usize = fields.iter().map(measured::field_len).sum();
            proptest::prop_assert_eq!(theirs.len(), len);
        }
    }

    #[test]
    fn same_value_same_bytes() {
        // Insertion order differs; the bytes do not.
        let a = sample();
        let mut b = Body::new();
        for (k, v) in a.iter().rev() {
            b.insert(k.clone(), v.clone());
        }
        let encode = |body: &Body| {
            encode_with_json(
                &v1::OfferState::default(),
                &[(3, "body", JsonField::Struct(body))],
                Format::Protobuf,
            )
        };
        assert_eq!(encode(&a), encode(&b));
        // prost writes a one-member Struct the same way.
        let one = body(json!({"price": 100}));
        let prost = v1::OfferState {
            body: Some(struct_from_body(&one)),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(encode(&one), prost);
    }

    #[test]
    fn json_output_keeps_the_core_value() {
        let body = sample();
        let bytes = encode_with_json(
            &v1::OfferState {
                offer_id: "o1".into(),
                ..Default::default()
            },
            &[(3, "body", JsonField::Struct(&body))],
            Format::Json,
        );
        let json: Json = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            json,
            json!({"offer_id": "o1", "body": Json::Object(body.clone())})
        );
        // And it reads back through pbjson.
        let m: v1::OfferState = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(body_from_struct("body", m.body.unwrap()).unwrap(), body);
    }

    #[test]
    fn decoding_normalises_and_sorts() {
        let s = struct_from_body(&body(
            json!({"b": 100.0, "a": [2.0, {"c": -1.0}], "d": 0.5}),
        ));
        let decoded = body_from_struct("body", s).unwrap();
        assert_eq!(
            decoded,
            body(json!({"a": [2, {"c": -1}], "b": 100, "d": 0.5}))
        );
        assert!(decoded["b"].is_i64());
        assert_eq!(decoded.keys().collect::<Vec<_>>(), ["a", "b", "d"]);
        assert_eq!(
            json_from_value("state", pbjson_types::Value { kind: None }).unwrap(),
            Json::Null
        );
        let nan = pbjson_types::Struct::from_iter([("x".to_string(), f64::NAN.into())]);
        assert_eq!(
            body_from_struct("update", nan).unwrap_err().to_string(),
            "field `update`: NaN is not a JSON number"
        );
    }
}
