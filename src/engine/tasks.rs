//! Task transitions: evaluate, queue, dispatch, results, timeouts, retries
//! and operator commands.

use jiff::Timestamp;

use super::{Engine, TaskRt, TimerKind};
use crate::action::{Action, Event, RunCommand};
use crate::ctl::{CtlTable, ParamId};
use crate::run::{self, add, AfterFailure, Rejection, Run, Status};
use crate::task::TaskState;
use crate::trigger::Values;

use super::input::{Command, RunResult};

/// What a trigger reads: the shard's CTL table and one task's last-seen values.
pub(super) struct TaskValues<'a> {
    pub table: &'a CtlTable,
    pub last: &'a [(ParamId, Timestamp)],
}

impl Values<ParamId> for TaskValues<'_> {
    fn current(&self, p: &ParamId) -> Option<Timestamp> {
        self.table.current(*p)
    }

    fn last(&self, p: &ParamId) -> Option<Timestamp> {
        self.last.iter().find(|(q, _)| q == p).map(|(_, v)| *v)
    }
}

impl Engine {
    fn eval(&mut self, i: u32, now: Timestamp) -> bool {
        self.stats.evaluated += 1;
        let def = &self.defs[i as usize];
        let values = TaskValues {
            table: &self.table,
            last: &self.rt[i as usize].last_seen,
        };
        def.trigger.eval(&values, now, &def.tz)
    }

    fn set_state(&mut self, i: u32, state: TaskState, now: Timestamp) {
        let rt = &mut self.rt[i as usize];
        if rt.state != state {
            rt.state = state;
            rt.since = Some(now);
        }
        self.mark(i);
    }

    /// Evaluates an idle task and queues it when its trigger is true. Queued,
    /// running and failed tasks are never re-evaluated here.
    pub(super) fn consider(&mut self, i: u32, now: Timestamp) {
        if self.rt[i as usize].state != TaskState::Idle || !self.eval(i, now) {
            return;
        }
        self.stats.fired += 1;
        let (pool, priority) = {
            let def = &self.defs[i as usize];
            (def.pool, def.priority)
        };
        self.set_state(i, TaskState::Queued, now);
        self.rt[i as usize].queued_at = Some(now);
        self.pools[pool].queue.push(priority, now, i);
        self.release_hold(i);
        self.pending(pool);
    }

    /// Dispatches queued tasks while the pool has a free slot. Each is
    /// validated first: a trigger that is no longer true sends it back to idle.
    pub(super) fn pump(&mut self, pool: usize, now: Timestamp) {
        while let Some((priority, i)) = self.pools[pool].queue.peek() {
            if !self.has_slot(pool, priority) {
                break;
            }
            self.pools[pool].queue.pop();
            self.rt[i as usize].queued_at = None;
            if self.eval(i, now) {
                self.dispatch(i, now);
            } else {
                self.set_state(i, TaskState::Idle, now);
            }
        }
    }

    fn has_slot(&self, pool: usize, priority: i64) -> bool {
        let p = &self.pools[pool];
        let Some(max) = p.max_running else {
            return true;
        };
        let held = p
            .holds
            .iter()
            .filter(|&&h| self.defs[h as usize].priority > priority)
            .count() as u32;
        p.running + held < max
    }

    fn dispatch(&mut self, i: u32, now: Timestamp) {
        let def = &self.defs[i as usize];
        let snapshot: Vec<(ParamId, Timestamp)> = def
            .refs
            .iter()
            .filter_map(|&p| self.table.current(p).map(|v| (p, v)))
            .collect();
        let deadline = add(now, def.run.timeout.get());
        let pool = def.pool;
        let rt = &mut self.rt[i as usize];
        rt.run_seq += 1;
        rt.pass_seq += 1;
        rt.snapshot = snapshot;
        rt.run = Some(Run {
            run_id: run::run_id(&def.id, rt.run_seq),
            attempt: rt.failures + 1,
            pass: rt.pass_seq,
            dispatched_at: now,
            deadline,
        });
        self.timers.arm(deadline, (TimerKind::RunTimeout, i));
        self.pools[pool].running += 1;
        self.set_state(i, TaskState::Running, now);
        self.emit_run(i);
        self.start_holds(i, now);
    }

    fn emit_run(&mut self, i: u32) {
        let def = &self.defs[i as usize];
        let rt = &self.rt[i as usize];
        let run = rt.run.as_ref().expect("a running task has a run");
        self.out.push(Action::Run(RunCommand {
            task: def.id.clone(),
            run_id: run.run_id.clone(),
            attempt: run.attempt,
            pass: run.pass,
            snapshot: rt
                .snapshot
                .iter()
                .map(|&(p, v)| (self.table.name(p).to_string(), v))
                .collect(),
            params: def.params.clone(),
            deadline: run.deadline,
            key: self.pools[def.pool].name.clone(),
            topic: def.topic.clone(),
        }));
    }

