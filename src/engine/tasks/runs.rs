//! Task transitions: evaluate, queue, dispatch, results, timeouts, retries
//! and operator commands — the task's hooks around the shared run slot.

use jiff::Timestamp;

use super::{Tasks, TimerKind};
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::action::{Action, Event, RunCommand, Subject};
use crate::ctl::{CtlTable, ParamId};
use crate::engine::input::{Command, RunResult};
use crate::engine::{bug, Error};
use crate::process::Conflict;
use crate::run::{self, add, Rejection, Status};
use crate::stamp::{self, Stamp};
use crate::task::TaskState;
use crate::trigger::Values;

/// What a trigger reads: the shard's CTL table and one task's last-seen
/// values (a trigger names parameters by the configuration's ids, the shard
/// keeps them by its own).
pub(in crate::engine) struct TaskValues<'a> {
    pub table: &'a CtlTable,
    pub last: &'a [(ParamId, Stamp)],
}

impl Values<ParamId> for TaskValues<'_> {
    fn current(&self, global: &ParamId) -> Option<Timestamp> {
        self.table.current(self.table.of_global(*global)?)
    }

    fn last(&self, global: &ParamId) -> Option<Timestamp> {
        let p = self.table.of_global(*global)?;
        self.last
            .iter()
            .find(|(q, _)| *q == p)
            .map(|(_, v)| v.get())
    }
}

impl Tasks {
    fn eval(&mut self, i: u32, now: Timestamp) -> Result<bool, Error> {
        self.stats.evaluated += 1;
        let task = self.task(i)?;
        let values = TaskValues {
            table: &self.table,
            last: &task.rt.last_seen,
        };
        Ok(task.def.trigger.eval(&values, now, task.def.time_zone()))
    }

    fn set_state(&mut self, i: u32, state: TaskState, now: Timestamp) -> Result<(), Error> {
        let rt = &mut self.task_mut(i)?.rt;
        if rt.slot.phase != state {
            rt.slot.phase = state;
            rt.since = stamp::some(now);
        }
        self.mark(i)
    }

    /// Evaluates an idle task and queues it when its trigger is true. Queued,
    /// running and failed tasks are never re-evaluated here.
    pub(super) fn consider(&mut self, i: u32, now: Timestamp) -> Result<(), Error> {
        if self.task(i)?.rt.slot.phase != TaskState::Idle || !self.eval(i, now)? {
            return Ok(());
        }
        self.stats.fired += 1;
        self.queue(i, now)?;
        // Asked just now: its dispatch in this step need not ask again.
        self.tasks
            .get_mut(i as usize)
            .ok_or_else(|| super::no_task(i))?
            .fresh = true;
        Ok(())
    }

    /// Dispatches queued tasks while the pool has a free slot. Each queued
    /// in an earlier step is validated first: a trigger that is no longer
    /// true sends it back to idle.
    pub(super) fn pump(&mut self, pool: usize, now: Timestamp) -> Result<(), Error> {
        while let Some((priority, i)) = self.pool(pool)?.queue.peek() {
            if !self.has_slot(pool, priority)? {
                break;
            }
            self.pool_mut(pool)?.queue.pop();
            self.task_mut(i)?.rt.set_queued_at(None);
            let fresh = self
                .tasks
                .get_mut(i as usize)
                .is_some_and(|e| std::mem::take(&mut e.fresh));
            // A launched task runs now: its trigger is not asked, nor is
            // one it queued in this step (on the same values).
            if fresh || self.task(i)?.rt.rare().launch.is_some() || self.eval(i, now)? {
                self.dispatch(i, now)?;
            } else {
                // Nothing to run, a recovery's task included.
                if let Some(rare) = self.task_mut(i)?.rt.rare_set() {
                    rare.source = None;
                }
                self.set_state(i, TaskState::Idle, now)?;
            }
        }
        Ok(())
    }

    fn has_slot(&self, pool: usize, priority: i64) -> Result<bool, Error> {
        let p = self.pool(pool)?;
        let Some(max) = p.max_running else {
            return Ok(true);
        };
        let mut held = 0u32;
        for &h in &p.holds {
            if self.task(h)?.def.priority() > priority {
                held += 1;
            }
        }
        Ok(p.running + held < max)
    }

