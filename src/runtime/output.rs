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

/// Encodes the actions of shard `partition` at `now`.
pub fn encode(
    actions: &[Action],
    partition: i32,
    settings: &KafkaSettings,
    now: Timestamp,
    out: &mut Vec<OutRecord>,
) {
    let topics = &settings.topics;
    for action in actions {
        out.push(match action {
            Action::StageRun(run) => OutRecord {
                topic: run.topic.clone(),
                partition: None,
                // Keyed by the offer: a worker's reply (keyed alike) comes
                // back to the partition that owns the offer.
                key: run.offer.as_bytes().to_vec(),
                payload: Some(codec::encode_stage_run_command(
                    run,
                    &topics.results,
                    now,
                    settings.formats.runs,
                )),
                headers: Vec::new(),
            },
            Action::StepRun(run) => OutRecord {
                topic: run.topic.clone(),
                partition: None,
                // Keyed by the business key: the worker's reply (keyed alike)
                // comes back to the partition that owns the key.
                key: run.key.as_bytes().to_vec(),
                payload: Some(codec::encode_step_run_command(
                    run,
                    &topics.results,
                    now,
                    settings.formats.runs,
                )),
                headers: Vec::new(),
            },
            Action::OfferState(state) => OutRecord {
                topic: topics.offer_state.clone(),
                partition: None,
                key: state.offer.as_bytes().to_vec(),
                payload: Some(codec::encode_offer_state(
                    state,
                    now,
                    settings.formats.offer_state,
                )),
                headers: Vec::new(),
            },
            Action::Run(run) => OutRecord {
                topic: run.topic.clone().unwrap_or_else(|| topics.runs.clone()),
                partition: None,
                key: run.task.as_bytes().to_vec(),
                payload: Some(codec::encode_run_command(
                    run,
                    &topics.results,
                    &run.key,
                    now,
                    settings.formats.runs,
                )),
                headers: Vec::new(),
            },
            Action::Event(event) => OutRecord {
                topic: topics.events.clone(),
                partition: None,
                key: event.key().as_bytes().to_vec(),
                payload: Some(codec::encode_event(event, now, settings.formats.events)),
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

/// A dead letter: the undecodable record as it came, with the reason and
/// its coordinates in headers.
pub fn dead_letter(
    settings: &KafkaSettings,
    source: (&str, i32, i64),
    key: Option<&[u8]>,
    payload: Option<&[u8]>,
    reason: &str,
) -> OutRecord {
    let (topic, partition, offset) = source;
    OutRecord {
        topic: settings.topics.dead.clone(),
        partition: None,
        key: key.unwrap_or_default().to_vec(),
        payload: payload.map(<[u8]>::to_vec),
        headers: vec![
            ("reactor.reason".into(), reason.as_bytes().to_vec()),
            ("reactor.source.topic".into(), topic.as_bytes().to_vec()),
            (
                "reactor.source.partition".into(),
                partition.to_string().into_bytes(),
            ),
            (
                "reactor.source.offset".into(),
                offset.to_string().into_bytes(),
            ),
        ],
    }
}
