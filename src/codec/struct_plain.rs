//! `google.protobuf.Struct` and `Value` read in place ([`super::plain`])
//! into the core's JSON: what the generated decoder reads into pbjson's
//! `Struct` (a `HashMap` per object), which [`super::structs`] then sorts
//! and converts, was most of the work of decoding a stage worker's result.
//!
//! The reading is the generated decoder's followed by
//! [`super::structs::body_from_struct`]: members in key order, the last of
//! a repeated key kept, a map entry without a key or value read as `""` or
//! `null`, whole numbers up to 2^53 as integers. Anything else — a field
//! of another number or wire type, a oneof member given twice, text that
//! is not UTF-8, a number that is not finite, nesting deeper than the
//! core's bound — reads as `None`, and the caller hands the record to the
//! generated decoder, which reads or refuses it.

use serde_json::{Map, Value as Json};

use super::limits::MAX_JSON_DEPTH;
use super::plain::{any_fields, once, text, Wire};
use super::structs::json_number;
use crate::offer::Body;

/// A `Struct`'s bytes as a body, members in key order.
pub(super) fn plain_struct(bytes: &[u8]) -> Option<Body> {
    object(bytes, 0)
}

/// A `Value`'s bytes as JSON (`null` for a value without a kind).
pub(super) fn plain_value(bytes: &[u8]) -> Option<Json> {
    value(bytes, 0)
}

/// Calls `each` with every element of `bytes`, a message whose only field
/// is `repeated … = 1` of messages (a `Struct`'s entries, a `ListValue`'s
/// values).
fn repeated<'a>(bytes: &'a [u8], mut each: impl FnMut(&'a [u8]) -> Option<()>) -> Option<()> {
    any_fields(bytes, |number, field| match (number, field) {
        (1, Wire::Bytes(element)) => each(element),
        _ => None,
    })
}

/// `Struct { map<string, Value> fields = 1; }` at nesting `depth`.
fn object(bytes: &[u8], depth: usize) -> Option<Map<String, Json>> {
    if depth > MAX_JSON_DEPTH {
        return None;
    }
    let mut body = Map::new();
    repeated(bytes, |entry| {
        // A repeated key keeps its last value, as a map does.
        let (key, json) = member(entry, depth)?;
        body.insert(key, json);
        Some(())
    })?;
    // Written in key order by Reactor and its libraries; any other order
    // is sorted.
    if !body.keys().is_sorted() {
        body.sort_keys();
    }
    Some(body)
}

/// A map entry `{ string key = 1; Value value = 2; }`.
fn member(bytes: &[u8], depth: usize) -> Option<(String, Json)> {
    let (mut key, mut val) = (None, None);
    any_fields(bytes, |number, field| match (number, field) {
        (1, Wire::Bytes(k)) => once(&mut key, text(k)?),
        (2, Wire::Bytes(v)) => once(&mut val, value(v, depth)?),
        _ => None,
    })?;
    Some((
        key.unwrap_or_default().to_owned(),
        val.unwrap_or(Json::Null),
    ))
}

/// `Value { oneof kind { … } }` at nesting `depth`.
fn value(bytes: &[u8], depth: usize) -> Option<Json> {
    let mut kind = None;
    any_fields(bytes, |number, field| {
        let json = match (number, field) {
            (1, Wire::Varint(_)) => Json::Null,
            (2, Wire::Fixed64(bits)) => Json::Number(json_number(f64::from_bits(bits))?),
            (3, Wire::Bytes(s)) => Json::String(text(s)?.to_owned()),
            (4, Wire::Varint(b)) => Json::Bool(b != 0),
            (5, Wire::Bytes(s)) => Json::Object(object(s, depth + 1)?),
            (6, Wire::Bytes(list)) => Json::Array(items(list, depth + 1)?),
            _ => return None,
        };
        // A oneof member given twice is left to the generated decoder.
        once(&mut kind, json)
    })?;
    Some(kind.unwrap_or(Json::Null))
}

