//! Read-only views of a shard for operators: task state and `explain`.

use std::collections::{BTreeMap, BinaryHeap};

use jiff::Timestamp;
use serde::Serialize;

use super::{Task, TaskValues, Tasks};
use crate::run::Run;
use crate::stamp;
use crate::task::{Hold, TaskState};
use crate::trigger::{Explain, Values};

/// A task as an operator sees it.
#[derive(Debug, Clone, Serialize)]
pub struct TaskView {
    /// Task id.
    pub id: String,
    /// Pool.
    pub pool: String,
    /// Priority.
    pub priority: i64,
    /// Lifecycle state.
    pub state: TaskState,
    /// Since when.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
    /// Consecutive failed attempts.
    pub failures: u32,
    /// End of a backoff or park.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_at: Option<Timestamp>,
    /// The run in flight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<Run>,
    /// Current values of the trigger's parameters.
    pub current: BTreeMap<String, Option<Timestamp>>,
    /// Values recorded at the last success.
    pub last_seen: BTreeMap<String, Timestamp>,
    /// Last success.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_success: Option<Timestamp>,
    /// A slot held for the task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold: Option<Hold>,
    /// Last error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The trigger as written.
    pub trigger: String,
    /// Each sub-trigger, true or false, with the values compared, at `now`.
    pub explain: Explain,
}

/// One line of a task listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskSummary {
    /// Task id.
    pub id: String,
    /// Pool.
    pub pool: String,
    /// Lifecycle state.
    pub state: TaskState,
    /// Since when.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
    /// Consecutive failed attempts.
    pub failures: u32,
    /// Last success.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_success: Option<Timestamp>,
}

/// Which tasks a listing (`GET /tasks`) asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// Only tasks in this state.
    pub state: Option<TaskState>,
    /// Only tasks of this pool.
    pub pool: Option<String>,
    /// Only tasks whose id sorts after this one (the last of the page
    /// before).
    pub after: Option<String>,
}

/// One page of a task listing: the first tasks by id that match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskPage {
    /// Tasks matching the state and pool, whatever `after`.
    pub total: usize,
    /// Of those, the tasks after `after`: more than the page holds when
    /// another page follows.
    pub remaining: usize,
    /// The first of those by id, at most the limit asked.
    pub tasks: Vec<TaskSummary>,
}

impl TaskPage {
    /// The pages of several shards as one page of at most `limit` tasks.
    pub fn merge(pages: impl IntoIterator<Item = TaskPage>, limit: usize) -> TaskPage {
        let mut merged = TaskPage::default();
        for page in pages {
            merged.total += page.total;
            merged.remaining += page.remaining;
            merged.tasks.extend(page.tasks);
        }
        merged.tasks.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        merged.tasks.truncate(limit);
        merged
    }

    /// Whether tasks after this page's last remain.
    pub fn more(&self) -> bool {
        self.remaining > self.tasks.len()
    }
}

/// Counts of what the engine did since it was built (for metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Trigger evaluations (on change, on return to idle, at the dispatch of
    /// a task queued in an earlier step).
    pub evaluated: u64,
    /// Evaluations that queued a task.
    pub fired: u64,
}

/// Queue depth and running runs of one pool (for metrics).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolStats {
    /// Pool name.
    pub pool: String,
    /// Tasks queued.
    pub queued: usize,
    /// Runs in flight.
    pub running: u32,
}

