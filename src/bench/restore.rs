//! Restore against the raw read of a changelog (DESIGN §13: a restore at
//! least 0.5 × the raw consume rate of the changelog). The changelog of
//! `--restore-tasks` tasks, each fired once, is written as the shards would
//! have written it (one record per task: what a restarted instance reads),
//! read whole by a plain consumer, then every shard is restored from it by
//! the runtime's own restorer — [`ROUNDS`] times, alternately, as one read
//! of what the mock cluster keeps lasts about a tenth of a second: a window
//! that short measures the host's moment more than the restore.

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

/// Raw reads and restores measured, alternately; the ratio is of their
/// totals.
pub const ROUNDS: u32 = 5;

/// A changelog read raw and restored, [`ROUNDS`] times each.
#[derive(Debug, Clone, Copy)]
pub struct RestoreMeasurement {
    /// Records in the changelog (every read read them all).
    pub records: u64,
    /// Seconds of one raw read, over the rounds: the consumer's creation to
    /// the last partition's end.
    pub raw: f64,
    /// Seconds of one restore, over the rounds: the restorer's start to the
    /// last shard rebuilt (stable offsets fetched, changelog read, engines
    /// rebuilt).
    pub restore: f64,
    /// The lowest and highest ratio of one round's restore to its raw read.
    pub spread: (f64, f64),
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
            "restore: {} task records read raw in {:.3} s ({:.0}/s), restored into every shard \
             in {:.3} s ({:.0}/s), each the mean of {ROUNDS} alternate rounds: {ratio:.2}× the \
             raw read (rounds {:.2}–{:.2}×; DESIGN §13: ≥ 0.50×)",
            self.records,
            self.raw,
            self.raw_rate(),
            self.restore,
            self.restore_rate(),
            self.spread.0,
            self.spread.1,
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
/// every shard from it as an instance taking them all over would, [`ROUNDS`]
/// times.
fn measure(
    cluster: &Cluster,
    config: &Arc<Config>,
    partitions: i32,
    timeout: Duration,
) -> Result<RestoreMeasurement, Error> {
    let topic = &config.kafka.topics.changelog;
    // An instance has its router from its start: routing the configuration
    // is not part of a restore.
    let router = Router::new(config, partitions);
    let (mut raw, mut restore) = (0.0, 0.0);
    let mut spread = (f64::INFINITY, 0.0f64);
    let mut records = 0;
    for _ in 0..ROUNDS {
        let (read, raw_once) = read_raw(cluster, topic, partitions, timeout)?;
        let (restored, restore_once) = restore_all(cluster, config, &router, timeout)?;
        if restored != read || (records != 0 && read != records) {
            return Err(Error::Failed {
                what: format!("restoring {topic}"),
                message: format!(
                    "the restore read {restored} records, the raw read {read} (before: {records})"
                ),
            });
        }
        records = read;
        tracing::info!(
            records,
            raw = raw_once,
            restore = restore_once,
            "changelog read raw and restored"
        );
        let ratio = raw_once / restore_once.max(f64::EPSILON);
        spread = (spread.0.min(ratio), spread.1.max(ratio));
        raw += raw_once;
        restore += restore_once;
    }
    let rounds = f64::from(ROUNDS);
    Ok(RestoreMeasurement {
        records,
        raw: raw / rounds,
        restore: restore / rounds,
        spread,
    })
}

/// Restores every shard of `config` (routed by `router`) from its
/// changelog, as an instance taking them all over would; returns the
/// records read and the seconds.
fn restore_all(
    cluster: &Cluster,
    config: &Arc<Config>,
    router: &Router,
    timeout: Duration,
) -> Result<(u64, f64), Error> {
    let topic = &config.kafka.topics.changelog;
    let partitions = router.partitions();
    let started = Instant::now();
    let restorer = Restorer::spawn(&cluster.clients, Arc::clone(config), router.clone())
        .map_err(|e| runtime("starting the restorer", e))?;
    for partition in 0..partitions {
        restorer.ask(Request::Restore {
            partition,
            known: None,
        });
    }
    let mut read = 0;
    // Freeing the shards is not part of restoring them: they are dropped
    // once every shard is restored.
    let mut shards = Vec::new();
    let deadline = started + timeout;
    while shards.len() < partitions as usize {
        match restorer.try_reply() {
            Some(Reply::Restored(r)) => {
                read += r.records;
                shards.push(r);
            }
            Some(Reply::Failed(e)) => return Err(runtime("restoring the changelog", e)),
            None if Instant::now() > deadline => {
                return Err(Error::Timeout {
                    what: format!("restoring {topic}"),
                    seconds: timeout.as_secs_f64(),
                    detail: format!("{} of {partitions} shards restored", shards.len()),
                })
            }
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    drop(shards);
    Ok((read, seconds))
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
