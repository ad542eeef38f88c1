//! The pure core of one shard: `apply(input, now) -> actions`.
//!
//! An [`Engine`] owns the tasks of one shard, its copy of the CTL table, the
//! inverted index parameter → tasks, the pool queues and the timers. It never
//! reads a clock or touches I/O: the caller passes `now` and carries out the
//! returned [`Action`]s. Every state mutation is also returned as a changelog
//! record, and [`Engine::restore`] rebuilds an equal shard from them.

mod holds;
mod input;
mod offers;
mod record;
mod tasks;
mod view;

use std::collections::HashMap;

use jiff::Timestamp;

use crate::action::Action;
use crate::changelog::{ChangelogRecord, Store, Value};
use crate::config::{Config, RunPolicy};
use crate::ctl::{CtlTable, ParamId, ParamName};
use crate::duration::Duration;
use crate::run::Run;
use crate::task::{Hold, PoolQueue, TaskState};
use crate::timers::Timers;
use crate::trigger::Trigger;

pub use input::{Command, Input, RunResult, StageReply, Target, TimerChange, Update};
pub use offers::{is_stage_run_id, parse_stage_run_id};
pub use offers::{OfferCounters, OfferView, SlotView, StageStats, RESCAN_CHUNK};
pub use view::{PoolStats, Stats, TaskSummary, TaskView};

/// Why a changelog could not be restored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A record that names a parameter the shard cannot read.
    #[error("changelog record {store}/{key}: {message}")]
    BadRecord {
        /// Store of the record.
        store: &'static str,
        /// Key of the record.
        key: String,
        /// What is wrong.
        message: String,
    },
}

impl Error {
    /// A bad record will not get better by retrying.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// A task's definition, compiled against the shard's parameter ids.
#[derive(Debug, Clone)]
struct TaskDef {
    id: String,
    pool: usize,
    priority: i64,
    trigger: Trigger<ParamId>,
    trigger_text: String,
    refs: Vec<ParamId>,
    tz: jiff::tz::TimeZone,
    run: RunPolicy,
    produces: Vec<ParamId>,
    expect_every: Option<Duration>,
    params: std::collections::BTreeMap<String, String>,
    topic: Option<String>,
}

/// A task's runtime state (parameters by id).
#[derive(Debug, Clone, Default, PartialEq)]
struct TaskRt {
    state: TaskState,
    since: Option<Timestamp>,
    queued_at: Option<Timestamp>,
    wake_at: Option<Timestamp>,
    failures: u32,
    run_seq: u64,
    pass_seq: u64,
    run: Option<Run>,
    snapshot: Vec<(ParamId, Timestamp)>,
    last_seen: Vec<(ParamId, Timestamp)>,
    last_success: Option<Timestamp>,
    sla_due: Option<Timestamp>,
    hold: Option<Hold>,
    pause_requested: bool,
    last_error: Option<String>,
    /// Changed in the current step; not part of the record.
    dirty: bool,
}

/// A pool's limit and live counts.
#[derive(Debug, Clone)]
struct PoolRt {
    name: String,
    max_running: Option<u32>,
    hold_max: Duration,
    running: u32,
    queue: PoolQueue,
    /// Tasks of this pool holding a slot.
    holds: Vec<u32>,
    /// Needs a dispatch pass at the end of the step.
    pending: bool,
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
}

/// The state machine of one shard.
#[derive(Debug, Clone)]
pub struct Engine {
    table: CtlTable,
    defs: Vec<TaskDef>,
    rt: Vec<TaskRt>,
    by_id: HashMap<String, u32>,
    /// Parameter → tasks whose trigger references it.
    index: Vec<Vec<u32>>,
    /// Parameter → tasks that produce it.
    producers: Vec<Vec<u32>>,
    pools: Vec<PoolRt>,
    timers: Timers<(TimerKind, u32)>,
    dirty: Vec<u32>,
    pending_pools: Vec<usize>,
    out: Vec<Action>,
    /// Keys restored from the changelog that no owned task has: tombstoned at start.
    orphans: Vec<String>,
    stats: Stats,
    /// The offers of the shard's partition and their stages.
    offers: offers::Offers,
}

impl Engine {
    /// A shard owning every task of `config`.
    pub fn new(config: &Config) -> Engine {
        Engine::for_shard(config, |_| true)
    }

