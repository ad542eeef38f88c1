//! A task's changelog record read in place ([`super::plain`]): a restore
//! reads one per task, and the generated decoder's intermediate message
//! (each string, map and timestamp built twice) was most of that work.
//! A hold or a launch (rare) is left to the generated decoder.

use jiff::Timestamp;

use super::plain::{fields, once, protobuf, text, timestamp, Wire};
use super::task_record::{state_from_proto, TASK_LAST_SEEN, TASK_RUN, TASK_SNAPSHOT};
use super::time::timestamp_from_proto;
use crate::run::{Run, RunSlot, SlotParts};
use crate::task::{InPlaceValue, TaskRecord, ValueList};

/// `bytes` read as a plain protobuf `TaskRecord`, `None` for any other
/// form (read by the generated decoder), including one that decoder would
/// refuse.
pub(super) fn plain_task(bytes: &[u8]) -> Option<TaskRecord> {
    let (mut snapshot, mut last_seen) = (Vec::new(), Vec::new());
    let mut record = plain_task_with(bytes, &mut |list, name, value| {
        let named = (crate::name_map::Name::from(name), value);
        match list {
            ValueList::Snapshot => snapshot.push(named),
            ValueList::LastSeen => last_seen.push(named),
        }
    })?;
    record.snapshot = snapshot.into();
    record.last_seen = last_seen.into();
    Some(record)
}

/// [`plain_task`] with the parameter values left in place: `values` gets
/// each (cleared first), where its name lies in `bytes`; the record's
/// lists stay empty.
pub(super) fn plain_task_in_place(
    bytes: &[u8],
    values: &mut Vec<InPlaceValue>,
) -> Option<TaskRecord> {
    values.clear();
    let mut outside = false;
    let record = plain_task_with(bytes, &mut |list, name, value| match within(
        bytes,
        name.as_bytes(),
    ) {
        Some(name) => values.push(InPlaceValue { list, name, value }),
        None => outside = true,
    })?;
    // A name read from the bytes lies in them: one that did not would leave
    // a list short, so the record would be left to the other reader.
    (!outside).then_some(record)
}

/// Where `part` (a slice of `whole`) lies in `whole`.
fn within(whole: &[u8], part: &[u8]) -> Option<std::ops::Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= whole.len()).then_some(start..end)
}

/// `bytes` read as a plain protobuf `TaskRecord`, each parameter value
/// given to `value` (its list, its name, its value) instead of kept.
fn plain_task_with<'a>(
    bytes: &'a [u8],
    value: &mut dyn FnMut(ValueList, &'a str, Timestamp),
) -> Option<TaskRecord> {
    let bytes = protobuf(bytes)?;
    let (mut state, mut failures, mut run_seq, mut pass_seq) = (None, None, None, None);
    let (mut since, mut queued_at, mut wake_at, mut last_success) = (None, None, None, None);
    let (mut sla_due, mut cron_at, mut failed_at) = (None, None, None);
    let (mut run, mut pause_requested, mut last_error, mut source) = (None, None, None, None);
    fields(bytes, |field, wire| match (field, wire) {
        (1, Wire::Varint(v)) => once(&mut state, v as i32),
        (2, Wire::Bytes(b)) => once(&mut since, instant(b)?),
        (3, Wire::Bytes(b)) => once(&mut queued_at, instant(b)?),
        (4, Wire::Bytes(b)) => once(&mut wake_at, instant(b)?),
        (5, Wire::Varint(v)) => once(&mut failures, v as u32),
        (6, Wire::Varint(v)) => once(&mut run_seq, v),
        (7, Wire::Varint(v)) => once(&mut pass_seq, v),
        (f, Wire::Bytes(b)) if f == u64::from(TASK_RUN) => once(&mut run, Box::new(run_of(b)?)),
        (f, Wire::Bytes(b)) if f == u64::from(TASK_SNAPSHOT) => {
            let (name, v) = entry(b)?;
            value(ValueList::Snapshot, name, v);
            Some(())
        }
        (f, Wire::Bytes(b)) if f == u64::from(TASK_LAST_SEEN) => {
            let (name, v) = entry(b)?;
            value(ValueList::LastSeen, name, v);
            Some(())
        }
        (11, Wire::Bytes(b)) => once(&mut last_success, instant(b)?),
        (12, Wire::Bytes(b)) => once(&mut sla_due, instant(b)?),
        (14, Wire::Varint(v)) => once(&mut pause_requested, v != 0),
        (15, Wire::Bytes(b)) => once(&mut last_error, text(b)?.to_string()),
        (18, Wire::Bytes(b)) => once(&mut cron_at, instant(b)?),
        (19, Wire::Bytes(b)) => once(&mut failed_at, instant(b)?),
        (20, Wire::Bytes(b)) => once(&mut source, text(b)?.to_string()),
        // The hold (13), launches (16, 17) and any field this version
        // does not know.
        _ => None,
    })?;
    Some(TaskRecord {
        slot: RunSlot::from(SlotParts {
            phase: state_from_proto(state.unwrap_or_default()).ok()?,
            run_seq: run_seq.unwrap_or_default(),
            pass_seq: pass_seq.unwrap_or_default(),
            failures: failures.unwrap_or_default(),
            run,
            wake_at,
            last_error,
            failed_at,
        }),
        since,
        queued_at,
        snapshot: Default::default(),
        last_seen: Default::default(),
        last_success,
        sla_due,
        hold: None,
        pause_requested: pause_requested.unwrap_or_default(),
        launch: None,
        again: None,
        cron_at,
        source,
    })
}

/// An embedded `google.protobuf.Timestamp` within jiff's range.
fn instant(bytes: &[u8]) -> Option<Timestamp> {
    timestamp_from_proto(&timestamp(bytes)?).ok()
}

/// A `RunRecord`, both of its times present.
fn run_of(bytes: &[u8]) -> Option<Run> {
    let (mut run_id, mut attempt, mut pass) = (None, None, None);
    let (mut dispatched_at, mut deadline) = (None, None);
    fields(bytes, |field, wire| match (field, wire) {
        (1, Wire::Bytes(b)) => once(&mut run_id, text(b)?),
        (2, Wire::Varint(v)) => once(&mut attempt, v as u32),
        (3, Wire::Varint(v)) => once(&mut pass, v),
        (4, Wire::Bytes(b)) => once(&mut dispatched_at, instant(b)?),
        (5, Wire::Bytes(b)) => once(&mut deadline, instant(b)?),
        _ => None,
    })?;
    Some(Run {
        run_id: run_id.unwrap_or_default().into(),
        attempt: attempt.unwrap_or_default(),
        pass: pass.unwrap_or_default(),
        dispatched_at: dispatched_at?,
        deadline: deadline?,
    })
}

/// A `map<string, Timestamp>` entry: a key left out is empty, a value left
/// out is the epoch (protobuf leaves out defaults).
fn entry(bytes: &[u8]) -> Option<(&str, Timestamp)> {
    let (mut key, mut value) = (None, None);
    fields(bytes, |field, wire| match (field, wire) {
        (1, Wire::Bytes(b)) => once(&mut key, text(b)?),
        (2, Wire::Bytes(b)) => once(&mut value, instant(b)?),
        _ => None,
    })?;
    Some((
        key.unwrap_or_default(),
        value.unwrap_or(Timestamp::UNIX_EPOCH),
    ))
}
