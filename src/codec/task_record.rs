//! Task records: a shard writes one at every step of a task, so they are
//! written straight from the task's fields, byte for byte what the generated
//! message gives (tested), without building a record first.

use prost::encoding::message;

#[cfg(test)]
use super::changelog::run_to_proto;
use super::changelog::{put_run_fields, run_from_proto};
use super::error::DecodeError;
use super::put::{delimited_len, put_bytes, put_len, put_ts, put_uint, str_len, ts_len, uint_len};
use super::time::{
    optional_ts, put_ts_entry, required_ts, timestamp_to_proto, ts_entry_room, ts_map, ParamKey,
    TS_FIELD_ROOM,
};
use super::wire::decode;
use crate::proto::v1;
use crate::run::{Run, RunSlot};
use crate::task::{Hold, TaskRecord, TaskState};

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
    let state: v1::TaskState = super::changelog::known_enum(state, "state", "task state")?;
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
pub(super) fn encode_task_into(r: &TaskRecord, buf: &mut Vec<u8>) {
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

/// Task records for the tests of the changelog's records.
#[cfg(test)]
pub(super) mod test_support {
    use super::super::changelog::test_support::ts;
    use super::*;
    use jiff::Timestamp;
    use proptest::prelude::*;

    pub(in crate::codec) fn full_record() -> TaskRecord {
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

    pub(in crate::codec) fn any_record() -> impl Strategy<Value = TaskRecord> {
        let run = (
            any::<String>(),
            any::<u32>(),
            any::<u64>(),
            any_ts(),
            any_ts(),
        )
            .prop_map(|(run_id, attempt, pass, dispatched_at, deadline)| Run {
                run_id: run_id.into(),
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
}

#[cfg(test)]
mod tests {
    use super::super::changelog::decode_changelog;
    use super::super::time::put_ts_map;
    use super::test_support::any_record;
    use super::*;
    use crate::changelog::Value;
    use proptest::prelude::*;

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
                            (String::from_utf8_lossy(name), v.value)
                        })
                        .collect()
                };
                if !values.is_empty() {
                    read.snapshot = named(crate::task::ValueList::Snapshot);
                    read.last_seen = named(crate::task::ValueList::LastSeen);
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
    }
}
