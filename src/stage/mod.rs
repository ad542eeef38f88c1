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
mod vars;

use serde::{Deserialize, Serialize};

pub use record::{state, Guard, OfferRecord, RescanRecord, SlotFields, SlotRecord, Slots, State};

/// Where a stage is with one offer: the shared run phase (stages never
/// use `paused`). The names are metric labels and log fields.
pub use crate::run::Phase;

/// The two lanes of a stage queue.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
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
        self.into()
    }
}
