//! Records by a string key (an offer id, a process's business key), found
//! by hash and walked in key order. The hot paths look a key up several
//! times per input, where an ordered map compared it with a dozen others
//! per tree level (`memcmp` was a tenth of the runtime thread's time in the
//! jobs workload); search, recovery and snapshots walk the keys in order
//! from a cursor, so the order is kept beside, over the same strings.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

use hashbrown::hash_map::EntryRef;

/// Values by key: a hash map for lookups, the keys in order beside it.
#[derive(Debug, Clone)]
pub struct KeyedMap<V> {
    values: hashbrown::HashMap<Arc<str>, V, foldhash::fast::FixedState>,
    /// The keys of `values`, in order (each string shared with its entry).
    order: BTreeSet<Arc<str>>,
}

impl<V> Default for KeyedMap<V> {
    fn default() -> Self {
        KeyedMap {
            values: hashbrown::HashMap::default(),
            order: BTreeSet::new(),
        }
    }
}

impl<V> KeyedMap<V> {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.values.get(key)
    }

    /// The value of `key`, to change.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.values.get_mut(key)
    }

    /// The value of `key`, made by `make` if there was none.
    pub fn get_or_insert_with(&mut self, key: &str, make: impl FnOnce() -> V) -> &mut V {
        match self.values.entry_ref(key) {
            EntryRef::Occupied(found) => found.into_mut(),
            EntryRef::Vacant(new) => {
                let new = new.insert_entry(make());
                self.order.insert(Arc::clone(new.key()));
                new.into_mut()
            }
        }
    }

    /// Sets the value of `key`; returns the one it replaced.
    pub fn insert(&mut self, key: &str, value: V) -> Option<V> {
        match self.values.entry_ref(key) {
            EntryRef::Occupied(mut found) => Some(found.insert(value)),
            EntryRef::Vacant(new) => {
                let new = new.insert_entry(value);
                self.order.insert(Arc::clone(new.key()));
                None
            }
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: &str) -> Option<V> {
        self.order.remove(key);
        self.values.remove(key)
    }

    /// Every value, in no particular order (counting, not listing).
    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.values.values()
    }

    /// Every key with its value, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> + '_ {
        self.range(Bound::Unbounded)
    }

    /// The keys from `from` on with their values, in key order.
    pub fn range<'a>(&'a self, from: Bound<&str>) -> impl Iterator<Item = (&'a str, &'a V)> + 'a {
        // Every key in the order has its value: both change together.
        self.order
            .range::<str, _>((from, Bound::Unbounded))
            .filter_map(move |key| Some((&**key, self.values.get(&**key)?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Behaves as an ordered map under any inserts, removals and
        /// get-or-insert calls, read whole or from any key.
        #[test]
        fn behaves_as_an_ordered_map(ops in proptest::collection::vec((0u8..3, "[a-d]{0,3}", 0u32..100), 0..100), from in "[a-d]{0,3}") {
            let mut map = KeyedMap::default();
            let mut model = BTreeMap::new();
            for (op, key, value) in ops {
                match op {
                    0 => prop_assert_eq!(map.insert(&key, value), model.insert(key.clone(), value)),
                    1 => prop_assert_eq!(map.remove(&key), model.remove(&key)),
                    _ => {
                        *map.get_or_insert_with(&key, || value) += 1;
                        *model.entry(key.clone()).or_insert(value) += 1;
                    }
                }
                prop_assert_eq!(map.get(&key), model.get(&key));
                prop_assert_eq!(map.values().count(), model.len());
            }
            let all: Vec<_> = map.iter().map(|(k, v)| (k.to_string(), *v)).collect();
            let expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
            prop_assert_eq!(all, expected);
            for bound in [Bound::Included(from.as_str()), Bound::Excluded(from.as_str())] {
                let got: Vec<_> = map.range(bound).map(|(k, v)| (k.to_string(), *v)).collect();
                let want: Vec<_> = model
                    .range::<str, _>((bound, Bound::Unbounded))
                    .map(|(k, v)| (k.clone(), *v))
                    .collect();
                prop_assert_eq!(got, want);
            }
        }
    }
}
