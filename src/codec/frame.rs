//! Confluent Schema Registry framing, accepted on every input: magic byte
//! 0, a 4-byte big-endian schema id, then for protobuf the message-index
//! array (zigzag varints: a count, then that many indexes; a single 0 byte
//! stands for the first message) and the message, for JSON the JSON text.
//!
//! A protobuf message never starts with byte 0 (field number 0 does not
//! exist), so a framed value cannot be mistaken for a plain one. Only the
//! framing is checked: the schema id is not looked up and the indexes are
//! not matched against the schema, since each input topic carries one
//! message type.

use super::error::DecodeError;
use super::wire::is_json;

/// The magic byte that starts a framed value.
const MAGIC: u8 = 0;

/// Most message indexes read: nesting of the message in its file.
const MAX_INDEXES: u64 = 32;

/// `bytes` without Schema Registry framing, or as they are when unframed.
pub(super) fn unframe(bytes: &[u8]) -> Result<&[u8], DecodeError> {
    if bytes.first() != Some(&MAGIC) {
        return Ok(bytes);
    }
    let rest = bytes
        .get(5..)
        .ok_or(DecodeError::Framing("shorter than the 5-byte header"))?;
    if is_json(rest) {
        return Ok(rest);
    }
    let mut rest = rest;
    let count = zigzag(&mut rest)?;
    if count < 0 {
        return Err(DecodeError::Framing("negative message-index count"));
    }
    // A count of 0 is the shorthand for the single index 0.
    if count as u64 > MAX_INDEXES {
        return Err(DecodeError::Framing("more than 32 message indexes"));
    }
    for _ in 0..count {
        zigzag(&mut rest)?;
    }
    Ok(rest)
}

/// Reads one zigzag-encoded varint from the front of `bytes`.
fn zigzag(bytes: &mut &[u8]) -> Result<i64, DecodeError> {
    let mut value: u64 = 0;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            *bytes = &bytes[i + 1..];
            return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
        }
    }
    Err(DecodeError::Framing("truncated message index"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_values_pass() {
        for v in [&b""[..], b"{}", b"\x0a\x01a", b" {"] {
            assert_eq!(unframe(v).unwrap(), v);
        }
    }

    #[test]
    fn framed_protobuf_and_json() {
        // Schema 7, first message: the index array is a single 0 byte.
        assert_eq!(unframe(b"\0\0\0\0\x07\0\x0a\x01a").unwrap(), b"\x0a\x01a");
        // Indexes [1, 2]: count 2 (zigzag 4), then 2 and 4.
        assert_eq!(
            unframe(b"\0\0\0\0\x07\x04\x02\x04\x0a\x01a").unwrap(),
            b"\x0a\x01a"
        );
        assert_eq!(unframe(b"\0\0\0\x01\x00{\"a\":1}").unwrap(), b"{\"a\":1}");
        assert_eq!(unframe(b"\0\0\0\x01\x00 \n{}").unwrap(), b" \n{}");
        // An empty message after the indexes is an empty protobuf.
        assert_eq!(unframe(b"\0\0\0\0\x01\0").unwrap(), b"");
    }

    #[test]
    fn broken_framing() {
        let reason = |v: &[u8]| unframe(v).unwrap_err().to_string();
        assert_eq!(
            reason(b"\0\0\0"),
            "schema registry framing: shorter than the 5-byte header"
        );
        assert_eq!(
            reason(b"\0\0\0\0\x01"),
            "schema registry framing: truncated message index"
        );
        assert_eq!(
            reason(b"\0\0\0\0\x01\x01"),
            "schema registry framing: negative message-index count"
        );
        assert_eq!(
            reason(b"\0\0\0\0\x01\x7e"),
            "schema registry framing: more than 32 message indexes"
        );
        assert_eq!(
            reason(b"\0\0\0\0\x01\x02\xff"),
            "schema registry framing: truncated message index"
        );
    }
}
