//! Turning engine actions into Kafka records of the shard's transaction.

use std::sync::Arc;

use jiff::Timestamp;

use crate::action::Action;
use crate::changelog::ChangelogRecord;
use crate::codec;
use crate::config::{KafkaSettings, Topics};

/// One record to produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutRecord {
    /// Destination topic (shared: most records go to a few topics).
    pub topic: Arc<str>,
    /// Explicit partition (the changelog is written to the shard's own
    /// partition); `None` lets the murmur2 partitioner pick by key.
    pub partition: Option<i32>,
    /// Record key.
    pub key: Vec<u8>,
    /// Value; `None` is a tombstone.
    pub payload: Option<Vec<u8>>,
    /// Headers.
    pub headers: Vec<(String, Vec<u8>)>,
}

/// Room librdkafka counts per record besides key, value and headers (the
/// v2 record batch header and the record's varints), rounded up.
const RECORD_OVERHEAD: usize = 128;
/// Room per header besides its key and value (varints), rounded up.
const HEADER_OVERHEAD: usize = 12;

impl OutRecord {
    /// The size librdkafka compares with `message.max.bytes` (an upper
    /// bound): a larger record is refused before it is sent.
    pub fn size(&self) -> usize {
        Self::wire_size(
            self.key.len(),
            self.payload.as_ref().map_or(0, Vec::len),
            &self.headers,
        )
    }

    /// [`Self::size`] of a record with these parts.
    #[inline]
    pub fn wire_size(key: usize, payload: usize, headers: &[(String, Vec<u8>)]) -> usize {
        RECORD_OVERHEAD
            + key
            + payload
            + headers
                .iter()
                .map(|(k, v)| k.len() + v.len() + HEADER_OVERHEAD)
                .sum::<usize>()
    }
}

/// A list of records to produce, their keys and values back to back in one
/// buffer. A batch's lists go to the committer and come back to be cleared
/// and filled again, so that records cost no allocation of their own: a
/// key and a value per record, allocated on the runtime's thread and freed
/// on the committer's, cost more than encoding them, and the pages they
/// freed were given back and zeroed again batch after batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutRecords {
    records: Vec<Slot>,
    bytes: Vec<u8>,
    /// The header lists records carry, each named by its index from a
    /// record (most carry none: index 0, the empty list, is never used).
    header_lists: Vec<Vec<(String, Vec<u8>)>>,
    /// The topics the records name, each once (kept across clears): a
    /// record names its topic by index, where a shared name per record
    /// cost two atomic updates of its count, on a line the committer's
    /// thread reads meanwhile (and a stage or step run a name of its own).
    topics: Vec<Arc<str>>,
    /// Each of [`OutRecords::topics`] → its index: a configuration may name
    /// many worker topics, too many to search one by one per record.
    topic_indices: hashbrown::HashMap<Arc<str>, usize, foldhash::fast::FixedState>,
    /// The indices of the last two topics named, compared before the map
    /// is asked: a task's records alternate between its run's topic and the
    /// changelog, and comparing two short names costs less than hashing one.
    recent: [usize; 2],
}

/// One record of an [`OutRecords`]: its key and value as ranges of the
/// list's buffer. 40 bytes: two records are written per fired task, a
/// batch's list outgrows the caches, and each line of it written costs a
/// miss (80 bytes with `Option`s of ranges and a header list each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    /// Where the key starts in the buffer.
    start: usize,
    /// Where the key ends and the value starts.
    key_end: usize,
    /// Where the value ends.
    end: usize,
    /// Index into [`OutRecords::topics`].
    topic: u32,
    /// The explicit partition, or [`BY_KEY`] (librdkafka's own "unassigned").
    partition: i32,
    /// Index into [`OutRecords::header_lists`], 0 for none.
    headers: u32,
    /// A tombstone (no value).
    tombstone: bool,
}

/// [`Slot::partition`] of a record the producer partitions by key.
const BY_KEY: i32 = -1;

/// A record of an [`OutRecords`], borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Out<'a> {
    /// Destination topic.
    pub topic: &'a str,
    /// Explicit partition, if any.
    pub partition: Option<i32>,
    /// Record key.
    pub key: &'a [u8],
    /// Value; `None` is a tombstone.
    pub payload: Option<&'a [u8]>,
    /// Headers.
    pub headers: &'a [(String, Vec<u8>)],
}

