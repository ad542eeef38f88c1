//! `CtlChange`: a CTL parameter's new value, from `ctl.changes`.

use jiff::Timestamp;

use super::error::DecodeError;
use super::time::{optional_ts, required_ts, timestamp_to_proto};
use super::validate;
use super::wire::{decode, encode, Format};
use crate::engine::Input;
use crate::proto::v1;

/// A decoded CTL change: what the engine needs of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtlRecord {
    /// Entity, e.g. `dwh.orders`.
    pub entity: String,
    /// Parameter of the entity, e.g. `max_dt`.
    pub param: String,
    /// The new value.
    pub value: Timestamp,
}

impl From<CtlRecord> for Input {
    fn from(r: CtlRecord) -> Self {
        Input::Ctl {
            entity: r.entity,
            param: r.param,
            value: r.value,
        }
    }
}

/// Decodes a `CtlChange` (protobuf or JSON). `changed_at` and `source` are
/// informational and only checked to be well-formed.
pub fn decode_ctl_change(bytes: &[u8]) -> Result<CtlRecord, DecodeError> {
    let m: v1::CtlChange = decode(bytes)?;
    let (entity, param) = validate::parameter(m.entity, m.param)?;
    let value = required_ts("value", m.value.as_ref())?;
    optional_ts("changed_at", m.changed_at.as_ref())?;
    Ok(CtlRecord {
        entity,
        param,
        value,
    })
}

/// Encodes a `CtlChange`, for tools and tests that drive Reactor.
pub fn encode_ctl_change(
    record: &CtlRecord,
    changed_at: Option<Timestamp>,
    source: &str,
    format: Format,
) -> Vec<u8> {
    let m = v1::CtlChange {
        entity: record.entity.clone(),
        param: record.param.clone(),
        value: Some(timestamp_to_proto(record.value)),
        changed_at: changed_at.map(timestamp_to_proto),
        source: source.to_string(),
    };
    encode(&m, format)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn record() -> CtlRecord {
        CtlRecord {
            entity: "dwh.orders".into(),
            param: "max_dt".into(),
            value: ts("2021-04-25T03:27:33Z"),
        }
    }

    #[test]
    fn round_trips_in_both_formats() {
        for format in [Format::Protobuf, Format::Json] {
            let bytes = encode_ctl_change(
                &record(),
                Some(ts("2021-04-25T03:30:00Z")),
                "loader",
                format,
            );
            assert_eq!(decode_ctl_change(&bytes).unwrap(), record(), "{format:?}");
        }
    }

    #[test]
    fn json_output_uses_schema_names() {
        let bytes = encode_ctl_change(
            &record(),
            Some(ts("2021-04-25T03:30:00Z")),
            "",
            Format::Json,
        );
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "entity": "dwh.orders",
                "param": "max_dt",
                "value": "2021-04-25T03:27:33+00:00",
                "changed_at": "2021-04-25T03:30:00+00:00",
            })
        );
    }

    #[test]
    fn hand_written_json() {
        let line = br#"{"entity":"dwh.orders","param":"max_dt","value":"2021-04-25T03:27:33Z"}"#;
        assert_eq!(decode_ctl_change(line).unwrap(), record());
        let camel = br#" {"entity":"dwh.orders","param":"max_dt","value":"2021-04-25T06:27:33+03:00","changedAt":"2021-04-25T03:30:00Z","source":"kcat"}
"#;
        assert_eq!(decode_ctl_change(camel).unwrap(), record());
        let input: Input = decode_ctl_change(line).unwrap().into();
        assert!(matches!(input, Input::Ctl { .. }));
    }

    #[test]
    fn invalid_changes() {
        let reason = |json: &str| decode_ctl_change(json.as_bytes()).unwrap_err().to_string();
        assert_eq!(
            reason(r#"{"entity":"dwh.orders","param":"max_dt"}"#),
            "missing field `value`"
        );
        assert_eq!(
            reason(r#"{"param":"max_dt","value":"2021-04-25T03:27:33Z"}"#),
            "missing field `entity`"
        );
        assert!(reason(
            r#"{"entity":"dwh orders","param":"max_dt","value":"2021-04-25T03:27:33Z"}"#
        )
        .starts_with("field `entity, param`: invalid parameter `dwh orders/max_dt`"));
        assert!(
            reason(r#"{"entity":"a/b","param":"c","value":"2021-04-25T03:27:33Z"}"#)
                .contains("invalid parameter")
        );
        assert!(reason(r#"{"entity":"a","param":"b","value":"yesterday"}"#).starts_with("json: "));
        assert!(reason("\u{1}\u{2}\u{3}").starts_with("protobuf: "));
        // Empty bytes are a valid empty protobuf message, which lacks fields.
        assert_eq!(reason(""), "missing field `entity`");
    }
}
