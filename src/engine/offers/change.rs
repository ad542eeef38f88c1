//! Committed offer changes: external ones from `offer.changes`, and the
//! reaction of the stages to every committed body change (watch, when, timer).

use jiff::Timestamp;

use super::{OfferRt, Offers};
use crate::action::{Action, Event, OfferState};
use crate::engine::Error;
use crate::offer::{self, Body, Change, OfferChange, SharedBody};
use crate::run::add;
use crate::stage::expr::Scope;
use crate::stage::Lane;

/// `cause` of an external change.
pub(super) const EXTERNAL: &str = "external";

impl Offers {
    /// Applies a change from outside. A change that leaves the body as it
    /// is commits nothing.
    pub(in crate::engine) fn on_change(
        &mut self,
        change: OfferChange,
        now: Timestamp,
    ) -> Result<(), Error> {
        let id = change.offer_id;
        self.thaw(&id)?;
        let old = self.live(&id).map(|rt| &*rt.body);
        let is_new = old.is_none();
        let (body, changed) = match change.change {
            Change::Deleted => return self.delete(&id, now),
            Change::Body(body) => {
                let changed = offer::changed_fields(old, &body);
                (offer::share(body), changed)
            }
            Change::Patch(patch) => {
                let empty = Body::new();
                let body = offer::patched(old.unwrap_or(&empty), &patch);
                let changed = match old {
                    Some(old) => offer::patch_changed(old, &body, &patch),
                    None => offer::changed_fields(None, &body),
                };
                (SharedBody::new(body), changed)
            }
        };
        if !is_new && changed.is_empty() {
            return Ok(());
        }
        let rt = self.map.get_or_insert_with(&id, || OfferRt {
            version: 0,
            body: SharedBody::default(),
            updated_at: now,
            slots: Vec::new(),
            guard: Default::default(),
            deleted: false,
        })?;
        if rt.deleted {
            // Re-created: the version and run counters go on from the grave.
            rt.deleted = false;
            self.timers.cancel(
                add(rt.updated_at, self.grave_time.get()),
                super::OfferTimer::Bury(id.clone()),
            );
        }
        rt.body = body;
        self.commit(&id, EXTERNAL.to_string(), changed.clone(), now)?;
        self.react(&id, &changed, is_new, None, now)
    }

    /// Bumps the version of a changed offer and publishes its state.
    pub(super) fn commit(
        &mut self,
        id: &str,
        cause: String,
        changed: Vec<String>,
        now: Timestamp,
    ) -> Result<(), Error> {
        let rt = self.offer_mut(id)?;
        rt.version += 1;
        rt.updated_at = now;
        self.counters.committed += 1;
        let state = self.offer_state(id, cause, changed)?;
        self.out.push(Action::OfferState(state));
        self.mark(id);
        Ok(())
    }

    pub(super) fn offer_state(
        &self,
        id: &str,
        cause: String,
        changed: Vec<String>,
    ) -> Result<OfferState, Error> {
        let rt = self.offer(id)?;
        Ok(OfferState {
            offer: id.to_string(),
            version: rt.version,
            body: rt.body.clone(),
            cause,
            changed_fields: changed,
            states: rt
                .slots
                .iter()
                .filter_map(|(s, slot)| {
                    let state = slot.state.as_ref()?;
                    let name = &self.stages.get(*s as usize)?.def.name;
                    Some((name.clone(), state.clone()))
                })
                .collect(),
            deleted: false,
        })
    }

    /// The body of the offer if it exists (not deleted), read back in full
    /// for the step about to change it (which then finds it so).
    pub(in crate::engine) fn body(&mut self, id: &str) -> Result<Option<SharedBody>, Error> {
        self.thaw(id)?;
        Ok(self.live(id).map(|rt| rt.body.clone()))
    }

    /// The offer if it exists (not deleted).
    pub(super) fn live(&self, id: &str) -> Option<&OfferRt> {
        self.map.get(id).filter(|rt| !rt.deleted)
    }

