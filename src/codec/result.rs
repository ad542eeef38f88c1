//! `RunResult`: a worker's reply, from `reactor.results`.

use super::error::DecodeError;
use super::structs::{
    encode_with_json, json_from_value, optional_body, struct_from_body, JsonField,
};
use super::time::{optional_ts, timestamp_to_proto};
use super::validate;
use super::wire::{decode, Format};
use crate::engine::{RunResult, StageReply, StepReply, TimerChange, Update};
use crate::process::{NextJob, Position};
use crate::proto::v1;
use crate::run::Status;

/// Decodes a `RunResult` (protobuf or JSON). `reply_key` is not returned:
/// the engine routes by the Kafka key, which the worker sets to it.
///
/// The stage fields become [`RunResult::stage`]: `version` 0 is none;
/// `update` and `body` exclude each other, as do `timer` and `clear_timer`,
/// and `clear_state` and a non-null `state`. A `null` state (protobuf) and
/// `clear_state` both give `state: Some(Value::Null)`. Numbers are
/// normalised. The result is then checked by [`validate::run_result`].
pub fn decode_run_result(bytes: &[u8]) -> Result<RunResult, DecodeError> {
    match super::input_plain::plain_run_result(bytes) {
        Some(parts) => assemble(parts),
        None => decode_generated(bytes),
    }
}

/// [`decode_run_result`] by the generated decoder: any form of the message.
pub(super) fn decode_generated(bytes: &[u8]) -> Result<RunResult, DecodeError> {
    let m: v1::RunResult = decode(bytes)?;
    let next = m
        .next
        .into_iter()
        .map(|n| {
            Ok(NextJob {
                job: n.job,
                params: optional_body("next.params", n.params)?,
                position: position("next.position", &n.position)?,
            })
        })
        .collect::<Result<Vec<_>, DecodeError>>()?;
    assemble(Parts {
        run_id: m.run_id,
        pass: m.pass,
        status: m.status,
        error: m.error,
        version: m.version,
        update: optional_body("update", m.update)?,
        body: optional_body("body", m.body)?,
        state: m.state.map(|s| json_from_value("state", s)).transpose()?,
        clear_state: m.clear_state,
        timer: m.timer,
        clear_timer: m.clear_timer,
        output: optional_body("output", m.output)?,
        next,
        goal_reached: m.goal_reached,
    })
}

/// A `RunResult`'s fields as read, JSON converted, before the rules of
/// [`decode_run_result`]: what both readers (the generated decoder and
/// [`super::input_plain`]) give.
#[derive(Debug, Default)]
pub(super) struct Parts {
    pub run_id: String,
    pub pass: u64,
    pub status: i32,
    pub error: String,
    pub version: u64,
    pub update: Option<crate::offer::Body>,
    pub body: Option<crate::offer::Body>,
    pub state: Option<serde_json::Value>,
    pub clear_state: bool,
    pub timer: Option<pbjson_types::Timestamp>,
    pub clear_timer: bool,
    pub output: Option<crate::offer::Body>,
    pub next: Vec<NextJob>,
    pub goal_reached: bool,
}

