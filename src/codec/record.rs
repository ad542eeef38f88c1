//! Records on the topics processes launch on (`on`): their value is read
//! as JSON (a producer's own schema, not Reactor's), with or without Schema
//! Registry framing, and checked like every other input.

use super::error::DecodeError;
use super::limits::check_record;
use super::validate;
use crate::engine::EventRecord;

/// Reads a record of `topic` as launch expressions see it: the value as
/// JSON (`record`), the key and UTF-8 headers. A value that is not JSON
/// text, or a key or header that is not UTF-8, is refused.
pub fn decode_event_record(
    topic: &str,
    key: Option<&[u8]>,
    payload: Option<&[u8]>,
    headers: &[(&str, &[u8])],
) -> Result<EventRecord, DecodeError> {
    check_record(key, payload)?;
    let bytes = super::frame::unframe(payload.unwrap_or_default())?;
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| DecodeError::Json(e.to_string()))?;
    let utf8 = |field: &'static str, bytes: &[u8]| {
        std::str::from_utf8(bytes)
            .map(str::to_string)
            .map_err(|_| DecodeError::InvalidField {
                field,
                reason: "not UTF-8".to_string(),
            })
    };
    let mut named = std::collections::BTreeMap::new();
    for (name, value) in headers {
        named.insert((*name).to_string(), utf8("headers", value)?);
    }
    validate::event_record(EventRecord {
        topic: topic.to_string(),
        key: utf8("key", key.unwrap_or_default())?,
        value,
        headers: named,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_values_with_or_without_framing() {
        let plain =
            decode_event_record("t", Some(b"p1"), Some(br#"{"a":1}"#), &[("h", b"v")]).unwrap();
        assert_eq!(plain.value["a"], 1);
        assert_eq!(plain.headers["h"], "v");
        let mut framed = vec![0, 0, 0, 0, 7];
        framed.extend_from_slice(br#"{"a":2}"#);
        let framed = decode_event_record("t", None, Some(&framed), &[]).unwrap();
        assert_eq!(framed.value["a"], 2);
        assert!(decode_event_record("t", None, Some(b"\x08\x01"), &[]).is_err());
        assert!(decode_event_record("t", Some(b"\xff"), Some(b"{}"), &[]).is_err());
    }
}
