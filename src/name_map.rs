//! A map by name kept as a list in name order: the small maps that records
//! and commands carry (a task's parameter values, an offer's stage slots)
//! are built at every step and hold a few entries, where a `BTreeMap`
//! would allocate a node of eleven entries for one and walk it to drop.
//! Serialized as a map, so the JSON and protobuf forms are a map's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A name of a [`NameMap`]: kept inline up to 24 bytes (parameter and stage
/// names nearly always are), so that the maps built at every step (a run
/// command's snapshot, an offer's slots) allocate for their list only.
pub type Name = compact_str::CompactString;

/// The parts one after another as a [`Name`] (also how run ids are made,
/// [`crate::run::RunId`]). Built in a buffer on the
/// stack and made a name once: pushing each part onto a `CompactString`
/// re-reads its representation per part (~70 instructions a part, more
/// than the copies). Longer than a name keeps inline: [`crate::run::concat`].
pub fn concat(parts: &[&str]) -> Name {
    let mut buf = [0u8; INLINE];
    let mut len = 0;
    for part in parts {
        let end = len + part.len();
        let Some(to) = buf.get_mut(len..end) else {
            return crate::run::concat(parts).into();
        };
        match (to, part.as_bytes()) {
            // A separator: stored, not copied through a `memcpy` call.
            ([to], &[b]) => *to = b,
            (to, part) => to.copy_from_slice(part),
        }
        len = end;
    }
    // Whole `str`s one after another are UTF-8; checked all the same (the
    // unchecked form is `unsafe`), which costs little for 24 bytes.
    let text = buf.get(..len).map(std::str::from_utf8);
    Name::new(text.and_then(Result::ok).unwrap_or_default())
}

/// The longest [`Name`] kept inline.
const INLINE: usize = std::mem::size_of::<Name>();

/// Name → value, in name order, one value per name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameMap<V>(Vec<(Name, V)>);

impl<V> Default for NameMap<V> {
    fn default() -> Self {
        NameMap(Vec::new())
    }
}

impl<V> NameMap<V> {
    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&V> {
        self.0
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .and_then(|i| self.0.get(i))
            .map(|(_, v)| v)
    }

    /// Whether no name has a value.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries, in name order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &V)> {
        self.0.iter().map(|(name, v)| (name.as_str(), v))
    }

    /// `entries` in name order, the last of a name kept.
    fn ordered(mut entries: Vec<(Name, V)>) -> NameMap<V> {
        // Most lists come in name order already (built from one): checked,
        // not sorted again.
        if !entries.is_sorted_by(|a, b| a.0 < b.0) {
            // Reversed first so that the stable sort keeps the last of a
            // name first, which `dedup_by` keeps.
            entries.reverse();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.dedup_by(|later, first| later.0 == first.0);
        }
        NameMap(entries)
    }
}

/// In name order; of two values of one name, the last.
impl<K: Into<Name>, V> FromIterator<(K, V)> for NameMap<V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> NameMap<V> {
        NameMap::ordered(iter.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
}

/// In name order; of two values of one name, the last.
impl<K: Into<Name>, V> From<Vec<(K, V)>> for NameMap<V> {
    fn from(entries: Vec<(K, V)>) -> NameMap<V> {
        entries.into_iter().collect()
    }
}

impl<K: Into<Name>, V, const N: usize> From<[(K, V); N]> for NameMap<V> {
    fn from(entries: [(K, V); N]) -> NameMap<V> {
        entries.into_iter().collect()
    }
}

/// Already in name order, one value per name.
impl<V> From<BTreeMap<String, V>> for NameMap<V> {
    fn from(map: BTreeMap<String, V>) -> NameMap<V> {
        NameMap(map.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
}

impl<V> IntoIterator for NameMap<V> {
    type Item = (Name, V);
    type IntoIter = std::vec::IntoIter<(Name, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a, V> IntoIterator for &'a NameMap<V> {
    type Item = (&'a str, &'a V);
    type IntoIter =
        std::iter::Map<std::slice::Iter<'a, (Name, V)>, fn(&'a (Name, V)) -> (&'a str, &'a V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(name, v)| (name.as_str(), v))
    }
}

impl<V: Serialize> Serialize for NameMap<V> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for NameMap<V> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<NameMap<V>, D::Error> {
        BTreeMap::<String, V>::deserialize(deserializer).map(NameMap::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Short or long, one byte or many, ASCII or not: the parts one
        /// after another, inline exactly when they fit.
        #[test]
        fn concat_is_the_parts_one_after_another(parts in prop::collection::vec("(.|[a-z#/]){0,14}", 0..5)) {
            let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
            let name = concat(&parts);
            prop_assert_eq!(name.as_str(), parts.concat());
            prop_assert_eq!(name.is_heap_allocated(), parts.concat().len() > INLINE);
        }
    }

    #[test]
    fn names_up_to_24_bytes_are_inline() {
        let id = concat(&["t".repeat(21).as_str(), "#", "12"]);
        assert_eq!((id.len(), id.is_heap_allocated()), (24, false));
        let id = concat(&["t".repeat(22).as_str(), "#", "12"]);
        assert_eq!((id.len(), id.is_heap_allocated()), (25, true));
        assert_eq!(concat(&[]), "");
        assert_eq!(concat(&["dwh.orders", "/", "max_dt"]), "dwh.orders/max_dt");
    }

    #[test]
    fn entries_are_in_name_order_the_last_of_a_name_kept_and_serialized_as_a_map() {
        let map: NameMap<u32> = [
            ("price".to_string(), 1),
            ("expire".to_string(), 2),
            ("price".to_string(), 3),
        ]
        .into_iter()
        .collect();
        let entries: Vec<_> = map.iter().map(|(n, v)| (n, *v)).collect();
        assert_eq!(entries, [("expire", 2), ("price", 3)]);
        assert_eq!(map.get("price"), Some(&3));
        assert!(map.get("video").is_none());
        let json = serde_json::to_value(&map).unwrap();
        assert_eq!(json, serde_json::json!({"expire": 2, "price": 3}));
        let back: NameMap<u32> = serde_json::from_value(json).unwrap();
        assert_eq!(back, map);
        let one: NameMap<u32> = [("a".to_string(), 7)].into();
        assert_eq!(one.get("a"), Some(&7));
    }
}
