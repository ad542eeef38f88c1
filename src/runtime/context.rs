//! librdkafka callbacks: rebalances are recorded here and handled by the
//! runtime loop right after the poll that saw them; delivery failures are
//! counted for the at-least-once commit.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, ConsumerContext, Rebalance};
use rdkafka::message::DeliveryResult;
use rdkafka::producer::ProducerContext;

/// A change of the partitions this instance owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// Partitions (numbers of the co-partitioned topics) newly assigned.
    Assigned(Vec<i32>),
    /// Partitions taken away: their shards and uncommitted work are dropped.
    Revoked(Vec<i32>),
}

/// Context of the group consumer.
#[derive(Debug, Default)]
pub struct GroupContext {
    /// The topic whose partition numbers name shards.
    pub shard_topic: String,
    events: Mutex<Vec<Ownership>>,
}

impl GroupContext {
    /// A context naming shards by the partitions of `shard_topic`.
    pub fn new(shard_topic: &str) -> Self {
        GroupContext {
            shard_topic: shard_topic.to_string(),
            events: Mutex::new(Vec::new()),
        }
    }

    /// Takes the ownership changes seen since the last call.
    pub fn take(&self) -> Vec<Ownership> {
        std::mem::take(&mut *self.events.lock().expect("rebalance events lock"))
    }

    /// Whether ownership changes wait to be handled.
    pub fn pending(&self) -> bool {
        !self
            .events
            .lock()
            .expect("rebalance events lock")
            .is_empty()
    }

    fn partitions(&self, tpl: &rdkafka::TopicPartitionList) -> Vec<i32> {
        let mut v: Vec<i32> = tpl
            .elements()
            .iter()
            .filter(|e| e.topic() == self.shard_topic)
            .map(|e| e.partition())
            .collect();
        v.sort_unstable();
        v
    }
}

impl ClientContext for GroupContext {}

impl ConsumerContext for GroupContext {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            let partitions = self.partitions(tpl);
            self.events
                .lock()
                .expect("rebalance events lock")
                .push(Ownership::Revoked(partitions));
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                let partitions = self.partitions(tpl);
                self.events
                    .lock()
                    .expect("rebalance events lock")
                    .push(Ownership::Assigned(partitions));
            }
            Rebalance::Error(e) => tracing::warn!(error = %e, "rebalance error"),
            Rebalance::Revoke(_) => {}
        }
    }
}

/// Context of the producer: counts failed deliveries (transactions report
/// them at commit; the at-least-once path checks this counter after flush).
#[derive(Debug, Default)]
pub struct DeliveryContext {
    failures: AtomicU64,
}

impl DeliveryContext {
    /// Failed deliveries so far.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }
}

impl ClientContext for DeliveryContext {}

impl ProducerContext for DeliveryContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: Self::DeliveryOpaque) {
        if let Err((e, message)) = result {
            self.failures.fetch_add(1, Ordering::Relaxed);
            use rdkafka::Message;
            tracing::warn!(topic = message.topic(), partition = message.partition(), error = %e, "delivery failed");
        }
    }
}