    /// Deletes an offer: its queue entries, timers and run are cancelled (a
    /// late result is rejected), and a final `OfferState` says so. The
    /// record stays as a grave until the longest stage timeout has passed.
    fn delete(&mut self, id: &str, now: Timestamp) -> Result<(), Error> {
        let Some(rt) = self.live(id) else {
            return Ok(());
        };
        // Every field is removed; `changed_fields` is sorted like any other.
        let removed = offer::changed_fields(Some(&rt.body), &Body::new());
        let mut last = self.offer_state(id, EXTERNAL.to_string(), removed)?;
        last.version += 1;
        last.body = SharedBody::default();
        last.states.clear();
        last.deleted = true;
        self.hide_queued(id);
        let grave_time = self.grave_time;
        let rt = self.offer_mut(id)?;
        let old = std::mem::replace(
            rt,
            OfferRt {
                version: last.version,
                body: SharedBody::default(),
                updated_at: now,
                // Only the run counters survive, so run ids and passes never repeat.
                slots: rt
                    .slots
                    .iter()
                    .map(|(s, slot)| {
                        let seqs = crate::stage::SlotRecord::from(crate::stage::SlotFields {
                            slot: crate::run::RunSlot::from(crate::run::SlotParts {
                                run_seq: slot.slot.run_seq,
                                pass_seq: slot.slot.pass_seq,
                                ..Default::default()
                            }),
                            ..Default::default()
                        });
                        (*s, seqs)
                    })
                    .collect(),
                guard: Default::default(),
                deleted: true,
            },
        );
        self.timers.arm(
            add(now, grave_time.get()),
            super::OfferTimer::Bury(id.to_string()),
        );
        let rt = old;
        for (s, slot) in &rt.slots {
            let key = id.to_string();
            if let Some(at) = slot.timer() {
                self.timers
                    .cancel(at, super::OfferTimer::Stage(*s, key.clone()));
            }
            if let Some(at) = slot.slot.wake_at() {
                self.timers
                    .cancel(at, super::OfferTimer::Wake(*s, key.clone()));
            }
            if let Some(run) = slot.slot.current() {
                self.timers
                    .cancel(run.deadline, super::OfferTimer::Run(*s, key));
                let st = self.stage_mut(*s)?;
                st.running = st.running.saturating_sub(1);
                self.pending.insert(*s);
            }
        }
        if let Some(until) = rt.guard.parked_until {
            self.timers
                .cancel(until, super::OfferTimer::Unpark(id.to_string()));
        }
        self.counters.committed += 1;
        self.out.push(Action::OfferState(last));
        self.mark(id);
        Ok(())
    }

    /// Asks every stage (but `except`, the one whose result made the change)
    /// about a committed body change: stages watching none of `changed` are
    /// not asked (a new offer changed every field); `when` true (or failing)
    /// queues the offer; `timer`, if declared, replaces the stage's timer.
    pub(super) fn react(
        &mut self,
        id: &str,
        changed: &[String],
        is_new: bool,
        except: Option<u16>,
        now: Timestamp,
    ) -> Result<(), Error> {
        let Some(rt) = self.live(id) else {
            return Ok(());
        };
        let mut decisions = Vec::new();
        // The scope (which borrows the offer) is dropped before the
        // decisions change the shard.
        {
            // Variables are converted for CEL only as expressions read them.
            let scope = Scope::new(id, rt.version, rt.updated_at, &rt.body, now);
            for (s, st) in self.stage_ids().zip(&self.stages) {
                let def = &st.def;
                if Some(s) == except {
                    continue;
                }
                if !is_new
                    && !def.watch.is_empty()
                    && !def.watch.iter().any(|w| changed.contains(w))
                {
                    continue;
                }
                let state = rt.state(s);
                let when = def.when.eval_bool(&scope, state);
                let timer = def.timer.as_ref().map(|t| t.eval_time(&scope, state));
                decisions.push((s, when, timer));
            }
        }
        for (s, when, timer) in decisions {
            self.counters.evaluated += 1;
            let queue = match when {
                Ok(b) => b,
                Err(e) => {
                    self.predicate_error(id, s, "when", e.to_string())?;
                    true
                }
            };
            if queue {
                self.enqueue(id, s, Lane::Live, now)?;
            }
            match timer {
                None => {}
                Some(Ok(at)) => self.set_timer(id, s, at, now),
                Some(Err(e)) => self.predicate_error(id, s, "timer", e.to_string())?,
            }
        }
        Ok(())
    }

    pub(super) fn predicate_error(
        &mut self,
        id: &str,
        s: u16,
        field: &str,
        error: String,
    ) -> Result<(), Error> {
        self.counters.predicate_errors += 1;
        let stage = self.stage(s)?.def.name.clone();
        self.emit(Event::PredicateError {
            stage,
            offer: id.to_string(),
            field: field.to_string(),
            error,
        });
        Ok(())
    }
}
