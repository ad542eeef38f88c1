//! The runtime's own changelog records, beside the engine's: marks of the
//! CTL dead letters a shard has reported. Key `ctl-dead/<ctl partition>`,
//! value a protobuf `google.protobuf.Int64Value` holding the highest offset
//! of that CTL partition reported as a dead letter (a tombstone forgets
//! it). Written in the same transaction as the dead letter, so that a
//! restart never reports a CTL record twice.

use prost::Message;

use super::error::DecodeError;

/// Key prefix of a CTL dead-letter mark.
const CTL_DEAD: &str = "ctl-dead/";

/// The changelog key and value marking `offset` of CTL partition
/// `ctl_partition` as reported.
pub fn encode_ctl_dead_mark(ctl_partition: i32, offset: i64) -> (Vec<u8>, Vec<u8>) {
    let key = format!("{CTL_DEAD}{ctl_partition}").into_bytes();
    (
        key,
        pbjson_types::Int64Value { value: offset }.encode_to_vec(),
    )
}

/// A changelog record as a CTL dead-letter mark: `None` when the key is not
/// a mark's (an engine record), else the CTL partition and the marked
/// offset (`None` for a tombstone).
pub fn decode_ctl_dead_mark(
    key: &[u8],
    value: Option<&[u8]>,
) -> Option<Result<(i32, Option<i64>), DecodeError>> {
    let partition = key.strip_prefix(CTL_DEAD.as_bytes())?;
    let bad = |reason| DecodeError::ChangelogKey {
        key: String::from_utf8_lossy(key).into_owned(),
        reason,
    };
    let decoded = std::str::from_utf8(partition)
        .ok()
        .and_then(|p| p.parse::<i32>().ok())
        .filter(|p| *p >= 0)
        .ok_or_else(|| bad("expected `ctl-dead/<partition>`"))
        .and_then(|p| {
            let offset = value
                .map(|v| {
                    pbjson_types::Int64Value::decode(v)
                        .map(|m| m.value)
                        .map_err(|e| DecodeError::Protobuf(e.to_string()))
                })
                .transpose()?;
            Ok((p, offset))
        });
    Some(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let (key, value) = encode_ctl_dead_mark(3, 1_234_567);
        assert_eq!(key, b"ctl-dead/3");
        assert_eq!(
            decode_ctl_dead_mark(&key, Some(&value)),
            Some(Ok((3, Some(1_234_567))))
        );
        assert_eq!(decode_ctl_dead_mark(&key, None), Some(Ok((3, None))));
    }

    #[test]
    fn other_records_are_not_marks() {
        assert_eq!(decode_ctl_dead_mark(b"task/t", Some(b"\x08\x01")), None);
        assert!(matches!(
            decode_ctl_dead_mark(b"ctl-dead/x", None),
            Some(Err(DecodeError::ChangelogKey { .. }))
        ));
        assert!(matches!(
            decode_ctl_dead_mark(b"ctl-dead/1", Some(b"\xff")),
            Some(Err(DecodeError::Protobuf(_)))
        ));
    }
}
