//! Decoded inputs of a shard.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::ctl::ParamName;
use crate::offer::{Body, OfferChange};
use crate::process::{NextJob, Position};
use crate::run::Status;

/// One input of [`super::Engine::apply`].
// A result is the common input and moved once per record: boxing it would
// cost an allocation per record to save a copy of a few hundred bytes.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A CTL parameter has a new value.
    Ctl {
        /// Entity, e.g. `dwh.orders`.
        entity: String,
        /// Parameter, e.g. `max_dt`.
        param: String,
        /// The new value.
        value: Timestamp,
    },
    /// A worker's result.
    Result(RunResult),
    /// An operator command.
    Command(Command),
    /// An offer changed outside Reactor.
    Offer(OfferChange),
    /// A record on a topic a process launches on (`on`).
    Record(EventRecord),
}

/// A record on a topic named by a process's `on`, as launch expressions see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRecord {
    /// The topic.
    pub topic: String,
    /// The record key (UTF-8; empty when absent).
    #[serde(default)]
    pub key: String,
    /// The value as JSON (`record` in CEL).
    pub value: serde_json::Value,
    /// Headers with UTF-8 values (`headers` in CEL).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// A worker's reply to a run command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunResult {
    /// The run id of the command.
    pub run_id: String,
    /// The pass of the command.
    pub pass: u64,
    /// Verdict.
    pub status: Status,
    /// Error text of a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What a stage worker returns with a success (empty for tasks).
    #[serde(default, skip_serializing_if = "StageReply::is_empty")]
    pub stage: StageReply,
    /// What a job worker returns with a success (empty for tasks and stages).
    #[serde(default, skip_serializing_if = "StepReply::is_empty")]
    pub step: StepReply,
}

/// The step part of a result: what a successful step adds to its instance.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepReply {
    /// Merged into the instance's context (JSON merge patch), passed to later steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Body>,
    /// Jobs added to the instance's chain, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub next: Vec<NextJob>,
    /// The key's goal is reached (`reuse = "until_reset"`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub goal_reached: bool,
}

impl StepReply {
    /// Nothing step-specific was said.
    pub fn is_empty(&self) -> bool {
        *self == StepReply::default()
    }
}

impl RunResult {
    /// A result without stage fields.
    pub fn new(run_id: impl Into<String>, pass: u64, status: Status) -> RunResult {
        RunResult {
            run_id: run_id.into(),
            pass,
            status,
            error: None,
            stage: StageReply::default(),
            step: StepReply::default(),
        }
    }
}

/// The stage part of a result: the version it was computed from, and the
/// offer update, state and timer to commit together.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageReply {
    /// The offer version the worker computed from (the command's `version`);
    /// absent means the version the run was dispatched with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// The offer update; absent leaves the body as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<Update>,
    /// The stage's new state: absent leaves it, JSON `null` clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<serde_json::Value>,
    /// The stage's timer for this offer: absent leaves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer: Option<TimerChange>,
}

impl StageReply {
    /// Nothing stage-specific was said.
    pub fn is_empty(&self) -> bool {
        *self == StageReply::default()
    }
}

/// How a stage result changes the offer body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Update {
    /// A JSON merge patch (RFC 7396) applied to the body.
    Patch(Body),
    /// A whole new body.
    Body(Body),
}

/// How a stage result changes the stage's timer for the offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimerChange {
    /// Wake the stage for the offer at this time (replaces any timer).
    Set(Timestamp),
    /// Cancel the timer.
    Clear,
}

