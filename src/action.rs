//! What the engine decides, as data: run commands to send, events to
//! publish and changelog records to write. The shell turns each into a
//! Kafka record of one transaction; the simulator prints them.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::changelog::ChangelogRecord;
use crate::duration::Duration;
use crate::offer::Body;
use crate::run::Rejection;

/// One decision of [`crate::engine::Engine`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Send a run command to a worker topic.
    Run(RunCommand),
    /// Send a stage run command to the stage's topic.
    #[serde(rename = "run")]
    StageRun(StageRunCommand),
    /// Publish an offer's committed state to `offer.state`.
    OfferState(OfferState),
    /// Publish an audit or alert event.
    Event(Event),
    /// Persist a state change.
    Changelog(ChangelogRecord),
}

/// A command for a worker: do this run and reply with its run id and pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCommand {
    /// The task.
    pub task: String,
    /// Stable across re-dispatches of the same run.
    pub run_id: String,
    /// Try number since the last success, from 1.
    pub attempt: u32,
    /// Token the result must echo.
    pub pass: u64,
    /// Values of the trigger's parameters read at dispatch (`entity/param` → value).
    pub snapshot: BTreeMap<String, Timestamp>,
    /// Parameters of the task.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    /// No result by then: the pass times out.
    pub deadline: Timestamp,
    /// Partition key the reply must carry (the task's pool).
    #[serde(skip)]
    pub key: String,
    /// Topic override from the task definition.
    #[serde(skip)]
    pub topic: Option<String>,
}

/// A command for a stage worker: process this offer version and reply with
/// the run id, pass and version (and the update, state and timer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageRunCommand {
    /// The stage.
    pub stage: String,
    /// The offer id (also the command's key and the reply key).
    pub offer: String,
    /// `STAGE/OFFER#SEQ`: stable across re-dispatches of the same run.
    pub run_id: String,
    /// Try number since the stage last succeeded on this offer, from 1.
    pub attempt: u32,
    /// Token the result must echo; new on every dispatch.
    pub pass: u64,
    /// The offer version the run works on; the result must be computed from it.
    pub version: u64,
    /// The offer body at that version.
    #[serde(skip)]
    pub body: Body,
    /// The stage's state for this offer, if any.
    #[serde(skip)]
    pub state: Option<serde_json::Value>,
    /// No result by then: the pass times out.
    pub deadline: Timestamp,
    /// The stage's run topic.
    #[serde(skip)]
    pub topic: String,
}

/// An offer's state after a committed change: the post-commit event
/// downstream services (and stages with side effects) act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OfferState {
    /// The offer id.
    pub offer: String,
    /// The version the change committed (bumped by every committed change).
    pub version: u64,
    /// The body at that version (empty when deleted).
    pub body: Body,
    /// `external` for a change from `offer.changes`, `stage:NAME` for a
    /// stage's result, `command` for an operator's state replacement.
    pub cause: String,
    /// Top-level body fields the change touched, sorted.
    pub changed_fields: Vec<String>,
    /// Every stage's state (stage → state); stages without state are absent.
    pub states: BTreeMap<String, serde_json::Value>,
    /// The change deleted the offer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

