//! Turning engine actions into Kafka records of the shard's transaction.

use std::sync::Arc;

use jiff::Timestamp;

use crate::action::Action;
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

/// The names of the topics Reactor writes, each shared by the records
/// written there: a record per input to the changelog and one to a run or
/// event topic copied a topic name each.
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
    out: &mut Vec<OutRecord>,
) {
    let topics = &settings.topics;
    for action in actions {
        out.push(match action {
            Action::StageRun(run) => OutRecord {
                payload: Some(codec::encode_stage_run_command(
                    &run,
                    &topics.results,
                    now,
                    settings.formats.runs,
                )),
                partition: None,
                // Keyed by the offer: a worker's reply (keyed alike) comes
                // back to the partition that owns the offer.
                key: run.offer.into_bytes(),
                topic: Arc::from(run.topic),
                headers: Vec::new(),
            },
            Action::StepRun(run) => OutRecord {
                payload: Some(codec::encode_step_run_command(
                    &run,
                    &topics.results,
                    now,
                    settings.formats.runs,
                )),
                partition: None,
                // Keyed by the business key: the worker's reply (keyed alike)
                // comes back to the partition that owns the key.
                key: run.key.into_bytes(),
                topic: Arc::from(run.topic),
                headers: Vec::new(),
            },
            Action::OfferState(state) => OutRecord {
                payload: Some(codec::encode_offer_state(
                    &state,
                    now,
                    settings.formats.offer_state,
                )),
                topic: Arc::clone(&names.offer_state),
                partition: None,
                key: state.offer.into_bytes(),
                headers: Vec::new(),
            },
            Action::Run(run) => {
                let payload = codec::encode_run_command(
                    &run,
                    &topics.results,
                    &run.key,
                    now,
                    settings.formats.runs,
                );
                OutRecord {
                    topic: run.topic.map_or_else(|| Arc::clone(&names.runs), Arc::from),
                    partition: None,
                    // The task's id is the key: it moves there.
                    key: run.task.into_bytes(),
                    payload: Some(payload),
                    headers: Vec::new(),
                }
            }
            Action::Event(event) => OutRecord {
                topic: Arc::clone(&names.events),
                partition: None,
                key: event.key().as_bytes().to_vec(),
                payload: Some(codec::encode_event(&event, now, settings.formats.events)),
                headers: Vec::new(),
            },
            Action::Changelog(record) => {
                let (key, payload) = codec::encode_changelog(record);
                OutRecord {
                    topic: Arc::clone(&names.changelog),
                    partition: Some(partition),
                    key,
                    payload,
                    headers: Vec::new(),
                }
            }
        });
    }
}
