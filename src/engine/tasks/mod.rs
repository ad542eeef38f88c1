//! Reactive tasks inside a shard (seed 000, DESIGN §4-§5): the CTL table and
//! its inverted index, the pool queues with holds, and each task's run slot.
//!
//! The run lifecycle itself is [`crate::run::RunSlot`]; this half adds the
//! task's hooks: the trigger check before dispatch, the snapshot a run
//! carries, last-seen values recorded on success, the staleness SLA, pause.

mod holds;
mod ops;
mod record;
mod runs;
mod seek;
mod seen;
mod view;

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;

use super::{bug, Error};
use crate::action::Action;
use crate::changelog::{ChangelogRecord, Store, Value};
use crate::config::{Config, TaskList, TaskRef};
use crate::ctl::{CtlTable, ParamId, ParamName, Postings};
use crate::duration::Duration;
use crate::run::{Alarms, Due, RunSlot};
use crate::stamp::{self, Stamp};
use crate::task::{Hold, InPlace, PoolQueue, TaskRecord, TaskState};
use crate::timers::Timers;

use seen::Seen;

pub(super) use runs::TaskValues;
pub use view::{PoolStats, Stats, TaskFilter, TaskPage, TaskSummary, TaskView};

/// A task's runtime state (parameters by id).
#[derive(Debug, Clone, Default, PartialEq)]
struct TaskRt {
    /// The run lifecycle: phase, run in flight, counters, wake, last error.
    slot: RunSlot,
    // Timestamps as `Stamp`s: 12 bytes each, optional or not, where
    // `Option<Timestamp>` takes 24 (a shard holds millions of tasks).
    since: Option<Stamp>,
    last_seen: Seen,
    last_success: Option<Stamp>,
    /// What a queued or running task carries and what few tasks carry
    /// (see [`Cold`]); `None` while none of it is set (from the end of the
    /// step that emptied it).
    cold: Option<Box<Cold>>,
}

/// The parts of a task's state most tasks do not hold most of the time,
/// behind one pointer in the task (a shard holds millions of tasks, most of
/// them idle and setting none of the rare part).
#[derive(Debug, Clone, Default, PartialEq)]
struct Cold {
    /// Set while queued or running.
    flight: Flight,
    /// Set by few tasks; `None` while all of it is unset.
    rare: Option<Box<Rare>>,
}

/// What a task carries only while it is queued or running, kept apart: most
/// of a shard's tasks are idle most of the time.
#[derive(Debug, Clone, Default, PartialEq)]
struct Flight {
    /// When it was queued (while queued).
    queued_at: Option<Stamp>,
    /// The values its run was dispatched with (while running): what
    /// becomes its last-seen values when the run succeeds.
    snapshot: Seen,
}

/// The part of a task's state only some tasks ever set (an SLA, a hold, a
/// launch, a recovery, a cron schedule, a pause), kept apart: a shard holds
/// up to millions of tasks, most of which set none of it.
#[derive(Debug, Clone, Default, PartialEq)]
struct Rare {
    sla_due: Option<Timestamp>,
    hold: Option<Hold>,
    pause_requested: bool,
    /// Launched (run now): its parameters; the trigger is not checked. Kept
    /// through retries until the run succeeds or dies.
    launch: Option<BTreeMap<String, String>>,
    /// A launch that came while running, under `conflict = "queue"`.
    again: Option<BTreeMap<String, String>>,
    /// When the task's cron `schedule` next fires.
    cron_at: Option<Timestamp>,
    /// What caused the current run (`op:ID`: a recovery, queued in the
    /// pool's low-priority lane); cleared when it succeeds or dies.
    source: Option<String>,
}

/// What a task without a [`Rare`] part reads.
static UNSET: Rare = Rare {
    sla_due: None,
    hold: None,
    pause_requested: false,
    launch: None,
    again: None,
    cron_at: None,
    source: None,
};

impl TaskRt {
    /// The rarely set part (all unset when there is none).
    fn rare(&self) -> &Rare {
        self.cold
            .as_ref()
            .and_then(|c| c.rare.as_deref())
            .unwrap_or(&UNSET)
    }