    /// A shard owning the tasks whose pool name `owns` accepts (tasks are
    /// partitioned by pool so that a pool's limit is exact).
    pub fn for_shard(config: &Config, owns: impl Fn(&str) -> bool) -> Engine {
        let mut table = CtlTable::default();
        let pools: Vec<PoolRt> = config
            .pools
            .iter()
            .map(|p| PoolRt {
                name: p.name.clone(),
                max_running: p.max_running,
                hold_max: p.hold_max,
                running: 0,
                queue: PoolQueue::default(),
                holds: Vec::new(),
                pending: false,
            })
            .collect();
        let mut defs = Vec::new();
        let mut by_id = HashMap::new();
        let mut index: Vec<Vec<u32>> = Vec::new();
        let mut producers: Vec<Vec<u32>> = Vec::new();
        for t in &config.tasks {
            if !owns(&config.pools[t.pool].name) {
                continue;
            }
            let i = u32::try_from(defs.len()).expect("fewer than 2^32 tasks per shard");
            let trigger = t.trigger.map(&mut |name: &ParamName| table.intern(name));
            let refs: Vec<ParamId> = trigger.params().into_iter().copied().collect();
            let produces: Vec<ParamId> = t.produces.iter().map(|n| table.intern(n)).collect();
            for &p in &refs {
                slot(&mut index, p).push(i);
            }
            for &p in &produces {
                slot(&mut producers, p).push(i);
            }
            by_id.insert(t.id.clone(), i);
            defs.push(TaskDef {
                id: t.id.clone(),
                pool: t.pool,
                priority: t.priority,
                trigger,
                trigger_text: t.trigger_text.clone(),
                refs,
                tz: t.time_zone.clone(),
                run: t.run.clone(),
                produces,
                expect_every: t.expect_every,
                params: t.params.clone(),
                topic: t.topic.clone(),
            });
        }
        let rt = vec![TaskRt::default(); defs.len()];
        Engine {
            table,
            defs,
            rt,
            by_id,
            index,
            producers,
            pools,
            timers: Timers::default(),
            dirty: Vec::new(),
            pending_pools: Vec::new(),
            out: Vec::new(),
            orphans: Vec::new(),
            stats: Stats::default(),
            offers: offers::Offers::new(config),
        }
    }

    /// Tells the shard it is partition `index` of `count`: each stage's
    /// `max_parallelism` and `rate_limit` are split evenly across partitions.
    pub fn set_partition(&mut self, index: u32, count: u32) {
        self.offers.set_partition(index, count);
    }

    /// Rebuilds a shard from the changelog records it emitted (in order; last
    /// write wins, so duplicates are harmless). Records of tasks this shard no
    /// longer owns (deleted, or moved to another pool) are tombstoned by
    /// [`Engine::start`]. Call [`Engine::load_ctl`] for the CTL table and
    /// then [`Engine::start`].
    pub fn restore(
        config: &Config,
        owns: impl Fn(&str) -> bool,
        records: impl IntoIterator<Item = ChangelogRecord>,
    ) -> Result<Engine, Error> {
        let mut engine = Engine::for_shard(config, owns);
        for record in records {
            match record.store {
                Store::Offer => {
                    let value = match &record.value {
                        Some(Value::Offer(o)) => Some(o.as_ref()),
                        None => None,
                        Some(_) => return Err(bad_value(&record)),
                    };
                    engine.offers.restore_offer(record.key, value);
                }
                Store::Rescan => {
                    let value = match &record.value {
                        Some(Value::Rescan(r)) => Some(r),
                        None => None,
                        Some(_) => return Err(bad_value(&record)),
                    };
                    engine.offers.restore_rescan(record.key, value);
                }
                Store::Task => {
                    let Some(&i) = engine.by_id.get(&record.key) else {
                        if record.value.is_some() {
                            engine.orphans.push(record.key);
                        } else {
                            engine.orphans.retain(|k| *k != record.key);
                        }
                        continue;
                    };
                    engine.rt[i as usize] = match &record.value {
                        Some(Value::Task(r)) => engine.rt_from_record(&record.key, r)?,
                        None => TaskRt::default(),
                        Some(_) => return Err(bad_value(&record)),
                    };
                }
            }
        }
        engine.rebuild_derived();
        engine.offers.rebuild_derived();
        Ok(engine)
    }