/// The rules of [`decode_run_result`] over the fields read.
fn assemble(p: Parts) -> Result<RunResult, DecodeError> {
    let status = match v1::RunStatus::try_from(p.status) {
        Ok(v1::RunStatus::Succeeded) => Status::Succeeded,
        Ok(v1::RunStatus::Failed) => Status::Failed,
        Ok(other) => return Err(DecodeError::Status(other.as_str_name().to_string())),
        Err(_) => return Err(DecodeError::Status(p.status.to_string())),
    };
    let update = match (p.update, p.body) {
        (None, None) => None,
        (Some(patch), None) => Some(Update::Patch(patch)),
        (None, Some(body)) => Some(Update::Body(body)),
        (Some(_), Some(_)) => return Err(DecodeError::AtMostOne("`update` and `body`")),
    };
    let state = match (p.state, p.clear_state) {
        (None, false) => None,
        (None, true) => Some(serde_json::Value::Null),
        (Some(state), clear) => {
            if clear && !state.is_null() {
                return Err(DecodeError::AtMostOne("`state` and `clear_state`"));
            }
            Some(state)
        }
    };
    let timer = match (optional_ts("timer", p.timer.as_ref())?, p.clear_timer) {
        (None, false) => None,
        (Some(at), false) => Some(TimerChange::Set(at)),
        (None, true) => Some(TimerChange::Clear),
        (Some(_), true) => return Err(DecodeError::AtMostOne("`timer` and `clear_timer`")),
    };
    validate::run_result(RunResult {
        run_id: p.run_id,
        pass: p.pass,
        status,
        error: Some(p.error).filter(|e| !e.is_empty()),
        stage: StageReply {
            version: Some(p.version).filter(|&v| v != 0),
            update,
            state,
            timer,
        },
        step: StepReply {
            output: p.output,
            next: p.next,
            goal_reached: p.goal_reached,
        },
    })
}

/// `front` or `back`; empty is `back`.
pub(super) fn position(field: &'static str, text: &str) -> Result<Position, DecodeError> {
    match text {
        "" => Ok(Position::Back),
        text => text.parse().map_err(|_| DecodeError::InvalidField {
            field,
            reason: format!("`{text}`: write `front` or `back`"),
        }),
    }
}