    /// The rarely set part, to set something in it.
    fn rare_mut(&mut self) -> &mut Rare {
        self.cold
            .get_or_insert_with(Box::default)
            .rare
            .get_or_insert_with(Box::default)
    }

    /// The rarely set part if there is one: to clear something in it.
    fn rare_set(&mut self) -> Option<&mut Rare> {
        self.cold.as_deref_mut()?.rare.as_deref_mut()
    }

    /// The in-flight part, to set something in it.
    fn flight_mut(&mut self) -> &mut Flight {
        &mut self.cold.get_or_insert_with(Box::default).flight
    }

    /// When it was queued, while it is.
    fn queued_at(&self) -> Option<Stamp> {
        self.cold.as_ref().and_then(|c| c.flight.queued_at)
    }

    /// Sets or clears when it was queued.
    fn set_queued_at(&mut self, at: Option<Stamp>) {
        if at.is_some() || self.cold.is_some() {
            self.flight_mut().queued_at = at;
        }
    }

    /// The values its run was dispatched with, while it runs.
    fn snapshot(&self) -> &[(ParamId, Stamp)] {
        self.cold.as_ref().map_or(&[], |c| &c.flight.snapshot)
    }

    /// Sets the values its run is dispatched with.
    fn set_snapshot(&mut self, snapshot: Seen) {
        if !snapshot.is_empty() || self.cold.is_some() {
            self.flight_mut().snapshot = snapshot;
        }
    }

    /// Takes the values its run was dispatched with.
    fn take_snapshot(&mut self) -> Seen {
        self.cold
            .as_mut()
            .map(|c| std::mem::take(&mut c.flight.snapshot))
            .unwrap_or_default()
    }

    /// Drops the rarely set and in-flight parts once nothing in them is set
    /// (at the end of a step: a task queued and dispatched in one step
    /// allocates its cold part once).
    fn tidy(&mut self) {
        let Some(cold) = self.cold.as_deref_mut() else {
            return;
        };
        if cold.rare.as_deref() == Some(&UNSET) {
            cold.rare = None;
        }
        if cold.rare.is_none() && cold.flight.queued_at.is_none() && cold.flight.snapshot.is_empty()
        {
            self.cold = None;
        }
    }
}

/// A shard's entry for one task: which of the configuration's tasks it is
/// (an index into [`Config::tasks`], shared by every shard, rather than a
/// pointer counted per task) and its runtime state.
#[derive(Debug, Clone)]
struct Entry {
    def: u32,
    /// Changed in the current step; not part of the record.
    dirty: bool,
    /// Queued by its trigger in the current step, on values that have not
    /// changed since (a step sets at most one CTL value, before it asks any
    /// trigger, and a set clears this): its dispatch need not ask again.
    /// Implies `dirty`; not part of the record.
    fresh: bool,
    rt: TaskRt,
}

/// One task as the shard reads it: its definition (the configuration's;
/// its trigger names parameters by the configuration's ids, which the
/// shard's table maps to its own, [`CtlTable::of_global`]) and its state.
#[derive(Debug, Clone, Copy)]
struct Task<'a> {
    def: TaskRef<'a>,
    rt: &'a TaskRt,
}

/// [`Task`], to change its state.
#[derive(Debug)]
struct TaskMut<'a> {
    def: TaskRef<'a>,
    rt: &'a mut TaskRt,
}

/// A pool's limit and live counts.
#[derive(Debug, Clone)]
pub(in crate::engine) struct PoolRt {
    /// Shared with every run command of the pool (the key its reply must
    /// carry), where a copy each was allocated and freed per run.
    pub(in crate::engine) name: Arc<str>,
    pub(in crate::engine) max_running: Option<u32>,
    hold_max: Duration,
    pub(in crate::engine) running: u32,
    queue: PoolQueue,
    /// Tasks of this pool holding a slot.
    holds: Vec<u32>,
    /// Needs a dispatch pass at the end of the step.
    pending: bool,
    /// Some task of the shard is in this pool (its gauges are the shard's
    /// to export): set once, when the shard is built.
    has_tasks: bool,
}

