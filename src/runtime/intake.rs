//! One consumed record through the shard that owns it: decode and validate
//! it, route it (a record that reached the wrong partition is forwarded),
//! bound what it may make the outputs carry, apply it, encode the outputs.
//! A record refused at any step is dead-lettered with its coordinates and
//! the reason, through one path ([`Shard::reject`]), and processing goes
//! on: no single record can stop, stall or crash-loop a shard.
//!
//! The runtime calls [`take`] for every group input, [`apply_ctl`] (or
//! [`Shard::report_ctl_dead`]) for every CTL record and [`tick`] for
//! timers; the poison-input tests call them the same way, with no Kafka
//! around.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::dead::{self, DeadNote, Source};
use super::output::{self, OutRecord, OutRecords, OutTopics};
use crate::action::Action;
use crate::codec::trace::Trace;
use crate::codec::{self, limits, CtlRecord, DecodeError};
use crate::config::KafkaSettings;
use crate::ctl::ParamId;
use crate::engine::{Engine, Input, OfferCounters, Stats};
use crate::metrics;
use crate::router::Route;
use crate::shell::driver::{Driver, Refused, Sink};

/// What an input topic carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `ctl.changes`: CTL changes, applied to every shard.
    Ctl,
    /// `offer.changes`: offer changes.
    Offers,
    /// `reactor.results`: workers' results.
    Results,
    /// `reactor.commands`: operator commands.
    Commands,
}

/// A consumed record.
#[derive(Debug, Clone)]
pub struct Received<'a> {
    /// Its topic.
    pub topic: &'a str,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// Its key.
    pub key: Option<&'a [u8]>,
    /// Its value (`None`: a tombstone).
    pub payload: Option<&'a [u8]>,
    /// When it was produced, for latency metrics.
    pub produced_at: Option<Timestamp>,
    /// Its trace context, carried to what it causes.
    pub trace: Trace,
}

impl Received<'_> {
    fn source(&self) -> Source<'_> {
        Source {
            topic: self.topic,
            partition: self.partition,
            offset: self.offset,
        }
    }
}

/// What became of a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The shard applied it.
    Applied,
    /// It reached the wrong partition and was forwarded to its owner's.
    Forwarded {
        /// The owning partition.
        to: i32,
    },
    /// It was refused and dead-lettered.
    Rejected {
        /// Why.
        reason: String,
    },
}

pub use crate::router::Router;

/// What the shards of one runtime share.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// Topics and formats.
    pub settings: &'a KafkaSettings,
    /// The names of the topics written, shared by their records.
    pub topics: &'a OutTopics,
    /// The producer's `message.max.bytes`.
    pub max_record_bytes: usize,
    /// Who owns what.
    pub router: &'a Router,
}

/// One owned partition: its engine and what it decided since the last commit.
pub struct Shard {
    partition: i32,
    /// The engine broke an invariant in this batch (a bug): its state may
    /// hold part of a step, so the runtime rebuilds it from the changelog.
    pub(super) broken: bool,
    pub(super) driver: Driver,
    pub(super) pending: OutRecords,
    /// Dead letters among `pending`, logged and counted at commit.
    pub(super) dead: Vec<DeadNote>,
    /// Per CTL partition, the highest offset this shard reported as a dead
    /// letter (durable: see [`codec::encode_ctl_dead_mark`]).
    ctl_marks: BTreeMap<i32, i64>,
    /// Engine counters already exported.
    pub(super) stats: Stats,
    /// Offer counters already exported.
    pub(super) offer_stats: OfferCounters,
}

impl Shard {
    /// The shard `driver` drives, with the CTL dead-letter marks read from
    /// its changelog.
    pub fn new(driver: Driver, ctl_marks: BTreeMap<i32, i64>) -> Shard {
        let stats = driver.engine().stats();
        let offer_stats = driver.engine().offer_counters();
        Shard {
            partition: driver.partition(),
            broken: false,
            driver,
            pending: OutRecords::default(),
            dead: Vec::new(),
            ctl_marks,
            stats,
            offer_stats,
        }
    }

