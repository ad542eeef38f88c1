//! Writing protobuf fields straight from core values, as prost writes them
//! (a proto3 default left out), for the records written per input: building
//! a generated message first would copy every string into it.

use jiff::Timestamp;
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, key_len, message, WireType};

use super::time::timestamp_to_proto;

/// A length-delimited field.
pub(super) fn put_bytes(tag: u32, bytes: &[u8], buf: &mut Vec<u8>) {
    put_len(tag, bytes.len(), buf);
    buf.extend_from_slice(bytes);
}

/// The key and length of a length-delimited field whose `len` bytes follow.
pub(super) fn put_len(tag: u32, len: usize, buf: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(len as u64, buf);
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
        encode_key(tag, WireType::Varint, buf);
        encode_varint(value, buf);
    }
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
    message::encode(tag, &timestamp_to_proto(t), buf);
}

/// Bytes [`put_ts`] writes.
pub(super) fn ts_len(tag: u32, t: Timestamp) -> usize {
    message::encoded_len(tag, &timestamp_to_proto(t))
}
