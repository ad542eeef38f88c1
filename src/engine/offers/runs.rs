//! Stage runs: dispatch within the partition's share of `max_parallelism`
//! and `rate_limit`, the ping-pong guard, results applied by
//! compare-and-set on the offer version, timeouts and retries — the stage's
//! hooks around the shared run slot.

use jiff::Timestamp;

use super::{OfferTimer, Offers};
use crate::action::{Action, Event, StageRunCommand, Subject};
use crate::engine::input::{RunResult, TimerChange, Update};
use crate::engine::{bug, Error};
use crate::offer::{self, SharedBody};
use crate::run::{self, add, Rejection, Status};
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

/// The run target of stage `stage` on offer `offer`: `STAGE/OFFER`.
fn target(stage: &str, offer: &str) -> String {
    crate::run::concat(&[stage, "/", offer])
}

impl Offers {
    /// Dispatches queued offers while the stage has a free slot and a token.
    pub(super) fn pump(&mut self, s: u16, now: Timestamp) -> Result<(), Error> {
        loop {
            let st = self.stage_mut(s)?;
            if st.running >= st.share || st.queue.is_empty() {
                return Ok(());
            }
            if let Some(bucket) = &mut st.bucket {
                if !bucket.try_take(now) {
                    let at = bucket.next_token(now);
                    if st.rate_armed.is_none() {
                        st.rate_armed = Some(at);
                        self.timers.arm(at, OfferTimer::Rate(s));
                    }
                    return Ok(());
                }
            }
            let Some((_, _, id)) = st.queue.pop() else {
                return Ok(());
            };
            self.dispatch(s, &id, now)?;
        }
    }

    /// Counts a stage run against the offer's ping-pong guard; when the
    /// limit is passed the offer is parked and the run refused.
    fn guard_allows(&mut self, s: u16, id: &str, now: Timestamp) -> Result<bool, Error> {
        let pp = self.ping_pong;
        let g = &mut self.offer_mut(id)?.guard;
        if g.window_start
            .is_none_or(|w| now >= add(w, pp.window.get()))
        {
            g.window_start = Some(now);
            g.runs = 0;
        }
        if g.runs < pp.runs {
            g.runs += 1;
            return Ok(true);
        }
        let until = add(now, pp.park.get());
        g.parked_until = Some(until);
        let runs = g.runs;
        self.timers.arm(until, OfferTimer::Unpark(id.to_string()));
        self.mark(id);
        let stage = self.stage(s)?.def.name.clone();
        self.emit(Event::PingPong {
            offer: id.to_string(),
            stage,
            runs,
            window: pp.window,
            until,
        });
        Ok(false)
    }

    /// Starts a run of a queued slot (the offer is not blocked).
    fn dispatch(&mut self, s: u16, id: &str, now: Timestamp) -> Result<(), Error> {
        if !self.guard_allows(s, id, now)? {
            // The slot stays queued; its offer is parked now.
            self.hide_queued(id);
            return Ok(());
        }
        let slot = self.offer_mut(id)?.slot_mut(s);
        slot.lane = Lane::Live;
        slot.set_queued_at(None);
        self.stage_mut(s)?.running += 1;
        // The offer is busy once the run is out: its other queued stages wait.
        self.issue(s, id, true, false, now)?;
        self.hide_queued(id);
        Ok(())
    }

    /// Sends a pass of the slot's run on the offer's current version: a new
    /// run (`fresh`), or the run in flight again under a new pass (`auto`:
    /// after a timeout, which its `source` says).
    fn issue(
        &mut self,
        s: u16,
        id: &str,
        fresh: bool,
        auto: bool,
        now: Timestamp,
    ) -> Result<(), Error> {
        let def = &self.stage(s)?.def;
        let (stage, topic, timeout) = (def.name.clone(), def.topic.clone(), def.run.timeout);
        let rt = self.offer(id)?;
        let (version, body) = (rt.version, rt.body.clone());
        let target = target(&stage, id);
        let (slot, mut alarms) = self.slot_mut(s, id)?;
        if let Some(due) = slot.timer().filter(|at| *at <= now) {
            // A pass sent at or after the stage's wake-up covers it.
            alarms
                .timers
                .cancel(due, OfferTimer::Stage(s, id.to_string()));
            slot.set_timer(None);
        }
        let run = if fresh {
            slot.slot.start(&target, timeout, now, &mut alarms)
        } else {
            slot.slot.reissue(&target, timeout, now, &mut alarms)
        }
        .clone();
        slot.run_version = version;
        let state = slot.state.clone();
        let source = if auto {
            Some(crate::ops::AUTO.to_string())
        } else {
            slot.source().map(str::to_string)
        };
        self.mark(id);
        self.out.push(Action::StageRun(StageRunCommand {
            stage,
            offer: id.to_string(),
            run_id: run.run_id,
            attempt: run.attempt,
            pass: run.pass,
            version,
            body,
            state,
            deadline: run.deadline,
            source,
            topic,
        }));
        Ok(())
    }

