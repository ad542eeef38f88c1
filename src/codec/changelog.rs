//! Changelog records: key `store/key`, value an encoded record or nothing
//! (tombstone). Reactor always writes protobuf; it reads either encoding so
//! that an operator may repair a key by hand in JSON.
//!
//! Offer bodies and stage states are stored as JSON text inside the
//! protobuf record, not as Structs, so that every number comes back exactly
//! as it was (a Struct number is a double).

use prost::encoding::message;

use super::error::DecodeError;
use super::put::{
    delimited_len, put_bool, put_bytes, put_json, put_len, put_message, put_str, put_ts, put_uint,
    str_len, ts_len, uint_len,
};
use super::time::{
    optional_ts, put_ts_entry, required_ts, timestamp_to_proto, ts_entry_room, ts_map, ParamKey,
    TS_FIELD_ROOM,
};
use super::wire::{decode, encode_into, Format};
use crate::changelog::{ChangelogRecord, Store, Value};
use crate::offer::{normalize, normalize_body, Body};
use crate::proto::v1;
use crate::proto::v1::offer_record;
use crate::run::{Run, RunSlot};
use crate::stage::{Guard, Lane, OfferRecord, Phase, RescanRecord, SlotFields, SlotRecord};
use crate::task::{Hold, TaskRecord, TaskState};

/// The parts of the changelog key of `key` in `store`, in order.
fn key_parts(store: Store, key: &str) -> [&str; 3] {
    [store.as_str(), "/", key]
}

/// The changelog key of `key` in `store`: `task/orders_daily`.
pub fn changelog_key(store: Store, key: &str) -> String {
    key_parts(store, key).concat()
}

/// Encodes a changelog record as a Kafka key and value (`None`: tombstone).
pub fn encode_changelog(record: ChangelogRecord) -> (Vec<u8>, Option<Vec<u8>>) {
    let key = changelog_key(record.store, &record.key).into_bytes();
    let value = record.value.map(|v| {
        let mut buf = Vec::new();
        encode_value_into(&record.key, v, &mut buf);
        buf
    });
    (key, value)
}

/// Appends the changelog key of `key` in `store` to `buf` (what
/// [`changelog_key`] makes).
pub fn put_changelog_key(store: Store, key: &str, buf: &mut Vec<u8>) {
    for part in key_parts(store, key) {
        buf.extend_from_slice(part.as_bytes());
    }
}

/// Appends the encoded value `v` of the changelog record keyed `key` to
/// `buf` (the value [`encode_changelog`] makes).
pub fn encode_value_into(key: &str, v: Value, buf: &mut Vec<u8>) {
    let pb = Format::Protobuf;
    match v {
        Value::Task(task) => encode_task_into(&task, buf),
        Value::TaskEncoded(bytes) => buf.extend_from_slice(&bytes),
        Value::Offer(offer) => encode_offer_into(&offer, buf),
        Value::OfferEncoded(bytes) => buf.extend_from_slice(&bytes),
        Value::Rescan(rescan) => encode_into(&rescan_to_proto(&rescan), pb, buf),
        Value::Process(r) => super::process::encode_key_record_into(&r, buf),
        Value::Schedule(r) => encode_into(&super::process::schedule_to_proto(&r), pb, buf),
        Value::Seq(seq) => encode_into(&v1::SeqRecord { seq }, pb, buf),
        Value::Recovery(r) => encode_into(&super::command::recovery_to_proto(key, &r), pb, buf),
    }
}

/// A changelog record's key read as its store and the key within it
/// (`task/orders_daily` → task, `orders_daily`).
pub fn read_changelog_key(key: &[u8]) -> Result<(Store, &str), DecodeError> {
    let bad = |reason| DecodeError::ChangelogKey {
        key: String::from_utf8_lossy(key).into_owned(),
        reason,
    };
    let text = std::str::from_utf8(key).map_err(|_| bad("not UTF-8"))?;
    let (prefix, id) = text
        .split_once('/')
        .ok_or_else(|| bad("expected `store/key`"))?;
    let store: Store = prefix.parse().map_err(|_| {
        bad("unknown store; known: `task`, `offer`, `rescan`, `process`, `schedule`, `seq`, `recovery`")
    })?;
    if id.is_empty() {
        return Err(bad("empty key after the store"));
    }
    Ok((store, id))
}

/// Decodes a changelog Kafka record; a missing value is a tombstone.
pub fn decode_changelog(key: &[u8], value: Option<&[u8]>) -> Result<ChangelogRecord, DecodeError> {
    let (store, id) = read_changelog_key(key)?;
    let value = match value {
        None => None,
        Some(bytes) => Some(match store {
            Store::Task => Value::Task(Box::new(decode_task_record(bytes)?)),
            Store::Offer => Value::Offer(Box::new(offer_from_proto(decode(bytes)?)?)),
            Store::Rescan => Value::Rescan(rescan_from_proto(decode(bytes)?)?),
            Store::Process => Value::Process(std::sync::Arc::new(super::process::key_from_proto(
                decode(bytes)?,
            )?)),
            Store::Schedule => {
                Value::Schedule(super::process::schedule_from_proto(decode(bytes)?)?)
            }
            Store::Seq => Value::Seq(decode::<v1::SeqRecord>(bytes)?.seq),
            Store::Recovery => Value::Recovery(Box::new(super::command::recovery_from_proto(
                decode(bytes)?,
            )?)),
        }),
    };
    Ok(ChangelogRecord {
        store,
        key: id.to_string(),
        value,
    })
}

fn state_to_proto(state: TaskState) -> v1::TaskState {
    match state {
        TaskState::Idle => v1::TaskState::Idle,
        TaskState::Queued => v1::TaskState::Queued,
        TaskState::Running => v1::TaskState::Running,
        TaskState::Backoff => v1::TaskState::Backoff,
        TaskState::Parked => v1::TaskState::Parked,
        TaskState::Dead => v1::TaskState::Dead,
        TaskState::Paused => v1::TaskState::Paused,
    }
}

pub(super) fn state_from_proto(state: i32) -> Result<TaskState, DecodeError> {
    let state = v1::TaskState::try_from(state).map_err(|_| DecodeError::InvalidField {
        field: "state",
        reason: format!("unknown task state {state}"),
    })?;
    Ok(match state {
        v1::TaskState::Idle => TaskState::Idle,
        v1::TaskState::Queued => TaskState::Queued,
        v1::TaskState::Running => TaskState::Running,
        v1::TaskState::Backoff => TaskState::Backoff,
        v1::TaskState::Parked => TaskState::Parked,
        v1::TaskState::Dead => TaskState::Dead,
        v1::TaskState::Paused => TaskState::Paused,
    })
}

/// Field numbers of `TaskRecord.snapshot` and `TaskRecord.last_seen`.
pub(super) const TASK_SNAPSHOT: u32 = 9;
pub(super) const TASK_LAST_SEEN: u32 = 10;

/// A task record in protobuf ([`encode_task_fields`]).
fn encode_task_into(r: &TaskRecord, buf: &mut Vec<u8>) {
    let (snapshot, last_seen) = (named(&r.snapshot), named(&r.last_seen));
    encode_task_fields(&task_fields(r, &snapshot, &last_seen), buf);
}