/// `ListValue { repeated Value values = 1; }` at nesting `depth`.
fn items(bytes: &[u8], depth: usize) -> Option<Vec<Json>> {
    if depth > MAX_JSON_DEPTH {
        return None;
    }
    let mut items = Vec::new();
    repeated(bytes, |item| {
        items.push(value(item, depth)?);
        Some(())
    })?;
    Some(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbjson_types::value::Kind;
    use proptest::prelude::*;
    use prost::Message;

    // Compared as text: a map compares equal whatever its members' order,
    // which is part of what is read.

    /// What the generated decoder and the conversion read from `bytes`.
    fn generated_struct(bytes: &[u8]) -> Option<String> {
        let s = pbjson_types::Struct::decode(bytes).ok()?;
        let body = super::super::structs::body_from_struct("test", s).ok()?;
        serde_json::to_string(&body).ok()
    }

    fn generated_value(bytes: &[u8]) -> Option<String> {
        let v = pbjson_types::Value::decode(bytes).ok()?;
        let json = super::super::structs::json_from_value("test", v).ok()?;
        serde_json::to_string(&json).ok()
    }

    fn ours_struct(bytes: &[u8]) -> Option<String> {
        plain_struct(bytes).and_then(|b| serde_json::to_string(&b).ok())
    }

    fn ours_value(bytes: &[u8]) -> Option<String> {
        plain_value(bytes).and_then(|v| serde_json::to_string(&v).ok())
    }

    fn kind(k: Kind) -> pbjson_types::Value {
        pbjson_types::Value { kind: Some(k) }
    }

    fn any_value() -> impl Strategy<Value = pbjson_types::Value> {
        let leaf = prop_oneof![
            Just(kind(Kind::NullValue(0))),
            any::<bool>().prop_map(|b| kind(Kind::BoolValue(b))),
            prop_oneof![
                (-1000i64..1000).prop_map(|n| n as f64),
                any::<f64>(),
                Just(9_007_199_254_740_993.0),
                Just(-0.0),
            ]
            .prop_map(|f| kind(Kind::NumberValue(f))),
            "[a-zé]{0,6}".prop_map(|s| kind(Kind::StringValue(s))),
            Just(pbjson_types::Value { kind: None }),
        ];
        leaf.prop_recursive(4, 24, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5)
                    .prop_map(|values| kind(Kind::ListValue(pbjson_types::ListValue { values }))),
                prop::collection::hash_map("[a-c]{0,2}", inner, 0..5)
                    .prop_map(|fields| kind(Kind::StructValue(pbjson_types::Struct { fields }))),
            ]
        })
    }

    proptest! {
        /// Read in place or by the generated decoder, a `Value` (and so a
        /// `Struct`) reads the same, whatever order prost wrote its map in.
        #[test]
        fn reads_as_the_generated_decoder_reads(v in any_value()) {
            let bytes = v.encode_to_vec();
            // A number that is not finite reads as `None` both ways.
            prop_assert_eq!(ours_value(&bytes), generated_value(&bytes));
            if let Some(Kind::StructValue(s)) = &v.kind {
                let bytes = s.encode_to_vec();
                prop_assert_eq!(ours_struct(&bytes), generated_struct(&bytes));
            }
        }

        /// Bytes cut or changed anywhere: either both read the same, or
        /// this reader leaves them to the generated decoder.
        #[test]
        fn broken_bytes_are_left_to_the_generated_decoder(
            v in any_value(),
            cut in any::<prop::sample::Index>(),
            flip in any::<(prop::sample::Index, u8)>(),
        ) {
            let mut bytes = v.encode_to_vec();
            if !bytes.is_empty() {
                let at = flip.0.index(bytes.len());
                bytes[at] ^= flip.1;
                bytes.truncate(cut.index(bytes.len() + 1));
            }
            if let Some(ours) = ours_value(&bytes) {
                prop_assert_eq!(Some(ours), generated_value(&bytes));
            }
        }
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value_and_members_come_in_key_order() {
        let mut bytes = Vec::new();
        for (k, n) in [("b", 1.0), ("a", 2.0), ("b", 3.0)] {
            let fields = [(k.to_string(), kind(Kind::NumberValue(n)))]
                .into_iter()
                .collect();
            bytes.extend(pbjson_types::Struct { fields }.encode_to_vec());
        }
        assert_eq!(ours_struct(&bytes).as_deref(), Some(r#"{"a":2,"b":3}"#));
        assert_eq!(ours_struct(&bytes), generated_struct(&bytes));
    }

    #[test]
    fn nesting_past_the_bound_is_left_to_the_generated_decoder() {
        let mut v = kind(Kind::NullValue(0));
        for _ in 0..=MAX_JSON_DEPTH + 1 {
            v = kind(Kind::ListValue(pbjson_types::ListValue { values: vec![v] }));
        }
        assert_eq!(plain_value(&v.encode_to_vec()), None);
        assert!(generated_value(&v.encode_to_vec()).is_some());
    }
}
