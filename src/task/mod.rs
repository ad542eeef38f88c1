//! Reactive tasks: their states, their durable record and their pool queues.
//! The transitions themselves live in the engine, which owns every task of a
//! shard and the CTL table they are evaluated against.

mod queue;

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::run::Run;

pub use queue::PoolQueue;

/// Where a task is in its lifecycle. Names double as metric labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Waiting for its trigger; evaluated when one of its parameters changes.
    #[default]
    Idle,
    /// Trigger true; waiting in its pool's queue for a slot.
    Queued,
    /// A run is dispatched and has not finished.
    Running,
    /// A run failed; retried when the backoff ends.
    Backoff,
    /// Attempts used up; parked for an archive tier, then one more attempt.
    Parked,
    /// The attempt after the last tier failed; waits for an operator.
    Dead,
    /// Stopped by an operator; resumes on command.
    Paused,
}

impl TaskState {
    /// Every state, for metrics.
    pub const ALL: [TaskState; 7] = [
        TaskState::Idle,
        TaskState::Queued,
        TaskState::Running,
        TaskState::Backoff,
        TaskState::Parked,
        TaskState::Dead,
        TaskState::Paused,
    ];

    /// Metric label and log field.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Idle => "idle",
            TaskState::Queued => "queued",
            TaskState::Running => "running",
            TaskState::Backoff => "backoff",
            TaskState::Parked => "parked",
            TaskState::Dead => "dead",
            TaskState::Paused => "paused",
        }
    }
}

/// A pool slot held for a higher-priority task waiting on produced data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// The hold ends at the latest then (`hold_max` after it began).
    pub until: Timestamp,
    /// Every producer has finished successfully; the hold ends when the
    /// waiting task is next evaluated on a change of its parameters.
    pub awaiting_data: bool,
}

/// A task's runtime state as written to the changelog (parameters by name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TaskRecord {
    /// Lifecycle state.
    pub state: TaskState,
    /// When it entered the state.
    pub since: Option<Timestamp>,
    /// When it was queued (queue order after priority).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_at: Option<Timestamp>,
    /// End of a backoff or park.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_at: Option<Timestamp>,
    /// Consecutive failed attempts since the last success.
    #[serde(default)]
    pub failures: u32,
    /// Runs dispatched so far (the last run id's number).
    #[serde(default)]
    pub run_seq: u64,
    /// Passes issued so far (the last pass token).
    #[serde(default)]
    pub pass_seq: u64,
    /// The run in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<Run>,
    /// Parameter values read at the current run's dispatch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub snapshot: BTreeMap<String, Timestamp>,
    /// Parameter values recorded at the last success.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub last_seen: BTreeMap<String, Timestamp>,
    /// Time of the last success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_success: Option<Timestamp>,
    /// When `sla_missed` is due unless a run succeeds first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sla_due: Option<Timestamp>,
    /// A slot held for this task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<Hold>,
    /// Pause once the current run ends.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pause_requested: bool,
    /// Last failure's error text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}
