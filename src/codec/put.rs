//! Writing protobuf fields straight from core values, as prost writes them
//! (a proto3 default left out), for the records written per input: building
//! a generated message first would copy every string into it.

use jiff::Timestamp;
use prost::encoding::{encoded_len_varint, key_len};

use super::time::timestamp_to_proto;

/// Wire types.
const VARINT: u64 = 0;
const SIXTY_FOUR_BIT: u64 = 1;
const LENGTH_DELIMITED: u64 = 2;

/// A varint, pushed byte by byte (prost's writer goes through `BufMut`,
/// several times the instructions per byte on a `Vec`).
pub(super) fn put_varint(mut value: u64, buf: &mut Vec<u8>) {
    while value >= 0x80 {
        buf.push((value as u8) | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

/// A field's key.
fn put_key(tag: u32, wire_type: u64, buf: &mut Vec<u8>) {
    put_varint(u64::from(tag) << 3 | wire_type, buf);
}

/// A length-delimited field.
pub(super) fn put_bytes(tag: u32, bytes: &[u8], buf: &mut Vec<u8>) {
    put_len(tag, bytes.len(), buf);
    buf.extend_from_slice(bytes);
}

/// The key and length of a length-delimited field whose `len` bytes follow.
pub(super) fn put_len(tag: u32, len: usize, buf: &mut Vec<u8>) {
    put_key(tag, LENGTH_DELIMITED, buf);
    put_varint(len as u64, buf);
}

/// A message field written in place: its key, then the body `write`
/// appends, prefixed with the body's length as prost writes it (the
/// shortest varint). The length is written once the body is — one byte is
/// kept for it, and a body of 128 bytes or more is moved up to make room —
/// so nested messages are never measured first.
pub(super) fn put_message(tag: u32, buf: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
    put_key(tag, LENGTH_DELIMITED, buf);
    let at = buf.len();
    buf.push(0);
    write(buf);
    let len = buf.len() - at - 1;
    if len < 0x80 {
        if let Some(b) = buf.get_mut(at) {
            *b = len as u8;
        }
    } else {
        let mut prefix = Vec::with_capacity(10);
        put_varint(len as u64, &mut prefix);
        buf.splice(at..=at, prefix);
    }
}

/// A JSON value as a `bytes` field of its text, written whatever it holds
/// (its text is never empty: `null` at least).
pub(super) fn put_json<T: serde::Serialize + ?Sized>(tag: u32, value: &T, buf: &mut Vec<u8>) {
    put_message(tag, buf, |buf| {
        // Core JSON values serialize: their keys are strings.
        let _ = serde_json::to_writer(buf, value);
    });
}

/// A `double` field, written whatever its value (a oneof member).
pub(super) fn put_double(tag: u32, value: f64, buf: &mut Vec<u8>) {
    put_key(tag, SIXTY_FOUR_BIT, buf);
    buf.extend_from_slice(&value.to_le_bytes());
}

/// A `sint64` field (zigzag); zero is left out.
pub(super) fn put_sint(tag: u32, value: i64, buf: &mut Vec<u8>) {
    put_uint(tag, zigzag(value), buf);
}

/// A `bool` field; false is left out.
pub(super) fn put_bool(tag: u32, value: bool, buf: &mut Vec<u8>) {
    put_uint(tag, u64::from(value), buf);
}

/// Size of a length-delimited field of `len` bytes.
pub(super) fn delimited_len(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

/// A `string` field; an empty one is left out.
pub(super) fn put_str(tag: u32, text: &str, buf: &mut Vec<u8>) {
    if !text.is_empty() {
        put_bytes(tag, text.as_bytes(), buf);
    }
}

/// Bytes [`put_str`] writes.
pub(super) fn str_len(tag: u32, text: &str) -> usize {
    if text.is_empty() {
        0
    } else {
        delimited_len(tag, text.len())
    }
}

/// A varint field (`uint32`, `uint64`); zero is left out.
pub(super) fn put_uint(tag: u32, value: u64, buf: &mut Vec<u8>) {
    if value != 0 {
        put_varint_field(tag, value, buf);
    }
}

/// A varint field written whatever its value (an `optional` one that is set).
pub(super) fn put_varint_field(tag: u32, value: u64, buf: &mut Vec<u8>) {
    put_key(tag, VARINT, buf);
    put_varint(value, buf);
}

/// A `sint64` value as its varint (zigzag).
pub(super) fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// Bytes [`put_uint`] writes.
pub(super) fn uint_len(tag: u32, value: u64) -> usize {
    if value == 0 {
        0
    } else {
        key_len(tag) + encoded_len_varint(value)
    }
}

/// A `google.protobuf.Timestamp` field (a message: written even when zero).
pub(super) fn put_ts(tag: u32, t: Timestamp, buf: &mut Vec<u8>) {
    let t = timestamp_to_proto(t);
    let (seconds, nanos) = (t.seconds as u64, i64::from(t.nanos) as u64);
    // Every record carries several timestamps, and nearly all of this
    // era's have five-byte `seconds` (2^28 s is 1978, 2^35 s past 3000) and
    // either no `nanos` (a whole second, as CTL values often are) or, three
    // times in four, five-byte ones (2^28 ns and more): those are written as
    // one fixed block, where pushing byte by byte paid a capacity check and
    // a length update for each of up to 15.
    if tag < 16 && (1 << 28..1 << 35).contains(&seconds) {
        let key = (tag << 3) as u8 | LENGTH_DELIMITED as u8;
        let s = |shift: u32| (seconds >> shift) as u8 | 0x80;
        let n = |shift: u32| (nanos >> shift) as u8 | 0x80;
        if nanos == 0 {
            let last = (seconds >> 28) as u8;
            buf.extend_from_slice(&[key, 6, 1 << 3, s(0), s(7), s(14), s(21), last]);
            return;
        }
        if nanos >= 1 << 28 {
            buf.extend_from_slice(&[
                key,
                12,
                1 << 3,
                s(0),
                s(7),
                s(14),
                s(21),
                (seconds >> 28) as u8,
                2 << 3,
                n(0),
                n(7),
                n(14),
                n(21),
                (nanos >> 28) as u8,
            ]);
            return;
        }
    }
    put_key(tag, LENGTH_DELIMITED, buf);
    // The body is at most 17 bytes (two keys, ten bytes of `seconds`, five
    // of `nanos`): its length is one byte, written once the body is.
    let at = buf.len();
    buf.push(0);
    // `seconds` (int64) and `nanos` (int32) as protobuf writes them: a
    // negative value as the ten bytes of its two's complement.
    put_uint(1, seconds, buf);
    put_uint(2, nanos, buf);
    let len = buf.len() - at - 1;
    if let Some(b) = buf.get_mut(at) {
        *b = len as u8;
    }
}

/// Bytes [`put_ts`] writes.
pub(super) fn ts_len(tag: u32, t: Timestamp) -> usize {
    let t = timestamp_to_proto(t);
    delimited_len(tag, ts_body_len(t.seconds, t.nanos))
}

fn ts_body_len(seconds: i64, nanos: i32) -> usize {
    uint_len(1, seconds as u64) + uint_len(2, i64::from(nanos) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `t` as field `tag` is what prost writes for the message, and
    /// [`ts_len`] its length.
    fn written_as_prost(tag: u32, t: Timestamp) -> Result<(), TestCaseError> {
        let mut ours = vec![7];
        put_ts(tag, t, &mut ours);
        let mut theirs = vec![7];
        prost::encoding::message::encode(tag, &timestamp_to_proto(t), &mut theirs);
        prop_assert_eq!(&ours, &theirs);
        prop_assert_eq!(ts_len(tag, t), ours.len() - 1);
        Ok(())
    }

    proptest! {
        /// A timestamp field is what prost writes for the message, and
        /// [`ts_len`] its length, over jiff's whole range.
        #[test]
        fn a_timestamp_is_written_as_prost_writes_it(
            ns in Timestamp::MIN.as_nanosecond()..=Timestamp::MAX.as_nanosecond(),
            tag in 1u32..5000,
        ) {
            written_as_prost(tag, Timestamp::from_nanosecond(ns).unwrap())?;
        }

        /// The same around the block written at once (five-byte `seconds`,
        /// no `nanos` or five-byte ones, a one-byte key) and at its edges.
        #[test]
        fn a_timestamp_of_this_era_is_written_as_prost_writes_it(
            seconds in (1i64 << 27)..(1i64 << 36),
            nanos in prop_oneof![Just(0i32), 0i32..1_000_000_000, (1i32 << 28)..1_000_000_000],
            tag in 1u32..40,
        ) {
            written_as_prost(tag, Timestamp::new(seconds, nanos).unwrap())?;
        }

        /// A message field written in place is what prost writes for a
        /// field of those bytes, whatever the length's varint takes (one
        /// to three bytes here).
        #[test]
        fn a_message_is_written_as_prost_writes_it(
            body in prop::collection::vec(any::<u8>(), 0..40_000),
            tag in 1u32..5000,
        ) {
            let mut ours = vec![7];
            put_message(tag, &mut ours, |buf| buf.extend_from_slice(&body));
            let mut theirs = vec![7];
            prost::encoding::bytes::encode(tag, &body, &mut theirs);
            prop_assert_eq!(ours, theirs);
        }

        /// `sint64` and `bool` fields as prost writes them, a default left out.
        #[test]
        fn sint_and_bool_are_written_as_prost_writes_them(v in any::<i64>(), b in any::<bool>(), tag in 1u32..5000) {
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            put_sint(tag, v, &mut ours);
            if v != 0 {
                prost::encoding::sint64::encode(tag, &v, &mut theirs);
            }
            put_bool(tag, b, &mut ours);
            if b {
                prost::encoding::bool::encode(tag, &b, &mut theirs);
            }
            prop_assert_eq!(ours, theirs);
        }
    }
}
