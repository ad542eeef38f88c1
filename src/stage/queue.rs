//! A stage's queue on one partition: two lanes ordered by queue time, then
//! offer id. The live lane is always served before the rescan lane, so a
//! rescan that queues every offer never delays a change. That an offer is in
//! a stage's queue at most once is the slot's phase (`queued`); this type
//! only orders the entries that are ready to dispatch.

use std::collections::BTreeSet;

use jiff::Timestamp;

use super::Lane;

/// The ready entries of one stage queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StageQueue {
    live: BTreeSet<(Timestamp, String)>,
    rescan: BTreeSet<(Timestamp, String)>,
}

impl StageQueue {
    fn lane(&mut self, lane: Lane) -> &mut BTreeSet<(Timestamp, String)> {
        match lane {
            Lane::Live => &mut self.live,
            Lane::Rescan => &mut self.rescan,
        }
    }

    /// Adds an entry.
    pub fn push(&mut self, lane: Lane, queued_at: Timestamp, offer: &str) {
        self.lane(lane).insert((queued_at, offer.to_string()));
    }

    /// Removes an entry if present.
    pub fn remove(&mut self, lane: Lane, queued_at: Timestamp, offer: &str) -> bool {
        self.lane(lane).remove(&(queued_at, offer.to_string()))
    }

    /// Takes the next entry: the oldest live one, else the oldest rescan one.
    pub fn pop(&mut self) -> Option<(Lane, Timestamp, String)> {
        if let Some((at, offer)) = self.live.pop_first() {
            return Some((Lane::Live, at, offer));
        }
        self.rescan
            .pop_first()
            .map(|(at, offer)| (Lane::Rescan, at, offer))
    }

    /// Entries per lane: `(live, rescan)`.
    pub fn depth(&self) -> (usize, usize) {
        (self.live.len(), self.rescan.len())
    }

    /// Whether no entry is ready.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty() && self.rescan.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_lane_goes_first_then_age_then_id() {
        let t = |s: i64| Timestamp::from_second(s).unwrap();
        let mut q = StageQueue::default();
        q.push(Lane::Rescan, t(1), "r1");
        q.push(Lane::Live, t(5), "b");
        q.push(Lane::Live, t(5), "a");
        q.push(Lane::Live, t(9), "c");
        assert!(q.remove(Lane::Live, t(9), "c"));
        assert_eq!(q.depth(), (2, 1));
        let order: Vec<String> = std::iter::from_fn(|| q.pop()).map(|e| e.2).collect();
        assert_eq!(order, ["a", "b", "r1"]);
        assert!(q.is_empty());
    }
}