/// What a timer is for; with the task index it keys the timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum TimerKind {
    /// The current pass times out.
    RunTimeout,
    /// A backoff or park ends.
    Wake,
    /// A queue hold reaches `hold_max`.
    Hold,
    /// The staleness SLA is due.
    Sla,
    /// The cron `schedule` fires.
    Cron,
}

/// The run slot's view of one task's timers.
struct TaskAlarms<'a> {
    timers: &'a mut Timers<(TimerKind, u32)>,
    task: u32,
}

impl Alarms for TaskAlarms<'_> {
    fn arm(&mut self, due: Due, at: Timestamp) {
        self.timers.arm(at, (kind(due), self.task));
    }

    fn cancel(&mut self, due: Due, at: Timestamp) {
        self.timers.cancel(at, (kind(due), self.task));
    }
}

#[cfg(test)]
impl Tasks {
    /// The pools, for invariant checks.
    pub(in crate::engine) fn pool_list(&self) -> impl Iterator<Item = &PoolRt> {
        self.pools.iter()
    }

    /// Every task's run slot, in declaration order.
    pub(in crate::engine) fn slots(&self) -> impl Iterator<Item = &RunSlot> {
        self.tasks.iter().map(|e| &e.rt.slot)
    }

    /// Tasks holding a rarely set part.
    pub(in crate::engine) fn with_rare_part(&self) -> usize {
        self.tasks
            .iter()
            .filter(|e| e.rt.cold.as_ref().is_some_and(|c| c.rare.is_some()))
            .count()
    }
}

/// The definition `e` names.
#[inline]
fn def_of<'a>(defs: &'a TaskList, e: &Entry) -> Result<TaskRef<'a>, Error> {
    match defs.get(e.def as usize) {
        Some(def) => Ok(def),
        None => Err(no_def(e.def)),
    }
}

// Out of line: `task` and `def_of` are called many times per input, and a
// formatted message inlined into each caller made every call long.
#[cold]
#[inline(never)]
fn no_def(def: u32) -> Error {
    bug(format!("no task definition #{def}"))
}

#[cold]
#[inline(never)]
fn no_task(i: u32) -> Error {
    bug(format!("no task #{i}"))
}

fn kind(due: Due) -> TimerKind {
    match due {
        Due::Deadline => TimerKind::RunTimeout,
        Due::Wake => TimerKind::Wake,
    }
}

/// The task half of a shard.
#[derive(Debug, Clone)]
pub(super) struct Tasks {
    table: CtlTable,
    /// The configuration's tasks, which entries name by index.
    defs: Arc<TaskList>,
    /// In the order of the configuration's list (found by id through its
    /// index, then by `def`).
    tasks: Vec<Entry>,
    /// Parameter → tasks whose trigger references it.
    index: Postings<u32>,
    /// Parameter → tasks that produce it.
    producers: Postings<u32>,
    pools: Vec<PoolRt>,
    timers: Timers<(TimerKind, u32)>,
    dirty: Vec<u32>,
    pending_pools: Vec<usize>,
    out: Vec<Action>,
    /// Keys restored from the changelog that no owned task has: tombstoned at start.
    orphans: Vec<String>,
    stats: Stats,
}

