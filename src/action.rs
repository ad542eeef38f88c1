//! What the engine decides, as data: run commands to send, events to
//! publish and changelog records to write. The shell turns each into a
//! Kafka record of one transaction; the simulator prints them.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use serde::Serialize;

use crate::changelog::ChangelogRecord;
use crate::ctl::ParamValues;
use crate::duration::Duration;
use crate::offer::{Body, SharedBody};
use crate::run::{Rejection, RunId};

/// One decision of [`crate::engine::Engine`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Send a run command to a worker topic.
    Run(RunCommand),
    /// Send a stage run command to the stage's topic.
    #[serde(rename = "run")]
    StageRun(StageRunCommand),
    /// Send a process step (or a submitted job) to its job's topic. Boxed:
    /// the largest command, it made every action as large, and actions are
    /// moved several times on the way out.
    #[serde(rename = "run")]
    StepRun(Box<StepRunCommand>),
    /// Publish an offer's committed state to `offer.state`.
    OfferState(OfferState),
    /// Publish an audit or alert event.
    Event(Event),
    /// Persist a state change.
    Changelog(ChangelogRecord),
}

/// A command for a worker: do this run and reply with its run id and pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCommand {
    /// Stable across re-dispatches of the same run: `TASK#SEQ`, so the task
    /// is read from it ([`RunCommand::task`]) rather than copied beside it.
    pub run_id: RunId,
    /// Try number since the last success, from 1.
    pub attempt: u32,
    /// Token the result must echo.
    pub pass: u64,
    /// Values of the trigger's parameters read at dispatch (`entity/param` → value).
    pub snapshot: ParamValues,
    /// Parameters of the task.
    pub params: BTreeMap<String, String>,
    /// No result by then: the pass times out.
    pub deadline: Timestamp,
    /// What caused the run: `op:ID` for an operator's recovery, `auto` for a
    /// pass re-dispatched after a timeout; none for live work.
    pub source: Option<String>,
    /// Partition key the reply must carry (the task's pool), shared with
    /// the pool's other runs.
    pub key: Arc<str>,
    /// Topic override from the task definition.
    pub topic: Option<String>,
}

impl RunCommand {
    /// The task: the run id up to its last `#`.
    pub fn task(&self) -> &str {
        self.run_id
            .rsplit_once('#')
            .map_or(&self.run_id, |(task, _)| task)
    }
}

/// As the simulator prints a task's run (the wire's field names; the reply
/// key and topic are the shell's).
impl Serialize for RunCommand {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("RunCommand", 8)?;
        s.serialize_field("task", self.task())?;
        s.serialize_field("run_id", &self.run_id)?;
        s.serialize_field("attempt", &self.attempt)?;
        s.serialize_field("pass", &self.pass)?;
        s.serialize_field("snapshot", &self.snapshot)?;
        if self.params.is_empty() {
            s.skip_field("params")?;
        } else {
            s.serialize_field("params", &self.params)?;
        }
        s.serialize_field("deadline", &self.deadline)?;
        match &self.source {
            Some(source) => s.serialize_field("source", source)?,
            None => s.skip_field("source")?,
        }
        s.end()
    }
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
    pub run_id: RunId,
    /// Try number since the stage last succeeded on this offer, from 1.
    pub attempt: u32,
    /// Token the result must echo; new on every dispatch.
    pub pass: u64,
    /// The offer version the run works on; the result must be computed from it.
    pub version: u64,
    /// The offer body at that version.
    #[serde(skip)]
    pub body: SharedBody,
    /// The stage's state for this offer, if any.
    #[serde(skip)]
    pub state: Option<crate::stage::State>,
    /// No result by then: the pass times out.
    pub deadline: Timestamp,
    /// What caused the run: `op:ID` for an operator's recovery, `auto` for a
    /// pass re-dispatched after a timeout; none for live work.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The stage's run topic.
    #[serde(skip)]
    pub topic: Arc<str>,
}