    fn reject(&mut self, task: &str, result: &RunResult, reason: Rejection) {
        self.out.push(Action::Event(Event::ResultRejected {
            task: task.to_string(),
            run_id: result.run_id.clone(),
            pass: result.pass,
            reason,
        }));
    }

    pub(super) fn on_result(&mut self, result: RunResult, now: Timestamp) {
        let Some((task, _)) = run::parse_run_id(&result.run_id) else {
            return self.reject(&result.run_id, &result, Rejection::BadRunId);
        };
        let Some(&i) = self.by_id.get(task) else {
            return self.reject(task, &result, Rejection::UnknownTarget);
        };
        let rt = &self.rt[i as usize];
        let current = rt.run.as_ref().filter(|_| rt.state == TaskState::Running);
        let accept = self.defs[i as usize].run.accept;
        if let Err(reason) = run::accepts(current, &result.run_id, result.pass, accept) {
            let task = self.defs[i as usize].id.clone();
            return self.reject(&task, &result, reason);
        }
        self.end_run(i);
        match result.status {
            Status::Succeeded => self.succeed(i, now),
            Status::Failed => {
                let error = result.error.unwrap_or_else(|| "failed".to_string());
                self.fail(i, error, now);
            }
        }
    }

    /// Takes the current run off the task and frees its pool slot.
    fn end_run(&mut self, i: u32) {
        let pool = self.defs[i as usize].pool;
        let rt = &mut self.rt[i as usize];
        if let Some(run) = rt.run.take() {
            self.timers.cancel(run.deadline, (TimerKind::RunTimeout, i));
        }
        self.pools[pool].running -= 1;
        self.pending(pool);
    }

    fn succeed(&mut self, i: u32, now: Timestamp) {
        let every = self.defs[i as usize].expect_every;
        let rt = &mut self.rt[i as usize];
        for (p, v) in std::mem::take(&mut rt.snapshot) {
            match rt.last_seen.iter_mut().find(|(q, _)| *q == p) {
                Some(slot) => slot.1 = v,
                None => rt.last_seen.push((p, v)),
            }
        }
        rt.failures = 0;
        rt.last_error = None;
        rt.last_success = Some(now);
        if let Some(every) = every {
            let due = add(now, every.get());
            let old = rt.sla_due.replace(due);
            self.timers.replace(old, Some(due), (TimerKind::Sla, i));
        }
        self.producer_finished(i, true, now);
        self.settle(i, TaskState::Idle, now);
    }

    /// Moves a task out of running: paused if an operator asked, else `state`
    /// (and an idle task is evaluated at once).
    fn settle(&mut self, i: u32, state: TaskState, now: Timestamp) {
        let rt = &mut self.rt[i as usize];
        if rt.pause_requested {
            rt.pause_requested = false;
            let old = rt.wake_at.take();
            self.timers.replace(old, None, (TimerKind::Wake, i));
            self.set_state(i, TaskState::Paused, now);
            return;
        }
        self.set_state(i, state, now);
        self.consider(i, now);
    }

    fn fail(&mut self, i: u32, error: String, now: Timestamp) {
        self.producer_finished(i, false, now);
        let def = &self.defs[i as usize];
        let task = def.id.clone();
        let rt = &mut self.rt[i as usize];
        rt.snapshot.clear();
        rt.failures += 1;
        rt.last_error = Some(error.clone());
        let failures = rt.failures;
        let run_id = run::run_id(&task, rt.run_seq);
        let (state, wake, event) = match def.run.retry.after_failure(failures, now) {
            AfterFailure::Backoff(at) => (
                TaskState::Backoff,
                Some(at),
                Event::RunFailed {
                    task,
                    run_id,
                    attempt: failures,
                    error,
                    retry_at: at,
                },
            ),
            AfterFailure::Park { tier, until } => (
                TaskState::Parked,
                Some(until),
                Event::Parked {
                    task,
                    tier,
                    until,
                    error,
                },
            ),
            AfterFailure::Dead => (
                TaskState::Dead,
                None,
                Event::Dead {
                    task,
                    attempts: failures,
                    error,
                },
            ),
        };
        self.out.push(Action::Event(event));
        let rt = &mut self.rt[i as usize];
        let old = std::mem::replace(&mut rt.wake_at, wake);
        self.timers.replace(old, wake, (TimerKind::Wake, i));
        self.settle(i, state, now);
    }