    /// The shard's engine.
    pub fn engine(&self) -> &Engine {
        self.driver.engine()
    }

    /// Records decided since the last commit.
    pub fn pending(&self) -> &OutRecords {
        &self.pending
    }

    /// Dead letters decided since the last commit.
    pub fn dead_letters(&self) -> &[DeadNote] {
        &self.dead
    }

    /// The same shard, rebuilt as `driver`: the batch's records and
    /// dead-letter marks carry over.
    pub(super) fn rebuilt(mut self, driver: Driver) -> Shard {
        self.driver = driver;
        self.broken = false;
        self
    }

    /// Whether the engine broke an invariant since it was built.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// The engine broke an invariant on `what` (a bug): reported, and the
    /// shard is marked for a rebuild from its changelog.
    fn broke(&mut self, topic: &str, offset: i64, error: &crate::engine::Error) {
        metrics::EngineFailed {
            partition: self.partition,
            topic,
            offset,
            error,
        }
        .emit();
        self.broken = true;
    }

    /// Forgets what was decided (after a commit).
    pub fn clear(&mut self) {
        self.pending.clear();
        self.dead.clear();
    }

    /// Where the driver's decisions go: encoded into the pending records,
    /// each (but the changelog's) with the trace context of their cause.
    fn outbox<'a>(
        &'a mut self,
        ctx: &'a Context<'a>,
        trace: &'a [(String, Vec<u8>)],
    ) -> (&'a mut Driver, Outbox<'a>) {
        let outbox = Outbox {
            ctx,
            partition: self.partition,
            pending: &mut self.pending,
            dead: &mut self.dead,
            trace,
        };
        (&mut self.driver, outbox)
    }

    /// Loads the global CTL table (a restored or resumed shard).
    pub fn load_ctl(&mut self, table: impl IntoIterator<Item = (ParamId, Timestamp)>) {
        self.driver.load_ctl(table);
    }

    /// Starts the (restored) shard at `now`; `Err` when its engine broke
    /// an invariant doing so.
    pub fn start(&mut self, ctx: &Context<'_>, now: Timestamp) -> Result<(), crate::engine::Error> {
        let (driver, mut outbox) = self.outbox(ctx, &[]);
        driver.start(now, &mut outbox)
    }

    fn push(&mut self, ctx: &Context<'_>, record: OutRecord) {
        push(ctx, &mut self.pending, &mut self.dead, record);
    }

    /// Refuses `record` for `reason`: its dead letter joins the pending
    /// records. The one path for decode failures, validation failures and
    /// engine rejections alike.
    pub fn reject(&mut self, ctx: &Context<'_>, record: &Received<'_>, reason: String) -> Outcome {
        let (letter, note) = dead::letter(
            &ctx.settings.topics.dead,
            ctx.max_record_bytes,
            record.source(),
            record.key,
            record.payload,
            &reason,
        );
        self.pending.push(letter);
        self.dead.push(note);
        Outcome::Rejected { reason }
    }

    /// Reports CTL `record` as a dead letter for `reason`, unless this shard
    /// reported it before (its offset is at or below the partition's mark).
    /// The new mark goes to the changelog with the dead letter. Returns
    /// whether it was reported.
    pub fn report_ctl_dead(
        &mut self,
        ctx: &Context<'_>,
        record: &Received<'_>,
        reason: String,
    ) -> bool {
        let ctl_partition = record.partition;
        if self
            .ctl_marks
            .get(&ctl_partition)
            .is_some_and(|&mark| record.offset <= mark)
        {
            return false;
        }
        self.reject(ctx, record, reason);
        self.ctl_marks.insert(ctl_partition, record.offset);
        let (key, value) = codec::encode_ctl_dead_mark(ctl_partition, record.offset);
        self.pending.push(OutRecord {
            topic: std::sync::Arc::clone(&ctx.topics.changelog),
            partition: Some(self.partition),
            key,
            payload: Some(value),
            headers: Vec::new(),
        });
        true
    }
}

/// The runtime's sink: actions encoded into a shard's pending records.
struct Outbox<'a> {
    ctx: &'a Context<'a>,
    partition: i32,
    pending: &'a mut OutRecords,
    dead: &'a mut Vec<DeadNote>,
    /// The trace context of the input being applied (empty for timers).
    trace: &'a [(String, Vec<u8>)],
}