impl Out<'_> {
    /// See [`OutRecord::size`].
    #[inline]
    pub fn size(&self) -> usize {
        OutRecord::wire_size(
            self.key.len(),
            self.payload.map_or(0, <[u8]>::len),
            self.headers,
        )
    }
}

impl OutRecords {
    /// Adds `record` (its key and value copied into the buffer).
    pub fn push(&mut self, record: OutRecord) {
        let slot = self.slot(record);
        self.records.push(slot);
    }

    /// Adds a record to `topic` whose key `key` and value `write` append
    /// to the buffer they are given (`write` returns `false` for a
    /// tombstone).
    pub fn push_with(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        key: impl FnOnce(&mut Vec<u8>),
        write: impl FnOnce(&mut Vec<u8>) -> bool,
    ) {
        let topic = self.topic_index(topic);
        let start = self.bytes.len();
        key(&mut self.bytes);
        let key_end = self.bytes.len();
        let tombstone = !write(&mut self.bytes);
        if tombstone {
            self.bytes.truncate(key_end);
        }
        self.records.push(Slot {
            start,
            key_end,
            end: self.bytes.len(),
            topic,
            partition: partition.unwrap_or(BY_KEY),
            headers: 0,
            tombstone,
        });
    }

    /// Adds a record to `topic` keyed by `key`, partitioned by the
    /// producer, whose value `write` appends.
    pub fn push_keyed(&mut self, topic: &str, key: &str, write: impl FnOnce(&mut Vec<u8>)) {
        self.push_with(
            topic,
            None,
            |buf| buf.extend_from_slice(key.as_bytes()),
            |buf| {
                write(buf);
                true
            },
        );
    }

    /// The index of `topic` in [`OutRecords::topics`], added if new.
    fn topic_index(&mut self, topic: &str) -> u32 {
        let [last, before] = self.recent;
        for i in [last, before] {
            if self.topics.get(i).is_some_and(|t| **t == *topic) {
                return i as u32;
            }
        }
        let i = match self.topic_indices.get(topic) {
            Some(&i) => i,
            None => {
                let name: Arc<str> = Arc::from(topic);
                self.topics.push(Arc::clone(&name));
                self.topic_indices.insert(name, self.topics.len() - 1);
                self.topics.len() - 1
            }
        };
        self.recent = [i, last];
        // As many topics as a configuration names: far fewer than 2^32.
        i as u32
    }

    /// `record` as a slot, its key and value copied into the buffer.
    fn slot(&mut self, record: OutRecord) -> Slot {
        let OutRecord {
            topic,
            partition,
            key,
            payload,
            headers,
        } = record;
        let topic = self.topic_index(&topic);
        let start = self.bytes.len();
        self.bytes.extend_from_slice(&key);
        let key_end = self.bytes.len();
        if let Some(p) = &payload {
            self.bytes.extend_from_slice(p);
        }
        Slot {
            start,
            key_end,
            end: self.bytes.len(),
            topic,
            partition: partition.unwrap_or(BY_KEY),
            headers: self.header_list(headers),
            tombstone: payload.is_none(),
        }
    }

    /// Replaces record `i` by `record` (its old bytes stay until the list
    /// is cleared).
    pub fn replace(&mut self, i: usize, record: OutRecord) {
        let slot = self.slot(record);
        if let Some(old) = self.records.get_mut(i) {
            *old = slot;
        }
    }

    /// The index of a new header list holding `headers` (0 for none).
    fn header_list(&mut self, headers: Vec<(String, Vec<u8>)>) -> u32 {
        if headers.is_empty() {
            return 0;
        }
        if self.header_lists.is_empty() {
            self.header_lists.push(Vec::new());
        }
        self.header_lists.push(headers);
        // At most one list per record, and a list holds fewer records
        // than 2^32 (each takes a slot of memory and bytes of its own).
        (self.header_lists.len() - 1) as u32
    }

    /// Adds `headers` to every record from the `from`-th on whose topic is
    /// not `except`.
    pub fn add_headers(&mut self, from: usize, headers: &[(String, Vec<u8>)], except: &str) {
        let except = self.topic_indices.get(except).map(|&i| i as u32);
        for i in from..self.records.len() {
            let Some(&r) = self.records.get(i) else {
                break;
            };
            if Some(r.topic) == except {
                continue;
            }
            match self.header_lists.get_mut(r.headers as usize) {
                Some(list) if r.headers != 0 => list.extend_from_slice(headers),
                _ => {
                    let list = self.header_list(headers.to_vec());
                    if let Some(r) = self.records.get_mut(i) {
                        r.headers = list;
                    }
                }
            }
        }
    }