    /// Sets a CTL value without evaluating anything: restoring the global table.
    pub fn load_ctl(&mut self, name: &ParamName, value: Timestamp) {
        let id = self.table.intern(name);
        self.table.set(id, value);
    }

    /// Starts the shard at `now`: arms staleness SLAs and evaluates every
    /// idle task once (after a restore this fires exactly what is due).
    pub fn start(&mut self, now: Timestamp) -> Vec<Action> {
        self.orphans.sort();
        self.orphans.dedup();
        for key in std::mem::take(&mut self.orphans) {
            self.out.push(Action::Changelog(ChangelogRecord {
                store: Store::Task,
                key,
                value: None,
            }));
        }
        for i in 0..self.defs.len() as u32 {
            let (def, rt) = (&self.defs[i as usize], &mut self.rt[i as usize]);
            if let (Some(every), None) = (def.expect_every, rt.sla_due) {
                rt.sla_due = Some(crate::run::add(now, every.get()));
                self.timers
                    .arm(rt.sla_due.expect("just set"), (TimerKind::Sla, i));
                self.mark(i);
            }
            self.consider(i, now);
        }
        for p in 0..self.pools.len() {
            self.pending(p);
        }
        self.offers.start(now, &mut self.out);
        self.finish(now)
    }

    /// Applies one input at `now`.
    pub fn apply(&mut self, input: Input, now: Timestamp) -> Vec<Action> {
        match input {
            Input::Ctl {
                entity,
                param,
                value,
            } => return self.apply_ctl(&entity, &param, value, now),
            Input::Result(result) if offers::is_stage_run_id(&result.run_id) => {
                self.offers.on_result(result, now)
            }
            Input::Result(result) => self.on_result(result, now),
            Input::Command(command) => match command.target() {
                Target::Task(_) => self.on_command(command, now),
                Target::Offer(_) | Target::Shard => self.offers.on_command(command, now),
            },
            Input::Offer(change) => self.offers.on_change(change, now),
        }
        self.finish(now)
    }

    /// Applies a CTL change: the hot path, touching only the tasks that
    /// reference the parameter.
    pub fn apply_ctl(
        &mut self,
        entity: &str,
        param: &str,
        value: Timestamp,
        now: Timestamp,
    ) -> Vec<Action> {
        let id = match self.table.id(entity, param) {
            Some(id) => id,
            None => self.table.intern(&ParamName::new(entity, param)),
        };
        let previous = self.table.set(id, value);
        if previous == Some(value) {
            return Vec::new();
        }
        let moved_back = previous.filter(|p| value < *p);
        let n = self.index.get(id.0 as usize).map_or(0, Vec::len);
        for k in 0..n {
            let i = self.index[id.0 as usize][k];
            if let Some(previous) = moved_back {
                self.out
                    .push(Action::Event(crate::action::Event::CtlMovedBack {
                        task: self.defs[i as usize].id.clone(),
                        entity: entity.to_string(),
                        param: param.to_string(),
                        previous,
                        value,
                    }));
            }
            self.consider(i, now);
            self.settle_hold(i, now);
        }
        self.finish(now)
    }

    /// Fires every timer due at or before `now`.
    pub fn tick(&mut self, now: Timestamp) -> Vec<Action> {
        while let Some((at, (kind, i))) = self.timers.pop_due(now) {
            self.on_timer(kind, i, at, now);
        }
        self.offers.tick(now);
        self.finish(now)
    }

    /// The earliest armed deadline: when [`Engine::tick`] next has work.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        match (self.timers.next(), self.offers.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Number of offers in this shard.
    pub fn offer_count(&self) -> usize {
        self.offers.len()
    }

