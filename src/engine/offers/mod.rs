//! Offer stages inside a shard (seed 001, DESIGN §6): the offers of the
//! shard's partition, one queue per stage with a live and a rescan lane,
//! stage timers, one stage run per offer at a time, results applied by
//! compare-and-set on the offer version, the ping-pong guard and rescans.
//!
//! Invariants kept by every transition:
//! - a stage's slot on an offer is in one [`Phase`]; `queued` means the
//!   offer is in that stage's queue, so it is there at most once;
//! - an offer is *blocked* while one of its stages runs or while the
//!   ping-pong guard parks it; the ready queues hold exactly the queued
//!   slots of unblocked offers, so a dispatch never has to skip entries;
//! - every change of an offer is written to the changelog as the whole
//!   offer record at the end of the step, and everything else (queues,
//!   running counts, timers) is derived from the records on restore.

mod change;
mod commands;
mod restore;
mod runs;
mod view;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use jiff::Timestamp;

use crate::action::Action;
use crate::changelog::{ChangelogRecord, Store, Value};
use crate::config::{Config, PingPong, RunPolicy};
use crate::duration::Duration;
use crate::offer::Body;
use crate::stage::expr::Expr;
use crate::stage::limit::{self, Bucket};
use crate::stage::queue::StageQueue;
use crate::stage::{Guard, Lane, OfferRecord, Phase, RescanRecord, SlotRecord};
use crate::timers::Timers;

#[cfg(test)]
mod prop;
#[cfg(test)]
mod tests;

pub use runs::{is_stage_run_id, parse_stage_run_id};
pub use view::{OfferView, SlotView, StageStats};

/// Offers checked per rescan step; the rest waits for the next tick, so a
/// rescan of a large partition never stalls the shard.
pub const RESCAN_CHUNK: usize = 1000;

/// A stage's definition, as the shard uses it.
#[derive(Debug, Clone)]
struct StageDef {
    name: String,
    watch: Vec<String>,
    when: Expr,
    timer: Option<Expr>,
    topic: String,
    max_parallelism: u32,
    rate: Option<f64>,
    run: RunPolicy,
}

/// One offer in memory: the record, with slots indexed by stage.
#[derive(Debug, Clone, PartialEq)]
struct OfferRt {
    version: u64,
    body: Body,
    updated_at: Timestamp,
    /// Stage index → slot; only stages whose slot is not default.
    slots: Vec<(u16, SlotRecord)>,
    guard: Guard,
    /// A grave: deleted at `updated_at`, kept for its version and run
    /// counters until [`Offers::grave_time`] has passed.
    deleted: bool,
}

impl OfferRt {
    fn slot(&self, s: u16) -> Option<&SlotRecord> {
        self.slots.iter().find(|(k, _)| *k == s).map(|(_, v)| v)
    }

    fn slot_mut(&mut self, s: u16) -> &mut SlotRecord {
        let k = match self.slots.iter().position(|(k, _)| *k == s) {
            Some(k) => k,
            None => {
                self.slots.push((s, SlotRecord::default()));
                self.slots.len() - 1
            }
        };
        &mut self.slots[k].1
    }

    fn state(&self, s: u16) -> Option<&serde_json::Value> {
        self.slot(s).and_then(|x| x.state.as_ref())
    }

    /// A stage runs on it: no other may start.
    fn busy(&self) -> bool {
        self.slots.iter().any(|(_, x)| x.phase == Phase::Running)
    }

    /// Its queued slots wait outside the ready queues.
    fn blocked(&self) -> bool {
        self.busy() || self.guard.parked_until.is_some()
    }
}

/// What a timer is for; with the stage and offer it keys the timer.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum OfferTimer {
    /// The stage's timer for the offer is due: queue it.
    Stage(u16, String),
    /// The run in flight times out.
    Run(u16, String),
    /// A backoff or park of the stage on the offer ends.
    Wake(u16, String),
    /// The ping-pong park of the offer ends.
    Unpark(String),
    /// The stage's rate limit has a token again.
    Rate(u16),
    /// The stage's rescan continues.
    Rescan(u16),
    /// A deleted offer's record is dropped.
    Bury(String),
}

/// A rescan in progress, with its filter compiled.
#[derive(Debug, Clone)]
struct Rescan {
    record: RescanRecord,
    filter: Option<Expr>,
}

/// Counters of the offer side of a shard (monotonic).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OfferCounters {
    /// Offer changes committed (external, stage, command).
    pub committed: u64,
    /// `when` predicates evaluated.
    pub evaluated: u64,
    /// Predicates that failed to evaluate.
    pub predicate_errors: u64,
}

