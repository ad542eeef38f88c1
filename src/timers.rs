//! Timers as shard state: a set ordered by `(deadline, key)`, so firing
//! order is deterministic, with the earliest deadline kept beside it.
//!
//! Most timers are armed in order — a run's timeout is `now` plus the same
//! timeout, and the inputs of one poll batch share `now` — so the set is two
//! parts: a sorted run that such timers are appended to, and an ordered tree
//! for the others. Appending costs a comparison with the run's last timer,
//! where the tree walked down a dozen keys per level for every arm. A timer
//! cancelled inside the run is marked and dropped when it reaches the front
//! (or when the marked outnumber the live); its front is always live.
//!
//! A poll batch's inputs share `now` but come from several partitions, so
//! their timeouts share a deadline while their keys interleave: most went to
//! the tree. Timers armed at one deadline are therefore held aside until a
//! timer at another deadline is armed or the set is read, then placed in key
//! order, which appends them.

use std::cmp::Ordering;
use std::collections::{BTreeSet, VecDeque};

use jiff::Timestamp;

/// Deadlines of one shard.
#[derive(Debug, Clone)]
pub struct Timers<K: Ord> {
    /// Timers armed out of order.
    set: BTreeSet<(Timestamp, K)>,
    /// Timers armed in order, each after the one before; `false` marks one
    /// cancelled. Never starts with a cancelled one.
    run: VecDeque<(Timestamp, K, bool)>,
    /// Cancelled timers still in `run`.
    cancelled: usize,
    /// The earliest deadline, kept beside the set: asked before and after
    /// every input, where the set would walk down its leftmost path.
    first: Option<Timestamp>,
    /// Timers armed since the set was last read, all at one deadline, not
    /// yet placed (a key may be there twice).
    pending: Vec<(Timestamp, K)>,
}

impl<K: Ord> Default for Timers<K> {
    fn default() -> Self {
        Timers {
            set: BTreeSet::new(),
            run: VecDeque::new(),
            cancelled: 0,
            first: None,
            pending: Vec::new(),
        }
    }
}

impl<K: Ord + Clone> Timers<K> {
    /// Arms `key` at `at`.
    pub fn arm(&mut self, at: Timestamp, key: K) {
        if self.pending.first().is_some_and(|(held, _)| *held != at) {
            self.place_pending();
        }
        self.pending.push((at, key));
        if self.first.is_none_or(|first| at < first) {
            self.first = Some(at);
        }
    }

