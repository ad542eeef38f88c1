//! The queue of one job type on one partition (seed 004): a double-ended
//! queue per priority, higher priority first, and below all of them the
//! same again for the low-priority lane (schedules, recoveries), which never
//! goes before live work.
//!
//! Deque order is kept as a number per entry: `back` takes the next number
//! above the entries of its lane and priority, `front` the next below. The
//! numbers depend only on what is queued, so a restored queue (each queued
//! step stores its [`Placement`]) hands out exactly the numbers the original
//! would, and a block of keys pushed to the front keeps its list order.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::Position;

/// The two lanes of a job queue.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Lane {
    /// Launches, submits, chains: always served first.
    #[default]
    Live,
    /// Schedules and recoveries: served only when no live step waits.
    Low,
}

/// Where a queued step sits in its job's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Placement {
    /// The lane.
    pub lane: Lane,
    /// Higher first within the lane.
    pub priority: i64,
    /// Deque order within lane and priority: lower first.
    pub order: i64,
}

type Entry = (Lane, Reverse<i64>, i64, u16, String);

/// The ready steps of one job type: `(process, key)` per entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobQueue {
    entries: BTreeSet<Entry>,
}

impl JobQueue {
    /// Places `n` entries at `position` of lane `lane` and `priority`; the
    /// `i`-th of them takes the returned placement's order `+ i`, so a block
    /// keeps its order at either end.
    pub fn reserve(
        &mut self,
        lane: Lane,
        priority: i64,
        position: Position,
        n: usize,
    ) -> Placement {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let from = (lane, Reverse(priority), i64::MIN, 0, String::new());
        let to = (lane, Reverse(priority), i64::MAX, u16::MAX, String::new());
        let mut segment = self.entries.range(from..=to);
        let order = match position {
            Position::Back => segment
                .next_back()
                .map_or(0, |(_, _, order, _, _)| order.saturating_add(1)),
            Position::Front => segment
                .next()
                .map_or(0, |(_, _, order, _, _)| *order)
                .saturating_sub(n),
        };
        Placement {
            lane,
            priority,
            order,
        }
    }

    /// Adds a step at a placement from [`JobQueue::reserve`] (or a restored one).
    pub fn insert(&mut self, at: Placement, process: u16, key: &str) {
        self.entries.insert(entry(at, process, key));
    }

    /// Removes a step, if it is queued at `at`.
    pub fn remove(&mut self, at: Placement, process: u16, key: &str) -> bool {
        self.entries.remove(&entry(at, process, key))
    }

    /// Takes the first step: live lane first, then priority, then order.
    pub fn pop(&mut self) -> Option<(Placement, u16, String)> {
        let (lane, priority, order, process, key) = self.entries.pop_first()?;
        Some((
            Placement {
                lane,
                priority: priority.0,
                order,
            },
            process,
            key,
        ))
    }

    /// Steps waiting per lane: `(live, low)`.
    pub fn depth(&self) -> (usize, usize) {
        let low = self
            .entries
            .range((Lane::Low, Reverse(i64::MAX), i64::MIN, 0, String::new())..)
            .count();
        (self.entries.len() - low, low)
    }

    /// Whether no step waits.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn entry(at: Placement, process: u16, key: &str) -> Entry {
    (
        at.lane,
        Reverse(at.priority),
        at.order,
        process,
        key.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(q: &mut JobQueue) -> Vec<String> {
        std::iter::from_fn(|| q.pop().map(|(_, _, k)| k)).collect()
    }

    #[test]
    fn front_pushes_run_first_latest_first_and_blocks_keep_their_order() {
        let mut q = JobQueue::default();
        for key in ["a", "b"] {
            let at = q.reserve(Lane::Live, 0, Position::Back, 1);
            q.insert(at, 0, key);
        }
        let at = q.reserve(Lane::Live, 0, Position::Front, 1);
        q.insert(at, 0, "f1");
        let block = q.reserve(Lane::Live, 0, Position::Front, 2);
        for (i, key) in ["x", "y"].into_iter().enumerate() {
            q.insert(
                Placement {
                    order: block.order + i as i64,
                    ..block
                },
                0,
                key,
            );
        }
        let at = q.reserve(Lane::Live, 0, Position::Back, 1);
        q.insert(at, 0, "c");
        assert_eq!(drain(&mut q), ["x", "y", "f1", "a", "b", "c"]);
    }

    #[test]
    fn priority_then_lane() {
        let mut q = JobQueue::default();
        let low = q.reserve(Lane::Low, 100, Position::Front, 1);
        q.insert(low, 0, "low");
        let p0 = q.reserve(Lane::Live, 0, Position::Back, 1);
        q.insert(p0, 0, "p0");
        let p5 = q.reserve(Lane::Live, 5, Position::Back, 1);
        q.insert(p5, 0, "p5");
        assert_eq!(q.depth(), (2, 1));
        assert_eq!(drain(&mut q), ["p5", "p0", "low"]);
    }

    #[test]
    fn a_block_at_the_back_keeps_its_order() {
        let mut q = JobQueue::default();
        let a = q.reserve(Lane::Live, 0, Position::Back, 1);
        q.insert(a, 0, "a");
        let block = q.reserve(Lane::Live, 0, Position::Back, 3);
        for (i, key) in ["x", "y", "z"].into_iter().enumerate() {
            q.insert(
                Placement {
                    order: block.order + i as i64,
                    ..block
                },
                0,
                key,
            );
        }
        let b = q.reserve(Lane::Live, 0, Position::Back, 1);
        q.insert(b, 0, "b");
        assert_eq!(drain(&mut q), ["a", "x", "y", "z", "b"]);
    }

    #[test]
    fn a_restored_queue_orders_new_pushes_around_the_old_ones() {
        let mut q = JobQueue::default();
        q.insert(
            Placement {
                lane: Lane::Live,
                priority: 0,
                order: -3,
            },
            0,
            "old_front",
        );
        q.insert(
            Placement {
                lane: Lane::Live,
                priority: 0,
                order: 7,
            },
            0,
            "old_back",
        );
        let f = q.reserve(Lane::Live, 0, Position::Front, 1);
        q.insert(f, 0, "new_front");
        let b = q.reserve(Lane::Live, 0, Position::Back, 1);
        q.insert(b, 0, "new_back");
        assert_eq!(
            drain(&mut q),
            ["new_front", "old_front", "old_back", "new_back"]
        );
    }
}
