//! Launching (seed 003): by command for a key or a list of keys, by
//! submitting a job, by an event on any topic, by schedule — one rule for
//! all of them: at most one active instance per key, `conflict` while one is
//! active, `reuse` once one has finished, `when` validated inside the shard
//! (the serialization point) right before the start. Also `cancel` and
//! `reset_key`.

use jiff::Timestamp;

use super::steps::End;
use super::{ProcTimer, Processes};
use crate::action::{Event, Subject};
use crate::engine::input::EventRecord;
use crate::engine::{bug, Error};
use crate::offer::Body;
use crate::process::{
    context_json, instance_id, last_json, Conflict, InstanceRecord, KeyRecord, Launch, Placement,
    Position, Refusal, Reuse, Step,
};
use crate::run::{add, RunSlot};

/// Variables a process `when` sees.
pub const WHEN_VARIABLES: [&str; 5] = ["key", "params", "last", "context", "now"];
/// Variables an `on` expression sees.
pub const ON_VARIABLES: [&str; 3] = ["record", "headers", "now"];

/// A launch one event record asks for: process, key, launch.
pub type EventLaunch = (String, String, Launch);

impl Processes {
    /// Launches `process` for each of `keys` (in list order, as one block in
    /// the first job's queue). Keys this shard does not own are the
    /// router's to forward; here they are refused as a bug.
    pub(in crate::engine) fn launch(
        &mut self,
        process: &str,
        keys: &[String],
        launch: &Launch,
        now: Timestamp,
    ) -> Result<(), Error> {
        let Some(p) = self.proc_index(process) else {
            self.emit(Event::CommandRejected {
                subject: unknown(process, keys.first().map_or("", String::as_str)),
                reason: format!("unknown process `{process}`"),
            });
            return Ok(());
        };
        if let Some(key) = keys.iter().find(|k| !self.owns_key(k)) {
            return Err(bug(format!(
                "a launch for key `{key}` reached a shard that does not own it"
            )));
        }
        let priority = launch.priority.unwrap_or(self.def(p)?.priority);
        let block = self.block_placement(p, launch.lane, priority, launch.position, keys.len())?;
        for (i, key) in keys.iter().enumerate() {
            let at = Processes::in_block(block, i);
            self.launch_one(p, key, launch.clone(), at, now)?;
        }
        Ok(())
    }

    /// Submits job `job` for `key`: a one-step instance of the job's
    /// implicit process (`conflict = "queue"`: a key's jobs run one at a
    /// time, in order).
    pub(in crate::engine) fn submit(
        &mut self,
        job: &str,
        key: &str,
        launch: &Launch,
        now: Timestamp,
    ) -> Result<(), Error> {
        if !self.job_by_name.contains_key(job) {
            self.emit(Event::CommandRejected {
                subject: unknown(job, key),
                reason: format!("unknown job `{job}`"),
            });
            return Ok(());
        }
        self.launch(job, &[key.to_string()], launch, now)
    }

    /// The launch rule for one key.
    fn launch_one(
        &mut self,
        p: u16,
        key: &str,
        launch: Launch,
        at: Option<Placement>,
        now: Timestamp,
    ) -> Result<(), Error> {
        let conflict = self.def(p)?.conflict;
        let exists = self.record(p, key).is_some();
        if launch.reset {
            if let Some(record) = self.keys.get_mut(p, key) {
                if record.goal {
                    record.goal = false;
                    self.mark(p, key);
                }
            }
        }
        let active = exists && self.record(p, key).is_some_and(|r| r.active.is_some());
        if active {
            match conflict {
                Conflict::Reject => return self.refuse(p, key, Refusal::Active, None),
                Conflict::Queue => {
                    let record = self.record_mut(p, key)?;
                    match launch.position {
                        Position::Back => record.waiting.push(launch),
                        Position::Front => record.waiting.insert(0, launch),
                    }
                    self.mark(p, key);
                    let subject = self.subject(p, key, false);
                    self.emit(Event::LaunchQueued { subject });
                    return Ok(());
                }
                Conflict::Replace => {
                    // The new instance is checked before the old one goes.
                    if let Some((refusal, error)) = self.check(p, key, &launch, now)? {
                        return self.refuse(p, key, refusal, error);
                    }
                    self.vacate(p, key, self.current_job(p, key)?)?;
                    self.end(p, key, End::Cancelled("replaced"), now)?;
                    if self.record(p, key).is_some_and(|r| r.active.is_some()) {
                        // `end` started a waiting launch: this one waits too.
                        self.record_mut(p, key)?.waiting.insert(0, launch);
                        self.mark(p, key);
                        return Ok(());
                    }
                    return self.start_instance(p, key, launch, at, now);
                }
            }
        }
        if let Some((refusal, error)) = self.check(p, key, &launch, now)? {
            return self.refuse(p, key, refusal, error);
        }
        self.start_instance(p, key, launch, at, now)
    }

