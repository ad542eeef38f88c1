//! The durable state of offers and rescans: what the changelog stores
//! (`offer/<id>`, `rescan/<stage>`) and a restore reads back.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::Lane;
use crate::offer::SharedBody;
use crate::run::RunSlot;
use crate::stamp::{self, Stamp};

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
#[serde(from = "SlotFields", into = "SlotFields")]
pub struct SlotRecord {
    /// The run lifecycle: phase, counters, run in flight, wake, last error.
    pub slot: RunSlot,
    /// The stage's own state for the offer.
    pub state: Option<State>,
    /// The lane while queued.
    pub lane: Lane,
    /// The offer version the run in flight was dispatched with.
    pub run_version: u64,
    /// When it was queued (queue order); 12 bytes where an optional jiff
    /// timestamp takes 24.
    queued_at: Option<Stamp>,
    /// What a slot carries only while it waits for its timer or is run by
    /// a recovery, in one box absent otherwise: a shard keeps a slot per
    /// stage on every offer, most of them done.
    extra: Option<Box<SlotExtra>>,
}

/// The rarely set part of a [`SlotRecord`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct SlotExtra {
    timer: Option<Timestamp>,
    source: Option<String>,
}

impl SlotRecord {
    /// Whether the slot holds nothing worth storing.
    pub fn is_default(&self) -> bool {
        *self == SlotRecord::default()
    }

    /// When the stage wakes for the offer.
    pub fn timer(&self) -> Option<Timestamp> {
        self.extra.as_ref().and_then(|x| x.timer)
    }

    /// When it was queued (queue order).
    pub fn queued_at(&self) -> Option<Timestamp> {
        stamp::get(self.queued_at)
    }

    /// What caused the current run: `op:ID` for a recovery; cleared when it
    /// succeeds or dies.
    pub fn source(&self) -> Option<&str> {
        self.extra.as_ref().and_then(|x| x.source.as_deref())
    }

    /// Sets (or clears) the timer.
    pub fn set_timer(&mut self, at: Option<Timestamp>) {
        self.change(|x| x.timer = at);
    }

    /// Sets (or clears) the queue time.
    pub fn set_queued_at(&mut self, at: Option<Timestamp>) {
        self.queued_at = at.map(Stamp::from);
    }

    /// Sets (or clears) the source of the current run.
    pub fn set_source(&mut self, source: Option<String>) {
        self.change(|x| x.source = source);
    }

    /// Changes the rare part, boxed only while any of it is set (clearing
    /// what is not set allocates nothing).
    fn change(&mut self, f: impl FnOnce(&mut SlotExtra)) {
        match &mut self.extra {
            Some(extra) => {
                f(extra);
                if **extra == SlotExtra::default() {
                    self.extra = None;
                }
            }
            None => {
                let mut extra = SlotExtra::default();
                f(&mut extra);
                if extra != SlotExtra::default() {
                    self.extra = Some(Box::new(extra));
                }
            }
        }
    }
}

/// A [`SlotRecord`] field by field: how records and tests build one, and
/// its serde form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotFields {
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
    /// What caused the current run: `op:ID` for a recovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl From<SlotFields> for SlotRecord {
    fn from(f: SlotFields) -> SlotRecord {
        let mut slot = SlotRecord {
            slot: f.slot,
            state: f.state,
            lane: f.lane,
            run_version: f.run_version,
            queued_at: f.queued_at.map(Stamp::from),
            extra: None,
        };
        slot.set_timer(f.timer);
        slot.set_source(f.source);
        slot
    }
}

impl From<SlotRecord> for SlotFields {
    fn from(s: SlotRecord) -> SlotFields {
        let extra = s.extra.map(|x| *x).unwrap_or_default();
        SlotFields {
            slot: s.slot,
            state: s.state,
            timer: extra.timer,
            lane: s.lane,
            queued_at: stamp::get(s.queued_at),
            run_version: s.run_version,
            source: extra.source,
        }
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
