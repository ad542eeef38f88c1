//! Timestamps between jiff (the core) and `google.protobuf.Timestamp`.

use jiff::Timestamp;
use pbjson_types::Timestamp as ProtoTimestamp;

use super::error::DecodeError;
use super::put::{delimited_len, put_len, put_str, put_ts, ts_len};
use crate::ctl::ParamValues;

/// `t` as a protobuf Timestamp. Protobuf wants whole seconds rounded down
/// and non-negative nanos, while jiff gives both the sign of `t`, so
/// instants before 1970 are normalised.
pub fn timestamp_to_proto(t: Timestamp) -> ProtoTimestamp {
    // jiff's parts share the sign of `t` (-1.5 s is -1 s and -500,000,000
    // ns): borrow a second for the nanos. No 128-bit division: every
    // output carries timestamps.
    let (seconds, nanos) = (t.as_second(), t.subsec_nanosecond());
    if nanos < 0 {
        ProtoTimestamp {
            seconds: seconds - 1,
            nanos: nanos + 1_000_000_000,
        }
    } else {
        ProtoTimestamp { seconds, nanos }
    }
}

/// A protobuf Timestamp as a jiff instant; fails when `nanos` is outside
/// `0..1e9` or the instant is outside jiff's range (years -9999 to 9999).
pub fn timestamp_from_proto(t: &ProtoTimestamp) -> Result<Timestamp, jiff::Error> {
    if !(0..1_000_000_000).contains(&t.nanos) {
        return Err(jiff::Error::from_args(format_args!(
            "nanos {} outside 0..1000000000",
            t.nanos
        )));
    }
    // jiff resolves the signs (whole seconds rounded down, nanos up) as
    // protobuf means them, with no 128-bit arithmetic: a restore reads
    // several per record.
    Timestamp::new(t.seconds, t.nanos)
}

/// A present timestamp field, converted.
pub(super) fn required_ts(
    field: &'static str,
    t: Option<&ProtoTimestamp>,
) -> Result<Timestamp, DecodeError> {
    let t = t.ok_or(DecodeError::MissingField(field))?;
    convert(field, t)
}

/// An optional timestamp field, converted when present.
pub(super) fn optional_ts(
    field: &'static str,
    t: Option<&ProtoTimestamp>,
) -> Result<Option<Timestamp>, DecodeError> {
    t.map(|t| convert(field, t)).transpose()
}

/// A map of timestamps (`entity/param` → value), converted.
pub(super) fn ts_map(
    field: &'static str,
    map: impl IntoIterator<Item = (String, ProtoTimestamp)>,
) -> Result<ParamValues, DecodeError> {
    map.into_iter()
        .map(|(k, v)| Ok((k, convert(field, &v)?)))
        .collect()
}

/// A map of jiff timestamps as protobuf ones.
pub(super) fn proto_map(map: ParamValues) -> std::collections::BTreeMap<String, ProtoTimestamp> {
    map.into_iter()
        .map(|(k, v)| (k.into(), timestamp_to_proto(v)))
        .collect()
}

/// Appends `map<string, google.protobuf.Timestamp>` field `tag` to a
/// protobuf encoding as prost writes one (an entry per key in key order, a
/// default key or value left out), straight from the core's map: the
/// messages Reactor writes per record carry such maps, and building a
/// second map of protobuf timestamps for each would be all overhead.
pub(super) fn put_ts_map(tag: u32, map: &ParamValues, buf: &mut Vec<u8>) {
    // No reserve here: the writers allocate a record at its full length,
    // these bytes included ([`ts_map_room`]).
    for (key, value) in map {
        put_ts_entry(tag, ParamKey::Joined(key), *value, buf);
    }
}

/// At most the bytes [`put_ts_map`] appends.
pub(super) fn ts_map_room(map: &ParamValues) -> usize {
    map.iter()
        .map(|(key, _)| ts_entry_room(ParamKey::Joined(key)))
        .sum()
}

