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
//!   running counts, timers) is derived from the records on restore;
//! - an offer no stage is queued on or runs on is kept as that record
//!   ([`kept`]), and every step reads back the offers it changes first.

mod change;
mod commands;
mod kept;
mod ops;
mod restore;
mod runs;
mod view;

use jiff::Timestamp;

use super::marks::Marks;
use crate::action::Action;
use crate::changelog::{ChangelogRecord, Store, Value};
use crate::config::{Config, PingPong, RunPolicy};
use crate::duration::Duration;
use crate::engine::{bug, Error};
use crate::name_index::ByName;
use crate::offer::SharedBody;
use crate::run::{Alarms, Due};
use crate::stage::expr::Expr;
use crate::stage::limit::{self, Bucket};
use crate::stage::queue::StageQueue;
use crate::stage::{Guard, Lane, OfferRecord, Phase, RescanRecord, SlotRecord};
use crate::timers::Timers;
use kept::{Kept, OfferMap};

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
    /// Shared with every run command of the stage.
    topic: std::sync::Arc<str>,
    max_parallelism: u32,
    rate: Option<f64>,
    run: RunPolicy,
}

/// A stage on this partition: its definition, queue, limits and rescan.
#[derive(Debug, Clone)]
struct StageRt {
    def: StageDef,
    queue: StageQueue,
    /// Runs in flight.
    running: u32,
    /// This partition's share of `max_parallelism`.
    share: u32,
    /// This partition's share of `rate_limit`.
    bucket: Option<Bucket>,
    /// When a rate timer is armed (one at a time).
    rate_armed: Option<Timestamp>,
    /// A rescan in progress.
    rescan: Option<Rescan>,
}

/// One offer in memory: the record, with slots indexed by stage.
#[derive(Debug, Clone, PartialEq)]
struct OfferRt {
    version: u64,
    body: SharedBody,
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

    // `k` is the position just found, or the index of the slot just pushed.
    #[allow(clippy::indexing_slicing)]
    fn slot_mut(&mut self, s: u16) -> &mut SlotRecord {
        let k = match self.slots.iter().position(|(k, _)| *k == s) {
            Some(k) => k,
            None => {
                // Offers are many and stages few: no room to spare.
                self.slots.reserve_exact(1);
                self.slots.push((s, SlotRecord::default()));
                self.slots.len() - 1
            }
        };
        &mut self.slots[k].1
    }

    fn state(&self, s: u16) -> Option<&serde_json::Value> {
        self.slot(s).and_then(|x| x.state.as_deref())
    }

    /// A stage runs on it: no other may start.
    fn busy(&self) -> bool {
        self.slots
            .iter()
            .any(|(_, x)| x.slot.phase == Phase::Running)
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

/// The run slot's view of one stage's timers on one offer.
struct SlotAlarms<'a> {
    timers: &'a mut Timers<OfferTimer>,
    stage: u16,
    offer: &'a str,
}

impl Alarms for SlotAlarms<'_> {
    fn arm(&mut self, due: Due, at: Timestamp) {
        self.timers.arm(at, self.key(due));
    }

    fn cancel(&mut self, due: Due, at: Timestamp) {
        self.timers.cancel(at, self.key(due));
    }
}

impl SlotAlarms<'_> {
    fn key(&self, due: Due) -> OfferTimer {
        match due {
            Due::Deadline => OfferTimer::Run(self.stage, self.offer.to_string()),
            Due::Wake => OfferTimer::Wake(self.stage, self.offer.to_string()),
        }
    }
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
    stages: Vec<StageRt>,
    by_name: ByName<u16>,
    ping_pong: PingPong,
    map: OfferMap,
    timers: Timers<OfferTimer>,
    /// Offers changed in this step (written or tombstoned at its end).
    dirty: Marks<String>,
    /// Rescans changed in this step.
    dirty_rescans: Marks<u16>,
    /// Stages needing a dispatch pass at the end of the step.
    pending: Marks<u16>,
    /// Rescan records of stages no longer configured: tombstoned at start.
    orphan_rescans: Vec<String>,
    out: Vec<Action>,
    counters: OfferCounters,
    /// How long a deleted offer's record is kept: the longest stage timeout,
    /// after which no result of a run from before the delete is current.
    grave_time: Duration,
    /// Offers read back from their records in this step, with those
    /// records (see [`Offers::refreeze`]).
    thawed: Vec<(String, Box<[u8]>)>,
}

