//! `Command`: an operator command, from `reactor.commands`.

use super::error::{non_empty, param_name, required, DecodeError};
use super::limits::check_name;
use super::structs::{encode_nested_with_json, json_from_value, optional_body, JsonField};
use super::time::{optional_ts, required_ts, timestamp_to_proto};
use super::validate;
use super::wire::{decode, encode, Format};
use crate::engine::Command;
use crate::ops::{Criteria, Kind, Mode, Position, Recover, RecoveryRecord, Search};
use crate::proto::v1;
use crate::proto::v1::command::{
    Cancel, CancelOperation, ClearLast, Launch, Op, Pause, Recover as RecoverOp, Rescan, ResetKey,
    Resume, Search as SearchOp, SetLast, SetStageState, Submit, UnparkOffer,
};

/// `Command.op` number of `set_stage_state`.
const SET_STAGE_STATE: u32 = 5;
/// `Command.op` number of `launch`.
const LAUNCH: u32 = 8;
/// `Command.op` number of `submit`.
const SUBMIT: u32 = 9;

/// Decodes a `Command` (protobuf or JSON). In `set_stage_state`, an absent
/// or `null` state clears the stage's state; numbers are normalised. The
/// command is then checked by [`validate::command`].
pub fn decode_command(bytes: &[u8]) -> Result<Command, DecodeError> {
    let m: v1::Command = decode(bytes)?;
    validate::command(match required("op", m.op)? {
        Op::Pause(Pause { task }) => Command::Pause { task },
        Op::Resume(Resume { task }) => Command::Resume { task },
        Op::SetLast(SetLast { task, param, value }) => Command::SetLast {
            task,
            param: parameter(non_empty("param", param)?)?,
            value: required_ts("value", value.as_ref())?,
        },
        Op::ClearLast(ClearLast { task, param }) => Command::ClearLast {
            task,
            // Present but empty is a mistake, not "every parameter": only an
            // absent param clears them all.
            param: param.map(parameter).transpose()?,
        },
        Op::SetStageState(SetStageState {
            offer_id,
            stage,
            state,
            version,
        }) => Command::SetStageState {
            offer: offer_id,
            stage,
            state: state
                .map(|s| json_from_value("state", s))
                .transpose()?
                .unwrap_or_default(),
            version,
        },
        // As for `clear_last`: only an absent filter means none.
        Op::Rescan(Rescan { stage, when }) => Command::Rescan { stage, when },
        Op::UnparkOffer(UnparkOffer { offer_id }) => Command::UnparkOffer { offer: offer_id },
        Op::Launch(l) => decode_launch(l)?,
        Op::Submit(Submit {
            job,
            key,
            params,
            position,
            priority,
        }) => Command::Submit {
            job,
            key,
            params: object("params", params)?,
            position: super::result::position("position", &position)?,
            priority,
        },
        Op::Cancel(Cancel { process, key }) => Command::Cancel { process, key },
        Op::ResetKey(ResetKey { process, key }) => Command::ResetKey { process, key },
        Op::Search(s) => Command::Search(Search {
            criteria: criteria(
                s.kind, s.name, s.key, s.state, s.error, s.since, s.until, s.step,
            )?,
            id: s.id,
            limit: s.limit,
        }),
        Op::Recover(r) => Command::Recover(recover_from_proto(r)?),
        Op::CancelOperation(CancelOperation { id }) => Command::CancelOperation { id },
    })
}

fn recover_from_proto(r: RecoverOp) -> Result<Recover, DecodeError> {
    let mode = match (r.from_start, r.from_step.is_empty(), r.retry) {
        (true, true, false) => Mode::FromStart,
        (false, false, false) => Mode::FromStep(r.from_step),
        (false, true, true) => Mode::Retry,
        _ => {
            return Err(DecodeError::InvalidField {
                field: "from_start",
                reason: "give exactly one of `from_start`, `from_step`, `retry`".to_string(),
            })
        }
    };
    Ok(Recover {
        criteria: criteria(
            r.kind, r.name, r.key, r.state, r.error, r.since, r.until, r.step,
        )?,
        id: r.id,
        mode,
        dry_run: r.dry_run,
    })
}

