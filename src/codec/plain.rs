//! Reading *plain* protobuf in place: the form Reactor itself writes, each
//! field at most once, every field known. The records read most (CTL
//! changes, a restore's task records) are read this way without the
//! generated decoder's intermediate message; anything else reads as `None`,
//! and the caller then hands the bytes to the generated decoder, which reads
//! (or refuses) them as protobuf or JSON — so both ways agree by
//! construction wherever this one answers.

use pbjson_types::Timestamp as ProtoTimestamp;

/// One field's value, by wire type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wire<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1: a double or a fixed 64-bit integer.
    Fixed64(u64),
    /// Wire type 2: a string, bytes or an embedded message.
    Bytes(&'a [u8]),
}

/// The protobuf a plain reader reads of a record: its bytes without Schema
/// Registry framing; `None` for a framing that does not parse and for JSON,
/// both left to the generated decoder.
#[inline]
pub(super) fn protobuf(bytes: &[u8]) -> Option<&[u8]> {
    let bytes = super::frame::unframe(bytes).ok()?;
    (!super::wire::is_json(bytes)).then_some(bytes)
}

/// Calls `each(field number, value)` for every field of `bytes` in order;
/// `None` when the bytes are not well formed, hold a field of another wire
/// type (fixed-size or group), or `each` answers `None`. The messages
/// Reactor writes have no fixed-size field; a `Value`'s double is read by
/// [`any_fields`].
#[inline]
pub(super) fn fields<'a>(
    bytes: &'a [u8],
    mut each: impl FnMut(u64, Wire<'a>) -> Option<()>,
) -> Option<()> {
    any_fields(bytes, |number, value| match value {
        Wire::Fixed64(_) => None,
        value => each(number, value),
    })
}

/// [`fields`], fixed 64-bit fields included (still `None` for a fixed
/// 32-bit field or a group).
#[inline]
pub(super) fn any_fields<'a>(
    mut bytes: &'a [u8],
    mut each: impl FnMut(u64, Wire<'a>) -> Option<()>,
) -> Option<()> {
    while !bytes.is_empty() {
        let key = varint(&mut bytes)?;
        let value = match key & 7 {
            0 => Wire::Varint(varint(&mut bytes)?),
            1 => {
                let (word, rest) = bytes.split_first_chunk::<8>()?;
                bytes = rest;
                Wire::Fixed64(u64::from_le_bytes(*word))
            }
            2 => {
                let len = usize::try_from(varint(&mut bytes)?).ok()?;
                let (value, rest) = bytes.split_at_checked(len)?;
                bytes = rest;
                Wire::Bytes(value)
            }
            _ => return None,
        };
        each(key >> 3, value)?;
    }
    Some(())
}

/// Sets `slot` to `value` unless it was set before (a second occurrence
/// would be merged or replaced by protobuf's rules: left to the generated
/// decoder).
pub(super) fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value);
    Some(())
}

/// A `google.protobuf.Timestamp` whose two fields come at most once each.
pub(super) fn timestamp(mut bytes: &[u8]) -> Option<ProtoTimestamp> {
    // Not through `fields`: several per record, two known keys.
    let (mut seconds, mut nanos) = (None, None);
    while !bytes.is_empty() {
        match varint(&mut bytes)? {
            // Field 1 (seconds, int64) and 2 (nanos, int32) as varints,
            // narrowed as protobuf does.
            0x08 => once(&mut seconds, varint(&mut bytes)? as i64)?,
            0x10 => once(&mut nanos, varint(&mut bytes)? as i32)?,
            _ => return None,
        }
    }
    Some(ProtoTimestamp {
        seconds: seconds.unwrap_or_default(),
        nanos: nanos.unwrap_or_default(),
    })
}

/// A string field's text.
pub(super) fn text(bytes: &[u8]) -> Option<&str> {
    std::str::from_utf8(bytes).ok()
}

/// Reads a varint of at most ten bytes, as protobuf allows.
#[inline]
pub(super) fn varint(bytes: &mut &[u8]) -> Option<u64> {
    // Field keys, lengths and most small numbers take one byte.
    if let Some((&b, rest)) = bytes.split_first() {
        if b < 0x80 {
            *bytes = rest;
            return Some(u64::from(b));
        }
    }
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        if i == 9 && b > 1 {
            return None;
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            *bytes = bytes.get(i + 1..)?;
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::put::put_varint;

    #[test]
    fn fields_are_read_in_order_and_other_wire_types_refused() {
        let mut bytes = Vec::new();
        put_varint(1 << 3, &mut bytes);
        put_varint(300, &mut bytes);
        put_varint(7 << 3 | 2, &mut bytes);
        put_varint(2, &mut bytes);
        bytes.extend_from_slice(b"ab");
        let mut seen = Vec::new();
        let read = fields(&bytes, |f, v| {
            seen.push((f, v));
            Some(())
        });
        assert_eq!(read, Some(()));
        assert_eq!(seen, [(1, Wire::Varint(300)), (7, Wire::Bytes(b"ab"))]);
        // A fixed64 field, a length past the end, a varint of 11 bytes.
        let mut long = vec![0x08];
        long.extend([0x80; 10]);
        long.push(1);
        for bad in [&[0x09, 0, 0, 0, 0, 0, 0, 0, 0][..], &[0x0a, 3, b'a'], &long] {
            assert_eq!(fields(bad, |_, _| Some(())), None, "{bad:?}");
        }
    }

    proptest::proptest! {
        /// Read as prost reads it, whatever follows.
        #[test]
        fn a_varint_reads_as_prost_reads_it(
            value in proptest::prelude::any::<u64>(),
            tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..3),
        ) {
            let mut bytes = Vec::new();
            put_varint(value, &mut bytes);
            bytes.extend(&tail);
            let mut ours = bytes.as_slice();
            proptest::prop_assert_eq!(varint(&mut ours), Some(value));
            proptest::prop_assert_eq!(ours, tail.as_slice());
        }

        /// Any bytes: both read the same value and leave the same rest, or both refuse.
        #[test]
        fn any_bytes_read_as_prost_reads_them(
            // Runs of continuation bytes reach the tenth byte's rule often.
            run in proptest::collection::vec(0x80u8..=0xff, 0..11),
            tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..3),
        ) {
            let bytes = [run, tail].concat();
            let mut ours = bytes.as_slice();
            let mut theirs = bytes.as_slice();
            let read = varint(&mut ours);
            match prost::encoding::decode_varint(&mut theirs) {
                Ok(v) => {
                    proptest::prop_assert_eq!(read, Some(v));
                    proptest::prop_assert_eq!(ours, theirs);
                }
                Err(_) => proptest::prop_assert_eq!(read, None),
            }
        }
    }

    #[test]
    fn a_timestamp_field_given_twice_is_left_to_the_generated_decoder() {
        assert_eq!(
            timestamp(&[0x08, 5, 0x10, 7]),
            Some(ProtoTimestamp {
                seconds: 5,
                nanos: 7
            })
        );
        assert_eq!(timestamp(&[0x08, 5, 0x08, 6]), None);
        assert_eq!(timestamp(&[]), Some(ProtoTimestamp::default()));
    }
}