/// An operator command on one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    /// Stop dispatching the task (a running run finishes first).
    Pause {
        /// Task id.
        task: String,
    },
    /// Resume a paused task, or revive a dead one with its failure count reset.
    Resume {
        /// Task id.
        task: String,
    },
    /// Move a last-seen value (e.g. after a CTL value moved back).
    SetLast {
        /// Task id.
        task: String,
        /// The parameter.
        param: ParamName,
        /// The value to record.
        value: Timestamp,
    },
    /// Forget one last-seen value, or all when `param` is absent.
    ClearLast {
        /// Task id.
        task: String,
        /// The parameter.
        #[serde(default)]
        param: Option<ParamName>,
    },
    /// Replace a stage's state for an offer if the offer is still at `version`
    /// (compare-and-set); the answer is a `stage_state` event.
    SetStageState {
        /// Offer id.
        offer: String,
        /// Stage name.
        stage: String,
        /// The new state (`null` clears it).
        state: serde_json::Value,
        /// The offer version the caller read.
        version: u64,
    },
    /// Check every offer of the shard the command reaches and queue those
    /// whose `when` (and the optional filter) is true in the stage's rescan lane.
    Rescan {
        /// Stage name.
        stage: String,
        /// An extra CEL filter over `offer`, `meta`, `state`, `now`.
        #[serde(default)]
        when: Option<String>,
    },
    /// End an offer's ping-pong park and revive its dead stages.
    UnparkOffer {
        /// Offer id.
        offer: String,
    },
    /// Launch a process for each of `keys` (a block, in list order).
    Launch {
        /// The process.
        process: String,
        /// The business keys.
        keys: Vec<String>,
        /// Launch parameters.
        #[serde(default)]
        params: Body,
        /// Where the first steps enter their job queue.
        #[serde(default)]
        position: Position,
        /// Clear each key's goal first.
        #[serde(default)]
        reset: bool,
        /// What caused it (`op:ID` …).
        #[serde(default)]
        source: Option<String>,
    },
    /// Run a task now with parameters, under its `conflict` policy.
    LaunchTask {
        /// Task id.
        task: String,
        /// Parameters added to the task's own for this run.
        #[serde(default)]
        params: BTreeMap<String, String>,
    },
    /// Submit a job for a key: a one-step instance, queued behind the key's
    /// other jobs.
    Submit {
        /// The job.
        job: String,
        /// The business key.
        key: String,
        /// Its parameters.
        #[serde(default)]
        params: Body,
        /// Front or back of the job's queue (and of the key's waiting jobs).
        #[serde(default)]
        position: Position,
        /// Queue priority (default 0).
        #[serde(default)]
        priority: Option<i64>,
    },
    /// Cancel a key's active instance (or, with none, its waiting launches).
    Cancel {
        /// The process (or a submitted job's name).
        process: String,
        /// The key.
        key: String,
    },
    /// Clear a key's goal so `reuse = "until_reset"` allows a new instance.
    ResetKey {
        /// The process.
        process: String,
        /// The key.
        key: String,
    },
    /// Find the shard's runs by criteria: one `search_result` answer.
    Search(crate::ops::Search),
    /// Restart the shard's runs found by criteria, in chunks in the
    /// low-priority lanes (or only count them: `dry_run`).
    Recover(crate::ops::Recover),
    /// Stop a recovery in progress on the shard.
    CancelOperation {
        /// The operation id.
        id: String,
    },
}

/// What a command is about: where it is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// A task (routed by its pool).
    Task(&'a str),
    /// An offer (routed by its id).
    Offer(&'a str),
    /// The shard that received it (a rescan: one command per partition).
    Shard,
    /// Process keys (routed by key; a launch for several is split by owner).
    Keys(&'a [String]),
    /// One process key (routed by key).
    Key(&'a str),
}

impl Command {
    /// What the command is about.
    pub fn target(&self) -> Target<'_> {
        match self {
            Command::Pause { task }
            | Command::Resume { task }
            | Command::SetLast { task, .. }
            | Command::ClearLast { task, .. } => Target::Task(task),
            Command::SetStageState { offer, .. } | Command::UnparkOffer { offer } => {
                Target::Offer(offer)
            }
            Command::Rescan { .. }
            | Command::Search(_)
            | Command::Recover(_)
            | Command::CancelOperation { .. } => Target::Shard,
            Command::LaunchTask { task, .. } => Target::Task(task),
            Command::Launch { keys, .. } => Target::Keys(keys),
            Command::Submit { key, .. }
            | Command::Cancel { key, .. }
            | Command::ResetKey { key, .. } => Target::Key(key),
        }
    }
}