    /// `reuse` and `when`: why `launch` may not start now, if it may not.
    fn check(
        &self,
        p: u16,
        key: &str,
        launch: &Launch,
        now: Timestamp,
    ) -> Result<Option<(Refusal, Option<String>)>, Error> {
        let def = self.def(p)?;
        let empty = KeyRecord::default();
        let record = self.record(p, key).unwrap_or(&empty);
        let reused = match def.reuse {
            Reuse::Allow => true,
            Reuse::FailedOnly => record
                .last
                .as_ref()
                .is_none_or(|l| l.status != crate::process::Status::Succeeded),
            Reuse::UntilReset => !record.goal,
        };
        if !reused {
            return Ok(Some((Refusal::Reuse, None)));
        }
        let Some(when) = &def.when else {
            return Ok(None);
        };
        let params = serde_json::Value::Object(launch.params.clone());
        let last = last_json(&def.name, key, record.last.as_ref());
        let context = context_json(&def.name, key, record);
        let key_value = serde_json::Value::from(key);
        let vars = [
            ("key", &key_value),
            ("params", &params),
            ("last", &last),
            ("context", &context),
        ];
        Ok(match when.eval_bool_with(&vars, now) {
            Ok(true) => None,
            Ok(false) => Some((Refusal::Validation, None)),
            Err(e) => Some((Refusal::Validation, Some(e.to_string()))),
        })
    }

    fn refuse(
        &mut self,
        p: u16,
        key: &str,
        refusal: Refusal,
        error: Option<String>,
    ) -> Result<(), Error> {
        let subject = self.subject(p, key, false);
        self.emit(Event::LaunchRejected {
            subject,
            reason: refusal.as_str().to_string(),
            error,
        });
        Ok(())
    }

    /// Starts an instance of `p` for `key` (the rules already hold).
    fn start_instance(
        &mut self,
        p: u16,
        key: &str,
        launch: Launch,
        at: Option<Placement>,
        now: Timestamp,
    ) -> Result<(), Error> {
        let def = self.def(p)?;
        let (name, priority, timeout, idle_timeout) = (
            def.name.clone(),
            def.priority,
            def.timeout,
            def.idle_timeout,
        );
        let chain: Vec<Step> = def
            .steps
            .iter()
            .filter_map(|&j| self.jobs.get(j as usize))
            .map(|j| Step {
                job: j.def.name.to_string(),
                params: None,
            })
            .collect();
        let n = self.next_instance(p)?;
        let record = self.keys.entry(p, key);
        record.active = Some(InstanceRecord {
            n,
            params: launch.params,
            context: Body::new(),
            chain,
            step: 0,
            slot: RunSlot::default(),
            queued: None,
            step_deadline: None,
            overdue: false,
            priority: launch.priority.unwrap_or(priority),
            lane: launch.lane,
            started_at: now,
            progress_at: now,
            source: launch.source.clone(),
            runs: 0,
            seq_base: 0,
        });
        self.mark(p, key);
        self.emit(Event::ProcessStarted {
            subject: Subject::Process {
                instance: Some(instance_id(&name, key, n)),
                process: name,
                key: key.to_string(),
                job: None,
            },
            source: launch.source,
        });
        if let Some(timeout) = timeout {
            self.timers.arm(
                add(now, timeout.get()),
                ProcTimer::Timeout(p, key.to_string()),
            );
        }
        if let Some(idle) = idle_timeout {
            self.timers
                .arm(add(now, idle.get()), ProcTimer::Idle(p, key.to_string()));
        }
        self.enqueue_step(p, key, at, launch.position, now)
    }

    /// The active instance ended: the next waiting launch that passes the
    /// rules starts; refused ones are reported and dropped.
    pub(super) fn start_waiting(&mut self, p: u16, key: &str, now: Timestamp) -> Result<(), Error> {
        loop {
            let Some(record) = self.keys.get_mut(p, key) else {
                return Ok(());
            };
            if record.active.is_some() || record.waiting.is_empty() {
                return Ok(());
            }
            let launch = record.waiting.remove(0);
            self.mark(p, key);
            match self.check(p, key, &launch, now)? {
                Some((refusal, error)) => self.refuse(p, key, refusal, error)?,
                None => return self.start_instance(p, key, launch, None, now),
            }
        }
    }

