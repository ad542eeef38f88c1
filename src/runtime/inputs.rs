//! Group inputs: offer changes, worker results and operator commands, each
//! taken into the shard of the partition it arrived on ([`intake::take`]).

use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::Message;

use super::ctl::received_on;
use super::intake::{self, Role};
use super::{Error, Runtime, MAX_POLL_BATCH};
use crate::metrics;

impl Runtime {
    /// Handles up to a batch of group inputs; returns how many came.
    pub(super) fn poll_group(&mut self, timeout: Duration) -> Result<usize, Error> {
        let mut wait = timeout;
        let mut n = 0;
        // Polled through a handle of its own, so that the record is read
        // where it lies (no copy) while its shard takes it.
        let group = Arc::clone(&self.group);
        // One reading of the clock for the batch, once its first record is
        // here (the poll may wait for it), and the records counted by topic
        // for the batch: per record, both were a visible part of the
        // runtime thread's time.
        let mut now = None;
        let mut consumed = Consumed::default();
        for _ in 0..MAX_POLL_BATCH {
            let message = match group.poll(wait) {
                None => break,
                Some(Ok(m)) => m,
                Some(Err(KafkaError::PartitionEOF(_))) => continue,
                Some(Err(e)) => {
                    metrics::BrokerUnavailable { error: &e }.emit();
                    break;
                }
            };
            wait = Duration::ZERO;
            n += 1;
            let now = *now.get_or_insert_with(|| self.now());
            let result = self.on_input(&message, now, &mut consumed);
            if result.is_err() {
                consumed.flush();
            }
            result?;
        }
        consumed.flush();
        Ok(n)
    }

    fn on_input(
        &mut self,
        m: &BorrowedMessage<'_>,
        now: jiff::Timestamp,
        consumed: &mut Consumed,
    ) -> Result<(), Error> {
        // A rebalance seen inside the poll must be handled before its partitions' records.
        if self.group.context().pending() {
            self.handle_ownership()?;
        }
        let topic = m.topic();
        if self.is_event_topic(topic) {
            consumed.add(topic);
            self.on_event_record(m, now);
            return Ok(());
        }
        let p = m.partition();
        if !self.shards.contains_key(&p) {
            return Ok(());
        }
        self.offsets.set(topic, p, m.offset() + 1);
        self.consumed = true;
        consumed.add(topic);
        let topics = &self.options.config.kafka.topics;
        let role = if topic == topics.offers {
            Role::Offers
        } else if topic == topics.results {
            Role::Results
        } else {
            Role::Commands
        };
        let record = received_on(m, topic);
        self.note_input(record.produced_at, now);
        let (ctx, shards, _) = self.parts();
        if let Some(shard) = shards.get_mut(&p) {
            intake::take(shard, &ctx, role, &record, now);
        }
        // A shard that broke an invariant is rebuilt before its next record.
        self.rebuild_broken()
    }
}

/// Records consumed in a poll batch, counted by topic (a batch mostly
/// holds runs of one topic) and exported once.
#[derive(Default)]
pub(super) struct Consumed {
    topic: String,
    records: u64,
}

impl Consumed {
    /// Counts a record of `topic`.
    pub(super) fn add(&mut self, topic: &str) {
        if self.topic != topic {
            self.flush();
            self.topic.clear();
            self.topic.push_str(topic);
        }
        self.records += 1;
    }

    /// Exports what was counted.
    pub(super) fn flush(&mut self) {
        if self.records > 0 {
            metrics::record_consumed(&self.topic, self.records);
            self.records = 0;
        }
    }
}