impl Offers {
    pub(super) fn new(config: &Config) -> Offers {
        let stages: Vec<StageRt> = config
            .stages
            .iter()
            .map(|s| StageRt {
                def: StageDef {
                    name: s.name.clone(),
                    watch: s.watch.clone(),
                    when: s.when.clone(),
                    timer: s.timer.clone(),
                    topic: s.topic.as_str().into(),
                    max_parallelism: s.max_parallelism,
                    rate: s.rate_limit.as_ref().map(|r| r.per_second),
                    run: s.run.clone(),
                },
                queue: StageQueue::default(),
                running: 0,
                share: 0,
                bucket: None,
                rate_armed: None,
                rescan: None,
            })
            .collect();
        let by_name = stages
            .iter()
            .enumerate()
            .map(|(i, st)| (st.def.name.clone(), u16::try_from(i).unwrap_or(u16::MAX)))
            .collect();
        let grave_time = stages
            .iter()
            .map(|st| st.def.run.timeout)
            .max()
            .unwrap_or(Duration::from_secs(0));
        let mut offers = Offers {
            stages,
            by_name,
            ping_pong: config.offers.ping_pong,
            map: OfferMap::default(),
            timers: Timers::default(),
            dirty: Marks::default(),
            dirty_rescans: Marks::default(),
            pending: Marks::default(),
            orphan_rescans: Vec::new(),
            out: Vec::new(),
            counters: OfferCounters::default(),
            grave_time,
            thawed: Vec::new(),
        };
        offers.set_partition(0, 1);
        offers
    }

    /// Splits each stage's global `max_parallelism` and `rate_limit` for
    /// partition `index` of `count` (see [`crate::stage::limit`]).
    pub(super) fn set_partition(&mut self, index: u32, count: u32) {
        for st in &mut self.stages {
            st.share = limit::share(st.def.max_parallelism, index, count);
            st.bucket = st
                .def
                .rate
                .map(|rate| Bucket::new(rate / f64::from(count.max(1))));
        }
    }

    /// Whether any stage is configured.
    pub(super) fn has_stages(&self) -> bool {
        !self.stages.is_empty()
    }

    /// Number of offers in the shard (not counting deleted ones).
    pub(super) fn len(&self) -> usize {
        self.map.values().filter(|k| !k.deleted()).count()
    }

    pub(super) fn counters(&self) -> OfferCounters {
        self.counters
    }

    pub(super) fn next_deadline(&self) -> Option<Timestamp> {
        self.timers.next()
    }

    /// Stage indices, in configuration order.
    fn stage_ids(&self) -> impl Iterator<Item = u16> {
        (0..self.stages.len()).map(|s| u16::try_from(s).unwrap_or(u16::MAX))
    }

    fn stage(&self, s: u16) -> Result<&StageRt, Error> {
        self.stages
            .get(s as usize)
            .ok_or_else(|| bug(format!("no stage #{s}")))
    }

    fn stage_mut(&mut self, s: u16) -> Result<&mut StageRt, Error> {
        self.stages
            .get_mut(s as usize)
            .ok_or_else(|| bug(format!("no stage #{s}")))
    }

    fn offer(&self, id: &str) -> Result<&OfferRt, Error> {
        self.map
            .get(id)
            .ok_or_else(|| bug(format!("no offer `{id}`")))
    }

    fn offer_mut(&mut self, id: &str) -> Result<&mut OfferRt, Error> {
        self.map
            .get_mut(id)
            .ok_or_else(|| bug(format!("no offer `{id}`")))
    }

