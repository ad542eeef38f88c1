//! The pure core of one shard: `apply(input, now) -> actions`.
//!
//! An [`Engine`] owns the tasks of one shard, its copy of the CTL table, the
//! inverted index parameter → tasks, the pool queues and the timers. It never
//! reads a clock or touches I/O: the caller passes `now` and carries out the
//! returned [`Action`]s. Every state mutation is also returned as a changelog
//! record, and [`Engine::restore`] rebuilds an equal shard from them.

mod input;
mod marks;
mod offers;
pub(crate) mod ops;
mod processes;
mod tasks;

use jiff::Timestamp;

use crate::action::Action;
use crate::changelog::{ChangelogRecord, Store, Value};
use crate::config::Config;
use crate::ctl::{ParamId, ParamName};
use crate::task::{InPlace, TaskRecord};

pub use input::{
    Command, EventRecord, Input, RunResult, StageReply, StepReply, Target, TimerChange, Update,
};
pub use offers::{is_stage_run_id, parse_stage_run_id};
pub use offers::{OfferCounters, OfferView, SlotView, StageStats, RESCAN_CHUNK};
pub use processes::launch::{event_launches, EventLaunch, ON_VARIABLES, WHEN_VARIABLES};
pub use processes::{JobStats, KeyView};
pub use tasks::{PoolStats, Stats, TaskFilter, TaskPage, TaskSummary, TaskView};

/// Why a shard could not restore a changelog or apply an input.
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
    /// An internal invariant did not hold while applying an input: a bug,
    /// reported as the input's rejection instead of a panic, so the shell
    /// dead-letters the input and goes on.
    #[error("internal invariant broken: {0}")]
    Invariant(String),
}

impl Error {
    /// Neither a bad record nor a broken invariant gets better by retrying:
    /// the input is poison for this version of the engine.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// A broken invariant named by `what`.
pub(crate) fn bug(what: impl std::fmt::Display) -> Error {
    Error::Invariant(what.to_string())
}

/// What a run belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum RunKind {
    /// A task run, `TASK#SEQ`.
    Task,
    /// A stage run, `STAGE/OFFER#SEQ`.
    Stage,
    /// A process step or submitted job, `PROCESS/KEY#N.STEP#SEQ`.
    Step,
}

/// The state machine of one shard: its tasks, its offers, its process keys.
#[derive(Debug, Clone)]
pub struct Engine {
    tasks: tasks::Tasks,
    /// The offers of the shard's partition and their stages.
    offers: offers::Offers,
    /// The process keys of the shard's partition and the job queues.
    processes: processes::Processes,
    /// Recoveries in progress.
    ops: ops::Ops,
    /// An emptied action list handed back by the caller ([`Engine::recycle`]):
    /// a step's list taken from it instead of allocated and grown anew for
    /// every input.
    spare: Vec<Action>,
    /// The earliest armed deadline, worked out at the end of every step:
    /// the driver asks for it two or three times per input.
    next: Option<Timestamp>,
}

impl Engine {
    /// A shard owning every task of `config`.
    pub fn new(config: &Config) -> Engine {
        Engine::for_shard(config, |_| true)
    }

    /// A shard owning the tasks whose pool name `owns` accepts (tasks are
    /// partitioned by pool so that a pool's limit is exact).
    pub fn for_shard(config: &Config, owns: impl Fn(&str) -> bool) -> Engine {
        Engine {
            tasks: tasks::Tasks::new(config, owns),
            offers: offers::Offers::new(config),
            processes: processes::Processes::new(config),
            ops: ops::Ops::new(),
            spare: Vec::new(),
            next: None,
        }
    }

    /// Takes back a list of actions it returned, once the caller has seen
    /// to them, for the next step to fill.
    pub fn recycle(&mut self, mut actions: Vec<Action>) {
        actions.clear();
        if actions.capacity() > self.spare.capacity() {
            self.spare = actions;
        }
    }

