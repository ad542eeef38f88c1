//! Steps: queueing in the job queue, dispatch, results with `output` /
//! `next` / `goal_reached`, failures with backoff and tiers — the step's
//! hooks around the shared run slot — and how an instance ends (the
//! time-driven hooks are in `timers`).

use std::sync::Arc;

use jiff::Timestamp;

use super::{index, nth, ProcTimer, Processes, StepAlarms};
use crate::action::{Action, Event, StepRunCommand};
use crate::engine::input::RunResult;
use crate::engine::{bug, Error};
use crate::offer::merge_patch;
use crate::process::{
    instance_id, parse_step_run_id, step_target, Outcome, Placement, Position, Reuse, Status, Step,
};
use crate::run::{add, Failure, Phase, Rejection, RunSlot, Status as RunStatus};

/// Why an instance ends.
pub(super) enum End {
    /// Every step succeeded.
    Succeeded,
    /// A step died (`step`) or its job's deadline passed (`deadline`).
    Failed {
        /// `step` or `deadline`.
        reason: &'static str,
        /// The last error.
        error: String,
    },
    /// Cancelled (`operator`) or replaced by a new launch (`replaced`).
    Cancelled(&'static str),
    /// The process `timeout` passed.
    TimedOut,
}

impl Processes {
    /// Puts the active instance's current step in its job's queue, at
    /// `placement` (a block reserved by the caller) or at `position`.
    pub(super) fn enqueue_step(
        &mut self,
        p: u16,
        key: &str,
        placement: Option<Placement>,
        position: Position,
        now: Timestamp,
    ) -> Result<(), Error> {
        let j = self.current_job(p, key)?;
        let deadline = self.job(j)?.def.deadline;
        let inst = self.active_mut(p, key)?;
        inst.slot.phase = Phase::Queued;
        let arm_deadline = match (deadline, inst.step_deadline) {
            (Some(d), None) => {
                let at = add(now, d.get());
                inst.step_deadline = Some(at);
                Some(at)
            }
            _ => None,
        };
        let (lane, priority) = (inst.lane, inst.priority);
        let at = match placement {
            Some(at) => at,
            None => self.job_mut(j)?.queue.reserve(lane, priority, position, 1),
        };
        self.active_mut(p, key)?.queued = Some(at);
        self.job_mut(j)?.queue.insert(at, p, key);
        if let Some(due) = arm_deadline {
            self.timers
                .arm(due, ProcTimer::JobDeadline(p, key.to_string()));
        }
        self.pending.insert(j);
        self.mark(p, key);
        Ok(())
    }

    /// The job index of the active instance's current step.
    pub(super) fn current_job(&self, p: u16, key: &str) -> Result<u16, Error> {
        let inst = self
            .record(p, key)
            .and_then(|r| r.active.as_ref())
            .ok_or_else(|| bug(format!("process #{p} key `{key}` has no active instance")))?;
        self.job_of(inst)
    }

    /// The job index of `inst`'s current step.
    fn job_of(&self, inst: &crate::process::InstanceRecord) -> Result<u16, Error> {
        let step = inst
            .chain
            .get(inst.step as usize)
            .ok_or_else(|| bug(format!("instance #{} is past its chain", inst.n)))?;
        self.job_by_name
            .get(&step.job)
            .copied()
            .ok_or_else(|| bug(format!("unknown job `{}` in a chain", step.job)))
    }

    pub(super) fn active_mut(
        &mut self,
        p: u16,
        key: &str,
    ) -> Result<&mut crate::process::InstanceRecord, Error> {
        self.record_mut(p, key)?
            .active
            .as_mut()
            .ok_or_else(|| bug(format!("process #{p} key `{key}` has no active instance")))
    }