impl Tasks {
    /// The tasks of `config` whose pool name `owns` accepts.
    pub(super) fn new(config: &Config, owns: impl Fn(&str) -> bool) -> Tasks {
        let pools: Vec<PoolRt> = config
            .pools
            .iter()
            .map(|p| PoolRt {
                name: Arc::from(p.name.as_str()),
                max_running: p.max_running,
                hold_max: p.hold_max,
                running: 0,
                queue: PoolQueue::default(),
                holds: Vec::new(),
                pending: false,
                has_tasks: false,
            })
            .collect();
        // Asked once a pool, not once a task.
        let owned_pools: Vec<bool> = pools.iter().map(|p| owns(&p.name)).collect();
        // The shard's tasks, found and taken in one pass over every
        // configured task, each definition read once (at a million tasks
        // every read of one is a cache miss): each parameter a trigger
        // reads, once per task, and each it produces, by the configuration's
        // id until the table is built from them all (its local ids follow
        // the global ones, see `CtlTable`). Sized once from the owned pools'
        // counts: a vector grown by doubling leaves up to half its room
        // unused. Most tasks name one parameter: room for that at once.
        let owned = owned_pools
            .iter()
            .enumerate()
            .filter(|&(_, &owned)| owned)
            .map(|(p, _)| config.tasks.in_pool(p))
            .sum();
        let mut tasks = Vec::with_capacity(owned);
        let mut index: Vec<(ParamId, u32)> = Vec::with_capacity(owned);
        let mut producers: Vec<(ParamId, u32)> = Vec::new();
        let mut used = vec![false; pools.len()];
        for (def, t) in (0u32..).zip(config.tasks.iter()) {
            if owned_pools.get(t.pool()).copied() != Some(true) {
                continue;
            }
            if let Some(u) = used.get_mut(t.pool()) {
                *u = true;
            }
            // A shard holds far fewer than 2^32 tasks: the configuration
            // would not fit in memory first.
            let i = u32::try_from(tasks.len()).unwrap_or(u32::MAX);
            let first = index.len();
            t.trigger.for_each_param(&mut |&global| {
                let entry = (global, i);
                if !index
                    .get(first..)
                    .is_some_and(|listed| listed.contains(&entry))
                {
                    index.push(entry);
                }
            });
            producers.extend(t.extra().produces.iter().map(|&global| (global, i)));
            tasks.push(Entry {
                def,
                dirty: false,
                fresh: false,
                rt: TaskRt::default(),
            });
        }
        let named = index.iter().chain(&producers).map(|&(global, _)| global);
        let mut table = CtlTable::with_globals(Arc::clone(&config.params), named);
        for (id, _) in index.iter_mut().chain(producers.iter_mut()) {
            *id = table.intern_global(*id);
        }
        table.shrink_to_fit();
        let mut pools = pools;
        for (p, used) in pools.iter_mut().zip(used) {
            p.has_tasks = used;
        }
        Tasks {
            table,
            defs: Arc::clone(&config.tasks),
            tasks,
            index: Postings::build(index),
            producers: Postings::build(producers),
            pools,
            timers: Timers::default(),
            dirty: Vec::new(),
            pending_pools: Vec::new(),
            out: Vec::new(),
            orphans: Vec::new(),
            stats: Stats::default(),
        }
    }

    /// Restores one `task/<id>` record (last write wins).
    pub(super) fn restore(&mut self, record: ChangelogRecord) -> Result<(), Error> {
        let value = match record.value {
            Some(Value::Task(r)) => Some(*r),
            Some(Value::TaskEncoded(bytes)) => Some(
                crate::codec::decode_task_record(&bytes).map_err(|e| Error::BadRecord {
                    store: Store::Task.as_str(),
                    key: record.key.as_str().to_owned(),
                    message: e.to_string(),
                })?,
            ),
            None => None,
            Some(other) => {
                return Err(super::bad_value(&ChangelogRecord {
                    value: Some(other),
                    ..record
                }))
            }
        };
        self.restore_task(&record.key, value, InPlace::default())
    }

    /// Restores task `key` as `record` holds it (`None`: a tombstone).
    pub(super) fn restore_task(
        &mut self,
        key: &str,
        record: Option<TaskRecord>,
        placed: InPlace<'_>,
    ) -> Result<(), Error> {
        let Some(i) = self.find(key) else {
            if record.is_some() {
                self.orphans.push(key.to_string());
            } else {
                self.orphans.retain(|k| k != key);
            }
            return Ok(());
        };
        let rt = match record {
            Some(r) => self.rt_from_record(i, key, r, placed)?,
            None => TaskRt::default(),
        };
        *self.task_mut(i)?.rt = rt;
        Ok(())
    }

    /// Sets a CTL value without evaluating anything: restoring the global table.
    pub(super) fn load_ctl(&mut self, name: &ParamName, value: Timestamp) {
        // As in `apply_ctl`: only the parameters this shard's tasks name.
        let name = name.parts();
        if let Some(id) = self.table.id(name.entity, name.param) {
            self.table.set(id, value);
        }
    }

