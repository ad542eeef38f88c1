//! Group inputs: offer changes, worker results and operator commands, each
//! taken into the shard of the partition it arrived on ([`intake::take`]).

use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::Message;

use super::ctl::received;
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
            self.on_input(&message)?;
        }
        Ok(n)
    }

    fn on_input(&mut self, m: &BorrowedMessage<'_>) -> Result<(), Error> {
        // A rebalance seen inside the poll must be handled before its partitions' records.
        if self.group.context().pending() {
            self.handle_ownership()?;
        }
        if self.is_event_topic(m.topic()) {
            self.on_event_record(m);
            return Ok(());
        }
        let p = m.partition();
        if !self.shards.contains_key(&p) {
            return Ok(());
        }
        let topic = m.topic();
        self.offsets.set(topic, p, m.offset() + 1);
        self.consumed = true;
        metrics::record_consumed(topic, 1);
        let topics = &self.options.config.kafka.topics;
        let role = if topic == topics.offers {
            Role::Offers
        } else if topic == topics.results {
            Role::Results
        } else {
            Role::Commands
        };
        let now = self.now();
        let record = received(m);
        self.note_input(record.produced_at, now);
        let (ctx, shards, _) = self.parts();
        if let Some(shard) = shards.get_mut(&p) {
            intake::take(shard, &ctx, role, &record, now);
        }
        // A shard that broke an invariant is rebuilt before its next record.
        self.rebuild_broken()
    }
}