    /// The active instance's step slot with its alarms.
    fn slot_mut<'a>(
        &'a mut self,
        p: u16,
        key: &'a str,
    ) -> Result<(&'a mut crate::process::InstanceRecord, StepAlarms<'a>), Error> {
        let inst = self
            .keys
            .get_mut(p, key)
            .and_then(|r| r.active.as_mut())
            .ok_or_else(|| bug(format!("process #{p} key `{key}` has no active instance")))?;
        let alarms = StepAlarms {
            timers: &mut self.timers,
            process: p,
            key,
        };
        Ok((inst, alarms))
    }

    /// Sends the active instance's current step to its job's workers: a new
    /// run (`fresh`) or the run in flight under a new pass — a re-dispatch
    /// Reactor decides on its own (a timeout, an idle instance), whose
    /// `source` is `auto`. `j` is the step's job (see [`Self::current_job`]).
    pub(super) fn send(
        &mut self,
        p: u16,
        key: &str,
        j: u16,
        fresh: bool,
        now: Timestamp,
    ) -> Result<(), Error> {
        let (job_name, topic, timeout) = {
            let job = &self.job(j)?.def;
            (job.name.clone(), job.topic.clone(), job.run.timeout)
        };
        let name = self.def(p)?.name.clone();
        let idle = self.def(p)?.idle_timeout;
        let (inst, mut alarms) = self.slot_mut(p, key)?;
        let instance = instance_id(&name, key, inst.n);
        let target = step_target(&instance, inst.step);
        let run = if fresh {
            inst.runs += 1;
            inst.slot.start(&target, timeout, now, &mut alarms)
        } else {
            inst.slot.reissue(&target, timeout, now, &mut alarms)
        }
        .clone();
        let old_progress = std::mem::replace(&mut inst.progress_at, now);
        let step = inst.chain.get(inst.step as usize);
        let params = step
            .and_then(|s| s.params.clone())
            .unwrap_or_else(|| inst.params.clone());
        let command = StepRunCommand {
            process: name,
            key: key.to_string(),
            instance,
            step: inst.step,
            job: job_name,
            run_id: run.run_id,
            attempt: run.attempt,
            pass: run.pass,
            params,
            context: inst.context.clone(),
            deadline: run.deadline,
            source: if fresh {
                inst.source.clone()
            } else {
                Some(crate::ops::AUTO.to_string())
            },
            topic,
        };
        if let Some(idle) = idle {
            self.timers.replace(
                Some(add(old_progress, idle.get())),
                Some(add(now, idle.get())),
                ProcTimer::Idle(p, key.to_string()),
            );
        }
        self.out.push(Action::StepRun(Box::new(command)));
        self.mark(p, key);
        Ok(())
    }

    /// Dispatches a step popped from its job's queue.
    pub(super) fn dispatch(
        &mut self,
        p: u16,
        key: &str,
        _at: Placement,
        now: Timestamp,
    ) -> Result<(), Error> {
        let j = self.current_job(p, key)?;
        self.active_mut(p, key)?.queued = None;
        self.job_mut(j)?.running += 1;
        self.send(p, key, j, true, now)
    }

