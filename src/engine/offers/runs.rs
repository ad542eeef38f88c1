//! Stage runs: dispatch within the partition's share of `max_parallelism`
//! and `rate_limit`, the ping-pong guard, results applied by
//! compare-and-set on the offer version, timeouts and retries.

use jiff::Timestamp;

use super::{OfferTimer, Offers};
use crate::action::{Action, Event, StageRunCommand};
use crate::engine::input::{RunResult, TimerChange, Update};
use crate::offer;
use crate::run::{self, add, AfterFailure, Rejection, Run, Status};
use crate::stage::{Lane, Phase};

/// Splits `STAGE/OFFER#SEQ`.
pub fn parse_stage_run_id(run_id: &str) -> Option<(&str, &str)> {
    let (target, _) = run::parse_run_id(run_id)?;
    let (stage, offer) = target.split_once('/')?;
    (!stage.is_empty() && !offer.is_empty()).then_some((stage, offer))
}

/// Whether a run id names a stage run (task ids never contain `/`).
pub fn is_stage_run_id(run_id: &str) -> bool {
    run_id.contains('/')
}

impl Offers {
    /// Dispatches queued offers while the stage has a free slot and a token.
    pub(super) fn pump(&mut self, s: u16, now: Timestamp) {
        let k = s as usize;
        while self.running[k] < self.share[k] && !self.queues[k].is_empty() {
            if let Some(bucket) = &mut self.buckets[k] {
                if !bucket.try_take(now) {
                    let at = bucket.next_token(now);
                    if self.rate_armed[k].is_none() {
                        self.rate_armed[k] = Some(at);
                        self.timers.arm(at, OfferTimer::Rate(s));
                    }
                    break;
                }
            }
            let (_, _, id) = self.queues[k].pop().expect("checked non-empty");
            self.dispatch(s, &id, now);
        }
    }

    /// Counts a stage run against the offer's ping-pong guard; when the
    /// limit is passed the offer is parked and the run refused.
    fn guard_allows(&mut self, s: u16, id: &str, now: Timestamp) -> bool {
        let pp = self.ping_pong;
        let rt = self.map.get_mut(id).expect("guarding a present offer");
        let g = &mut rt.guard;
        if g.window_start
            .is_none_or(|w| now >= add(w, pp.window.get()))
        {
            g.window_start = Some(now);
            g.runs = 0;
        }
        if g.runs < pp.runs {
            g.runs += 1;
            return true;
        }
        let until = add(now, pp.park.get());
        g.parked_until = Some(until);
        let runs = g.runs;
        self.timers.arm(until, OfferTimer::Unpark(id.to_string()));
        self.dirty.insert(id.to_string());
        self.emit(Event::PingPong {
            offer: id.to_string(),
            stage: self.defs[s as usize].name.clone(),
            runs,
            window: pp.window,
            until,
        });
        false
    }

    /// Starts a run of a queued slot (the offer is not blocked).
    fn dispatch(&mut self, s: u16, id: &str, now: Timestamp) {
        if !self.guard_allows(s, id, now) {
            // The slot stays queued; its offer is parked now.
            self.hide_queued(id);
            return;
        }
        let rt = self.map.get_mut(id).expect("queued offers exist");
        let slot = rt.slot_mut(s);
        slot.phase = Phase::Running;
        slot.lane = Lane::Live;
        slot.queued_at = None;
        slot.run_seq += 1;
        let run_id = run::run_id(
            &format!("{}/{id}", self.defs[s as usize].name),
            slot.run_seq,
        );
        let attempt = slot.failures + 1;
        self.running[s as usize] += 1;
        // The offer is busy now: its other queued stages wait.
        self.hide_queued(id);
        self.issue(s, id, run_id, attempt, now);
    }

    /// Sends a pass of the slot's run on the offer's current version.
    fn issue(&mut self, s: u16, id: &str, run_id: String, attempt: u32, now: Timestamp) {
        let def = &self.defs[s as usize];
        let deadline = add(now, def.run.timeout.get());
        let rt = self.map.get_mut(id).expect("running offers exist");
        let version = rt.version;
        let body = rt.body.clone();
        let slot = rt.slot_mut(s);
        slot.pass_seq += 1;
        if let Some(due) = slot.timer.filter(|at| *at <= now) {
            // A pass sent at or after the stage's wake-up covers it.
            self.timers
                .cancel(due, OfferTimer::Stage(s, id.to_string()));
            slot.timer = None;
        }
        if let Some(old) = &slot.run {
            self.timers
                .cancel(old.deadline, OfferTimer::Run(s, id.to_string()));
        }
        let run = Run {
            run_id,
            attempt,
            pass: slot.pass_seq,
            dispatched_at: now,
            deadline,
        };
        slot.run_version = version;
        slot.run = Some(run.clone());
        let state = slot.state.clone();
        self.timers
            .arm(deadline, OfferTimer::Run(s, id.to_string()));
        self.dirty.insert(id.to_string());
        self.out.push(Action::StageRun(StageRunCommand {
            stage: def.name.clone(),
            offer: id.to_string(),
            run_id: run.run_id,
            attempt,
            pass: run.pass,
            version,
            body,
            state,
            deadline,
            topic: def.topic.clone(),
        }));
    }

