//! Changelog records: every shard state mutation, as the key/value pairs the
//! runtime writes to the compacted `reactor.changelog` topic. Restoring a
//! shard means replaying them in order, last write wins.

use serde::{Deserialize, Serialize};

use crate::task::TaskRecord;

/// A state store inside a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Store {
    /// Task runtime state, keyed by task id.
    Task,
}

impl Store {
    /// Name used in changelog keys (`store/key`), metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Store::Task => "task",
        }
    }
}

/// A stored value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// A task's runtime state.
    Task(Box<TaskRecord>),
}

/// One changelog entry: a new value for `store/key`, or a tombstone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangelogRecord {
    /// The store.
    pub store: Store,
    /// Key within the store.
    pub key: String,
    /// New value; `None` deletes the key.
    pub value: Option<Value>,
}
