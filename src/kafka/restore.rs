//! Reading a partition from its beginning to its end: how a shard restores
//! its changelog before it processes its partition.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::{Offset, TopicPartitionList};

use super::{Clients, Error, ReaderContext};

/// Reads `topic`/`partition` from the beginning to the end it has now,
/// handing every record to `each`; returns how many records were read.
/// Committed data only (`read_committed`). Gives up with [`Error::Stopped`]
/// as soon as `stopped()` says so (checked every 100 ms at most).
pub fn read_to_end(
    clients: &Clients,
    topic: &str,
    partition: i32,
    timeout: Duration,
    stopped: &dyn Fn() -> bool,
    mut each: impl FnMut(&BorrowedMessage<'_>) -> Result<(), Error>,
) -> Result<u64, Error> {
    let consumer: BaseConsumer<ReaderContext> = clients
        .reader()
        // The end shows as an empty fetch: do not let the broker hold it.
        .set("fetch.wait.max.ms", "10")
        .create_with_context(ReaderContext)
        .map_err(|e| Error::client(format!("creating a reader of {topic}"), e))?;
    // An empty partition needs no read (its end would show only as an
    // empty fetch). Only emptiness is taken from the watermarks: some
    // brokers misreport the high one of a non-empty partition (brokers.md).
    let (low, high) = consumer
        .fetch_watermarks(topic, partition, timeout.min(Duration::from_secs(30)))
        .map_err(|e| record_error(topic, partition, -1, e))?;
    if high <= low {
        return Ok(0);
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Beginning)
        .map_err(|e| record_error(topic, partition, -1, e))?;
    consumer
        .assign(&tpl)
        .map_err(|e| record_error(topic, partition, -1, e))?;
    let deadline = Instant::now() + timeout;
    let mut n = 0;
    loop {
        if stopped() {
            return Err(Error::Stopped);
        }
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!("reading {topic}[{partition}] to its end"),
                brokers: clients.brokers.clone(),
                seconds: timeout.as_secs(),
            });
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(message)) => {
                each(&message)?;
                n += 1;
            }
            Some(Err(KafkaError::PartitionEOF(_))) => return Ok(n),
            Some(Err(e)) if super::is_retryable(&e) => {
                tracing::warn!(topic, partition, error = %e, "reading to end; retrying");
            }
            Some(Err(e)) => return Err(record_error(topic, partition, -1, e)),
        }
    }
}

fn record_error(topic: &str, partition: i32, offset: i64, source: KafkaError) -> Error {
    Error::Record {
        topic: topic.to_string(),
        partition,
        offset,
        source,
    }
}