    fn reject(&mut self, stage: &str, offer: &str, result: &RunResult, reason: Rejection) {
        self.emit(Event::ResultRejected {
            subject: Subject::stage(stage, offer),
            run_id: result.run_id.as_str().into(),
            pass: result.pass,
            reason,
        });
    }

    /// Applies a stage worker's result.
    pub(in crate::engine) fn on_result(
        &mut self,
        result: RunResult,
        now: Timestamp,
    ) -> Result<(), Error> {
        let Some((stage, id)) = parse_stage_run_id(&result.run_id) else {
            self.reject("", "", &result, Rejection::BadRunId);
            return Ok(());
        };
        let (stage, id) = (stage.to_string(), id.to_string());
        self.thaw(&id)?;
        let Some(&s) = self.by_name.get(&stage) else {
            self.reject(&stage, &id, &result, Rejection::UnknownTarget);
            return Ok(());
        };
        let accept = self.stage(s)?.def.run.accept;
        let verdict = match self.map.get(&id).and_then(|rt| rt.slot(s)) {
            Some(slot) => slot.slot.accepts(&result.run_id, result.pass, accept),
            None => Err(Rejection::NotCurrent),
        };
        if let Err(reason) = verdict {
            self.reject(&stage, &id, &result, reason);
            return Ok(());
        }
        match result.status {
            Status::Failed => {
                let error = result.error.unwrap_or_else(|| "failed".to_string());
                self.fail(s, &id, error, now)
            }
            Status::Succeeded => self.succeed(s, &id, result, now),
        }
    }

