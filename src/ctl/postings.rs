//! An inverted index built once: per parameter id, the items that name it
//! (tasks of a shard, partitions of the router), all in one list with each
//! parameter's start beside it. A list per parameter cost a vector header
//! and a heap block each, several times the four bytes of an item, with a
//! parameter per task.

use super::ParamId;

/// Items by parameter id, fixed once built.
#[derive(Debug, Clone)]
pub struct Postings<T> {
    /// Where each parameter's items start in `items`; one more than there
    /// are parameters, the last being `items.len()`.
    starts: Vec<u32>,
    items: Vec<T>,
}

impl<T: Copy + PartialEq> Postings<T> {
    /// The index of `pairs` (parameter, item), each parameter's items in the
    /// order given; an item given again right after itself for the same
    /// parameter (a trigger naming a parameter twice) is kept once.
    pub fn build(pairs: &[(ParamId, T)]) -> Postings<T> {
        let mut sorted = pairs.to_vec();
        // Stable: each parameter's items keep their order.
        sorted.sort_by_key(|(p, _)| *p);
        let params = sorted.last().map_or(0, |(p, _)| p.index() + 1);
        let mut starts = Vec::with_capacity(params + 1);
        let mut items: Vec<T> = Vec::with_capacity(sorted.len());
        let mut run = sorted.iter().peekable();
        for p in 0..params {
            // Fewer than 2^32 items: one per reference in the configuration.
            starts.push(u32::try_from(items.len()).unwrap_or(u32::MAX));
            let first = items.len();
            while let Some(&&(q, item)) = run.peek() {
                if q.index() != p {
                    break;
                }
                run.next();
                if items.len() == first || items.last() != Some(&item) {
                    items.push(item);
                }
            }
        }
        starts.push(u32::try_from(items.len()).unwrap_or(u32::MAX));
        items.shrink_to_fit();
        Postings { starts, items }
    }

    /// The items of parameter `p` (none for an id it was not built with).
    pub fn of(&self, p: ParamId) -> &[T] {
        let (Some(&from), Some(&to)) = (self.starts.get(p.index()), self.starts.get(p.index() + 1))
        else {
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
        let index = Postings::build(&[(p(2), 7u32), (p(0), 1), (p(2), 3), (p(2), 3), (p(0), 4)]);
        assert_eq!(index.of(p(0)), [1, 4]);
        assert_eq!(index.of(p(1)), [] as [u32; 0]);
        assert_eq!(index.of(p(2)), [7, 3]);
        assert_eq!(index.of(p(3)), [] as [u32; 0]);
        assert_eq!(Postings::<u32>::build(&[]).of(p(0)), [] as [u32; 0]);
    }

    proptest! {
        /// The same lists as pushing each pair onto a list per parameter
        /// (skipping an item the list ends with).
        #[test]
        fn matches_a_list_per_parameter(pairs in proptest::collection::vec((0u32..20, 0u32..8), 0..200)) {
            let pairs: Vec<(ParamId, u32)> = pairs.into_iter().map(|(p, i)| (ParamId(p), i)).collect();
            let mut lists: Vec<Vec<u32>> = vec![Vec::new(); 21];
            for &(p, i) in &pairs {
                let list = &mut lists[p.index()];
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
            let index = Postings::build(&pairs);
            for (p, list) in lists.iter().enumerate() {
                prop_assert_eq!(index.of(ParamId(p as u32)), list.as_slice());
            }
        }
    }
}
