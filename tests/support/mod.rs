//! Test glue for Kafka tests: an in-process mock cluster (or the brokers in
//! `REACTOR_TEST_BROKERS`), topic setup, a producer and readers.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Message, Offset, TopicPartitionList};

use reactor::action::Event;
use reactor::clock::SystemClock;
use reactor::codec;
use reactor::config::Config;
use reactor::kafka::Clients;
use reactor::runtime::health::Readiness;
use reactor::runtime::stop::Stop;
use reactor::runtime::{supervisor, Options};

pub mod child;
pub mod steps;
pub mod temp;

/// One daily task in a limited pool: the task most Kafka tests drive.
pub const TASKS: &str = r#"
[[pool]]
name = "reports"
max_running = 4

[[task]]
id = "orders_daily"
pool = "reports"
trigger = "chunk_delta(dwh.orders/max_dt, day)"
timeout = "1h"
"#;

/// An RFC 3339 timestamp.
pub fn ts(s: &str) -> jiff::Timestamp {
    s.parse().unwrap()
}

/// A Kafka to test against.
pub struct TestKafka {
    /// Keeps the in-process cluster alive.
    pub mock: Option<MockCluster<'static, DefaultProducerContext>>,
    /// Bootstrap servers.
    pub brokers: String,
    /// Prefix making topic and group names unique to one test.
    pub prefix: String,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A prefix making topic and group names unique to one test; also sets up
/// logging, which shows in a failing test's output (RUST_LOG filters it).
fn prefix(test: &str) -> String {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
    format!(
        "{test}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

impl TestKafka {
    /// The mock cluster (3 brokers), or `REACTOR_TEST_BROKERS` when set.
    pub fn new(test: &str) -> TestKafka {
        match std::env::var("REACTOR_TEST_BROKERS") {
            Ok(brokers) if !brokers.is_empty() => TestKafka::on(&brokers, test),
            _ => {
                let mock = MockCluster::new(3).expect("mock cluster");
                TestKafka {
                    brokers: mock.bootstrap_servers(),
                    mock: Some(mock),
                    prefix: prefix(test),
                }
            }
        }
    }

    /// A Kafka at `brokers` (a real broker a test tier was given).
    pub fn on(brokers: &str, test: &str) -> TestKafka {
        TestKafka {
            mock: None,
            brokers: brokers.to_string(),
            prefix: prefix(test),
        }
    }

    /// The kfake broker of `REACTOR_TEST_KFAKE` (`.ci/run` starts one; see
    /// `../shared/brokers.md` §3).
    pub fn kfake(test: &str) -> TestKafka {
        let brokers = std::env::var("REACTOR_TEST_KFAKE").unwrap_or_default();
        assert!(
            !brokers.is_empty(),
            "needs a kfake broker in REACTOR_TEST_KFAKE=host:port (.ci/run starts one)"
        );
        TestKafka::on(&brokers, test)
    }

    /// A configuration with unique topic and group names and test-friendly timeouts.
    pub fn config(&self, tasks_toml: &str, partitions: i32, exactly_once: bool) -> Config {
        let text = self.config_text(tasks_toml, partitions, exactly_once);
        reactor::config::parse(&text, "test.toml")
            .expect("test config")
            .config
    }

    /// The TOML text of [`TestKafka::config`] (e.g. to write to a file for the CLI).
    pub fn config_text(&self, tasks_toml: &str, partitions: i32, exactly_once: bool) -> String {
        let p = &self.prefix;
        format!(
            r#"
{tasks_toml}

[kafka]
brokers = "{brokers}"
group_id = "{p}-group"
exactly_once = {exactly_once}
commit_interval = "50ms"
partitions = {partitions}

[kafka.topics]
ctl = "{p}.ctl"
results = "{p}.results"
commands = "{p}.commands"
runs = "{p}.runs"
events = "{p}.events"
dead = "{p}.dead"
changelog = "{p}.changelog"
offers = "{p}.offers"
offer_state = "{p}.offer_state"

[kafka.librdkafka]
"session.timeout.ms" = "6000"
"heartbeat.interval.ms" = "500"
"#,
            brokers = self.brokers
        )
    }

    /// Creates every topic of `config` with `partitions` partitions (the mock
    /// cluster has no Admin API; a real broker gets them from Reactor itself).
    pub fn create_topics(&self, config: &Config, partitions: i32) {
        let t = &config.kafka.topics;
        if let Some(mock) = &self.mock {
            let stage_topics = config.stage_topics();
            for topic in t
                .all()
                .into_iter()
                .map(|(_, t)| t)
                .chain(stage_topics)
                .chain(config.job_topics())
                .chain(config.event_topics())
            {
                mock.create_topic(topic, partitions, 1)
                    .expect("create topic");
            }
        } else {
            let clients = self.clients();
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(reactor::kafka::topics::ensure(&clients, config))
                .expect("ensure topics");
        }
    }

    /// Client settings for these brokers.
    pub fn clients(&self) -> Clients {
        Clients {
            brokers: self.brokers.clone(),
            librdkafka: BTreeMap::new(),
        }
    }

    /// Starts one Reactor instance.
    pub fn start(&self, config: &Config, instance: &str, partitions: i32) -> Instance {
        let readiness = Readiness::new();
        let task_ages = reactor::metrics::TaskAges::new(reactor::metrics::DEFAULT_SERIES);
        let (queries, rx) = tokio::sync::mpsc::channel(8);
        let options = Options {
            config: Arc::new(config.clone()),
            clients: self.clients(),
            instance_id: instance.to_string(),
            partitions,
            clock: Arc::new(SystemClock),
            readiness: Arc::clone(&readiness),
            task_ages: Arc::clone(&task_ages),
            queries: Arc::new(Mutex::new(rx)),
            stop: Stop::new(),
        };
        Instance {
            handle: Some(supervisor::spawn(options).expect("runtime threads")),
            readiness,
            task_ages,
            queries,
        }
    }

    /// What `reactor tail TOPIC --from-beginning` prints on these brokers
    /// (with `extra` arguments), one JSON value per line.
    pub fn tail(&self, topic: &str, extra: &[&str]) -> Vec<serde_json::Value> {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_reactor"))
            .args([
                "tail",
                topic,
                "--from-beginning",
                "--brokers",
                &self.brokers,
            ])
            .args(extra)
            .output()
            .expect("running reactor tail");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// A plain producer with the Java-compatible partitioner.
    pub fn producer(&self) -> ThreadedProducer<DefaultProducerContext> {
        self.clients().producer(None).create().expect("producer")
    }

    /// Produces one record and waits for it.
    pub fn send(&self, topic: &str, key: &str, payload: &[u8]) {
        let producer = self.producer();
        producer
            .send(BaseRecord::to(topic).key(key).payload(payload))
            .map_err(|(e, _)| e)
            .expect("send");
        producer.flush(Duration::from_secs(10)).expect("flush");
    }

    /// Produces one record to an explicit partition (as a producer with
    /// another partitioner might) and waits for it.
    pub fn send_to(&self, topic: &str, partition: i32, key: &str, payload: &[u8]) {
        let producer = self.producer();
        producer
            .send(
                BaseRecord::to(topic)
                    .partition(partition)
                    .key(key)
                    .payload(payload),
            )
            .map_err(|(e, _)| e)
            .expect("send");
        producer.flush(Duration::from_secs(10)).expect("flush");
    }

    /// Produces one record with `producer` and waits for it (for tests that
    /// send many records: one producer, not one per record).
    pub fn send_with(
        &self,
        producer: &ThreadedProducer<DefaultProducerContext>,
        topic: &str,
        key: &str,
        payload: &[u8],
    ) {
        producer
            .send(BaseRecord::to(topic).key(key).payload(payload))
            .map_err(|(e, _)| e)
            .expect("send");
        producer.flush(Duration::from_secs(10)).expect("flush");
    }

    /// Produces one record with headers and waits for it.
    pub fn send_headers(&self, topic: &str, key: &str, payload: &[u8], headers: &[(&str, &str)]) {
        use rdkafka::message::{Header, OwnedHeaders};
        let headers = headers.iter().fold(OwnedHeaders::new(), |h, (key, value)| {
            h.insert(Header {
                key,
                value: Some(value.as_bytes()),
            })
        });
        let producer = self.producer();
        producer
            .send(
                BaseRecord::to(topic)
                    .key(key)
                    .payload(payload)
                    .headers(headers),
            )
            .map_err(|(e, _)| e)
            .expect("send");
        producer.flush(Duration::from_secs(10)).expect("flush");
    }

    /// A reader of every partition of `topic` from the beginning.
    pub fn reader(&self, topic: &str) -> Reader {
        let consumer: BaseConsumer = self
            .clients()
            .reader()
            .set("enable.partition.eof", "false")
            .set("group.id", format!("{}-reader", self.prefix))
            .create()
            .expect("reader");
        let metadata = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .expect("metadata");
        let n = metadata.topics()[0].partitions().len() as i32;
        let mut tpl = TopicPartitionList::new();
        for p in 0..n {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .unwrap();
        }
        consumer.assign(&tpl).expect("assign");
        Reader { consumer }
    }
}

/// A running instance; crashed when dropped unless stopped.
pub struct Instance {
    handle: Option<supervisor::Handle>,
    /// Readiness.
    pub readiness: Arc<Readiness>,
    /// The stalest tasks' ages its health passes publish.
    pub task_ages: Arc<reactor::metrics::TaskAges>,
    /// Admin queries, answered by the runtime between batches.
    pub queries: tokio::sync::mpsc::Sender<reactor::admin::Query>,
}

impl Instance {
    /// Waits until the instance serves.
    pub fn wait_ready(&self, timeout: Duration) {
        let until = Instant::now() + timeout;
        while !self.readiness.is_ready() {
            assert!(Instant::now() < until, "instance not ready in time");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Asks the runtime a query as the admin API does; `None` when it did
    /// not answer in time.
    pub fn ask<T>(
        &self,
        query: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> reactor::admin::Query,
    ) -> Option<T> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.queries.blocking_send(query(reply)).ok()?;
        let until = Instant::now() + Duration::from_secs(10);
        let mut answer = answer;
        loop {
            match answer.try_recv() {
                Ok(value) => return Some(value),
                Err(tokio::sync::oneshot::error::TryRecvError::Closed) => return None,
                Err(tokio::sync::oneshot::error::TryRecvError::Empty) => {}
            }
            if Instant::now() > until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Graceful stop.
    pub fn stop(mut self) {
        self.handle.take().unwrap().stop().expect("clean stop");
    }

    /// Stops as if killed.
    pub fn crash(mut self) {
        self.handle.take().unwrap().crash();
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.crash();
        }
    }
}

/// Reads records of one topic.
pub struct Reader {
    consumer: BaseConsumer,
}

/// A record read back.
#[derive(Debug, Clone)]
pub struct Record {
    pub partition: i32,
    pub offset: i64,
    pub key: Vec<u8>,
    pub payload: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Reader {
    /// Reads until `done(records so far)` or the timeout; returns what was read.
    pub fn read_until(&self, timeout: Duration, done: impl Fn(&[Record]) -> bool) -> Vec<Record> {
        let until = Instant::now() + timeout;
        let mut out = Vec::new();
        while Instant::now() < until && !done(&out) {
            if let Some(Ok(m)) = self.consumer.poll(Duration::from_millis(50)) {
                use rdkafka::message::Headers;
                let headers = m
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|x| (x.key.to_string(), x.value.unwrap_or_default().to_vec()))
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(Record {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().unwrap_or_default().to_vec(),
                    payload: m.payload().map(<[u8]>::to_vec),
                    headers,
                });
            }
        }
        out
    }
}

/// Each record once by position (a reader may see a record twice, and the
/// mock cluster shows a redone batch's records again).
pub fn distinct(records: &[Record]) -> Vec<&Record> {
    let mut seen = HashSet::new();
    records
        .iter()
        .filter(|r| seen.insert((r.partition, r.offset)))
        .collect()
}

/// The events among `records`.
pub fn events(records: &[Record]) -> Vec<Event> {
    distinct(records)
        .into_iter()
        .map(|r| {
            codec::decode_event(r.payload.as_deref().unwrap())
                .unwrap()
                .0
        })
        .collect()
}