    fn dispatch(&mut self, i: u32, now: Timestamp) -> Result<(), Error> {
        let Tasks {
            table,
            defs,
            tasks,
            timers,
            ..
        } = self;
        let e = tasks.get_mut(i as usize).ok_or_else(|| super::no_task(i))?;
        let task = super::TaskMut {
            def: super::def_of(defs, e)?,
            rt: &mut e.rt,
        };
        let mut alarms = super::TaskAlarms { timers, task: i };
        let mut named = 0;
        task.def.trigger.for_each_param(&mut |_| named += 1);
        let mut snapshot = Vec::with_capacity(named);
        task.def.trigger.for_each_param(&mut |&global| {
            let Some(p) = table.of_global(global) else {
                return;
            };
            if let Some(v) = table.current(p) {
                if !snapshot.iter().any(|&(q, _)| q == p) {
                    snapshot.push((p, Stamp::from(v)));
                }
            }
        });
        task.rt.set_snapshot(snapshot.into());
        task.rt
            .slot
            .start(task.def.id(), task.def.run.timeout, now, &mut alarms);
        let pool = task.def.pool();
        self.pool_mut(pool)?.running += 1;
        enter(self, i, TaskState::Running, now)?;
        self.emit_run(i, false)?;
        self.start_holds(i, now)
    }

    /// Sends the task's run in flight; `auto`: a pass re-dispatched after a
    /// timeout (its `source` says so).
    fn emit_run(&mut self, i: u32, auto: bool) -> Result<(), Error> {
        let task = self.task(i)?;
        let (def, rt) = (&task.def, &task.rt);
        let run = rt
            .slot
            .current()
            .ok_or_else(|| bug(format!("task {} runs without a run", def.id())))?;
        let command = RunCommand {
            run_id: run.run_id.clone(),
            attempt: run.attempt,
            pass: run.pass,
            snapshot: rt
                .snapshot()
                .iter()
                .map(|&(p, v)| (self.table.name(p).joined(), v.get()))
                .collect(),
            params: match &rt.rare().launch {
                None => def.extra().params.clone(),
                Some(extra) => {
                    let mut params = def.extra().params.clone();
                    params.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
                    params
                }
            },
            deadline: run.deadline,
            source: if auto {
                Some(crate::ops::AUTO.to_string())
            } else {
                rt.rare().source.clone()
            },
            key: Arc::clone(&self.pool(def.pool())?.name),
            topic: def.extra().topic.clone(),
        };
        self.out.push(Action::Run(command));
        Ok(())
    }

    fn reject(&mut self, task: &str, result: &RunResult, reason: Rejection) {
        self.out.push(Action::Event(Event::ResultRejected {
            subject: Subject::task(task),
            run_id: result.run_id.as_str().into(),
            pass: result.pass,
            reason,
        }));
    }

    pub(in crate::engine) fn on_result(
        &mut self,
        result: RunResult,
        now: Timestamp,
    ) -> Result<(), Error> {
        let Some((task, _)) = run::parse_run_id(&result.run_id) else {
            self.reject(&result.run_id, &result, Rejection::BadRunId);
            return Ok(());
        };
        let Some(i) = self.find(task) else {
            let task = task.to_string();
            self.reject(&task, &result, Rejection::UnknownTarget);
            return Ok(());
        };
        let t = self.task(i)?;
        if let Err(reason) =
            t.rt.slot
                .accepts(&result.run_id, result.pass, t.def.run.accept)
        {
            let task = t.def.id().to_owned();
            self.reject(&task, &result, reason);
            return Ok(());
        }
        self.end_run(i)?;
        match result.status {
            Status::Succeeded => self.succeed(i, now),
            Status::Failed => {
                let error = result.error.unwrap_or_else(|| "failed".to_string());
                self.fail(i, error, now)
            }
        }
    }

    /// Takes the current run off the task and frees its pool slot.
    fn end_run(&mut self, i: u32) -> Result<(), Error> {
        let (task, mut alarms) = self.slot_mut(i)?;
        task.rt.slot.end(&mut alarms);
        let pool = task.def.pool();
        let p = self.pool_mut(pool)?;
        p.running = p.running.saturating_sub(1);
        self.pending(pool)
    }

