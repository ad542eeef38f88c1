//! Records on the topics processes launch on (`on`, seed 003's launch by
//! event). Their partitions are not shards: each record's launches are
//! forwarded as `launch` commands to the partitions that own their keys,
//! in the transaction that commits the record's offset, so every launch is
//! taken exactly once and validated (`conflict`, `reuse`, `when`) by the
//! shard that owns the key. Expressions that fail are `launch_rejected`
//! events; an unreadable record is dead-lettered.

use jiff::Timestamp;
use rdkafka::message::{BorrowedMessage, Headers};
use rdkafka::Message;

use super::dead::{self, DeadNote, Source};
use super::output::{self, OutRecord, OutRecords};
use super::Runtime;
use crate::action::{Action, Event, Subject};
use crate::codec::{self, Format};
use crate::engine::Command;
use crate::metrics;

/// What records of the event topics decided since the last commit.
#[derive(Debug, Default)]
pub struct Inbox {
    /// Launch commands, rejections and dead letters to produce.
    pub(super) pending: OutRecords,
    /// Dead letters among them, counted at commit.
    pub(super) dead: Vec<DeadNote>,
}

impl Runtime {
    /// Whether `topic` is a topic some process launches on.
    pub(super) fn is_event_topic(&self, topic: &str) -> bool {
        self.event_topics.iter().any(|t| t == topic)
    }

    /// Takes one record of an event topic at `now` (counted as consumed by
    /// the caller).
    pub(super) fn on_event_record(&mut self, m: &BorrowedMessage<'_>, now: jiff::Timestamp) {
        let (topic, p) = (m.topic(), m.partition());
        self.offsets.set(topic, p, m.offset() + 1);
        self.consumed = true;
        let headers: Vec<(&str, &[u8])> = m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| (h.key, h.value.unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default();
        let record = match codec::decode_event_record(topic, m.key(), m.payload(), &headers) {
            Ok(record) => record,
            Err(e) => {
                let source = Source {
                    topic,
                    partition: p,
                    offset: m.offset(),
                };
                let (letter, note) = dead::letter(
                    &self.options.config.kafka.topics.dead,
                    self.max_record_bytes,
                    source,
                    m.key(),
                    m.payload(),
                    &e.to_string(),
                );
                self.inbox.pending.push(letter);
                self.inbox.dead.push(note);
                return;
            }
        };
        let trace = codec::trace::extract(headers.iter().copied());
        let config = &self.options.config;
        let (launches, failures) = crate::engine::event_launches(
            config.processes.iter().map(|p| (&p.name, p.on.as_ref())),
            &record,
            now,
        );
        for (process, key, launch) in launches {
            let command = Command::Launch {
                process,
                keys: vec![key.clone()],
                params: launch.params,
                position: launch.position,
                reset: launch.reset,
                source: launch.source,
            };
            self.inbox.pending.push(OutRecord {
                topic: std::sync::Arc::clone(&self.out_topics.commands),
                partition: Some(self.router.key(&key)),
                key: key.into_bytes(),
                payload: Some(codec::encode_command(&command, Format::Protobuf)),
                headers: trace.clone(),
            });
        }
        let rejections: Vec<Action> = failures
            .into_iter()
            .map(|(process, error)| {
                Action::Event(Event::LaunchRejected {
                    subject: Subject::Process {
                        process,
                        key: record.key.clone(),
                        instance: None,
                        job: None,
                    },
                    reason: crate::process::Refusal::Validation.as_str().to_string(),
                    error: Some(error),
                })
            })
            .collect();
        emit(self, rejections, now);
    }
}

fn emit(runtime: &mut Runtime, actions: Vec<Action>, now: Timestamp) {
    if actions.is_empty() {
        return;
    }
    // Rare (launches an event record could not make): handles made here.
    metrics::record_actions(&mut metrics::Handles::new(), -1, &actions);
    output::encode(
        actions,
        -1,
        &runtime.options.config.kafka,
        &runtime.out_topics,
        now,
        &mut runtime.inbox.pending,
    );
}
