//! Rebuilding the offer half of a shard from its changelog records: the
//! records are the state; queues, running counts and timers are derived.

use jiff::Timestamp;

use super::{OfferTimer, Offers, Rescan, SlotAlarms};
use crate::changelog::{ChangelogRecord, Store};
use crate::stage::expr::Expr;
use crate::stage::{OfferRecord, Phase, RescanRecord};

impl Offers {
    /// Loads one offer record (`None`: a tombstone), decoded from `bytes`
    /// when they are at hand. Slots of stages no longer configured are
    /// dropped. An offer nothing works on is kept as its record, as it was
    /// before the restore: those bytes, or the record encoded again.
    pub(in crate::engine) fn restore_offer(
        &mut self,
        id: String,
        record: Option<OfferRecord>,
        bytes: Option<Vec<u8>>,
    ) {
        let Some(record) = record else {
            self.map.remove(&id);
            return;
        };
        let rt = self.in_full(record);
        self.keep_restored(&id, rt, bytes);
    }

    /// Loads one offer record as written (its protobuf bytes): kept as
    /// those bytes when nothing works on the offer.
    pub(in crate::engine) fn restore_encoded(
        &mut self,
        id: &str,
        bytes: Vec<u8>,
    ) -> Result<(), crate::codec::DecodeError> {
        let rt = self.in_full(crate::codec::decode_offer_record(&bytes)?);
        self.keep_restored(id, rt, Some(bytes));
        Ok(())
    }

    /// Loads one rescan record (`None`: a tombstone).
    pub(in crate::engine) fn restore_rescan(
        &mut self,
        stage: String,
        record: Option<&RescanRecord>,
    ) {
        let Some(&s) = self.by_name.get(&stage) else {
            if record.is_some() {
                self.orphan_rescans.push(stage);
            } else {
                self.orphan_rescans.retain(|k| *k != stage);
            }
            return;
        };
        if let Some(st) = self.stages.get_mut(s as usize) {
            st.rescan = record.map(|r| Rescan {
                record: r.clone(),
                // Compiled when it was accepted; a filter that no longer compiles
                // (a newer CEL) is dropped rather than blocking the restore.
                filter: r.filter.as_deref().and_then(|f| Expr::compile(f).ok()),
            });
        }
    }

    /// Derives queues, running counts and timers from the records.
    pub(in crate::engine) fn rebuild_derived(&mut self) {
        for st in &mut self.stages {
            st.queue = Default::default();
            st.running = 0;
            st.rate_armed = None;
        }
        self.timers = Default::default();
        for (id, kept) in self.map.iter() {
            // A kept record reads back (see `kept.rs`); one that does not
            // fails the step that touches it.
            let Ok(rt) = self.full(id, kept) else {
                continue;
            };
            let blocked = rt.blocked();
            for (s, slot) in &rt.slots {
                let Some(st) = self.stages.get_mut(*s as usize) else {
                    continue;
                };
                match slot.slot.phase {
                    Phase::Queued if !blocked => {
                        st.queue
                            .push(slot.lane, slot.queued_at().unwrap_or(Timestamp::MIN), id)
                    }
                    Phase::Running => st.running += 1,
                    _ => {}
                }
                slot.slot.rearm(&mut SlotAlarms {
                    timers: &mut self.timers,
                    stage: *s,
                    offer: id,
                });
                if let Some(at) = slot.timer() {
                    self.timers.arm(at, OfferTimer::Stage(*s, id.to_string()));
                }
            }
            if let Some(until) = rt.guard.parked_until {
                self.timers.arm(until, OfferTimer::Unpark(id.to_string()));
            }
            if rt.deleted {
                let at = crate::run::add(rt.updated_at, self.grave_time.get());
                self.timers.arm(at, OfferTimer::Bury(id.to_string()));
            }
        }
    }

    /// Starts the offer half at `now`: tombstones rescans of removed stages,
    /// continues rescans in progress and dispatches what the queues allow.
    pub(in crate::engine) fn start(
        &mut self,
        now: Timestamp,
        out: &mut Vec<crate::action::Action>,
    ) {
        self.orphan_rescans.sort();
        self.orphan_rescans.dedup();
        for key in std::mem::take(&mut self.orphan_rescans) {
            out.push(crate::action::Action::Changelog(ChangelogRecord {
                store: Store::Rescan,
                key: key.into(),
                value: None,
            }));
        }
        for (s, st) in (0..).zip(&self.stages) {
            if st.rescan.is_some() {
                self.timers.arm(now, OfferTimer::Rescan(s));
            }
            self.pending.insert(s);
        }
    }
}
