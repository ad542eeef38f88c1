//! What a step changed, to be written at its end: a set that mostly holds
//! one or a few entries, each marked many times over the step (a process
//! step marks its key at every hook), then drained in order.
//!
//! An ordered tree paid an allocation and a walk for every mark, and for
//! a key, a copy of it each time: here a mark of the entry marked last is
//! free, and the order is made once, when the step ends.

/// Entries in the order they were marked, sorted and deduplicated on
/// demand (descending, so that the smallest is popped from the end).
#[derive(Debug, Clone, Default)]
pub(super) struct Marks<T> {
    items: Vec<T>,
    settled: bool,
}

impl<T: Ord> Marks<T> {
    /// Marks `item`.
    pub fn insert(&mut self, item: T) {
        if self.items.last() != Some(&item) {
            self.items.push(item);
            self.settled = false;
        }
    }

    /// Marks the entry `is` recognises, made by `make` unless it is the
    /// entry marked last.
    pub fn insert_with(&mut self, is: impl FnOnce(&T) -> bool, make: impl FnOnce() -> T) {
        if self.items.last().is_some_and(is) {
            return;
        }
        self.items.push(make());
        self.settled = false;
    }

    /// Takes the smallest entry out.
    pub fn pop_first(&mut self) -> Option<T> {
        self.settle();
        self.items.pop()
    }

    /// Whether `item` is marked.
    pub fn contains(&mut self, item: &T) -> bool {
        self.settle();
        self.items.binary_search_by(|x| item.cmp(x)).is_ok()
    }

    /// Forgets every mark.
    pub fn clear(&mut self) {
        self.items.clear();
        self.settled = true;
    }

    fn settle(&mut self) {
        if !self.settled {
            self.items.sort_unstable_by(|a, b| b.cmp(a));
            self.items.dedup();
            self.settled = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// Marks behave as an ordered set under any interleaving of marks,
        /// pops and lookups.
        #[test]
        fn marks_are_an_ordered_set(ops in prop::collection::vec((0u8..4, 0u8..12), 0..200)) {
            let (mut marks, mut set) = (Marks::default(), BTreeSet::new());
            for (op, v) in ops {
                match op {
                    0 | 1 => {
                        marks.insert(v);
                        set.insert(v);
                    }
                    2 => prop_assert_eq!(marks.pop_first(), set.pop_first()),
                    _ => prop_assert_eq!(marks.contains(&v), set.contains(&v)),
                }
            }
            while let Some(v) = set.pop_first() {
                prop_assert_eq!(marks.pop_first(), Some(v));
            }
            prop_assert_eq!(marks.pop_first(), None);
        }
    }
}
