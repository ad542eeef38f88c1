//! The run slot: the lifecycle state every run target keeps (a task, a
//! stage on one offer, a step of a process instance), and the transitions
//! they share — dispatch, result fencing, timeout, failure → backoff → tier →
//! dead, wake. A target adds only its hooks around these (what a run carries,
//! what success commits, where a woken target queues).

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::{add, run_id, AfterFailure, Rejection, Run, RunId};
use crate::config::{Accept, RetryPolicy, RunPolicy};
use crate::duration::Duration;
use crate::stamp::Stamp;

/// Where a run target is in its lifecycle. The names are metric labels and
/// log fields.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::VariantArray,
    strum::Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Phase {
    /// Nothing to do until its cause (a trigger, a watched change, a launch).
    #[default]
    Idle,
    /// In its queue, waiting for a slot.
    Queued,
    /// A run is dispatched and has not finished.
    Running,
    /// A run failed; it is retried when the backoff ends.
    Backoff,
    /// Attempts used up; parked for an archive tier, then one more attempt.
    Parked,
    /// The attempt after the last tier failed; waits for an operator.
    Dead,
    /// Stopped by an operator; resumes on command (tasks).
    Paused,
}

impl Phase {
    /// Metric label and log field.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What a slot's timer is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// The pass in flight times out.
    Deadline,
    /// A backoff or park ends.
    Wake,
}

/// The target's timers, as a slot sees them: each target keys its timers
/// its own way, the slot only says which deadline moves.
pub trait Alarms {
    /// Arms the target's `due` timer at `at`.
    fn arm(&mut self, due: Due, at: Timestamp);
    /// Cancels the target's `due` timer armed at `at`.
    fn cancel(&mut self, due: Due, at: Timestamp);
}

/// What follows a failed attempt, as decided by the retry policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Retried at `retry_at`.
    Backoff {
        /// When the retry is due.
        retry_at: Timestamp,
    },
    /// Parked in archive tier `tier` until `until`, then one more attempt.
    Parked {
        /// 1-based tier.
        tier: usize,
        /// End of the park.
        until: Timestamp,
    },
    /// Waits for an operator.
    Dead,
}

/// The run state of one target.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "SlotParts", into = "SlotParts")]
pub struct RunSlot {
    /// Lifecycle phase.
    pub phase: Phase,
    /// Runs dispatched so far (the last run id's number).
    pub run_seq: u64,
    /// Passes issued so far (the last pass token).
    pub pass_seq: u64,
    /// Consecutive failed attempts since the last success.
    pub failures: u32,
    /// The run in flight and what a slot that failed or waits carries, in
    /// one box absent while none of it is set: a shard holds up to millions
    /// of slots, most of them idle (one pointer where a box each took two).
    busy: Option<Box<Busy>>,
}

/// The part of a [`RunSlot`] set while a run is in flight, by failures and
/// by waits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Busy {
    run: Option<Run>,
    // 12-byte stamps where an optional jiff timestamp takes 24.
    wake_at: Option<Stamp>,
    failed_at: Option<Stamp>,
    last_error: Option<String>,
}

/// A [`RunSlot`] field by field: how records and tests build one, and its
/// serde form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotParts {
    /// Lifecycle phase.
    pub phase: Phase,
    /// Runs dispatched so far (the last run id's number).
    #[serde(default)]
    pub run_seq: u64,
    /// Passes issued so far (the last pass token).
    #[serde(default)]
    pub pass_seq: u64,
    /// Consecutive failed attempts since the last success.
    #[serde(default)]
    pub failures: u32,
    /// The run in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<Box<Run>>,
    /// End of a backoff or park.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_at: Option<Timestamp>,
    /// Last failure's error text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When the last attempt failed (cleared by a success): what an
    /// operator's search by time range looks at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<Timestamp>,
}

impl From<SlotParts> for RunSlot {
    fn from(p: SlotParts) -> RunSlot {
        let busy = Busy {
            run: p.run.map(|run| *run),
            wake_at: p.wake_at.map(Stamp::from),
            failed_at: p.failed_at.map(Stamp::from),
            last_error: p.last_error,
        };
        RunSlot {
            phase: p.phase,
            run_seq: p.run_seq,
            pass_seq: p.pass_seq,
            failures: p.failures,
            busy: (busy != Busy::default()).then(|| Box::new(busy)),
        }
    }
}

