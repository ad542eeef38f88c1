//! A lookup by name into a list whose items hold their names (the
//! configured tasks, for the router and every shard): a hash table of
//! positions, so a name is kept once, by its item, where a
//! `HashMap<String, u32>` kept a second copy of every id (a heap block and
//! a map entry per task).

use std::hash::{BuildHasher, Hasher};

use crate::group_table::GroupTable;

/// A map by name with a fast hash, for the few names (jobs, processes,
/// stages) looked up per step and result: std's SipHash was a visible part
/// of those paths. Its own copy of each name is fine at that count.
pub type ByName<V> = std::collections::HashMap<String, V, foldhash::fast::FixedState>;

/// Positions in a list, found by the name of the item there.
#[derive(Debug, Clone, Default)]
pub struct NameIndex {
    positions: GroupTable,
}

/// The hash of a name (fixed seeds: the same in every run).
fn hash(name: &str) -> u64 {
    let mut h = foldhash::fast::FixedState::with_seed(0x4e41_4d45_494e_4458).build_hasher();
    h.write(name.as_bytes());
    h.finish()
}

impl NameIndex {
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
            .find(h, |p| name_at(p) == Some(name))
            .is_some()
        {
            return false;
        }
        self.positions.insert(h, i, |p| name_at(p).map_or(0, hash));
        true
    }

    /// Reserves room for `more` names.
    pub fn reserve<'a>(&mut self, more: usize, name_at: impl Fn(u32) -> Option<&'a str>) {
        self.positions.reserve(more, |p| name_at(p).map_or(0, hash));
    }

    /// Gives back the room grown while names were added one by one.
    pub fn shrink_to_fit<'a>(&mut self, name_at: impl Fn(u32) -> Option<&'a str>) {
        self.positions.shrink_to_fit(|p| name_at(p).map_or(0, hash));
    }

    /// The position of `name`; `name_at` gives the name of the item at a
    /// position (the list the index was built from).
    pub fn get<'a>(&self, name: &str, name_at: impl Fn(u32) -> Option<&'a str>) -> Option<u32> {
        self.positions
            .find(hash(name), |p| name_at(p) == Some(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An index of `names`, each at its place in the list.
    fn index_of(names: &[&str]) -> NameIndex {
        let mut index = NameIndex::default();
        let at = |p: u32| names.get(p as usize).copied();
        for (i, name) in (0u32..).zip(names) {
            index.insert(name, i, at);
        }
        index.shrink_to_fit(at);
        index
    }

    #[test]
    fn finds_the_first_of_a_name() {
        let names = ["a", "bb", "a", "c"];
        let index = index_of(&names);
        let at = |p: u32| names.get(p as usize).copied();
        assert_eq!(index.get("a", at), Some(0));
        assert_eq!(index.get("bb", at), Some(1));
        assert_eq!(index.get("c", at), Some(3));
        assert_eq!(index.get("d", at), None);
        assert_eq!(NameIndex::default().get("a", at), None);
        let mut again = NameIndex::default();
        let added: Vec<bool> = (0u32..)
            .zip(&names)
            .map(|(i, n)| again.insert(n, i, at))
            .collect();
        assert_eq!(added, [true, true, false, true]);
    }

    proptest! {
        #[test]
        fn finds_every_name_and_no_other(names in proptest::collection::vec("[a-c]{0,3}", 0..60), other in "[a-d]{0,3}") {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let index = index_of(&refs);
            let at = |p: u32| names.get(p as usize).map(String::as_str);
            for name in &names {
                let first = names.iter().position(|n| n == name).map(|p| p as u32);
                prop_assert_eq!(index.get(name, at), first);
            }
            prop_assert_eq!(index.get(&other, at), names.iter().position(|n| *n == other).map(|p| p as u32));
        }
    }
}
