//! Processes and jobs inside a shard (seeds 003 and 004, DESIGN §7.2): the
//! keys of the shard's partition with their active instances, a queue per
//! job type, launches by command, event and schedule, and step runs on the
//! shared run slot.
//!
//! Invariants kept by every transition:
//! - a key has at most one active instance, always;
//! - an active instance's current step is in exactly one place: its job's
//!   queue (`queued`, with its [`Placement`] stored), a worker (`running`),
//!   or a timer (`backoff`/`parked`);
//! - every change of a key is written to the changelog as its whole
//!   [`KeyRecord`] at the end of the step; queues, running counts and timers
//!   are derived from the records on restore.

mod keys;
pub(super) mod launch;
mod ops;
mod record;
pub(super) mod schedule;
mod steps;
mod timers;
mod view;

#[cfg(test)]
mod prop;

use std::sync::Arc;

use jiff::Timestamp;

use super::marks::Marks;
use crate::action::{Action, Event, Subject};
use crate::changelog::{ChangelogRecord, Store, Value};
use crate::config::{Config, RunPolicy};
use crate::duration::Duration;
use crate::engine::{bug, Error};
use crate::name_index::ByName;
use crate::process::{
    instance_id, Conflict, JobQueue, KeyRecord, Placement, Position, Reuse, ScheduleRecord,
};
use crate::run::{Alarms, Due};
use crate::stage::limit;
use crate::timers::Timers;

pub use view::{JobStats, KeyView};

/// A job type as the shard uses it.
#[derive(Debug, Clone)]
struct JobDef {
    /// Shared with every step run command of the job, as is `topic`.
    name: Arc<str>,
    topic: Arc<str>,
    /// Shared: a step's dispatch, failure and timeout each take it.
    run: Arc<RunPolicy>,
    requeue: Position,
    deadline: Option<Duration>,
    force_finish: bool,
    max_running: Option<u32>,
}

/// A job type on this partition: its definition, queue and limit.
#[derive(Debug, Clone)]
struct JobRt {
    def: JobDef,
    queue: JobQueue,
    /// Steps of this job in flight.
    running: u32,
    /// This partition's share of `max_running` (`None`: unlimited).
    share: Option<u32>,
}

/// A process as the shard uses it (a submitted job's implicit process too).
#[derive(Debug, Clone)]
struct ProcDef {
    name: String,
    /// Job indices of the chain.
    steps: Vec<u16>,
    reuse: Reuse,
    conflict: Conflict,
    when: Option<crate::stage::expr::Expr>,
    timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    priority: i64,
    on: Option<crate::config::OnEvent>,
    schedule: Option<crate::config::Schedule>,
    time_zone: jiff::tz::TimeZone,
}

/// What a process timer is for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum ProcTimer {
    /// The current step's run times out (`Due::Deadline`) or its backoff or
    /// park ends (`Due::Wake`).
    Step(bool, u16, String),
    /// The current step's job deadline.
    JobDeadline(u16, String),
    /// The instance's `timeout`.
    Timeout(u16, String),
    /// The instance's `idle_timeout`.
    Idle(u16, String),
    /// A finished key's record is dropped (`reuse = "allow"` only).
    Bury(u16, String),
    /// The process's cron schedule fires.
    Cron(u16),
    /// A schedule run continues with its next chunk.
    Chunk(u16),
}

/// The run slot's view of one instance's step timers.
struct StepAlarms<'a> {
    timers: &'a mut Timers<ProcTimer>,
    process: u16,
    key: &'a str,
}

impl Alarms for StepAlarms<'_> {
    fn arm(&mut self, due: Due, at: Timestamp) {
        self.timers.arm(at, self.timer(due));
    }

    fn cancel(&mut self, due: Due, at: Timestamp) {
        self.timers.cancel(at, self.timer(due));
    }
}

impl StepAlarms<'_> {
    fn timer(&self, due: Due) -> ProcTimer {
        ProcTimer::Step(due == Due::Deadline, self.process, self.key.to_string())
    }
}

