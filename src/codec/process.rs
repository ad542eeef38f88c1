//! Changelog records of processes: `process/PROCESS/KEY` ([`KeyRecord`]) and
//! `schedule/PROCESS` ([`ScheduleRecord`]). JSON objects (parameters,
//! contexts) are stored as JSON text, as offer bodies are, so that every
//! number comes back exactly.

use super::error::DecodeError;
use super::put::{
    put_bool, put_bytes, put_json, put_message, put_sint, put_str, put_ts, put_uint,
    put_varint_field, zigzag,
};
use super::time::{optional_ts, required_ts, timestamp_to_proto};
use crate::offer::{normalize_body, Body};
use crate::process::{
    Cursor, InstanceRecord, KeyRecord, Lane, Launch, Outcome, Placement, ScheduleRecord, Status,
    Step,
};
use crate::proto::v1;
use crate::proto::v1::key_record;
use crate::run::RunSlot;

/// JSON text of an object as the generated message holds it (empty for an
/// empty object): the reference of [`put_object`].
#[cfg(test)]
fn json_text(body: &Body) -> Vec<u8> {
    if body.is_empty() {
        return Vec::new();
    }
    // A map of JSON values with string keys always serializes.
    serde_json::to_vec(body).unwrap_or_default()
}

fn body(field: &'static str, bytes: &[u8]) -> Result<Body, DecodeError> {
    if bytes.is_empty() {
        return Ok(Body::new());
    }
    let mut body: Body = serde_json::from_slice(bytes).map_err(|e| DecodeError::InvalidField {
        field,
        reason: format!("not JSON text of an object: {e}"),
    })?;
    normalize_body(&mut body);
    Ok(body)
}

fn lane_to_proto(lane: Lane) -> u32 {
    match lane {
        Lane::Live => 0,
        Lane::Low => 1,
    }
}

fn lane_from_proto(field: &'static str, lane: u32) -> Result<Lane, DecodeError> {
    match lane {
        0 => Ok(Lane::Live),
        1 => Ok(Lane::Low),
        other => Err(DecodeError::InvalidField {
            field,
            reason: format!("unknown lane {other}"),
        }),
    }
}

fn status_from_proto(text: &str) -> Result<Status, DecodeError> {
    <Status as strum::VariantArray>::VARIANTS
        .iter()
        .copied()
        .find(|s| s.as_str() == text)
        .ok_or_else(|| DecodeError::InvalidField {
            field: "last.status",
            reason: format!("unknown status `{text}`"),
        })
}

/// Appends a key record in protobuf to `buf`, field for field as prost
/// writes `key_to_proto`'s message (tested against it): a key record is
/// written at every step of a chain, and building the generated message
/// first copied every string and JSON text into it.
pub(super) fn encode_key_record_into(r: &KeyRecord, buf: &mut Vec<u8>) {
    if let Some(active) = &r.active {
        put_message(2, buf, |buf| put_instance(active, buf));
    }
    for l in &r.waiting {
        put_message(3, buf, |buf| {
            put_object(1, &l.params, buf);
            put_str(2, <&str>::from(l.position), buf);
            put_uint(3, lane_to_proto(l.lane).into(), buf);
            if let Some(priority) = l.priority {
                put_varint_field(4, zigzag(priority), buf);
            }
            put_bool(5, l.reset, buf);
            if let Some(source) = &l.source {
                put_bytes(6, source.as_bytes(), buf);
            }
            put_ts(7, l.at, buf);
        });
    }
    if let Some(o) = &r.last {
        put_message(4, buf, |buf| {
            put_uint(1, o.n, buf);
            put_str(2, o.status.as_str(), buf);
            put_ts(3, o.finished_at, buf);
            put_object(4, &o.context, buf);
            if let Some(error) = &o.error {
                put_bytes(5, error.as_bytes(), buf);
            }
            if let Some(instance) = &o.instance {
                put_message(6, buf, |buf| put_instance(instance, buf));
            }
        });
    }
    put_bool(5, r.goal, buf);
}

/// A JSON object field as `json_text` gives it: an empty one left out.
fn put_object(tag: u32, body: &Body, buf: &mut Vec<u8>) {
    if !body.is_empty() {
        put_json(tag, body, buf);
    }
}

