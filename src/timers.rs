//! Timers as shard state: an ordered set keyed by `(deadline, key)`, so the
//! earliest deadline is found in O(log n) and firing order is deterministic.

use std::collections::BTreeSet;

use jiff::Timestamp;

/// Deadlines of one shard.
#[derive(Debug, Clone)]
pub struct Timers<K: Ord> {
    set: BTreeSet<(Timestamp, K)>,
}

impl<K: Ord> Default for Timers<K> {
    fn default() -> Self {
        Timers {
            set: BTreeSet::new(),
        }
    }
}

impl<K: Ord + Clone> Timers<K> {
    /// Arms `key` at `at`.
    pub fn arm(&mut self, at: Timestamp, key: K) {
        self.set.insert((at, key));
    }

    /// Cancels `key` armed at `at`, if it is.
    pub fn cancel(&mut self, at: Timestamp, key: K) {
        self.set.remove(&(at, key));
    }

    /// Moves `key` from `old` (if armed) to `new` (if any).
    pub fn replace(&mut self, old: Option<Timestamp>, new: Option<Timestamp>, key: K) {
        if old == new {
            return;
        }
        if let Some(old) = old {
            self.cancel(old, key.clone());
        }
        if let Some(new) = new {
            self.arm(new, key);
        }
    }

    /// The earliest deadline.
    pub fn next(&self) -> Option<Timestamp> {
        self.set.first().map(|(at, _)| *at)
    }

    /// Takes the earliest timer due at or before `now`.
    pub fn pop_due(&mut self, now: Timestamp) -> Option<(Timestamp, K)> {
        if self.next()? <= now {
            self.set.pop_first()
        } else {
            None
        }
    }

    /// Number of armed timers.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether none is armed.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_in_deadline_then_key_order() {
        let t = |s: &str| s.parse::<Timestamp>().unwrap();
        let mut timers = Timers::default();
        timers.arm(t("2024-01-01T00:00:02Z"), 1u32);
        timers.arm(t("2024-01-01T00:00:01Z"), 3u32);
        timers.arm(t("2024-01-01T00:00:01Z"), 2u32);
        timers.replace(Some(t("2024-01-01T00:00:02Z")), None, 1);
        assert_eq!(timers.len(), 2);
        let now = t("2024-01-01T00:00:05Z");
        assert_eq!(timers.pop_due(now).map(|x| x.1), Some(2));
        assert_eq!(timers.pop_due(now).map(|x| x.1), Some(3));
        assert_eq!(timers.pop_due(now), None);
    }
}
