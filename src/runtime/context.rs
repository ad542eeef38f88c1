//! librdkafka callbacks: rebalances are recorded here and handled by the
//! runtime loop right after the poll that saw them; failed deliveries are
//! counted (for the at-least-once commit).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::DeliveryResult;
use rdkafka::producer::ProducerContext;
use rdkafka::types::{RDKafkaErrorCode, RDKafkaRespErr};
use rdkafka::{Message, TopicPartitionList};

/// A change of the partitions the group gives this instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// Partitions newly assigned (cooperative: only the new ones).
    Assigned(Vec<(String, i32)>),
    /// Partitions taken away; `lost` when the session was lost and another
    /// member may own them already.
    Revoked {
        /// The partitions.
        partitions: Vec<(String, i32)>,
        /// Whether they were lost rather than handed over.
        lost: bool,
    },
    /// The rebalance failed.
    Failed(String),
}

/// Context of the group consumer. Its rebalance callback only records what
/// changed: the runtime makes the matching `incremental_assign` /
/// `incremental_unassign` call right after the poll that saw it, once it
/// has done what must come first (commit before giving partitions up;
/// restore before consuming new ones).
#[derive(Debug, Default)]
pub struct GroupContext {
    events: Mutex<Vec<Ownership>>,
    /// The consumer is being closed: nobody will handle what the callback
    /// records, so it gives everything up itself (closing waits for it).
    closing: AtomicBool,
}

impl GroupContext {
    /// The consumer is about to be closed.
    pub fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    /// Takes the ownership changes seen since the last call.
    pub fn take(&self) -> Vec<Ownership> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether ownership changes wait to be handled.
    pub fn pending(&self) -> bool {
        !self
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    fn push(&self, change: Ownership) {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(change);
    }
}

fn elements(tpl: &TopicPartitionList) -> Vec<(String, i32)> {
    let mut v: Vec<(String, i32)> = tpl
        .elements()
        .iter()
        .map(|e| (e.topic().to_string(), e.partition()))
        .collect();
    v.sort_unstable();
    v
}

impl ClientContext for GroupContext {}

impl ConsumerContext for GroupContext {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        if self.closing.load(Ordering::SeqCst) {
            // A closing consumer treats any assignment call as giving
            // everything up, which its close waits for.
            let _ = consumer.incremental_unassign(tpl);
            return;
        }
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                self.push(Ownership::Assigned(elements(tpl)));
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                self.push(Ownership::Revoked {
                    partitions: elements(tpl),
                    lost: consumer.assignment_lost(),
                });
            }
            other => {
                let code: RDKafkaErrorCode = other.into();
                self.push(Ownership::Failed(code.to_string()));
            }
        }
    }
}

/// Context of the producer: counts failed deliveries (transactions report
/// them at commit; the at-least-once path checks this counter after flush).
/// The producer reports failures only (`delivery.report.only.error`): a
/// report per delivered record, handled on the producer's polling thread,
/// was a twentieth of the process's CPU under load.
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
            if is_purged(e) {
                // An aborted transaction purges every record it held; the
                // batch is redone and the abort logged once. A warning per
                // record was one line per record of the batch.
                tracing::debug!(topic = message.topic(), partition = message.partition(), error = %e, "record purged with its aborted transaction");
            } else {
                crate::metrics::DeliveryFailed {
                    topic: message.topic(),
                    partition: message.partition(),
                    error: e,
                }
                .emit();
            }
        }
    }
}

/// Whether a failed delivery is a record purged from the producer's queues
/// (as aborting a transaction does), not a delivery the brokers refused.
fn is_purged(e: &KafkaError) -> bool {
    matches!(
        e,
        KafkaError::MessageProduction(
            RDKafkaErrorCode::PurgeQueue | RDKafkaErrorCode::PurgeInflight
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purged_records_are_told_from_failed_deliveries() {
        let e = |code| KafkaError::MessageProduction(code);
        assert!(is_purged(&e(RDKafkaErrorCode::PurgeQueue)));
        assert!(is_purged(&e(RDKafkaErrorCode::PurgeInflight)));
        assert!(!is_purged(&e(RDKafkaErrorCode::MessageTimedOut)));
        assert!(!is_purged(&KafkaError::Canceled));
    }
}