impl From<RunSlot> for SlotParts {
    fn from(s: RunSlot) -> SlotParts {
        let busy = s.busy.map(|b| *b).unwrap_or_default();
        SlotParts {
            phase: s.phase,
            run_seq: s.run_seq,
            pass_seq: s.pass_seq,
            failures: s.failures,
            run: busy.run.map(Box::new),
            wake_at: busy.wake_at.map(Stamp::get),
            last_error: busy.last_error,
            failed_at: busy.failed_at.map(Stamp::get),
        }
    }
}

impl RunSlot {
    /// End of a backoff or park.
    pub fn wake_at(&self) -> Option<Timestamp> {
        self.busy.as_ref().and_then(|b| b.wake_at).map(Stamp::get)
    }

    /// Last failure's error text.
    pub fn last_error(&self) -> Option<&str> {
        self.busy.as_ref().and_then(|b| b.last_error.as_deref())
    }

    /// When the last attempt failed (cleared by a success).
    pub fn failed_at(&self) -> Option<Timestamp> {
        self.busy.as_ref().and_then(|b| b.failed_at).map(Stamp::get)
    }

    /// The run in flight (kept while a result is awaited, whatever the
    /// phase says; see [`RunSlot::current`]).
    pub fn run(&self) -> Option<&Run> {
        self.busy.as_ref().and_then(|b| b.run.as_ref())
    }

    /// Takes the run in flight off without touching its timer (the caller
    /// cancels it or never armed it).
    pub fn take_run(&mut self) -> Option<Run> {
        let run = self.busy.as_mut()?.run.take();
        self.tidy_busy();
        run
    }

    /// Changes the busy part, dropping it once nothing in it is set.
    fn busy(&mut self, change: impl FnOnce(&mut Busy)) {
        change(self.busy.get_or_insert_with(Box::default));
        self.tidy_busy();
    }

    /// Drops the busy part once nothing in it is set.
    fn tidy_busy(&mut self) {
        if self.busy.as_deref() == Some(&Busy::default()) {
            self.busy = None;
        }
    }

    /// Takes the wake time off without touching its timer (the caller
    /// cancels or never armed it).
    pub fn take_wake(&mut self) -> Option<Timestamp> {
        let at = self.wake_at();
        if at.is_some() {
            self.busy(|b| b.wake_at = None);
        }
        at
    }

    /// The run a result may answer: the one in flight while running.
    pub fn current(&self) -> Option<&Run> {
        self.run().filter(|_| self.phase == Phase::Running)
    }

    /// The id of the slot's latest run of `target`.
    pub fn last_run_id(&self, target: &str) -> RunId {
        run_id(target, self.run_seq)
    }

    /// Dispatches a new run of `target` (a new run id and pass; the attempt
    /// counts the failures since the last success).
    pub fn start(
        &mut self,
        target: &str,
        timeout: Duration,
        now: Timestamp,
        alarms: &mut impl Alarms,
    ) -> &Run {
        self.run_seq += 1;
        let run = run_id(target, self.run_seq);
        self.issue(run, timeout, now, alarms)
    }

    /// Sends the run in flight again under a new pass (a timeout's restart,
    /// a re-run on a newer version, an idle re-dispatch): same run id.
    /// Without a run in flight it starts one.
    pub fn reissue(
        &mut self,
        target: &str,
        timeout: Duration,
        now: Timestamp,
        alarms: &mut impl Alarms,
    ) -> &Run {
        let id = match self.take_run() {
            Some(old) => {
                alarms.cancel(Due::Deadline, old.deadline);
                old.run_id
            }
            None => {
                self.run_seq += 1;
                run_id(target, self.run_seq)
            }
        };
        self.issue(id, timeout, now, alarms)
    }

    fn issue(
        &mut self,
        run_id: RunId,
        timeout: Duration,
        now: Timestamp,
        alarms: &mut impl Alarms,
    ) -> &Run {
        if let Some(old) = self.take_run() {
            alarms.cancel(Due::Deadline, old.deadline);
        }
        if let Some(at) = self.take_wake() {
            alarms.cancel(Due::Wake, at);
        }
        self.pass_seq += 1;
        let deadline = add(now, timeout.get());
        alarms.arm(Due::Deadline, deadline);
        self.phase = Phase::Running;
        let run = Run {
            run_id,
            attempt: self.failures + 1,
            pass: self.pass_seq,
            dispatched_at: now,
            deadline,
        };
        self.busy.get_or_insert_with(Box::default).run.insert(run)
    }

