//! Timers as shard state: an ordered set keyed by `(deadline, key)`, so
//! firing order is deterministic, with the earliest deadline kept beside it.

use std::collections::BTreeSet;

use jiff::Timestamp;

/// Deadlines of one shard.
#[derive(Debug, Clone)]
pub struct Timers<K: Ord> {
    set: BTreeSet<(Timestamp, K)>,
    /// The earliest deadline, kept beside the set: asked before and after
    /// every input, where the set would walk down its leftmost path.
    first: Option<Timestamp>,
}

impl<K: Ord> Default for Timers<K> {
    fn default() -> Self {
        Timers {
            set: BTreeSet::new(),
            first: None,
        }
    }
}

impl<K: Ord + Clone> Timers<K> {
    /// Arms `key` at `at`.
    pub fn arm(&mut self, at: Timestamp, key: K) {
        self.set.insert((at, key));
        if self.first.is_none_or(|first| at < first) {
            self.first = Some(at);
        }
    }

    /// Cancels `key` armed at `at`, if it is.
    pub fn cancel(&mut self, at: Timestamp, key: K) {
        if self.set.remove(&(at, key)) && self.first == Some(at) {
            self.first = self.earliest();
        }
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
        self.first
    }

    /// Takes the earliest timer due at or before `now`.
    pub fn pop_due(&mut self, now: Timestamp) -> Option<(Timestamp, K)> {
        if self.first? > now {
            return None;
        }
        let due = self.set.pop_first();
        self.first = self.earliest();
        due
    }

    /// Number of armed timers.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether none is armed.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    fn earliest(&self) -> Option<Timestamp> {
        self.set.first().map(|(at, _)| *at)
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

    proptest::proptest! {
        /// The earliest deadline kept beside the set is the set's first
        /// after any arms, cancels and pops, and deadlines come back exact.
        #[test]
        fn the_earliest_deadline_follows_the_set(ops in proptest::collection::vec((0u8..3, -5i64..5, 0i32..3, 0u8..4), 0..80)) {
            let base: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
            let mut timers = Timers::default();
            let mut model = std::collections::BTreeSet::new();
            for (op, secs, nanos, key) in ops {
                let at = base + jiff::SignedDuration::new(secs, nanos);
                match op {
                    0 => {
                        timers.arm(at, key);
                        model.insert((at, key));
                    }
                    1 => {
                        timers.cancel(at, key);
                        model.remove(&(at, key));
                    }
                    _ => {
                        let popped = timers.pop_due(at);
                        let due = model.first().copied().filter(|(t, _)| *t <= at);
                        if let Some(first) = due {
                            model.remove(&first);
                        }
                        proptest::prop_assert_eq!(popped, due);
                    }
                }
                proptest::prop_assert_eq!(timers.next(), model.first().map(|(t, _)| *t));
                proptest::prop_assert_eq!(timers.len(), model.len());
            }
        }
    }
}
