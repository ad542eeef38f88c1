//! Offer stages (seed 001): what a stage's slot on an offer can be, the
//! durable records of offers and rescans, and the pure building blocks the
//! engine composes — compiled CEL expressions, the two-lane stage queue and
//! the per-partition limits.
//!
//! The state machine itself lives in [`crate::engine`], next to the tasks,
//! because one shard owns both.

pub mod expr;
pub mod limit;
pub mod queue;
pub mod record;

use serde::{Deserialize, Serialize};

pub use record::{Guard, OfferRecord, RescanRecord, SlotRecord};

/// Where a stage is with one offer. The names are metric labels and log fields.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Nothing to do until a watched change, a timer or a rescan.
    #[default]
    Idle,
    /// In the stage's queue (live or rescan lane), waiting for a slot.
    Queued,
    /// A run is dispatched; the offer runs no other stage meanwhile.
    Running,
    /// A run failed; it is retried when the backoff ends.
    Backoff,
    /// Attempts used up; parked for an archive tier, then one more attempt.
    Parked,
    /// The attempt after the last tier failed; waits for an operator.
    Dead,
}

impl Phase {
    /// Metric label and log field.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Queued => "queued",
            Phase::Running => "running",
            Phase::Backoff => "backoff",
            Phase::Parked => "parked",
            Phase::Dead => "dead",
        }
    }
}

/// The two lanes of a stage queue.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// Changes and timers: always served first.
    #[default]
    Live,
    /// A rescan's finds: served only when the live lane is empty.
    Rescan,
}

impl Lane {
    /// Metric label and log field.
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Live => "live",
            Lane::Rescan => "rescan",
        }
    }
}