    fn succeed(&mut self, i: u32, now: Timestamp) -> Result<(), Error> {
        let task = self.task_mut(i)?;
        let every = task.def.extra().expect_every;
        let rt = task.rt;
        if rt.last_seen.is_empty() {
            // The first success: the snapshot is the list.
            rt.last_seen = rt.take_snapshot();
        }
        for &(p, v) in rt.take_snapshot().iter() {
            rt.last_seen.set(p, v);
        }
        rt.slot.succeeded();
        rt.last_success = stamp::some(now);
        if let Some(rare) = rt.rare_set() {
            rare.source = None;
            rare.launch = rare.again.take();
        }
        if let Some(every) = every {
            let due = add(now, every.get());
            let old = rt.rare_mut().sla_due.replace(due);
            self.timers.replace(old, Some(due), (TimerKind::Sla, i));
        }
        self.producer_finished(i, true)?;
        self.settle(i, TaskState::Idle, now)
    }

    /// Moves a task out of running: paused if an operator asked, else `state`
    /// (and an idle task is evaluated at once).
    fn settle(&mut self, i: u32, state: TaskState, now: Timestamp) -> Result<(), Error> {
        let (task, mut alarms) = self.slot_mut(i)?;
        if task.rt.rare().pause_requested {
            task.rt.rare_mut().pause_requested = false;
            task.rt.slot.set_wake(None, &mut alarms);
            return self.set_state(i, TaskState::Paused, now);
        }
        enter(self, i, state, now)?;
        if state == TaskState::Idle && self.task(i)?.rt.rare().launch.is_some() {
            return self.queue(i, now);
        }
        self.consider(i, now)
    }

    /// Queues task `i` in its pool (it is idle or waking).
    pub(super) fn queue(&mut self, i: u32, now: Timestamp) -> Result<(), Error> {
        let (pool, priority) = {
            let def = &self.task(i)?.def;
            (def.pool(), def.priority())
        };
        self.set_state(i, TaskState::Queued, now)?;
        let rt = &mut self.task_mut(i)?.rt;
        rt.set_queued_at(stamp::some(now));
        let low = rt.rare().source.is_some();
        self.pool_mut(pool)?.queue.push(low, priority, now, i);
        self.release_hold(i)?;
        self.pending(pool)
    }

    /// `launch`: run the task now with `params`, under its `conflict`.
    pub(in crate::engine) fn launch(
        &mut self,
        task: &str,
        params: BTreeMap<String, String>,
        now: Timestamp,
    ) -> Result<(), Error> {
        let Some(i) = self.find(task) else {
            self.out.push(Action::Event(Event::CommandRejected {
                subject: Subject::task(task),
                reason: "unknown task".to_string(),
            }));
            return Ok(());
        };
        let (task, mut alarms) = self.slot_mut(i)?;
        let conflict = task.def.conflict;
        let (pool, priority) = (task.def.pool(), task.def.priority());
        let id = task.def.id().to_owned();
        let rejected = |this: &mut Tasks| {
            this.out.push(Action::Event(Event::LaunchRejected {
                subject: Subject::task(&*id),
                reason: crate::process::Refusal::Active.as_str().to_string(),
                error: None,
            }));
            Ok(())
        };
        match (task.rt.slot.phase, conflict) {
            (TaskState::Paused, _) => {
                self.out.push(Action::Event(Event::CommandRejected {
                    subject: Subject::task(&*id),
                    reason: "the task is paused".to_string(),
                }));
                Ok(())
            }
            (TaskState::Queued | TaskState::Running, Conflict::Reject) => rejected(self),
            (TaskState::Queued, _) => {
                task.rt.rare_mut().launch = Some(params);
                self.mark(i)
            }
            (TaskState::Running, Conflict::Queue) => {
                task.rt.rare_mut().again = Some(params);
                self.mark(i)
            }
            (TaskState::Running, Conflict::Replace) => {
                // The run in flight is dropped: its late result is not current.
                task.rt.rare_mut().launch = Some(params);
                task.rt.slot.end(&mut alarms);
                let p = self.pool_mut(pool)?;
                p.running = p.running.saturating_sub(1);
                self.producer_finished(i, false)?;
                enter(self, i, TaskState::Idle, now)?;
                self.queue(i, now)
            }
            (_, _) => {
                // Idle, waiting for a retry, or dead: run now.
                task.rt.rare_mut().launch = Some(params);
                task.rt.slot.set_wake(None, &mut alarms);
                let _ = priority;
                enter(self, i, TaskState::Idle, now)?;
                self.queue(i, now)
            }
        }
    }

