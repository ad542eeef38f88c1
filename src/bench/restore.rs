//! Restore against the raw read of a changelog (DESIGN §13: a restore at
//! least 0.5 × the raw consume rate of the changelog). The changelog of
//! `--restore-tasks` tasks, each fired once, is written as the shards would
//! have written it (one record per task: what a restarted instance reads),
//! read whole by a plain consumer, then every shard is restored from it by
//! the runtime's own restorer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use super::cluster::Cluster;
use super::{fired, instance, tasks_config, Error, Plan};
use crate::codec;
use crate::config::Config;
use crate::kafka::ReaderContext;
use crate::router::Router;
use crate::runtime::restorer::{Reply, Request, Restorer};

/// Longest wait for one poll of the raw reader.
const POLL: Duration = Duration::from_millis(100);

/// A changelog read raw and restored.
#[derive(Debug, Clone, Copy)]
pub struct RestoreMeasurement {
    /// Records in the changelog (both reads read them all).
    pub records: u64,
    /// Seconds the raw read took: the consumer's creation to the last
    /// partition's end.
    pub raw: f64,
    /// Seconds the restore took: the restorer's start to the last shard
    /// rebuilt (stable offsets fetched, changelog read, engines rebuilt).
    pub restore: f64,
}

impl RestoreMeasurement {
    /// Changelog records per second of the raw read.
    pub fn raw_rate(&self) -> f64 {
        self.records as f64 / self.raw.max(f64::EPSILON)
    }

    /// Changelog records per second of the restore.
    pub fn restore_rate(&self) -> f64 {
        self.records as f64 / self.restore.max(f64::EPSILON)
    }

    /// The restore's rate over the raw read's (DESIGN §13: at least 0.5).
    pub fn ratio(&self) -> f64 {
        self.restore_rate() / self.raw_rate().max(f64::EPSILON)
    }
}

impl std::fmt::Display for RestoreMeasurement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ratio = self.ratio();
        write!(
            f,
            "restore: {} task records read raw in {:.2} s ({:.0}/s), restored into every shard \
             in {:.2} s ({:.0}/s): {ratio:.2}× the raw read (DESIGN §13: ≥ 0.50×)",
            self.records,
            self.raw,
            self.raw_rate(),
            self.restore,
            self.restore_rate()
        )
    }
}

/// Writes the changelog of `tasks` tasks on fresh topics, then measures
/// reading it raw and restoring it.
pub(super) fn tasks(
    cluster: &Cluster,
    plan: &Plan,
    tasks: usize,
) -> Result<RestoreMeasurement, Error> {
    let (config, _) = tasks_config(tasks)?;
    let config = instance::prepare(cluster, config, plan, true, "restore")?;
    let written = seed(cluster, &config, plan.partitions, plan.timeout)?;
    tracing::info!(records = written, "changelog written");
    let m = measure(cluster, &Arc::new(config), plan.partitions, plan.timeout)?;
    if m.records != written {
        // The mock cluster keeps about 5 MB per partition.
        return Err(Error::Failed {
            what: "reading the restore workload's changelog".into(),
            message: format!(
                "{} of the {written} records written were read back: fewer --restore-tasks, \
                 or a broker that keeps them (--brokers)",
                m.records
            ),
        });
    }
    Ok(m)
}

/// Writes the record each task of `config` holds once fired
/// ([`fired::records`]) to its shard's changelog partition; returns the
/// records written.
fn seed(
    cluster: &Cluster,
    config: &Config,
    partitions: i32,
    timeout: Duration,
) -> Result<u64, Error> {
    let router = Router::new(config, partitions);
    let by_partition =
        fired::records(config, &router, Timestamp::now()).map_err(|message| Error::Failed {
            what: "firing the tasks whose records seed the changelog".into(),
            message,
        })?;
    let topic = &config.kafka.topics.changelog;
    let producer = cluster.producer()?;
    let mut written = 0;
    for (p, records) in by_partition {
        for record in records {
            let (key, value) = codec::encode_changelog(record);
            let send = BaseRecord::to(topic)
                .partition(p)
                .key(&key)
                .payload(value.as_deref().unwrap_or_default());
            crate::kafka::send_with_room(&producer, send, Some(timeout), || {
                producer.poll(Duration::from_millis(1))
            })
            .map_err(|e| Error::kafka(format!("seeding {topic}"), e))?;
            written += 1;
        }
    }
    producer
        .flush(timeout)
        .map_err(|e| Error::kafka(format!("flushing {topic}"), e))?;
    Ok(written)
}

