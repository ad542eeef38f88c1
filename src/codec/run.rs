//! `RunCommand`: what Reactor sends to workers.

use jiff::Timestamp;

use super::error::{non_empty, DecodeError};
use super::time::{proto_map, timestamp_to_proto};
use super::wire::{decode, encode, Format};
use crate::action::RunCommand;
use crate::proto::v1;

/// `RunCommand.kind` of a task run.
pub const KIND_TASK: &str = "task";

/// Encodes a run command with where to reply and when it was issued.
pub fn encode_run_command(
    command: &RunCommand,
    reply_topic: &str,
    reply_key: &str,
    issued_at: Timestamp,
    format: Format,
) -> Vec<u8> {
    let m = v1::RunCommand {
        run_id: command.run_id.clone(),
        kind: KIND_TASK.to_string(),
        task: command.task.clone(),
        attempt: command.attempt,
        pass: command.pass,
        params: command.params.clone(),
        snapshot: proto_map(&command.snapshot),
        deadline: Some(timestamp_to_proto(command.deadline)),
        reply_topic: reply_topic.to_string(),
        reply_key: reply_key.to_string(),
        issued_at: Some(timestamp_to_proto(issued_at)),
    };
    encode(&m, format)
}

/// Decodes a run command as a worker sees it (protobuf or JSON): the schema
/// type itself, since a worker needs the reply fields the core type lacks.
pub fn decode_run_command(bytes: &[u8]) -> Result<v1::RunCommand, DecodeError> {
    let mut m: v1::RunCommand = decode(bytes)?;
    // A worker cannot reply without it.
    m.run_id = non_empty("run_id", std::mem::take(&mut m.run_id))?;
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::time::timestamp_from_proto;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn command() -> RunCommand {
        RunCommand {
            task: "orders_daily".into(),
            run_id: "orders_daily#7".into(),
            attempt: 2,
            pass: 12,
            snapshot: [
                ("dwh.orders/max_dt".to_string(), ts("2021-04-25T03:27:33Z")),
                (
                    "dwh.users/updated_at".to_string(),
                    ts("2021-04-25T01:00:00.5Z"),
                ),
            ]
            .into(),
            params: [("mode".to_string(), "full".to_string())].into(),
            deadline: ts("2021-04-25T05:00:00Z"),
            key: "reports".into(),
            topic: None,
        }
    }

    #[test]
    fn round_trips_in_both_formats() {
        let cmd = command();
        let issued = ts("2021-04-25T04:00:00Z");
        for format in [Format::Protobuf, Format::Json] {
            let bytes = encode_run_command(&cmd, "reactor.results", "reports", issued, format);
            let m = decode_run_command(&bytes).unwrap();
            assert_eq!(m.run_id, cmd.run_id);
            assert_eq!(m.kind, "task");
            assert_eq!(m.task, cmd.task);
            assert_eq!((m.attempt, m.pass), (cmd.attempt, cmd.pass));
            assert_eq!(m.params, cmd.params);
            let snapshot: std::collections::BTreeMap<_, _> = m
                .snapshot
                .iter()
                .map(|(k, v)| (k.clone(), timestamp_from_proto(v).unwrap()))
                .collect();
            assert_eq!(snapshot, cmd.snapshot);
            assert_eq!(
                timestamp_from_proto(&m.deadline.unwrap()).unwrap(),
                cmd.deadline
            );
            assert_eq!(timestamp_from_proto(&m.issued_at.unwrap()).unwrap(), issued);
            assert_eq!(
                (m.reply_topic.as_str(), m.reply_key.as_str()),
                ("reactor.results", "reports")
            );
        }
    }

    #[test]
    fn json_output() {
        let bytes = encode_run_command(
            &command(),
            "reactor.results",
            "reports",
            ts("2021-04-25T04:00:00Z"),
            Format::Json,
        );
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "run_id": "orders_daily#7",
                "kind": "task",
                "task": "orders_daily",
                "attempt": 2,
                "pass": "12",
                "params": {"mode": "full"},
                "snapshot": {
                    "dwh.orders/max_dt": "2021-04-25T03:27:33+00:00",
                    "dwh.users/updated_at": "2021-04-25T01:00:00.500+00:00",
                },
                "deadline": "2021-04-25T05:00:00+00:00",
                "reply_topic": "reactor.results",
                "reply_key": "reports",
                "issued_at": "2021-04-25T04:00:00+00:00",
            })
        );
    }

    #[test]
    fn protobuf_is_deterministic() {
        let issued = ts("2021-04-25T04:00:00Z");
        let a = encode_run_command(&command(), "r", "k", issued, Format::Protobuf);
        let b = encode_run_command(&command(), "r", "k", issued, Format::Protobuf);
        assert_eq!(a, b);
    }

    #[test]
    fn run_id_is_required() {
        assert_eq!(
            decode_run_command(br#"{"task":"t"}"#).unwrap_err(),
            DecodeError::MissingField("run_id")
        );
    }
}