impl Tasks {
    /// The first `limit` tasks by id that `filter` asks for. A shard may
    /// hold millions of tasks and this runs on the thread that applies
    /// inputs: the walk allocates nothing for a task that is not listed.
    pub(in crate::engine) fn page(&self, filter: &TaskFilter, limit: usize) -> TaskPage {
        // No pool of that name here: `Some(None)`, and nothing matches.
        let pool = filter
            .pool
            .as_deref()
            .map(|name| self.pools.iter().position(|p| &*p.name == name));
        let mut page = TaskPage::default();
        // A max-heap of the first ids so far: its top goes when a smaller
        // one comes.
        let mut first: BinaryHeap<(&str, u32)> = BinaryHeap::new();
        for (i, task) in (0..self.count()).filter_map(|i| Some((i, self.task(i).ok()?))) {
            let listed = filter.state.is_none_or(|s| s == task.rt.slot.phase)
                && pool.is_none_or(|p| p == Some(task.def.pool()));
            if !listed {
                continue;
            }
            page.total += 1;
            let id = task.def.id();
            if filter.after.as_deref().is_some_and(|after| id <= after) {
                continue;
            }
            page.remaining += 1;
            if first.len() < limit {
                first.push((id, i));
            } else if first.peek().is_some_and(|&(top, _)| id < top) {
                first.pop();
                first.push((id, i));
            }
        }
        let mut first = first.into_vec();
        first.sort_unstable();
        page.tasks = first
            .into_iter()
            .filter_map(|(_, i)| self.task(i).ok())
            .map(|task| TaskSummary {
                id: String::from(task.def.id()),
                pool: self.pool_name(task.def.pool()),
                state: task.rt.slot.phase,
                since: stamp::get(task.rt.since),
                failures: task.rt.slot.failures,
                last_success: stamp::get(task.rt.last_success),
            })
            .collect();
        page
    }

    /// Every task's state and, once it succeeded, its id and last success,
    /// borrowed (the metrics export lists them all every few seconds, on
    /// the thread that applies inputs: no copies, and no definition or id
    /// read for a task that never succeeded).
    pub(in crate::engine) fn health(
        &self,
        range: std::ops::Range<usize>,
    ) -> impl Iterator<Item = (TaskState, Option<(&str, Timestamp)>)> + '_ {
        let part = self.tasks.get(range).unwrap_or_default();
        part.iter().map(|e| {
            let succeeded = stamp::get(e.rt.last_success)
                .and_then(|at| Some((self.defs.id(e.def as usize)?, at)));
            (e.rt.slot.phase, succeeded)
        })
    }

    fn pool_name(&self, p: usize) -> String {
        self.pools
            .get(p)
            .map(|p| p.name.to_string())
            .unwrap_or_default()
    }

    /// What the tasks did so far.
    pub(in crate::engine) fn stats(&self) -> Stats {
        self.stats
    }

    /// Per-pool queue depth and running count, pools with tasks in this shard only.
    pub(in crate::engine) fn pool_stats(&self) -> Vec<PoolStats> {
        // Not worked out from the tasks: a shard may hold millions, and
        // this runs every few seconds on the thread that applies inputs.
        self.pools
            .iter()
            .filter(|p| p.has_tasks)
            .map(|p| PoolStats {
                pool: p.name.to_string(),
                queued: p.queue.len(),
                running: p.running,
            })
            .collect()
    }

    /// The view of `task` at `now`, if this shard owns it.
    pub(in crate::engine) fn view(&self, task: &str, now: Timestamp) -> Option<TaskView> {
        let Task { def, rt } = self.task(self.find(task)?).ok()?;
        let values = TaskValues {
            table: &self.table,
            last: &rt.last_seen,
        };
        let name = |p: &crate::ctl::ParamId| String::from(self.table.name(*p).joined());
        // The trigger's ids are the configuration's.
        let global = |p: &crate::ctl::ParamId| self.table.global().name(*p);
        Some(TaskView {
            id: String::from(def.id()),
            pool: self.pool_name(def.pool()),
            priority: def.priority(),
            state: rt.slot.phase,
            since: stamp::get(rt.since),
            failures: rt.slot.failures,
            wake_at: rt.slot.wake_at(),
            run: rt.slot.run().cloned(),
            current: def
                .trigger
                .params()
                .into_iter()
                .map(|p| (String::from(global(p).joined()), values.current(p)))
                .collect(),
            last_seen: rt
                .last_seen
                .iter()
                .map(|(p, v)| (name(p), v.get()))
                .collect(),
            last_success: stamp::get(rt.last_success),
            hold: rt.rare().hold,
            last_error: rt.slot.last_error().map(str::to_string),
            trigger: def.trigger.to_dsl(&|p| String::from(global(p).joined())),
            explain: def.trigger.explain(&values, now, def.time_zone(), &|p| {
                String::from(global(p).joined())
            }),
        })
    }

    /// Ids of the tasks this shard owns, in declaration order.
    pub(in crate::engine) fn ids(&self) -> impl Iterator<Item = &str> {
        self.iter().map(|t| t.def.id())
    }
}