    fn on_timeout(&mut self, i: u32, now: Timestamp) {
        let def = &self.defs[i as usize];
        let rt = &self.rt[i as usize];
        let run = rt.run.as_ref().expect("a running task has a run");
        let restart = def.run.restarts_on_timeout(rt.failures);
        self.out.push(Action::Event(Event::RunTimedOut {
            task: def.id.clone(),
            run_id: run.run_id.clone(),
            attempt: run.attempt,
            restarted: restart,
        }));
        if !restart {
            let error = def.run.timeout_error();
            self.end_run(i);
            return self.fail(i, error, now);
        }
        // Same run, same snapshot, a new pass: a late result of the timed-out
        // pass is now stale unless the task accepts the first result.
        let deadline = add(now, def.run.timeout.get());
        let rt = &mut self.rt[i as usize];
        rt.failures += 1;
        rt.pass_seq += 1;
        let run = rt.run.as_mut().expect("a running task has a run");
        run.attempt = rt.failures + 1;
        run.pass = rt.pass_seq;
        run.dispatched_at = now;
        run.deadline = deadline;
        self.timers.arm(deadline, (TimerKind::RunTimeout, i));
        self.mark(i);
        self.emit_run(i);
    }

    pub(super) fn on_timer(&mut self, kind: TimerKind, i: u32, at: Timestamp, now: Timestamp) {
        let rt: &TaskRt = &self.rt[i as usize];
        match kind {
            TimerKind::RunTimeout => {
                if rt.state == TaskState::Running
                    && rt.run.as_ref().is_some_and(|r| r.deadline == at)
                {
                    self.on_timeout(i, now);
                }
            }
            TimerKind::Wake => {
                if rt.wake_at == Some(at)
                    && matches!(rt.state, TaskState::Backoff | TaskState::Parked)
                {
                    self.rt[i as usize].wake_at = None;
                    self.set_state(i, TaskState::Idle, now);
                    self.consider(i, now);
                }
            }
            TimerKind::Hold => {
                if rt.hold.is_some_and(|h| h.until == at) {
                    self.release_hold(i);
                }
            }
            TimerKind::Sla => {
                if rt.sla_due == Some(at) {
                    self.sla_missed(i, now);
                }
            }
        }
    }

    fn sla_missed(&mut self, i: u32, now: Timestamp) {
        let def = &self.defs[i as usize];
        let Some(every) = def.expect_every else {
            return;
        };
        let rt = &mut self.rt[i as usize];
        self.out.push(Action::Event(Event::SlaMissed {
            task: def.id.clone(),
            last_success: rt.last_success,
            expect_every: every,
        }));
        let due = add(now, every.get());
        rt.sla_due = Some(due);
        self.timers.arm(due, (TimerKind::Sla, i));
        self.mark(i);
    }

    pub(super) fn on_command(&mut self, command: Command, now: Timestamp) {
        let crate::engine::input::Target::Task(task) = command.target() else {
            unreachable!("offer commands go to the offers")
        };
        let Some(&i) = self.by_id.get(task) else {
            self.out.push(Action::Event(Event::CommandRejected {
                task: task.to_string(),
                reason: "unknown task".to_string(),
            }));
            return;
        };
        match command {
            Command::SetStageState { .. }
            | Command::Rescan { .. }
            | Command::UnparkOffer { .. } => {
                unreachable!("routed by target")
            }
            Command::Pause { .. } => self.pause(i, now),
            Command::Resume { .. } => self.resume(i, now),
            Command::SetLast { param, value, .. } => {
                let p = self.table.intern(&param);
                let rt = &mut self.rt[i as usize];
                match rt.last_seen.iter_mut().find(|(q, _)| *q == p) {
                    Some(slot) => slot.1 = value,
                    None => rt.last_seen.push((p, value)),
                }
                self.mark(i);
                self.consider(i, now);
            }
            Command::ClearLast { param, .. } => {
                let p = param.map(|name| self.table.intern(&name));
                let rt = &mut self.rt[i as usize];
                rt.last_seen.retain(|(q, _)| p.is_some_and(|p| p != *q));
                self.mark(i);
                self.consider(i, now);
            }
        }
    }

    fn pause(&mut self, i: u32, now: Timestamp) {
        let def = &self.defs[i as usize];
        let (pool, priority) = (def.pool, def.priority);
        let rt = &mut self.rt[i as usize];
        match rt.state {
            TaskState::Paused => {}
            TaskState::Running => {
                rt.pause_requested = true;
                self.mark(i);
            }
            state => {
                if state == TaskState::Queued {
                    if let Some(at) = rt.queued_at.take() {
                        self.pools[pool].queue.remove(priority, at, i);
                    }
                }
                let old = rt.wake_at.take();
                self.timers.replace(old, None, (TimerKind::Wake, i));
                self.release_hold(i);
                self.set_state(i, TaskState::Paused, now);
            }
        }
    }

    fn resume(&mut self, i: u32, now: Timestamp) {
        let rt = &mut self.rt[i as usize];
        match rt.state {
            TaskState::Running => {
                rt.pause_requested = false;
                self.mark(i);
            }
            TaskState::Paused => {
                self.set_state(i, TaskState::Idle, now);
                self.consider(i, now);
            }
            TaskState::Dead => {
                rt.failures = 0;
                self.set_state(i, TaskState::Idle, now);
                self.consider(i, now);
            }
            _ => {}
        }
    }
}