impl Sink for Outbox<'_> {
    fn take(&mut self, at: Timestamp, actions: &mut Vec<Action>) {
        // Encoded where they stay (no list per input), then seen to.
        let first = self.pending.len();
        let ctx = self.ctx;
        output::encode(
            actions.drain(..),
            self.partition,
            ctx.settings,
            ctx.topics,
            at,
            self.pending,
        );
        if !self.trace.is_empty() {
            self.pending
                .add_headers(first, self.trace, &ctx.topics.changelog);
        }
        for i in first..self.pending.len() {
            fit(ctx, self.dead, self.pending, i);
        }
    }
}

/// Adds `record` to the pending records. One the producer would refuse
/// (larger than `message.max.bytes`) would abort every transaction that
/// carries it: it goes to the dead-letter topic instead, cut. The input
/// limits ([`codec::limits`]) keep this from happening.
fn push(ctx: &Context<'_>, pending: &mut OutRecords, dead: &mut Vec<DeadNote>, record: OutRecord) {
    pending.push(record);
    fit(ctx, dead, pending, pending.len() - 1);
}

/// Replaces `record`, if the producer would refuse it, by its dead letter
/// (see [`push`]).
fn fit(ctx: &Context<'_>, dead: &mut Vec<DeadNote>, records: &mut OutRecords, i: usize) {
    let Some(record) = records.get(i) else {
        return;
    };
    let size = record.size();
    if size <= ctx.max_record_bytes {
        return;
    }
    metrics::OutputOversize {
        topic: record.topic,
        size,
        limit: ctx.max_record_bytes,
    }
    .emit();
    let reason = format!(
        "an output of {size} bytes to {} is over message.max.bytes = {}",
        record.topic, ctx.max_record_bytes
    );
    let source = Source {
        topic: record.topic,
        partition: record.partition.unwrap_or(-1),
        offset: -1,
    };
    let (letter, note) = dead::letter(
        &ctx.settings.topics.dead,
        ctx.max_record_bytes,
        source,
        Some(record.key),
        record.payload,
        &reason,
    );
    records.replace(i, letter);
    dead.push(note);
}

/// Decodes and validates a record of `role`: the input, or why not.
pub fn decode(
    role: Role,
    key: Option<&[u8]>,
    payload: Option<&[u8]>,
) -> Result<Input, DecodeError> {
    limits::check_record(key, payload)?;
    let value = payload.unwrap_or_default();
    match role {
        Role::Ctl => codec::decode_ctl_change(value).map(CtlRecord::into),
        Role::Offers => codec::decode_offer_change(key, payload).map(Input::Offer),
        Role::Results => codec::decode_run_result(value).map(Input::Result),
        Role::Commands => codec::decode_command(value).map(Input::Command),
    }
}

/// A CTL change of a parameter some task names, as the table and the
/// shards take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownCtl {
    /// The parameter's id in the router (the configuration's; its routes
    /// are [`Router::ctl_routes`]).
    pub id: ParamId,
    /// The new value.
    pub value: Timestamp,
}

/// [`decode`] of a CTL record as a [`KnownCtl`] of `router`'s; `Ok(None)`
/// for a well-formed change of a parameter no task names.
pub fn decode_ctl(
    router: &Router,
    key: Option<&[u8]>,
    payload: Option<&[u8]>,
) -> Result<Option<KnownCtl>, DecodeError> {
    decode_plain_ctl(router, key, payload, payload.and_then(codec::plain_ctl))
}

/// [`decode_ctl`] of a record whose payload [`codec::plain_ctl`] read as `plain`.
pub fn decode_plain_ctl<'a>(
    router: &Router,
    key: Option<&[u8]>,
    payload: Option<&'a [u8]>,
    plain: Option<codec::PlainCtl<'a>>,
) -> Result<Option<KnownCtl>, DecodeError> {
    limits::check_record(key, payload)?;
    let found =
        codec::read_known_plain_ctl(payload.unwrap_or_default(), plain, |entity, param| {
            router.ctl_id(entity, param)
        })?;
    Ok(found.map(|(id, value)| KnownCtl { id, value }))
}

