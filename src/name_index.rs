//! A lookup by name into a list whose items hold their names (a shard's
//! tasks, the configured tasks): a hash table of positions, so a name is
//! kept once, by its item, where a `HashMap<String, u32>` kept a second copy
//! of every id (a heap block and a map entry per task).

use std::hash::{BuildHasher, Hasher};

/// A map by name with a fast hash, for the few names (jobs, processes,
/// stages) looked up per step and result: std's SipHash was a visible part
/// of those paths. Its own copy of each name is fine at that count.
pub type ByName<V> = std::collections::HashMap<String, V, foldhash::fast::FixedState>;

/// Positions in a list, found by the name of the item there.
#[derive(Debug, Clone, Default)]
pub struct NameIndex {
    positions: hashbrown::HashTable<u32>,
}

/// The hash of a name (fixed seeds: the same in every run).
fn hash(name: &str) -> u64 {
    let mut h = foldhash::fast::FixedState::with_seed(0x4e41_4d45_494e_4458).build_hasher();
    h.write(name.as_bytes());
    h.finish()
}

impl NameIndex {
    /// An index of `names` (an item's position is its place in the
    /// iteration); of two equal names, the first is found.
    pub fn of<'a>(names: impl ExactSizeIterator<Item = &'a str>) -> NameIndex {
        let mut positions = hashbrown::HashTable::with_capacity(names.len());
        let names: Vec<(u64, &str)> = names.map(|name| (hash(name), name)).collect();
        for (i, &(h, name)) in names.iter().enumerate() {
            let at = |p: &u32| names.get(*p as usize);
            if positions
                .find(h, |p| at(p).is_some_and(|&(_, n)| n == name))
                .is_some()
            {
                continue;
            }
            // Fewer than 2^32 items: the configuration would not fit in
            // memory first.
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            positions.insert_unique(h, i, |p| at(p).map_or(0, |&(h, _)| h));
        }
        NameIndex { positions }
    }

    /// Adds `name` at position `i` unless the index has it already
    /// (whether it was added); `name_at` gives the name at a position, `i`'s
    /// included.
    pub fn insert<'a>(
        &mut self,
        name: &str,
        i: u32,
        name_at: impl Fn(u32) -> Option<&'a str>,
    ) -> bool {
        let h = hash(name);
        if self
            .positions
            .find(h, |&p| name_at(p) == Some(name))
            .is_some()
        {
            return false;
        }
        self.positions
            .insert_unique(h, i, |&p| name_at(p).map_or(0, hash));
        true
    }

    /// Gives back the room grown while names were added one by one.
    pub fn shrink_to_fit<'a>(&mut self, name_at: impl Fn(u32) -> Option<&'a str>) {
        self.positions
            .shrink_to_fit(|&p| name_at(p).map_or(0, hash));
    }

    /// The position of `name`; `name_at` gives the name of the item at a
    /// position (the list the index was built from).
    pub fn get<'a>(&self, name: &str, name_at: impl Fn(u32) -> Option<&'a str>) -> Option<u32> {
        self.positions
            .find(hash(name), |&p| name_at(p) == Some(name))
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn finds_the_first_of_a_name() {
        let names = ["a", "bb", "a", "c"];
        let index = NameIndex::of(names.iter().copied());
        let at = |p: u32| names.get(p as usize).copied();
        assert_eq!(index.get("a", at), Some(0));
        assert_eq!(index.get("bb", at), Some(1));
        assert_eq!(index.get("c", at), Some(3));
        assert_eq!(index.get("d", at), None);
        assert_eq!(NameIndex::default().get("a", at), None);
    }

    #[test]
    fn names_added_one_by_one_are_found_as_when_built_at_once() {
        let names = ["a", "bb", "a", "c", "bb", "d"];
        let at = |p: u32| names.get(p as usize).copied();
        let mut index = NameIndex::default();
        let added: Vec<bool> = (0..names.len() as u32)
            .map(|i| index.insert(names[i as usize], i, at))
            .collect();
        assert_eq!(added, [true, true, false, true, false, true]);
        index.shrink_to_fit(at);
        let whole = NameIndex::of(names.iter().copied());
        for name in ["a", "bb", "c", "d", "e"] {
            assert_eq!(index.get(name, at), whole.get(name, at), "{name}");
        }
    }

    proptest! {
        #[test]
        fn finds_every_name_and_no_other(names in proptest::collection::vec("[a-c]{0,3}", 0..60), other in "[a-d]{0,3}") {
            let index = NameIndex::of(names.iter().map(String::as_str));
            let at = |p: u32| names.get(p as usize).map(String::as_str);
            for name in &names {
                let first = names.iter().position(|n| n == name).map(|p| p as u32);
                prop_assert_eq!(index.get(name, at), first);
            }
            prop_assert_eq!(index.get(&other, at), names.iter().position(|n| *n == other).map(|p| p as u32));
        }
    }
}