/// Reads `config`'s changelog (every one of `partitions`) raw, then restores
/// every shard from it as an instance taking them all over would.
fn measure(
    cluster: &Cluster,
    config: &Arc<Config>,
    partitions: i32,
    timeout: Duration,
) -> Result<RestoreMeasurement, Error> {
    let topic = &config.kafka.topics.changelog;
    let (records, raw) = read_raw(cluster, topic, partitions, timeout)?;
    let started = Instant::now();
    let restorer = Restorer::spawn(
        &cluster.clients,
        Arc::clone(config),
        Router::new(config, partitions),
    )
    .map_err(|e| runtime("starting the restorer", e))?;
    for partition in 0..partitions {
        restorer.ask(Request::Restore {
            partition,
            known: None,
        });
    }
    let mut restored = 0;
    let mut read = 0;
    let deadline = started + timeout;
    while restored < partitions {
        match restorer.try_reply() {
            Some(Reply::Restored(r)) => {
                restored += 1;
                read += r.records;
                // The engines are dropped on another thread: freeing a
                // shard is not part of restoring it.
                std::thread::spawn(move || drop(r));
            }
            Some(Reply::Failed(e)) => return Err(runtime("restoring the changelog", e)),
            None if Instant::now() > deadline => {
                return Err(Error::Timeout {
                    what: format!("restoring {topic}"),
                    seconds: timeout.as_secs_f64(),
                    detail: format!("{restored} of {partitions} shards restored"),
                })
            }
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    let restore = started.elapsed().as_secs_f64();
    if read != records {
        return Err(Error::Failed {
            what: format!("restoring {topic}"),
            message: format!("the restore read {read} records, the raw read {records}"),
        });
    }
    tracing::info!(records, raw, restore, "changelog read raw and restored");
    Ok(RestoreMeasurement {
        records,
        raw,
        restore,
    })
}

/// Reads every partition of `topic` from its beginning to its end with
/// one consumer configured as the restorer's, touching each record's key
/// and value as a restore must; returns the records and the seconds.
fn read_raw(
    cluster: &Cluster,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Result<(u64, f64), Error> {
    // From the consumer's creation, as the restore is timed from the
    // restorer's: both include finding where each partition ends.
    let started = Instant::now();
    let consumer: BaseConsumer<ReaderContext> = cluster
        .clients
        .reader()
        .set("fetch.wait.max.ms", "10")
        .create_with_context(ReaderContext)
        .map_err(|e| Error::kafka(format!("creating a reader of {topic}"), e))?;
    let mut tpl = TopicPartitionList::new();
    let mut open = 0;
    for p in 0..partitions {
        let (low, high) = consumer
            .fetch_watermarks(topic, p, timeout)
            .map_err(|e| Error::kafka(format!("fetching the watermarks of {topic}[{p}]"), e))?;
        if high > low {
            open += 1;
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .map_err(|e| Error::kafka(format!("assigning {topic}[{p}]"), e))?;
        }
    }
    consumer
        .assign(&tpl)
        .map_err(|e| Error::kafka(format!("assigning {topic}"), e))?;
    let mut records = 0u64;
    let mut bytes = 0usize;
    while open > 0 {
        if started.elapsed() > timeout {
            return Err(Error::Timeout {
                what: format!("reading {topic} raw"),
                seconds: timeout.as_secs_f64(),
                detail: format!("{records} records read"),
            });
        }
        match consumer.poll(POLL) {
            None => {}
            Some(Ok(m)) => {
                records += 1;
                bytes += m.key().map_or(0, <[u8]>::len) + m.payload().map_or(0, <[u8]>::len);
            }
            Some(Err(KafkaError::PartitionEOF(_))) => open -= 1,
            Some(Err(e)) => return Err(Error::kafka(format!("reading {topic}"), e)),
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    tracing::debug!(records, bytes, seconds, "changelog read raw");
    Ok((records, seconds))
}

fn runtime(what: &str, e: crate::kafka::Error) -> Error {
    Error::Runtime {
        what: what.into(),
        source: Box::new(e),
    }
}