    /// Whether a result for `run_id`/`pass` answers the run in flight.
    pub fn accepts(&self, run_id: &str, pass: u64, accept: Accept) -> Result<(), Rejection> {
        super::accepts(self.current(), run_id, pass, accept)
    }

    /// Takes the run in flight off the slot (a result came, or it is given
    /// up); the phase is the caller's to set.
    pub fn end(&mut self, alarms: &mut impl Alarms) -> Option<Run> {
        let run = self.take_run()?;
        alarms.cancel(Due::Deadline, run.deadline);
        Some(run)
    }

    /// A run succeeded: the failure count starts again.
    pub fn succeeded(&mut self) {
        self.failures = 0;
        if self.busy.is_some() {
            self.busy(|b| {
                b.last_error = None;
                b.failed_at = None;
            });
        }
        self.phase = Phase::Idle;
    }

    /// A run failed with `error` (its run already ended): the retry policy
    /// decides between a backoff, a tier and dead, and the slot waits.
    pub fn failed(
        &mut self,
        error: String,
        retry: &RetryPolicy,
        now: Timestamp,
        alarms: &mut impl Alarms,
    ) -> Failure {
        self.failures += 1;
        self.busy(|b| {
            b.last_error = Some(error);
            b.failed_at = Some(Stamp::from(now));
        });
        let (phase, wake, failure) = match retry.after_failure(self.failures, now) {
            AfterFailure::Backoff(at) => {
                (Phase::Backoff, Some(at), Failure::Backoff { retry_at: at })
            }
            AfterFailure::Park { tier, until } => {
                (Phase::Parked, Some(until), Failure::Parked { tier, until })
            }
            AfterFailure::Dead => (Phase::Dead, None, Failure::Dead),
        };
        self.set_wake(wake, alarms);
        self.phase = phase;
        failure
    }

    /// The deadline timer at `at` fired: `None` when it is not the pass in
    /// flight any more (stale timer), else whether the run is re-dispatched
    /// at once (a timeout is a failed attempt: while attempts remain and the
    /// policy restarts, the failure is counted and the run goes out again;
    /// otherwise the caller fails the run with [`RunPolicy::timeout_error`]).
    pub fn timed_out(&mut self, at: Timestamp, policy: &RunPolicy) -> Option<bool> {
        if self.current()?.deadline != at {
            return None;
        }
        let restart = policy.restarts_on_timeout(self.failures);
        if restart {
            self.failures += 1;
            let error = policy.timeout_error();
            self.busy(|b| b.last_error = Some(error));
        }
        Some(restart)
    }

    /// The wake timer at `at` fired: whether a backoff or park ended (the
    /// slot is idle again and the target should queue it).
    pub fn woke(&mut self, at: Timestamp) -> bool {
        if self.wake_at() != Some(at) || !matches!(self.phase, Phase::Backoff | Phase::Parked) {
            return false;
        }
        self.take_wake();
        self.phase = Phase::Idle;
        true
    }

    /// Moves (or clears) the wake timer.
    pub fn set_wake(&mut self, at: Option<Timestamp>, alarms: &mut impl Alarms) {
        if self.wake_at() == at {
            return;
        }
        if let Some(old) = self.take_wake() {
            alarms.cancel(Due::Wake, old);
        }
        if let Some(at) = at {
            alarms.arm(Due::Wake, at);
            self.busy(|b| b.wake_at = Some(Stamp::from(at)));
        }
    }

