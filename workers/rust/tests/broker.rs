//! The worker on a real broker: hand-made run commands of every kind on a
//! run topic (steps too, which Reactor does not dispatch yet), the worker
//! running, and what it replied and committed read back.
//!
//! Gated: runs only when `REACTOR_TEST_BROKERS` names a broker (`.ci/ecosystem`
//! starts kfake); `cargo test` alone skips it.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use prost::Message as _;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use reactor_worker::proto::{RunCommand, RunResult, RunStatus};
use reactor_worker::{JobResult, Worker};
use serde_json::{json, Value};

const PARTITIONS: i32 = 3;
const WAIT: Duration = Duration::from_secs(60);

fn brokers() -> Option<String> {
    std::env::var("REACTOR_TEST_BROKERS")
        .ok()
        .filter(|b| !b.is_empty())
}

fn ts(t: Timestamp) -> pbjson_types::Timestamp {
    pbjson_types::Timestamp {
        seconds: t.as_second(),
        nanos: t.subsec_nanosecond(),
    }
}

fn command(run_id: &str, kind: &str, pass: u64, reply_key: &str, results: &str) -> RunCommand {
    RunCommand {
        run_id: run_id.into(),
        kind: kind.into(),
        attempt: 1,
        pass,
        reply_topic: results.into(),
        reply_key: reply_key.into(),
        deadline: Some(ts(Timestamp::now() + Duration::from_secs(3600))),
        ..Default::default()
    }
}

fn pb_struct(v: Value) -> Option<pbjson_types::Struct> {
    Some(serde_json::from_value(v).expect("a JSON object"))
}