/// The process half of a shard.
#[derive(Debug, Clone)]
pub(super) struct Processes {
    jobs: Vec<JobRt>,
    job_by_name: ByName<u16>,
    procs: Vec<ProcDef>,
    proc_by_name: ByName<u16>,
    /// `(process, key)` → the key's record.
    keys: keys::KeyMap,
    timers: Timers<ProcTimer>,
    /// Schedule runs in progress, per process.
    schedules: Vec<Option<ScheduleRecord>>,
    /// Instances started so far on this shard, per process: the `#N` of
    /// instance ids.
    counters: Vec<u64>,
    /// Counters changed in this step.
    dirty_counters: Marks<u16>,
    /// Keys changed in this step (written or tombstoned at its end).
    dirty: Marks<(u16, String)>,
    /// Schedules changed in this step.
    dirty_schedules: Marks<u16>,
    /// Job queues needing a dispatch pass at the end of the step.
    pending: Marks<u16>,
    /// Records of processes no longer configured: tombstoned at start.
    orphans: Vec<(Store, String)>,
    /// Keys restored with launches waiting and nothing active (the active
    /// instance's chain named a job no longer configured and was dropped):
    /// their next waiting launch starts at start.
    stalled: Vec<(u16, String)>,
    out: Vec<Action>,
    /// How long a finished key's record is kept when nothing else needs it:
    /// the longest job timeout, after which no result of its runs is current.
    grave_time: Duration,
    /// This shard's partition and the partition count (keys it owns).
    partition: (u32, u32),
}