fn recover_to_proto(id: &str, criteria: &Criteria, mode: &Mode, dry_run: bool) -> RecoverOp {
    let (kind, name, key, state, error, since, until, step) = criteria_fields(criteria);
    let (from_start, from_step, retry) = match mode {
        Mode::FromStart => (true, String::new(), false),
        Mode::FromStep(s) => (false, s.clone(), false),
        Mode::Retry => (false, String::new(), true),
    };
    RecoverOp {
        id: id.to_string(),
        kind,
        name,
        key,
        state,
        error,
        since,
        until,
        step,
        from_start,
        from_step,
        retry,
        dry_run,
    }
}

/// The changelog record `recovery/<op>` of a recovery in progress.
pub(super) fn recovery_to_proto(op: &str, r: &RecoveryRecord) -> v1::RecoveryRecord {
    let (kind, name, key) = match &r.cursor {
        None => ("", "", ""),
        Some(Position::Task(task)) => ("task", task.as_str(), ""),
        Some(Position::Stage(offer, stage)) => ("stage", stage.as_str(), offer.as_str()),
        Some(Position::Key(process, key)) => ("process", process.as_str(), key.as_str()),
    };
    v1::RecoveryRecord {
        command: Some(recover_to_proto(op, &r.criteria, &r.mode, false)),
        cursor_kind: kind.to_string(),
        cursor_name: name.to_string(),
        cursor_key: key.to_string(),
        done: r.done,
        total: r.total,
        started_at: Some(timestamp_to_proto(r.started_at)),
    }
}

pub(super) fn recovery_from_proto(m: v1::RecoveryRecord) -> Result<RecoveryRecord, DecodeError> {
    let command = recover_from_proto(required("command", m.command)?)?;
    let cursor = match m.cursor_kind.as_str() {
        "" => None,
        "task" => Some(Position::Task(m.cursor_name)),
        "stage" => Some(Position::Stage(m.cursor_key, m.cursor_name)),
        "process" => Some(Position::Key(m.cursor_name, m.cursor_key)),
        other => {
            return Err(DecodeError::InvalidField {
                field: "cursor_kind",
                reason: format!("unknown kind `{other}`"),
            })
        }
    };
    Ok(RecoveryRecord {
        criteria: command.criteria,
        mode: command.mode,
        cursor,
        done: m.done,
        total: m.total,
        started_at: required_ts("started_at", m.started_at.as_ref())?,
    })
}

/// Operation criteria from their wire fields: an empty string is "any".
#[allow(clippy::too_many_arguments)]
fn criteria(
    kind: String,
    name: String,
    key: String,
    state: String,
    error: String,
    since: Option<pbjson_types::Timestamp>,
    until: Option<pbjson_types::Timestamp>,
    step: String,
) -> Result<Criteria, DecodeError> {
    let given = |s: String| Some(s).filter(|s| !s.is_empty());
    let kind = given(kind)
        .map(|k| {
            k.parse::<Kind>().map_err(|_| DecodeError::InvalidField {
                field: "kind",
                reason: format!("`{k}` is not one of `task`, `stage`, `process`"),
            })
        })
        .transpose()?;
    Ok(Criteria {
        kind,
        name: given(name),
        key: given(key),
        state: given(state),
        error: given(error),
        since: optional_ts("since", since.as_ref())?,
        until: optional_ts("until", until.as_ref())?,
        step: given(step),
    })
}

/// The wire fields of operation criteria, in `Search`'s field order.
type CriteriaFields = (
    String,
    String,
    String,
    String,
    String,
    Option<pbjson_types::Timestamp>,
    Option<pbjson_types::Timestamp>,
    String,
);

fn criteria_fields(c: &Criteria) -> CriteriaFields {
    let text = |s: &Option<String>| s.clone().unwrap_or_default();
    (
        c.kind.map(|k| k.to_string()).unwrap_or_default(),
        text(&c.name),
        text(&c.key),
        text(&c.state),
        text(&c.error),
        c.since.map(timestamp_to_proto),
        c.until.map(timestamp_to_proto),
        text(&c.step),
    )
}

/// A `param` field as a parameter name.
fn parameter(text: String) -> Result<crate::ctl::ParamName, DecodeError> {
    check_name("param", &text)?;
    param_name("param", &text)
}