/// The offer half of a shard.
#[derive(Debug, Clone)]
pub(super) struct Offers {
    defs: Vec<StageDef>,
    by_name: HashMap<String, u16>,
    ping_pong: PingPong,
    map: BTreeMap<String, OfferRt>,
    queues: Vec<StageQueue>,
    running: Vec<u32>,
    share: Vec<u32>,
    buckets: Vec<Option<Bucket>>,
    /// When a rate timer is armed per stage (one at a time).
    rate_armed: Vec<Option<Timestamp>>,
    timers: Timers<OfferTimer>,
    rescans: Vec<Option<Rescan>>,
    /// Offers changed in this step (written or tombstoned at its end).
    dirty: BTreeSet<String>,
    /// Rescans changed in this step.
    dirty_rescans: BTreeSet<u16>,
    /// Stages needing a dispatch pass at the end of the step.
    pending: BTreeSet<u16>,
    /// Rescan records of stages no longer configured: tombstoned at start.
    orphan_rescans: Vec<String>,
    out: Vec<Action>,
    counters: OfferCounters,
    /// How long a deleted offer's record is kept: the longest stage timeout,
    /// after which no result of a run from before the delete is current.
    grave_time: Duration,
}

impl Offers {
    pub(super) fn new(config: &Config) -> Offers {
        let defs: Vec<StageDef> = config
            .stages
            .iter()
            .map(|s| StageDef {
                name: s.name.clone(),
                watch: s.watch.clone(),
                when: s.when.clone(),
                timer: s.timer.clone(),
                topic: s.topic.clone(),
                max_parallelism: s.max_parallelism,
                rate: s.rate_limit.as_ref().map(|r| r.per_second),
                run: s.run.clone(),
            })
            .collect();
        let n = defs.len();
        let by_name = defs
            .iter()
            .enumerate()
            .map(|(i, d)| (d.name.clone(), i as u16))
            .collect();
        let mut offers = Offers {
            by_name,
            ping_pong: config.offers.ping_pong,
            map: BTreeMap::new(),
            queues: vec![StageQueue::default(); n],
            running: vec![0; n],
            share: vec![0; n],
            buckets: vec![None; n],
            rate_armed: vec![None; n],
            timers: Timers::default(),
            rescans: vec![None; n],
            dirty: BTreeSet::new(),
            dirty_rescans: BTreeSet::new(),
            pending: BTreeSet::new(),
            orphan_rescans: Vec::new(),
            out: Vec::new(),
            counters: OfferCounters::default(),
            grave_time: defs
                .iter()
                .map(|d| d.run.timeout)
                .max()
                .unwrap_or(Duration::from_secs(0)),
            defs,
        };
        offers.set_partition(0, 1);
        offers
    }

    /// Splits each stage's global `max_parallelism` and `rate_limit` for
    /// partition `index` of `count` (see [`crate::stage::limit`]).
    pub(super) fn set_partition(&mut self, index: u32, count: u32) {
        for (s, def) in self.defs.iter().enumerate() {
            self.share[s] = limit::share(def.max_parallelism, index, count);
            self.buckets[s] = def
                .rate
                .map(|rate| Bucket::new(rate / f64::from(count.max(1))));
        }
    }

    /// Whether any stage is configured.
    pub(super) fn has_stages(&self) -> bool {
        !self.defs.is_empty()
    }

    /// Number of offers in the shard (not counting deleted ones).
    pub(super) fn len(&self) -> usize {
        self.map.values().filter(|rt| !rt.deleted).count()
    }

    pub(super) fn counters(&self) -> OfferCounters {
        self.counters
    }

    pub(super) fn next_deadline(&self) -> Option<Timestamp> {
        self.timers.next()
    }

    /// Fires every offer timer due at or before `now`.
    pub(super) fn tick(&mut self, now: Timestamp) {
        while let Some((at, timer)) = self.timers.pop_due(now) {
            self.on_timer(timer, at, now);
        }
    }

    /// Ends a step: dispatches what the stages allow, then writes the
    /// changelog records of every offer and rescan the step changed.
    pub(super) fn finish(&mut self, now: Timestamp, out: &mut Vec<Action>) {
        while let Some(s) = self.pending.pop_first() {
            self.pump(s, now);
        }
        out.append(&mut self.out);
        for id in std::mem::take(&mut self.dirty) {
            let record = self.offer_record(&id);
            out.push(Action::Changelog(record));
        }
        for s in std::mem::take(&mut self.dirty_rescans) {
            let record = self.rescan_record(s);
            out.push(Action::Changelog(record));
        }
    }

    /// The records a restore must reproduce, in key order.
    pub(super) fn snapshot(&self) -> Vec<ChangelogRecord> {
        let mut records: Vec<ChangelogRecord> =
            self.map.keys().map(|id| self.offer_record(id)).collect();
        records.extend(
            (0..self.defs.len() as u16)
                .filter(|&s| self.rescans[s as usize].is_some())
                .map(|s| self.rescan_record(s)),
        );
        records
    }

    fn offer_record(&self, id: &str) -> ChangelogRecord {
        let value = self.map.get(id).map(|rt| {
            let stages = rt
                .slots
                .iter()
                .filter(|(_, slot)| !slot.is_default())
                .map(|(s, slot)| (self.defs[*s as usize].name.clone(), slot.clone()))
                .collect();
            Value::Offer(Box::new(OfferRecord {
                version: rt.version,
                body: rt.body.clone(),
                updated_at: rt.updated_at,
                stages,
                guard: rt.guard.clone(),
                deleted: rt.deleted,
            }))
        });
        ChangelogRecord {
            store: Store::Offer,
            key: id.to_string(),
            value,
        }
    }