    /// Starts the tasks at `now`: tombstones orphans, arms staleness SLAs and
    /// evaluates every idle task once (after a restore this fires exactly
    /// what is due).
    pub(super) fn start(&mut self, now: Timestamp) -> Result<(), Error> {
        self.orphans.sort();
        self.orphans.dedup();
        for key in std::mem::take(&mut self.orphans) {
            self.out.push(Action::Changelog(ChangelogRecord {
                store: Store::Task,
                key: key.into(),
                value: None,
            }));
        }
        for i in 0..self.count() {
            let task = self.task_mut(i)?;
            if let (Some(every), None) = (task.def.extra().expect_every, task.rt.rare().sla_due) {
                let due = crate::run::add(now, every.get());
                task.rt.rare_mut().sla_due = Some(due);
                self.timers.arm(due, (TimerKind::Sla, i));
                self.mark(i)?;
            }
            let task = self.task_mut(i)?;
            if let (Some(cron), None) = (&task.def.extra().schedule, task.rt.rare().cron_at) {
                if let Some(at) = cron.next_after(now, task.def.time_zone()) {
                    task.rt.rare_mut().cron_at = Some(at);
                    self.timers.arm(at, (TimerKind::Cron, i));
                    self.mark(i)?;
                }
            }
            self.consider(i, now)?;
        }
        for p in 0..self.pools.len() {
            self.pending(p)?;
        }
        Ok(())
    }

    /// Sets the value of the parameter the router knows as `named` without
    /// evaluating anything: restoring the global table.
    pub(super) fn load_named(&mut self, named: ParamId, value: Timestamp) {
        if let Some(id) = self.table.of_global(named) {
            self.table.set(id, value);
        }
    }

    /// Applies a CTL change to the parameter the router knows as `named`
    /// (the router's ids are the configuration's: [`Config::params`]).
    pub(super) fn apply_named(
        &mut self,
        named: ParamId,
        value: Timestamp,
        now: Timestamp,
    ) -> Result<(), Error> {
        match self.table.of_global(named) {
            Some(id) => self.apply_param(id, value, now),
            None => Ok(()),
        }
    }

    /// Fetches into the cache, stage after stage, what applying a change of
    /// each of `named` will read first: the word that maps its id to the
    /// shard's, then its value and the head of its tasks, then those tasks
    /// and their definitions. With millions of tasks each of these misses
    /// the cache; one stage for a batch at a time overlaps a batch's misses,
    /// where applying the changes one after another waits for each alone.
    pub(super) fn prefetch_named(&self, named: &[ParamId]) {
        for &global in named {
            self.table.prefetch_global(global);
        }
        for &global in named {
            if let Some(id) = self.table.of_global(global) {
                self.table.prefetch_value(id);
                self.index.prefetch(id);
            }
        }
        for &global in named {
            if let Some(id) = self.table.of_global(global) {
                for &i in self.index.of(id) {
                    prefetch_index::prefetch_index(&self.tasks, i as usize);
                }
            }
        }
        for &global in named {
            if let Some(id) = self.table.of_global(global) {
                for &i in self.index.of(id) {
                    if let Some(e) = self.tasks.get(i as usize) {
                        self.defs.prefetch(e.def as usize);
                    }
                }
            }
        }
    }

    /// Applies a CTL change by name.
    pub(super) fn apply_ctl(
        &mut self,
        entity: &str,
        param: &str,
        value: Timestamp,
        now: Timestamp,
    ) -> Result<(), Error> {
        // A parameter no task of this shard names (its triggers and
        // `produces` were interned at construction) decides nothing here:
        // not interning it keeps the hot path free of allocation, and every
        // shard from holding the whole global table.
        match self.table.id(entity, param) {
            Some(id) => self.apply_param(id, value, now),
            None => Ok(()),
        }
    }