/// A launch names a process and keys, or a task — never both.
fn decode_launch(l: Launch) -> Result<Command, DecodeError> {
    match (l.process.is_empty(), l.task.is_empty()) {
        (false, false) => Err(DecodeError::AtMostOne("`process` and `task`")),
        (true, true) => Err(DecodeError::MissingField("process")),
        (true, false) => {
            if !l.keys.is_empty() || l.params.is_some() {
                return Err(DecodeError::InvalidField {
                    field: "task",
                    reason: "a task launch takes `task_params`, not `keys` or `params`".to_string(),
                });
            }
            Ok(Command::LaunchTask {
                task: l.task,
                params: l.task_params.into_iter().collect(),
            })
        }
        (false, true) => Ok(Command::Launch {
            process: l.process,
            keys: l.keys,
            params: object("params", l.params)?,
            position: super::result::position("position", &l.position)?,
            reset: l.reset,
            source: Some(l.source).filter(|s| !s.is_empty()),
        }),
    }
}

fn object(
    field: &'static str,
    s: Option<pbjson_types::Struct>,
) -> Result<crate::offer::Body, DecodeError> {
    optional_body(field, s).map(Option::unwrap_or_default)
}

/// Encodes a `Command`, for the CLI and tests.
pub fn encode_command(command: &Command, format: Format) -> Vec<u8> {
    let op = match command {
        Command::SetStageState {
            offer,
            stage,
            state,
            version,
        } => {
            // The state is written canonically; a null one is left out.
            let m = SetStageState {
                offer_id: offer.clone(),
                stage: stage.clone(),
                state: None,
                version: *version,
            };
            let fields = match state {
                serde_json::Value::Null => vec![],
                state => vec![(3, "state", JsonField::Value(state))],
            };
            return encode_nested_with_json(
                SET_STAGE_STATE,
                "set_stage_state",
                &m,
                &fields,
                format,
            );
        }
        Command::Rescan { stage, when } => Op::Rescan(Rescan {
            stage: stage.clone(),
            when: when.clone(),
        }),
        Command::UnparkOffer { offer } => Op::UnparkOffer(UnparkOffer {
            offer_id: offer.clone(),
        }),
        Command::Pause { task } => Op::Pause(Pause { task: task.clone() }),
        Command::Resume { task } => Op::Resume(Resume { task: task.clone() }),
        Command::SetLast { task, param, value } => Op::SetLast(SetLast {
            task: task.clone(),
            param: param.to_string(),
            value: Some(timestamp_to_proto(*value)),
        }),
        Command::ClearLast { task, param } => Op::ClearLast(ClearLast {
            task: task.clone(),
            param: param.as_ref().map(ToString::to_string),
        }),
        Command::Launch {
            process,
            keys,
            params,
            position,
            reset,
            source,
        } => {
            let m = Launch {
                process: process.clone(),
                keys: keys.clone(),
                position: <&str>::from(*position).to_string(),
                reset: *reset,
                source: source.clone().unwrap_or_default(),
                ..Default::default()
            };
            let fields = [(3, "params", JsonField::Struct(params))];
            return encode_nested_with_json(LAUNCH, "launch", &m, &fields, format);
        }
        Command::LaunchTask { task, params } => Op::Launch(Launch {
            task: task.clone(),
            task_params: params.clone().into_iter().collect(),
            ..Default::default()
        }),
        Command::Submit {
            job,
            key,
            params,
            position,
            priority,
        } => {
            let m = Submit {
                job: job.clone(),
                key: key.clone(),
                params: None,
                position: <&str>::from(*position).to_string(),
                priority: *priority,
            };
            let fields = [(3, "params", JsonField::Struct(params))];
            return encode_nested_with_json(SUBMIT, "submit", &m, &fields, format);
        }
        Command::Cancel { process, key } => Op::Cancel(Cancel {
            process: process.clone(),
            key: key.clone(),
        }),
        Command::ResetKey { process, key } => Op::ResetKey(ResetKey {
            process: process.clone(),
            key: key.clone(),
        }),
        Command::Search(s) => {
            let (kind, name, key, state, error, since, until, step) = criteria_fields(&s.criteria);
            Op::Search(SearchOp {
                id: s.id.clone(),
                kind,
                name,
                key,
                state,
                error,
                since,
                until,
                step,
                limit: s.limit,
            })
        }
        Command::Recover(r) => {
            Op::Recover(recover_to_proto(&r.id, &r.criteria, &r.mode, r.dry_run))
        }
        Command::CancelOperation { id } => Op::CancelOperation(CancelOperation { id: id.clone() }),
    };
    encode(&v1::Command { op: Some(op) }, format)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctl::ParamName;

    fn commands() -> Vec<Command> {
        vec![
            Command::Pause { task: "t".into() },
            Command::Resume { task: "t".into() },
            Command::SetLast {
                task: "t".into(),
                param: ParamName::new("dwh.orders", "max_dt"),
                value: "2021-04-24T00:00:00Z".parse().unwrap(),
            },
            Command::ClearLast {
                task: "t".into(),
                param: Some(ParamName::new("dwh.orders", "max_dt")),
            },
            Command::ClearLast {
                task: "t".into(),
                param: None,
            },
            Command::SetStageState {
                offer: "o1".into(),
                stage: "price".into(),
                state: serde_json::json!({"model": 3, "weights": [0.5, 2], "at": null}),
                version: 4,
            },
            Command::SetStageState {
                offer: "o1".into(),
                stage: "price".into(),
                state: serde_json::Value::Null,
                version: u64::MAX,
            },
            Command::SetStageState {
                offer: "o1".into(),
                stage: "price".into(),
                state: serde_json::json!("x"),
                version: 0,
            },
            Command::Rescan {
                stage: "price".into(),
                when: Some("offer.price > 0".into()),
            },
            Command::Rescan {
                stage: "price".into(),
                when: None,
            },
            Command::UnparkOffer { offer: "o1".into() },
            Command::Launch {
                process: "payout".into(),
                keys: vec!["u1".into(), "u/2#x".into()],
                params: serde_json::json!({"amount": 5, "to": {"a": [1, 2.5]}})
                    .as_object()
                    .unwrap()
                    .clone(),
                position: crate::process::Position::Front,
                reset: true,
                source: Some("op:7".into()),
            },
            Command::Launch {
                process: "payout".into(),
                keys: vec!["u1".into()],
                params: Default::default(),
                position: crate::process::Position::Back,
                reset: false,
                source: None,
            },
            Command::LaunchTask {
                task: "orders_daily".into(),
                params: [("day".to_string(), "2024-06-01".to_string())].into(),
            },
            Command::Submit {
                job: "send_tx".into(),
                key: "u1".into(),
                params: serde_json::json!({"to": "x"}).as_object().unwrap().clone(),
                position: crate::process::Position::Front,
                priority: Some(-3),
            },
            Command::Cancel {
                process: "payout".into(),
                key: "u1".into(),
            },
            Command::ResetKey {
                process: "payout".into(),
                key: "u1".into(),
            },
            Command::Search(Search {
                id: "op1".into(),
                criteria: Criteria {
                    kind: Some(Kind::Process),
                    name: Some("pay*".into()),
                    key: Some("u?".into()),
                    state: Some("failed".into()),
                    error: Some("node down".into()),
                    since: Some("2024-06-01T00:00:00Z".parse().unwrap()),
                    until: Some("2024-06-02T00:00:00Z".parse().unwrap()),
                    step: Some("send_tx".into()),
                },
                limit: Some(20),
            }),
            Command::Search(Search {
                id: "op2".into(),
                criteria: Criteria::default(),
                limit: None,
            }),
            Command::Recover(Recover {
                id: "op3".into(),
                criteria: Criteria {
                    kind: Some(Kind::Stage),
                    state: Some("dead".into()),
                    ..Criteria::default()
                },
                mode: Mode::Retry,
                dry_run: true,
            }),
            Command::Recover(Recover {
                id: "op4".into(),
                criteria: Criteria {
                    name: Some("payout".into()),
                    ..Criteria::default()
                },
                mode: Mode::FromStep("send_tx".into()),
                dry_run: false,
            }),
            Command::Recover(Recover {
                id: "op5".into(),
                criteria: Criteria::default(),
                mode: Mode::FromStart,
                dry_run: false,
            }),
            Command::CancelOperation { id: "op4".into() },
        ]
    }

    #[test]
    fn round_trips_in_both_formats() {
        for format in [Format::Protobuf, Format::Json] {
            for c in commands() {
                let bytes = encode_command(&c, format);
                assert_eq!(decode_command(&bytes).unwrap(), c, "{format:?}");
            }
        }
    }

    #[test]
    fn json_shapes() {
        let json = |c: &Command| -> serde_json::Value {
            serde_json::from_slice(&encode_command(c, Format::Json)).unwrap()
        };
        let all = commands();
        assert_eq!(json(&all[0]), serde_json::json!({"pause": {"task": "t"}}));
        assert_eq!(
            json(&all[2]),
            serde_json::json!({"set_last": {"task": "t", "param": "dwh.orders/max_dt", "value": "2021-04-24T00:00:00+00:00"}})
        );
        assert_eq!(
            json(&all[4]),
            serde_json::json!({"clear_last": {"task": "t"}})
        );
        assert_eq!(
            json(&all[5]),
            serde_json::json!({"set_stage_state": {"offer_id": "o1", "stage": "price", "state": {"model": 3, "weights": [0.5, 2], "at": null}, "version": "4"}})
        );
        assert_eq!(
            json(&all[6]),
            serde_json::json!({"set_stage_state": {"offer_id": "o1", "stage": "price", "version": "18446744073709551615"}})
        );
        assert_eq!(
            json(&all[8]),
            serde_json::json!({"rescan": {"stage": "price", "when": "offer.price > 0"}})
        );
        assert_eq!(
            json(&all[10]),
            serde_json::json!({"unpark_offer": {"offer_id": "o1"}})
        );
    }

    #[test]
    fn stage_commands_hand_written() {
        let c = decode_command(
            br#"{"set_stage_state":{"offer_id":"o1","stage":"price","state":{"model":3.0},"version":"4"}}"#,
        )
        .unwrap();
        assert_eq!(
            c,
            Command::SetStageState {
                offer: "o1".into(),
                stage: "price".into(),
                state: serde_json::json!({"model": 3}),
                version: 4,
            }
        );
        let Command::SetStageState { state, .. } = c else {
            unreachable!()
        };
        assert!(state["model"].is_i64());
        // Absent and null both clear.
        for json in [
            r#"{"setStageState":{"offerId":"o1","stage":"price","version":4}}"#,
            r#"{"set_stage_state":{"offer_id":"o1","stage":"price","state":null,"version":4}}"#,
        ] {
            assert_eq!(
                decode_command(json.as_bytes()).unwrap(),
                Command::SetStageState {
                    offer: "o1".into(),
                    stage: "price".into(),
                    state: serde_json::Value::Null,
                    version: 4,
                },
                "{json}"
            );
        }
        assert_eq!(
            decode_command(br#"{"rescan":{"stage":"price"}}"#).unwrap(),
            Command::Rescan {
                stage: "price".into(),
                when: None,
            }
        );
        let reason = |json: &str| decode_command(json.as_bytes()).unwrap_err().to_string();
        assert_eq!(
            reason(r#"{"set_stage_state":{"stage":"price"}}"#),
            "missing field `offer_id`"
        );
        assert_eq!(
            reason(r#"{"set_stage_state":{"offer_id":"o1"}}"#),
            "missing field `stage`"
        );
        assert_eq!(reason(r#"{"rescan":{}}"#), "missing field `stage`");
        assert_eq!(
            reason(r#"{"rescan":{"stage":"p","when":""}}"#),
            "field `when`: empty; leave it out to rescan without a filter"
        );
        assert_eq!(reason(r#"{"unpark_offer":{}}"#), "missing field `offer_id`");
    }

    #[test]
    fn set_stage_state_protobuf_is_standard_and_deterministic() {
        use prost::Message;
        let c = &commands()[5];
        let bytes = encode_command(c, Format::Protobuf);
        assert_eq!(bytes, encode_command(c, Format::Protobuf));
        let m = v1::Command::decode(bytes.as_slice()).unwrap();
        let Some(Op::SetStageState(s)) = m.op else {
            panic!("{m:?}")
        };
        assert_eq!(
            (s.offer_id.as_str(), s.stage.as_str(), s.version),
            ("o1", "price", 4)
        );
        assert!(s.state.is_some());
    }

    #[test]
    fn recovery_records_round_trip() {
        use crate::changelog::{ChangelogRecord, Store, Value};
        let cursors = [
            None,
            Some(Position::Task("orders".into())),
            Some(Position::Stage("o/1".into(), "price".into())),
            Some(Position::Key("payout".into(), "u/1#2".into())),
        ];
        for cursor in cursors {
            let record = ChangelogRecord {
                store: Store::Recovery,
                key: "op-7".into(),
                value: Some(Value::Recovery(Box::new(RecoveryRecord {
                    criteria: Criteria {
                        kind: Some(Kind::Process),
                        name: Some("pay*".into()),
                        state: Some("failed".into()),
                        since: Some("2024-06-01T00:00:00Z".parse().unwrap()),
                        ..Criteria::default()
                    },
                    mode: Mode::FromStep("send_tx".into()),
                    cursor,
                    done: 1000,
                    total: 1204,
                    started_at: "2024-06-01T02:00:00Z".parse().unwrap(),
                }))),
            };
            let (key, value) = crate::codec::encode_changelog(record.clone());
            assert_eq!(key, b"recovery/op-7");
            let back = crate::codec::decode_changelog(&key, value.as_deref()).unwrap();
            assert_eq!(back, record);
        }
        let bad = v1::RecoveryRecord {
            command: Some(recover_to_proto(
                "x",
                &Criteria::default(),
                &Mode::Retry,
                false,
            )),
            cursor_kind: "offer".into(),
            started_at: Some(timestamp_to_proto("2024-06-01T00:00:00Z".parse().unwrap())),
            ..Default::default()
        };
        assert_eq!(
            recovery_from_proto(bad).unwrap_err().to_string(),
            "field `cursor_kind`: unknown kind `offer`"
        );
    }

    #[test]
    fn operations_hand_written() {
        let c = decode_command(
            br#"{"recover":{"id":"x","kind":"process","name":"payout","state":"failed","from_step":"send_tx"}}"#,
        )
        .unwrap();
        let Command::Recover(r) = c else {
            panic!("{c:?}")
        };
        assert_eq!(r.mode, Mode::FromStep("send_tx".into()));
        assert_eq!(r.criteria.kind, Some(Kind::Process));
        let reason = |json: &str| decode_command(json.as_bytes()).unwrap_err().to_string();
        assert_eq!(
            reason(r#"{"recover":{"id":"x","retry":true,"from_start":true}}"#),
            "field `from_start`: give exactly one of `from_start`, `from_step`, `retry`"
        );
        assert_eq!(
            reason(r#"{"search":{"id":"x","kind":"offer"}}"#),
            "field `kind`: `offer` is not one of `task`, `stage`, `process`"
        );
        assert_eq!(
            reason(r#"{"search":{"kind":"task"}}"#),
            "missing field `id`"
        );
        assert_eq!(reason(r#"{"cancel_operation":{}}"#), "missing field `id`");
    }

    #[test]
    fn hand_written() {
        let c = decode_command(
            br#"{"setLast":{"task":"t","param":"dwh.orders/max_dt","value":"2021-04-24T00:00:00Z"}}"#,
        )
        .unwrap();
        assert_eq!(c, commands()[2]);
        let reason = |json: &str| decode_command(json.as_bytes()).unwrap_err().to_string();
        assert_eq!(reason("{}"), "missing field `op`");
        assert_eq!(reason(r#"{"pause":{}}"#), "missing field `task`");
        assert_eq!(
            reason(r#"{"set_last":{"task":"t","param":"dwh.orders/max_dt"}}"#),
            "missing field `value`"
        );
        assert!(reason(r#"{"clear_last":{"task":"t","param":"max_dt"}}"#)
            .starts_with("field `param`: invalid parameter `max_dt`"));
        assert!(reason(r#"{"clear_last":{"task":"t","param":""}}"#).contains("invalid parameter"));
        assert!(reason(r#"{"pause":{"task":"t"},"resume":{"task":"t"}}"#).starts_with("json: "));
    }
}
