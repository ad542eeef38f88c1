//! Dead letters: a refused record goes to `reactor.dead` as it came, with
//! the reason and its coordinates in headers, and cut to fit the producer's
//! limit when it would not (headers `reactor.truncated`,
//! `reactor.original.size`). A dead letter therefore never aborts the
//! transaction that carries it.

use super::output::OutRecord;
use crate::codec::limits::truncate_text;

/// Longest reason kept in a dead letter's header.
pub const MAX_REASON_BYTES: usize = 1024;

/// Where a refused record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source<'a> {
    /// Its topic.
    pub topic: &'a str,
    /// Its partition.
    pub partition: i32,
    /// Its offset (-1 for an output refused before it was produced).
    pub offset: i64,
}

/// A dead letter decided but not committed yet: logged and counted once
/// its transaction commits, so a redone batch does not count it twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadNote {
    /// Source topic.
    pub topic: String,
    /// Source partition.
    pub partition: i32,
    /// Source offset.
    pub offset: i64,
    /// Why it was refused.
    pub reason: String,
    /// Whether the record was cut to fit.
    pub truncated: bool,
}

impl DeadNote {
    /// Logs and counts it.
    pub fn emit(&self) {
        crate::metrics::DeadLetter {
            topic: &self.topic,
            partition: self.partition,
            offset: self.offset,
            reason: &self.reason,
            truncated: self.truncated,
        }
        .emit();
    }
}

/// The dead letter of a record from `source` refused for `reason`, to
/// `dead_topic`, at most `max_record_bytes` as the producer counts them.
/// The value is cut first, then the key, when the record would not fit.
pub fn letter(
    dead_topic: &str,
    max_record_bytes: usize,
    source: Source<'_>,
    key: Option<&[u8]>,
    payload: Option<&[u8]>,
    reason: &str,
) -> (OutRecord, DeadNote) {
    let mut reason = reason.to_string();
    truncate_text(&mut reason, MAX_REASON_BYTES);
    let mut headers: Vec<(String, Vec<u8>)> = vec![
        ("reactor.reason".into(), reason.clone().into_bytes()),
        (
            "reactor.source.topic".into(),
            source.topic.as_bytes().to_vec(),
        ),
        (
            "reactor.source.partition".into(),
            source.partition.to_string().into_bytes(),
        ),
        (
            "reactor.source.offset".into(),
            source.offset.to_string().into_bytes(),
        ),
    ];
    let key = key.unwrap_or_default();
    let size = OutRecord::wire_size(key.len(), payload.map_or(0, <[u8]>::len), &headers);
    let truncated = size > max_record_bytes;
    let (key, payload) = if truncated {
        headers.push(("reactor.truncated".into(), b"true".to_vec()));
        headers.push((
            "reactor.original.size".into(),
            payload.map_or(0, <[u8]>::len).to_string().into_bytes(),
        ));
        headers.push((
            "reactor.original.key.size".into(),
            key.len().to_string().into_bytes(),
        ));
        let budget = max_record_bytes.saturating_sub(OutRecord::wire_size(0, 0, &headers));
        let key = &key[..key.len().min(budget)];
        let payload = payload.map(|p| &p[..p.len().min(budget - key.len())]);
        (key, payload)
    } else {
        (key, payload)
    };
    let record = OutRecord {
        topic: std::sync::Arc::from(dead_topic),
        partition: None,
        key: key.to_vec(),
        payload: payload.map(<[u8]>::to_vec),
        headers,
    };
    let note = DeadNote {
        topic: source.topic.to_string(),
        partition: source.partition,
        offset: source.offset,
        reason,
        truncated,
    };
    (record, note)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header<'a>(r: &'a OutRecord, key: &str) -> Option<&'a str> {
        r.headers
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| std::str::from_utf8(v).unwrap())
    }

    const SOURCE: Source<'static> = Source {
        topic: "reactor.results",
        partition: 2,
        offset: 41,
    };

    #[test]
    fn a_record_that_fits_goes_as_it_came() {
        let (r, note) = letter(
            "reactor.dead",
            1_000_000,
            SOURCE,
            Some(b"k"),
            Some(b"\xff\x00"),
            "protobuf: bad",
        );
        assert_eq!(
            (&*r.topic, r.key.as_slice(), r.payload.as_deref()),
            ("reactor.dead", &b"k"[..], Some(&b"\xff\x00"[..]))
        );
        assert_eq!(header(&r, "reactor.reason"), Some("protobuf: bad"));
        assert_eq!(header(&r, "reactor.source.topic"), Some("reactor.results"));
        assert_eq!(header(&r, "reactor.source.partition"), Some("2"));
        assert_eq!(header(&r, "reactor.source.offset"), Some("41"));
        assert_eq!(header(&r, "reactor.truncated"), None);
        assert!(!note.truncated);
    }

    #[test]
    fn a_record_too_large_is_cut_to_fit() {
        let max = 1_000_000;
        let payload = vec![7u8; max];
        let reason = "r".repeat(10 * MAX_REASON_BYTES);
        let (r, note) = letter("d", max, SOURCE, Some(b"key"), Some(&payload), &reason);
        assert!(r.size() <= max, "{}", r.size());
        assert!(r.size() > max - 1024, "{}", r.size());
        assert_eq!(r.key, b"key");
        assert_eq!(header(&r, "reactor.truncated"), Some("true"));
        assert_eq!(header(&r, "reactor.original.size"), Some("1000000"));
        assert!(header(&r, "reactor.reason").unwrap().len() <= MAX_REASON_BYTES);
        assert!(note.truncated);
        // A key alone too large is cut too, and the value dropped.
        let key = vec![1u8; 2 * max];
        let (r, _) = letter("d", max, SOURCE, Some(&key), Some(b"v"), "big key");
        assert!(r.size() <= max);
        assert_eq!(r.payload.as_deref(), Some(&b""[..]));
        assert_eq!(header(&r, "reactor.original.key.size"), Some("2000000"));
    }
}
