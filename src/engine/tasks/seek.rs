//! Finding an item by its key in a list sorted by that key, guessing where
//! it lies from the keys at the ends.
//!
//! A shard's tasks are a sorted subset of the configuration's indexes,
//! spread over them evenly (pools hash to shards) or in runs (a file that
//! lists a pool's tasks together): the guess lands on the item or a few
//! items away, where halving probes about seventeen items of a shard of a
//! hundred thousand, each a cache line of its own that a restore, reading
//! tasks in no order, finds cold.

use std::cmp::Ordering;

/// The position of the item whose key is `key` in `items`, sorted by
/// `key_of` with no key twice. From the guess it gallops (1, 2, 4 … items
/// on) to a bracket and halves that, so a bad guess costs twice the
/// halving's probes at most.
pub(super) fn seek<T>(items: &[T], key: u32, key_of: impl Fn(&T) -> u32) -> Option<usize> {
    let guess = guess(items, key, &key_of)?;
    let at = key_of(items.get(guess)?);
    let (lo, hi) = match at.cmp(&key) {
        Ordering::Equal => return Some(guess),
        Ordering::Less => gallop(items, key, &key_of, guess, 1),
        Ordering::Greater => gallop(items, key, &key_of, guess, -1),
    }?;
    let within = items.get(lo..hi)?;
    within
        .binary_search_by_key(&key, key_of)
        .ok()
        .map(|i| lo + i)
}

/// Where `key` would lie in `items` were their keys spread evenly between
/// the first and the last (none: outside them).
fn guess<T>(items: &[T], key: u32, key_of: impl Fn(&T) -> u32) -> Option<usize> {
    let first = key_of(items.first()?);
    let last = key_of(items.last()?);
    if key < first || key > last {
        return None;
    }
    let span = last - first;
    if span == 0 {
        return Some(0);
    }
    let top = (items.len() - 1) as u128;
    Some((u128::from(key - first) * top / u128::from(span)) as usize)
}

/// From `from` (whose key is on the side of `key` that `dir` leaves),
/// steps of 1, 2, 4 … items in direction `dir` until one passes `key`:
/// the bracket `[lo, hi)` that holds `key` if any item does.
fn gallop<T>(
    items: &[T],
    key: u32,
    key_of: &impl Fn(&T) -> u32,
    from: usize,
    dir: isize,
) -> Option<(usize, usize)> {
    let mut step = 1usize;
    let mut inner = from;
    loop {
        let probe = if dir > 0 {
            from.checked_add(step).filter(|&p| p < items.len())
        } else {
            from.checked_sub(step)
        };
        let Some(probe) = probe else {
            // Past an end: the bracket runs to it.
            return Some(if dir > 0 {
                (inner + 1, items.len())
            } else {
                (0, inner)
            });
        };
        let k = key_of(items.get(probe)?);
        let passed = if dir > 0 { k >= key } else { k <= key };
        if passed {
            return Some(if dir > 0 {
                (inner + 1, probe + 1)
            } else {
                (probe, inner)
            });
        }
        inner = probe;
        step = step.saturating_mul(2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn keys(mut v: Vec<u32>) -> Vec<u32> {
        v.sort_unstable();
        v.dedup();
        v
    }

    #[test]
    fn finds_at_the_ends_and_in_runs() {
        let items = [3u32, 4, 5, 6, 1000, 1001, 1002, 5000];
        for (i, &k) in items.iter().enumerate() {
            assert_eq!(seek(&items, k, |&k| k), Some(i), "key {k}");
        }
        for k in [0, 2, 7, 999, 1003, 4999, 5001, u32::MAX] {
            assert_eq!(seek(&items, k, |&k| k), None, "key {k}");
        }
        assert_eq!(seek(&[] as &[u32], 1, |&k| k), None);
        assert_eq!(seek(&[7u32], 7, |&k| k), Some(0));
    }

    proptest! {
        // Spread evenly, in runs, or anyhow: the same answers as halving.
        #[test]
        fn answers_as_a_binary_search(
            spread in proptest::collection::vec(any::<u32>(), 0..300),
            runs in proptest::collection::vec((0u32..1_000_000, 1u32..60), 0..8),
            probes in proptest::collection::vec(any::<u32>(), 0..40),
        ) {
            let run_keys: Vec<u32> = runs.iter().flat_map(|&(s, n)| s..s + n).collect();
            for items in [keys(spread.clone()), keys(run_keys.clone()), keys([spread, run_keys].concat())] {
                for &k in items.iter().chain(&probes) {
                    prop_assert_eq!(seek(&items, k, |&k| k), items.binary_search(&k).ok());
                }
                for w in items.windows(2) {
                    if let [a, b] = *w {
                        for k in [a.wrapping_add(1), b.wrapping_sub(1)] {
                            prop_assert_eq!(seek(&items, k, |&k| k), items.binary_search(&k).ok());
                        }
                    }
                }
            }
        }
    }
}
