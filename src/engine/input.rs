//! Decoded inputs of a shard.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::ctl::ParamName;
use crate::run::Status;

/// One input of [`super::Engine::apply`].
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
}

impl Command {
    /// The task the command is about.
    pub fn task(&self) -> &str {
        match self {
            Command::Pause { task }
            | Command::Resume { task }
            | Command::SetLast { task, .. }
            | Command::ClearLast { task, .. } => task,
        }
    }
}