/// A record's parameter values as [`TaskFields`] take them.
fn named(values: &crate::ctl::ParamValues) -> Vec<(ParamKey<'_>, jiff::Timestamp)> {
    values
        .iter()
        .map(|(name, value)| (ParamKey::Joined(name), *value))
        .collect()
}

/// The fields of `r`, its values as [`named`] gave them.
fn task_fields<'a>(
    r: &'a TaskRecord,
    snapshot: TaskValues<'a>,
    last_seen: TaskValues<'a>,
) -> TaskFields<'a> {
    TaskFields {
        slot: &r.slot,
        since: r.since,
        queued_at: r.queued_at,
        snapshot,
        last_seen,
        last_success: r.last_success,
        sla_due: r.sla_due,
        hold: r.hold.as_ref(),
        pause_requested: r.pause_requested,
        launch: r.launch.as_ref(),
        again: r.again.as_ref(),
        cron_at: r.cron_at,
        source: r.source.as_deref(),
    }
}

/// Parameter values of a task record, in name order (as a
/// [`crate::ctl::ParamValues`] holds them).
pub type TaskValues<'a> = &'a [(ParamKey<'a>, jiff::Timestamp)];

/// A task record's fields, borrowed from a decoded [`TaskRecord`] or
/// straight from a shard's task: the one writer of `TaskRecord` bytes
/// takes both, so that a shard writes its task's record without building
/// a `TaskRecord` (owned copies of its names, run id and launch) first.
pub struct TaskFields<'a> {
    /// The run lifecycle.
    pub slot: &'a RunSlot,
    /// When it entered its state.
    pub since: Option<jiff::Timestamp>,
    /// When it was queued.
    pub queued_at: Option<jiff::Timestamp>,
    /// Values read at the current run's dispatch.
    pub snapshot: TaskValues<'a>,
    /// Values recorded at the last success.
    pub last_seen: TaskValues<'a>,
    /// Time of the last success.
    pub last_success: Option<jiff::Timestamp>,
    /// When `sla_missed` is due.
    pub sla_due: Option<jiff::Timestamp>,
    /// A slot held for the task.
    pub hold: Option<&'a Hold>,
    /// Pause once the current run ends.
    pub pause_requested: bool,
    /// Launched with these parameters.
    pub launch: Option<&'a std::collections::BTreeMap<String, String>>,
    /// A launch waiting for the run in flight.
    pub again: Option<&'a std::collections::BTreeMap<String, String>>,
    /// When the cron schedule next fires.
    pub cron_at: Option<jiff::Timestamp>,
    /// What caused the current run.
    pub source: Option<&'a str>,
}

/// Appends the `TaskRecord` of `r` to `buf` (one is written for every
/// step of a task): its fields in field order, then its maps of parameter
/// values — what prost writes for the message without the maps, followed
/// by them (property-tested). What only some tasks set (a hold, launch
/// parameters) goes through the generated messages.
pub fn encode_task_fields(r: &TaskFields<'_>, buf: &mut Vec<u8>) {
    let slot = r.slot;
    let state = u64::try_from(i32::from(state_to_proto(slot.phase))).unwrap_or_default();
    let hold = r.hold.map(hold_message);
    let (launch, again) = (r.launch.map(launch_message), r.again.map(launch_message));
    let run_len = slot.run().map(run_len);
    buf.reserve(task_room(
        r,
        run_len,
        hold.as_ref(),
        launch.as_ref(),
        again.as_ref(),
    ));
    let put_opt_ts = |tag, t: Option<jiff::Timestamp>, buf: &mut Vec<u8>| {
        if let Some(t) = t {
            put_ts(tag, t, buf);
        }
    };
    put_uint(1, state, buf);
    put_opt_ts(2, r.since, buf);
    put_opt_ts(3, r.queued_at, buf);
    put_opt_ts(4, slot.wake_at(), buf);
    put_uint(5, slot.failures.into(), buf);
    put_uint(6, slot.run_seq, buf);
    put_uint(7, slot.pass_seq, buf);
    if let (Some(run), Some(n)) = (slot.run(), run_len) {
        put_len(TASK_RUN, n, buf);
        put_run_fields(run, buf);
    }
    put_opt_ts(11, r.last_success, buf);
    put_opt_ts(12, r.sla_due, buf);
    if let Some(h) = &hold {
        message::encode(13, h, buf);
    }
    put_uint(14, r.pause_requested.into(), buf);
    if let Some(e) = slot.last_error() {
        put_bytes(15, e.as_bytes(), buf);
    }
    if let Some(l) = &launch {
        message::encode(16, l, buf);
    }
    if let Some(l) = &again {
        message::encode(17, l, buf);
    }
    put_opt_ts(18, r.cron_at, buf);
    put_opt_ts(19, slot.failed_at(), buf);
    if let Some(s) = r.source {
        put_bytes(20, s.as_bytes(), buf);
    }
    for &(key, value) in r.snapshot {
        put_ts_entry(TASK_SNAPSHOT, key, value, buf);
    }
    for &(key, value) in r.last_seen {
        put_ts_entry(TASK_LAST_SEEN, key, value, buf);
    }
}

/// Decodes the value of a `task/…` changelog record.
pub fn decode_task_record(bytes: &[u8]) -> Result<TaskRecord, DecodeError> {
    match super::task_plain::plain_task(bytes) {
        Some(record) => Ok(record),
        None => task_from_proto(decode(bytes)?),
    }
}

/// [`decode_task_record`] with the parameter values left where they lie in
/// `bytes` when it can (the restore's reader): `values` gets them, cleared
/// first, and the record's lists stay empty; a record the generated decoder
/// reads holds its lists as usual (and `values` none).
pub fn read_task_record(
    bytes: &[u8],
    values: &mut Vec<crate::task::InPlaceValue>,
) -> Result<TaskRecord, DecodeError> {
    match super::task_plain::plain_task_in_place(bytes, values) {
        Some(record) => Ok(record),
        None => {
            values.clear();
            task_from_proto(decode(bytes)?)
        }
    }
}

/// Decodes an `offer/<id>` record's value (what an offer kept as its
/// record holds).
pub fn decode_offer_record(bytes: &[u8]) -> Result<OfferRecord, DecodeError> {
    offer_from_proto(decode(bytes)?)
}

/// Field number of `TaskRecord.run`.
pub(super) const TASK_RUN: u32 = 8;

/// A task's hold as its generated message (rarely set: written through prost).
fn hold_message(h: &crate::task::Hold) -> v1::Hold {
    v1::Hold {
        until: Some(timestamp_to_proto(h.until)),
        awaiting_data: h.awaiting_data,
    }
}

/// Launch parameters as their generated message (rarely set).
fn launch_message(p: &std::collections::BTreeMap<String, String>) -> v1::LaunchParams {
    v1::LaunchParams {
        params: p.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
    }
}

/// Room for a task record, at least its length: each field at its most
/// rather than measured (measuring a timestamp took nearly what writing
/// it does), but the nested parts measured, as their lengths prefix them.
fn task_room(
    r: &TaskFields<'_>,
    run_len: Option<usize>,
    hold: Option<&v1::Hold>,
    launch: Option<&v1::LaunchParams>,
    again: Option<&v1::LaunchParams>,
) -> usize {
    // The five varint fields (a key byte and up to ten), the seven
    // timestamp fields.
    5 * 11
        + 7 * TS_FIELD_ROOM
        + run_len.map_or(0, |n| delimited_len(TASK_RUN, n))
        + hold.map_or(0, |h| message::encoded_len(13, h))
        + r.slot
            .last_error()
            .map_or(0, |e| delimited_len(15, e.len()))
        + launch.map_or(0, |l| message::encoded_len(16, l))
        + again.map_or(0, |l| message::encoded_len(17, l))
        + r.source.map_or(0, |s| delimited_len(20, s.len()))
        + r.snapshot
            .iter()
            .chain(r.last_seen)
            .map(|&(key, _)| ts_entry_room(key))
            .sum::<usize>()
}

/// Bytes of a `RunRecord` written by [`encode_task_into`].
fn run_len(run: &Run) -> usize {
    str_len(1, &run.run_id)
        + uint_len(2, run.attempt.into())
        + uint_len(3, run.pass)
        + ts_len(4, run.dispatched_at)
        + ts_len(5, run.deadline)
}

/// The generated message of a task record: the reference the direct
/// writing ([`encode_task_into`]) is tested against.
#[cfg(test)]
fn task_to_proto(r: TaskRecord) -> v1::TaskRecord {
    let ts = |t: Option<jiff::Timestamp>| t.map(timestamp_to_proto);
    let launch = |p: Option<std::collections::BTreeMap<String, String>>| {
        p.map(|p| v1::LaunchParams {
            params: p.into_iter().collect(),
        })
    };
    let slot = crate::run::SlotParts::from(r.slot);
    v1::TaskRecord {
        state: state_to_proto(slot.phase).into(),
        since: ts(r.since),
        queued_at: ts(r.queued_at),
        wake_at: ts(slot.wake_at),
        failures: slot.failures,
        run_seq: slot.run_seq,
        pass_seq: slot.pass_seq,
        run: slot.run.map(|run| run_to_proto(*run)),
        snapshot: super::time::proto_map(r.snapshot),
        last_seen: super::time::proto_map(r.last_seen),
        last_success: ts(r.last_success),
        sla_due: ts(r.sla_due),
        hold: r.hold.map(|h| v1::Hold {
            until: Some(timestamp_to_proto(h.until)),
            awaiting_data: h.awaiting_data,
        }),
        pause_requested: r.pause_requested,
        last_error: slot.last_error,
        launch: launch(r.launch),
        again: launch(r.again),
        cron_at: ts(r.cron_at),
        failed_at: ts(slot.failed_at),
        source: r.source,
    }
}

fn task_from_proto(m: v1::TaskRecord) -> Result<TaskRecord, DecodeError> {
    let run = m.run.map(run_from_proto).transpose()?;
    let hold = m
        .hold
        .map(|h| {
            Ok::<_, DecodeError>(Hold {
                until: required_ts("hold.until", h.until.as_ref())?,
                awaiting_data: h.awaiting_data,
            })
        })
        .transpose()?;
    Ok(TaskRecord {
        slot: RunSlot::from(crate::run::SlotParts {
            phase: state_from_proto(m.state)?,
            run_seq: m.run_seq,
            pass_seq: m.pass_seq,
            failures: m.failures,
            run: run.map(Box::new),
            wake_at: optional_ts("wake_at", m.wake_at.as_ref())?,
            last_error: m.last_error,
            failed_at: optional_ts("failed_at", m.failed_at.as_ref())?,
        }),
        since: optional_ts("since", m.since.as_ref())?,
        queued_at: optional_ts("queued_at", m.queued_at.as_ref())?,
        snapshot: ts_map("snapshot", m.snapshot)?,
        last_seen: ts_map("last_seen", m.last_seen)?,
        last_success: optional_ts("last_success", m.last_success.as_ref())?,
        sla_due: optional_ts("sla_due", m.sla_due.as_ref())?,
        hold,
        pause_requested: m.pause_requested,
        launch: m.launch.map(|l| l.params.into_iter().collect()),
        again: m.again.map(|l| l.params.into_iter().collect()),
        cron_at: optional_ts("cron_at", m.cron_at.as_ref())?,
        source: m.source,
    })
}

/// A `RunRecord`'s fields as prost writes `run_to_proto`'s message.
pub(super) fn put_run_fields(run: &Run, buf: &mut Vec<u8>) {
    put_str(1, &run.run_id, buf);
    put_uint(2, run.attempt.into(), buf);
    put_uint(3, run.pass, buf);
    put_ts(4, run.dispatched_at, buf);
    put_ts(5, run.deadline, buf);
}

#[cfg(test)]
pub(super) fn run_to_proto(run: Run) -> v1::RunRecord {
    v1::RunRecord {
        run_id: run.run_id,
        attempt: run.attempt,
        pass: run.pass,
        dispatched_at: Some(timestamp_to_proto(run.dispatched_at)),
        deadline: Some(timestamp_to_proto(run.deadline)),
    }
}

pub(super) fn run_from_proto(run: v1::RunRecord) -> Result<Run, DecodeError> {
    Ok(Run {
        run_id: run.run_id,
        attempt: run.attempt,
        pass: run.pass,
        dispatched_at: required_ts("run.dispatched_at", run.dispatched_at.as_ref())?,
        deadline: required_ts("run.deadline", run.deadline.as_ref())?,
    })
}

pub(super) fn phase_to_proto(phase: Phase) -> v1::StagePhase {
    match phase {
        Phase::Idle => v1::StagePhase::Idle,
        Phase::Queued => v1::StagePhase::Queued,
        Phase::Running => v1::StagePhase::Running,
        Phase::Backoff => v1::StagePhase::Backoff,
        Phase::Parked => v1::StagePhase::Parked,
        Phase::Dead => v1::StagePhase::Dead,
        // Stages are never paused; an idle slot is the nearest meaning.
        Phase::Paused => v1::StagePhase::Idle,
    }
}

pub(super) fn phase_from_proto(phase: i32) -> Result<Phase, DecodeError> {
    let phase = v1::StagePhase::try_from(phase).map_err(|_| DecodeError::InvalidField {
        field: "stages.phase",
        reason: format!("unknown stage phase {phase}"),
    })?;
    Ok(match phase {
        v1::StagePhase::Idle => Phase::Idle,
        v1::StagePhase::Queued => Phase::Queued,
        v1::StagePhase::Running => Phase::Running,
        v1::StagePhase::Backoff => Phase::Backoff,
        v1::StagePhase::Parked => Phase::Parked,
        v1::StagePhase::Dead => Phase::Dead,
    })
}

fn lane_to_proto(lane: Lane) -> v1::Lane {
    match lane {
        Lane::Live => v1::Lane::Live,
        Lane::Rescan => v1::Lane::Rescan,
    }
}

fn lane_from_proto(lane: i32) -> Result<Lane, DecodeError> {
    let lane = v1::Lane::try_from(lane).map_err(|_| DecodeError::InvalidField {
        field: "stages.lane",
        reason: format!("unknown lane {lane}"),
    })?;
    Ok(match lane {
        v1::Lane::Live => Lane::Live,
        v1::Lane::Rescan => Lane::Rescan,
    })
}

/// JSON text of a core value: cannot fail, keys are strings.
#[cfg(test)]
fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("JSON values serialize")
}

