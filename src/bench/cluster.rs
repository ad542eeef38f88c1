//! The brokers a bench runs on, topic creation, the input producer and the
//! output reader shared by the baseline and Reactor, so both are driven and
//! observed the same way.

use std::collections::{BTreeMap, HashSet};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::BorrowedMessage;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};

use super::Error;
use crate::kafka::Clients;

/// Brokers of the in-process mock cluster.
const MOCK_BROKERS: i32 = 3;
/// The consumer property set on the mock cluster.
const FETCH_WAIT: &str = "fetch.wait.max.ms";
/// Longest wait of one metadata or admin call.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the bench runs.
pub struct Cluster {
    /// Keeps the in-process cluster alive (dropped last).
    mock: Option<MockCluster<'static, DefaultProducerContext>>,
    /// Client settings for every client of the bench, Reactor's included.
    pub clients: Clients,
    /// Settings only consumers take (group timing).
    pub consumer_settings: BTreeMap<String, String>,
}

impl Cluster {
    /// The given brokers, or an in-process mock cluster.
    pub fn new(brokers: Option<&str>) -> Result<Cluster, Error> {
        let mut librdkafka = BTreeMap::new();
        let mock = match brokers.filter(|b| !b.trim().is_empty()) {
            Some(_) => None,
            None => {
                let mock = MockCluster::new(MOCK_BROKERS)
                    .map_err(|e| Error::kafka("starting the mock cluster", e))?;
                // The mock answers an empty fetch only after the full
                // `fetch.wait.max.ms` (default 500 ms) even when records arrive
                // meanwhile; a real broker answers at once. Without this every
                // consumer's latency would measure the mock's shortcut.
                librdkafka.insert(FETCH_WAIT.to_string(), "10".to_string());
                Some(mock)
            }
        };
        let brokers = match (&mock, brokers) {
            (Some(mock), _) => mock.bootstrap_servers(),
            (None, Some(b)) => b.to_string(),
            (None, None) => unreachable!("a mock cluster is made without brokers"),
        };
        let consumer_settings = [
            ("session.timeout.ms", "6000"),
            ("heartbeat.interval.ms", "500"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        Ok(Cluster {
            mock,
            clients: Clients {
                brokers,
                librdkafka,
            },
            consumer_settings,
        })
    }

    /// Whether this is the in-process mock cluster.
    pub fn is_mock(&self) -> bool {
        self.mock.is_some()
    }

    /// A description for the report.
    pub fn describe(&self) -> String {
        match &self.mock {
            Some(_) => format!("librdkafka mock cluster, {MOCK_BROKERS} brokers, in process"),
            None => format!("brokers {}", self.clients.brokers),
        }
    }

    /// Creates `topics` (name, partitions, compacted) and waits until the
    /// metadata shows them.
    pub fn create_topics(&self, topics: &[(String, i32, bool)]) -> Result<(), Error> {
        if let Some(mock) = &self.mock {
            for (name, partitions, _) in topics {
                mock.create_topic(name, *partitions, 1)
                    .map_err(|e| Error::kafka(format!("creating topic {name}"), e))?;
            }
            return Ok(());
        }
        let admin: AdminClient<DefaultClientContext> = self
            .clients
            .base()
            .create()
            .map_err(|e| Error::kafka("creating the admin client", e))?;
        let new: Vec<NewTopic<'_>> = topics
            .iter()
            .map(|(name, partitions, compact)| {
                let t = NewTopic::new(name, *partitions, TopicReplication::Fixed(1));
                if *compact {
                    t.set("cleanup.policy", "compact")
                } else {
                    t
                }
            })
            .collect();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Failed {
                what: "starting a runtime for the admin client".into(),
                message: e.to_string(),
            })?;
        let options = AdminOptions::new().operation_timeout(Some(CALL_TIMEOUT));
        let results = rt
            .block_on(admin.create_topics(new.iter(), &options))
            .map_err(|e| Error::kafka("creating topics", e))?;
        for result in results {
            if let Err((topic, code)) = result {
                if code != RDKafkaErrorCode::TopicAlreadyExists {
                    return Err(Error::Failed {
                        what: format!("creating topic {topic}"),
                        message: code.to_string(),
                    });
                }
            }
        }
        let wanted: HashSet<&str> = topics.iter().map(|t| t.0.as_str()).collect();
        let deadline = Instant::now() + CALL_TIMEOUT;
        loop {
            let metadata = admin
                .inner()
                .fetch_metadata(None, CALL_TIMEOUT)
                .map_err(|e| Error::kafka("fetching cluster metadata", e))?;
            let seen = metadata
                .topics()
                .iter()
                .filter(|t| wanted.contains(t.name()) && !t.partitions().is_empty())
                .count();
            if seen == wanted.len() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: "waiting for created topics to appear in the metadata".into(),
                    seconds: CALL_TIMEOUT.as_secs_f64(),
                    detail: format!("{seen} of {} visible", wanted.len()),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A group consumer configuration with the bench's consumer settings.
    pub fn group_consumer(&self, group: &str) -> rdkafka::ClientConfig {
        let mut c = self.clients.base();
        c.set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest");
        for (k, v) in &self.consumer_settings {
            c.set(k, v);
        }
        c
    }

    /// Client settings for the bench's own producers: without the
    /// consumer-only properties, which a producer would warn about.
    pub fn producer_clients(&self) -> Clients {
        let mut clients = self.clients.clone();
        clients.librdkafka.remove(FETCH_WAIT);
        clients
    }

    /// A producer of input records, configured as Reactor's own producer.
    pub fn producer(&self) -> Result<ThreadedProducer<DefaultProducerContext>, Error> {
        self.producer_clients()
            .runtime_producer(None)
            .create()
            .map_err(|e| Error::kafka("creating the input producer", e))
    }

    /// A `read_committed` reader of every partition of `topic` from the beginning.
    pub fn reader(&self, topic: &str) -> Result<Reader, Error> {
        let consumer = self.assigned(&[topic], &format!("{topic}-bench-reader"))?;
        Ok(Reader {
            consumer,
            topic: topic.to_string(),
        })
    }

    /// A `read_committed` consumer assigned every partition of `topics` from
    /// the beginning (no group join: it reads at once).
    pub fn assigned(&self, topics: &[&str], group: &str) -> Result<BaseConsumer, Error> {
        let consumer: BaseConsumer = self
            .clients
            .reader()
            .set("enable.partition.eof", "false")
            .set("group.id", group)
            .create()
            .map_err(|e| Error::kafka(format!("creating a reader of {}", topics.join(", ")), e))?;
        let mut tpl = TopicPartitionList::new();
        for topic in topics {
            let metadata = consumer
                .fetch_metadata(Some(topic), CALL_TIMEOUT)
                .map_err(|e| Error::kafka(format!("fetching metadata of {topic}"), e))?;
            let partitions = metadata
                .topics()
                .first()
                .map_or(0, |t| t.partitions().len() as i32);
            if partitions == 0 {
                return Err(Error::Failed {
                    what: format!("reading {topic}"),
                    message: "the topic has no partitions".into(),
                });
            }
            for p in 0..partitions {
                tpl.add_partition_offset(topic, p, Offset::Beginning)
                    .map_err(|e| Error::kafka(format!("assigning {topic}[{p}]"), e))?;
            }
        }
        consumer
            .assign(&tpl)
            .map_err(|e| Error::kafka(format!("assigning {}", topics.join(", ")), e))?;
        Ok(consumer)
    }
}

/// Input records of one bench: key and value per index, the same data for
/// the baseline and Reactor.
pub struct Inputs {
    /// `(key, value)` per index.
    pub records: Vec<(String, Vec<u8>)>,
}

/// When one input was produced.
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    /// Monotonic time of the produce call.
    pub at: Instant,
    /// Wall time of the produce call (compared with `issued_at`).
    pub wall: Timestamp,
}

/// How inputs are produced.
#[derive(Debug, Clone, Copy)]
pub enum Pace {
    /// As fast as the producer takes them, at most [`MAX_AHEAD`] inputs
    /// ahead of the outputs read (throughput).
    Burst,
    /// At this many records per second (latency).
    Rate(f64),
}

/// Most inputs a burst produces ahead of the outputs read. A system is
/// saturated long before (a commit interval of inputs is a few thousand),
/// and an unbounded lead would outrun what a broker keeps: the mock
/// cluster drops a partition's oldest records past 100,000 or 5 MB, and a
/// backlog that large would measure the broker's retention, not Reactor.
pub const MAX_AHEAD: usize = 40_000;

/// Produces the inputs `range` to `topic` on a thread of its own; the
/// thread returns when each was sent and flushed. A burst waits while it is
/// [`MAX_AHEAD`] inputs ahead of `completed` (the outputs read, when given).
pub fn produce(
    producer: Arc<ThreadedProducer<DefaultProducerContext>>,
    inputs: Arc<Inputs>,
    topic: String,
    range: Range<usize>,
    pace: Pace,
    timeout: Duration,
    completed: Option<Arc<AtomicUsize>>,
) -> JoinHandle<Result<Vec<Sent>, Error>> {
    std::thread::spawn(move || {
        let mut sent = Vec::with_capacity(range.len());
        let started = Instant::now();
        let deadline = started + timeout;
        for (n, i) in range.clone().enumerate() {
            match (pace, &completed) {
                (Pace::Rate(rate), _) => {
                    let due = started + Duration::from_secs_f64(n as f64 / rate);
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                }
                (Pace::Burst, Some(completed)) => {
                    while n >= completed.load(Ordering::Relaxed) + MAX_AHEAD
                        && Instant::now() < deadline
                    {
                        // A millisecond is a few hundred inputs of a 40,000
                        // lead; waking every 200 µs cost the harness CPU per
                        // second, which the slower system paid more of per
                        // record (0.03-0.08 µs of Reactor's, alternated).
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                (Pace::Burst, None) => {}
            }
            let (key, value) = &inputs.records[i];
            let at = Instant::now();
            let wall = Timestamp::now();
            let record = BaseRecord::to(&topic).key(key.as_str()).payload(&value[..]);
            let left = deadline.saturating_duration_since(at);
            reactor::kafka::send_with_room(&*producer, record, Some(left), || {
                std::thread::sleep(Duration::from_millis(1))
            })
            .map_err(|e| Error::kafka(format!("producing to {topic}"), e))?;
            sent.push(Sent { at, wall });
        }
        let left = deadline.saturating_duration_since(Instant::now());
        producer
            .flush(left.max(Duration::from_secs(1)))
            .map_err(|e| Error::kafka(format!("flushing the inputs of {topic}"), e))?;
        Ok(sent)
    })
}

/// Joins a producer thread.
pub fn join_producer(handle: JoinHandle<Result<Vec<Sent>, Error>>) -> Result<Vec<Sent>, Error> {
    handle.join().unwrap_or_else(|_| {
        Err(Error::Failed {
            what: "producing inputs".into(),
            message: "the producer thread panicked".into(),
        })
    })
}

/// One output record seen by the reader.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    /// Index of the input it answers.
    pub index: usize,
    /// When the reader received it.
    pub at: Instant,
    /// `issued_at` of a run command.
    pub issued_at: Option<Timestamp>,
}

/// What a reader collected for one phase.
#[derive(Debug, Default)]
pub struct Collected {
    /// First sighting of each expected index.
    pub seen: Vec<Seen>,
    /// Outputs of an index already seen (redone work).
    pub duplicates: usize,
}

/// Maps an output record to the index of the input it answers and, for a
/// run command, its `issued_at`; `None` for an output that does not complete
/// its input (an intermediate offer state); an error text for a record it
/// cannot read.
pub type IndexOf<'a> =
    dyn Fn(&BorrowedMessage<'_>) -> Result<Option<(usize, Option<Timestamp>)>, String> + 'a;

/// Reads an output topic.
pub struct Reader {
    consumer: BaseConsumer,
    topic: String,
}

impl Reader {
    /// Reads until an output completing every index in `expected` was seen,
    /// or fails after `timeout`. `index_of` maps an output record to the
    /// input it completes.
    /// `completed` counts the indices seen so far.
    pub fn collect(
        &self,
        expected: Range<usize>,
        timeout: Duration,
        index_of: &IndexOf<'_>,
        completed: &AtomicUsize,
    ) -> Result<Collected, Error> {
        let deadline = Instant::now() + timeout;
        let mut done = vec![false; expected.len()];
        let mut out = Collected {
            seen: Vec::with_capacity(expected.len()),
            duplicates: 0,
        };
        while out.seen.len() < expected.len() {
            let now = Instant::now();
            if now > deadline {
                return Err(Error::Timeout {
                    what: format!("waiting for the outputs on {}", self.topic),
                    seconds: timeout.as_secs_f64(),
                    detail: format!("{} of {} seen", out.seen.len(), expected.len()),
                });
            }
            let wait = (deadline - now).min(Duration::from_millis(100));
            let m = match self.consumer.poll(wait) {
                None => continue,
                Some(Ok(m)) => m,
                Some(Err(e)) => {
                    tracing::debug!(topic = self.topic, error = %e, "reader error (retried)");
                    continue;
                }
            };
            let at = Instant::now();
            let completes = index_of(&m).map_err(|message| Error::Failed {
                what: format!("reading {}[{}]@{}", self.topic, m.partition(), m.offset()),
                message,
            })?;
            let Some((index, issued_at)) = completes else {
                continue;
            };
            match index
                .checked_sub(expected.start)
                .filter(|&k| k < done.len())
            {
                Some(k) if !done[k] => {
                    done[k] = true;
                    completed.fetch_add(1, Ordering::Relaxed);
                    out.seen.push(Seen {
                        index,
                        at,
                        issued_at,
                    });
                }
                _ => out.duplicates += 1,
            }
        }
        Ok(out)
    }
}
