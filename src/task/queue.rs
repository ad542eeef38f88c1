//! A pool's queue: live work first (a recovery's tasks wait in a low lane
//! behind every task its trigger queued), then priority (higher first),
//! then queue time, then declaration order, so dispatch order is
//! deterministic and replayable.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use jiff::Timestamp;

type Entry = (bool, Reverse<i64>, Timestamp, u32);

/// Queued tasks of one pool, by task index.
#[derive(Debug, Default, Clone)]
pub struct PoolQueue {
    /// The only queued task, while there is one: most tasks are queued and
    /// dispatched in one step, and a tree of one entry allocated a node for
    /// it and freed it again.
    one: Option<Entry>,
    /// The queued tasks while there are more (then `one` is `None`).
    entries: BTreeSet<Entry>,
}

impl PoolQueue {
    /// Adds a task (in the low lane when `low`); a task is in the queue at
    /// most once.
    pub fn push(&mut self, low: bool, priority: i64, queued_at: Timestamp, task: u32) {
        let entry = (low, Reverse(priority), queued_at, task);
        if self.entries.is_empty() && self.one.is_none_or(|one| one == entry) {
            self.one = Some(entry);
            return;
        }
        if let Some(one) = self.one.take() {
            self.entries.insert(one);
        }
        self.entries.insert(entry);
    }

    /// Removes a task queued with these keys.
    pub fn remove(&mut self, low: bool, priority: i64, queued_at: Timestamp, task: u32) -> bool {
        let entry = (low, Reverse(priority), queued_at, task);
        if self.one == Some(entry) {
            self.one = None;
            return true;
        }
        self.entries.remove(&entry)
    }

    /// The next task to dispatch: `(priority, task)`.
    pub fn peek(&self) -> Option<(i64, u32)> {
        self.one
            .as_ref()
            .or_else(|| self.entries.first())
            .map(|(_, p, _, t)| (p.0, *t))
    }

    /// Takes the next task.
    pub fn pop(&mut self) -> Option<u32> {
        self.one
            .take()
            .or_else(|| self.entries.pop_first())
            .map(|(_, _, _, t)| t)
    }

    /// Number of queued tasks.
    pub fn len(&self) -> usize {
        usize::from(self.one.is_some()) + self.entries.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.one.is_none() && self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_then_time_then_order() {
        let t0: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        let t1: Timestamp = "2024-01-01T00:00:01Z".parse().unwrap();
        let mut q = PoolQueue::default();
        q.push(true, 100, t0, 1);
        q.push(false, 1, t0, 5);
        q.push(false, 10, t1, 7);
        q.push(false, 10, t0, 9);
        q.push(false, 10, t0, 8);
        assert_eq!(q.len(), 5);
        assert_eq!(q.peek(), Some((10, 8)));
        let order: Vec<u32> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![8, 9, 7, 5, 1]);
    }

    proptest::proptest! {
        /// Pushes, removals and pops answer as an ordered set of the
        /// entries does, whether one task or many are queued.
        #[test]
        fn the_queue_is_an_ordered_set(ops in proptest::collection::vec((0u8..3, proptest::bool::ANY, 0i64..3, 0i64..3, 0u32..6), 0..60)) {
            let t0: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
            let mut q = PoolQueue::default();
            let mut model = BTreeSet::new();
            for (op, low, priority, secs, task) in ops {
                let at = t0 + jiff::SignedDuration::from_secs(secs);
                let entry = (low, Reverse(priority), at, task);
                match op {
                    0 => {
                        q.push(low, priority, at, task);
                        model.insert(entry);
                    }
                    1 => {
                        proptest::prop_assert_eq!(q.remove(low, priority, at, task), model.remove(&entry));
                    }
                    _ => {
                        proptest::prop_assert_eq!(q.peek(), model.first().map(|(_, p, _, t)| (p.0, *t)));
                        proptest::prop_assert_eq!(q.pop(), model.pop_first().map(|(_, _, _, t)| t));
                    }
                }
                proptest::prop_assert_eq!(q.len(), model.len());
                proptest::prop_assert_eq!(q.is_empty(), model.is_empty());
            }
        }
    }
}
