//! The key records of a shard, in `(process, key)` order, looked up by a
//! borrowed key (see [`KeyedMap`]).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use super::KeyRecord;
use crate::keyed_map::KeyedMap;

/// Key records per process index. Each record is shared with the
/// changelog write of the step that changed it (copied on the next change
/// only while that write is still unencoded): a record carries the
/// instance's context, and copying it for every step's write was a good
/// part of the jobs path.
#[derive(Debug, Clone, Default)]
pub(super) struct KeyMap {
    by_process: BTreeMap<u16, KeyedMap<Arc<KeyRecord>>>,
}

impl KeyMap {
    /// The record of `key` of process `p`.
    pub fn get(&self, p: u16, key: &str) -> Option<&KeyRecord> {
        self.shared(p, key).map(Arc::as_ref)
    }

    /// The record of `key` of process `p`, to write to the changelog.
    pub fn shared(&self, p: u16, key: &str) -> Option<&Arc<KeyRecord>> {
        self.by_process.get(&p)?.get(key)
    }

    /// The record of `key` of process `p`, to change.
    pub fn get_mut(&mut self, p: u16, key: &str) -> Option<&mut KeyRecord> {
        self.by_process.get_mut(&p)?.get_mut(key).map(Arc::make_mut)
    }

    /// The record of `key` of process `p`, made empty if there was none.
    pub fn entry(&mut self, p: u16, key: &str) -> &mut KeyRecord {
        Arc::make_mut(
            self.by_process
                .entry(p)
                .or_default()
                .get_or_insert_with(key, Arc::default),
        )
    }

    /// Sets the record of `key` of process `p`.
    pub fn insert(&mut self, p: u16, key: &str, record: KeyRecord) {
        self.by_process
            .entry(p)
            .or_default()
            .insert(key, Arc::new(record));
    }

    /// Removes the record of `key` of process `p`.
    pub fn remove(&mut self, p: u16, key: &str) -> Option<KeyRecord> {
        self.by_process
            .get_mut(&p)?
            .remove(key)
            .map(Arc::unwrap_or_clone)
    }

    /// Every record with its process, in no order: for counting (every few
    /// seconds, on the thread that applies inputs), where the key order
    /// cost a hash lookup per key.
    pub fn unordered(&self) -> impl Iterator<Item = (u16, &KeyRecord)> + '_ {
        self.by_process
            .iter()
            .flat_map(|(&p, keys)| keys.values().map(move |r| (p, &**r)))
    }

    /// Every record, in `(process, key)` order.
    pub fn iter(&self) -> impl Iterator<Item = (u16, &str, &KeyRecord)> + '_ {
        self.from(Bound::Unbounded)
    }

    /// The records from `from` on, in `(process, key)` order.
    pub fn from<'a>(
        &'a self,
        from: Bound<(u16, &'a str)>,
    ) -> impl Iterator<Item = (u16, &'a str, &'a KeyRecord)> + 'a {
        let first = match from {
            Bound::Included((p, _)) | Bound::Excluded((p, _)) => p,
            Bound::Unbounded => 0,
        };
        self.by_process.range(first..).flat_map(move |(&p, keys)| {
            let bound = match from {
                Bound::Included((q, key)) if q == p => Bound::Included(key),
                Bound::Excluded((q, key)) if q == p => Bound::Excluded(key),
                _ => Bound::Unbounded,
            };
            keys.range(bound)
                .map(move |(key, record)| (p, key, &**record))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(map: &KeyMap, from: Bound<(u16, &str)>) -> Vec<(u16, String)> {
        map.from(from).map(|(p, k, _)| (p, k.to_string())).collect()
    }

    #[test]
    fn records_come_in_process_then_key_order_from_any_point() {
        let mut map = KeyMap::default();
        for (p, k) in [(2, "b"), (0, "z"), (2, "a"), (0, "m")] {
            map.insert(p, k, KeyRecord::default());
        }
        let all = [(0, "m"), (0, "z"), (2, "a"), (2, "b")]
            .map(|(p, k)| (p, k.to_string()))
            .to_vec();
        assert_eq!(keys(&map, Bound::Unbounded), all);
        assert_eq!(keys(&map, Bound::Excluded((0, "m"))), all[1..]);
        assert_eq!(keys(&map, Bound::Included((2, ""))), all[2..]);
        assert_eq!(keys(&map, Bound::Excluded((1, "q"))), all[2..]);
        assert_eq!(keys(&map, Bound::Included((5, ""))), []);
        assert!(map.get(2, "a").is_some() && map.get(1, "a").is_none());
        assert!(map.remove(2, "a").is_some());
        assert!(map.get(2, "a").is_none());
        map.entry(7, "new").goal = true;
        assert!(map.get(7, "new").is_some_and(|r| r.goal));
        assert_eq!(map.iter().count(), 4);
    }
}
