//! The durable state of offers and rescans: what the changelog stores
//! (`offer/<id>`, `rescan/<stage>`) and a restore reads back.

use std::collections::BTreeMap;

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

/// Stage name → slot, in name order: a map, kept as a list because a
/// record is built at every step of an offer and has a few stages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Slots(Vec<(String, SlotRecord)>);

impl Slots {
    /// The slot of `stage`.
    pub fn get(&self, stage: &str) -> Option<&SlotRecord> {
        self.0
            .binary_search_by(|(name, _)| name.as_str().cmp(stage))
            .ok()
            .and_then(|i| self.0.get(i))
            .map(|(_, slot)| slot)
    }

    /// Whether no stage has a slot.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The slots, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &SlotRecord)> {
        self.0.iter().map(|(name, slot)| (name, slot))
    }
}

/// In name order; of two slots of one stage, the last.
impl FromIterator<(String, SlotRecord)> for Slots {
    fn from_iter<I: IntoIterator<Item = (String, SlotRecord)>>(iter: I) -> Slots {
        iter.into_iter().collect::<Vec<_>>().into()
    }
}

/// In name order; of two slots of one stage, the last.
impl From<Vec<(String, SlotRecord)>> for Slots {
    fn from(mut slots: Vec<(String, SlotRecord)>) -> Slots {
        slots.reverse();
        slots.sort_by(|a, b| a.0.cmp(&b.0));
        slots.dedup_by(|later, first| later.0 == first.0);
        Slots(slots)
    }
}

impl Serialize for Slots {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Slots {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Slots, D::Error> {
        let map = BTreeMap::<String, SlotRecord>::deserialize(deserializer)?;
        Ok(Slots(map.into_iter().collect()))
    }
}

/// A stage's state for one offer: shared by its slot and everything that
/// carries it at one version (run commands, offer states, records), so
/// nothing copies a state to send or store it; a result replaces it.
pub type State = std::sync::Arc<serde_json::Value>;

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

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(failures: u32) -> SlotRecord {
        SlotRecord {
            slot: RunSlot {
                failures,
                ..RunSlot::default()
            },
            ..SlotRecord::default()
        }
    }

    #[test]
    fn slots_are_in_name_order_the_last_of_a_name_kept_and_serialized_as_a_map() {
        let slots: Slots = [
            ("price".to_string(), slot(1)),
            ("expire".to_string(), slot(2)),
            ("price".to_string(), slot(3)),
        ]
        .into_iter()
        .collect();
        let names: Vec<_> = slots
            .iter()
            .map(|(name, s)| (name.as_str(), s.slot.failures))
            .collect();
        assert_eq!(names, [("expire", 2), ("price", 3)]);
        assert_eq!(slots.get("price").map(|s| s.slot.failures), Some(3));
        assert!(slots.get("video").is_none());
        let json = serde_json::to_value(&slots).unwrap();
        assert_eq!(json["price"]["failures"], 3);
        let back: Slots = serde_json::from_value(json).unwrap();
        assert_eq!(back, slots);
    }
}
