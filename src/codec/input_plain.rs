//! The inputs others write that carry JSON — a worker's `RunResult`, an
//! `OfferChange` — read in place ([`super::plain`]), their JSON fields by
//! [`super::struct_plain`]: the generated decoder built pbjson's `Struct`
//! for a stage's update and state and for an offer's body (a `HashMap` per
//! object) and a string per field, which were most of the work of taking
//! them. Any other form — JSON, a field given twice or unknown to this
//! reader, a JSON value it leaves to the generated decoder — reads as
//! `None`, and the generated decoder reads (or refuses) the bytes, so both
//! ways give the same fields wherever this one answers.

use super::offer::ChangeFields;
use super::plain::{fields, once, protobuf, text, timestamp, Wire};
use super::result::{position, Parts};
use super::struct_plain::{plain_struct, plain_value};
use crate::process::NextJob;

/// `bytes` read as a plain protobuf `RunResult`.
pub(super) fn plain_run_result(bytes: &[u8]) -> Option<Parts> {
    let bytes = protobuf(bytes)?;
    let mut p = Parts::default();
    // Which singular fields were read (bit by field number): each may come
    // once, where the generated decoder would merge or replace a second.
    let mut seen = 0u32;
    fields(bytes, |number, value| {
        let bit = 1u32.checked_shl(u32::try_from(number).ok()?)?;
        if number != 21 {
            if seen & bit != 0 {
                return None;
            }
            seen |= bit;
        }
        match (number, value) {
            (1, Wire::Bytes(b)) => p.run_id = text(b)?.to_owned(),
            (2, Wire::Varint(v)) => p.pass = v,
            // The reply key routed the record here; checked as text.
            (3, Wire::Bytes(b)) => {
                text(b)?;
            }
            #[allow(clippy::cast_possible_truncation)]
            (4, Wire::Varint(v)) => p.status = v as i32,
            (5, Wire::Bytes(b)) => p.error = text(b)?.to_owned(),
            (10, Wire::Varint(v)) => p.version = v,
            (11, Wire::Bytes(b)) => p.update = Some(plain_struct(b)?),
            (12, Wire::Bytes(b)) => p.body = Some(plain_struct(b)?),
            (13, Wire::Bytes(b)) => p.state = Some(plain_value(b)?),
            (14, Wire::Varint(v)) => p.clear_state = v != 0,
            (15, Wire::Bytes(b)) => p.timer = Some(timestamp(b)?),
            (16, Wire::Varint(v)) => p.clear_timer = v != 0,
            (20, Wire::Bytes(b)) => p.output = Some(plain_struct(b)?),
            (21, Wire::Bytes(b)) => p.next.push(next_job(b)?),
            (22, Wire::Varint(v)) => p.goal_reached = v != 0,
            _ => return None,
        }
        Some(())
    })?;
    Some(p)
}

/// `bytes` read as a plain protobuf `OfferChange`.
pub(super) fn plain_offer_change(bytes: &[u8]) -> Option<ChangeFields> {
    let bytes = protobuf(bytes)?;
    let mut c = ChangeFields::default();
    let (mut id, mut deleted, mut source, mut changed_at) = (None, None, None, None);
    fields(bytes, |number, value| match (number, value) {
        (1, Wire::Bytes(b)) => once(&mut id, text(b)?),
        (2, Wire::Bytes(b)) => once(&mut c.body, plain_struct(b)?),
        (3, Wire::Bytes(b)) => once(&mut c.patch, plain_struct(b)?),
        (4, Wire::Varint(v)) => once(&mut deleted, v != 0),
        (5, Wire::Bytes(b)) => once(&mut source, text(b)?),
        // Informational: read only as the generated decoder would check it.
        (6, Wire::Bytes(b)) => once(&mut changed_at, timestamp(b)?),
        _ => None,
    })?;
    c.offer_id = id.unwrap_or_default().to_owned();
    c.deleted = deleted.unwrap_or_default();
    c.source = source.unwrap_or_default().to_owned();
    Some(c)
}