/// Takes one group record of `role` into `shard` (the shard of the
/// partition it arrived on) at `now`.
pub fn take(
    shard: &mut Shard,
    ctx: &Context<'_>,
    role: Role,
    record: &Received<'_>,
    now: Timestamp,
) -> Outcome {
    let input = match decode(role, record.key, record.payload) {
        Ok(input) => input,
        Err(e) => return shard.reject(ctx, record, e.to_string()),
    };
    match ctx.router.route(&input, record.partition) {
        Route::To(owner) if owner == record.partition => {}
        Route::To(owner) => {
            forward(
                shard,
                ctx,
                record,
                owner,
                record.payload.map(<[u8]>::to_vec),
            );
            return Outcome::Forwarded { to: owner };
        }
        Route::Split(parts) => {
            // A launch for keys of several partitions: each part to its
            // owner, this shard's own part applied here, all in this
            // shard's transaction.
            let mut local = None;
            let mut to = record.partition;
            for (owner, command) in parts {
                if owner == record.partition {
                    local = Some(command);
                } else {
                    to = owner;
                    let payload = codec::encode_command(&command, codec::Format::Protobuf);
                    forward(shard, ctx, record, owner, Some(payload));
                }
            }
            match local {
                Some(command) => return apply(shard, ctx, record, Input::Command(command), now),
                None => return Outcome::Forwarded { to },
            }
        }
    }
    apply(shard, ctx, record, input, now)
}

/// Forwards `record` (or `payload` in its place) to partition `to`, which
/// owns its key.
fn forward(
    shard: &mut Shard,
    ctx: &Context<'_>,
    record: &Received<'_>,
    to: i32,
    payload: Option<Vec<u8>>,
) {
    tracing::debug!(
        topic = record.topic,
        from = record.partition,
        to,
        "forwarding a record to the partition that owns its key"
    );
    shard.push(
        ctx,
        OutRecord {
            topic: std::sync::Arc::from(record.topic),
            partition: Some(to),
            key: record.key.unwrap_or_default().to_vec(),
            payload,
            headers: record.trace.clone(),
        },
    );
}

/// Applies `input` (from `record`) to `shard`, which owns it.
fn apply(
    shard: &mut Shard,
    ctx: &Context<'_>,
    record: &Received<'_>,
    input: Input,
    now: Timestamp,
) -> Outcome {
    // Timers due by now fire first, untraced: they are not the record's doing.
    tick(shard, ctx, now);
    let (driver, mut outbox) = shard.outbox(ctx, &record.trace);
    match driver.apply(input, now, record.produced_at, &mut outbox) {
        Ok(()) => Outcome::Applied,
        Err(Refused::Invalid(e)) => shard.reject(ctx, record, e.to_string()),
        Err(Refused::Broke(e)) => {
            shard.broke(record.topic, record.offset, &e);
            shard.reject(ctx, record, e.to_string())
        }
    }
}

/// Applies a CTL change to `shard` at `now` (every owned shard gets each one).
pub fn apply_ctl(
    shard: &mut Shard,
    ctx: &Context<'_>,
    value: Timestamp,
    named: ParamId,
    record: &Received<'_>,
    now: Timestamp,
) {
    tick(shard, ctx, now);
    let produced_at = record.produced_at;
    let (driver, mut outbox) = shard.outbox(ctx, &record.trace);
    // Triggers are level-based: the rebuilt shard's start evaluates what
    // this change affects again.
    if let Err(e) = driver.apply_ctl(value, named, now, produced_at, &mut outbox) {
        shard.broke("ctl", -1, &e);
    }
}

/// Fires the shard's timers due at or before `now`, each at its deadline.
pub fn tick(shard: &mut Shard, ctx: &Context<'_>, now: Timestamp) {
    let (driver, mut outbox) = shard.outbox(ctx, &[]);
    if let Err(e) = driver.advance(now, &mut outbox) {
        shard.broke("timers", -1, &e);
    }
}