    /// The slot of stage `s` on offer `id`, with the alarms of its run.
    fn slot_mut<'a>(
        &'a mut self,
        s: u16,
        id: &'a str,
    ) -> Result<(&'a mut SlotRecord, SlotAlarms<'a>), Error> {
        let rt = self
            .map
            .get_mut(id)
            .ok_or_else(|| bug(format!("no offer `{id}`")))?;
        let alarms = SlotAlarms {
            timers: &mut self.timers,
            stage: s,
            offer: id,
        };
        Ok((rt.slot_mut(s), alarms))
    }

    /// Fires every offer timer due at or before `now`.
    pub(super) fn tick(&mut self, now: Timestamp) -> Result<(), Error> {
        while let Some((at, timer)) = self.timers.pop_due(now) {
            self.on_timer(timer, at, now)?;
        }
        Ok(())
    }

    /// Marks offer `id` changed in this step.
    fn mark(&mut self, id: &str) {
        self.dirty.insert_with(|last| last == id, || id.to_string());
    }

    /// Ends a step: dispatches what the stages allow, then writes the
    /// changelog records of every offer and rescan the step changed.
    pub(super) fn finish(&mut self, now: Timestamp, out: &mut Vec<Action>) -> Result<(), Error> {
        while let Some(s) = self.pending.pop_first() {
            self.pump(s, now)?;
        }
        out.append(&mut self.out);
        self.refreeze();
        // Popped, not taken: iterating a taken empty set costs more, and
        // most steps leave these empty.
        while let Some(id) = self.dirty.pop_first() {
            let record = self.write_record(&id);
            out.push(Action::Changelog(record));
        }
        while let Some(s) = self.dirty_rescans.pop_first() {
            let record = self.rescan_record(s)?;
            out.push(Action::Changelog(record));
        }
        Ok(())
    }

    /// Drops what a failed step left half done: its outputs and dirty marks.
    /// (The caller rebuilds the shard from its changelog.)
    pub(super) fn abandon(&mut self) {
        self.out.clear();
        self.thawed.clear();
        self.dirty.clear();
        self.dirty_rescans.clear();
        self.pending.clear();
    }

    /// The records a restore must reproduce, in key order.
    pub(super) fn snapshot(&self) -> Vec<ChangelogRecord> {
        // Every offer as its record in full, however it is kept (a kept
        // record that does not read back is left out: the restore of
        // that record fails the same way).
        let mut records: Vec<ChangelogRecord> = self
            .map
            .iter()
            .filter_map(|(id, kept)| {
                let rt = self.full(id, kept).ok()?;
                Some(ChangelogRecord {
                    store: Store::Offer,
                    key: id.into(),
                    value: Some(self.record_of(&rt)),
                })
            })
            .collect();
        records.extend(
            self.stage_ids()
                .filter(|&s| self.stage(s).is_ok_and(|st| st.rescan.is_some()))
                .filter_map(|s| self.rescan_record(s).ok()),
        );
        records
    }

    /// The changelog record of offer `id` as it is kept (`None`: gone),
    /// written.
    fn offer_record(&self, id: &str) -> ChangelogRecord {
        let value = self.map.kept(id).map(|kept| match kept {
            Kept::Hot(rt) => Value::OfferEncoded(self.encoded(rt)),
            Kept::Cold(bytes) => Value::OfferEncoded(bytes.to_vec()),
        });
        ChangelogRecord {
            store: Store::Offer,
            key: id.into(),
            value,
        }
    }

    /// An offer's slots as its record holds them: under their stage's
    /// name, in name order (`rt` keeps them in stage order), a default one
    /// left out.
    fn named_slots<'a>(&'a self, rt: &'a OfferRt) -> Vec<(&'a str, &'a SlotRecord)> {
        let mut slots: Vec<(&str, &SlotRecord)> = rt
            .slots
            .iter()
            .filter(|(_, slot)| !slot.is_default())
            .filter_map(|(s, slot)| Some((self.stages.get(*s as usize)?.def.name.as_str(), slot)))
            .collect();
        slots.sort_unstable_by(|a, b| a.0.cmp(b.0));
        slots
    }

    /// The record of an offer written, as [`Self::record_of`] encodes.
    fn encoded(&self, rt: &OfferRt) -> Vec<u8> {
        let stages = self.named_slots(rt);
        let fields = crate::codec::OfferFields {
            version: rt.version,
            body: &rt.body,
            updated_at: rt.updated_at,
            guard: &rt.guard,
            deleted: rt.deleted,
        };
        // Room for a usual record at once (it is copied out when written).
        let mut bytes = Vec::with_capacity(512);
        crate::codec::encode_offer_fields(&fields, stages, &mut bytes);
        bytes
    }

    /// The record of an offer in full.
    fn record_of(&self, rt: &OfferRt) -> Value {
        let stages: crate::stage::record::Slots = self
            .named_slots(rt)
            .into_iter()
            .map(|(name, slot)| (name, slot.clone()))
            .collect();
        Value::Offer(Box::new(OfferRecord {
            version: rt.version,
            body: rt.body.clone(),
            updated_at: rt.updated_at,
            stages,
            guard: rt.guard.clone(),
            deleted: rt.deleted,
        }))
    }

    fn rescan_record(&self, s: u16) -> Result<ChangelogRecord, Error> {
        let st = self.stage(s)?;
        Ok(ChangelogRecord {
            store: Store::Rescan,
            key: st.def.name.as_str().into(),
            value: st.rescan.as_ref().map(|r| Value::Rescan(r.record.clone())),
        })
    }

    fn emit(&mut self, event: crate::action::Event) {
        self.out.push(Action::Event(event));
    }

    /// Puts the stage's slot on the offer in its queue (`lane`) unless it
    /// is there already, running, or waiting for a retry: a running stage
    /// is re-run by the version check, a retry runs on the latest version.
    fn enqueue(&mut self, id: &str, s: u16, lane: Lane, now: Timestamp) -> Result<bool, Error> {
        let Some(rt) = self.map.get_mut(id) else {
            return Ok(false);
        };
        let blocked = rt.blocked();
        let slot = rt.slot_mut(s);
        let queue = &mut self
            .stages
            .get_mut(s as usize)
            .ok_or_else(|| bug(format!("no stage #{s}")))?
            .queue;
        match slot.slot.phase {
            Phase::Idle => {
                slot.slot.phase = Phase::Queued;
                slot.lane = lane;
                slot.set_queued_at(Some(now));
                if !blocked {
                    queue.push(lane, now, id);
                    self.pending.insert(s);
                }
            }
            Phase::Queued if slot.lane == Lane::Rescan && lane == Lane::Live => {
                let at = slot.queued_at().unwrap_or(now);
                slot.lane = Lane::Live;
                if !blocked {
                    queue.remove(Lane::Rescan, at, id);
                    queue.push(Lane::Live, at, id);
                    self.pending.insert(s);
                }
            }
            _ => return Ok(false),
        }
        self.mark(id);
        Ok(true)
    }

    /// Takes the offer's queued slots out of the ready queues (it became blocked).
    fn hide_queued(&mut self, id: &str) {
        let Some(rt) = self.map.get(id) else { return };
        for (s, slot) in &rt.slots {
            if slot.slot.phase == Phase::Queued {
                let at = slot.queued_at().unwrap_or(Timestamp::MIN);
                if let Some(st) = self.stages.get_mut(*s as usize) {
                    st.queue.remove(slot.lane, at, id);
                }
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
            if slot.slot.phase == Phase::Queued {
                let at = slot.queued_at().unwrap_or(Timestamp::MIN);
                if let Some(st) = self.stages.get_mut(*s as usize) {
                    st.queue.push(slot.lane, at, id);
                    self.pending.insert(*s);
                }
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
        if slot.timer() == at {
            return;
        }
        self.timers
            .replace(slot.timer(), at, OfferTimer::Stage(s, id.to_string()));
        slot.set_timer(at);
        self.mark(id);
    }

    fn on_timer(&mut self, timer: OfferTimer, at: Timestamp, now: Timestamp) -> Result<(), Error> {
        match &timer {
            OfferTimer::Stage(_, id)
            | OfferTimer::Run(_, id)
            | OfferTimer::Wake(_, id)
            | OfferTimer::Unpark(id) => self.thaw(id)?,
            OfferTimer::Rate(_) | OfferTimer::Rescan(_) | OfferTimer::Bury(_) => {}
        }
        match timer {
            OfferTimer::Stage(s, id) => {
                if let Some(rt) = self.map.get_mut(&id) {
                    let slot = rt.slot_mut(s);
                    if slot.slot.phase == Phase::Running {
                        // The run in flight was dispatched before the due
                        // time: the wake-up stays on the slot, due, and is
                        // served when the run ends (see `runs.rs`).
                        return Ok(());
                    }
                    slot.set_timer(None);
                    self.dirty.insert(id.clone());
                    self.enqueue(&id, s, Lane::Live, now)?;
                }
                Ok(())
            }
            OfferTimer::Run(s, id) => self.on_run_timeout(s, &id, at, now),
            OfferTimer::Wake(s, id) => self.on_wake(s, &id, at, now),
            OfferTimer::Unpark(id) => {
                self.unpark(&id);
                Ok(())
            }
            OfferTimer::Rate(s) => {
                self.stage_mut(s)?.rate_armed = None;
                self.pending.insert(s);
                Ok(())
            }
            OfferTimer::Rescan(s) => self.rescan_step(s, now),
            OfferTimer::Bury(id) => {
                if self.map.kept(&id).is_some_and(Kept::deleted) {
                    self.map.remove(&id);
                    self.dirty.insert(id);
                }
                Ok(())
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
        self.mark(id);
        self.show_queued(id);
    }
}