    fn rescan_record(&self, s: u16) -> ChangelogRecord {
        ChangelogRecord {
            store: Store::Rescan,
            key: self.defs[s as usize].name.clone(),
            value: self.rescans[s as usize]
                .as_ref()
                .map(|r| Value::Rescan(r.record.clone())),
        }
    }

    fn emit(&mut self, event: crate::action::Event) {
        self.out.push(Action::Event(event));
    }

    /// Puts the stage's slot on the offer in its queue (`lane`) unless it
    /// is there already, running, or waiting for a retry: a running stage
    /// is re-run by the version check, a retry runs on the latest version.
    fn enqueue(&mut self, id: &str, s: u16, lane: Lane, now: Timestamp) -> bool {
        let Some(rt) = self.map.get_mut(id) else {
            return false;
        };
        let blocked = rt.blocked();
        let slot = rt.slot_mut(s);
        match slot.phase {
            Phase::Idle => {
                slot.phase = Phase::Queued;
                slot.lane = lane;
                slot.queued_at = Some(now);
                if !blocked {
                    self.queues[s as usize].push(lane, now, id);
                    self.pending.insert(s);
                }
            }
            Phase::Queued if slot.lane == Lane::Rescan && lane == Lane::Live => {
                let at = slot.queued_at.unwrap_or(now);
                slot.lane = Lane::Live;
                if !blocked {
                    self.queues[s as usize].remove(Lane::Rescan, at, id);
                    self.queues[s as usize].push(Lane::Live, at, id);
                    self.pending.insert(s);
                }
            }
            _ => return false,
        }
        self.dirty.insert(id.to_string());
        true
    }

    /// Takes the offer's queued slots out of the ready queues (it became blocked).
    fn hide_queued(&mut self, id: &str) {
        let Some(rt) = self.map.get(id) else { return };
        for (s, slot) in &rt.slots {
            if slot.phase == Phase::Queued {
                let at = slot.queued_at.unwrap_or(Timestamp::MIN);
                self.queues[*s as usize].remove(slot.lane, at, id);
            }
        }
    }

    /// Puts the offer's queued slots back in the ready queues if it is no
    /// longer blocked.
    fn show_queued(&mut self, id: &str) {
        let Some(rt) = self.map.get(id) else { return };
        if rt.blocked() {
            return;
        }
        for (s, slot) in &rt.slots {
            if slot.phase == Phase::Queued {
                let at = slot.queued_at.unwrap_or(Timestamp::MIN);
                self.queues[*s as usize].push(slot.lane, at, id);
                self.pending.insert(*s);
            }
        }
    }

    /// Sets (or clears) the stage's timer on the offer. A time already past
    /// (a timer computed from old data, or a worker's late answer) is due at
    /// once: it is stored as `now`, so whoever drives the clock fires it now
    /// and never dispatches a run "in the past".
    fn set_timer(&mut self, id: &str, s: u16, at: Option<Timestamp>, now: Timestamp) {
        let at = at.map(|at| at.max(now));
        let Some(rt) = self.map.get_mut(id) else {
            return;
        };
        let slot = rt.slot_mut(s);
        if slot.timer == at {
            return;
        }
        self.timers
            .replace(slot.timer, at, OfferTimer::Stage(s, id.to_string()));
        slot.timer = at;
        self.dirty.insert(id.to_string());
    }

    fn on_timer(&mut self, timer: OfferTimer, at: Timestamp, now: Timestamp) {
        match timer {
            OfferTimer::Stage(s, id) => {
                if let Some(rt) = self.map.get_mut(&id) {
                    let slot = rt.slot_mut(s);
                    if slot.phase == Phase::Running {
                        // The run in flight was dispatched before the due
                        // time: the wake-up stays on the slot, due, and is
                        // served when the run ends (see `runs.rs`).
                        return;
                    }
                    slot.timer = None;
                    self.dirty.insert(id.clone());
                    self.enqueue(&id, s, Lane::Live, now);
                }
            }
            OfferTimer::Run(s, id) => self.on_run_timeout(s, &id, at, now),
            OfferTimer::Wake(s, id) => self.on_wake(s, &id, now),
            OfferTimer::Unpark(id) => self.unpark(&id),
            OfferTimer::Rate(s) => {
                self.rate_armed[s as usize] = None;
                self.pending.insert(s);
            }
            OfferTimer::Rescan(s) => self.rescan_step(s, now),
            OfferTimer::Bury(id) => {
                if self.map.get(&id).is_some_and(|rt| rt.deleted) {
                    self.map.remove(&id);
                    self.dirty.insert(id);
                }
            }
        }
    }

    /// Ends the ping-pong park of an offer.
    fn unpark(&mut self, id: &str) {
        let Some(rt) = self.map.get_mut(id) else {
            return;
        };
        if let Some(until) = rt.guard.parked_until.take() {
            self.timers
                .cancel(until, OfferTimer::Unpark(id.to_string()));
        }
        rt.guard = Guard::default();
        self.dirty.insert(id.to_string());
        self.show_queued(id);
    }
}