    /// Record `i`. Inlined: the runtime checks the size of every record
    /// it adds, and a call returned the view through memory (a stall of
    /// ~4 % of the runtime thread).
    #[inline]
    pub fn get(&self, i: usize) -> Option<Out<'_>> {
        self.records.get(i).map(|r| self.view(r))
    }

    /// The first record.
    pub fn first(&self) -> Option<Out<'_>> {
        self.get(0)
    }

    #[inline]
    fn view<'a>(&'a self, r: &'a Slot) -> Out<'a> {
        let bytes = |range: std::ops::Range<usize>| self.bytes.get(range).unwrap_or_default();
        Out {
            topic: self.topics.get(r.topic as usize).map_or("", |t| &**t),
            partition: (r.partition != BY_KEY).then_some(r.partition),
            key: bytes(r.start..r.key_end),
            payload: (!r.tombstone).then(|| bytes(r.key_end..r.end)),
            headers: match r.headers {
                0 => &[],
                i => self.header_lists.get(i as usize).map_or(&[], Vec::as_slice),
            },
        }
    }

    /// The records, in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = Out<'_>> + ExactSizeIterator + '_ {
        self.records.iter().map(|r| self.view(r))
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Whether the list holds room from earlier batches (worth keeping).
    pub fn has_room(&self) -> bool {
        self.records.capacity() > 0
    }

    /// Drops the records, keeping the room (and the topics).
    pub fn clear(&mut self) {
        self.records.clear();
        self.bytes.clear();
        self.header_lists.clear();
    }
}