    /// Takes the step's run off the slot and frees its job slot (or takes
    /// the step out of its queue, or cancels its wake-up): the step is
    /// nowhere any more. `j` is the step's job (see [`Self::current_job`]):
    /// the callers on a result's path have it already.
    pub(super) fn vacate(&mut self, p: u16, key: &str, j: u16) -> Result<(), Error> {
        let (inst, mut alarms) = self.slot_mut(p, key)?;
        let was = inst.slot.phase;
        inst.slot.end(&mut alarms);
        inst.slot.set_wake(None, &mut alarms);
        let queued = inst.queued.take();
        match was {
            Phase::Running => {
                let job = self.job_mut(j)?;
                job.running = job.running.saturating_sub(1);
                self.pending.insert(j);
            }
            Phase::Queued => {
                if let Some(at) = queued {
                    self.job_mut(j)?.queue.remove(at, p, key);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether `run_id` is a step run of a process (or job) of this shard.
    pub(in crate::engine) fn owns_run(&self, run_id: &str) -> bool {
        parse_step_run_id(run_id).is_some_and(|id| self.proc_by_name.contains_key(id.process))
    }

    /// Applies a step worker's result.
    pub(in crate::engine) fn on_result(
        &mut self,
        mut result: RunResult,
        now: Timestamp,
    ) -> Result<(), Error> {
        // Taken out (the step's hooks read the rest): the id names the key.
        let run_id = std::mem::take(&mut result.run_id);
        let Some(id) = parse_step_run_id(&run_id) else {
            return Err(bug("a result that is no step run reached the processes"));
        };
        let Some(p) = self.proc_index(id.process) else {
            return Err(bug("a result for an unknown process reached the processes"));
        };
        let current = self
            .record(p, id.key)
            .and_then(|r| r.active.as_ref())
            .filter(|i| i.n == id.n && i.step == id.step);
        let verdict = match current {
            None => Err(Rejection::NotCurrent),
            Some(inst) => {
                let j = self.job_of(inst)?;
                let accept = self.job(j)?.def.run.accept;
                inst.slot.accepts(&run_id, result.pass, accept).map(|()| j)
            }
        };
        let j = match verdict {
            Ok(j) => j,
            Err(reason) => {
                let subject = self.subject(p, id.key, true);
                self.emit(Event::ResultRejected {
                    subject,
                    run_id: run_id.as_str().into(),
                    pass: result.pass,
                    reason,
                });
                return Ok(());
            }
        };
        let key = id.key;
        match result.status {
            RunStatus::Succeeded => self.step_succeeded(p, key, j, result, now),
            RunStatus::Failed => {
                let error = result.error.unwrap_or_else(|| "failed".to_string());
                self.vacate(p, key, j)?;
                self.step_failed(p, key, error, now)
            }
        }
    }

    fn step_succeeded(
        &mut self,
        p: u16,
        key: &str,
        j: u16,
        result: RunResult,
        now: Timestamp,
    ) -> Result<(), Error> {
        self.vacate(p, key, j)?;
        for next in &result.step.next {
            if !self.job_by_name.contains_key(&next.job) {
                // Validated at decode for configured jobs; a job removed
                // since is skipped rather than breaking the chain.
                let subject = self.subject(p, key, true);
                self.emit(Event::CommandRejected {
                    subject,
                    reason: format!("`next` names unknown job `{}`", next.job),
                });
            }
        }
        let known: Vec<_> = result
            .step
            .next
            .iter()
            .filter(|n| self.job_by_name.contains_key(&n.job))
            .cloned()
            .collect();
        let goal = result.step.goal_reached;
        let inst = self.active_mut(p, key)?;
        if let Some(output) = &result.step.output {
            let mut context = serde_json::Value::Object(std::mem::take(&mut inst.context));
            merge_patch(&mut context, &serde_json::Value::Object(output.clone()));
            if let serde_json::Value::Object(map) = context {
                inst.context = map;
            }
        }
        // `front` jobs run right after this step, in the order given.
        let mut at = inst.step as usize + 1;
        for next in known {
            let step = Step {
                job: next.job,
                params: next.params,
            };
            match next.position {
                Position::Front => {
                    if at <= inst.chain.len() {
                        inst.chain.insert(at, step);
                        at += 1;
                    }
                }
                Position::Back => inst.chain.push(step),
            }
        }
        // After a recovery, run numbers go on from where it left them.
        inst.slot = RunSlot::from(crate::run::SlotParts {
            run_seq: inst.seq_base,
            ..Default::default()
        });
        inst.step += 1;
        inst.overdue = false;
        let old_deadline = inst.step_deadline.take();
        inst.progress_at = now;
        let more = (inst.step as usize) < inst.chain.len();
        if let Some(due) = old_deadline {
            self.timers
                .cancel(due, ProcTimer::JobDeadline(p, key.to_string()));
        }
        if goal {
            self.record_mut(p, key)?.goal = true;
        }
        self.rearm_idle(p, key, now)?;
        self.mark(p, key);
        if more {
            self.enqueue_step(p, key, None, Position::Back, now)
        } else {
            self.end(p, key, End::Succeeded, now)
        }
    }

    /// A step's attempt failed (its run already vacated): a step past its
    /// deadline fails for good; otherwise the job's retry policy decides.
    pub(super) fn step_failed(
        &mut self,
        p: u16,
        key: &str,
        error: String,
        now: Timestamp,
    ) -> Result<(), Error> {
        if self.active_mut(p, key)?.overdue {
            return self.deadline_exceeded(p, key, now);
        }
        let j = self.current_job(p, key)?;
        let policy = Arc::clone(&self.job(j)?.def.run);
        let name = self.def(p)?.name.clone();
        let (inst, mut alarms) = self.slot_mut(p, key)?;
        let target = step_target(&instance_id(&name, key, inst.n), inst.step);
        let failure = inst
            .slot
            .failed(error.clone(), &policy.retry, now, &mut alarms);
        let (run_id, failures) = (inst.slot.last_run_id(&target), inst.slot.failures);
        let subject = self.subject(p, key, true);
        self.emit(failure.event(subject, run_id, failures, error.clone()));
        self.mark(p, key);
        if failure == Failure::Dead {
            return self.end(
                p,
                key,
                End::Failed {
                    reason: "step",
                    error,
                },
                now,
            );
        }
        Ok(())
    }

    /// Ends the active instance (its step already vacated): records the
    /// outcome, publishes it, and starts the next waiting launch.
    pub(super) fn end(&mut self, p: u16, key: &str, end: End, now: Timestamp) -> Result<(), Error> {
        let (reuse, timeout, idle_timeout) = {
            let def = self.def(p)?;
            (def.reuse, def.timeout, def.idle_timeout)
        };
        let subject = self.subject(p, key, false);
        let record = self.record_mut(p, key)?;
        let inst = record.active.take().ok_or_else(|| {
            bug(format!(
                "ending process #{p} key `{key}` without an instance"
            ))
        })?;
        let (status, error) = match &end {
            End::Succeeded => (Status::Succeeded, None),
            End::Failed { error, .. } => (Status::Failed, Some(error.clone())),
            End::Cancelled(_) => (Status::Cancelled, None),
            End::TimedOut => (Status::TimedOut, None),
        };
        // What did not succeed is kept whole: an operator may restart it
        // from a step, or retry its step (`recover`).
        let kept = (status != Status::Succeeded).then(|| Box::new(inst.clone()));
        if status == Status::Succeeded && reuse == Reuse::UntilReset {
            record.goal = true;
        }
        record.last = Some(Outcome {
            n: inst.n,
            status,
            finished_at: now,
            context: inst.context,
            error,
            instance: kept,
        });
        let key_s = key.to_string();
        if let Some(timeout) = timeout {
            self.timers.cancel(
                add(inst.started_at, timeout.get()),
                ProcTimer::Timeout(p, key_s.clone()),
            );
        }
        if let Some(idle) = idle_timeout {
            self.timers.cancel(
                add(inst.progress_at, idle.get()),
                ProcTimer::Idle(p, key_s.clone()),
            );
        }
        if let Some(due) = inst.step_deadline {
            self.timers.cancel(due, ProcTimer::JobDeadline(p, key_s));
        }
        self.emit(match end {
            End::Succeeded => Event::ProcessSucceeded { subject },
            End::Failed { reason, error } => Event::ProcessFailed {
                subject,
                reason: reason.to_string(),
                error,
            },
            End::Cancelled(reason) => Event::ProcessCancelled {
                subject,
                reason: reason.to_string(),
            },
            End::TimedOut => Event::ProcessTimedOut { subject },
        });
        self.mark(p, key);
        self.start_waiting(p, key, now)
    }

    /// When `record`, a key of process `p`, is dropped: a key with nothing
    /// active or waiting, whose process allows any number of instances,
    /// needs its record only until no late result of its last instance's
    /// runs can be current. Armed where a step writes the record and where
    /// a restore reads it, so both drop it at the same time whatever made
    /// it idle (its instance ended, its goal reset, its waiting launches
    /// cancelled).
    pub(super) fn bury_at(
        &self,
        p: u16,
        record: &crate::process::KeyRecord,
    ) -> Result<Option<Timestamp>, Error> {
        if !buriable(record) || self.def(p)?.reuse != Reuse::Allow {
            return Ok(None);
        }
        Ok(record
            .last
            .as_ref()
            .map(|last| add(last.finished_at, self.grave_time.get())))
    }

    /// Starts keys' steps as a block reserved at `position` of the first
    /// step's job queue: key `i` of the block takes placement `i`.
    pub(super) fn block_placement(
        &mut self,
        p: u16,
        lane: crate::process::Lane,
        priority: i64,
        position: Position,
        n: usize,
    ) -> Result<Option<Placement>, Error> {
        let Some(&j) = self.def(p)?.steps.first() else {
            return Ok(None);
        };
        Ok(Some(
            self.job_mut(j)?.queue.reserve(lane, priority, position, n),
        ))
    }

    /// The `i`-th placement of a block.
    pub(super) fn in_block(first: Option<Placement>, i: usize) -> Option<Placement> {
        first.map(|f| nth(f, i))
    }

    /// Rebuilds queues, running counts and timers from the key records.
    pub(in crate::engine) fn rebuild_derived(&mut self) -> Result<(), Error> {
        for job in &mut self.jobs {
            job.queue = Default::default();
            job.running = 0;
        }
        self.timers = Default::default();
        self.stalled.clear();
        let keys: Vec<(u16, String)> = self
            .keys
            .iter()
            .map(|(p, k, _)| (p, k.to_string()))
            .collect();
        for (p, key) in keys {
            let def = self.def(p)?.clone();
            let Some(record) = self.record(p, &key) else {
                continue;
            };
            let Some(inst) = record.active.clone() else {
                if !record.waiting.is_empty() {
                    self.stalled.push((p, key));
                } else if let Some(at) = self.bury_at(p, record)? {
                    self.timers.arm(at, ProcTimer::Bury(p, key));
                }
                continue;
            };
            let j = self.current_job(p, &key)?;
            match inst.slot.phase {
                Phase::Queued => {
                    if let Some(at) = inst.queued {
                        self.job_mut(j)?.queue.insert(at, p, &key);
                    }
                }
                Phase::Running => self.job_mut(j)?.running += 1,
                _ => {}
            }
            inst.slot.rearm(&mut StepAlarms {
                timers: &mut self.timers,
                process: p,
                key: &key,
            });
            if let Some(due) = inst.step_deadline {
                self.timers.arm(due, ProcTimer::JobDeadline(p, key.clone()));
            }
            if let Some(timeout) = def.timeout {
                self.timers.arm(
                    add(inst.started_at, timeout.get()),
                    ProcTimer::Timeout(p, key.clone()),
                );
            }
            if let Some(idle) = def.idle_timeout {
                self.timers.arm(
                    add(inst.progress_at, idle.get()),
                    ProcTimer::Idle(p, key.clone()),
                );
            }
        }
        for j in 0..self.jobs.len() {
            self.pending.insert(index(j));
        }
        Ok(())
    }
}

/// A key record that nothing needs once no late result can be current:
/// nothing active or waiting, no goal, and a last instance that did not fail
/// or time out — those stay until an operator recovers them (or a new
/// launch replaces the outcome).
pub(super) fn buriable(record: &crate::process::KeyRecord) -> bool {
    record.is_idle()
        && !record.goal
        && record
            .last
            .as_ref()
            .is_none_or(|l| !matches!(l.status, Status::Failed | Status::TimedOut))
}