    fn fail(&mut self, i: u32, error: String, now: Timestamp) -> Result<(), Error> {
        self.producer_finished(i, false)?;
        let (task, mut alarms) = self.slot_mut(i)?;
        task.rt.take_snapshot();
        let failure = task
            .rt
            .slot
            .failed(error.clone(), &task.def.run.retry, now, &mut alarms);
        let state = task.rt.slot.phase;
        if state == TaskState::Dead {
            if let Some(rare) = task.rt.rare_set() {
                rare.launch = rare.again.take();
                rare.source = None;
            }
        }
        let event = failure.event(
            Subject::task(task.def.id()),
            task.rt.slot.last_run_id(task.def.id()),
            task.rt.slot.failures,
            error,
        );
        self.out.push(Action::Event(event));
        self.settle(i, state, now)
    }

    fn on_timeout(&mut self, i: u32, at: Timestamp, now: Timestamp) -> Result<(), Error> {
        let task = self.task_mut(i)?;
        let Some(run) = task.rt.slot.current().cloned() else {
            return Ok(());
        };
        let Some(restart) = task.rt.slot.timed_out(at, &task.def.run) else {
            return Ok(());
        };
        let event = Event::RunTimedOut {
            subject: Subject::task(task.def.id()),
            run_id: run.run_id,
            attempt: run.attempt,
            restarted: restart,
        };
        self.out.push(Action::Event(event));
        if !restart {
            let error = self.task(i)?.def.run.timeout_error();
            self.end_run(i)?;
            return self.fail(i, error, now);
        }
        // Same run, same snapshot, a new pass: a late result of the timed-out
        // pass is now stale unless the task accepts the first result.
        let (task, mut alarms) = self.slot_mut(i)?;
        task.rt
            .slot
            .reissue(task.def.id(), task.def.run.timeout, now, &mut alarms);
        self.mark(i)?;
        self.emit_run(i, true)
    }

    pub(super) fn on_timer(
        &mut self,
        kind: TimerKind,
        i: u32,
        at: Timestamp,
        now: Timestamp,
    ) -> Result<(), Error> {
        match kind {
            TimerKind::RunTimeout => self.on_timeout(i, at, now),
            TimerKind::Wake => {
                if self.task_mut(i)?.rt.slot.woke(at) {
                    enter(self, i, TaskState::Idle, now)?;
                    if self.task(i)?.rt.rare().launch.is_some() {
                        return self.queue(i, now);
                    }
                    self.consider(i, now)?;
                }
                Ok(())
            }
            TimerKind::Cron => {
                let task = self.task_mut(i)?;
                if task.rt.rare().cron_at != Some(at) {
                    return Ok(());
                }
                // Firings missed while no shard ran collapse into this one.
                let next = task
                    .def
                    .extra()
                    .schedule
                    .as_ref()
                    .and_then(|c| c.next_after(at.max(now), task.def.time_zone()));
                task.rt.rare_mut().cron_at = next;
                if let Some(next) = next {
                    self.timers.arm(next, (TimerKind::Cron, i));
                }
                self.mark(i)?;
                let id = self.task(i)?.def.id().to_owned();
                self.launch(&id, BTreeMap::new(), now)
            }
            TimerKind::Hold => {
                if self.task(i)?.rt.rare().hold.is_some_and(|h| h.until == at) {
                    self.release_hold(i)?;
                }
                Ok(())
            }
            TimerKind::Sla => {
                if self.task(i)?.rt.rare().sla_due == Some(at) {
                    self.sla_missed(i, now)?;
                }
                Ok(())
            }
        }
    }

