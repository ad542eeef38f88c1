//! Timestamps between jiff (the core) and `google.protobuf.Timestamp`.

use jiff::Timestamp;
use pbjson_types::Timestamp as ProtoTimestamp;

use super::error::DecodeError;

const NANOS_PER_SECOND: i128 = 1_000_000_000;

/// `t` as a protobuf Timestamp. Protobuf wants whole seconds rounded down
/// and non-negative nanos, while jiff gives both the sign of `t`, so
/// instants before 1970 are normalised.
pub fn timestamp_to_proto(t: Timestamp) -> ProtoTimestamp {
    let nanos = t.as_nanosecond();
    ProtoTimestamp {
        // Both fit: jiff's range is far inside i64 seconds.
        seconds: nanos.div_euclid(NANOS_PER_SECOND) as i64,
        nanos: nanos.rem_euclid(NANOS_PER_SECOND) as i32,
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
    Timestamp::from_nanosecond(i128::from(t.seconds) * NANOS_PER_SECOND + i128::from(t.nanos))
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
pub(super) fn ts_map<'a>(
    field: &'static str,
    map: impl IntoIterator<Item = (&'a String, &'a ProtoTimestamp)>,
) -> Result<std::collections::BTreeMap<String, Timestamp>, DecodeError> {
    map.into_iter()
        .map(|(k, v)| Ok((k.clone(), convert(field, v)?)))
        .collect()
}

/// A map of jiff timestamps as protobuf ones.
pub(super) fn proto_map(
    map: std::collections::BTreeMap<String, Timestamp>,
) -> std::collections::BTreeMap<String, ProtoTimestamp> {
    map.into_iter()
        .map(|(k, v)| (k, timestamp_to_proto(v)))
        .collect()
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

    #[test]
    fn before_epoch_has_positive_nanos() {
        let t: Timestamp = "1969-12-31T23:59:59.25Z".parse().unwrap();
        let p = timestamp_to_proto(t);
        assert_eq!((p.seconds, p.nanos), (-1, 250_000_000));
        assert_eq!(timestamp_from_proto(&p).unwrap(), t);
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
    fn limits_round_trip() {
        for t in [Timestamp::MIN, Timestamp::MAX, Timestamp::UNIX_EPOCH] {
            assert_eq!(timestamp_from_proto(&timestamp_to_proto(t)).unwrap(), t);
        }
    }

    proptest! {
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
