//! Operations over the shard's process keys: each key is one item — its
//! active instance, else its last one — walked by process, then key. A
//! recovery restarts in the job queues' low lane: a new instance under the
//! launch rules (`from_start`), or the same instance again at its failed
//! (or waiting) step (`retry`) or at the first step running a given job
//! (`from_step`), with new run ids that never repeat one of its earlier runs.

use std::ops::Bound;

use jiff::Timestamp;

use super::{ProcTimer, Processes};
use crate::action::{Event, Subject};
use crate::engine::ops::{Flow, Visit};
use crate::engine::Error;
use crate::ops::{Criteria, Item, Kind, Mode};
use crate::process::{instance_id, InstanceRecord, Lane, Launch, Position, Status};
use crate::run::{add, Phase, RunSlot};

/// An active instance's step a recovery can restart: it failed and waits
/// for its backoff or tier to end.
fn waiting(phase: Phase) -> bool {
    matches!(phase, Phase::Backoff | Phase::Parked)
}

/// Whether `mode` can restart `inst` (`active`: it is the key's active
/// instance; else it is a finished one kept with the key's outcome).
fn restarts(mode: Option<&Mode>, inst: &InstanceRecord, active: bool) -> bool {
    let has = |job: &str| inst.chain.iter().any(|s| s.job == job);
    match mode {
        None => false,
        Some(Mode::FromStart) => !active,
        Some(Mode::Retry) => !active || waiting(inst.slot.phase),
        Some(Mode::FromStep(job)) => (!active || waiting(inst.slot.phase)) && has(job),
    }
}

/// The item an instance makes.
fn item<'a>(
    name: &'a str,
    key: &'a str,
    inst: &'a InstanceRecord,
    state: &'a str,
    error: Option<&'a str>,
    at: Option<Timestamp>,
    recoverable: bool,
) -> Item<'a> {
    let slot = &inst.slot;
    Item {
        kind: Kind::Process,
        name,
        key,
        state,
        error,
        at,
        step: inst.chain.get(inst.step as usize).map(|s| s.job.as_str()),
        instance: Some(inst.n),
        step_index: Some(inst.step),
        run_seq: slot.run_seq,
        attempt: slot
            .run()
            .map(|r| r.attempt)
            .or((slot.failures > 0).then_some(slot.failures)),
        recoverable,
    }
}

impl Processes {
    /// Calls `f` with every process key after `after` (`(process, key)`),
    /// by process then key, until it says stop; returns whether it did.
    pub(in crate::engine) fn op_walk(
        &self,
        criteria: &Criteria,
        mode: Option<&Mode>,
        after: Option<(&str, &str)>,
        f: &mut Visit<'_>,
    ) -> bool {
        if !criteria.admits(Kind::Process) {
            return false;
        }
        let only = match criteria.exact_name() {
            Some(name) => match self.proc_index(name) {
                Some(p) => Some(p),
                None => return false,
            },
            None => None,
        };
        let from = match after.and_then(|(name, key)| Some((self.proc_index(name)?, key))) {
            Some((p, key)) => Bound::Excluded((p, key)),
            None => match only {
                Some(p) => Bound::Included((p, "")),
                None => Bound::Unbounded,
            },
        };
        for (p, key, record) in self.keys.from(from) {
            if only.is_some_and(|o| o != p) {
                if only.is_some_and(|o| o < p) {
                    break;
                }
                continue;
            }
            let Some(def) = self.procs.get(p as usize) else {
                continue;
            };
            let item = match (&record.active, &record.last) {
                (Some(inst), _) => {
                    let at = match inst.slot.phase {
                        Phase::Running => inst.slot.run().map(|r| r.dispatched_at),
                        Phase::Queued => Some(inst.progress_at),
                        _ => inst.slot.failed_at(),
                    };
                    item(
                        &def.name,
                        key,
                        inst,
                        inst.slot.phase.as_str(),
                        inst.slot.last_error(),
                        at,
                        restarts(mode, inst, true),
                    )
                }
                (None, Some(last)) => match &last.instance {
                    Some(inst) => item(
                        &def.name,
                        key,
                        inst,
                        last.status.as_str(),
                        last.error.as_deref(),
                        Some(last.finished_at),
                        restarts(mode, inst, false),
                    ),
                    None => Item {
                        kind: Kind::Process,
                        name: &def.name,
                        key,
                        state: last.status.as_str(),
                        error: last.error.as_deref(),
                        at: Some(last.finished_at),
                        step: None,
                        instance: Some(last.n),
                        step_index: None,
                        run_seq: 0,
                        attempt: None,
                        recoverable: false,
                    },
                },
                (None, None) => continue,
            };
            if f(&item) == Flow::Stop {
                return true;
            }
        }
        false
    }