/// Encodes a `RunResult`, for workers, demo producers and tests.
pub fn encode_run_result(result: &RunResult, reply_key: &str, format: Format) -> Vec<u8> {
    let status = match result.status {
        Status::Succeeded => v1::RunStatus::Succeeded,
        Status::Failed => v1::RunStatus::Failed,
    };
    let stage = &result.stage;
    let m = v1::RunResult {
        run_id: result.run_id.clone(),
        pass: result.pass,
        reply_key: reply_key.to_string(),
        status: status.into(),
        error: result.error.clone().unwrap_or_default(),
        version: stage.version.unwrap_or(0),
        // A null state is written as `clear_state`, which JSON can carry.
        clear_state: stage.state.as_ref().is_some_and(serde_json::Value::is_null),
        timer: match stage.timer {
            Some(TimerChange::Set(at)) => Some(timestamp_to_proto(at)),
            _ => None,
        },
        clear_timer: stage.timer == Some(TimerChange::Clear),
        next: result
            .step
            .next
            .iter()
            .map(|n| v1::NextJob {
                job: n.job.clone(),
                params: n.params.as_ref().map(struct_from_body),
                position: <&str>::from(n.position).to_string(),
            })
            .collect(),
        goal_reached: result.step.goal_reached,
        ..Default::default()
    };
    let mut fields = Vec::new();
    match &stage.update {
        Some(Update::Patch(patch)) => fields.push((11, "update", JsonField::Struct(patch))),
        Some(Update::Body(body)) => fields.push((12, "body", JsonField::Struct(body))),
        None => {}
    }
    if let Some(state) = stage.state.as_ref().filter(|s| !s.is_null()) {
        fields.push((13, "state", JsonField::Value(state)));
    }
    if let Some(output) = &result.step.output {
        fields.push((20, "output", JsonField::Struct(output)));
    }
    encode_with_json(&m, &fields, format)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offer::Body;
    use serde_json::json;

    fn results() -> [RunResult; 2] {
        [
            RunResult {
                step: Default::default(),
                stage: Default::default(),
                run_id: "orders_daily#7".into(),
                pass: 12,
                status: Status::Succeeded,
                error: None,
            },
            RunResult {
                step: Default::default(),
                stage: Default::default(),
                run_id: "orders_daily#7".into(),
                pass: u64::MAX,
                status: Status::Failed,
                error: Some("db down".into()),
            },
        ]
    }

    #[test]
    fn round_trips_in_both_formats() {
        for format in [Format::Protobuf, Format::Json] {
            for r in results() {
                let bytes = encode_run_result(&r, "reports", format);
                assert_eq!(decode_run_result(&bytes).unwrap(), r, "{format:?}");
            }
        }
    }

    #[test]
    fn json_output() {
        let bytes = encode_run_result(&results()[1], "reports", Format::Json);
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "run_id": "orders_daily#7",
                "pass": "18446744073709551615",
                "reply_key": "reports",
                "status": "RUN_STATUS_FAILED",
                "error": "db down",
            })
        );
    }

    #[test]
    fn json_input_variants() {
        let expected = &results()[0];
        for line in [
            r#"{"run_id":"orders_daily#7","pass":12,"reply_key":"reports","status":"RUN_STATUS_SUCCEEDED"}"#,
            r#"{"runId":"orders_daily#7","pass":"12","replyKey":"reports","status":1}"#,
            r#"{"runId":"orders_daily#7","pass":12,"status":"RUN_STATUS_SUCCEEDED","error":""}"#,
        ] {
            assert_eq!(
                &decode_run_result(line.as_bytes()).unwrap(),
                expected,
                "{line}"
            );
        }
    }

    fn stage_results() -> Vec<RunResult> {
        let body = |v: serde_json::Value| v.as_object().unwrap().clone();
        let base = || RunResult::new("price/o1#3", 9, Status::Succeeded);
        let with = |stage: StageReply| RunResult { stage, ..base() };
        vec![
            with(StageReply {
                version: Some(4),
                update: Some(Update::Patch(body(
                    json!({"price_predicted": 118, "old": null}),
                ))),
                state: Some(json!({"model": 3})),
                timer: Some(TimerChange::Set("2024-07-01T00:00:00Z".parse().unwrap())),
            }),
            with(StageReply {
                version: Some(u64::MAX),
                update: Some(Update::Body(body(json!({"status": "expired", "n": 1.5})))),
                state: Some(json!(null)),
                timer: Some(TimerChange::Clear),
            }),
            with(StageReply {
                update: Some(Update::Body(Body::new())),
                state: Some(json!([1, "two", false])),
                ..StageReply::default()
            }),
            with(StageReply {
                state: Some(json!(0)),
                ..StageReply::default()
            }),
            RunResult {
                error: Some("model down".into()),
                status: Status::Failed,
                ..with(StageReply {
                    version: Some(4),
                    ..StageReply::default()
                })
            },
        ]
    }

    #[test]
    fn stage_results_round_trip_in_both_formats() {
        for format in [Format::Protobuf, Format::Json] {
            for r in stage_results() {
                let bytes = encode_run_result(&r, "o1", format);
                assert_eq!(decode_run_result(&bytes).unwrap(), r, "{format:?}");
            }
        }
    }

    #[test]
    fn stage_json_output() {
        let json = |r: &RunResult| -> serde_json::Value {
            serde_json::from_slice(&encode_run_result(r, "o1", Format::Json)).unwrap()
        };
        let all = stage_results();
        assert_eq!(
            json(&all[0]),
            json!({
                "run_id": "price/o1#3",
                "pass": "9",
                "reply_key": "o1",
                "status": "RUN_STATUS_SUCCEEDED",
                "version": "4",
                "update": {"price_predicted": 118, "old": null},
                "state": {"model": 3},
                "timer": "2024-07-01T00:00:00+00:00",
            })
        );
        assert_eq!(
            json(&all[1]),
            json!({
                "run_id": "price/o1#3",
                "pass": "9",
                "reply_key": "o1",
                "status": "RUN_STATUS_SUCCEEDED",
                "version": "18446744073709551615",
                "body": {"status": "expired", "n": 1.5},
                "clear_state": true,
                "clear_timer": true,
            })
        );
    }

    #[test]
    fn stage_json_input() {
        let decode = |json: &str| decode_run_result(json.as_bytes());
        let head = r#""run_id":"price/o1#3","pass":"9","status":"RUN_STATUS_SUCCEEDED""#;
        // Hand-written, the way the design's example has it.
        let r = decode(&format!(
            r#"{{{head},"version":4,"update":{{"price_predicted":118.0}},"state":{{"model":3}},"timer":"2024-07-01T00:00:00Z"}}"#
        ))
        .unwrap();
        let mut expected = stage_results()[0].clone();
        expected.stage.update = Some(Update::Patch(
            json!({"price_predicted": 118}).as_object().unwrap().clone(),
        ));
        assert_eq!(r, expected);
        let Some(Update::Patch(p)) = &r.stage.update else {
            panic!()
        };
        assert!(p["price_predicted"].is_i64());
        // `version` 0 means the dispatched one; `"state": null` is absent.
        let r = decode(&format!(
            r#"{{{head},"version":0,"state":null,"clearTimer":true}}"#
        ))
        .unwrap();
        assert_eq!(
            r.stage,
            StageReply {
                timer: Some(TimerChange::Clear),
                ..StageReply::default()
            }
        );
        let r = decode(&format!(r#"{{{head},"clear_state":true,"state":null}}"#)).unwrap();
        assert_eq!(r.stage.state, Some(json!(null)));
        let reason = |json: String| decode(&json).unwrap_err().to_string();
        assert_eq!(
            reason(format!(r#"{{{head},"update":{{}},"body":{{}}}}"#)),
            "at most one of `update` and `body` may be set"
        );
        assert_eq!(
            reason(format!(
                r#"{{{head},"timer":"2024-07-01T00:00:00Z","clear_timer":true}}"#
            )),
            "at most one of `timer` and `clear_timer` may be set"
        );
        assert_eq!(
            reason(format!(r#"{{{head},"state":1,"clear_state":true}}"#)),
            "at most one of `state` and `clear_state` may be set"
        );
        assert!(reason(format!(r#"{{{head},"update":[1]}}"#)).starts_with("json: "));
    }

    #[test]
    fn protobuf_null_state_clears() {
        let m = v1::RunResult {
            run_id: "p/o#1".into(),
            status: v1::RunStatus::Succeeded.into(),
            state: Some(pbjson_types::Value::from(())),
            ..Default::default()
        };
        let r = decode_run_result(&prost::Message::encode_to_vec(&m)).unwrap();
        assert_eq!(r.stage.state, Some(json!(null)));
        // And with clear_state as well: both say the same.
        let m = v1::RunResult {
            clear_state: true,
            ..m
        };
        let r = decode_run_result(&prost::Message::encode_to_vec(&m)).unwrap();
        assert_eq!(r.stage.state, Some(json!(null)));
    }

    #[test]
    fn status_is_required() {
        let reason = |json: &str| decode_run_result(json.as_bytes()).unwrap_err().to_string();
        assert_eq!(
            reason(r#"{"run_id":"a#1","pass":1}"#),
            "status must be SUCCEEDED or FAILED, got RUN_STATUS_UNSPECIFIED"
        );
        assert_eq!(
            reason(r#"{"run_id":"a#1","pass":1,"status":0}"#),
            "status must be SUCCEEDED or FAILED, got RUN_STATUS_UNSPECIFIED"
        );
        assert!(reason(r#"{"run_id":"a#1","status":"SUCCEEDED"}"#).starts_with("json: "));
        assert!(reason(r#"{"run_id":"a#1","status":7}"#).starts_with("json: "));
        assert_eq!(reason(r#"{"status":1}"#), "missing field `run_id`");
        // Protobuf carries unknown enum numbers through to the check.
        let unknown = prost::Message::encode_to_vec(&v1::RunResult {
            run_id: "a#1".into(),
            status: 7,
            ..Default::default()
        });
        assert_eq!(
            decode_run_result(&unknown).unwrap_err().to_string(),
            "status must be SUCCEEDED or FAILED, got 7"
        );
    }
}