/// Field number of `OfferRecord.stages`.
const OFFER_STAGES: u32 = 4;

/// Appends an offer record in protobuf to `buf`, straight from the record
/// (the record is written at every step of an offer): its fields in field
/// order, then the stage slots as the map's entries (`{string key = 1;
/// SlotRecord value = 2}`, in name order, a default key or value left out
/// as prost leaves it). Byte for byte what the generated messages gave
/// when they were built for it (`encode_offer_via_prost`, tested), less
/// their copies of the body, the states and every string.
fn encode_offer_into(r: &OfferRecord, buf: &mut Vec<u8>) {
    encode_offer_fields(
        &OfferFields {
            version: r.version,
            body: &r.body,
            updated_at: r.updated_at,
            guard: &r.guard,
            deleted: r.deleted,
        },
        r.stages.iter().map(|(name, slot)| (name.as_str(), slot)),
        buf,
    );
}

/// An offer record's fields but its slots, borrowed from where they lie.
#[derive(Debug, Clone, Copy)]
pub struct OfferFields<'a> {
    /// See [`OfferRecord::version`].
    pub version: u64,
    /// See [`OfferRecord::body`].
    pub body: &'a crate::offer::Body,
    /// See [`OfferRecord::updated_at`].
    pub updated_at: jiff::Timestamp,
    /// See [`OfferRecord::guard`].
    pub guard: &'a Guard,
    /// See [`OfferRecord::deleted`].
    pub deleted: bool,
}

