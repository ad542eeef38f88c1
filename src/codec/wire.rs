//! Choosing the encoding: the output format of a topic, and detection of
//! protobuf or proto3 JSON on input.

use prost::Message;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::error::DecodeError;

/// The encoding of an output topic.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Format {
    /// Protobuf, the canonical encoding.
    #[default]
    Protobuf,
    /// The proto3 JSON mapping, with the field names of the schema (`run_id`).
    Json,
}

impl Format {
    /// Name in configuration and logs.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Whether an input value is proto3 JSON: its first non-blank byte is `{`,
/// which no protobuf message starts with (it would be a group tag).
pub fn is_json(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'{')
}

/// Decodes a message from either encoding, with or without Schema Registry
/// framing ([`super::frame`]).
pub(super) fn decode<M>(bytes: &[u8]) -> Result<M, DecodeError>
where
    M: Message + Default + DeserializeOwned,
{
    let bytes = super::frame::unframe(bytes)?;
    if !is_json(bytes) {
        return M::decode(bytes).map_err(|e| DecodeError::Protobuf(e.to_string()));
    }
    serde_json::from_slice(bytes).or_else(|json| {
        // Blank bytes are also protobuf tags (`\n` is field 1, length-delimited),
        // so `\n{` may be a protobuf string of 123 bytes: try that before
        // giving up. A value starting with `{` itself is JSON and nothing else.
        if bytes.first() != Some(&b'{') {
            if let Ok(message) = M::decode(bytes) {
                return Ok(message);
            }
        }
        Err(DecodeError::Json(json.to_string()))
    })
}

/// Encodes a message built from core values.
pub(super) fn encode<M>(message: &M, format: Format) -> Vec<u8>
where
    M: Message + Serialize,
{
    let mut buf = Vec::new();
    encode_into(message, format, &mut buf);
    buf
}

/// [`encode`], appended to `buf` (a batch's records share one buffer).
pub(super) fn encode_into<M>(message: &M, format: Format, buf: &mut Vec<u8>)
where
    M: Message + Serialize,
{
    match format {
        // `encode` fails only when a fixed buffer lacks room; a `Vec` grows.
        Format::Protobuf => {
            let _ = message.encode(buf);
        }
        Format::Json => serde_json::to_writer(buf, message).expect(
            "messages built from core values serialize: their enums are known \
             and jiff timestamps are within the JSON timestamp range",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::v1;

    #[test]
    fn detection() {
        assert!(is_json(b"{}"));
        assert!(is_json(b" \t\r\n{\"a\":1}"));
        assert!(!is_json(b""));
        assert!(!is_json(b"  "));
        assert!(!is_json(b"\x0a\x03abc"));
        assert!(!is_json(b"[1]"));
    }

    #[test]
    fn format_names() {
        assert_eq!(Format::default(), Format::Protobuf);
        for f in [Format::Protobuf, Format::Json] {
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("\"{}\"", f.as_str()));
            assert_eq!(serde_json::from_str::<Format>(&json).unwrap(), f);
        }
        assert!(serde_json::from_str::<Format>("\"Json\"").is_err());
    }

    #[test]
    fn protobuf_that_looks_like_json_is_still_read() {
        // A 123-byte first string field encodes as `\n{…`.
        let message = v1::RunResult {
            run_id: "r".repeat(123),
            pass: 7,
            ..Default::default()
        };
        let bytes = message.encode_to_vec();
        assert!(bytes.starts_with(b"\n{"));
        assert!(is_json(&bytes));
        assert_eq!(decode::<v1::RunResult>(&bytes).unwrap(), message);
    }

    #[test]
    fn broken_json_reports_json() {
        let err = decode::<v1::RunResult>(b"  {\"run_id\": ").unwrap_err();
        assert!(matches!(err, DecodeError::Json(_)), "{err}");
        let err = decode::<v1::RunResult>(b"{\"runid\": \"x\"}").unwrap_err();
        assert!(
            err.to_string().starts_with("json: unknown field `runid`"),
            "{err}"
        );
    }
}