#[tokio::test(flavor = "multi_thread")]
async fn worker_replies_to_where_reactor_looks_and_commits_after_delivery() {
    let Some(brokers) = brokers() else {
        eprintln!("skipping: REACTOR_TEST_BROKERS names no broker");
        return;
    };
    let p = format!("rw{}", std::process::id());
    let (runs, results, group) = (
        format!("{p}.runs"),
        format!("{p}.results"),
        format!("{p}-workers"),
    );
    let admin: AdminClient<_> = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .create()
        .expect("admin client");
    let topics = [
        NewTopic::new(&runs, PARTITIONS, TopicReplication::Fixed(1)),
        NewTopic::new(&results, PARTITIONS, TopicReplication::Fixed(1)),
    ];
    for r in admin
        .create_topics(&topics, &AdminOptions::new())
        .await
        .expect("create topics")
    {
        r.expect("topic created");
    }

    // The commands, keyed as Reactor keys them.
    let mut task = command("orders_daily#7", "task", 12, "reports", &results);
    task.task = "orders_daily".into();
    task.snapshot = BTreeMap::from([(
        "dwh.orders/max_dt".into(),
        ts("2024-05-31T00:00:00Z".parse().unwrap()),
    )]);
    let mut step = command("payout/k1#1/0", "step", 3, "k1", &results);
    (step.process, step.key, step.instance, step.job) = (
        "payout".into(),
        "k1".into(),
        "payout/k1#1".into(),
        "send_tx".into(),
    );
    step.args = pb_struct(json!({"amount": 250}));
    let mut stage = command("price/o1#3", "stage", 9, "o1", &results);
    (stage.stage, stage.offer_id, stage.version) = ("price".into(), "o1".into(), 4);
    stage.offer = pb_struct(json!({"price": 100}));
    let mut late = command("orders_daily#6", "task", 11, "reports", &results);
    late.task = "orders_daily".into();
    late.deadline = Some(ts(Timestamp::now() - Duration::from_secs(60)));
    let mut other = command("nightly#1", "task", 1, "etl", &results);
    other.task = "nightly".into();
    let records: Vec<(String, Vec<u8>)> = vec![
        ("reports".into(), late.encode_to_vec()),
        ("reports".into(), task.encode_to_vec()),
        ("k1".into(), step.encode_to_vec()),
        // The stage command in JSON: its reply comes back in JSON.
        ("o1".into(), serde_json::to_vec(&stage).unwrap()),
        ("etl".into(), other.encode_to_vec()),
    ];
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("partitioner", "murmur2_random")
        .create()
        .expect("producer");
    for (key, value) in &records {
        producer
            .send(BaseRecord::to(&runs).key(key).payload(value))
            .map_err(|(e, _)| e)
            .expect("queued");
    }
    producer.flush(Duration::from_secs(15)).expect("flushed");

    let worker = Worker::new(&brokers, &group)
        .topics([runs.as_str()])
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "1000")
        .set("auto.commit.interval.ms", "200")
        .task("orders_daily", |run| async move {
            assert_eq!(run.snapshot.len(), 1);
            Ok(())
        })
        .job("send_tx", |run| async move {
            Ok(JobResult {
                output: Some(
                    json!({"tx": run.args["amount"]})
                        .as_object()
                        .unwrap()
                        .clone(),
                ),
                ..Default::default()
            })
        })
        .stage("price", |_| async { Err("model down".into()) });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async {
        let _ = stopped.await;
    }));

    // Three replies: the late command and the unknown task get none.
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("group.id", format!("{p}-reader"))
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .create()
        .expect("reader");
    reader.subscribe(&[&results]).expect("subscribe");
    let mut replies = BTreeMap::new();
    let until = std::time::Instant::now() + WAIT;
    while replies.len() < 3 {
        assert!(
            std::time::Instant::now() < until,
            "replies so far: {replies:?}"
        );
        let Some(Ok(m)) = reader.poll(Duration::from_millis(200)) else {
            continue;
        };
        let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
        // Where Reactor looks for a result of this key.
        assert_eq!(
            m.partition(),
            reactor::kafka::partition_for(key.as_bytes(), PARTITIONS),
            "{key}"
        );
        let value = m.payload().unwrap().to_vec();
        replies.insert(key, value);
    }
    let task_reply = RunResult::decode(replies["reports"].as_slice()).unwrap();
    assert_eq!(
        (
            task_reply.run_id.as_str(),
            task_reply.pass,
            task_reply.status
        ),
        ("orders_daily#7", 12, RunStatus::Succeeded as i32)
    );
    let step_reply = RunResult::decode(replies["k1"].as_slice()).unwrap();
    assert_eq!(
        (
            step_reply.run_id.as_str(),
            step_reply.pass,
            step_reply.reply_key.as_str()
        ),
        ("payout/k1#1/0", 3, "k1")
    );
    assert_eq!(
        serde_json::to_value(step_reply.output.unwrap()).unwrap(),
        json!({"tx": 250.0})
    );
    let stage_reply: Value = serde_json::from_slice(&replies["o1"]).expect("a JSON reply");
    assert_eq!(
        stage_reply,
        json!({"run_id": "price/o1#3", "pass": "9", "reply_key": "o1", "status": "RUN_STATUS_FAILED", "error": "model down", "version": "4"})
    );

    // Every command's offset is committed, the skipped ones too. The
    // replies can arrive before the worker reaches the last skipped command,
    // so wait for the commits while it runs, then check again once it stopped.
    let mut per_partition = BTreeMap::new();
    for (key, _) in &records {
        *per_partition
            .entry(reactor::kafka::partition_for(key.as_bytes(), PARTITIONS))
            .or_insert(0i64) += 1;
    }
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("group.id", &group)
        .create()
        .expect("probe");
    let committed = || {
        let mut tpl = TopicPartitionList::new();
        for partition in 0..PARTITIONS {
            tpl.add_partition(&runs, partition);
        }
        let committed = probe
            .committed_offsets(tpl, Duration::from_secs(15))
            .expect("committed offsets");
        (0..PARTITIONS)
            .map(|partition| {
                let offset = committed
                    .find_partition(&runs, partition)
                    .map(|e| e.offset());
                match offset {
                    Some(Offset::Offset(o)) => (partition, o),
                    _ => (partition, 0),
                }
            })
            .collect::<BTreeMap<i32, i64>>()
    };
    let expected: BTreeMap<i32, i64> = (0..PARTITIONS)
        .map(|partition| {
            (
                partition,
                per_partition.get(&partition).copied().unwrap_or(0),
            )
        })
        .collect();
    let until = std::time::Instant::now() + WAIT;
    while committed() != expected && std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    stop.send(()).unwrap();
    running.await.unwrap().expect("the worker ran");
    assert_eq!(committed(), expected, "committed offset per partition");
}