/// Bytes [`put_ts_map`] appends.
#[cfg(test)]
pub(super) fn ts_map_len(tag: u32, map: &ParamValues) -> usize {
    map.iter()
        .map(|(key, value)| ts_entry_len(tag, ParamKey::Joined(key), *value))
        .sum()
}

/// A parameter's name as a map key: `entity/param` in one string, or its
/// two parts (as a shard's table keeps them), written joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKey<'a> {
    /// `entity/param`.
    Joined(&'a str),
    /// Entity and parameter.
    Parts(&'a str, &'a str),
}

impl ParamKey<'_> {
    fn len(self) -> usize {
        match self {
            ParamKey::Joined(name) => name.len(),
            ParamKey::Parts(entity, param) => entity.len() + 1 + param.len(),
        }
    }
}

/// One entry of a `map<string, google.protobuf.Timestamp>` field `tag`,
/// as [`put_ts_map`] writes each.
pub(super) fn put_ts_entry(tag: u32, key: ParamKey<'_>, value: Timestamp, buf: &mut Vec<u8>) {
    put_len(tag, entry_len(key, value), buf);
    match key {
        ParamKey::Joined(name) => put_str(1, name, buf),
        ParamKey::Parts(entity, param) => {
            put_len(1, key.len(), buf);
            buf.extend_from_slice(entity.as_bytes());
            buf.push(b'/');
            buf.extend_from_slice(param.as_bytes());
        }
    }
    if value != Timestamp::UNIX_EPOCH {
        put_ts(2, value, buf);
    }
}

/// At most the bytes of a timestamp field: a key of up to two bytes, a
/// length byte and a body of at most 17.
pub(super) const TS_FIELD_ROOM: usize = 20;

/// At most the bytes [`put_ts_entry`] appends for `key` (keys and lengths
/// of up to five bytes each, the name, a timestamp field).
pub(super) fn ts_entry_room(key: ParamKey<'_>) -> usize {
    key.len() + 16 + TS_FIELD_ROOM
}

/// Bytes [`put_ts_entry`] appends.
#[cfg(test)]
pub(super) fn ts_entry_len(tag: u32, key: ParamKey<'_>, value: Timestamp) -> usize {
    delimited_len(tag, entry_len(key, value))
}

/// Bytes of a map entry: the key unless empty, the value unless the epoch
/// (the protobuf default, `0` seconds and `0` nanos).
fn entry_len(key: ParamKey<'_>, value: Timestamp) -> usize {
    let value = if value == Timestamp::UNIX_EPOCH {
        0
    } else {
        ts_len(2, value)
    };
    let key = match key.len() {
        0 => 0,
        n => delimited_len(1, n),
    };
    key + value
}