    /// Tells the shard it is partition `index` of `count`: each stage's
    /// `max_parallelism` and `rate_limit` are split evenly across partitions.
    pub fn set_partition(&mut self, index: u32, count: u32) {
        self.offers.set_partition(index, count);
        self.processes.set_partition(index, count);
        self.ops.set_partition(index);
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
            engine.restore_record(record, None)?;
        }
        engine.restored()?;
        Ok(engine)
    }

    /// Takes one changelog record into a shard being restored (made by
    /// [`Engine::for_shard`]): records in the order they were written, the
    /// last of a key replacing what came before. `read`: the bytes it was
    /// decoded from, if at hand (an idle offer is kept as them rather than
    /// encoded again). A record refused leaves the shard as it was. Call
    /// [`Engine::restored`] after the last.
    pub fn restore_record(
        &mut self,
        record: ChangelogRecord,
        read: Option<&[u8]>,
    ) -> Result<(), Error> {
        match record.store {
            Store::Offer => {
                // Taken whole: the offer keeps its body and states.
                let value = match record.value {
                    Some(Value::Offer(o)) => {
                        self.offers.restore_offer(
                            record.key.into(),
                            Some(*o),
                            read.map(<[u8]>::to_vec),
                        );
                        return Ok(());
                    }
                    Some(Value::OfferEncoded(bytes)) => {
                        self.offers
                            .restore_encoded(&record.key, bytes)
                            .map_err(|e| Error::BadRecord {
                                store: Store::Offer.as_str(),
                                key: record.key.as_str().to_owned(),
                                message: e.to_string(),
                            })?;
                        return Ok(());
                    }
                    None => None,
                    Some(other) => {
                        return Err(bad_value(&ChangelogRecord {
                            value: Some(other),
                            ..record
                        }))
                    }
                };
                self.offers.restore_offer(record.key.into(), value, None);
            }
            Store::Rescan => {
                let value = match &record.value {
                    Some(Value::Rescan(r)) => Some(r),
                    None => None,
                    Some(_) => return Err(bad_value(&record)),
                };
                self.offers.restore_rescan(record.key.into(), value);
            }
            Store::Task => self.tasks.restore(record)?,
            Store::Process => {
                let value = match &record.value {
                    Some(Value::Process(r)) => Some(r.as_ref()),
                    None => None,
                    Some(_) => return Err(bad_value(&record)),
                };
                self.processes.restore_key(&record.key, value);
            }
            Store::Schedule => {
                let value = match &record.value {
                    Some(Value::Schedule(r)) => Some(r),
                    None => None,
                    Some(_) => return Err(bad_value(&record)),
                };
                self.processes.restore_schedule(&record.key, value);
            }
            Store::Seq => {
                let value = match &record.value {
                    Some(Value::Seq(n)) => Some(*n),
                    None => None,
                    Some(_) => return Err(bad_value(&record)),
                };
                self.processes.restore_counter(&record.key, value);
            }
            Store::Recovery => {
                let value = match &record.value {
                    Some(Value::Recovery(r)) => Some(r.as_ref()),
                    None => None,
                    Some(_) => return Err(bad_value(&record)),
                };
                self.ops.restore(&record.key, value);
            }
        }
        Ok(())
    }

    /// [`Engine::restore_record`] of a task's record, read from the
    /// changelog as `task/<key>` (the records a restore reads most: no
    /// record is built around them).
    pub fn restore_task(&mut self, key: &str, record: Option<TaskRecord>) -> Result<(), Error> {
        self.tasks.restore_task(key, record, InPlace::default())
    }

    /// [`Engine::restore_task`] of a record read with its parameter values
    /// in place ([`crate::codec::read_task_record`]): `placed` holds them.
    pub fn restore_task_in_place(
        &mut self,
        key: &str,
        record: TaskRecord,
        placed: InPlace<'_>,
    ) -> Result<(), Error> {
        self.tasks.restore_task(key, Some(record), placed)
    }

    /// Ends a restore: rebuilds what the records imply (indexes, timers).
    pub fn restored(&mut self) -> Result<(), Error> {
        self.tasks.rebuild_derived()?;
        self.offers.rebuild_derived();
        self.processes.rebuild_derived()?;
        self.next = self.earliest();
        Ok(())
    }

    /// Sets a CTL value without evaluating anything: restoring the global table.
    pub fn load_ctl(&mut self, name: &ParamName, value: Timestamp) {
        self.tasks.load_ctl(name, value);
    }

    /// [`Engine::load_ctl`] of the parameter the router knows as `named`
    /// (the router's ids are the configuration's, [`Config::params`]).
    pub fn load_named_ctl(&mut self, named: ParamId, value: Timestamp) {
        self.tasks.load_named(named, value);
    }

    /// Starts the shard at `now`: arms staleness SLAs and evaluates every
    /// idle task once (after a restore this fires exactly what is due).
    pub fn start(&mut self, now: Timestamp) -> Result<Vec<Action>, Error> {
        self.step(now, |e, out| {
            e.tasks.start(now)?;
            e.tasks.drain(out);
            e.offers.start(now, out);
            e.ops.start(now);
            e.processes.start(now, out)
        })
    }

    /// Applies one input at `now`.
    ///
    /// An `Err` means the input broke an invariant of this engine (a bug):
    /// its decisions are dropped, and the in-memory state may hold part of
    /// the step, so the caller rebuilds the shard from its changelog
    /// ([`Engine::restore`]) before going on, and dead-letters the input.
    pub fn apply(&mut self, input: Input, now: Timestamp) -> Result<Vec<Action>, Error> {
        self.step(now, |e, _| match input {
            Input::Ctl {
                entity,
                param,
                value,
            } => e.tasks.apply_ctl(&entity, &param, value, now),
            Input::Result(result) => match e.run_kind(&result.run_id) {
                RunKind::Step => e.processes.on_result(result, now),
                RunKind::Stage => e.offers.on_result(result, now),
                RunKind::Task => e.tasks.on_result(result, now),
            },
            Input::Command(command) => e.on_command(command, now),
            Input::Offer(change) => e.offers.on_change(change, now),
            Input::Record(record) => {
                let (launches, failures) = e.processes.launches_for(&record, now);
                e.processes.reject_event_launches(&record, failures);
                for (process, key, launch) in launches {
                    e.processes.launch(&process, &[key], &launch, now)?;
                }
                Ok(())
            }
        })
    }

    fn on_command(&mut self, command: Command, now: Timestamp) -> Result<(), Error> {
        match command {
            Command::Launch {
                process,
                keys,
                params,
                position,
                reset,
                source,
            } => {
                let launch = crate::process::Launch {
                    params,
                    position,
                    reset,
                    source,
                    at: now,
                    ..Default::default()
                };
                self.processes.launch(&process, &keys, &launch, now)
            }
            Command::Submit {
                job,
                key,
                params,
                position,
                priority,
            } => {
                let launch = crate::process::Launch {
                    params,
                    position,
                    priority,
                    at: now,
                    ..Default::default()
                };
                self.processes.submit(&job, &key, &launch, now)
            }
            Command::Cancel { process, key } => self.processes.cancel(&process, &key, now),
            Command::ResetKey { process, key } => self.processes.reset_key(&process, &key),
            Command::Search(search) => {
                self.search(search);
                Ok(())
            }
            Command::Recover(recover) => {
                self.recover(recover, now);
                Ok(())
            }
            Command::CancelOperation { id } => {
                self.cancel_operation(&id);
                Ok(())
            }
            command => match command.target() {
                Target::Task(_) => self.tasks.on_command(command, now),
                _ => self.offers.on_command(command, now),
            },
        }
    }

    /// Applies a CTL change: the hot path, touching only the tasks that
    /// reference the parameter.
    pub fn apply_ctl(
        &mut self,
        entity: &str,
        param: &str,
        value: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<Action>, Error> {
        self.step(now, |e, _| e.tasks.apply_ctl(entity, param, value, now))
    }

    /// Applies a CTL change to the parameter `router` knows as `named`
    /// ([`crate::router::Router::ctl`]): the runtime's hot path, where the router's lookup
    /// (which shards need the change) serves the shard too: its ids are the
    /// configuration's ([`Config::params`]).
    pub fn apply_named_ctl(
        &mut self,
        named: ParamId,
        value: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<Action>, Error> {
        self.step(now, |e, _| e.tasks.apply_named(named, value, now))
    }

    /// Fetches into the cache what [`Engine::apply_named_ctl`] will read for
    /// each of `named` (a batch of changes about to be applied): see
    /// [`tasks::Tasks::prefetch_named`]. Changes nothing.
    pub fn prefetch_named_ctl(&self, named: &[ParamId]) {
        self.tasks.prefetch_named(named);
    }

    /// Fires every timer due at or before `now`.
    pub fn tick(&mut self, now: Timestamp) -> Result<Vec<Action>, Error> {
        self.step(now, |e, _| {
            e.tasks.tick(now)?;
            e.offers.tick(now)?;
            e.processes.tick(now, &e.offers)?;
            e.recovery_tick(now)
        })
    }

    /// Runs one step: `work`, then the end of step (dispatch what the limits
    /// allow, write the changelog of what changed). Outputs keep the order
    /// of decisions: the tasks' so far, the offers', then the task runs the
    /// pools dispatch and the task records. A failed step leaves no decision
    /// behind.
    fn step(
        &mut self,
        now: Timestamp,
        work: impl FnOnce(&mut Engine, &mut Vec<Action>) -> Result<(), Error>,
    ) -> Result<Vec<Action>, Error> {
        let mut out = std::mem::take(&mut self.spare);
        let done = work(self, &mut out).and_then(|()| {
            self.tasks.drain(&mut out);
            self.offers.finish(now, &mut out)?;
            self.processes.finish(now, &mut out)?;
            self.tasks.finish(now, &mut out)?;
            self.ops.finish(&mut out);
            Ok(())
        });
        let result = match done {
            Ok(()) => Ok(out),
            Err(e) => {
                self.tasks.abandon();
                self.offers.abandon();
                self.processes.abandon();
                self.ops.abandon();
                Err(e)
            }
        };
        self.next = self.earliest();
        result
    }

    /// The earliest armed deadline: when [`Engine::tick`] next has work.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.next
    }

    fn earliest(&self) -> Option<Timestamp> {
        [
            self.tasks.next_deadline(),
            self.offers.next_deadline(),
            self.processes.next_deadline(),
            self.ops.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
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

    /// An offer's current body, if this shard has the offer (and it is not
    /// deleted), for an input about to change it: an offer kept as its
    /// record is read back once, here, not again by the step.
    pub fn offer_body(&mut self, id: &str) -> Result<Option<crate::offer::SharedBody>, Error> {
        self.offers.body(id)
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

    /// A process key's record, if this shard has it.
    pub fn process_view(&self, process: &str, key: &str) -> Option<KeyView> {
        self.processes.view(process, key)
    }

    /// The step run in flight of `process`'s active instance for `key`:
    /// `(run id, pass)`.
    pub fn step_run(&self, process: &str, key: &str) -> Option<(String, u64)> {
        self.processes.current_run(process, key)
    }

    /// Queue depths and running counts per job.
    pub fn job_stats(&self) -> Vec<JobStats> {
        self.processes.job_stats()
    }

    /// Active instances per process.
    pub fn active_instances(&self) -> Vec<(String, usize)> {
        self.processes.active_counts()
    }

    /// What a run id names: a process step (its prefix is a process or job
    /// of this configuration), a stage run, or a task run. The one routing
    /// rule for results.
    pub fn run_kind(&self, run_id: &str) -> RunKind {
        if self.processes.owns_run(run_id) {
            RunKind::Step
        } else if offers::is_stage_run_id(run_id) {
            RunKind::Stage
        } else {
            RunKind::Task
        }
    }

    /// Whether `name` is a configured process or job.
    pub fn has_process(&self, name: &str) -> bool {
        self.processes.has_process(name)
    }

    /// The launches a record on an `on` topic asks for (the router sends
    /// each to the shard owning its key), with the expression failures.
    pub fn launches_for(
        &self,
        record: &EventRecord,
        now: Timestamp,
    ) -> (Vec<EventLaunch>, Vec<(String, String)>) {
        self.processes.launches_for(record, now)
    }

    /// Number of tasks this shard owns.
    pub fn task_count(&self) -> usize {
        self.tasks.len()
    }

    /// Whether this shard owns `task`.
    pub fn has_task(&self, task: &str) -> bool {
        self.tasks.has(task)
    }

    /// The first `limit` tasks by id of those `filter` asks for.
    pub fn task_page(&self, filter: &TaskFilter, limit: usize) -> TaskPage {
        self.tasks.page(filter, limit)
    }

    /// Each task's state and, for one that succeeded, its id and last
    /// success, for the tasks at `range` in the shard's order (the part of
    /// `0..task_count()` it covers): an instance exports them a part at a
    /// time.
    pub fn task_health(
        &self,
        range: std::ops::Range<usize>,
    ) -> impl Iterator<Item = (crate::task::TaskState, Option<(&str, Timestamp)>)> + '_ {
        self.tasks.health(range)
    }

    /// What the engine did so far.
    pub fn stats(&self) -> Stats {
        self.tasks.stats()
    }

    /// Per-pool queue depth and running count, pools with tasks in this shard only.
    pub fn pool_stats(&self) -> Vec<PoolStats> {
        self.tasks.pool_stats()
    }

    /// The view of `task` at `now`, if this shard owns it.
    pub fn task_view(&self, task: &str, now: Timestamp) -> Option<TaskView> {
        self.tasks.view(task, now)
    }

    /// Ids of the tasks this shard owns, in declaration order.
    pub fn task_ids(&self) -> impl Iterator<Item = &str> {
        self.tasks.ids()
    }

    /// The state of every task as changelog records: what a restore must reproduce.
    pub fn snapshot(&self) -> Vec<ChangelogRecord> {
        let mut records = self.tasks.snapshot();
        records.extend(self.offers.snapshot());
        records.extend(self.processes.snapshot());
        records.extend(self.ops.snapshot());
        records
    }
}

fn bad_value(record: &ChangelogRecord) -> Error {
    Error::BadRecord {
        store: record.store.as_str(),
        key: record.key.as_str().to_owned(),
        message: "the value is of another store".to_string(),
    }
}

#[cfg(test)]
mod tests;
