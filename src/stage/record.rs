//! The durable state of offers and rescans: what the changelog stores
//! (`offer/<id>`, `rescan/<stage>`) and a restore reads back.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::Lane;
use crate::offer::SharedBody;
use crate::run::RunSlot;

/// One offer with every stage's slot on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfferRecord {
    /// Bumped by every committed change (body or any stage state).
    pub version: u64,
    /// The current body.
    pub body: SharedBody,
    /// When the current version was committed.
    pub updated_at: Timestamp,
    /// Stage name → its slot; stages with a default slot are left out.
    #[serde(default, skip_serializing_if = "Slots::is_empty")]
    pub stages: Slots,
    /// The ping-pong guard's counters.
    #[serde(default, skip_serializing_if = "Guard::is_default")]
    pub guard: Guard,
    /// Deleted at `updated_at`; kept until the longest stage timeout has
    /// passed so a re-created offer continues the version and run counters.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

/// Stage name → slot, in name order (a record is built at every step of an
/// offer and has a few stages).
pub type Slots = crate::name_map::NameMap<SlotRecord>;

/// A stage's state for one offer: shared by its slot and everything that
/// carries it at one version (run commands, offer states, records), so
/// nothing copies a state to send or store it; a result replaces it.
pub type State = std::sync::Arc<serde_json::Value>;

/// A stage state as a slot keeps it: shared, sized to what it holds (see
/// [`crate::offer::share`]).
pub fn state(value: serde_json::Value) -> State {
    State::new(crate::offer::compact(value))
}

/// A stage's slot on one offer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotRecord {
    /// The run lifecycle: phase, counters, run in flight, wake, last error.
    #[serde(flatten)]
    pub slot: RunSlot,
    /// The stage's own state for the offer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<State>,
    /// When the stage wakes for the offer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer: Option<Timestamp>,
    /// The lane while queued.
    #[serde(default)]
    pub lane: Lane,
    /// When it was queued (queue order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_at: Option<Timestamp>,
    /// The offer version the run in flight was dispatched with.
    #[serde(default)]
    pub run_version: u64,
    /// What caused the current run: `op:ID` for a recovery; cleared when it
    /// succeeds or dies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl SlotRecord {
    /// Whether the slot holds nothing worth storing.
    pub fn is_default(&self) -> bool {
        *self == SlotRecord::default()
    }
}

/// The ping-pong guard of one offer: stage runs counted in a fixed window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guard {
    /// Start of the current window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_start: Option<Timestamp>,
    /// Stage runs dispatched in the window.
    #[serde(default)]
    pub runs: u32,
    /// Stage runs are parked until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parked_until: Option<Timestamp>,
}

impl Guard {
    /// Whether the guard holds nothing worth storing.
    pub fn is_default(&self) -> bool {
        *self == Guard::default()
    }
}

/// A stage rescan in progress over one shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RescanRecord {
    /// The extra CEL filter, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// The last offer id checked (offers are scanned in id order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Offers checked so far.
    pub checked: u64,
    /// Offers queued so far.
    pub queued: u64,
    /// Offers in the shard when the rescan started.
    pub total: u64,
    /// Expressions that failed (`when` counted as true, the filter as false).
    pub errors: u64,
    /// When the rescan started.
    pub started_at: Timestamp,
}