impl<'a> IntoIterator for &'a OutRecords {
    type Item = Out<'a>;
    type IntoIter = Box<dyn Iterator<Item = Out<'a>> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

/// The names of the topics Reactor writes. A record in an [`OutRecords`]
/// names its topic by index; an owned [`OutRecord`] (a dead letter, a
/// forwarded launch) shares one of these instead of copying it.
#[derive(Debug, Clone)]
pub struct OutTopics {
    /// Task run commands without a topic of their own.
    pub runs: Arc<str>,
    /// Events.
    pub events: Arc<str>,
    /// The changelog.
    pub changelog: Arc<str>,
    /// Offer states.
    pub offer_state: Arc<str>,
    /// Operator commands (launches forwarded to their owner).
    pub commands: Arc<str>,
}

impl OutTopics {
    /// The configured topics' names.
    pub fn new(topics: &Topics) -> OutTopics {
        OutTopics {
            runs: Arc::from(topics.runs.as_str()),
            events: Arc::from(topics.events.as_str()),
            changelog: Arc::from(topics.changelog.as_str()),
            offer_state: Arc::from(topics.offer_state.as_str()),
            commands: Arc::from(topics.commands.as_str()),
        }
    }
}

/// Encodes the actions of shard `partition` at `now` (taken by value: their
/// strings move into the records instead of being copied) onto `out`.
pub fn encode(
    actions: impl IntoIterator<Item = Action>,
    partition: i32,
    settings: &KafkaSettings,
    names: &OutTopics,
    now: Timestamp,
    out: &mut OutRecords,
) {
    let topics = &settings.topics;
    // Every record is written in place into the batch's one buffer.
    for action in actions {
        match action {
            // Keyed by the offer: a worker's reply (keyed alike) comes back
            // to the partition that owns the offer.
            Action::StageRun(run) => {
                out.push_keyed(&run.topic, &run.offer, |buf| {
                    codec::encode_stage_run_command_into(
                        &run,
                        &topics.results,
                        now,
                        settings.formats.runs,
                        buf,
                    );
                });
            }
            // Keyed by the business key: the worker's reply (keyed alike)
            // comes back to the partition that owns the key.
            Action::StepRun(run) => {
                out.push_keyed(&run.topic, &run.key, |buf| {
                    codec::encode_step_run_command_into(
                        &run,
                        &topics.results,
                        now,
                        settings.formats.runs,
                        buf,
                    );
                });
            }
            Action::OfferState(state) => {
                out.push_keyed(&names.offer_state, &state.offer, |buf| {
                    codec::encode_offer_state_into(&state, now, settings.formats.offer_state, buf);
                });
            }
            Action::Run(run) => {
                let topic = run.topic.as_deref().unwrap_or(&names.runs);
                out.push_keyed(topic, run.task(), |buf| {
                    codec::encode_run_command_into(
                        &run,
                        &topics.results,
                        &run.key,
                        now,
                        settings.formats.runs,
                        buf,
                    );
                });
            }
            Action::Event(event) => {
                out.push_keyed(&names.events, event.key(), |buf| {
                    codec::encode_event_into(&event, now, settings.formats.events, buf);
                });
            }
            Action::Changelog(record) => {
                let ChangelogRecord { store, key, value } = record;
                out.push_with(
                    &names.changelog,
                    Some(partition),
                    |buf| codec::put_changelog_key(store, &key, buf),
                    |buf| match value {
                        Some(value) => {
                            codec::encode_value_into(&key, value, buf);
                            true
                        }
                        None => false,
                    },
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_takes_forty_bytes_of_the_list() {
        assert_eq!(std::mem::size_of::<Slot>(), 40);
    }

    #[test]
    fn explicit_partitions_tombstones_and_headers_read_back() {
        let mut out = OutRecords::default();
        out.push_with("a", Some(3), |b| b.extend_from_slice(b"k1"), |_| false);
        out.push_keyed("b", "k2", |b| b.extend_from_slice(b"v2"));
        out.push(OutRecord {
            topic: Arc::from("c"),
            partition: Some(0),
            key: b"k3".to_vec(),
            payload: Some(b"v3".to_vec()),
            headers: vec![("h".into(), b"x".to_vec())],
        });
        out.add_headers(1, &[("t".into(), b"y".to_vec())], "c");
        let seen: Vec<_> = out
            .iter()
            .map(|r| (r.topic, r.partition, r.key, r.payload, r.headers.to_vec()))
            .collect();
        let t = |k: &str, v: &[u8]| (k.to_string(), v.to_vec());
        assert_eq!(
            seen,
            vec![
                ("a", Some(3), &b"k1"[..], None, vec![]),
                ("b", None, &b"k2"[..], Some(&b"v2"[..]), vec![t("t", b"y")]),
                (
                    "c",
                    Some(0),
                    &b"k3"[..],
                    Some(&b"v3"[..]),
                    vec![t("h", b"x")]
                ),
            ]
        );
        out.clear();
        out.push_keyed("b", "k4", |b| b.extend_from_slice(b"v4"));
        assert_eq!(out.first().map(|r| r.headers.len()), Some(0));
    }

    fn owned(topic: &str, key: &[u8], payload: Option<&[u8]>) -> OutRecord {
        OutRecord {
            topic: Arc::from(topic),
            partition: None,
            key: key.to_vec(),
            payload: payload.map(<[u8]>::to_vec),
            headers: Vec::new(),
        }
    }

    #[test]
    fn records_keep_their_bytes_apart_and_the_room_across_clears() {
        let mut out = OutRecords::default();
        let changelog: Arc<str> = Arc::from("changelog");
        out.push(owned("runs", b"t1", Some(b"run")));
        out.push_with(
            &changelog,
            Some(3),
            |k| k.extend_from_slice(b"task/t1"),
            |v| {
                v.extend_from_slice(b"state");
                true
            },
        );
        // A tombstone: what the writer appended is not kept.
        out.push_with(
            &changelog,
            Some(3),
            |k| k.extend_from_slice(b"task/t2"),
            |v| {
                v.extend_from_slice(b"dropped");
                false
            },
        );
        out.push(owned("events", b"", None));
        out.add_headers(1, &[("traceparent".into(), b"00-x".to_vec())], &changelog);
        let got: Vec<_> = out
            .iter()
            .map(|r| (r.topic, r.partition, r.key, r.payload, r.headers.len()))
            .collect();
        assert_eq!(
            got,
            [
                ("runs", None, &b"t1"[..], Some(&b"run"[..]), 0),
                (
                    "changelog",
                    Some(3),
                    &b"task/t1"[..],
                    Some(&b"state"[..]),
                    0
                ),
                ("changelog", Some(3), &b"task/t2"[..], None, 0),
                ("events", None, &b""[..], None, 1),
            ]
        );
        assert_eq!(out.get(0).map(|r| r.size()), Some(RECORD_OVERHEAD + 5));
        out.replace(1, owned("dead", b"k", Some(b"v")));
        assert_eq!(
            out.get(1).map(|r| (r.topic, r.key)),
            Some(("dead", &b"k"[..]))
        );
        assert_eq!(
            (out.len(), out.iter().next_back().map(|r| r.topic)),
            (4, Some("events"))
        );
        out.clear();
        assert!(out.is_empty() && out.has_room() && out.first().is_none());
    }
}
