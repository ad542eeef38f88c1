//! Turning engine actions into Kafka records of the shard's transaction.

use jiff::Timestamp;

use crate::action::Action;
use crate::codec;
use crate::config::KafkaSettings;

/// One record to produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutRecord {
    /// Destination topic.
    pub topic: String,
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

/// Encodes the actions of shard `partition` at `now` (taken by value: their
/// strings move into the records instead of being copied).
pub fn encode(
    actions: Vec<Action>,
    partition: i32,
    settings: &KafkaSettings,
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
                topic: run.topic,
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
                topic: run.topic,
                headers: Vec::new(),
            },
            Action::OfferState(state) => OutRecord {
                payload: Some(codec::encode_offer_state(
                    &state,
                    now,
                    settings.formats.offer_state,
                )),
                topic: topics.offer_state.clone(),
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
                    topic: run.topic.unwrap_or_else(|| topics.runs.clone()),
                    partition: None,
                    // The task's id is the key: it moves there.
                    key: run.task.into_bytes(),
                    payload: Some(payload),
                    headers: Vec::new(),
                }
            }
            Action::Event(event) => OutRecord {
                topic: topics.events.clone(),
                partition: None,
                key: event.key().as_bytes().to_vec(),
                payload: Some(codec::encode_event(&event, now, settings.formats.events)),
                headers: Vec::new(),
            },
            Action::Changelog(record) => {
                let (key, payload) = codec::encode_changelog(record);
                OutRecord {
                    topic: topics.changelog.clone(),
                    partition: Some(partition),
                    key,
                    payload,
                    headers: Vec::new(),
                }
            }
        });
    }
}