    fn reject(&mut self, stage: &str, offer: &str, result: &RunResult, reason: Rejection) {
        self.emit(Event::StageResultRejected {
            stage: stage.to_string(),
            offer: offer.to_string(),
            run_id: result.run_id.clone(),
            pass: result.pass,
            reason,
        });
    }

    /// Applies a stage worker's result.
    pub(in crate::engine) fn on_result(&mut self, result: RunResult, now: Timestamp) {
        let Some((stage, id)) = parse_stage_run_id(&result.run_id) else {
            return self.reject("", "", &result, Rejection::BadRunId);
        };
        let (stage, id) = (stage.to_string(), id.to_string());
        let Some(&s) = self.by_name.get(&stage) else {
            return self.reject(&stage, &id, &result, Rejection::UnknownTarget);
        };
        let accept = self.defs[s as usize].run.accept;
        let current = self
            .map
            .get(&id)
            .and_then(|rt| rt.slot(s))
            .filter(|slot| slot.phase == Phase::Running)
            .and_then(|slot| slot.run.as_ref());
        if let Err(reason) = run::accepts(current, &result.run_id, result.pass, accept) {
            return self.reject(&stage, &id, &result, reason);
        }
        match result.status {
            Status::Failed => {
                let error = result.error.unwrap_or_else(|| "failed".to_string());
                self.fail(s, &id, error, now);
            }
            Status::Succeeded => self.succeed(s, &id, result, now),
        }
    }

    fn succeed(&mut self, s: u16, id: &str, result: RunResult, now: Timestamp) {
        let rt = self.map.get(id).expect("checked by on_result");
        let slot = rt.slot(s).expect("running slot");
        let computed_from = result.stage.version.unwrap_or(slot.run_version);
        if computed_from != rt.version {
            return self.rerun_stale(s, id, computed_from, now);
        }
        let body = match &result.stage.update {
            None => rt.body.clone(),
            Some(Update::Patch(patch)) => offer::patched(&rt.body, patch),
            Some(Update::Body(body)) => body.clone(),
        };
        let state = match result.stage.state {
            None => slot.state.clone(),
            Some(serde_json::Value::Null) => None,
            Some(state) => Some(state),
        };
        let changed = offer::changed_fields(Some(&rt.body), &body);
        let state_changed = state != slot.state;
        self.end_run(s, id);
        let rt = self.map.get_mut(id).expect("present");
        rt.body = body;
        let slot = rt.slot_mut(s);
        slot.phase = Phase::Idle;
        slot.failures = 0;
        slot.last_error = None;
        slot.run_version = 0;
        slot.state = state;
        match result.stage.timer {
            None => {}
            Some(TimerChange::Set(at)) => self.set_timer(id, s, Some(at), now),
            Some(TimerChange::Clear) => self.set_timer(id, s, None, now),
        }
        // A wake-up that fell due while the run was out (and that the result
        // did not replace): the stage runs again.
        if self.take_due_timer(s, id, now) {
            self.enqueue(id, s, Lane::Live, now);
        }
        if !changed.is_empty() || state_changed {
            let cause = format!("stage:{}", self.defs[s as usize].name);
            self.commit(id, cause, changed.clone(), now);
        }
        self.show_queued(id);
        if !changed.is_empty() {
            self.react(id, &changed, false, Some(s), now);
        }
    }

    /// A result computed from an old version: discarded, and the stage runs
    /// again on the current version (same run, new pass).
    fn rerun_stale(&mut self, s: u16, id: &str, computed_from: u64, now: Timestamp) {
        let rt = &self.map[id];
        let slot = rt.slot(s).expect("running slot");
        let run = slot.run.clone().expect("running slot has a run");
        self.emit(Event::StaleVersion {
            stage: self.defs[s as usize].name.clone(),
            offer: id.to_string(),
            run_id: run.run_id.clone(),
            computed_from,
            current: rt.version,
        });
        if self.guard_allows(s, id, now) {
            self.issue(s, id, run.run_id, run.attempt, now);
        } else {
            // Parked: the stage waits in its queue for the park to end.
            self.end_run(s, id);
            let slot = self.map.get_mut(id).expect("present").slot_mut(s);
            slot.phase = Phase::Queued;
            slot.lane = Lane::Live;
            slot.queued_at = Some(now);
        }
    }