    /// Whether any offer stage is configured.
    pub fn has_stages(&self) -> bool {
        self.offers.has_stages()
    }

    /// An offer with its stage slots, if this shard has it.
    pub fn offer_view(&self, id: &str) -> Option<OfferView> {
        self.offers.view(id)
    }

    /// The run in flight of `stage` on `offer`: `(run id, pass, version)`.
    pub fn stage_run(&self, stage: &str, offer: &str) -> Option<(String, u64, u64)> {
        self.offers.current_run(stage, offer)
    }

    /// Queue depths and running counts per stage.
    pub fn stage_stats(&self) -> Vec<StageStats> {
        self.offers.stage_stats()
    }

    /// Offer-side counters.
    pub fn offer_counters(&self) -> OfferCounters {
        self.offers.counters()
    }

    /// Number of tasks this shard owns.
    pub fn task_count(&self) -> usize {
        self.defs.len()
    }

    /// Whether this shard owns `task`.
    pub fn has_task(&self, task: &str) -> bool {
        self.by_id.contains_key(task)
    }

    /// The state of every task as changelog records: what a restore must reproduce.
    pub fn snapshot(&self) -> Vec<ChangelogRecord> {
        let mut records: Vec<ChangelogRecord> = (0..self.defs.len() as u32)
            .map(|i| self.record(i))
            .collect();
        records.extend(self.offers.snapshot());
        records
    }

    fn mark(&mut self, i: u32) {
        let rt = &mut self.rt[i as usize];
        if !rt.dirty {
            rt.dirty = true;
            self.dirty.push(i);
        }
    }

    fn pending(&mut self, pool: usize) {
        if !self.pools[pool].pending {
            self.pools[pool].pending = true;
            self.pending_pools.push(pool);
        }
    }

    /// Ends a step: dispatches what the pools allow, then writes the
    /// changelog records of every task the step changed.
    fn finish(&mut self, now: Timestamp) -> Vec<Action> {
        self.offers.finish(now, &mut self.out);
        while let Some(p) = self.pending_pools.pop() {
            self.pools[p].pending = false;
            self.pump(p, now);
        }
        for i in std::mem::take(&mut self.dirty) {
            self.rt[i as usize].dirty = false;
            let record = self.record(i);
            self.out.push(Action::Changelog(record));
        }
        std::mem::take(&mut self.out)
    }

    /// Recomputes what is derived from task records: pool counts, queues,
    /// holds and timers.
    fn rebuild_derived(&mut self) {
        for pool in &mut self.pools {
            pool.running = 0;
            pool.queue = PoolQueue::default();
            pool.holds.clear();
        }
        self.timers = Timers::default();
        for i in 0..self.defs.len() as u32 {
            let (def, rt) = (&self.defs[i as usize], &self.rt[i as usize]);
            let pool = &mut self.pools[def.pool];
            match rt.state {
                TaskState::Running => pool.running += 1,
                TaskState::Queued => {
                    pool.queue
                        .push(def.priority, rt.queued_at.unwrap_or(Timestamp::MIN), i)
                }
                _ => {}
            }
            if let Some(hold) = rt.hold {
                pool.holds.push(i);
                self.timers.arm(hold.until, (TimerKind::Hold, i));
            }
            if let (TaskState::Running, Some(run)) = (rt.state, &rt.run) {
                self.timers.arm(run.deadline, (TimerKind::RunTimeout, i));
            }
            if let Some(at) = rt.wake_at {
                self.timers.arm(at, (TimerKind::Wake, i));
            }
            if let Some(at) = rt.sla_due {
                self.timers.arm(at, (TimerKind::Sla, i));
            }
        }
    }
}

fn bad_value(record: &ChangelogRecord) -> Error {
    Error::BadRecord {
        store: record.store.as_str(),
        key: record.key.clone(),
        message: "the value is of another store".to_string(),
    }
}

fn slot(v: &mut Vec<Vec<u32>>, p: ParamId) -> &mut Vec<u32> {
    let k = p.0 as usize;
    if v.len() <= k {
        v.resize_with(k + 1, Vec::new);
    }
    &mut v[k]
}

#[cfg(test)]
mod tests;