/// `NextJob { job = 1; params = 2; position = 3 }`; a position neither
/// `front` nor `back` is left to the generated decoder's reading, which
/// refuses it.
fn next_job(bytes: &[u8]) -> Option<NextJob> {
    let (mut job, mut params, mut pos) = (None, None, None);
    fields(bytes, |number, value| match (number, value) {
        (1, Wire::Bytes(b)) => once(&mut job, text(b)?),
        (2, Wire::Bytes(b)) => once(&mut params, plain_struct(b)?),
        (3, Wire::Bytes(b)) => once(&mut pos, text(b)?),
        _ => None,
    })?;
    Some(NextJob {
        job: job.unwrap_or_default().to_owned(),
        params,
        position: position("next.position", pos.unwrap_or_default()).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode_run_result, encode_run_result, Format};
    use crate::engine::{RunResult, StageReply, StepReply, TimerChange, Update};
    use crate::process::Position;
    use crate::proto::v1;
    use crate::run::Status;
    use proptest::prelude::*;
    use prost::Message;
    use serde_json::json;

    /// What the generated decoder reads from `bytes`, through the same rules.
    fn generated(bytes: &[u8]) -> Result<RunResult, String> {
        super::super::result::decode_generated(bytes).map_err(|e| e.to_string())
    }

    fn sample() -> RunResult {
        let mut r = RunResult::new("s1/o7#3".to_owned(), 2, Status::Succeeded);
        r.stage = StageReply {
            version: Some(5),
            update: Some(Update::Patch(
                json!({"z": 1, "a": [1.5, "x", null, {"k": true}]})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            )),
            state: Some(json!({"seen": 5})),
            timer: Some(TimerChange::Set("2026-01-01T00:00:00Z".parse().unwrap())),
        };
        r
    }

    fn step_sample() -> RunResult {
        let mut r = RunResult::new("chain/k1@3.send#1".to_owned(), 1, Status::Failed);
        r.error = Some("db down".into());
        r.step = StepReply {
            output: Some(json!({"b": 1}).as_object().cloned().unwrap_or_default()),
            next: vec![
                crate::process::NextJob {
                    job: "notify".into(),
                    params: None,
                    position: Position::Front,
                },
                crate::process::NextJob {
                    job: "send".into(),
                    params: json!({"p": "q"}).as_object().cloned(),
                    position: Position::Back,
                },
            ],
            goal_reached: true,
        };
        r
    }

    #[test]
    fn results_reactor_writes_are_read_in_place_as_the_generated_decoder_reads_them() {
        for r in [sample(), step_sample()] {
            let bytes = encode_run_result(&r, "o7", Format::Protobuf);
            assert!(plain_run_result(&bytes).is_some(), "{r:?}");
            let ours = decode_run_result(&bytes).map_err(|e| e.to_string());
            assert_eq!(ours, Ok(r));
            assert_eq!(ours, generated(&bytes));
        }
    }

    #[test]
    fn json_and_repeated_fields_are_left_to_the_generated_decoder() {
        let json = encode_run_result(&sample(), "o7", Format::Json);
        assert!(plain_run_result(&json).is_none());
        let mut twice = encode_run_result(&sample(), "o7", Format::Protobuf);
        twice.extend(
            v1::RunResult {
                pass: 9,
                ..Default::default()
            }
            .encode_to_vec(),
        );
        assert!(plain_run_result(&twice).is_none());
        // The generated decoder merges: the later pass wins.
        assert_eq!(decode_run_result(&twice).map(|r| r.pass), Ok(9));
    }

    fn changes() -> Vec<Vec<u8>> {
        use crate::offer::{Change, OfferChange};
        let body = json!({"n": 7, "price": 10.5, "tags": ["a", {"b": null}], "category": "home"});
        let body = body.as_object().cloned().unwrap_or_default();
        [
            Change::Body(body.clone()),
            Change::Patch(body),
            Change::Deleted,
        ]
        .into_iter()
        .map(|change| {
            let change = OfferChange {
                offer_id: "o7".into(),
                change,
                source: Some("crm".into()),
            };
            crate::codec::encode_offer_change(&change, Format::Protobuf)
        })
        .collect()
    }

    /// Both readers' fields, as text (a map compares equal in any order).
    fn read_both(bytes: &[u8]) -> (Option<String>, Option<String>) {
        let generated = super::super::offer::generated_change_fields(bytes).ok();
        (
            plain_offer_change(bytes).map(|f| format!("{f:?}")),
            generated.map(|f| format!("{f:?}")),
        )
    }

    #[test]
    fn offer_changes_reactor_writes_are_read_in_place_as_the_generated_decoder_reads_them() {
        for bytes in changes() {
            let (ours, theirs) = read_both(&bytes);
            assert!(ours.is_some());
            assert_eq!(ours, theirs);
        }
        let mut with_time = changes().remove(0);
        with_time.extend(
            v1::OfferChange {
                changed_at: Some(pbjson_types::Timestamp {
                    seconds: 5,
                    nanos: 1,
                }),
                ..Default::default()
            }
            .encode_to_vec(),
        );
        let (ours, theirs) = read_both(&with_time);
        assert!(ours.is_some());
        assert_eq!(ours, theirs);
    }

    proptest! {
        /// Any change to the bytes of an offer change: read in place, it
        /// reads as the generated decoder reads it.
        #[test]
        fn broken_offer_changes_read_as_the_generated_decoder_reads_them(
            which in 0usize..3,
            cut in any::<prop::sample::Index>(),
            flip in any::<(prop::sample::Index, u8)>(),
        ) {
            let mut bytes = changes().remove(which);
            let at = flip.0.index(bytes.len());
            bytes[at] ^= flip.1;
            bytes.truncate(cut.index(bytes.len() + 1));
            let (ours, theirs) = read_both(&bytes);
            if ours.is_some() {
                prop_assert_eq!(ours, theirs);
            }
        }

        /// Any change to the bytes of a result: read in place, it reads as
        /// the generated decoder reads it (errors by their text).
        #[test]
        fn broken_results_read_as_the_generated_decoder_reads_them(
            step in any::<bool>(),
            cut in any::<prop::sample::Index>(),
            flip in any::<(prop::sample::Index, u8)>(),
        ) {
            let r = if step { step_sample() } else { sample() };
            let mut bytes = encode_run_result(&r, "o7", Format::Protobuf);
            let at = flip.0.index(bytes.len());
            bytes[at] ^= flip.1;
            bytes.truncate(cut.index(bytes.len() + 1));
            if plain_run_result(&bytes).is_some() {
                prop_assert_eq!(
                    decode_run_result(&bytes).map_err(|e| e.to_string()),
                    generated(&bytes)
                );
            }
        }
    }
}
