//! A map by name kept as a list in name order: the small maps that records
//! and commands carry (a task's parameter values, an offer's stage slots)
//! are built at every step and hold a few entries, where a `BTreeMap`
//! would allocate a node of eleven entries for one and walk it to drop.
//! Serialized as a map, so the JSON and protobuf forms are a map's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Name → value, in name order, one value per name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameMap<V>(Vec<(String, V)>);

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
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&String, &V)> {
        self.0.iter().map(|(name, v)| (name, v))
    }
}

/// In name order; of two values of one name, the last.
impl<V> FromIterator<(String, V)> for NameMap<V> {
    fn from_iter<I: IntoIterator<Item = (String, V)>>(iter: I) -> NameMap<V> {
        iter.into_iter().collect::<Vec<_>>().into()
    }
}

/// In name order; of two values of one name, the last.
impl<V> From<Vec<(String, V)>> for NameMap<V> {
    fn from(mut entries: Vec<(String, V)>) -> NameMap<V> {
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

impl<V, const N: usize> From<[(String, V); N]> for NameMap<V> {
    fn from(entries: [(String, V); N]) -> NameMap<V> {
        Vec::from(entries).into()
    }
}

/// Already in name order, one value per name.
impl<V> From<BTreeMap<String, V>> for NameMap<V> {
    fn from(map: BTreeMap<String, V>) -> NameMap<V> {
        NameMap(map.into_iter().collect())
    }
}

impl<V> IntoIterator for NameMap<V> {
    type Item = (String, V);
    type IntoIter = std::vec::IntoIter<(String, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a, V> IntoIterator for &'a NameMap<V> {
    type Item = (&'a String, &'a V);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, V)>,
        fn(&'a (String, V)) -> (&'a String, &'a V),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(name, v)| (name, v))
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

    #[test]
    fn entries_are_in_name_order_the_last_of_a_name_kept_and_serialized_as_a_map() {
        let map: NameMap<u32> = [
            ("price".to_string(), 1),
            ("expire".to_string(), 2),
            ("price".to_string(), 3),
        ]
        .into_iter()
        .collect();
        let entries: Vec<_> = map.iter().map(|(n, v)| (n.as_str(), *v)).collect();
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
