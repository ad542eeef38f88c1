//! Operations over the shard's stage slots: each stage's slot on each offer
//! is one item (name: the stage, key: the offer id), walked by offer id,
//! then stage order; a recovery queues a dead or waiting slot in the
//! stage's rescan lane, the low-priority lane live changes always pass.

use std::ops::Bound;

use jiff::Timestamp;

use super::Offers;
use crate::action::{Event, Subject};
use crate::engine::ops::{Flow, Visit};
use crate::engine::Error;
use crate::ops::{Criteria, Item, Kind, Mode};
use crate::stage::{Lane, Phase, SlotRecord};

/// A slot a recovery can restart: its run failed and it waits (a backoff,
/// a tier, or for an operator).
fn waiting(phase: Phase) -> bool {
    matches!(phase, Phase::Dead | Phase::Backoff | Phase::Parked)
}

/// When a slot entered its state, as far as the slot knows.
fn since(slot: &SlotRecord) -> Option<Timestamp> {
    match slot.slot.phase {
        Phase::Running => slot.slot.run().map(|r| r.dispatched_at),
        Phase::Queued => slot.queued_at(),
        _ => slot.slot.failed_at(),
    }
}

impl Offers {
    /// Calls `f` with every stage slot after `after` (`(offer, stage)`), by
    /// offer id then stage order, until it says stop; returns whether it did.
    pub(in crate::engine) fn op_walk(
        &self,
        criteria: &Criteria,
        mode: Option<&Mode>,
        after: Option<(&str, &str)>,
        f: &mut Visit<'_>,
    ) -> bool {
        if !criteria.admits(Kind::Stage) {
            return false;
        }
        let only = match criteria.exact_name() {
            Some(name) => match self.by_name.get(name) {
                Some(&s) => Some(s),
                None => return false,
            },
            None => None,
        };
        let (from, past) = match after {
            Some((offer, stage)) => (
                Bound::Included(offer),
                Some((offer, self.by_name.get(stage).copied())),
            ),
            None => (Bound::Unbounded, None),
        };
        let recovers = mode.is_some_and(|m| !matches!(m, Mode::FromStep(_)));
        for (id, kept) in self.map.range(from) {
            if kept.deleted() {
                continue;
            }
            // A kept record reads back (see `kept.rs`); one that does not
            // fails the step that touches it.
            let Ok(rt) = self.full(id, kept) else {
                continue;
            };
            for s in self.stage_ids() {
                if only.is_some_and(|o| o != s) {
                    continue;
                }
                // On the offer the walk stopped at, only the stages after.
                if let Some((offer, stage)) = past {
                    if offer == id && stage.is_none_or(|p| s <= p) {
                        continue;
                    }
                }
                let Some(slot) = rt.slot(s) else { continue };
                let Some(st) = self.stages.get(s as usize) else {
                    continue;
                };
                let item = Item {
                    kind: Kind::Stage,
                    name: &st.def.name,
                    key: id,
                    state: slot.slot.phase.as_str(),
                    error: slot.slot.last_error(),
                    at: since(slot),
                    step: None,
                    instance: None,
                    step_index: None,
                    run_seq: slot.slot.run_seq,
                    attempt: slot
                        .slot
                        .run()
                        .map(|r| r.attempt)
                        .or((slot.slot.failures > 0).then_some(slot.slot.failures)),
                    recoverable: recovers && waiting(slot.slot.phase),
                };
                if f(&item) == Flow::Stop {
                    return true;
                }
            }
        }
        false
    }

    /// Restarts `stage` on `offer` for a recovery: queued now in the
    /// stage's rescan lane with a new run id; `from_start` resets its
    /// failure count, `retry` keeps it.
    pub(in crate::engine) fn recover(
        &mut self,
        offer: &str,
        stage: &str,
        mode: &Mode,
        source: &str,
        now: Timestamp,
    ) -> Result<bool, Error> {
        let Some(&s) = self.by_name.get(stage) else {
            return Ok(false);
        };
        self.thaw(offer)?;
        if matches!(mode, Mode::FromStep(_))
            || !self
                .map
                .get(offer)
                .filter(|rt| !rt.deleted)
                .and_then(|rt| rt.slot(s))
                .is_some_and(|slot| waiting(slot.slot.phase))
        {
            return Ok(false);
        }
        let (slot, mut alarms) = self.slot_mut(s, offer)?;
        slot.slot.set_wake(None, &mut alarms);
        if *mode == Mode::FromStart {
            slot.slot.failures = 0;
        }
        slot.slot.phase = Phase::Idle;
        slot.set_source(Some(source.to_string()));
        self.mark(offer);
        self.emit(Event::Recovered {
            subject: Subject::stage(stage, offer),
            source: source.to_string(),
            mode: mode.as_str().to_string(),
        });
        self.enqueue(offer, s, Lane::Rescan, now)?;
        Ok(true)
    }
}
