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
    entries: BTreeSet<Entry>,
}

impl PoolQueue {
    /// Adds a task (in the low lane when `low`); a task is in the queue at
    /// most once.
    pub fn push(&mut self, low: bool, priority: i64, queued_at: Timestamp, task: u32) {
        self.entries
            .insert((low, Reverse(priority), queued_at, task));
    }

    /// Removes a task queued with these keys.
    pub fn remove(&mut self, low: bool, priority: i64, queued_at: Timestamp, task: u32) -> bool {
        self.entries
            .remove(&(low, Reverse(priority), queued_at, task))
    }

    /// The next task to dispatch: `(priority, task)`.
    pub fn peek(&self) -> Option<(i64, u32)> {
        self.entries.first().map(|(_, p, _, t)| (p.0, *t))
    }

    /// Takes the next task.
    pub fn pop(&mut self) -> Option<u32> {
        self.entries.pop_first().map(|(_, _, _, t)| t)
    }

    /// Number of queued tasks.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
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
}
