//! Changelog records: key `store/key`, value an encoded record or nothing
//! (tombstone). Reactor always writes protobuf; it reads either encoding so
//! that an operator may repair a key by hand in JSON.

use super::error::DecodeError;
use super::time::{optional_ts, proto_map, required_ts, timestamp_to_proto, ts_map};
use super::wire::{decode, encode, Format};
use crate::changelog::{ChangelogRecord, Store, Value};
use crate::proto::v1;
use crate::run::Run;
use crate::task::{Hold, TaskRecord, TaskState};

/// Every store, to resolve a key's prefix.
const STORES: [Store; 1] = [Store::Task];

/// The changelog key of `key` in `store`: `task/orders_daily`.
pub fn changelog_key(store: Store, key: &str) -> String {
    format!("{}/{key}", store.as_str())
}

/// Encodes a changelog record as a Kafka key and value (`None`: tombstone).
pub fn encode_changelog(record: &ChangelogRecord) -> (Vec<u8>, Option<Vec<u8>>) {
    let key = changelog_key(record.store, &record.key).into_bytes();
    let value = record.value.as_ref().map(|v| match v {
        Value::Task(task) => encode(&task_to_proto(task), Format::Protobuf),
        Value::Offer(_) | Value::Rescan(_) => todo!("offer changelog encoding"),
    });
    (key, value)
}

/// Decodes a changelog Kafka record; a missing value is a tombstone.
pub fn decode_changelog(key: &[u8], value: Option<&[u8]>) -> Result<ChangelogRecord, DecodeError> {
    let bad = |reason| DecodeError::ChangelogKey {
        key: String::from_utf8_lossy(key).into_owned(),
        reason,
    };
    let text = std::str::from_utf8(key).map_err(|_| bad("not UTF-8"))?;
    let (prefix, id) = text
        .split_once('/')
        .ok_or_else(|| bad("expected `store/key`"))?;
    let store = STORES
        .into_iter()
        .find(|s| s.as_str() == prefix)
        .ok_or_else(|| bad("unknown store; known: `task`"))?;
    if id.is_empty() {
        return Err(bad("empty key after the store"));
    }
    let value = match value {
        None => None,
        Some(bytes) => Some(match store {
            Store::Task => Value::Task(Box::new(task_from_proto(decode(bytes)?)?)),
            Store::Offer | Store::Rescan => todo!("offer changelog decoding"),
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

fn state_from_proto(state: i32) -> Result<TaskState, DecodeError> {
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

fn task_to_proto(r: &TaskRecord) -> v1::TaskRecord {
    let ts = |t: &Option<jiff::Timestamp>| t.map(timestamp_to_proto);
    v1::TaskRecord {
        state: state_to_proto(r.state).into(),
        since: ts(&r.since),
        queued_at: ts(&r.queued_at),
        wake_at: ts(&r.wake_at),
        failures: r.failures,
        run_seq: r.run_seq,
        pass_seq: r.pass_seq,
        run: r.run.as_ref().map(|run| v1::RunRecord {
            run_id: run.run_id.clone(),
            attempt: run.attempt,
            pass: run.pass,
            dispatched_at: Some(timestamp_to_proto(run.dispatched_at)),
            deadline: Some(timestamp_to_proto(run.deadline)),
        }),
        snapshot: proto_map(&r.snapshot),
        last_seen: proto_map(&r.last_seen),
        last_success: ts(&r.last_success),
        sla_due: ts(&r.sla_due),
        hold: r.hold.map(|h| v1::Hold {
            until: Some(timestamp_to_proto(h.until)),
            awaiting_data: h.awaiting_data,
        }),
        pause_requested: r.pause_requested,
        last_error: r.last_error.clone(),
    }
}

fn task_from_proto(m: v1::TaskRecord) -> Result<TaskRecord, DecodeError> {
    let run = m
        .run
        .map(|run| {
            Ok::<_, DecodeError>(Run {
                run_id: run.run_id,
                attempt: run.attempt,
                pass: run.pass,
                dispatched_at: required_ts("run.dispatched_at", run.dispatched_at.as_ref())?,
                deadline: required_ts("run.deadline", run.deadline.as_ref())?,
            })
        })
        .transpose()?;
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
        state: state_from_proto(m.state)?,
        since: optional_ts("since", m.since.as_ref())?,
        queued_at: optional_ts("queued_at", m.queued_at.as_ref())?,
        wake_at: optional_ts("wake_at", m.wake_at.as_ref())?,
        failures: m.failures,
        run_seq: m.run_seq,
        pass_seq: m.pass_seq,
        run,
        snapshot: ts_map("snapshot", &m.snapshot)?,
        last_seen: ts_map("last_seen", &m.last_seen)?,
        last_success: optional_ts("last_success", m.last_success.as_ref())?,
        sla_due: optional_ts("sla_due", m.sla_due.as_ref())?,
        hold,
        pause_requested: m.pause_requested,
        last_error: m.last_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;
    use proptest::prelude::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn full_record() -> TaskRecord {
        TaskRecord {
            state: TaskState::Running,
            since: Some(ts("2021-04-25T04:00:00Z")),
            queued_at: Some(ts("2021-04-25T03:59:00Z")),
            wake_at: Some(ts("2021-04-25T05:00:00Z")),
            failures: 2,
            run_seq: 7,
            pass_seq: 12,
            run: Some(Run {
                run_id: "orders_daily#7".into(),
                attempt: 3,
                pass: 12,
                dispatched_at: ts("2021-04-25T04:00:00Z"),
                deadline: ts("2021-04-25T05:00:00Z"),
            }),
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
            last_error: Some(String::new()),
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
        let (key, value) = encode_changelog(record);
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

    #[test]
    fn key_and_tombstone() {
        let (key, value) = encode_changelog(&task("orders_daily", None));
        assert_eq!(key, b"task/orders_daily");
        assert_eq!(value, None);
        // The default record is zero bytes: a value, not a tombstone.
        let (_, value) = encode_changelog(&task("t", Some(TaskRecord::default())));
        assert_eq!(value, Some(Vec::new()));
    }

    #[test]
    fn json_values_are_read() {
        let value = br#"{"state":"TASK_STATE_PAUSED","lastSeen":{"dwh.orders/max_dt":"2021-04-23T03:51:16Z"},"failures":1}"#;
        let r = decode_changelog(b"task/t", Some(value)).unwrap();
        let expected = TaskRecord {
            state: TaskState::Paused,
            failures: 1,
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
            reason(b"offer/o1", None),
            "changelog key `offer/o1`: unknown store; known: `task`"
        );
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
        (
            (
                proptest::sample::select(TaskState::ALL.to_vec()),
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
        )
            .prop_map(
                |(
                    (state, since, queued_at, wake_at, failures, run_seq, pass_seq, run),
                    (snapshot, last_seen, last_success, sla_due, hold, pause_requested, last_error),
                )| TaskRecord {
                    state,
                    since,
                    queued_at,
                    wake_at,
                    failures,
                    run_seq,
                    pass_seq,
                    run,
                    snapshot,
                    last_seen,
                    last_success,
                    sla_due,
                    hold,
                    pause_requested,
                    last_error,
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