impl Processes {
    pub(super) fn new(config: &Config) -> Processes {
        let jobs: Vec<JobRt> = config
            .jobs
            .iter()
            .map(|j| JobRt {
                def: JobDef {
                    name: j.name.as_str().into(),
                    topic: j.topic.as_str().into(),
                    run: Arc::new(j.run.clone()),
                    requeue: j.requeue,
                    deadline: j.deadline,
                    force_finish: j.force_finish,
                    max_running: j.max_running,
                },
                queue: JobQueue::default(),
                running: 0,
                share: j.max_running,
            })
            .collect();
        let job_by_name: ByName<u16> = jobs
            .iter()
            .enumerate()
            .map(|(i, j)| (j.def.name.to_string(), index(i)))
            .collect();
        let mut procs: Vec<ProcDef> = config
            .processes
            .iter()
            .map(|p| ProcDef {
                name: p.name.clone(),
                steps: p.steps.iter().map(|&s| index(s)).collect(),
                reuse: p.reuse,
                conflict: p.conflict,
                when: p.when.clone(),
                timeout: p.timeout,
                idle_timeout: p.idle_timeout,
                priority: p.priority,
                on: p.on.clone(),
                schedule: p.schedule.clone(),
                time_zone: p.time_zone.clone(),
            })
            .collect();
        // A submitted job runs as a one-step instance of an implicit process
        // of the same name: a key's jobs run one at a time, in queue order.
        for (j, job) in jobs.iter().enumerate() {
            procs.push(ProcDef {
                name: job.def.name.to_string(),
                steps: vec![index(j)],
                reuse: Reuse::Allow,
                conflict: Conflict::Queue,
                when: None,
                timeout: None,
                idle_timeout: None,
                priority: 0,
                on: None,
                schedule: None,
                time_zone: config.time_zone.clone(),
            });
        }
        let proc_by_name = procs
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.clone(), index(i)))
            .collect();
        let grave_time = jobs
            .iter()
            .map(|j| j.def.run.timeout)
            .max()
            .unwrap_or(Duration::from_secs(0));
        let n = procs.len();
        let mut processes = Processes {
            jobs,
            job_by_name,
            procs,
            proc_by_name,
            keys: keys::KeyMap::default(),
            timers: Timers::default(),
            schedules: vec![None; n],
            counters: vec![0; n],
            dirty_counters: Marks::default(),
            dirty: Marks::default(),
            dirty_schedules: Marks::default(),
            pending: Marks::default(),
            orphans: Vec::new(),
            stalled: Vec::new(),
            out: Vec::new(),
            grave_time,
            partition: (0, 1),
        };
        processes.set_partition(0, 1);
        processes
    }

    /// Splits each job's `max_running` for partition `index` of `count`.
    pub(super) fn set_partition(&mut self, index: u32, count: u32) {
        self.partition = (index, count.max(1));
        for job in &mut self.jobs {
            job.share = job
                .def
                .max_running
                .map(|max| limit::share(max, index, count));
        }
    }

    /// Whether this shard owns `key` (its murmur2 partition).
    fn owns_key(&self, key: &str) -> bool {
        let (index, count) = self.partition;
        count <= 1 || crate::router::owns(key, index, count)
    }

    /// Whether `name` is a process (or a job's implicit process) here.
    pub(super) fn has_process(&self, name: &str) -> bool {
        self.proc_by_name.contains_key(name)
    }

    pub(super) fn next_deadline(&self) -> Option<Timestamp> {
        self.timers.next()
    }

    fn proc_index(&self, name: &str) -> Option<u16> {
        self.proc_by_name.get(name).copied()
    }

    fn def(&self, p: u16) -> Result<&ProcDef, Error> {
        self.procs
            .get(p as usize)
            .ok_or_else(|| bug(format!("no process #{p}")))
    }

    fn job(&self, j: u16) -> Result<&JobRt, Error> {
        self.jobs
            .get(j as usize)
            .ok_or_else(|| bug(format!("no job #{j}")))
    }

    fn job_mut(&mut self, j: u16) -> Result<&mut JobRt, Error> {
        self.jobs
            .get_mut(j as usize)
            .ok_or_else(|| bug(format!("no job #{j}")))
    }

    fn record(&self, p: u16, key: &str) -> Option<&KeyRecord> {
        self.keys.get(p, key)
    }

    fn record_mut(&mut self, p: u16, key: &str) -> Result<&mut KeyRecord, Error> {
        self.keys
            .get_mut(p, key)
            .ok_or_else(|| bug(format!("no record of process #{p} key `{key}`")))
    }

    /// The subject of events about process `p` and `key`, with the active
    /// instance (and, with `job`, the current step's job).
    fn subject(&self, p: u16, key: &str, job: bool) -> Subject {
        let name = self
            .procs
            .get(p as usize)
            .map(|d| d.name.clone())
            .unwrap_or_default();
        let active = self.record(p, key).and_then(|r| r.active.as_ref());
        let instance = active.map(|i| instance_id(&name, key, i.n));
        let job = active
            .filter(|_| job)
            .and_then(|i| i.chain.get(i.step as usize))
            .map(|s| s.job.clone());
        Subject::Process {
            process: name,
            key: key.to_string(),
            instance,
            job,
        }
    }

    fn emit(&mut self, event: Event) {
        self.out.push(Action::Event(event));
    }

    fn mark(&mut self, p: u16, key: &str) {
        self.dirty
            .insert_with(|(q, k)| *q == p && k == key, || (p, key.to_string()));
    }

    /// Fires every process timer due at or before `now`. A schedule chunk
    /// over offers needs the offers: the engine passes them.
    pub(super) fn tick(
        &mut self,
        now: Timestamp,
        offers: &dyn schedule::OfferSource,
    ) -> Result<(), Error> {
        while let Some((at, timer)) = self.timers.pop_due(now) {
            self.on_timer(timer, at, now, offers)?;
        }
        Ok(())
    }

    fn on_timer(
        &mut self,
        timer: ProcTimer,
        at: Timestamp,
        now: Timestamp,
        offers: &dyn schedule::OfferSource,
    ) -> Result<(), Error> {
        match timer {
            ProcTimer::Step(true, p, key) => self.on_step_timeout(p, &key, at, now),
            ProcTimer::Step(false, p, key) => self.on_step_wake(p, &key, at, now),
            ProcTimer::JobDeadline(p, key) => self.on_job_deadline(p, &key, at, now),
            ProcTimer::Timeout(p, key) => self.on_process_timeout(p, &key, at, now),
            ProcTimer::Idle(p, key) => self.on_idle(p, &key, at, now),
            ProcTimer::Bury(p, key) => {
                let buried = self.record(p, &key).is_some_and(|r| {
                    steps::buriable(r)
                        && r.last.as_ref().is_some_and(|l| {
                            crate::run::add(l.finished_at, self.grave_time.get()) == at
                        })
                });
                if buried {
                    self.keys.remove(p, &key);
                    self.dirty.insert((p, key));
                }
                Ok(())
            }
            ProcTimer::Cron(p) => self.on_cron(p, at, now, offers),
            ProcTimer::Chunk(p) => self.schedule_chunk(p, now, offers),
        }
    }

    /// Ends a step: dispatches what the job limits allow, then writes the
    /// changelog records of every key and schedule the step changed.
    pub(super) fn finish(&mut self, now: Timestamp, out: &mut Vec<Action>) -> Result<(), Error> {
        while let Some(j) = self.pending.pop_first() {
            self.pump(j, now)?;
        }
        out.append(&mut self.out);
        // Popped, not taken: iterating a taken empty set costs more, and
        // most steps leave these empty.
        while let Some((p, key)) = self.dirty.pop_first() {
            let record = self.key_record(p, &key)?;
            if let Some(Value::Process(r)) = &record.value {
                if let Some(at) = self.bury_at(p, r)? {
                    self.timers.arm(at, ProcTimer::Bury(p, key));
                }
            }
            out.push(Action::Changelog(record));
        }
        while let Some(p) = self.dirty_schedules.pop_first() {
            out.push(Action::Changelog(self.schedule_record(p)?));
        }
        while let Some(p) = self.dirty_counters.pop_first() {
            out.push(Action::Changelog(self.counter_record(p)?));
        }
        Ok(())
    }

    /// The next instance number of process `p` on this shard.
    fn next_instance(&mut self, p: u16) -> Result<u64, Error> {
        let counter = self
            .counters
            .get_mut(p as usize)
            .ok_or_else(|| bug(format!("no process #{p}")))?;
        *counter += 1;
        self.dirty_counters.insert(p);
        Ok(*counter)
    }

    fn counter_record(&self, p: u16) -> Result<ChangelogRecord, Error> {
        Ok(ChangelogRecord {
            store: Store::Seq,
            key: self.def(p)?.name.as_str().into(),
            value: Some(Value::Seq(
                self.counters.get(p as usize).copied().unwrap_or(0),
            )),
        })
    }

    /// Restores a `seq/<process>` record.
    pub(super) fn restore_counter(&mut self, name: &str, value: Option<u64>) {
        match self.proc_index(name) {
            Some(p) => {
                if let Some(c) = self.counters.get_mut(p as usize) {
                    // A counter never goes back, tombstone or not.
                    *c = (*c).max(value.unwrap_or(0));
                }
            }
            None => {
                if value.is_some() {
                    self.orphans.push((Store::Seq, name.to_string()));
                }
            }
        }
    }

    /// Drops what a failed step left half done (the caller rebuilds the
    /// shard from its changelog).
    pub(super) fn abandon(&mut self) {
        self.out.clear();
        self.dirty.clear();
        self.dirty_schedules.clear();
        self.dirty_counters.clear();
        self.pending.clear();
    }

    /// The changelog record of `(p, key)`: its record, or a tombstone.
    fn key_record(&self, p: u16, key: &str) -> Result<ChangelogRecord, Error> {
        let name = &self.def(p)?.name;
        Ok(ChangelogRecord {
            store: Store::Process,
            key: crate::name_map::concat(&[name, "/", key]),
            value: self
                .keys
                .shared(p, key)
                .map(|r| Value::Process(std::sync::Arc::clone(r))),
        })
    }

    fn schedule_record(&self, p: u16) -> Result<ChangelogRecord, Error> {
        Ok(ChangelogRecord {
            store: Store::Schedule,
            key: self.def(p)?.name.as_str().into(),
            value: self
                .schedules
                .get(p as usize)
                .and_then(Option::as_ref)
                .map(|s| Value::Schedule(s.clone())),
        })
    }

    /// The records a restore must reproduce, in key order.
    pub(super) fn snapshot(&self) -> Vec<ChangelogRecord> {
        let mut records: Vec<ChangelogRecord> = self
            .keys
            .iter()
            .filter_map(|(p, key, _)| self.key_record(p, key).ok())
            .collect();
        for (p, s) in self.schedules.iter().enumerate() {
            if s.is_some() {
                records.extend(self.schedule_record(index(p)).ok());
            }
        }
        for (p, c) in self.counters.iter().enumerate() {
            if *c > 0 {
                records.extend(self.counter_record(index(p)).ok());
            }
        }
        records
    }

    /// Dispatches queued steps of job `j` while it has a free slot.
    fn pump(&mut self, j: u16, now: Timestamp) -> Result<(), Error> {
        loop {
            let job = self.job_mut(j)?;
            if job.share.is_some_and(|share| job.running >= share) {
                return Ok(());
            }
            let Some((at, p, key)) = job.queue.pop() else {
                return Ok(());
            };
            self.dispatch(p, &key, at, now)?;
        }
    }
}

/// An index into a definition list: configurations hold far fewer than
/// 65,536 jobs or processes (config validation bounds them).
fn index(i: usize) -> u16 {
    u16::try_from(i).unwrap_or(u16::MAX)
}

/// A placement `i` entries after `first` (a block reserved at once).
fn nth(first: Placement, i: usize) -> Placement {
    Placement {
        order: first
            .order
            .saturating_add(i64::try_from(i).unwrap_or(i64::MAX)),
        ..first
    }
}
