//! A JSON value a shard keeps per offer (its body, each stage's state):
//! shared while anything works on the offer, and as its compact JSON text
//! once nothing does.
//!
//! As `serde_json` values these dwarfed what they hold: a body of eight
//! members took ~1 KB (64 bytes per entry, a hash index, a heap string per
//! key, the shared box) for ~90 bytes of text, and a stage state
//! `{"seen": 1}` ~240 bytes for 10. A shard holds every offer it owns for
//! as long as the offer lives, and most of them are idle at any time, so an
//! idle offer keeps the text; the offer's next step reads it back.
//!
//! The text reads back as the same value: `serde_json` writes integers as
//! integers, floats so they parse to the same bits (with `.0` when
//! integral), and keeps member order; the inputs' depth limit
//! ([`crate::codec::limits::MAX_JSON_DEPTH`]) is far below its parser's.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A JSON value, shared or as text (see the module documentation).
#[derive(Clone)]
pub enum Packed<T> {
    /// In use: shared with whatever carries it (run commands, offer
    /// states, changelog records).
    Live(Arc<T>),
    /// Idle: its compact JSON text.
    Text(Box<[u8]>),
}

/// Text that does not read back as the value it was written from: a bug,
/// or a record written by something else.
#[derive(Debug, thiserror::Error)]
#[error("kept JSON text does not read back: {0}")]
pub struct Error(#[from] serde_json::Error);

impl<T: Serialize + DeserializeOwned> Packed<T> {
    /// `value`, live.
    pub fn new(value: Arc<T>) -> Packed<T> {
        Packed::Live(value)
    }

    /// The value: shared when live, read back from the text otherwise.
    pub fn get(&self) -> Result<Arc<T>, Error> {
        match self {
            Packed::Live(value) => Ok(Arc::clone(value)),
            Packed::Text(text) => Ok(Arc::new(serde_json::from_slice(text)?)),
        }
    }

    /// Keeps only the text (written through `scratch`).
    pub fn pack(&mut self, scratch: &mut Vec<u8>) {
        if let Packed::Live(value) = self {
            if let Some(text) = write(&**value, scratch) {
                *self = Packed::Text(text);
            }
        }
    }

    /// Whether it is kept as text.
    pub fn is_packed(&self) -> bool {
        matches!(self, Packed::Text(_))
    }

    /// Its JSON text (how the changelog stores it): the kept text itself
    /// when packed.
    pub fn text(&self) -> Cow<'_, [u8]> {
        match self {
            Packed::Text(text) => Cow::Borrowed(text),
            Packed::Live(value) => Cow::Owned(serde_json::to_vec(&**value).unwrap_or_default()),
        }
    }
}

/// The text of `value` in a box of its size, written through `scratch` (a
/// `Vec` grown as it is written and then shrunk moved it twice). Writing a
/// map with string keys cannot fail; if it ever did, the value simply has
/// no text.
fn write<T: Serialize>(value: &T, scratch: &mut Vec<u8>) -> Option<Box<[u8]>> {
    scratch.clear();
    serde_json::to_writer(&mut *scratch, value).ok()?;
    Some(Box::from(scratch.as_slice()))
}

impl<T> From<Arc<T>> for Packed<T> {
    fn from(value: Arc<T>) -> Packed<T> {
        Packed::Live(value)
    }
}

impl<T> From<T> for Packed<T> {
    fn from(value: T) -> Packed<T> {
        Packed::Live(Arc::new(value))
    }
}

impl<T: Default> Default for Packed<T> {
    fn default() -> Packed<T> {
        Packed::Live(Arc::default())
    }
}

/// Equal when they hold the same value, kept either way (a value's text
/// is one text).
impl<T: Serialize + DeserializeOwned + PartialEq> PartialEq for Packed<T> {
    fn eq(&self, other: &Packed<T>) -> bool {
        match (self, other) {
            (Packed::Live(a), Packed::Live(b)) => Arc::ptr_eq(a, b) || a == b,
            _ => self.text() == other.text(),
        }
    }
}

impl<T: Serialize + DeserializeOwned + Eq> Eq for Packed<T> {}

impl<T: fmt::Debug> fmt::Debug for Packed<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Packed::Live(value) => value.fmt(f),
            Packed::Text(text) => write!(f, "{}", String::from_utf8_lossy(text)),
        }
    }
}

/// As the value it holds.
impl<T: Serialize + DeserializeOwned> Serialize for Packed<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Packed::Live(value) => value.serialize(serializer),
            Packed::Text(text) => serde_json::from_slice::<serde_json::Value>(text)
                .map_err(serde::ser::Error::custom)?
                .serialize(serializer),
        }
    }
}

/// From the value it holds, live.
impl<'de, T: Deserialize<'de>> Deserialize<'de> for Packed<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Packed<T>, D::Error> {
        T::deserialize(deserializer).map(|v| Packed::Live(Arc::new(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    fn packed(value: &Value) -> Packed<Value> {
        let mut p = Packed::new(Arc::new(value.clone()));
        p.pack(&mut Vec::new());
        p
    }

    #[test]
    fn text_reads_back_as_the_same_value() {
        for value in [
            json!({"n": 1, "price": 1.5, "whole": 1.0, "neg": -3, "big": u64::MAX, "tiny": 5e-324}),
            json!({"z": 1, "a": {"nested": [1, "x", null, true, {"b": -0.0}]}}),
            json!(null),
            json!("text with \"quotes\" and ünïcode"),
        ] {
            let p = packed(&value);
            assert!(p.is_packed());
            assert_eq!(*p.get().unwrap(), value);
            // Member order and number kinds survive.
            assert_eq!(p.get().unwrap().to_string(), value.to_string());
        }
    }

    #[test]
    fn live_and_packed_compare_by_value() {
        let value = json!({"seen": 3});
        let live = Packed::new(Arc::new(value.clone()));
        let text = packed(&value);
        assert_eq!(live, text);
        assert_eq!(text, live);
        assert_ne!(text, packed(&json!({"seen": 4})));
        assert_eq!(text.text(), live.text());
    }

    #[test]
    fn packed_through_a_used_scratch_and_serialized_as_its_value() {
        let value = json!({"a": [1, 2]});
        let mut p = Packed::new(Arc::new(value.clone()));
        p.pack(&mut b"left over".to_vec());
        assert!(p.is_packed());
        assert_eq!(&*p.text(), br#"{"a":[1,2]}"#);
        assert_eq!(serde_json::to_value(&p).unwrap(), value);
    }

    #[test]
    fn text_that_is_not_json_is_an_error() {
        let p: Packed<Value> = Packed::Text(b"{\"a\":".to_vec().into_boxed_slice());
        assert!(p.get().is_err());
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            ".{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((".{0,6}", inner), 0..6)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_value_round_trips(value in json_value()) {
            let p = packed(&value);
            let back = p.get().unwrap();
            prop_assert_eq!(&*back, &value);
            prop_assert_eq!(serde_json::to_vec(&*back).unwrap(), serde_json::to_vec(&value).unwrap());
            let live = Packed::new(Arc::new(value.clone()));
            prop_assert_eq!(p.text(), live.text());
            prop_assert_eq!(p, Packed::new(Arc::new(value)));
        }
    }
}