/// An instance's fields as prost writes `instance_to_proto`'s message.
fn put_instance(i: &InstanceRecord, buf: &mut Vec<u8>) {
    put_uint(1, i.n, buf);
    put_object(2, &i.params, buf);
    put_object(3, &i.context, buf);
    for step in &i.chain {
        put_message(4, buf, |buf| {
            put_str(1, &step.job, buf);
            if let Some(params) = &step.params {
                put_object(2, params, buf);
            }
        });
    }
    put_uint(5, i.step.into(), buf);
    let phase = i32::from(super::changelog::phase_to_proto(i.slot.phase));
    put_uint(6, u64::try_from(phase).unwrap_or_default(), buf);
    put_uint(7, i.slot.run_seq, buf);
    put_uint(8, i.slot.pass_seq, buf);
    put_uint(9, i.slot.failures.into(), buf);
    if let Some(run) = i.slot.run() {
        put_message(10, buf, |buf| super::changelog::put_run_fields(run, buf));
    }
    if let Some(t) = i.slot.wake_at() {
        put_ts(11, t, buf);
    }
    if let Some(error) = i.slot.last_error() {
        put_bytes(12, error.as_bytes(), buf);
    }
    if let Some(q) = &i.queued {
        put_message(13, buf, |buf| {
            put_uint(1, lane_to_proto(q.lane).into(), buf);
            put_sint(2, q.priority, buf);
            put_sint(3, q.order, buf);
        });
    }
    if let Some(t) = i.step_deadline {
        put_ts(14, t, buf);
    }
    put_bool(15, i.overdue, buf);
    put_sint(16, i.priority, buf);
    put_uint(17, lane_to_proto(i.lane).into(), buf);
    put_ts(18, i.started_at, buf);
    put_ts(19, i.progress_at, buf);
    if let Some(source) = &i.source {
        put_bytes(20, source.as_bytes(), buf);
    }
    if let Some(t) = i.slot.failed_at() {
        put_ts(21, t, buf);
    }
    put_uint(22, i.runs, buf);
    put_uint(23, i.seq_base, buf);
}

/// Whether [`encode_key_record_into`] writes `r` byte for byte as prost
/// writes the generated message (for tests elsewhere in the crate).
#[cfg(test)]
pub(crate) fn written_as_prost(r: &KeyRecord) -> bool {
    use prost::Message;
    let mut ours = Vec::new();
    encode_key_record_into(r, &mut ours);
    ours == key_to_proto(r).encode_to_vec()
}

/// The generated message of a key record: the reference the direct
/// writing ([`encode_key_record_into`]) is tested against.
#[cfg(test)]
pub(super) fn key_to_proto(r: &KeyRecord) -> v1::KeyRecord {
    v1::KeyRecord {
        active: r.active.as_ref().map(instance_to_proto),
        waiting: r
            .waiting
            .iter()
            .map(|l| key_record::Launch {
                params_json: json_text(&l.params),
                position: <&str>::from(l.position).to_string(),
                lane: lane_to_proto(l.lane),
                priority: l.priority,
                reset: l.reset,
                source: l.source.clone(),
                at: Some(timestamp_to_proto(l.at)),
            })
            .collect(),
        last: r.last.as_ref().map(|o| key_record::Outcome {
            n: o.n,
            status: o.status.as_str().to_string(),
            finished_at: Some(timestamp_to_proto(o.finished_at)),
            context_json: json_text(&o.context),
            error: o.error.clone(),
            instance: o.instance.as_deref().map(instance_to_proto),
        }),
        goal: r.goal,
    }
}

#[cfg(test)]
fn instance_to_proto(i: &InstanceRecord) -> key_record::Instance {
    let ts = |t: &Option<jiff::Timestamp>| t.map(timestamp_to_proto);
    key_record::Instance {
        n: i.n,
        params_json: json_text(&i.params),
        context_json: json_text(&i.context),
        chain: i
            .chain
            .iter()
            .map(|s| key_record::Step {
                job: s.job.clone(),
                params_json: s.params.as_ref().map(json_text).unwrap_or_default(),
            })
            .collect(),
        step: i.step,
        phase: super::changelog::phase_to_proto(i.slot.phase).into(),
        run_seq: i.slot.run_seq,
        pass_seq: i.slot.pass_seq,
        failures: i.slot.failures,
        run: i.slot.run().cloned().map(super::changelog::run_to_proto),
        wake_at: ts(&i.slot.wake_at()),
        last_error: i.slot.last_error().map(str::to_string),
        queued: i.queued.map(|q| key_record::Placement {
            lane: lane_to_proto(q.lane),
            priority: q.priority,
            order: q.order,
        }),
        step_deadline: ts(&i.step_deadline),
        overdue: i.overdue,
        priority: i.priority,
        lane: lane_to_proto(i.lane),
        started_at: Some(timestamp_to_proto(i.started_at)),
        progress_at: Some(timestamp_to_proto(i.progress_at)),
        source: i.source.clone(),
        failed_at: ts(&i.slot.failed_at()),
        runs: i.runs,
        seq_base: i.seq_base,
    }
}

