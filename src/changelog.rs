//! Changelog records: every shard state mutation, as the key/value pairs the
//! runtime writes to the compacted `reactor.changelog` topic. Restoring a
//! shard means replaying them in order, last write wins.

use serde::{Deserialize, Serialize};

use crate::process::{KeyRecord, ScheduleRecord};
use crate::stage::{OfferRecord, RescanRecord};
use crate::task::TaskRecord;

/// A state store inside a shard. Its name (`task`) prefixes its changelog
/// keys (`task/orders_daily`) and labels metrics and logs.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Store {
    /// Task runtime state, keyed by task id.
    Task,
    /// An offer with its stage slots, keyed by offer id.
    Offer,
    /// A stage rescan in progress, keyed by stage name.
    Rescan,
    /// A process key: its context, active instance, waiting launches and
    /// last outcome, keyed `PROCESS/KEY`.
    Process,
    /// A process schedule's state, keyed by process name.
    Schedule,
    /// Instances a process started on the shard (the `#N` of instance ids),
    /// keyed by process name.
    Seq,
    /// A recovery in progress, keyed by operation id.
    Recovery,
}

impl Store {
    /// Name used in changelog keys (`store/key`), metrics and logs.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The store and the key within it of a changelog record's Kafka key
    /// (`task/orders_daily`); `None` for a key of no store.
    pub fn split_key(key: &[u8]) -> Option<(Store, &[u8])> {
        let at = key.iter().position(|b| *b == b'/')?;
        let (prefix, rest) = (key.get(..at)?, key.get(at + 1..)?);
        let store = std::str::from_utf8(prefix).ok()?.parse().ok()?;
        Some((store, rest))
    }
}

/// A stored value.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    /// A task's runtime state.
    Task(Box<TaskRecord>),
    /// A task's runtime state as its shard writes it: the record's protobuf
    /// bytes, written straight from the task (a `TaskRecord` of owned
    /// copies was most of the work of a step that fires a task). Shown
    /// and restored as the record it decodes to.
    #[serde(serialize_with = "task_encoded")]
    TaskEncoded(Vec<u8>),
    /// An offer and its stage slots.
    Offer(Box<OfferRecord>),
    /// An offer nothing works on, as its shard writes it: the record's
    /// protobuf bytes, which the shard then keeps as the offer until a step
    /// touches it. Shown and restored as the record it decodes to.
    #[serde(serialize_with = "offer_encoded")]
    OfferEncoded(Vec<u8>),
    /// A rescan in progress.
    Rescan(RescanRecord),
    /// A process key (shared with the shard's map until the record is
    /// written: the map clones it only if it changes again first).
    Process(std::sync::Arc<KeyRecord>),
    /// A process schedule.
    Schedule(ScheduleRecord),
    /// A process's instance counter.
    Seq(u64),
    /// A recovery in progress.
    Recovery(Box<crate::ops::RecoveryRecord>),
}

/// One changelog entry: a new value for `store/key`, or a tombstone.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangelogRecord {
    /// The store.
    pub store: Store,
    /// Key within the store: inline up to 24 bytes (most task ids, offer
    /// ids, process keys), so that the record every step writes costs no
    /// allocation for its key, nor does each record a restore reads.
    pub key: crate::name_map::Name,
    /// New value; `None` deletes the key.
    pub value: Option<Value>,
}

/// Serializes an encoded offer record as the record it holds.
fn offer_encoded<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    match crate::codec::decode_offer_record(bytes) {
        Ok(record) => record.serialize(s),
        Err(e) => Err(serde::ser::Error::custom(e)),
    }
}

/// Serializes an encoded task record as the record it holds.
fn task_encoded<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    match crate::codec::decode_task_record(bytes) {
        Ok(record) => record.serialize(s),
        Err(e) => Err(serde::ser::Error::custom(e)),
    }
}
