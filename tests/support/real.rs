//! Helpers of the real-broker tier (`tests/real_broker.rs`): Admin API calls,
//! committed group offsets, run commands and results.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

use reactor::codec::{self, Format};
use reactor::config::Config;
use reactor::engine::RunResult;
use reactor::proto::v1::RunCommand;
use reactor::run::Status;

use crate::support::{Record, TestKafka};

/// Generous: the first group join on tansu takes about half the session timeout.
pub const WAIT: Duration = Duration::from_secs(60);
const CALL: Duration = Duration::from_secs(15);

/// A [`TestKafka`] on the brokers of `REACTOR_TEST_BROKERS`, which this tier requires.
pub fn kafka(test: &str) -> TestKafka {
    let brokers = std::env::var("REACTOR_TEST_BROKERS").unwrap_or_default();
    assert!(
        !brokers.is_empty(),
        "the real-broker tier needs REACTOR_TEST_BROKERS (a Kafka-compatible broker; see .ci/run)"
    );
    TestKafka::new(test)
}

/// `TestKafka::config` with the group timings brokers.md asks for on tansu.
pub fn config(kafka: &TestKafka, tasks: &str, partitions: i32) -> Config {
    let mut config = kafka.config(tasks, partitions, true);
    for (key, value) in [
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "1000"),
    ] {
        config.kafka.librdkafka.insert(key.into(), value.into());
    }
    config
}

/// Runs a future on a current-thread runtime.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(future)
}

pub fn admin(kafka: &TestKafka) -> AdminClient<DefaultClientContext> {
    kafka.clients().base().create().expect("admin client")
}

fn admin_options() -> AdminOptions {
    AdminOptions::new().request_timeout(Some(CALL))
}

/// Creates `topic` with `partitions` partitions (plain, not compacted).
pub fn create_topic(kafka: &TestKafka, topic: &str, partitions: i32) {
    let admin = admin(kafka);
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let results = block_on(admin.create_topics([&new], &admin_options())).expect("create topics");
    for r in results {
        r.unwrap_or_else(|(t, code)| panic!("creating {t}: {code}"));
    }
    wait_for_topic(kafka, topic);
}

/// Waits until `topic` shows in the metadata with partitions; returns their count.
pub fn wait_for_topic(kafka: &TestKafka, topic: &str) -> i32 {
    let admin = admin(kafka);
    let until = Instant::now() + WAIT;
    loop {
        let counts = reactor::kafka::topics::partition_counts(&admin, &kafka.brokers)
            .expect("cluster metadata");
        if let Some(&n) = counts.get(topic) {
            return n;
        }
        assert!(Instant::now() < until, "{topic} not in metadata");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Partition counts of every topic, from the cluster metadata.
pub fn partition_counts(kafka: &TestKafka) -> BTreeMap<String, i32> {
    reactor::kafka::topics::partition_counts(&admin(kafka), &kafka.brokers)
        .expect("cluster metadata")
}

/// The configuration of `topic` as DescribeConfigs reports it.
pub fn topic_config(kafka: &TestKafka, topic: &str) -> BTreeMap<String, Option<String>> {
    let admin = admin(kafka);
    let resource = ResourceSpecifier::Topic(topic);
    let mut results =
        block_on(admin.describe_configs([&resource], &admin_options())).expect("describe configs");
    assert_eq!(results.len(), 1);
    let resource = results
        .remove(0)
        .unwrap_or_else(|code| panic!("describing {topic}: {code}"));
    resource
        .entries
        .into_iter()
        .map(|e| (e.name, e.value))
        .collect()
}

/// Per partition of `topic`: the offset `group` committed (None when it
/// committed none) and the partition's high watermark.
pub fn committed(kafka: &TestKafka, group: &str, topic: &str) -> BTreeMap<i32, (Option<i64>, i64)> {
    let consumer: BaseConsumer = kafka
        .clients()
        .reader()
        .set("group.id", group)
        .create()
        .expect("offsets consumer");
    let partitions = wait_for_topic(kafka, topic);
    let mut out = BTreeMap::new();
    {
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition(topic, p);
        }
        // The list holds broker references: dropped before the consumer.
        let offsets = consumer
            .committed_offsets(tpl, CALL)
            .expect("committed offsets");
        for e in offsets.elements() {
            let committed = match e.offset() {
                Offset::Offset(o) => Some(o),
                _ => None,
            };
            let (_, high) = consumer
                .fetch_watermarks(topic, e.partition(), CALL)
                .expect("watermarks");
            out.insert(e.partition(), (committed, high));
        }
    }
    out
}

/// Waits until `group` has committed, on every non-empty partition of
/// `topic`, an offset at or past the high watermark (all input consumed and
/// committed); returns the last reading.
pub fn wait_committed(
    kafka: &TestKafka,
    group: &str,
    topic: &str,
) -> BTreeMap<i32, (Option<i64>, i64)> {
    let until = Instant::now() + WAIT;
    loop {
        let offsets = committed(kafka, group, topic);
        let done = offsets
            .values()
            .all(|&(c, high)| high == 0 || c.is_some_and(|c| c >= high));
        if done {
            return offsets;
        }
        assert!(
            Instant::now() < until,
            "{group} did not commit {topic} to its end: {offsets:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Run commands among `records` (protobuf or JSON), each record once: a
/// reader that re-reads a partition (tansu's high watermark can be short of
/// the end after a multi-record batch) must not look like a duplicate dispatch.
pub fn runs(records: &[Record]) -> Vec<RunCommand> {
    let mut seen = std::collections::BTreeSet::new();
    records
        .iter()
        .filter(|r| seen.insert((r.partition, r.offset)))
        .map(|r| codec::decode_run_command(r.payload.as_deref().expect("a payload")).unwrap())
        .collect()
}

/// Replies `Succeeded` to `run` as a worker does (protobuf, keyed by the
/// reply key), one record per flush so every batch holds a single record.
pub fn succeed(producer: &ThreadedProducer<DefaultProducerContext>, run: &RunCommand) {
    let result = RunResult {
        step: Default::default(),
        stage: Default::default(),
        run_id: run.run_id.to_string(),
        pass: run.pass,
        status: Status::Succeeded,
        error: None,
    };
    let payload = codec::encode_run_result(&result, &run.reply_key, Format::Protobuf);
    send(producer, &run.reply_topic, &run.reply_key, &payload);
}

/// Produces one record and waits for it.
pub fn send(
    producer: &ThreadedProducer<DefaultProducerContext>,
    topic: &str,
    key: &str,
    payload: &[u8],
) {
    producer
        .send(BaseRecord::to(topic).key(key).payload(payload))
        .unwrap_or_else(|(e, _)| panic!("send to {topic}: {e}"));
    producer.flush(CALL).expect("flush");
}

/// A CTL change of `dwh.orders/max_dt` to `value` (protobuf).
pub fn ctl(value: &str) -> Vec<u8> {
    codec::encode_ctl_change(
        &codec::CtlRecord {
            entity: "dwh.orders".into(),
            param: "max_dt".into(),
            value: value.parse().unwrap(),
        },
        None,
        "real_broker",
        Format::Protobuf,
    )
}