/// A command for a job worker: run this step of a process instance (or a
/// submitted job) and reply with the run id and pass (and an `output`,
/// `next` jobs, `goal_reached`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepRunCommand {
    /// The process (a submitted job's: the job's name).
    pub process: String,
    /// The business key (also the command's key and the reply key).
    pub key: String,
    /// The instance, `PROCESS/KEY#N`.
    pub instance: String,
    /// Index of the step in the instance's chain.
    pub step: u32,
    /// The job: the worker's handler.
    pub job: Arc<str>,
    /// `PROCESS/KEY#N.STEP#SEQ`: stable across re-dispatches of the same run.
    pub run_id: RunId,
    /// Try number of this step since its last success, from 1.
    pub attempt: u32,
    /// Token the result must echo; new on every dispatch.
    pub pass: u64,
    /// The step's parameters (the instance's launch parameters unless a
    /// `next` job gave its own).
    pub params: Body,
    /// The instance's context: every earlier step's `output` merged in.
    pub context: Body,
    /// No result by then: the pass times out.
    pub deadline: Timestamp,
    /// What caused the run: the instance's cause (`op:ID`, `schedule`,
    /// `event:TOPIC`), or `auto` for a pass re-dispatched after a timeout or
    /// an idle timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The job's run topic.
    #[serde(skip)]
    pub topic: Arc<str>,
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
    pub body: SharedBody,
    /// `external` for a change from `offer.changes`, `stage:NAME` for a
    /// stage's result, `command` for an operator's state replacement.
    pub cause: String,
    /// Top-level body fields the change touched, sorted.
    pub changed_fields: Vec<String>,
    /// Every stage's state (stage → state); stages without state are absent.
    pub states: BTreeMap<String, crate::stage::State>,
    /// The change deleted the offer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

/// What a run-lifecycle event is about: a task, a stage on one offer, or a
/// step of a process instance. Its fields are the event's own on the wire
/// and in `simulate` (`task`; `stage` and `offer`; `process`, `key` …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Subject {
    /// A task.
    Task {
        /// The task id.
        task: String,
    },
    /// A stage on one offer (either may be empty in a rejected command that
    /// names only the other).
    Stage {
        /// The stage.
        stage: String,
        /// The offer.
        offer: String,
    },
    /// A process (or a submitted job's implicit process) for one key.
    Process {
        /// The process.
        process: String,
        /// The business key.
        key: String,
        /// The instance, `PROCESS/KEY#N`, where one exists.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        instance: Option<String>,
        /// The job of the step the event is about, for step events.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        job: Option<String>,
    },
}

impl Subject {
    /// A task subject.
    pub fn task(task: impl Into<String>) -> Subject {
        Subject::Task { task: task.into() }
    }

    /// A stage-on-offer subject.
    pub fn stage(stage: impl Into<String>, offer: impl Into<String>) -> Subject {
        Subject::Stage {
            stage: stage.into(),
            offer: offer.into(),
        }
    }

    /// The record key of the event on `reactor.events`: the task id, the
    /// offer id (the stage when no offer is named), the business key.
    pub fn key(&self) -> &str {
        match self {
            Subject::Task { task } => task,
            Subject::Stage { stage, offer } if offer.is_empty() => stage,
            Subject::Stage { offer, .. } => offer,
            Subject::Process { key, .. } => key,
        }
    }

    /// The worker type the subject's runs go to, for per-type metrics:
    /// `(kind, name)` — `("task", id)`, `("stage", stage)`, `("job", job)`.
    pub fn worker_type(&self) -> (&'static str, &str) {
        match self {
            Subject::Task { task } => ("task", task),
            Subject::Stage { stage, .. } => ("stage", stage),
            Subject::Process { job, process, .. } => ("job", job.as_deref().unwrap_or(process)),
        }
    }
}