/// An audit or alert event; every event names its task, or its stage and offer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A CTL value moved backwards; the task may need an operator.
    CtlMovedBack {
        /// An affected task.
        task: String,
        /// Entity of the parameter.
        entity: String,
        /// Parameter name.
        param: String,
        /// Value before.
        previous: Timestamp,
        /// Value now.
        value: Timestamp,
    },
    /// A result was not applied.
    ResultRejected {
        /// The task (as named by the run id).
        task: String,
        /// Run id of the result.
        run_id: String,
        /// Pass of the result.
        pass: u64,
        /// Why.
        reason: Rejection,
    },
    /// A pass got no result in time.
    RunTimedOut {
        /// The task.
        task: String,
        /// The run.
        run_id: String,
        /// The attempt that timed out.
        attempt: u32,
        /// Whether it was re-dispatched at once under a new pass.
        restarted: bool,
    },
    /// A run failed and will be retried after a backoff.
    RunFailed {
        /// The task.
        task: String,
        /// The run.
        run_id: String,
        /// The attempt that failed.
        attempt: u32,
        /// The worker's error text.
        error: String,
        /// When the retry is due.
        retry_at: Timestamp,
    },
    /// Attempts used up: parked for an archive tier, then one more attempt.
    Parked {
        /// The task.
        task: String,
        /// 1-based tier.
        tier: usize,
        /// End of the park.
        until: Timestamp,
        /// Last error.
        error: String,
    },
    /// The attempt after the last tier failed; waits for an operator.
    Dead {
        /// The task.
        task: String,
        /// Failed attempts in a row.
        attempts: u32,
        /// Last error.
        error: String,
    },
    /// No success within the task's `expect_every`.
    SlaMissed {
        /// The task.
        task: String,
        /// Last success, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_success: Option<Timestamp>,
        /// The SLA.
        expect_every: Duration,
    },
    /// An operator command could not be applied.
    CommandRejected {
        /// The task named by the command.
        task: String,
        /// Why.
        reason: String,
    },
    /// A stage result was not applied (wire name `result_rejected`).
    #[serde(rename = "result_rejected")]
    StageResultRejected {
        /// The stage.
        stage: String,
        /// The offer.
        offer: String,
        /// Run id of the result.
        run_id: String,
        /// Pass of the result.
        pass: u64,
        /// Why.
        reason: Rejection,
    },
    /// A stage pass got no result in time (wire name `run_timed_out`).
    #[serde(rename = "run_timed_out")]
    StageRunTimedOut {
        /// The stage.
        stage: String,
        /// The offer.
        offer: String,
        /// The run.
        run_id: String,
        /// The attempt that timed out.
        attempt: u32,
        /// Whether it was re-dispatched at once under a new pass.
        restarted: bool,
    },
    /// A stage run failed and is retried after a backoff (wire name `run_failed`).
    #[serde(rename = "run_failed")]
    StageRunFailed {
        /// The stage.
        stage: String,
        /// The offer.
        offer: String,
        /// The run.
        run_id: String,
        /// The attempt that failed.
        attempt: u32,
        /// The worker's error text.
        error: String,
        /// When the retry is due.
        retry_at: Timestamp,
    },
    /// A stage used its attempts on an offer: parked for a tier (wire name `parked`).
    #[serde(rename = "parked")]
    StageParked {
        /// The stage.
        stage: String,
        /// The offer.
        offer: String,
        /// 1-based tier.
        tier: usize,
        /// End of the park.
        until: Timestamp,
        /// Last error.
        error: String,
    },
    /// The stage's attempt after the last tier failed (wire name `dead`).
    #[serde(rename = "dead")]
    StageDead {
        /// The stage.
        stage: String,
        /// The offer.
        offer: String,
        /// Failed attempts in a row.
        attempts: u32,
        /// Last error.
        error: String,
    },
    /// A stage result was computed from an old offer version: discarded, and
    /// the stage re-runs on the current version.
    StaleVersion {
        /// The stage.
        stage: String,
        /// The offer.
        offer: String,
        /// The run.
        run_id: String,
        /// The version the result was computed from.
        computed_from: u64,
        /// The offer's current version, which the re-run gets.
        current: u64,
    },
    /// A stage's `when` or `timer` expression failed; `when` counts as true,
    /// a failing `timer` leaves the timer as it was.
    PredicateError {
        /// The stage.
        stage: String,
        /// The offer.
        offer: String,
        /// `when` or `timer` (a rescan counts its failures in `rescan_progress`).
        field: String,
        /// The evaluation error.
        error: String,
    },
    /// Too many stage runs for one offer in the guard's window: the offer's
    /// stage runs are parked until `until`.
    PingPong {
        /// The offer.
        offer: String,
        /// The stage whose run was refused.
        stage: String,
        /// Runs counted in the window.
        runs: u32,
        /// The guard's window.
        window: Duration,
        /// Stage runs resume then (or on an `unpark_offer` command).
        until: Timestamp,
    },
    /// The answer to a stage state compare-and-set.
    StageState {
        /// The stage.
        stage: String,
        /// The offer.
        offer: String,
        /// The version the command expected.
        expected: u64,
        /// The offer's version after the command (the new one when applied).
        version: u64,
        /// Whether the state was replaced.
        applied: bool,
    },
    /// Progress of a stage rescan over this shard's offers.
    RescanProgress {
        /// The stage.
        stage: String,
        /// Offers checked so far.
        checked: u64,
        /// Offers queued in the rescan lane so far.
        queued: u64,
        /// Offers in the shard when the rescan started.
        total: u64,
        /// Expressions that failed so far (`when` counted as true, the filter as false).
        errors: u64,
        /// The rescan has checked every offer.
        done: bool,
    },
    /// An operator command about an offer or stage could not be applied
    /// (wire name `command_rejected`).
    #[serde(rename = "command_rejected")]
    StageCommandRejected {
        /// The stage named by the command, if any.
        stage: String,
        /// The offer named by the command, if any.
        offer: String,
        /// Why.
        reason: String,
    },
}

impl Event {
    /// The event's key on `reactor.events`: the task id, or the offer id of
    /// a stage event (the stage of a rescan).
    pub fn key(&self) -> &str {
        match self {
            Event::CtlMovedBack { task, .. }
            | Event::ResultRejected { task, .. }
            | Event::RunTimedOut { task, .. }
            | Event::RunFailed { task, .. }
            | Event::Parked { task, .. }
            | Event::Dead { task, .. }
            | Event::SlaMissed { task, .. }
            | Event::CommandRejected { task, .. } => task,
            Event::StageResultRejected { offer, .. }
            | Event::StageRunTimedOut { offer, .. }
            | Event::StageRunFailed { offer, .. }
            | Event::StageParked { offer, .. }
            | Event::StageDead { offer, .. }
            | Event::StaleVersion { offer, .. }
            | Event::PredicateError { offer, .. }
            | Event::PingPong { offer, .. }
            | Event::StageState { offer, .. } => offer,
            Event::StageCommandRejected { offer, stage, .. } if offer.is_empty() => stage,
            Event::StageCommandRejected { offer, .. } => offer,
            Event::RescanProgress { stage, .. } => stage,
        }
    }

    /// The task the event is about, if it is a task event.
    pub fn task(&self) -> Option<&str> {
        match self {
            Event::CtlMovedBack { task, .. }
            | Event::ResultRejected { task, .. }
            | Event::RunTimedOut { task, .. }
            | Event::RunFailed { task, .. }
            | Event::Parked { task, .. }
            | Event::Dead { task, .. }
            | Event::SlaMissed { task, .. }
            | Event::CommandRejected { task, .. } => Some(task),
            _ => None,
        }
    }
}
