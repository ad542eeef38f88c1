//! What a handler receives (a run) and what it may return (a result).
//!
//! JSON objects (an offer, a stage's state, a step's args and context) are
//! `serde_json` values; an integral number is an integer, as Reactor reads
//! it, whether the command came as protobuf (where Struct numbers are
//! doubles) or as JSON.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::{Map, Value};

/// What every run carries.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    /// `TARGET#SEQ`; the same across re-dispatches of one run.
    pub run_id: String,
    /// Try number since the target's last success, from 1.
    pub attempt: u32,
    /// The pass token; the reply echoes it.
    pub pass: u64,
    /// Reactor stops waiting for this pass then.
    pub deadline: Option<Timestamp>,
    /// When Reactor sent the command.
    pub issued_at: Option<Timestamp>,
    /// Where the reply goes.
    pub reply_topic: String,
    /// The reply's key.
    pub reply_key: String,
    /// What caused the run: empty for live work, `auto`, or `op:ID`.
    pub source: String,
    /// The Kafka headers of the command record, in order.
    pub headers: Vec<(String, Vec<u8>)>,
}

/// A run of a CTL-triggered task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRun {
    /// Common fields.
    pub run: RunInfo,
    /// The task id.
    pub task: String,
    /// The task's `params`.
    pub params: BTreeMap<String, String>,
    /// The trigger's CTL values at dispatch, keyed `entity/param`: what the
    /// run should process (recorded as last-seen when it succeeds).
    pub snapshot: BTreeMap<String, Timestamp>,
}

/// A run of an offer stage.
#[derive(Debug, Clone, PartialEq)]
pub struct StageRun {
    /// Common fields.
    pub run: RunInfo,
    /// The stage name.
    pub stage: String,
    /// The offer id (also the reply key).
    pub offer_id: String,
    /// The offer version the run works on (echoed in the reply).
    pub version: u64,
    /// The offer body at `version`.
    pub offer: Map<String, Value>,
    /// The stage's state for the offer; `None` when it has none.
    pub state: Option<Value>,
}

/// A step of a process instance, or a job submitted alone.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRun {
    /// Common fields.
    pub run: RunInfo,
    /// The process (for a job submitted alone: the job's name).
    pub process: String,
    /// The business key (also the reply key).
    pub key: String,
    /// `PROCESS/KEY#N`.
    pub instance: String,
    /// Index of the step in the instance's chain, from 0.
    pub step: u32,
    /// The job this step runs: the handler's name.
    pub job: String,
    /// The instance's launch parameters.
    pub args: Map<String, Value>,
    /// Every earlier step's `output` merged.
    pub context: Map<String, Value>,
}

/// A stage's success: what to change on the offer, all in one commit. The
/// default changes nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageResult {
    /// A JSON merge patch for the body (a `null` member removes the field).
    pub update: Option<Map<String, Value>>,
    /// The whole new body. At most one of `update` and `body`.
    pub body: Option<Map<String, Value>>,
    /// The stage's new state; `None` leaves it.
    pub state: Option<Value>,
    /// Clear the stage's state. Not with `state`.
    pub clear_state: bool,
    /// Wake the stage for this offer then (replaces its timer).
    pub timer: Option<Timestamp>,
    /// Cancel the stage's timer. Not with `timer`.
    pub clear_timer: bool,
}

impl StageResult {
    /// Why the result cannot be sent, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.update.is_some() && self.body.is_some() {
            return Err("a stage result has at most one of update and body".into());
        }
        if self.clear_state && self.state.is_some() {
            return Err("a stage result has state or clear_state, not both".into());
        }
        if self.clear_timer && self.timer.is_some() {
            return Err("a stage result has timer or clear_timer, not both".into());
        }
        Ok(())
    }
}

/// Where a follow-up job goes in its instance's chain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Position {
    /// Right after this step.
    Front,
    /// After the chain's last step.
    #[default]
    Back,
}

impl Position {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Position::Front => "front",
            Position::Back => "back",
        }
    }
}

/// A job a step adds to its own instance's chain.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NextJob {
    /// The job's name (a configured `[[job]]`).
    pub job: String,
    /// Parameters of that step; `None`: the instance's.
    pub params: Option<Map<String, Value>>,
    /// Where it goes.
    pub position: Position,
}

/// A step's success: its output and follow-ups. The default has neither.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobResult {
    /// Merged into the instance's context (and passed to later steps).
    pub output: Option<Map<String, Value>>,
    /// Jobs added to this instance's chain, in order.
    pub next: Vec<NextJob>,
    /// The key's goal is reached (for `reuse = "until_reset"`).
    pub goal_reached: bool,
}

/// A decoded run command.
#[derive(Debug, Clone, PartialEq)]
pub enum Run {
    /// `kind = "task"`.
    Task(TaskRun),
    /// `kind = "stage"`.
    Stage(StageRun),
    /// `kind = "step"`.
    Step(StepRun),
}

impl Run {
    /// The fields every run has.
    pub fn info(&self) -> &RunInfo {
        match self {
            Run::Task(r) => &r.run,
            Run::Stage(r) => &r.run,
            Run::Step(r) => &r.run,
        }
    }

    /// The run's kind as on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            Run::Task(_) => "task",
            Run::Stage(_) => "stage",
            Run::Step(_) => "step",
        }
    }

    /// The handler's name: task id, stage name or job name.
    pub fn target(&self) -> &str {
        match self {
            Run::Task(r) => &r.task,
            Run::Stage(r) => &r.stage,
            Run::Step(r) => &r.job,
        }
    }
}