    /// Places the timers held aside, in key order (they share a deadline).
    fn place_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_unstable_by(|a, b| a.1.cmp(&b.1));
        for (at, key) in pending.drain(..) {
            self.place(at, key);
        }
        // Its room is kept for the next deadline's timers.
        self.pending = pending;
    }

    /// Puts `key` armed at `at` in the run or the tree (`first` is the
    /// caller's to keep).
    fn place(&mut self, at: Timestamp, key: K) {
        // After the run's last timer and the tree's (where it cannot be yet).
        let after_run = self
            .run
            .back()
            .is_none_or(|(last, last_key, _)| (at, &key) > (*last, last_key))
            && self
                .set
                .last()
                .is_none_or(|(last, last_key)| (at, &key) > (*last, last_key));
        if after_run {
            self.run.push_back((at, key, true));
        } else if let Ok(i) = self.find_in_run(at, &key) {
            if let Some(entry) = self.run.get_mut(i) {
                if !entry.2 {
                    entry.2 = true;
                    self.cancelled = self.cancelled.saturating_sub(1);
                }
            }
        } else {
            self.set.insert((at, key));
        }
    }

    /// Cancels `key` armed at `at`, if it is.
    pub fn cancel(&mut self, at: Timestamp, key: K) {
        self.place_pending();
        let removed = match self.find_in_run(at, &key) {
            Ok(i) => match self.run.get_mut(i) {
                Some(entry) if entry.2 => {
                    entry.2 = false;
                    self.cancelled += 1;
                    self.tidy_run();
                    true
                }
                _ => false,
            },
            Err(_) => self.set.remove(&(at, key)),
        };
        if removed && self.first == Some(at) {
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
        self.place_pending();
        let from_run = match (self.set.first(), self.run.front()) {
            (Some((at, key)), Some((run_at, run_key, _))) => (run_at, run_key) < (at, key),
            (None, Some(_)) => true,
            (_, None) => false,
        };
        let due = if from_run {
            let due = self.run.pop_front().map(|(at, key, _)| (at, key));
            self.tidy_run();
            due
        } else {
            self.set.pop_first()
        };
        self.first = self.earliest();
        due
    }

    /// Number of armed timers.
    pub fn len(&mut self) -> usize {
        self.place_pending();
        self.set.len() + self.run.len().saturating_sub(self.cancelled)
    }

    /// Whether none is armed.
    pub fn is_empty(&mut self) -> bool {
        self.len() == 0
    }

    fn earliest(&self) -> Option<Timestamp> {
        let set = self.set.first().map(|(at, _)| *at);
        let run = self.run.front().map(|(at, _, _)| *at);
        match (set, run) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Where `(at, key)` is or would be in the run.
    ///
    /// The timers cancelled most are the ones armed last (a run answered
    /// moments after its dispatch cancels its deadline): the search gallops
    /// back from the run's end first, through entries still in cache, and
    /// searches by halves only the span that leaves. A plain search by
    /// halves of a long run took a cache miss at nearly every probe.
    fn find_in_run(&self, at: Timestamp, key: &K) -> Result<usize, usize> {
        let target = (at, key);
        let cmp = |i: usize| match self.run.get(i) {
            Some((t, k, _)) => (*t, k).cmp(&target),
            None => Ordering::Greater,
        };
        // Every entry from `hi` on is after the target, every one before
        // `lo` before it.
        let (mut lo, mut hi) = (0, self.run.len());
        let mut step = 1usize;
        while hi > 0 {
            let i = hi.saturating_sub(step);
            match cmp(i) {
                Ordering::Equal => return Ok(i),
                Ordering::Greater => {
                    hi = i;
                    step = step.saturating_mul(2);
                }
                Ordering::Less => {
                    lo = i + 1;
                    break;
                }
            }
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match cmp(mid) {
                Ordering::Equal => return Ok(mid),
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
            }
        }
        Err(lo)
    }

    /// Drops cancelled timers from the front, and all of them once they
    /// outnumber the live ones (so that the sweeps cost amortised O(1) per
    /// cancel and the run holds at most about twice what is armed in it).
    fn tidy_run(&mut self) {
        while self.run.front().is_some_and(|(_, _, live)| !live) {
            self.run.pop_front();
            self.cancelled = self.cancelled.saturating_sub(1);
        }
        if self.cancelled > 16 && self.cancelled * 2 > self.run.len() {
            self.run.retain(|(_, _, live)| *live);
            self.cancelled = 0;
        }
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

    #[test]
    fn a_timer_in_the_tree_is_not_appended_to_the_run_again() {
        // Found by the property below: k0 cancelled at the run's front and
        // re-armed behind k1 goes to the tree; once k1 is cancelled too the
        // run is empty, and arming k0 again must not append a second k0.
        let at: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        let mut timers = Timers::default();
        timers.arm(at, 0u32);
        timers.arm(at, 1);
        timers.cancel(at, 0);
        timers.arm(at, 0);
        timers.cancel(at, 1);
        timers.arm(at, 0);
        assert_eq!(timers.len(), 1);
        assert_eq!(timers.pop_due(at), Some((at, 0)));
        assert_eq!(timers.pop_due(at), None);
    }

    #[test]
    fn timers_of_one_deadline_armed_out_of_key_order_are_appended() {
        // A poll batch's timeouts: one deadline, keys from four partitions
        // in turn; then the next batch's.
        let at: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        let later = at + jiff::SignedDuration::from_millis(3);
        let mut timers = Timers::default();
        for deadline in [at, later] {
            for partition in 0..4u32 {
                for i in 0..100 {
                    timers.arm(deadline, i * 4 + partition);
                }
            }
        }
        assert_eq!(timers.len(), 800);
        assert!(
            timers.set.is_empty(),
            "{} went to the tree",
            timers.set.len()
        );
        let fired: Vec<_> = std::iter::from_fn(|| timers.pop_due(later)).collect();
        let expected: Vec<_> = [at, later]
            .into_iter()
            .flat_map(|t| (0..400).map(move |k| (t, k)))
            .collect();
        assert_eq!(fired, expected);
    }

    proptest::proptest! {
        /// The earliest deadline kept beside the set is the set's first
        /// after any arms, cancels and pops, and deadlines come back exact.
        #[test]
        fn the_earliest_deadline_follows_the_set(ops in proptest::collection::vec((0u8..3, -5i64..5, 0i32..3, 0u8..4), 0..80)) {
            check_against_a_set(ops.into_iter().map(|(op, secs, nanos, key)| (op, secs, nanos, u32::from(key))));
        }

        /// Long runs armed in order, cancelled anywhere (re-armed after a
        /// cancel, cancelled twice) and popped, as run timeouts are: timers
        /// come back in `(deadline, key)` order, exactly those armed.
        #[test]
        fn timers_armed_in_order_fire_as_an_ordered_set(ops in proptest::collection::vec((0u8..5, 0i64..3, 0u32..40, proptest::num::usize::ANY), 0..600)) {
            let mut clock = 0i64;
            let mut armed: Vec<(i64, u32)> = Vec::new();
            let ops = ops.into_iter().map(|(op, step, key, pick)| {
                clock += step;
                let pick = armed.get(pick % armed.len().max(1)).copied();
                match (op, pick) {
                    // A cancel of a timer armed before, and a second arm.
                    (1, Some((at, key))) => (1, at, 0, key),
                    (2, Some((at, key))) => (0, at, 0, key),
                    (3, _) => (2, clock - 15, 0, key),
                    _ => {
                        armed.push((clock, key));
                        (0, clock, 0, key)
                    }
                }
            });
            check_against_a_set(ops.collect::<Vec<_>>().into_iter());
        }
    }

    /// Applies `(op, seconds, nanos, key)` — 0 arm, 1 cancel, 2 pop due —
    /// to timers and to an ordered set, and fails where they differ.
    fn check_against_a_set(ops: impl Iterator<Item = (u8, i64, i32, u32)>) {
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
                    assert_eq!(popped, due);
                }
            }
            assert_eq!(timers.next(), model.first().map(|(t, _)| *t));
            assert_eq!(timers.len(), model.len());
        }
        let end = base + jiff::SignedDuration::from_hours(1);
        let drained: Vec<_> = std::iter::from_fn(|| timers.pop_due(end)).collect();
        assert_eq!(drained, model.into_iter().collect::<Vec<_>>());
        assert!(timers.is_empty());
    }
}
