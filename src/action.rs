//! What the engine decides, as data: run commands to send, events to
//! publish and changelog records to write. The shell turns each into a
//! Kafka record of one transaction; the simulator prints them.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::changelog::ChangelogRecord;
use crate::duration::Duration;
use crate::run::Rejection;

/// One decision of [`crate::engine::Engine`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Send a run command to a worker topic.
    Run(RunCommand),
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

/// An audit or alert event; every event names its task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
}

impl Event {
    /// The task the event is about: its key on `reactor.events`.
    pub fn task(&self) -> &str {
        match self {
            Event::CtlMovedBack { task, .. }
            | Event::ResultRejected { task, .. }
            | Event::RunTimedOut { task, .. }
            | Event::RunFailed { task, .. }
            | Event::Parked { task, .. }
            | Event::Dead { task, .. }
            | Event::SlaMissed { task, .. }
            | Event::CommandRejected { task, .. } => task,
        }
    }
}