    /// Applies a CTL change: the hot path, touching only the tasks that
    /// reference the parameter.
    fn apply_param(&mut self, id: ParamId, value: Timestamp, now: Timestamp) -> Result<(), Error> {
        // Tasks queued earlier in this step (none, as steps go) were asked
        // on the values before this one: their dispatch asks again.
        for &i in &self.dirty {
            if let Some(e) = self.tasks.get_mut(i as usize) {
                e.fresh = false;
            }
        }
        let previous = self.table.set(id, value);
        if previous == Some(value) {
            return Ok(());
        }
        let moved_back = previous.filter(|p| value < *p);
        let n = self.index.of(id).len();
        for k in 0..n {
            let Some(&i) = self.index.of(id).get(k) else {
                break;
            };
            if let Some(previous) = moved_back {
                let task = String::from(self.task(i)?.def.id());
                let name = self.table.name(id);
                self.out
                    .push(Action::Event(crate::action::Event::CtlMovedBack {
                        task,
                        entity: name.entity.to_string(),
                        param: name.param.to_string(),
                        previous,
                        value,
                    }));
            }
            self.consider(i, now)?;
            self.settle_hold(i, now)?;
        }
        Ok(())
    }

    /// Fires every task timer due at or before `now`.
    pub(super) fn tick(&mut self, now: Timestamp) -> Result<(), Error> {
        while let Some((at, (kind, i))) = self.timers.pop_due(now) {
            self.on_timer(kind, i, at, now)?;
        }
        Ok(())
    }

    pub(super) fn next_deadline(&self) -> Option<Timestamp> {
        self.timers.next()
    }

    /// Ends a step: dispatches what the pools allow, then writes the
    /// changelog records of every task the step changed.
    pub(super) fn finish(&mut self, now: Timestamp, out: &mut Vec<Action>) -> Result<(), Error> {
        while let Some(p) = self.pending_pools.pop() {
            self.pool_mut(p)?.pending = false;
            self.pump(p, now)?;
        }
        out.append(&mut self.out);
        // The list goes back once written: a fresh one every step would be
        // an allocation per step.
        let mut dirty = std::mem::take(&mut self.dirty);
        let written = dirty.drain(..).try_for_each(|i| {
            let e = self.tasks.get_mut(i as usize).ok_or_else(|| no_task(i))?;
            e.dirty = false;
            e.fresh = false;
            e.rt.tidy();
            out.push(Action::Changelog(self.encoded(i)?));
            Ok(())
        });
        self.dirty = dirty;
        written
    }

    /// Moves the decisions taken so far to `out`.
    pub(super) fn drain(&mut self, out: &mut Vec<Action>) {
        out.append(&mut self.out);
    }

    /// Drops what a failed step left half done: its outputs and dirty marks.
    /// (The caller rebuilds the shard from its changelog.)
    pub(super) fn abandon(&mut self) {
        self.out.clear();
        for i in std::mem::take(&mut self.dirty) {
            if let Some(e) = self.tasks.get_mut(i as usize) {
                e.dirty = false;
                e.fresh = false;
            }
        }
        for p in std::mem::take(&mut self.pending_pools) {
            if let Some(pool) = self.pools.get_mut(p) {
                pool.pending = false;
            }
        }
    }

    /// Number of tasks owned.
    pub(super) fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether `task` is owned here.
    pub(super) fn has(&self, task: &str) -> bool {
        self.find(task).is_some()
    }

    /// The records a restore must reproduce, in declaration order.
    pub(super) fn snapshot(&self) -> Vec<ChangelogRecord> {
        (0..self.count())
            .filter_map(|i| self.record(i).ok())
            .collect()
    }

    fn count(&self) -> u32 {
        u32::try_from(self.tasks.len()).unwrap_or(u32::MAX)
    }

    /// The index of the task with id `id`.
    fn find(&self, id: &str) -> Option<u32> {
        // Entries follow the configuration's order, so a shard keeps no
        // index by id of its own.
        let def = u32::try_from(self.defs.find(id)?).ok()?;
        let i = seek::seek(&self.tasks, def, |e| e.def)?;
        u32::try_from(i).ok()
    }

