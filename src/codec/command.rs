//! `Command`: an operator command, from `reactor.commands`.

use super::error::{non_empty, param_name, required, DecodeError};
use super::time::{required_ts, timestamp_to_proto};
use super::wire::{decode, encode, Format};
use crate::engine::Command;
use crate::proto::v1;
use crate::proto::v1::command::{ClearLast, Op, Pause, Resume, SetLast};

/// Decodes a `Command` (protobuf or JSON).
pub fn decode_command(bytes: &[u8]) -> Result<Command, DecodeError> {
    let m: v1::Command = decode(bytes)?;
    Ok(match required("op", m.op)? {
        Op::Pause(Pause { task }) => Command::Pause {
            task: non_empty("task", task)?,
        },
        Op::Resume(Resume { task }) => Command::Resume {
            task: non_empty("task", task)?,
        },
        Op::SetLast(SetLast { task, param, value }) => Command::SetLast {
            task: non_empty("task", task)?,
            param: param_name("param", &non_empty("param", param)?)?,
            value: required_ts("value", value.as_ref())?,
        },
        Op::ClearLast(ClearLast { task, param }) => Command::ClearLast {
            task: non_empty("task", task)?,
            // Present but empty is a mistake, not "every parameter": only an
            // absent param clears them all.
            param: param.map(|p| param_name("param", &p)).transpose()?,
        },
    })
}

/// Encodes a `Command`, for the CLI and tests.
pub fn encode_command(command: &Command, format: Format) -> Vec<u8> {
    let op = match command {
        Command::SetStageState { .. } | Command::Rescan { .. } | Command::UnparkOffer { .. } => {
            todo!("stage command encoding")
        }
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
