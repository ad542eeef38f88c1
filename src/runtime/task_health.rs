//! Task health exported a part at a time: the per-state counts and the
//! stalest tasks' seconds since success need a walk over every task, and an
//! instance of millions of tasks walked them in one go every
//! [`super::METRICS_INTERVAL`], pausing its shards for tens of
//! milliseconds (seen as the p99 of dispatch). A pass walks at most
//! [`PART`] tasks per commit round, shard after shard, and starts again an
//! interval after the last one started.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use jiff::Timestamp;

use super::intake::Shard;
use crate::metrics::{TaskAges, TaskHealth};

/// Tasks walked per call: about a millisecond's work, so that a pass over
/// a few million tasks takes about a metrics interval of commit rounds.
pub(super) const PART: usize = 65_536;

/// A walk over every task of the shards owned when it began.
#[derive(Debug)]
pub(super) struct HealthPass {
    /// Shards still to walk, the first one under way.
    shards: Vec<i32>,
    /// The next task of the first shard.
    at: usize,
    /// What the pass counted so far.
    sum: TaskHealth,
}

impl HealthPass {
    /// A pass over `shards`, keeping as many of the stalest tasks as
    /// `ages` exports.
    pub(super) fn new(shards: impl IntoIterator<Item = i32>, ages: &TaskAges) -> HealthPass {
        HealthPass {
            shards: shards.into_iter().collect(),
            at: 0,
            sum: TaskHealth::new(ages),
        }
    }

    /// Walks the next `budget` tasks of `owned` at `now` (a shard given up
    /// meanwhile is skipped, one assigned meanwhile waits for the next
    /// pass); at the end of the pass, gives what it counted.
    pub(super) fn step(
        &mut self,
        owned: &BTreeMap<i32, Shard>,
        mut budget: usize,
        now: Timestamp,
    ) -> Option<TaskHealth> {
        while budget > 0 {
            let Some(&p) = self.shards.first() else {
                break;
            };
            let Some(shard) = owned.get(&p) else {
                self.next_shard();
                continue;
            };
            let engine = shard.engine();
            let end = self.at.saturating_add(budget).min(engine.task_count());
            self.sum.add(engine.task_health(self.at..end), now);
            // `end` is at most `budget` tasks on (none when a shard came
            // back smaller than where the pass stood).
            budget -= end.saturating_sub(self.at);
            if end >= engine.task_count() {
                self.next_shard();
            } else {
                self.at = end;
            }
        }
        self.shards
            .is_empty()
            .then(|| std::mem::take(&mut self.sum))
    }

    fn next_shard(&mut self) {
        if !self.shards.is_empty() {
            self.shards.remove(0);
        }
        self.at = 0;
    }
}

/// When the runtime's passes run: one at a time, each an interval after
/// the one before began.
#[derive(Debug)]
pub(super) struct HealthPasses {
    pass: Option<HealthPass>,
    began: Instant,
    /// Where each pass publishes the stalest tasks.
    ages: Arc<TaskAges>,
}

impl HealthPasses {
    /// No pass yet; the first begins an interval from now.
    pub(super) fn new(ages: Arc<TaskAges>) -> HealthPasses {
        HealthPasses {
            pass: None,
            began: Instant::now(),
            ages,
        }
    }

    /// Goes on with the pass under way, or begins one over `owned` when an
    /// interval has passed since the last began.
    pub(super) fn step(&mut self, owned: &BTreeMap<i32, Shard>, now: Timestamp) {
        if self.pass.is_none() {
            if self.began.elapsed() < super::METRICS_INTERVAL {
                return;
            }
            self.began = Instant::now();
            self.pass = Some(HealthPass::new(owned.keys().copied(), &self.ages));
        }
        if let Some(pass) = &mut self.pass {
            if let Some(sum) = pass.step(owned, PART, now) {
                sum.finish(&self.ages);
                self.pass = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config;
    use crate::router::Router;
    use crate::shell::driver::Driver;
    use crate::task::TaskState;

    /// Two shards of 300 tasks walked 250 at a time: the pass ends at the
    /// third part, having counted each task once; a shard given up during
    /// the pass is skipped.
    #[test]
    fn a_pass_walks_every_task_once_a_part_at_a_time() {
        let mut text = String::new();
        for i in 0..600 {
            text.push_str(&format!(
                "[[pool]]\nname = \"p{i}\"\n[[task]]\nid = \"t{i}\"\npool = \"p{i}\"\ntrigger = \"delta(a/x{i}, 1h)\"\n"
            ));
        }
        let config = config::parse(&text, "health.toml").unwrap().config;
        let router = Router::new(&config, 2);
        let shard = |p| {
            let engine = Driver::empty_shard(&config, &router, p).unwrap();
            let driver = Driver::restored(&router, p, engine, std::iter::empty()).unwrap();
            Shard::new(driver, BTreeMap::new())
        };
        let mut owned: BTreeMap<i32, Shard> = [(0, shard(0)), (1, shard(1))].into();
        let total: usize = owned.values().map(|s| s.engine().task_count()).sum();
        assert_eq!(total, 600);
        let now = Timestamp::UNIX_EPOCH;
        let ages = TaskAges::new(10);
        let mut pass = HealthPass::new(owned.keys().copied(), &ages);
        let mut parts = 1;
        let sum = loop {
            if let Some(sum) = pass.step(&owned, 250, now) {
                break sum;
            }
            parts += 1;
        };
        assert_eq!(parts, 3);
        assert_eq!(sum.count(TaskState::Idle), 600);
        let first = owned.get(&0).unwrap().engine().task_count();
        let mut pass = HealthPass::new(owned.keys().copied(), &ages);
        assert!(pass.step(&owned, 1, now).is_none());
        owned.remove(&0);
        let sum = pass.step(&owned, 10_000, now).unwrap();
        assert_eq!(sum.count(TaskState::Idle), 1 + (600 - first));
    }
}