    fn succeed(
        &mut self,
        s: u16,
        id: &str,
        result: RunResult,
        now: Timestamp,
    ) -> Result<(), Error> {
        let rt = self.offer(id)?;
        let slot = rt
            .slot(s)
            .ok_or_else(|| bug(format!("stage #{s} on `{id}` answered without a slot")))?;
        let computed_from = result.stage.version.unwrap_or(slot.run_version);
        if computed_from != rt.version {
            return self.rerun_stale(s, id, computed_from, now);
        }
        let state = match result.stage.state {
            None => slot.state.clone(),
            Some(serde_json::Value::Null) => None,
            Some(state) => Some(crate::stage::state(state)),
        };
        let state_changed = state != slot.state;
        self.end_run(s, id)?;
        let rt = self.offer_mut(id)?;
        let changed = match result.stage.update {
            None => Vec::new(),
            // Copied only if something still holds the body (a run command
            // or offer state not yet encoded): usually nothing does.
            Some(Update::Patch(patch)) => {
                offer::patch_in_place(SharedBody::make_mut(&mut rt.body), &patch)
            }
            Some(Update::Body(body)) => {
                let changed = offer::changed_fields(Some(&rt.body), &body);
                rt.body = offer::share(body);
                changed
            }
        };
        let slot = rt.slot_mut(s);
        slot.slot.succeeded();
        slot.set_source(None);
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
            self.enqueue(id, s, Lane::Live, now)?;
        }
        if !changed.is_empty() || state_changed {
            let cause = format!("stage:{}", self.stage(s)?.def.name);
            self.commit(id, cause, changed.clone(), now)?;
        }
        self.show_queued(id);
        if !changed.is_empty() {
            self.react(id, &changed, false, Some(s), now)?;
        }
        Ok(())
    }

    /// A result computed from an old version: discarded, and the stage runs
    /// again on the current version (same run, new pass).
    fn rerun_stale(
        &mut self,
        s: u16,
        id: &str,
        computed_from: u64,
        now: Timestamp,
    ) -> Result<(), Error> {
        let rt = self.offer(id)?;
        let current = rt.version;
        let run_id = rt
            .slot(s)
            .and_then(|slot| slot.slot.current())
            .map(|run| run.run_id.clone())
            .ok_or_else(|| bug(format!("stage #{s} on `{id}` answered without a run")))?;
        let stage = self.stage(s)?.def.name.clone();
        self.emit(Event::StaleVersion {
            stage,
            offer: id.to_string(),
            run_id,
            computed_from,
            current,
        });
        if self.guard_allows(s, id, now)? {
            self.issue(s, id, false, false, now)
        } else {
            // Parked: the stage waits in its queue for the park to end.
            self.end_run(s, id)?;
            let slot = self.offer_mut(id)?.slot_mut(s);
            slot.slot.phase = Phase::Queued;
            slot.lane = Lane::Live;
            slot.set_queued_at(Some(now));
            Ok(())
        }
    }

    /// Clears the stage's timer on the offer if it is due; says whether it was.
    fn take_due_timer(&mut self, s: u16, id: &str, now: Timestamp) -> bool {
        let Some(slot) = self.map.get_mut(id).map(|rt| rt.slot_mut(s)) else {
            return false;
        };
        let Some(due) = slot.timer().filter(|at| *at <= now) else {
            return false;
        };
        self.timers
            .cancel(due, OfferTimer::Stage(s, id.to_string()));
        slot.set_timer(None);
        self.mark(id);
        true
    }

    /// Takes the run off the slot and frees its stage slot.
    fn end_run(&mut self, s: u16, id: &str) -> Result<(), Error> {
        let (slot, mut alarms) = self.slot_mut(s, id)?;
        slot.slot.end(&mut alarms);
        let st = self.stage_mut(s)?;
        st.running = st.running.saturating_sub(1);
        self.pending.insert(s);
        self.mark(id);
        Ok(())
    }

    fn fail(&mut self, s: u16, id: &str, error: String, now: Timestamp) -> Result<(), Error> {
        self.end_run(s, id)?;
        // A wake-up that fell due during the run is covered by the retry
        // (or, once dead, by the operator's `unpark_offer`).
        self.take_due_timer(s, id, now);
        let def = self.stage(s)?.def.clone();
        let (slot, mut alarms) = self.slot_mut(s, id)?;
        let failure = slot
            .slot
            .failed(error.clone(), &def.run.retry, now, &mut alarms);
        if failure == crate::run::Failure::Dead {
            // A recovery's run ends here too: what follows is the operator's.
            slot.set_source(None);
        }
        let event = failure.event(
            Subject::stage(&def.name, id),
            slot.slot.last_run_id(&target(&def.name, id)),
            slot.slot.failures,
            error,
        );
        self.emit(event);
        self.show_queued(id);
        Ok(())
    }

    pub(super) fn on_run_timeout(
        &mut self,
        s: u16,
        id: &str,
        at: Timestamp,
        now: Timestamp,
    ) -> Result<(), Error> {
        // As for tasks (DESIGN §7): a timed-out pass is a failed attempt. It
        // is re-dispatched at once under a new pass while attempts remain;
        // the last one, or any with `restart_after_timeout = false`, goes
        // through the retry policy, so a hung worker ends parked, then dead.
        let def = self.stage(s)?.def.clone();
        let Some(slot) = self.map.get_mut(id).map(|rt| rt.slot_mut(s)) else {
            return Ok(());
        };
        let Some(run) = slot.slot.current().cloned() else {
            return Ok(());
        };
        let Some(restart) = slot.slot.timed_out(at, &def.run) else {
            return Ok(());
        };
        self.emit(Event::RunTimedOut {
            subject: Subject::stage(&def.name, id),
            run_id: run.run_id,
            attempt: run.attempt,
            restarted: restart,
        });
        if restart {
            self.issue(s, id, false, true, now)
        } else {
            self.fail(s, id, def.run.timeout_error(), now)
        }
    }

    pub(super) fn on_wake(
        &mut self,
        s: u16,
        id: &str,
        at: Timestamp,
        now: Timestamp,
    ) -> Result<(), Error> {
        let Some(rt) = self.map.get_mut(id) else {
            return Ok(());
        };
        if rt.slot_mut(s).slot.woke(at) {
            self.enqueue(id, s, Lane::Live, now)?;
        }
        Ok(())
    }
}