/// An audit or alert event. Run-lifecycle events carry a [`Subject`]
/// (flattened: `task`, or `stage` and `offer`, or `process`, `key` …); the
/// others name what they are about in their own fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[serde(tag = "event", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
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
        /// What the result's run id names.
        #[serde(flatten)]
        subject: Subject,
        /// Run id of the result.
        run_id: RunId,
        /// Pass of the result.
        pass: u64,
        /// Why.
        reason: Rejection,
    },
    /// A pass got no result in time.
    RunTimedOut {
        /// Whose run.
        #[serde(flatten)]
        subject: Subject,
        /// The run.
        run_id: RunId,
        /// The attempt that timed out.
        attempt: u32,
        /// Whether it was re-dispatched at once under a new pass.
        restarted: bool,
    },
    /// A run failed and will be retried after a backoff.
    RunFailed {
        /// Whose run.
        #[serde(flatten)]
        subject: Subject,
        /// The run.
        run_id: RunId,
        /// The attempt that failed.
        attempt: u32,
        /// The worker's error text.
        error: String,
        /// When the retry is due.
        retry_at: Timestamp,
    },
    /// Attempts used up: parked for an archive tier, then one more attempt.
    Parked {
        /// Whose run.
        #[serde(flatten)]
        subject: Subject,
        /// 1-based tier.
        tier: usize,
        /// End of the park.
        until: Timestamp,
        /// Last error.
        error: String,
    },
    /// The attempt after the last tier failed; waits for an operator.
    Dead {
        /// Whose run.
        #[serde(flatten)]
        subject: Subject,
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
        /// What the command names.
        #[serde(flatten)]
        subject: Subject,
        /// Why.
        reason: String,
    },
    /// A process instance started.
    ProcessStarted {
        /// The process, key and new instance.
        #[serde(flatten)]
        subject: Subject,
        /// What caused it (`op:ID`, `auto`, `schedule`, `event:TOPIC`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
    },
    /// Every step of an instance succeeded.
    ProcessSucceeded {
        /// The process, key and instance.
        #[serde(flatten)]
        subject: Subject,
    },
    /// An instance failed: a step died (`step`) or passed its job's deadline
    /// (`deadline`).
    ProcessFailed {
        /// The process, key and instance.
        #[serde(flatten)]
        subject: Subject,
        /// `step` or `deadline`.
        reason: String,
        /// The last error.
        error: String,
    },
    /// An instance was cancelled (`operator`) or replaced by a new launch
    /// (`replaced`); waiting launches dropped by a cancel name no instance.
    ProcessCancelled {
        /// The process, key and instance.
        #[serde(flatten)]
        subject: Subject,
        /// `operator` or `replaced`.
        reason: String,
    },
    /// An instance passed its process `timeout` and failed.
    ProcessTimedOut {
        /// The process, key and instance.
        #[serde(flatten)]
        subject: Subject,
    },
    /// An instance made no step progress for `idle_timeout`; a running step
    /// was sent again under a new pass.
    ProcessIdle {
        /// The process, key, instance and current job.
        #[serde(flatten)]
        subject: Subject,
        /// The process's `idle_timeout`.
        idle_for: Duration,
    },
    /// A launch was refused: `active` (conflict), `reuse`, `validation`.
    LaunchRejected {
        /// The process and key (and the active instance, if any).
        #[serde(flatten)]
        subject: Subject,
        /// `active`, `reuse` or `validation`.
        reason: String,
        /// A `when` (or `on`) expression's evaluation error, if that was why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A launch waits behind the key's active instance (`conflict = "queue"`).
    LaunchQueued {
        /// The process, key and active instance.
        #[serde(flatten)]
        subject: Subject,
    },
    /// A step's job deadline passed: it fails for good, and its instance.
    DeadlineExceeded {
        /// The process, key, instance and job.
        #[serde(flatten)]
        subject: Subject,
        /// The deadline.
        deadline: Timestamp,
    },
    /// A stage result was computed from an old offer version: discarded, and
    /// the stage re-runs on the current version.
    StaleVersion {
        /// The stage.
        stage: String,
        /// The offer.
        offer: String,
        /// The run.
        run_id: RunId,
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
    /// A shard's answer to a `search`: its matches (at most the limit) and
    /// how many there are.
    SearchResult {
        /// The operation id.
        op: String,
        /// The shard's partition.
        partition: u32,
        /// Items matching on the shard.
        total: u64,
        /// The first of them, in walk order (tasks, stage slots, process keys).
        matches: Vec<crate::ops::Match>,
    },
    /// A dry-run recovery's count on one shard.
    RecoveryCounted {
        /// The operation id.
        op: String,
        /// The shard's partition.
        partition: u32,
        /// Items a recovery would restart.
        total: u64,
    },
    /// Progress of a recovery on one shard, after each chunk.
    RecoveryProgress {
        /// The operation id.
        op: String,
        /// The shard's partition.
        partition: u32,
        /// Items restarted so far.
        done: u64,
        /// Items that could be restarted when it started.
        total: u64,
        /// No more progress comes: the shard is walked, or it was cancelled.
        finished: bool,
        /// Stopped by `cancel_operation`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cancelled: bool,
    },
    /// A recovery restarted one item: a task or stage slot queued in its
    /// low-priority lane, a process instance's step queued in the job's
    /// low lane (or a new instance launched: `process_started` follows).
    Recovered {
        /// The item (for a process: the instance recovered and its job).
        #[serde(flatten)]
        subject: Subject,
        /// `op:<id>`.
        source: String,
        /// `from_start`, `from_step` or `retry`.
        mode: String,
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
}

impl Event {
    /// The event's name on the wire and in `simulate` (`run_timed_out`).
    pub fn name(&self) -> &'static str {
        self.into()
    }

    /// What a run-lifecycle event is about.
    pub fn subject(&self) -> Option<&Subject> {
        match self {
            Event::ResultRejected { subject, .. }
            | Event::RunTimedOut { subject, .. }
            | Event::RunFailed { subject, .. }
            | Event::Parked { subject, .. }
            | Event::Dead { subject, .. }
            | Event::CommandRejected { subject, .. }
            | Event::ProcessStarted { subject, .. }
            | Event::ProcessSucceeded { subject }
            | Event::ProcessFailed { subject, .. }
            | Event::ProcessCancelled { subject, .. }
            | Event::ProcessTimedOut { subject }
            | Event::ProcessIdle { subject, .. }
            | Event::LaunchRejected { subject, .. }
            | Event::LaunchQueued { subject }
            | Event::DeadlineExceeded { subject, .. }
            | Event::Recovered { subject, .. } => Some(subject),
            _ => None,
        }
    }

    /// The event's key on `reactor.events`: the task id, the offer id of a
    /// stage event (the stage of a rescan), the business key of a process
    /// event.
    pub fn key(&self) -> &str {
        if let Some(subject) = self.subject() {
            return subject.key();
        }
        match self {
            Event::CtlMovedBack { task, .. } | Event::SlaMissed { task, .. } => task,
            Event::StaleVersion { offer, .. }
            | Event::PredicateError { offer, .. }
            | Event::PingPong { offer, .. }
            | Event::StageState { offer, .. } => offer,
            Event::RescanProgress { stage, .. } => stage,
            Event::SearchResult { op, .. }
            | Event::RecoveryCounted { op, .. }
            | Event::RecoveryProgress { op, .. } => op,
            _ => "",
        }
    }

    /// The task the event is about, if it is a task event.
    pub fn task(&self) -> Option<&str> {
        match self {
            Event::CtlMovedBack { task, .. } | Event::SlaMissed { task, .. } => Some(task),
            _ => match self.subject() {
                Some(Subject::Task { task }) => Some(task),
                _ => None,
            },
        }
    }
}