    #[inline]
    fn task(&self, i: u32) -> Result<Task<'_>, Error> {
        let e = self.tasks.get(i as usize).ok_or_else(|| no_task(i))?;
        Ok(Task {
            def: def_of(&self.defs, e)?,
            rt: &e.rt,
        })
    }

    #[inline]
    fn task_mut(&mut self, i: u32) -> Result<TaskMut<'_>, Error> {
        let e = self.tasks.get_mut(i as usize).ok_or_else(|| no_task(i))?;
        Ok(TaskMut {
            def: def_of(&self.defs, e)?,
            rt: &mut e.rt,
        })
    }

    /// Every task, in declaration order.
    fn iter(&self) -> impl Iterator<Item = Task<'_>> {
        // Every entry's index was taken from the definitions it reads.
        self.tasks.iter().filter_map(|e| {
            Some(Task {
                def: def_of(&self.defs, e).ok()?,
                rt: &e.rt,
            })
        })
    }

    fn pool(&self, p: usize) -> Result<&PoolRt, Error> {
        self.pools
            .get(p)
            .ok_or_else(|| bug(format!("no pool #{p}")))
    }

    fn pool_mut(&mut self, p: usize) -> Result<&mut PoolRt, Error> {
        self.pools
            .get_mut(p)
            .ok_or_else(|| bug(format!("no pool #{p}")))
    }

    /// Task `i` with the alarms of its run slot.
    fn slot_mut(&mut self, i: u32) -> Result<(TaskMut<'_>, TaskAlarms<'_>), Error> {
        let e = self.tasks.get_mut(i as usize).ok_or_else(|| no_task(i))?;
        let task = TaskMut {
            def: def_of(&self.defs, e)?,
            rt: &mut e.rt,
        };
        let alarms = TaskAlarms {
            timers: &mut self.timers,
            task: i,
        };
        Ok((task, alarms))
    }

    fn mark(&mut self, i: u32) -> Result<(), Error> {
        let e = self.tasks.get_mut(i as usize).ok_or_else(|| no_task(i))?;
        if !e.dirty {
            e.dirty = true;
            self.dirty.push(i);
        }
        Ok(())
    }

    fn pending(&mut self, pool: usize) -> Result<(), Error> {
        let p = self.pool_mut(pool)?;
        if !p.pending {
            p.pending = true;
            self.pending_pools.push(pool);
        }
        Ok(())
    }

    /// Recomputes what is derived from task records: pool counts, queues,
    /// holds and timers.
    pub(super) fn rebuild_derived(&mut self) -> Result<(), Error> {
        for pool in &mut self.pools {
            pool.running = 0;
            pool.queue = PoolQueue::default();
            pool.holds.clear();
        }
        self.timers = Timers::default();
        for i in 0..self.count() {
            let Tasks {
                defs,
                tasks,
                pools,
                timers,
                ..
            } = self;
            let e = tasks.get(i as usize).ok_or_else(|| no_task(i))?;
            let rt = &e.rt;
            let (phase, hold) = (rt.slot.phase, rt.rare().hold);
            // Most of a shard is idle with nothing held: its definition
            // (read for the pool) is not touched, where reading it took a
            // cache miss per task — most of an empty shard's start at a
            // million tasks.
            if matches!(phase, TaskState::Running | TaskState::Queued) || hold.is_some() {
                let def = def_of(defs, e)?;
                let pool = pools
                    .get_mut(def.pool())
                    .ok_or_else(|| bug(format!("no pool #{}", def.pool())))?;
                match phase {
                    TaskState::Running => pool.running += 1,
                    TaskState::Queued => pool.queue.push(
                        rt.rare().source.is_some(),
                        def.priority(),
                        stamp::get(rt.queued_at()).unwrap_or(Timestamp::MIN),
                        i,
                    ),
                    _ => {}
                }
                if let Some(hold) = hold {
                    pool.holds.push(i);
                    timers.arm(hold.until, (TimerKind::Hold, i));
                }
            }
            rt.slot.rearm(&mut TaskAlarms { timers, task: i });
            if let Some(at) = rt.rare().sla_due {
                timers.arm(at, (TimerKind::Sla, i));
            }
            if let Some(at) = rt.rare().cron_at {
                timers.arm(at, (TimerKind::Cron, i));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod size {
    /// A shard holds up to millions of entries, most of them idle: an
    /// entry's size is most of the memory a task takes.
    #[test]
    fn a_task_entry_stays_small() {
        assert!(std::mem::size_of::<crate::run::RunSlot>() <= 32);
        assert!(std::mem::size_of::<super::Entry>() <= 88);
    }
}