/// Appends an offer record to `buf` from its fields and its slots, `stages`
/// in name order with default slots left out (as [`OfferRecord::stages`]
/// holds them): what [`encode_value_into`] writes for the record they
/// make, without making it (a shard writes one at every step of an offer,
/// and building it copied every stage name and slot).
pub fn encode_offer_fields<'a>(
    r: &OfferFields<'_>,
    stages: impl IntoIterator<Item = (&'a str, &'a SlotRecord)>,
    buf: &mut Vec<u8>,
) {
    put_uint(1, r.version, buf);
    put_json(2, r.body, buf);
    put_ts(3, r.updated_at, buf);
    if !r.guard.is_default() {
        put_message(5, buf, |buf| {
            if let Some(t) = r.guard.window_start {
                put_ts(1, t, buf);
            }
            put_uint(2, r.guard.runs.into(), buf);
            if let Some(t) = r.guard.parked_until {
                put_ts(3, t, buf);
            }
        });
    }
    put_bool(6, r.deleted, buf);
    for (name, slot) in stages {
        put_message(OFFER_STAGES, buf, |buf| {
            put_str(1, name, buf);
            let at = buf.len();
            put_message(2, buf, |buf| put_slot(slot, buf));
            // An empty value: its key and a zero length, which prost leaves out.
            if buf.len() == at + 2 {
                buf.truncate(at);
            }
        });
    }
}

/// A stage slot's fields as prost writes `slot_to_proto`'s message.
fn put_slot(s: &SlotRecord, buf: &mut Vec<u8>) {
    let phase = i32::from(phase_to_proto(s.slot.phase));
    put_uint(1, u64::try_from(phase).unwrap_or_default(), buf);
    if let Some(state) = s.state.as_deref() {
        put_json(2, state, buf);
    }
    if let Some(t) = s.timer() {
        put_ts(3, t, buf);
    }
    let lane = i32::from(lane_to_proto(s.lane));
    put_uint(4, u64::try_from(lane).unwrap_or_default(), buf);
    if let Some(t) = s.queued_at() {
        put_ts(5, t, buf);
    }
    if let Some(run) = s.slot.run() {
        put_message(6, buf, |buf| put_run_fields(run, buf));
    }
    put_uint(7, s.run_version, buf);
    put_uint(8, s.slot.run_seq, buf);
    put_uint(9, s.slot.pass_seq, buf);
    put_uint(10, s.slot.failures.into(), buf);
    if let Some(t) = s.slot.wake_at() {
        put_ts(11, t, buf);
    }
    if let Some(error) = s.slot.last_error() {
        put_bytes(12, error.as_bytes(), buf);
    }
    if let Some(t) = s.slot.failed_at() {
        put_ts(13, t, buf);
    }
    if let Some(source) = s.source() {
        put_bytes(14, source.as_bytes(), buf);
    }
}

/// Whether [`encode_offer_into`] writes `r` byte for byte as the
/// generated messages did (for tests elsewhere in the crate).
#[cfg(test)]
pub(crate) fn offer_written_as_prost(r: &OfferRecord) -> bool {
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    encode_offer_into(r, &mut ours);
    encode_offer_via_prost(r, &mut theirs);
    ours == theirs
}

/// Whether `bytes`, an offer record a shard wrote, are what the generated
/// messages write for the record they decode to (for tests elsewhere in
/// the crate).
#[cfg(test)]
pub(crate) fn offer_bytes_as_prost(bytes: &[u8]) -> bool {
    let Ok(record) = decode_offer_record(bytes) else {
        return false;
    };
    let mut theirs = Vec::new();
    encode_offer_via_prost(&record, &mut theirs);
    theirs == bytes
}

/// The offer record as the generated messages wrote it: the reference
/// [`encode_offer_into`] is tested against.
#[cfg(test)]
fn encode_offer_via_prost(r: &OfferRecord, buf: &mut Vec<u8>) {
    use prost::encoding::{encode_key, encode_varint, message, string};
    let slots: Vec<(&String, offer_record::SlotRecord)> = r
        .stages
        .iter()
        .map(|(name, slot)| (name, slot_to_proto(slot)))
        .collect();
    encode_into(&offer_to_proto(r), Format::Protobuf, buf);
    for (name, slot) in &slots {
        let key = if name.is_empty() {
            0
        } else {
            string::encoded_len(1, name)
        };
        let empty = *slot == offer_record::SlotRecord::default();
        let value = if empty {
            0
        } else {
            message::encoded_len(2, slot)
        };
        encode_key(
            OFFER_STAGES,
            prost::encoding::WireType::LengthDelimited,
            buf,
        );
        encode_varint((key + value) as u64, buf);
        if !name.is_empty() {
            string::encode(1, name, buf);
        }
        if !empty {
            message::encode(2, slot, buf);
        }
    }
}

