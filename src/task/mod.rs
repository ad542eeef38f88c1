//! Reactive tasks: their states, their durable record and their pool queues.
//! The transitions themselves live in the engine, which owns every task of a
//! shard and the CTL table they are evaluated against.

mod queue;

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::ctl::ParamValues;
use crate::run::RunSlot;

pub use queue::PoolQueue;

/// Where a task is in its lifecycle: the shared run phase (tasks are the
/// one target that uses `paused`). Names double as metric labels.
pub type TaskState = crate::run::Phase;

/// A pool slot held for a higher-priority task waiting on produced data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// The hold ends at the latest then (`hold_max` after it began).
    pub until: Timestamp,
    /// Every producer has finished successfully; the hold ends when the
    /// waiting task is next evaluated on a change of its parameters.
    pub awaiting_data: bool,
}

/// Which parameter list of a task record a value belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueList {
    /// [`TaskRecord::snapshot`].
    Snapshot,
    /// [`TaskRecord::last_seen`].
    LastSeen,
}

/// A parameter value of a task record read in place: its name lies in the
/// record's bytes at `name` (checked to be UTF-8 as it was read). A restore
/// only looks names up: read in place, none is copied, where a name per
/// value was allocated, looked up and freed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InPlaceValue {
    /// The list it belongs to.
    pub list: ValueList,
    /// Where its name lies in the record's bytes.
    pub name: std::ops::Range<usize>,
    /// The value.
    pub value: Timestamp,
}

/// A task record's parameter values read in place: the record's bytes and
/// where each value's name lies in them (none: its lists hold them).
#[derive(Debug, Clone, Copy, Default)]
pub struct InPlace<'a> {
    /// The record's bytes.
    pub bytes: &'a [u8],
    /// Its parameter values, in the order read.
    pub values: &'a [InPlaceValue],
}

/// A task's runtime state as written to the changelog (parameters by name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TaskRecord {
    /// The run lifecycle: phase (the task's state), counters, run in
    /// flight, wake, last error.
    #[serde(flatten)]
    pub slot: RunSlot,
    /// When it entered the state.
    pub since: Option<Timestamp>,
    /// When it was queued (queue order after priority).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_at: Option<Timestamp>,
    /// Parameter values read at the current run's dispatch.
    #[serde(default, skip_serializing_if = "ParamValues::is_empty")]
    pub snapshot: ParamValues,
    /// Parameter values recorded at the last success.
    #[serde(default, skip_serializing_if = "ParamValues::is_empty")]
    pub last_seen: ParamValues,
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
    /// Launched (run now) with these parameters; the trigger is not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<BTreeMap<String, String>>,
    /// A launch waiting for the run in flight to end (`conflict = "queue"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub again: Option<BTreeMap<String, String>>,
    /// When the cron `schedule` next fires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron_at: Option<Timestamp>,
    /// What caused the current run: `op:ID` for a recovery (its runs wait
    /// in the pool's low-priority lane); cleared when it succeeds or dies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}
