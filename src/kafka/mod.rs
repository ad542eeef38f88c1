//! The Kafka edge: client configuration, topic checks and creation, key
//! partitioning and changelog reads. Errors carry topic, partition and offset.

pub mod restore;
pub mod topics;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::ToBytes;
use rdkafka::producer::{BaseProducer, BaseRecord, ProducerContext, ThreadedProducer};
use rdkafka::util::IntoOpaque;

pub use crate::router::partition_for;

/// What went wrong talking to Kafka.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operation on one record or partition.
    #[error("{topic}[{partition}]@{offset}: {source}")]
    Record {
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
        /// Offset (-1 when none applies).
        offset: i64,
        /// The client error.
        source: KafkaError,
    },
    /// A client-level operation (create, subscribe, transaction …).
    #[error("{what}: {source}")]
    Client {
        /// What was being done.
        what: String,
        /// The client error.
        source: KafkaError,
    },
    /// A topic is missing or misconfigured.
    #[error("topic {topic}: {message}")]
    Topic {
        /// Topic.
        topic: String,
        /// What is wrong.
        message: String,
    },
    /// Co-partitioned topics have different partition counts.
    #[error("co-partitioned topics must have the same partition count, found {counts}; recreate or repartition them so they match")]
    CoPartition {
        /// "topic=N" list.
        counts: String,
    },
    /// The instance was stopped as if killed (tests of crash recovery).
    #[error("crashed on request")]
    Crashed,
    /// A stop was asked while waiting for Kafka (reading a topic to its end).
    #[error("stopped on request")]
    Stopped,
    /// The configuration lets inputs cause outputs larger than the producer
    /// accepts.
    #[error("refusing to start: {0}")]
    Limits(String),
    /// No broker answered in time.
    #[error("{what}: timed out after {seconds}s (brokers {brokers})")]
    Timeout {
        /// What was being done.
        what: String,
        /// Bootstrap servers.
        brokers: String,
        /// Seconds waited.
        seconds: u64,
    },
}

impl Error {
    /// Whether retrying the same operation later can succeed (broker down,
    /// timeouts, abortable transaction errors); poison errors need a change.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Record { source, .. } | Error::Client { source, .. } => is_retryable(source),
            Error::Timeout { .. } => true,
            Error::Topic { .. }
            | Error::CoPartition { .. }
            | Error::Crashed
            | Error::Stopped
            | Error::Limits(_) => false,
        }
    }

    /// A client error with context.
    pub fn client(what: impl Into<String>, source: KafkaError) -> Error {
        Error::Client {
            what: what.into(),
            source,
        }
    }
}

/// Whether a client error is worth retrying.
pub fn is_retryable(e: &KafkaError) -> bool {
    !matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::ProducerFenced
                | RDKafkaErrorCode::InvalidProducerEpoch
                | RDKafkaErrorCode::Fatal
                | RDKafkaErrorCode::TopicAuthorizationFailed
                | RDKafkaErrorCode::GroupAuthorizationFailed
        )
    )
}

/// A producer's `send` result: the record comes back with the error.
pub type SendResult<'a, K, P, D> = Result<(), (KafkaError, BaseRecord<'a, K, P, D>)>;

/// The producers' `send` (rdkafka gives each its own, with no trait).
pub trait Sender {
    /// What a delivery report carries.
    type Opaque: IntoOpaque;

    /// Queues `record` for sending, or gives it back with the error.
    #[allow(clippy::result_large_err)] // rdkafka's shape: the record comes back.
    fn send_record<'a, K, P>(
        &self,
        record: BaseRecord<'a, K, P, Self::Opaque>,
    ) -> SendResult<'a, K, P, Self::Opaque>
    where
        K: ToBytes + ?Sized,
        P: ToBytes + ?Sized;
}

/// Both producers' `send`, alike.
macro_rules! sender {
    ($producer:ident $(+ $bound:lifetime)?) => {
        impl<C: ProducerContext $(+ $bound)?> Sender for $producer<C> {
            type Opaque = C::DeliveryOpaque;

            fn send_record<'a, K, P>(
                &self,
                record: BaseRecord<'a, K, P, Self::Opaque>,
            ) -> SendResult<'a, K, P, Self::Opaque>
            where
                K: ToBytes + ?Sized,
                P: ToBytes + ?Sized,
            {
                self.send(record)
            }
        }
    };
}

