//! An inverted index built once: per parameter id, the items that name it
//! (tasks of a shard, partitions of the router). Most parameters have one
//! item (a task watching a parameter of its own), so a parameter's head is
//! that item itself, and only a parameter with another number of items has
//! a tag naming its range of one shared list: four bytes per parameter
//! where a start beside every list took eight, and a lookup that reads one
//! place. A list per parameter cost a vector header and a heap block each.

use super::ParamId;

/// What a posting list holds: a value with room for tags that no item
/// kept at a head takes (an item that would look like a tag is kept in the
/// shared list instead).
pub trait Item: Copy + PartialEq {
    /// The tag naming range `r` (`r` < 2^31).
    fn tag(r: u32) -> Self;
    /// The range this names, if it is a tag.
    fn range(self) -> Option<u32>;
}

/// The high bit: set in a tag.
const TAG: u32 = 1 << 31;

impl Item for u32 {
    fn tag(r: u32) -> u32 {
        r | TAG
    }

    fn range(self) -> Option<u32> {
        (self & TAG != 0).then_some(self & !TAG)
    }
}

impl Item for i32 {
    // Negative: -1 - r.
    fn tag(r: u32) -> i32 {
        -1 - i32::try_from(r & !TAG).unwrap_or(i32::MAX)
    }

    fn range(self) -> Option<u32> {
        u32::try_from(-1 - i64::from(self)).ok()
    }
}

/// Items by parameter id, fixed once built.
#[derive(Debug, Clone)]
pub struct Postings<T> {
    /// Per parameter, its one item, or the tag of its range in `starts`.
    heads: Vec<T>,
    /// Range `r` of `items` is `starts[r]..starts[r + 1]`; range 0 is
    /// empty (every parameter without items names it).
    starts: Vec<u32>,
    items: Vec<T>,
}

impl<T: Item> Postings<T> {
    /// The index of `pairs` (parameter, item), each parameter's items in the
    /// order given; an item given again right after itself for the same
    /// parameter (a trigger naming a parameter twice) is kept once.
    pub fn build(pairs: Vec<(ParamId, T)>) -> Postings<T> {
        // Sorted where they lie (a copy of a million pairs was 8 MB more at
        // the start, freed but resident). Stable: each parameter's items
        // keep their order.
        let mut sorted = pairs;
        sorted.sort_by_key(|(p, _)| *p);
        let params = sorted.last().map_or(0, |(p, _)| p.index() + 1);
        let mut heads = Vec::with_capacity(params);
        let mut starts = vec![0, 0];
        let mut items: Vec<T> = Vec::new();
        let mut list: Vec<T> = Vec::new();
        let mut run = sorted.iter().peekable();
        for p in 0..params {
            list.clear();
            while let Some(&&(q, item)) = run.peek() {
                if q.index() != p {
                    break;
                }
                run.next();
                if list.last() != Some(&item) {
                    list.push(item);
                }
            }
            let head = match list.as_slice() {
                [one] if one.range().is_none() => *one,
                [] => T::tag(0),
                more => {
                    items.extend_from_slice(more);
                    // Fewer than 2^31 ranges and items: one per reference
                    // in the configuration.
                    starts.push(u32::try_from(items.len()).unwrap_or(u32::MAX));
                    T::tag(u32::try_from(starts.len() - 2).unwrap_or(u32::MAX))
                }
            };
            heads.push(head);
        }
        items.shrink_to_fit();
        starts.shrink_to_fit();
        Postings {
            heads,
            starts,
            items,
        }
    }

    /// Fetches the head [`Postings::of`] reads first for `p` into the cache.
    pub fn prefetch(&self, p: ParamId) {
        prefetch_index::prefetch_index(&self.heads, p.index());
    }

    /// The items of parameter `p` (none for an id it was not built with).
    pub fn of(&self, p: ParamId) -> &[T] {
        let Some(head) = self.heads.get(p.index()) else {
            return &[];
        };
        let Some(r) = head.range() else {
            return std::slice::from_ref(head);
        };
        let r = r as usize;
        let (Some(&from), Some(&to)) = (self.starts.get(r), self.starts.get(r + 1)) else {
            return &[];
        };
        self.items
            .get(from as usize..to as usize)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lists_items_by_parameter() {
        let p = ParamId;
        let index = Postings::build(vec![
            (p(2), 7u32),
            (p(0), 1),
            (p(2), 3),
            (p(2), 3),
            (p(0), 4),
        ]);
        assert_eq!(index.of(p(0)), [1, 4]);
        assert_eq!(index.of(p(1)), [] as [u32; 0]);
        assert_eq!(index.of(p(2)), [7, 3]);
        assert_eq!(index.of(p(3)), [] as [u32; 0]);
        assert_eq!(Postings::<u32>::build(Vec::new()).of(p(0)), [] as [u32; 0]);
    }

    #[test]
    fn single_items_are_heads_unless_they_look_like_tags() {
        let p = ParamId;
        let index = Postings::build(vec![(p(0), 5u32), (p(1), u32::MAX), (p(3), 0)]);
        assert_eq!(index.of(p(0)), [5]);
        assert_eq!(index.of(p(1)), [u32::MAX]);
        assert_eq!(index.of(p(2)), [] as [u32; 0]);
        assert_eq!(index.of(p(3)), [0]);
        assert_eq!(index.items, [u32::MAX], "only the tag-like item is listed");
        let index = Postings::build(vec![(p(0), 3i32), (p(1), -1), (p(1), 2), (p(2), i32::MIN)]);
        assert_eq!(index.of(p(0)), [3]);
        assert_eq!(index.of(p(1)), [-1, 2]);
        assert_eq!(index.of(p(2)), [i32::MIN]);
    }

    proptest! {
        /// The same lists as pushing each pair onto a list per parameter
        /// (skipping an item the list ends with), for items that may look
        /// like tags too.
        #[test]
        fn matches_a_list_per_parameter(
            pairs in proptest::collection::vec(
                (0u32..20, prop_oneof![0u32..8, (TAG - 2)..=u32::MAX]),
                0..200,
            ),
        ) {
            let pairs: Vec<(ParamId, u32)> = pairs.into_iter().map(|(p, i)| (ParamId(p), i)).collect();
            let mut lists: Vec<Vec<u32>> = vec![Vec::new(); 21];
            for &(p, i) in &pairs {
                let list = &mut lists[p.index()];
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
            let index = Postings::build(pairs.clone());
            for (p, list) in lists.iter().enumerate() {
                prop_assert_eq!(index.of(ParamId(p as u32)), list.as_slice());
            }
            let signed: Vec<(ParamId, i32)> = pairs.iter().map(|&(p, i)| (p, i as i32)).collect();
            let index = Postings::build(signed.clone());
            for (p, list) in lists.iter().enumerate() {
                let list: Vec<i32> = list.iter().map(|&i| i as i32).collect();
                prop_assert_eq!(index.of(ParamId(p as u32)), list.as_slice());
            }
        }
    }
}