#[cfg(test)]
fn slot_to_proto(s: &SlotRecord) -> offer_record::SlotRecord {
    let ts = |t: &Option<jiff::Timestamp>| t.map(timestamp_to_proto);
    offer_record::SlotRecord {
        phase: phase_to_proto(s.slot.phase).into(),
        state_json: s.state.as_deref().map(json_text).unwrap_or_default(),
        timer: ts(&s.timer()),
        lane: lane_to_proto(s.lane).into(),
        queued_at: ts(&s.queued_at()),
        run: s.slot.run().cloned().map(run_to_proto),
        run_version: s.run_version,
        run_seq: s.slot.run_seq,
        pass_seq: s.slot.pass_seq,
        failures: s.slot.failures,
        wake_at: ts(&s.slot.wake_at()),
        last_error: s.slot.last_error().map(str::to_string),
        failed_at: ts(&s.slot.failed_at()),
        source: s.source().map(str::to_string),
    }
}

/// An offer record as a message, without its stage slots
/// ([`encode_offer_via_prost`] writes those).
#[cfg(test)]
fn offer_to_proto(r: &OfferRecord) -> v1::OfferRecord {
    let ts = |t: &Option<jiff::Timestamp>| t.map(timestamp_to_proto);
    v1::OfferRecord {
        version: r.version,
        body_json: json_text(&r.body),
        updated_at: Some(timestamp_to_proto(r.updated_at)),
        stages: Default::default(),
        guard: (!r.guard.is_default()).then(|| offer_record::Guard {
            window_start: ts(&r.guard.window_start),
            runs: r.guard.runs,
            parked_until: ts(&r.guard.parked_until),
        }),
        deleted: r.deleted,
    }
}

fn offer_from_proto(m: v1::OfferRecord) -> Result<OfferRecord, DecodeError> {
    if m.body_json.is_empty() {
        return Err(DecodeError::MissingField("body_json"));
    }
    let mut body: Body =
        serde_json::from_slice(&m.body_json).map_err(|e| DecodeError::InvalidField {
            field: "body_json",
            reason: format!("not JSON text of an object: {e}"),
        })?;
    normalize_body(&mut body);
    let slot = |s: offer_record::SlotRecord| {
        let state = if s.state_json.is_empty() {
            None
        } else {
            let mut state: serde_json::Value =
                serde_json::from_slice(&s.state_json).map_err(|e| DecodeError::InvalidField {
                    field: "stages.state_json",
                    reason: format!("not JSON text: {e}"),
                })?;
            normalize(&mut state);
            Some(crate::stage::state(state))
        };
        Ok::<_, DecodeError>(SlotRecord::from(SlotFields {
            slot: RunSlot::from(crate::run::SlotParts {
                phase: phase_from_proto(s.phase)?,
                run_seq: s.run_seq,
                pass_seq: s.pass_seq,
                failures: s.failures,
                run: s.run.map(run_from_proto).transpose()?.map(Box::new),
                wake_at: optional_ts("stages.wake_at", s.wake_at.as_ref())?,
                last_error: s.last_error,
                failed_at: optional_ts("stages.failed_at", s.failed_at.as_ref())?,
            }),
            state,
            timer: optional_ts("stages.timer", s.timer.as_ref())?,
            lane: lane_from_proto(s.lane)?,
            queued_at: optional_ts("stages.queued_at", s.queued_at.as_ref())?,
            run_version: s.run_version,
            source: s.source,
        }))
    };
    let guard = match m.guard {
        None => Guard::default(),
        Some(g) => Guard {
            window_start: optional_ts("guard.window_start", g.window_start.as_ref())?,
            runs: g.runs,
            parked_until: optional_ts("guard.parked_until", g.parked_until.as_ref())?,
        },
    };
    Ok(OfferRecord {
        version: m.version,
        body: crate::offer::share(body),
        updated_at: required_ts("updated_at", m.updated_at.as_ref())?,
        stages: m
            .stages
            .into_iter()
            .map(|(stage, s)| Ok((stage, slot(s)?)))
            .collect::<Result<_, DecodeError>>()?,
        guard,
        deleted: m.deleted,
    })
}

fn rescan_to_proto(r: &RescanRecord) -> v1::RescanRecord {
    v1::RescanRecord {
        filter: r.filter.clone(),
        cursor: r.cursor.clone(),
        checked: r.checked,
        queued: r.queued,
        total: r.total,
        errors: r.errors,
        started_at: Some(timestamp_to_proto(r.started_at)),
    }
}