/// An instance (the active one, or a finished one kept with its outcome).
/// Field names in errors are the active instance's.
fn instance_from_proto(i: key_record::Instance) -> Result<InstanceRecord, DecodeError> {
    Ok(InstanceRecord {
        n: i.n,
        params: body("active.params_json", &i.params_json)?,
        context: body("active.context_json", &i.context_json)?,
        chain: i
            .chain
            .into_iter()
            .map(|s| {
                Ok(Step {
                    job: super::error::non_empty("active.chain.job", s.job)?,
                    params: if s.params_json.is_empty() {
                        None
                    } else {
                        Some(body("active.chain.params_json", &s.params_json)?)
                    },
                })
            })
            .collect::<Result<_, DecodeError>>()?,
        step: i.step,
        slot: RunSlot::from(crate::run::SlotParts {
            phase: super::changelog::phase_from_proto(i.phase)?,
            run_seq: i.run_seq,
            pass_seq: i.pass_seq,
            failures: i.failures,
            run: i
                .run
                .map(super::changelog::run_from_proto)
                .transpose()?
                .map(Box::new),
            wake_at: optional_ts("active.wake_at", i.wake_at.as_ref())?,
            last_error: i.last_error,
            failed_at: optional_ts("active.failed_at", i.failed_at.as_ref())?,
        }),
        queued: i
            .queued
            .map(|q| {
                Ok::<_, DecodeError>(Placement {
                    lane: lane_from_proto("active.queued.lane", q.lane)?,
                    priority: q.priority,
                    order: q.order,
                })
            })
            .transpose()?,
        step_deadline: optional_ts("active.step_deadline", i.step_deadline.as_ref())?,
        overdue: i.overdue,
        priority: i.priority,
        lane: lane_from_proto("active.lane", i.lane)?,
        started_at: required_ts("active.started_at", i.started_at.as_ref())?,
        progress_at: required_ts("active.progress_at", i.progress_at.as_ref())?,
        source: i.source,
        runs: i.runs,
        seq_base: i.seq_base,
    })
}

pub(super) fn key_from_proto(m: v1::KeyRecord) -> Result<KeyRecord, DecodeError> {
    let active = m.active.map(instance_from_proto).transpose()?;
    let waiting = m
        .waiting
        .into_iter()
        .map(|l| {
            Ok(Launch {
                params: body("waiting.params_json", &l.params_json)?,
                position: super::result::position("waiting.position", &l.position)?,
                lane: lane_from_proto("waiting.lane", l.lane)?,
                priority: l.priority,
                reset: l.reset,
                source: l.source,
                at: required_ts("waiting.at", l.at.as_ref())?,
            })
        })
        .collect::<Result<_, DecodeError>>()?;
    let last = m
        .last
        .map(|o| {
            Ok::<_, DecodeError>(Outcome {
                n: o.n,
                status: status_from_proto(&o.status)?,
                finished_at: required_ts("last.finished_at", o.finished_at.as_ref())?,
                context: body("last.context_json", &o.context_json)?,
                error: o.error,
                instance: o
                    .instance
                    .map(instance_from_proto)
                    .transpose()?
                    .map(Box::new),
            })
        })
        .transpose()?;
    Ok(KeyRecord {
        active,
        waiting,
        last,
        goal: m.goal,
    })
}

pub(super) fn schedule_to_proto(r: &ScheduleRecord) -> v1::ScheduleRecord {
    let (next_key, scanning, after_offer) = match &r.cursor {
        None => (None, false, None),
        Some(Cursor::Key(k)) => (Some(*k), false, None),
        Some(Cursor::Offer(after)) => (None, true, after.clone()),
    };
    v1::ScheduleRecord {
        last_fire: r.last_fire.map(timestamp_to_proto),
        next_key,
        scanning,
        after_offer,
        launched: r.launched,
    }
}

