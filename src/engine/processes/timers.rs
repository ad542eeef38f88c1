//! A step's time-driven hooks: its run's timeout and backoff wake, its
//! job's deadline, the process timeout, and idle re-dispatch.

use std::sync::Arc;

use jiff::Timestamp;

use super::steps::End;
use super::{ProcTimer, Processes};
use crate::action::Event;
use crate::engine::Error;
use crate::run::{add, Phase};

impl Processes {
    pub(super) fn on_step_timeout(
        &mut self,
        p: u16,
        key: &str,
        at: Timestamp,
        now: Timestamp,
    ) -> Result<(), Error> {
        if self
            .record(p, key)
            .and_then(|r| r.active.as_ref())
            .is_none()
        {
            return Ok(());
        }
        let j = self.current_job(p, key)?;
        let policy = Arc::clone(&self.job(j)?.def.run);
        let inst = self.active_mut(p, key)?;
        let Some(run) = inst.slot.current().cloned() else {
            return Ok(());
        };
        let Some(restart) = inst.slot.timed_out(at, &policy) else {
            return Ok(());
        };
        let overdue = inst.overdue;
        let subject = self.subject(p, key, true);
        self.emit(Event::RunTimedOut {
            subject,
            run_id: run.run_id,
            attempt: run.attempt,
            restarted: restart && !overdue,
        });
        if restart && !overdue {
            return self.send(p, key, j, false, now);
        }
        self.vacate(p, key, j)?;
        self.step_failed(p, key, policy.timeout_error(), now)
    }

    /// A backoff or park ended: the step queues again at its job's
    /// `requeue` end (seed 004: a failed send goes back to the front).
    pub(super) fn on_step_wake(
        &mut self,
        p: u16,
        key: &str,
        at: Timestamp,
        now: Timestamp,
    ) -> Result<(), Error> {
        let Some(inst) = self.keys.get_mut(p, key).and_then(|r| r.active.as_mut()) else {
            return Ok(());
        };
        if !inst.slot.woke(at) {
            return Ok(());
        }
        let j = self.current_job(p, key)?;
        let requeue = self.job(j)?.def.requeue;
        self.enqueue_step(p, key, None, requeue, now)
    }

    pub(super) fn on_job_deadline(
        &mut self,
        p: u16,
        key: &str,
        at: Timestamp,
        now: Timestamp,
    ) -> Result<(), Error> {
        let Some(inst) = self.record(p, key).and_then(|r| r.active.as_ref()) else {
            return Ok(());
        };
        if inst.step_deadline != Some(at) {
            return Ok(());
        }
        let phase = inst.slot.phase;
        let j = self.current_job(p, key)?;
        let force = self.job(j)?.def.force_finish;
        if phase == Phase::Running && !force {
            // The current attempt may still succeed; it fails for good if
            // it does not (its timeout included).
            self.active_mut(p, key)?.overdue = true;
            self.mark(p, key);
            return Ok(());
        }
        self.vacate(p, key, j)?;
        self.deadline_exceeded(p, key, now)
    }

    /// The step's job deadline passed: it fails for good — no retry, no tier
    /// — and so does its instance.
    pub(super) fn deadline_exceeded(
        &mut self,
        p: u16,
        key: &str,
        now: Timestamp,
    ) -> Result<(), Error> {
        let deadline = self.active_mut(p, key)?.step_deadline.unwrap_or(now);
        let subject = self.subject(p, key, true);
        self.emit(Event::DeadlineExceeded { subject, deadline });
        self.end(
            p,
            key,
            End::Failed {
                reason: "deadline",
                error: format!("job deadline {deadline} passed"),
            },
            now,
        )
    }

    pub(super) fn on_process_timeout(
        &mut self,
        p: u16,
        key: &str,
        at: Timestamp,
        now: Timestamp,
    ) -> Result<(), Error> {
        let Some(timeout) = self.def(p)?.timeout else {
            return Ok(());
        };
        let due = self
            .record(p, key)
            .and_then(|r| r.active.as_ref())
            .map(|i| add(i.started_at, timeout.get()));
        if due != Some(at) {
            return Ok(());
        }
        self.vacate(p, key, self.current_job(p, key)?)?;
        self.end(p, key, End::TimedOut, now)
    }

    /// No step progress for `idle_timeout` (seed 002's IdleProcessTimeout):
    /// reported, and a running step is sent again under a new pass.
    pub(super) fn on_idle(
        &mut self,
        p: u16,
        key: &str,
        at: Timestamp,
        now: Timestamp,
    ) -> Result<(), Error> {
        let Some(idle) = self.def(p)?.idle_timeout else {
            return Ok(());
        };
        let Some(inst) = self.record(p, key).and_then(|r| r.active.as_ref()) else {
            return Ok(());
        };
        if add(inst.progress_at, idle.get()) != at {
            return Ok(());
        }
        let running = inst.slot.phase == Phase::Running;
        let subject = self.subject(p, key, true);
        self.emit(Event::ProcessIdle {
            subject,
            idle_for: idle,
        });
        if running {
            // As a timeout's restart: the attempt counts, the run id stays.
            let inst = self.active_mut(p, key)?;
            inst.slot.failures += 1;
            return self.send(p, key, self.current_job(p, key)?, false, now);
        }
        self.active_mut(p, key)?.progress_at = now;
        self.rearm_idle(p, key, now)?;
        self.mark(p, key);
        Ok(())
    }

    pub(super) fn rearm_idle(&mut self, p: u16, key: &str, now: Timestamp) -> Result<(), Error> {
        if let Some(idle) = self.def(p)?.idle_timeout {
            self.timers
                .arm(add(now, idle.get()), ProcTimer::Idle(p, key.to_string()));
        }
        Ok(())
    }
}