    /// Arms the slot's timers after a restore (records carry the deadlines).
    pub fn rearm(&self, alarms: &mut impl Alarms) {
        if let Some(run) = self.current() {
            alarms.arm(Due::Deadline, run.deadline);
        }
        if let Some(at) = self.wake_at() {
            alarms.arm(Due::Wake, at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Log(Vec<(bool, &'static str, Timestamp)>);

    impl Alarms for Log {
        fn arm(&mut self, due: Due, at: Timestamp) {
            self.0.push((true, name(due), at));
        }
        fn cancel(&mut self, due: Due, at: Timestamp) {
            self.0.push((false, name(due), at));
        }
    }

    fn name(due: Due) -> &'static str {
        match due {
            Due::Deadline => "deadline",
            Due::Wake => "wake",
        }
    }

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn policy() -> RunPolicy {
        RunPolicy {
            timeout: Duration::from_secs(60),
            restart_after_timeout: true,
            accept: Accept::Last,
            retry: RetryPolicy::default(),
        }
    }

    #[test]
    fn a_timeout_restarts_with_a_new_pass_under_the_same_run_id() {
        let (p, mut log, mut slot) = (policy(), Log::default(), RunSlot::default());
        let now = t("2024-01-01T00:00:00Z");
        let first = slot.start("a", p.timeout, now, &mut log).clone();
        assert_eq!(
            (first.run_id.as_str(), first.attempt, first.pass),
            ("a#1", 1, 1)
        );
        assert_eq!(slot.timed_out(t("2024-01-01T00:00:30Z"), &p), None);
        assert_eq!(slot.timed_out(first.deadline, &p), Some(true));
        let second = slot
            .reissue("a", p.timeout, first.deadline, &mut log)
            .clone();
        assert_eq!(
            (second.run_id.as_str(), second.attempt, second.pass),
            ("a#1", 2, 2)
        );
        assert_eq!(
            slot.accepts("a#1", 1, Accept::Last),
            Err(Rejection::StalePass)
        );
        assert_eq!(slot.accepts("a#1", 1, Accept::First), Ok(()));
        assert_eq!(
            log.0,
            vec![
                (true, "deadline", first.deadline),
                (false, "deadline", first.deadline),
                (true, "deadline", second.deadline)
            ]
        );
    }

    #[test]
    fn failures_go_through_backoff_tiers_then_dead_and_a_retry_is_a_new_run() {
        let (p, mut log, mut slot) = (policy(), Log::default(), RunSlot::default());
        let now = t("2024-01-01T00:00:00Z");
        let mut seen = Vec::new();
        for _ in 0..5 {
            slot.start("a", p.timeout, now, &mut log);
            let run = slot.end(&mut log).unwrap();
            seen.push((run.run_id.to_string(), run.attempt));
            let failure = slot.failed("boom".into(), &p.retry, now, &mut log);
            if let Some(at) = slot.wake_at() {
                assert!(slot.woke(at));
            }
            seen.push((format!("{failure:?}"), slot.failures));
        }
        assert_eq!(slot.phase, Phase::Dead);
        assert_eq!(seen[0], ("a#1".to_string(), 1));
        assert_eq!(seen[8], ("a#5".to_string(), 5));
        assert!(seen[5].0.starts_with("Parked { tier: 1"));
        assert!(seen[7].0.starts_with("Parked { tier: 2"));
        assert_eq!(seen[9].0, "Dead");
        slot.succeeded();
        assert_eq!((slot.failures, slot.phase), (0, Phase::Idle));
    }

    #[test]
    fn the_last_attempt_is_not_restarted_after_a_timeout() {
        let (p, mut log, mut slot) = (policy(), Log::default(), RunSlot::default());
        let mut now = t("2024-01-01T00:00:00Z");
        slot.start("a", p.timeout, now, &mut log);
        let mut restarts = 0;
        loop {
            let deadline = slot.current().unwrap().deadline;
            match slot.timed_out(deadline, &p) {
                Some(true) => {
                    restarts += 1;
                    now = deadline;
                    slot.reissue("a", p.timeout, now, &mut log);
                }
                Some(false) => break,
                None => unreachable!(),
            }
        }
        assert_eq!(restarts, p.retry.attempts - 1);
    }

    /// The run and the failure parts share one box, there while any of it
    /// is set and gone once the slot is idle after a success; the record
    /// form reads back equal at every step.
    #[test]
    fn an_idle_slot_holds_no_box() {
        let (p, mut log, mut slot) = (policy(), Log::default(), RunSlot::default());
        let now = t("2024-01-01T00:00:00Z");
        let same = |slot: &RunSlot| RunSlot::from(SlotParts::from(slot.clone())) == *slot;
        slot.start("a", p.timeout, now, &mut log);
        assert!(slot.busy.is_some() && slot.run().is_some() && same(&slot));
        slot.end(&mut log);
        assert!(slot.busy.is_none());
        slot.failed("boom".into(), &p.retry, now, &mut log);
        assert_eq!(slot.last_error(), Some("boom"));
        assert_eq!(slot.failed_at(), Some(now));
        assert!(slot.wake_at().is_some() && same(&slot));
        let at = slot.wake_at().unwrap();
        assert!(slot.woke(at));
        slot.start("a", p.timeout, at, &mut log);
        assert!(slot.run().is_some() && slot.last_error() == Some("boom") && same(&slot));
        slot.end(&mut log);
        slot.succeeded();
        assert!(slot.busy.is_none() && same(&slot));
        assert_eq!((slot.run_seq, slot.pass_seq), (2, 2));
    }
}