pub(super) fn schedule_from_proto(m: v1::ScheduleRecord) -> Result<ScheduleRecord, DecodeError> {
    let cursor = match (m.next_key, m.scanning) {
        (Some(_), true) => return Err(DecodeError::AtMostOne("`next_key` and `scanning`")),
        (Some(k), false) => Some(Cursor::Key(k)),
        (None, true) => Some(Cursor::Offer(m.after_offer)),
        (None, false) => None,
    };
    Ok(ScheduleRecord {
        last_fire: optional_ts("last_fire", m.last_fire.as_ref())?,
        cursor,
        launched: m.launched,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::Position;
    use crate::run::{Phase, Run};

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    fn obj(v: serde_json::Value) -> Body {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn key_records_round_trip() {
        let record = KeyRecord {
            active: Some(InstanceRecord {
                n: 3,
                params: obj(serde_json::json!({"amount": 5, "big": u64::MAX})),
                context: obj(serde_json::json!({"tx": "0xab"})),
                chain: vec![
                    Step {
                        job: "reserve".into(),
                        params: None,
                    },
                    Step {
                        job: "audit".into(),
                        params: Some(obj(serde_json::json!({"level": 2}))),
                    },
                ],
                step: 1,
                slot: RunSlot::from(crate::run::SlotParts {
                    phase: Phase::Running,
                    run_seq: 2,
                    pass_seq: 4,
                    failures: 1,
                    run: Some(Box::new(Run {
                        run_id: "payout/u1#3.1#2".into(),
                        attempt: 2,
                        pass: 4,
                        dispatched_at: ts("2024-06-01T00:00:00Z"),
                        deadline: ts("2024-06-01T00:01:00Z"),
                    })),
                    wake_at: None,
                    last_error: Some("node down".into()),
                    failed_at: Some(ts("2024-05-31T23:59:00Z")),
                }),
                queued: Some(Placement {
                    lane: Lane::Low,
                    priority: -2,
                    order: -7,
                }),
                step_deadline: Some(ts("2024-06-01T06:00:00Z")),
                overdue: true,
                priority: -2,
                lane: Lane::Low,
                started_at: ts("2024-06-01T00:00:00Z"),
                progress_at: ts("2024-06-01T00:00:30Z"),
                source: Some("op:9".into()),
                runs: 5,
                seq_base: 3,
            }),
            waiting: vec![Launch {
                params: obj(serde_json::json!({"amount": 7})),
                position: Position::Front,
                lane: Lane::Live,
                priority: Some(4),
                reset: true,
                source: None,
                at: ts("2024-06-01T00:00:10Z"),
            }],
            last: Some(Outcome {
                n: 2,
                status: Status::TimedOut,
                finished_at: ts("2024-05-31T00:00:00Z"),
                context: Body::new(),
                error: None,
                instance: None,
            }),
            goal: true,
        };
        let back = key_from_proto(key_to_proto(&record)).unwrap();
        assert_eq!(back, record);
        assert!(written_as_prost(&record));
        // A failed instance is kept whole with its outcome.
        let mut failed = record.clone();
        let kept = failed.active.take().map(Box::new);
        failed.last = Some(Outcome {
            status: Status::Failed,
            error: Some("node down".into()),
            instance: kept,
            ..record.last.clone().unwrap()
        });
        assert_eq!(key_from_proto(key_to_proto(&failed)).unwrap(), failed);
        assert!(written_as_prost(&failed));
        let empty = KeyRecord::default();
        assert_eq!(key_from_proto(key_to_proto(&empty)).unwrap(), empty);
        assert!(written_as_prost(&empty));
        // Lengths of two and three bytes, zero priorities set, empty texts.
        let mut large = failed.clone();
        let long = "x".repeat(20_000);
        if let Some(o) = large.last.as_mut() {
            o.context = obj(serde_json::json!({"note": long}));
            o.error = Some(String::new());
        }
        large.waiting[0].priority = Some(0);
        large.waiting[0].source = Some(String::new());
        large.waiting.push(Launch {
            params: obj(serde_json::json!({"memo": "y".repeat(200)})),
            position: Position::Back,
            lane: Lane::Low,
            priority: Some(-3),
            reset: false,
            source: Some("op:1".into()),
            at: ts("1969-12-31T23:59:59.5Z"),
        });
        assert!(written_as_prost(&large));
        assert_eq!(key_from_proto(key_to_proto(&large)).unwrap(), large);
    }

    #[test]
    fn schedule_records_round_trip() {
        for cursor in [
            None,
            Some(Cursor::Key(1000)),
            Some(Cursor::Offer(None)),
            Some(Cursor::Offer(Some("o/7".into()))),
        ] {
            let r = ScheduleRecord {
                last_fire: Some(ts("2024-06-01T03:00:00Z")),
                cursor,
                launched: 12,
            };
            assert_eq!(schedule_from_proto(schedule_to_proto(&r)).unwrap(), r);
        }
    }
}