    /// `cancel`: ends the key's active instance (late results of its runs
    /// are rejected); with nothing active, drops its waiting launches.
    pub(in crate::engine) fn cancel(
        &mut self,
        process: &str,
        key: &str,
        now: Timestamp,
    ) -> Result<(), Error> {
        let Some(p) = self.proc_index(process) else {
            self.emit(Event::CommandRejected {
                subject: unknown(process, key),
                reason: format!("unknown process `{process}`"),
            });
            return Ok(());
        };
        match self.record(p, key) {
            Some(r) if r.active.is_some() => {
                self.vacate(p, key, self.current_job(p, key)?)?;
                self.end(p, key, End::Cancelled("operator"), now)
            }
            Some(r) if !r.waiting.is_empty() => {
                self.record_mut(p, key)?.waiting.clear();
                self.mark(p, key);
                let subject = self.subject(p, key, false);
                self.emit(Event::ProcessCancelled {
                    subject,
                    reason: "operator".to_string(),
                });
                Ok(())
            }
            _ => {
                let subject = self.subject(p, key, false);
                self.emit(Event::CommandRejected {
                    subject,
                    reason: "no active or waiting instance".to_string(),
                });
                Ok(())
            }
        }
    }

    /// `reset_key`: clears the key's goal, so `reuse = "until_reset"`
    /// allows a new instance again.
    pub(in crate::engine) fn reset_key(&mut self, process: &str, key: &str) -> Result<(), Error> {
        let Some(p) = self.proc_index(process) else {
            self.emit(Event::CommandRejected {
                subject: unknown(process, key),
                reason: format!("unknown process `{process}`"),
            });
            return Ok(());
        };
        if let Some(record) = self.keys.get_mut(p, key) {
            if record.goal {
                record.goal = false;
                self.mark(p, key);
            }
        }
        Ok(())
    }

    /// The launches one record on an `on` topic asks for, and the
    /// expression failures `(process, error)` (pure: the router sends each
    /// launch to the shard that owns its key).
    pub(in crate::engine) fn launches_for(
        &self,
        record: &EventRecord,
        now: Timestamp,
    ) -> (Vec<EventLaunch>, Vec<(String, String)>) {
        event_launches(
            self.procs.iter().map(|p| (&p.name, p.on.as_ref())),
            record,
            now,
        )
    }

    /// Reports `on` expressions that failed on `record` as rejected launches.
    pub(in crate::engine) fn reject_event_launches(
        &mut self,
        record: &EventRecord,
        failures: Vec<(String, String)>,
    ) {
        for (process, error) in failures {
            self.emit(Event::LaunchRejected {
                subject: unknown(&process, &record.key),
                reason: Refusal::Validation.as_str().to_string(),
                error: Some(error),
            });
        }
    }
}

/// The launches `record` asks for, over `(process, on)` pairs, and the
/// expression failures `(process, error)`. One rule for the engine and the
/// router.
pub fn event_launches<'a>(
    processes: impl Iterator<Item = (&'a String, Option<&'a crate::config::OnEvent>)>,
    record: &EventRecord,
    now: Timestamp,
) -> (Vec<EventLaunch>, Vec<(String, String)>) {
    let mut launches = Vec::new();
    let mut failures = Vec::new();
    let headers = serde_json::Value::Object(
        record
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::from(v.clone())))
            .collect(),
    );
    let vars = [("record", &record.value), ("headers", &headers)];
    for (name, on) in processes {
        let Some(on) = on.filter(|on| on.topic == record.topic) else {
            continue;
        };
        let wanted = match &on.when {
            None => Ok(true),
            Some(when) => when.eval_bool_with(&vars, now),
        };
        let launch = wanted.and_then(|wanted| {
            if !wanted {
                return Ok(None);
            }
            let key = on.key.eval_string_with(&vars, now)?;
            let params = match &on.params {
                None => Body::new(),
                Some(params) => params.eval_object_with(&vars, now)?,
            };
            Ok(Some((key, params)))
        });
        match launch {
            Ok(None) => {}
            Ok(Some((key, params))) => launches.push((
                name.clone(),
                key,
                Launch {
                    params,
                    reset: on.reset,
                    source: Some(format!("event:{}", record.topic)),
                    at: now,
                    ..Launch::default()
                },
            )),
            Err(e) => failures.push((name.clone(), e.to_string())),
        }
    }
    (launches, failures)
}

/// The subject of a command that names a process or key this shard does
/// not know.
fn unknown(process: &str, key: &str) -> Subject {
    Subject::Process {
        process: process.to_string(),
        key: key.to_string(),
        instance: None,
        job: None,
    }
}
