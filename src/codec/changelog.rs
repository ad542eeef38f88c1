//! Changelog records: key `store/key`, value an encoded record or nothing
//! (tombstone). Reactor always writes protobuf; it reads either encoding so
//! that an operator may repair a key by hand in JSON.

use super::error::DecodeError;
use super::offer_record::{decode_offer_record, encode_offer_into};
use super::put::{put_str, put_ts, put_uint};
use super::task_record::{decode_task_record, encode_task_into};
use super::time::{required_ts, timestamp_to_proto};
use super::wire::{decode, encode_into, Format};
use crate::changelog::{ChangelogRecord, Store, Value};
use crate::proto::v1;
use crate::run::Run;
use crate::stage::{Phase, RescanRecord};

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
            Store::Offer => Value::Offer(Box::new(decode_offer_record(bytes)?)),
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
        key: id.into(),
        value,
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
        run_id: run.run_id.into(),
        attempt: run.attempt,
        pass: run.pass,
        dispatched_at: Some(timestamp_to_proto(run.dispatched_at)),
        deadline: Some(timestamp_to_proto(run.deadline)),
    }
}

pub(super) fn run_from_proto(run: v1::RunRecord) -> Result<Run, DecodeError> {
    Ok(Run {
        run_id: run.run_id.into(),
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

/// A protobuf enum's value as one of `E`'s variants; `field` and `what`
/// name it in the error when it is none of them (a newer writer's, or a
/// corrupted record).
pub(super) fn known_enum<E: TryFrom<i32>>(
    value: i32,
    field: &'static str,
    what: &str,
) -> Result<E, DecodeError> {
    E::try_from(value).map_err(|_| DecodeError::InvalidField {
        field,
        reason: format!("unknown {what} {value}"),
    })
}

pub(super) fn phase_from_proto(phase: i32) -> Result<Phase, DecodeError> {
    let phase: v1::StagePhase = known_enum(phase, "stages.phase", "stage phase")?;
    Ok(match phase {
        v1::StagePhase::Idle => Phase::Idle,
        v1::StagePhase::Queued => Phase::Queued,
        v1::StagePhase::Running => Phase::Running,
        v1::StagePhase::Backoff => Phase::Backoff,
        v1::StagePhase::Parked => Phase::Parked,
        v1::StagePhase::Dead => Phase::Dead,
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

/// Helpers the record kinds' tests share.
#[cfg(test)]
pub(super) mod test_support {
    use super::*;
    use crate::stage::OfferRecord;
    use jiff::Timestamp;

    pub(in crate::codec) fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    pub(in crate::codec) fn round_trip(record: &ChangelogRecord) -> ChangelogRecord {
        let (key, value) = encode_changelog(record.clone());
        decode_changelog(&key, value.as_deref()).unwrap()
    }

    pub(in crate::codec) fn offer(key: &str, value: Option<OfferRecord>) -> ChangelogRecord {
        ChangelogRecord {
            store: Store::Offer,
            key: key.into(),
            value: value.map(|r| Value::Offer(Box::new(r))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::offer_record::test_support::offer_record;
    use super::super::task_record::test_support::{any_record, full_record};
    use super::test_support::{offer, round_trip, ts};
    use super::*;
    use crate::offer::Body;
    use crate::proto::v1::offer_record;
    use crate::run::RunSlot;
    use crate::stage::{Guard, OfferRecord};
    use crate::task::{TaskRecord, TaskState};
    use proptest::prelude::*;

    fn task(key: &str, value: Option<TaskRecord>) -> ChangelogRecord {
        ChangelogRecord {
            store: Store::Task,
            key: key.into(),
            value: value.map(|r| Value::Task(Box::new(r))),
        }
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

    fn rescan(key: &str, value: Option<RescanRecord>) -> ChangelogRecord {
        ChangelogRecord {
            store: Store::Rescan,
            key: key.into(),
            value: value.map(Value::Rescan),
        }
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

    proptest! {
        #[test]
        fn any_record_round_trips(record in any_record(), key in "[a-z_#/]{1,12}") {
            let r = task(&key, Some(record));
            prop_assert_eq!(round_trip(&r), r);
        }
    }
}