    fn sla_missed(&mut self, i: u32, now: Timestamp) -> Result<(), Error> {
        let task = self.task_mut(i)?;
        let Some(every) = task.def.extra().expect_every else {
            return Ok(());
        };
        let event = Event::SlaMissed {
            task: String::from(task.def.id()),
            last_success: stamp::get(task.rt.last_success),
            expect_every: every,
        };
        let due = add(now, every.get());
        task.rt.rare_mut().sla_due = Some(due);
        self.out.push(Action::Event(event));
        self.timers.arm(due, (TimerKind::Sla, i));
        self.mark(i)
    }

    pub(in crate::engine) fn on_command(
        &mut self,
        command: Command,
        now: Timestamp,
    ) -> Result<(), Error> {
        let crate::engine::input::Target::Task(task) = command.target() else {
            return Err(bug("a command for another target reached the tasks"));
        };
        let Some(i) = self.find(task) else {
            self.out.push(Action::Event(Event::CommandRejected {
                subject: Subject::task(task),
                reason: "unknown task".to_string(),
            }));
            return Ok(());
        };
        match command {
            Command::LaunchTask { params, .. } => {
                let id = self.task(i)?.def.id().to_owned();
                self.launch(&id, params, now)
            }
            Command::Pause { .. } => self.pause(i, now),
            Command::Resume { .. } => self.resume(i, now),
            Command::SetLast { param, value, .. } => {
                let p = self.table.intern(param.parts());
                let rt = &mut self.task_mut(i)?.rt;
                rt.last_seen.set(p, Stamp::from(value));
                self.mark(i)?;
                self.consider(i, now)
            }
            Command::ClearLast { param, .. } => {
                let p = param.map(|name| self.table.intern(name.parts()));
                let rt = &mut self.task_mut(i)?.rt;
                rt.last_seen.retain(|(q, _)| p.is_some_and(|p| p != *q));
                self.mark(i)?;
                self.consider(i, now)
            }
            _ => Err(bug("a command for another target reached the tasks")),
        }
    }

    fn pause(&mut self, i: u32, now: Timestamp) -> Result<(), Error> {
        let (task, mut alarms) = self.slot_mut(i)?;
        let (pool, priority) = (task.def.pool(), task.def.priority());
        match task.rt.slot.phase {
            TaskState::Paused => Ok(()),
            TaskState::Running => {
                task.rt.rare_mut().pause_requested = true;
                self.mark(i)
            }
            state => {
                let queued_at = (state == TaskState::Queued)
                    .then(|| task.rt.queued_at())
                    .flatten();
                task.rt.set_queued_at(None);
                task.rt.slot.set_wake(None, &mut alarms);
                let low = task.rt.rare().source.is_some();
                if let Some(at) = queued_at {
                    self.pool_mut(pool)?
                        .queue
                        .remove(low, priority, at.get(), i);
                }
                self.release_hold(i)?;
                self.set_state(i, TaskState::Paused, now)
            }
        }
    }

    fn resume(&mut self, i: u32, now: Timestamp) -> Result<(), Error> {
        let rt = &mut self.task_mut(i)?.rt;
        match rt.slot.phase {
            TaskState::Running => {
                if let Some(rare) = rt.rare_set() {
                    rare.pause_requested = false;
                }
                self.mark(i)
            }
            TaskState::Paused => {
                self.set_state(i, TaskState::Idle, now)?;
                self.consider(i, now)
            }
            TaskState::Dead => {
                rt.slot.failures = 0;
                self.set_state(i, TaskState::Idle, now)?;
                self.consider(i, now)
            }
            _ => Ok(()),
        }
    }
}

/// Task `i` enters `state` at `now`. Used where the run slot has already
/// moved the phase (start, failure, wake): every such move is a change.
pub(super) fn enter(
    tasks: &mut Tasks,
    i: u32,
    state: TaskState,
    now: Timestamp,
) -> Result<(), Error> {
    let rt = &mut tasks.task_mut(i)?.rt;
    rt.slot.phase = state;
    rt.since = stamp::some(now);
    tasks.mark(i)
}