fn rescan_from_proto(m: v1::RescanRecord) -> Result<RescanRecord, DecodeError> {
    Ok(RescanRecord {
        filter: m.filter,
        cursor: m.cursor,
        checked: m.checked,
        queued: m.queued,
        total: m.total,
        errors: m.errors,
        started_at: required_ts("started_at", m.started_at.as_ref())?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::time::put_ts_map;
    use super::*;
    use jiff::Timestamp;
    use proptest::prelude::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn full_record() -> TaskRecord {
        TaskRecord {
            slot: RunSlot::from(crate::run::SlotParts {
                phase: TaskState::Running,
                wake_at: Some(ts("2021-04-25T05:00:00Z")),
                failures: 2,
                run_seq: 7,
                pass_seq: 12,
                run: Some(Box::new(Run {
                    run_id: "orders_daily#7".into(),
                    attempt: 3,
                    pass: 12,
                    dispatched_at: ts("2021-04-25T04:00:00Z"),
                    deadline: ts("2021-04-25T05:00:00Z"),
                })),
                last_error: Some(String::new()),
                failed_at: None,
            }),
            since: Some(ts("2021-04-25T04:00:00Z")),
            queued_at: Some(ts("2021-04-25T03:59:00Z")),
            snapshot: [("dwh.orders/max_dt".to_string(), ts("2021-04-25T03:27:33Z"))].into(),
            last_seen: [
                ("dwh.orders/max_dt".to_string(), ts("2021-04-23T03:51:16Z")),
                (
                    "dwh.users/updated_at".to_string(),
                    ts("1969-07-20T20:17:40.5Z"),
                ),
            ]
            .into(),
            last_success: Some(ts("2021-04-23T04:00:00Z")),
            sla_due: Some(ts("2021-04-26T04:00:00Z")),
            hold: Some(Hold {
                until: ts("2021-04-25T04:30:00Z"),
                awaiting_data: true,
            }),
            pause_requested: true,
            launch: Some([("day".to_string(), "2024-06-01".to_string())].into()),
            again: Some(Default::default()),
            cron_at: Some(ts("2021-04-26T03:00:00Z")),
            source: None,
        }
    }

    fn task(key: &str, value: Option<TaskRecord>) -> ChangelogRecord {
        ChangelogRecord {
            store: Store::Task,
            key: key.into(),
            value: value.map(|r| Value::Task(Box::new(r))),
        }
    }

    fn round_trip(record: &ChangelogRecord) -> ChangelogRecord {
        let (key, value) = encode_changelog(record.clone());
        decode_changelog(&key, value.as_deref()).unwrap()
    }

    #[test]
    fn records_round_trip() {
        for r in [
            task("orders_daily", Some(full_record())),
            task("orders/daily#x", Some(TaskRecord::default())),
            task("orders_daily", None),
        ] {
            assert_eq!(round_trip(&r), r);
        }
    }

    /// What prost writes for a task record's message without its maps,
    /// followed by the maps: the bytes before [`encode_task_into`] wrote them.
    fn via_prost(r: &TaskRecord) -> Vec<u8> {
        let mut m = task_to_proto(r.clone());
        m.snapshot.clear();
        m.last_seen.clear();
        let mut buf = prost::Message::encode_to_vec(&m);
        put_ts_map(TASK_SNAPSHOT, &r.snapshot, &mut buf);
        put_ts_map(TASK_LAST_SEEN, &r.last_seen, &mut buf);
        buf
    }

    proptest! {
        /// Written straight from the record, a task record is byte for
        /// byte what prost writes for its message (its maps last), and
        /// reads back as the record.
        #[test]
        fn a_task_record_is_written_as_prost_writes_it(r in any_record()) {
            let mut ours = Vec::new();
            encode_task_into(&r, &mut ours);
            prop_assert_eq!(&ours, &via_prost(&r));
            // The room reserved for it holds it (no second allocation).
            let (snapshot, last_seen) = (named(&r.snapshot), named(&r.last_seen));
            let fields = task_fields(&r, &snapshot, &last_seen);
            let room = task_room(
                &fields,
                r.slot.run().map(run_len),
                r.hold.as_ref().map(hold_message).as_ref(),
                r.launch.as_ref().map(launch_message).as_ref(),
                r.again.as_ref().map(launch_message).as_ref(),
            );
            prop_assert!(room >= ours.len(), "{} reserved for {}", room, ours.len());
            let back = decode_changelog(b"task/t", Some(&ours)).unwrap();
            prop_assert_eq!(back.value, Some(Value::Task(Box::new(r))));
        }

        /// What Reactor writes for a task reads in place as the generated
        /// decoder reads it, a hold or a launch left to that decoder; and
        /// whatever the bytes are changed into, reading in place either
        /// declines or agrees with it.
        #[test]
        fn a_task_record_read_in_place_is_what_the_generated_decoder_reads(
            r in any_record(),
            cuts in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
            cut_short in any::<Option<prop::sample::Index>>(),
        ) {
            let mut bytes = Vec::new();
            encode_task_into(&r, &mut bytes);
            let slow = |bytes: &[u8]| decode(bytes).and_then(task_from_proto);
            let plain = super::super::task_plain::plain_task(&bytes);
            let simple = r.hold.is_none() && r.launch.is_none() && r.again.is_none();
            prop_assert_eq!(plain.is_some(), simple);
            if let Some(plain) = plain {
                prop_assert_eq!(&plain, &r);
            }
            // In place (as a restore reads it): the same, its values' names
            // where they lie in the bytes.
            let in_place = |bytes: &[u8]| {
                let mut values = Vec::new();
                let mut read = read_task_record(bytes, &mut values)?;
                let named = |list| {
                    values
                        .iter()
                        .filter(|v| v.list == list)
                        .map(|v| {
                            let name = bytes.get(v.name.clone()).unwrap_or_default();
                            (String::from_utf8_lossy(name).into_owned(), v.value)
                        })
                        .collect::<Vec<_>>()
                };
                if !values.is_empty() {
                    read.snapshot = named(crate::task::ValueList::Snapshot).into();
                    read.last_seen = named(crate::task::ValueList::LastSeen).into();
                }
                Ok::<_, DecodeError>(read)
            };
            prop_assert_eq!(in_place(&bytes), Ok(r.clone()));
            for (at, byte) in cuts {
                if !bytes.is_empty() {
                    let i = at.index(bytes.len());
                    bytes[i] = byte;
                }
            }
            if let Some(at) = cut_short {
                bytes.truncate(at.index(bytes.len() + 1));
            }
            if let Some(plain) = super::super::task_plain::plain_task(&bytes) {
                prop_assert_eq!(Ok(plain), slow(&bytes));
            }
            if let Ok(read) = slow(&bytes) {
                prop_assert_eq!(in_place(&bytes), Ok(read));
            }
        }

        /// An offer record reads back as the offer it was written from,
        /// whatever its body and states hold (as inputs make them:
        /// normalised): a shard keeps an idle offer as this record and
        /// reads it back at its next step, so anything lost here would be
        /// a change nobody made. (serde_json's default float parsing lost
        /// the last bit of some floats: `float_roundtrip` is on.)
        #[test]
        fn an_offer_record_reads_back_as_the_offer(
            body in json_value(),
            state in json_value(),
            version in any::<u64>(),
        ) {
            let mut body = match body {
                serde_json::Value::Object(map) => map,
                other => [("v".to_string(), other)].into_iter().collect(),
            };
            crate::offer::normalize_body(&mut body);
            let mut state = state;
            normalize(&mut state);
            let mut record = offer_record();
            record.version = version;
            record.body = body.into();
            record.stages = [(
                "s".to_string(),
                SlotRecord::from(SlotFields {
                    state: Some(state.into()),
                    ..SlotFields::default()
                }),
            )]
            .into_iter()
            .collect();
            let mut bytes = Vec::new();
            encode_value_into("o", Value::Offer(Box::new(record.clone())), &mut bytes);
            let mut reference = Vec::new();
            encode_offer_via_prost(&record, &mut reference);
            prop_assert_eq!(&bytes, &reference);
            prop_assert_eq!(decode_offer_record(&bytes).unwrap(), record);
        }
    }

    /// Any JSON value: numbers of every kind and magnitude, strings and
    /// keys of any characters (escapes included).
    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let number = prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
        ];
        crate::codec::tests::json_with(number.boxed(), ".{0,8}", ".{0,6}")
    }

    #[test]
    fn key_and_tombstone() {
        let (key, value) = encode_changelog(task("orders_daily", None));
        assert_eq!(key, b"task/orders_daily");
        assert_eq!(value, None);
        // The default record is zero bytes: a value, not a tombstone.
        let (_, value) = encode_changelog(task("t", Some(TaskRecord::default())));
        assert_eq!(value, Some(Vec::new()));
    }

    #[test]
    fn json_values_are_read() {
        let value = br#"{"state":"TASK_STATE_PAUSED","lastSeen":{"dwh.orders/max_dt":"2021-04-23T03:51:16Z"},"failures":1}"#;
        let r = decode_changelog(b"task/t", Some(value)).unwrap();
        let expected = TaskRecord {
            slot: RunSlot::from(crate::run::SlotParts {
                phase: TaskState::Paused,
                failures: 1,
                ..Default::default()
            }),
            last_seen: [("dwh.orders/max_dt".to_string(), ts("2021-04-23T03:51:16Z"))].into(),
            ..TaskRecord::default()
        };
        assert_eq!(r, task("t", Some(expected)));
    }

    #[test]
    fn bad_keys_and_values() {
        let reason = |key: &[u8], value: Option<&[u8]>| {
            decode_changelog(key, value).unwrap_err().to_string()
        };
        assert_eq!(
            reason(b"job/j1", None),
            "changelog key `job/j1`: unknown store; known: `task`, `offer`, `rescan`, `process`, `schedule`, `seq`, `recovery`"
        );
        // The message names every store, and every store's key reads back.
        let refused = reason(b"job/j1", None);
        for &store in <Store as strum::VariantArray>::VARIANTS {
            assert!(
                refused.contains(&format!("`{}`", store.as_str())),
                "{store:?}"
            );
            let key = changelog_key(store, "k/1");
            assert_eq!(Store::split_key(key.as_bytes()), Some((store, &b"k/1"[..])));
        }
        assert_eq!(
            reason(b"task", None),
            "changelog key `task`: expected `store/key`"
        );
        assert_eq!(
            reason(b"task/", None),
            "changelog key `task/`: empty key after the store"
        );
        assert_eq!(
            reason(&[0xff, b'/', b'a'], None),
            "changelog key `\u{fffd}/a`: not UTF-8"
        );
        assert_eq!(
            reason(b"task/t", Some(br#"{"state":9}"#)).split(':').next(),
            Some("json")
        );
        let unknown_state = prost::Message::encode_to_vec(&v1::TaskRecord {
            state: 9,
            ..Default::default()
        });
        assert_eq!(
            reason(b"task/t", Some(&unknown_state)),
            "field `state`: unknown task state 9"
        );
        let run_without_deadline = prost::Message::encode_to_vec(&v1::TaskRecord {
            run: Some(v1::RunRecord::default()),
            ..Default::default()
        });
        assert_eq!(
            reason(b"task/t", Some(&run_without_deadline)),
            "missing field `run.dispatched_at`"
        );
    }

    fn offer_record() -> OfferRecord {
        let body = serde_json::json!({
            "status": "active",
            "price": 100,
            "ratio": 0.5,
            "big": u64::MAX,
            "small": i64::MIN,
            "past_2_53": 9_007_199_254_740_993_u64,
            "nested": {"tags": ["a", null, true]},
        });
        let running = SlotRecord::from(SlotFields {
            slot: RunSlot::from(crate::run::SlotParts {
                phase: Phase::Running,
                run: Some(Box::new(Run {
                    run_id: "price/o1#3".into(),
                    attempt: 2,
                    pass: 9,
                    dispatched_at: ts("2024-06-01T00:00:01Z"),
                    deadline: ts("2024-06-01T00:01:01Z"),
                })),
                run_seq: 3,
                pass_seq: 9,
                failures: 1,
                wake_at: Some(ts("2024-06-01T00:02:00Z")),
                last_error: Some("model down".into()),
                failed_at: None,
            }),
            state: Some(serde_json::json!({"model": 3, "seen": 9_007_199_254_740_993_u64}).into()),
            timer: Some(ts("2024-07-01T00:00:00Z")),
            lane: Lane::Rescan,
            queued_at: Some(ts("2024-06-01T00:00:00Z")),
            run_version: 4,
            source: None,
        });
        OfferRecord {
            version: 5,
            body: body.as_object().unwrap().clone().into(),
            updated_at: ts("2024-06-01T00:00:00.25Z"),
            stages: [
                ("price".to_string(), running),
                (
                    "expire".to_string(),
                    SlotRecord::from(SlotFields {
                        timer: Some(ts("2024-12-01T00:00:00Z")),
                        state: Some(serde_json::Value::Null.into()),
                        ..SlotFields::default()
                    }),
                ),
                (
                    "dead".to_string(),
                    SlotRecord::from(SlotFields {
                        slot: RunSlot::from(crate::run::SlotParts {
                            phase: Phase::Dead,
                            failures: 6,
                            ..Default::default()
                        }),
                        state: Some(serde_json::json!("x").into()),
                        ..SlotFields::default()
                    }),
                ),
                ("idle".to_string(), SlotRecord::default()),
            ]
            .into_iter()
            .collect(),
            guard: Guard {
                window_start: Some(ts("2024-06-01T00:00:00Z")),
                runs: 21,
                parked_until: Some(ts("2024-06-01T01:00:00Z")),
            },
            deleted: false,
        }
    }

    fn offer(key: &str, value: Option<OfferRecord>) -> ChangelogRecord {
        ChangelogRecord {
            store: Store::Offer,
            key: key.into(),
            value: value.map(|r| Value::Offer(Box::new(r))),
        }
    }

    fn rescan(key: &str, value: Option<RescanRecord>) -> ChangelogRecord {
        ChangelogRecord {
            store: Store::Rescan,
            key: key.into(),
            value: value.map(Value::Rescan),
        }
    }

    /// Every field set, a deleted offer at rest, and lengths of one to
    /// three bytes: written straight as the generated messages wrote them.
    #[test]
    fn an_offer_record_is_written_as_prost_writes_it() {
        let full = offer_record();
        assert!(offer_written_as_prost(&full));
        let mut deleted = full.clone();
        deleted.deleted = true;
        deleted.guard = Guard::default();
        deleted.stages = std::iter::empty().collect();
        assert!(offer_written_as_prost(&deleted));
        let mut large = full.clone();
        let mut body = (*large.body).clone();
        body.insert("text".into(), serde_json::json!("x".repeat(20_000)));
        large.body = body.into();
        let unnamed = SlotRecord::from(SlotFields {
            state: Some(serde_json::json!("y".repeat(300)).into()),
            source: Some(String::new()),
            ..SlotFields::default()
        });
        large.stages = (large.stages.iter())
            .map(|(name, slot)| (name.clone(), slot.clone()))
            .chain([(String::new(), unnamed)])
            .collect();
        assert!(offer_written_as_prost(&large));
        let mut bytes = Vec::new();
        encode_value_into("o", Value::Offer(Box::new(large.clone())), &mut bytes);
        assert_eq!(decode_offer_record(&bytes).unwrap(), large);
    }

    #[test]
    fn offer_and_rescan_records_round_trip() {
        let bare = OfferRecord {
            version: 1,
            body: Body::new().into(),
            updated_at: ts("1969-07-20T20:17:40Z"),
            stages: Default::default(),
            guard: Guard::default(),
            deleted: true,
        };
        let started = RescanRecord {
            filter: None,
            cursor: None,
            checked: 0,
            queued: 0,
            total: 0,
            errors: 0,
            started_at: ts("2024-06-01T00:00:00Z"),
        };
        let halfway = RescanRecord {
            filter: Some("offer.price > 0".into()),
            cursor: Some("o/17".into()),
            checked: 17,
            queued: 3,
            total: 40,
            errors: 1,
            ..started.clone()
        };
        for r in [
            offer("o1", Some(offer_record())),
            offer("o/2", Some(bare)),
            offer("o1", None),
            rescan("price", Some(started)),
            rescan("price", Some(halfway)),
            rescan("price", None),
        ] {
            assert_eq!(round_trip(&r), r);
        }
    }

    #[test]
    fn offer_numbers_are_exact() {
        let Some(Value::Offer(o)) = round_trip(&offer("o1", Some(offer_record()))).value else {
            panic!()
        };
        assert_eq!(o.body["big"].as_u64(), Some(u64::MAX));
        assert_eq!(o.body["small"].as_i64(), Some(i64::MIN));
        assert_eq!(o.body["past_2_53"].as_u64(), Some(9_007_199_254_740_993));
        assert_eq!(
            o.stages.get("price").unwrap().state.as_ref().unwrap()["seen"].as_u64(),
            Some(9_007_199_254_740_993)
        );
        // An integral float (a hand-repaired record) is read back normalised.
        let mut record = offer_record();
        std::sync::Arc::make_mut(&mut record.body).insert("float".into(), serde_json::json!(2.0));
        let Some(Value::Offer(o)) = round_trip(&offer("o1", Some(record))).value else {
            panic!()
        };
        assert!(o.body["float"].is_i64());
    }

    #[test]
    fn offer_keys_and_encoding() {
        let (key, value) = encode_changelog(offer("o/1", Some(offer_record())));
        assert_eq!(key, b"offer/o/1");
        let m: v1::OfferRecord = prost::Message::decode(value.unwrap().as_slice()).unwrap();
        assert_eq!(m.stages["idle"], offer_record::SlotRecord::default());
        assert_eq!(m.stages["expire"].state_json, b"null");
        assert!(m.stages["expire"].timer.is_some());
        assert!(m.stages["dead"].state_json == br#""x""#);
        assert_eq!(m.stages["price"].run_version, 4);
        let (key, _) = encode_changelog(rescan("price", None));
        assert_eq!(key, b"rescan/price");
        // No guard at rest.
        let mut record = offer_record();
        record.guard = Guard::default();
        let (_, value) = encode_changelog(offer("o1", Some(record)));
        let m: v1::OfferRecord = prost::Message::decode(value.unwrap().as_slice()).unwrap();
        assert_eq!(m.guard, None);
    }

    #[test]
    fn bad_offer_values() {
        let reason = |key: &[u8], m: &dyn Fn() -> Vec<u8>| {
            decode_changelog(key, Some(&m())).unwrap_err().to_string()
        };
        let valid = || v1::OfferRecord {
            version: 1,
            body_json: b"{}".to_vec(),
            updated_at: Some(timestamp_to_proto(ts("2024-06-01T00:00:00Z"))),
            ..Default::default()
        };
        let bytes = |m: v1::OfferRecord| prost::Message::encode_to_vec(&m);
        assert_eq!(
            reason(b"offer/o1", &|| bytes(v1::OfferRecord {
                body_json: vec![],
                ..valid()
            })),
            "missing field `body_json`"
        );
        assert!(reason(b"offer/o1", &|| bytes(v1::OfferRecord {
            body_json: b"[1]".to_vec(),
            ..valid()
        }))
        .starts_with("field `body_json`: not JSON text of an object"));
        assert_eq!(
            reason(b"offer/o1", &|| bytes(v1::OfferRecord {
                updated_at: None,
                ..valid()
            })),
            "missing field `updated_at`"
        );
        let slot = |s: offer_record::SlotRecord| v1::OfferRecord {
            stages: [("price".to_string(), s)].into(),
            ..valid()
        };
        assert_eq!(
            reason(b"offer/o1", &|| bytes(slot(offer_record::SlotRecord {
                phase: 9,
                ..Default::default()
            }))),
            "field `stages.phase`: unknown stage phase 9"
        );
        assert_eq!(
            reason(b"offer/o1", &|| bytes(slot(offer_record::SlotRecord {
                lane: 2,
                ..Default::default()
            }))),
            "field `stages.lane`: unknown lane 2"
        );
        assert!(
            reason(b"offer/o1", &|| bytes(slot(offer_record::SlotRecord {
                state_json: b"{".to_vec(),
                ..Default::default()
            })))
            .starts_with("field `stages.state_json`: not JSON text")
        );
        assert_eq!(
            reason(b"offer/o1", &|| bytes(slot(offer_record::SlotRecord {
                run: Some(v1::RunRecord::default()),
                ..Default::default()
            }))),
            "missing field `run.dispatched_at`"
        );
        assert_eq!(
            reason(b"rescan/price", &|| br#"{"checked":1}"#.to_vec()),
            "missing field `started_at`"
        );
        // JSON repairs work, with the body in base64 as proto3 JSON wants.
        let r = decode_changelog(
            b"offer/o1",
            Some(
                br#"{"version":"2","bodyJson":"eyJhIjoxfQ==","updatedAt":"2024-06-01T00:00:00Z"}"#,
            ),
        )
        .unwrap();
        let Some(Value::Offer(o)) = r.value else {
            panic!()
        };
        assert_eq!(*o.body, *serde_json::json!({"a": 1}).as_object().unwrap());
    }

    fn any_ts() -> impl Strategy<Value = Timestamp> {
        (
            Timestamp::MIN.as_second()..Timestamp::MAX.as_second(),
            0i32..1_000_000_000,
        )
            .prop_map(|(s, n)| Timestamp::new(s, n).unwrap())
    }

    fn any_map() -> impl Strategy<Value = std::collections::BTreeMap<String, Timestamp>> {
        proptest::collection::btree_map("[a-z.]{1,8}/[a-z_]{1,8}", any_ts(), 0..4)
    }

    fn any_record() -> impl Strategy<Value = TaskRecord> {
        let run = (
            any::<String>(),
            any::<u32>(),
            any::<u64>(),
            any_ts(),
            any_ts(),
        )
            .prop_map(|(run_id, attempt, pass, dispatched_at, deadline)| Run {
                run_id,
                attempt,
                pass,
                dispatched_at,
                deadline,
            });
        let hold = (any_ts(), any::<bool>()).prop_map(|(until, awaiting_data)| Hold {
            until,
            awaiting_data,
        });
        let launch = || proptest::collection::btree_map("[a-z]{0,4}", "[a-z0-9-]{0,6}", 0..3);
        (
            (
                proptest::sample::select(<TaskState as strum::VariantArray>::VARIANTS.to_vec()),
                proptest::option::of(any_ts()),
                proptest::option::of(any_ts()),
                proptest::option::of(any_ts()),
                any::<u32>(),
                any::<u64>(),
                any::<u64>(),
                proptest::option::of(run),
            ),
            (
                any_map(),
                any_map(),
                proptest::option::of(any_ts()),
                proptest::option::of(any_ts()),
                proptest::option::of(hold),
                any::<bool>(),
                proptest::option::of(any::<String>()),
            ),
            (
                proptest::option::of(any_ts()),
                proptest::option::of(any_ts()),
                proptest::option::of(launch()),
                proptest::option::of(launch()),
                proptest::option::of("[a-z:0-9]{0,8}"),
            ),
        )
            .prop_map(
                |(
                    (state, since, queued_at, wake_at, failures, run_seq, pass_seq, run),
                    (snapshot, last_seen, last_success, sla_due, hold, pause_requested, last_error),
                    (failed_at, cron_at, launch, again, source),
                )| TaskRecord {
                    slot: RunSlot::from(crate::run::SlotParts {
                        phase: state,
                        run_seq,
                        pass_seq,
                        failures,
                        run: run.map(Box::new),
                        wake_at,
                        last_error,
                        failed_at,
                    }),
                    since,
                    queued_at,
                    snapshot: snapshot.into(),
                    last_seen: last_seen.into(),
                    last_success,
                    sla_due,
                    hold,
                    pause_requested,
                    launch,
                    again,
                    cron_at,
                    source,
                },
            )
    }

    proptest! {
        #[test]
        fn any_record_round_trips(record in any_record(), key in "[a-z_#/]{1,12}") {
            let r = task(&key, Some(record));
            prop_assert_eq!(round_trip(&r), r);
        }
    }
}
