//! `RunResult`: a worker's reply, from `reactor.results`.

use super::error::{non_empty, DecodeError};
use super::wire::{decode, encode, Format};
use crate::engine::RunResult;
use crate::proto::v1;
use crate::run::Status;

/// Decodes a `RunResult` (protobuf or JSON). `reply_key` is not returned:
/// the engine routes by the Kafka key, which the worker sets to it.
pub fn decode_run_result(bytes: &[u8]) -> Result<RunResult, DecodeError> {
    let m: v1::RunResult = decode(bytes)?;
    let status = match v1::RunStatus::try_from(m.status) {
        Ok(v1::RunStatus::Succeeded) => Status::Succeeded,
        Ok(v1::RunStatus::Failed) => Status::Failed,
        Ok(other) => return Err(DecodeError::Status(other.as_str_name().to_string())),
        Err(_) => return Err(DecodeError::Status(m.status.to_string())),
    };
    Ok(RunResult {
        run_id: non_empty("run_id", m.run_id)?,
        pass: m.pass,
        status,
        error: Some(m.error).filter(|e| !e.is_empty()),
        stage: Default::default(),
    })
}

/// Encodes a `RunResult`, for workers, demo producers and tests.
pub fn encode_run_result(result: &RunResult, reply_key: &str, format: Format) -> Vec<u8> {
    let status = match result.status {
        Status::Succeeded => v1::RunStatus::Succeeded,
        Status::Failed => v1::RunStatus::Failed,
    };
    let m = v1::RunResult {
        run_id: result.run_id.clone(),
        pass: result.pass,
        reply_key: reply_key.to_string(),
        status: status.into(),
        error: result.error.clone().unwrap_or_default(),
    };
    encode(&m, format)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results() -> [RunResult; 2] {
        [
            RunResult {
                stage: Default::default(),
                run_id: "orders_daily#7".into(),
                pass: 12,
                status: Status::Succeeded,
                error: None,
            },
            RunResult {
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