sender!(BaseProducer);
sender!(ThreadedProducer + 'static);

/// Produces `record` through `producer`, calling `wait` while the
/// producer's local queue is full — it drains as the brokers acknowledge —
/// for at most `timeout` from the first time it is (none: as long as it
/// takes). The clock is read only then: a send that finds room, nearly
/// every one, costs no clock reading.
pub fn send_with_room<'a, S, K, P>(
    producer: &S,
    mut record: BaseRecord<'a, K, P, S::Opaque>,
    timeout: Option<Duration>,
    mut wait: impl FnMut(),
) -> Result<(), KafkaError>
where
    S: Sender + ?Sized,
    K: ToBytes + ?Sized,
    P: ToBytes + ?Sized,
{
    let mut deadline = None;
    loop {
        match producer.send_record(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back))
                if timeout.is_none_or(|t| {
                    let now = Instant::now();
                    now < *deadline.get_or_insert(now + t)
                }) =>
            {
                record = back;
                wait();
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// Builds client configurations from bootstrap servers and the pass-through map.
#[derive(Debug, Clone)]
pub struct Clients {
    /// Bootstrap servers.
    pub brokers: String,
    /// librdkafka properties applied to every client.
    pub librdkafka: BTreeMap<String, String>,
}

impl Clients {
    /// The common part of every client.
    pub fn base(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers);
        for (k, v) in &self.librdkafka {
            c.set(k, v);
        }
        c
    }

    /// [`Clients::producer`] as the runtime has it: only failed deliveries
    /// are reported (unless the pass-through map says otherwise), which is
    /// all it acts on — a report per delivered record cost the polling
    /// thread ~200 ns per record in the bench. Not for
    /// a producer that waits for each delivery (a `FutureProducer`, or one
    /// reading where a record landed): it would never hear of a success.
    pub fn runtime_producer(&self, transactional_id: Option<&str>) -> ClientConfig {
        let mut c = self.producer(transactional_id);
        if !self.librdkafka.contains_key("delivery.report.only.error") {
            c.set("delivery.report.only.error", "true");
        }
        c
    }

    /// A consumer that never commits: for reading topics whole.
    pub fn reader(&self) -> ClientConfig {
        let mut c = self.base();
        c.set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "true")
            .set("isolation.level", "read_committed")
            .set("auto.offset.reset", "earliest");
        // A group id is required by the client even for assign-only use; it is never joined.
        if c.get("group.id").is_none() {
            c.set("group.id", "reactor-reader");
        }
        c
    }

    /// The producer's `message.max.bytes`: the largest record Reactor may
    /// produce (librdkafka refuses a larger one before sending it).
    pub fn max_record_bytes(&self) -> usize {
        self.librdkafka
            .get("message.max.bytes")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(crate::codec::limits::DEFAULT_MAX_RECORD_BYTES)
    }

    /// A producer with the Java-compatible partitioner.
    pub fn producer(&self, transactional_id: Option<&str>) -> ClientConfig {
        let mut c = self.base();
        c.set("enable.idempotence", "true")
            .set("acks", "all")
            .set("partitioner", "murmur2_random")
            .set("linger.ms", "5");
        if let Some(id) = transactional_id {
            c.set("transactional.id", id);
        }
        c
    }
}

/// Context of consumers that read partitions to their end: reaching the end
/// is how they know they are done, not an error worth logging.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReaderContext;

impl rdkafka::client::ClientContext for ReaderContext {
    fn error(&self, error: KafkaError, reason: &str) {
        let eof = matches!(
            error,
            KafkaError::PartitionEOF(_) | KafkaError::Global(RDKafkaErrorCode::PartitionEOF)
        );
        if !eof {
            tracing::warn!(%error, reason, "librdkafka");
        }
    }
}

impl rdkafka::consumer::ConsumerContext for ReaderContext {}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::producer::BaseProducer;
    use std::cell::Cell;
    use std::time::Duration;

    /// A producer whose queue is full for its first `full` sends.
    struct Full {
        full: Cell<u32>,
        sent: Cell<u32>,
    }

    impl Sender for Full {
        type Opaque = ();

        fn send_record<'a, K, P>(&self, record: BaseRecord<'a, K, P>) -> SendResult<'a, K, P, ()>
        where
            K: ToBytes + ?Sized,
            P: ToBytes + ?Sized,
        {
            if self.full.get() > 0 {
                self.full.set(self.full.get() - 1);
                return Err((
                    KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull),
                    record,
                ));
            }
            self.sent.set(self.sent.get() + 1);
            Ok(())
        }
    }

    #[test]
    fn a_full_queue_is_waited_for_until_the_deadline() {
        let producer = Full {
            full: Cell::new(3),
            sent: Cell::new(0),
        };
        let mut waits = 0;
        let record: BaseRecord<'_, str, str> = BaseRecord::to("t").key("k").payload("v");
        send_with_room(&producer, record, None, || waits += 1).unwrap();
        assert_eq!((waits, producer.sent.get()), (3, 1));

        producer.full.set(u32::MAX);
        let record: BaseRecord<'_, str, str> = BaseRecord::to("t").key("k").payload("v");
        let e = send_with_room(&producer, record, Some(Duration::from_millis(20)), || {
            std::thread::sleep(Duration::from_millis(1))
        })
        .unwrap_err();
        assert_eq!(e.rdkafka_error_code(), Some(RDKafkaErrorCode::QueueFull));
        assert_eq!(producer.sent.get(), 1);
    }

    /// What a managed Kafka service asks for: TLS with SCRAM. librdkafka
    /// refuses the settings at client creation when built without OpenSSL.
    #[test]
    fn tls_with_scram_clients_are_created_only_with_tls() {
        let clients = Clients {
            brokers: "broker.example:9093".into(),
            librdkafka: [
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("sasl.username", "reactor"),
                ("sasl.password", "secret"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        };
        let created = clients.producer(None).create::<BaseProducer>();
        assert_eq!(
            created.is_ok(),
            cfg!(feature = "tls"),
            "{:?}",
            created.err()
        );
    }
}