fn convert(field: &'static str, t: &ProtoTimestamp) -> Result<Timestamp, DecodeError> {
    timestamp_from_proto(t).map_err(|e| DecodeError::InvalidField {
        field,
        reason: format!("timestamp out of range: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use prost::encoding::{message, string};

    #[test]
    fn before_epoch_has_positive_nanos() {
        let t: Timestamp = "1969-12-31T23:59:59.25Z".parse().unwrap();
        let p = timestamp_to_proto(t);
        assert_eq!((p.seconds, p.nanos), (-1, 250_000_000));
        assert_eq!(timestamp_from_proto(&p).unwrap(), t);
    }

    const NANOS_PER_SECOND: i128 = 1_000_000_000;

    proptest! {
        /// Read as the instant its seconds and nanos add up to, up to
        /// both ends of jiff's range.
        #[test]
        fn a_timestamp_is_its_seconds_plus_its_nanos(
            seconds in prop_oneof![
                any::<i64>(),
                -377_705_116_802i64..-377_705_116_798,
                253_402_207_198i64..253_402_207_202,
                -3i64..3,
            ],
            nanos in prop_oneof![any::<i32>(), 0..1_000_000_000, Just(0), Just(999_999_999)],
        ) {
            let t = ProtoTimestamp { seconds, nanos };
            let sum = (0..1_000_000_000).contains(&nanos).then(|| {
                Timestamp::from_nanosecond(i128::from(seconds) * NANOS_PER_SECOND + i128::from(nanos))
            });
            match sum {
                Some(Ok(expected)) => prop_assert_eq!(timestamp_from_proto(&t).ok(), Some(expected)),
                _ => prop_assert!(timestamp_from_proto(&t).is_err()),
            }
        }
    }

    #[test]
    fn rejects_out_of_range() {
        let bad_nanos = ProtoTimestamp {
            seconds: 0,
            nanos: -1,
        };
        assert!(timestamp_from_proto(&bad_nanos).is_err());
        let too_late = ProtoTimestamp {
            seconds: i64::MAX,
            nanos: 0,
        };
        assert!(timestamp_from_proto(&too_late).is_err());
        let err = required_ts("value", Some(&too_late)).unwrap_err();
        assert!(err
            .to_string()
            .starts_with("field `value`: timestamp out of range"));
        assert_eq!(
            required_ts("value", None),
            Err(DecodeError::MissingField("value"))
        );
        assert_eq!(optional_ts("since", None), Ok(None));
    }

    #[test]
    fn a_default_key_or_value_is_left_out_as_prost_does() {
        let map: ParamValues = [
            (String::new(), Timestamp::UNIX_EPOCH),
            ("a/b".to_string(), Timestamp::UNIX_EPOCH),
        ]
        .into();
        let mut buf = Vec::new();
        put_ts_map(9, &map, &mut buf);
        let mut expected = Vec::new();
        prost::encoding::btree_map::encode(
            string::encode,
            string::encoded_len,
            message::encode,
            message::encoded_len,
            9,
            &proto_map(map),
            &mut expected,
        );
        assert_eq!(buf, expected);
        // Two entries: one empty, one with only its key.
        assert_eq!(buf, [0x4a, 0, 0x4a, 5, 0x0a, 3, b'a', b'/', b'b']);
    }

    #[test]
    fn limits_round_trip() {
        for t in [Timestamp::MIN, Timestamp::MAX, Timestamp::UNIX_EPOCH] {
            assert_eq!(timestamp_from_proto(&timestamp_to_proto(t)).unwrap(), t);
        }
    }

    proptest! {
        /// Written as prost writes the map: the same bytes.
        #[test]
        fn a_map_is_written_as_prost_writes_it(
            map in proptest::collection::btree_map(
                "[a-z./_]{0,12}",
                (-100_000i64..100_000, 0i32..1_000_000_000)
                    .prop_map(|(s, n)| Timestamp::new(s, n).unwrap()),
                0..6,
            ),
        ) {
            let map = ParamValues::from(map);
            let mut buf = Vec::new();
            put_ts_map(7, &map, &mut buf);
            prop_assert_eq!(buf.len(), ts_map_len(7, &map));
            prop_assert!(ts_map_room(&map) >= buf.len());
            let mut expected = Vec::new();
            prost::encoding::btree_map::encode(
                string::encode,
                string::encoded_len,
                message::encode,
                message::encoded_len,
                7,
                &proto_map(map.clone()),
                &mut expected,
            );
            prop_assert_eq!(buf, expected);
        }

        #[test]
        fn round_trips(
            secs in Timestamp::MIN.as_second()..Timestamp::MAX.as_second(),
            nanos in 0i32..1_000_000_000,
        ) {
            let t = Timestamp::new(secs, nanos).unwrap();
            let p = timestamp_to_proto(t);
            prop_assert!((0..1_000_000_000).contains(&p.nanos));
            prop_assert_eq!(timestamp_from_proto(&p).unwrap(), t);
        }
    }
}