    /// Clears the stage's timer on the offer if it is due; says whether it was.
    fn take_due_timer(&mut self, s: u16, id: &str, now: Timestamp) -> bool {
        let Some(slot) = self.map.get_mut(id).map(|rt| rt.slot_mut(s)) else {
            return false;
        };
        let Some(due) = slot.timer.filter(|at| *at <= now) else {
            return false;
        };
        self.timers
            .cancel(due, OfferTimer::Stage(s, id.to_string()));
        slot.timer = None;
        self.dirty.insert(id.to_string());
        true
    }

    /// Takes the run off the slot and frees its stage slot.
    fn end_run(&mut self, s: u16, id: &str) {
        let rt = self.map.get_mut(id).expect("present");
        let slot = rt.slot_mut(s);
        if let Some(run) = slot.run.take() {
            self.timers
                .cancel(run.deadline, OfferTimer::Run(s, id.to_string()));
        }
        self.running[s as usize] -= 1;
        self.pending.insert(s);
        self.dirty.insert(id.to_string());
    }

    fn fail(&mut self, s: u16, id: &str, error: String, now: Timestamp) {
        let run = self.map[id].slot(s).and_then(|x| x.run.clone());
        self.end_run(s, id);
        // A wake-up that fell due during the run is covered by the retry
        // (or, once dead, by the operator's `unpark_offer`).
        self.take_due_timer(s, id, now);
        let def = &self.defs[s as usize];
        let stage = def.name.clone();
        let rt = self.map.get_mut(id).expect("present");
        let slot = rt.slot_mut(s);
        slot.failures += 1;
        slot.last_error = Some(error.clone());
        let (phase, wake, event) = match def.run.retry.after_failure(slot.failures, now) {
            AfterFailure::Backoff(at) => (
                Phase::Backoff,
                Some(at),
                Event::StageRunFailed {
                    stage,
                    offer: id.to_string(),
                    run_id: run.as_ref().map(|r| r.run_id.clone()).unwrap_or_default(),
                    attempt: run.as_ref().map_or(slot.failures, |r| r.attempt),
                    error,
                    retry_at: at,
                },
            ),
            AfterFailure::Park { tier, until } => (
                Phase::Parked,
                Some(until),
                Event::StageParked {
                    stage,
                    offer: id.to_string(),
                    tier,
                    until,
                    error,
                },
            ),
            AfterFailure::Dead => (
                Phase::Dead,
                None,
                Event::StageDead {
                    stage,
                    offer: id.to_string(),
                    attempts: slot.failures,
                    error,
                },
            ),
        };
        slot.phase = phase;
        slot.wake_at = wake;
        if let Some(at) = wake {
            self.timers.arm(at, OfferTimer::Wake(s, id.to_string()));
        }
        self.emit(event);
        self.show_queued(id);
    }

    pub(super) fn on_run_timeout(&mut self, s: u16, id: &str, at: Timestamp, now: Timestamp) {
        let Some(run) = self
            .map
            .get(id)
            .and_then(|rt| rt.slot(s))
            .filter(|slot| slot.phase == Phase::Running)
            .and_then(|slot| slot.run.clone())
            .filter(|run| run.deadline == at)
        else {
            return;
        };
        // As for tasks (DESIGN §7): a timed-out pass is a failed attempt. It
        // is re-dispatched at once under a new pass while attempts remain;
        // the last one, or any with `restart_after_timeout = false`, goes
        // through the retry policy, so a hung worker ends parked, then dead.
        let def = &self.defs[s as usize];
        let failures = self.map[id].slot(s).map_or(0, |slot| slot.failures);
        let restart = def.run.restarts_on_timeout(failures);
        let error = def.run.timeout_error();
        self.emit(Event::StageRunTimedOut {
            stage: def.name.clone(),
            offer: id.to_string(),
            run_id: run.run_id.clone(),
            attempt: run.attempt,
            restarted: restart,
        });
        if restart {
            let slot = self
                .map
                .get_mut(id)
                .expect("running offers exist")
                .slot_mut(s);
            slot.failures += 1;
            slot.last_error = Some(error);
            let attempt = slot.failures + 1;
            self.issue(s, id, run.run_id, attempt, now);
        } else {
            self.fail(s, id, error, now);
        }
    }

    pub(super) fn on_wake(&mut self, s: u16, id: &str, now: Timestamp) {
        let Some(rt) = self.map.get_mut(id) else {
            return;
        };
        let slot = rt.slot_mut(s);
        if !matches!(slot.phase, Phase::Backoff | Phase::Parked) {
            return;
        }
        slot.phase = Phase::Idle;
        slot.wake_at = None;
        self.enqueue(id, s, Lane::Live, now);
    }
}
