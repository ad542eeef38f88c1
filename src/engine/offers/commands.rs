//! Operator commands on offers and stages: replacing a stage's state by
//! compare-and-set, ending a ping-pong park, and rescans.

use std::ops::Bound;

use jiff::Timestamp;

use super::{OfferTimer, Offers, Rescan, RESCAN_CHUNK};
use crate::action::{Event, Subject};
use crate::engine::input::Command;
use crate::engine::{bug, Error};
use crate::stage::expr::{Expr, Scope};
use crate::stage::{Lane, Phase, RescanRecord};

/// `cause` of a state replaced by an operator command.
const COMMAND: &str = "command";

impl Offers {
    pub(in crate::engine) fn on_command(
        &mut self,
        command: Command,
        now: Timestamp,
    ) -> Result<(), Error> {
        match command {
            Command::SetStageState {
                offer,
                stage,
                state,
                version,
            } => self.set_state(&offer, &stage, state, version, now),
            Command::Rescan { stage, when } => self.start_rescan(&stage, when.as_deref(), now),
            Command::UnparkOffer { offer } => self.unpark_command(&offer, now),
            _ => Err(bug("a command for another target reached the offers")),
        }
    }

    fn rejected(&mut self, stage: &str, offer: &str, reason: impl Into<String>) {
        self.emit(Event::CommandRejected {
            subject: Subject::stage(stage, offer),
            reason: reason.into(),
        });
    }

    fn stage_index(&mut self, stage: &str, offer: &str) -> Option<u16> {
        let s = self.by_name.get(stage).copied();
        if s.is_none() {
            self.rejected(stage, offer, format!("unknown stage `{stage}`"));
        }
        s
    }

    /// Replaces the stage's state if the offer is still at `expected`; the
    /// answer is a `stage_state` event either way. A replaced state is a
    /// committed change: the version moves and `OfferState` is published.
    fn set_state(
        &mut self,
        id: &str,
        stage: &str,
        state: serde_json::Value,
        expected: u64,
        now: Timestamp,
    ) -> Result<(), Error> {
        let Some(s) = self.stage_index(stage, id) else {
            return Ok(());
        };
        self.thaw(id)?;
        let Some(rt) = self.map.get_mut(id).filter(|rt| !rt.deleted) else {
            self.rejected(stage, id, format!("unknown offer `{id}`"));
            return Ok(());
        };
        let applied = rt.version == expected;
        if applied {
            let state = Some(state)
                .filter(|v| !v.is_null())
                .map(crate::stage::state);
            let slot = rt.slot_mut(s);
            if slot.state != state {
                slot.state = state;
                self.commit(id, COMMAND.to_string(), Vec::new(), now)?;
            }
        }
        let version = self.offer(id)?.version;
        self.emit(Event::StageState {
            stage: stage.to_string(),
            offer: id.to_string(),
            expected,
            version,
            applied,
        });
        Ok(())
    }

    /// Ends the offer's ping-pong park and gives its dead stages one more
    /// attempt (their failure counts start again).
    fn unpark_command(&mut self, id: &str, now: Timestamp) -> Result<(), Error> {
        self.thaw(id)?;
        let Some(rt) = self.map.get_mut(id).filter(|rt| !rt.deleted) else {
            self.rejected("", id, format!("unknown offer `{id}`"));
            return Ok(());
        };
        let dead: Vec<u16> = rt
            .slots
            .iter_mut()
            .filter(|(_, slot)| slot.slot.phase == Phase::Dead)
            .map(|(s, slot)| {
                slot.slot.phase = Phase::Idle;
                slot.slot.failures = 0;
                *s
            })
            .collect();
        self.mark(id);
        self.unpark(id);
        for s in dead {
            self.enqueue(id, s, Lane::Live, now)?;
        }
        Ok(())
    }

    /// Starts (or restarts) a rescan of the stage over every offer of the
    /// shard, in id order, a chunk per step.
    fn start_rescan(
        &mut self,
        stage: &str,
        filter: Option<&str>,
        now: Timestamp,
    ) -> Result<(), Error> {
        let Some(s) = self.stage_index(stage, "") else {
            return Ok(());
        };
        let compiled = match filter.map(Expr::compile).transpose() {
            Ok(f) => f,
            Err(e) => {
                self.rejected(
                    stage,
                    "",
                    format!("rescan filter `{}`: {e}", filter.unwrap_or_default()),
                );
                return Ok(());
            }
        };
        let total = self.len() as u64;
        self.stage_mut(s)?.rescan = Some(Rescan {
            record: RescanRecord {
                filter: filter.map(str::to_string),
                cursor: None,
                checked: 0,
                queued: 0,
                total,
                errors: 0,
                started_at: now,
            },
            filter: compiled,
        });
        self.dirty_rescans.insert(s);
        self.rescan_step(s, now)
    }

    /// Checks the next chunk of offers for a rescan and queues the ones the
    /// stage wants in its rescan lane. A failing `when` counts as true (the
    /// seed's rule); a failing filter counts as false, so a filter never
    /// widens a rescan. Progress goes out as `rescan_progress`.
    pub(super) fn rescan_step(&mut self, s: u16, now: Timestamp) -> Result<(), Error> {
        let Some(mut rescan) = self.stage_mut(s)?.rescan.take() else {
            return Ok(());
        };
        let from = match &rescan.record.cursor {
            Some(c) => Bound::Excluded(c.as_str()),
            None => Bound::Unbounded,
        };
        let ids: Vec<String> = self
            .map
            .range(from)
            .take(RESCAN_CHUNK)
            .map(|(id, _)| id.to_string())
            .collect();
        let done = ids.len() < RESCAN_CHUNK;
        let errors_before = rescan.record.errors;
        let def = &self.stage(s)?.def;
        let mut wanted = Vec::new();
        for id in &ids {
            let Some(kept) = self.map.kept(id).filter(|k| !k.deleted()) else {
                continue;
            };
            let rt = self.full(id, kept)?;
            rescan.record.checked += 1;
            let state = rt.state(s);
            let scope = Scope::new(id, rt.version, rt.updated_at, &rt.body, now);
            if let Some(filter) = &rescan.filter {
                match filter.eval_bool(&scope, state) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(_) => {
                        rescan.record.errors += 1;
                        continue;
                    }
                }
            }
            match def.when.eval_bool(&scope, state) {
                Ok(true) => wanted.push(id.clone()),
                Ok(false) => {}
                Err(_) => {
                    rescan.record.errors += 1;
                    wanted.push(id.clone());
                }
            }
        }
        self.counters.evaluated += ids.len() as u64;
        self.counters.predicate_errors += rescan.record.errors - errors_before;
        for id in &wanted {
            self.thaw(id)?;
            if self.enqueue(id, s, Lane::Rescan, now)? {
                rescan.record.queued += 1;
            }
        }
        rescan.record.cursor = ids.last().cloned().or(rescan.record.cursor);
        let r = &rescan.record;
        let stage = self.stage(s)?.def.name.clone();
        self.emit(Event::RescanProgress {
            stage,
            checked: r.checked,
            queued: r.queued,
            total: r.total,
            errors: r.errors,
            done,
        });
        self.dirty_rescans.insert(s);
        if !done {
            self.stage_mut(s)?.rescan = Some(rescan);
            self.timers.arm(now, OfferTimer::Rescan(s));
        }
        Ok(())
    }
}