    /// Restarts `process` for `key` for a recovery (see the module).
    pub(in crate::engine) fn recover(
        &mut self,
        process: &str,
        key: &str,
        mode: &Mode,
        source: &str,
        now: Timestamp,
    ) -> Result<bool, Error> {
        let Some(p) = self.proc_index(process) else {
            return Ok(false);
        };
        let Some(record) = self.record(p, key) else {
            return Ok(false);
        };
        let (inst, active) = match (&record.active, &record.last) {
            (Some(inst), _) => (inst.clone(), true),
            (None, Some(last)) => match &last.instance {
                Some(inst) if last.status != Status::Succeeded => ((**inst).clone(), false),
                _ => return Ok(false),
            },
            (None, None) => return Ok(false),
        };
        if !restarts(Some(mode), &inst, active) {
            return Ok(false);
        }
        let name = self.def(p)?.name.clone();
        let step = match mode {
            Mode::FromStep(job) => inst.chain.iter().position(|s| s.job == *job),
            _ => Some(inst.step as usize),
        };
        let job = step.and_then(|k| inst.chain.get(k)).map(|s| s.job.clone());
        self.emit(Event::Recovered {
            subject: Subject::Process {
                process: name.clone(),
                key: key.to_string(),
                instance: Some(instance_id(&name, key, inst.n)),
                job,
            },
            source: source.to_string(),
            mode: mode.as_str().to_string(),
        });
        if *mode == Mode::FromStart {
            let launch = Launch {
                params: inst.params,
                position: Position::Back,
                lane: Lane::Low,
                source: Some(source.to_string()),
                at: now,
                ..Launch::default()
            };
            self.launch(&name, &[key.to_string()], &launch, now)?;
            return Ok(true);
        }
        let step = u32::try_from(step.unwrap_or(0)).unwrap_or(u32::MAX);
        if active {
            self.vacate(p, key, self.current_job(p, key)?)?;
        } else {
            // The finished instance is active again: the key's outcome
            // keeps what it was, without the copy.
            let record = self.record_mut(p, key)?;
            if let Some(last) = record.last.as_mut() {
                last.instance = None;
            }
            let mut revived = inst;
            revived.slot.take_run();
            revived.slot.take_wake();
            revived.started_at = now;
            revived.progress_at = now;
            revived.queued = None;
            record.active = Some(revived);
            let def = self.def(p)?;
            let (timeout, idle) = (def.timeout, def.idle_timeout);
            if let Some(timeout) = timeout {
                self.timers.arm(
                    add(now, timeout.get()),
                    ProcTimer::Timeout(p, key.to_string()),
                );
            }
            if let Some(idle) = idle {
                self.timers
                    .arm(add(now, idle.get()), ProcTimer::Idle(p, key.to_string()));
            }
        }
        let idle = self.def(p)?.idle_timeout;
        let inst = self.active_mut(p, key)?;
        let (old_deadline, old_progress) = (inst.step_deadline.take(), inst.progress_at);
        if let Mode::FromStep(_) = mode {
            // Past every run id the instance used: a restarted chain never
            // repeats one.
            inst.seq_base = inst.runs.max(inst.slot.run_seq).max(inst.seq_base);
            inst.step = step;
            inst.slot = RunSlot::from(crate::run::SlotParts {
                run_seq: inst.seq_base,
                ..Default::default()
            });
        }
        inst.overdue = false;
        inst.lane = Lane::Low;
        inst.source = Some(source.to_string());
        inst.progress_at = now;
        if let Some(due) = old_deadline {
            self.timers
                .cancel(due, ProcTimer::JobDeadline(p, key.to_string()));
        }
        if let (Some(idle), true) = (idle, active) {
            self.timers.replace(
                Some(add(old_progress, idle.get())),
                Some(add(now, idle.get())),
                ProcTimer::Idle(p, key.to_string()),
            );
        }
        self.mark(p, key);
        self.enqueue_step(p, key, None, Position::Back, now)?;
        Ok(true)
    }
}
