#![cfg(feature = "real-broker")]
//! The real-broker tier: Reactor against a Kafka-compatible broker given by
//! `REACTOR_TEST_BROKERS` (`cargo test --features real-broker --test
//! real_broker`; `.ci/run` starts tansu for it). What a real broker proves
//! and the mock cluster cannot: topic creation through the Admin API, the
//! committed path of a transaction (outputs and input offsets visible
//! together, an open transaction hidden from `read_committed`), consumer
//! groups with two instances, a client outside Rust (Python
//! confluent-kafka, JSON) driving Reactor, and processes launched by a JSON
//! command and by records on a topic of their own. No crash or restore-after-crash
//! tests here: see /work/shared/brokers.md for what tansu gets wrong.

mod support;

#[path = "support/real.rs"]
mod real;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use reactor::codec::{self, Format};
use reactor::kafka::{partition_for, topics, Error};
use real::WAIT;
use support::{ts, TASKS};

/// Whether the changelog holds a task record of `task` whose last-seen
/// `dwh.orders/max_dt` is `value`: the proof that a success was recorded.
fn last_seen_recorded(records: &[support::Record], task: &str, value: Timestamp) -> bool {
    records.iter().any(|x| {
        codec::decode_changelog(&x.key, x.payload.as_deref())
            .ok()
            .filter(|c| c.key == task)
            .and_then(|c| match c.value {
                Some(reactor::changelog::Value::Task(t)) => {
                    t.last_seen.get("dwh.orders/max_dt").copied()
                }
                _ => None,
            })
            == Some(value)
    })
}

/// The `price` stage on active offers, with a run topic unique to the test.
fn price_stage(kafka: &support::TestKafka) -> String {
    format!(
        "[[stage]]\nname = \"price\"\nwhen = \"offer.status == 'active'\"\n\
         topic = \"{}.price.runs\"\ntimeout = \"1m\"\n",
        kafka.prefix
    )
}

#[test]
fn reactor_creates_its_missing_topics_with_a_compacted_changelog() {
    let kafka = real::kafka("topics");
    let config = real::config(&kafka, &format!("{TASKS}\n{}", price_stage(&kafka)), 3);
    let t = config.kafka.topics.clone();
    // Its own topics (offer topics included) and the stage's run topic.
    let mut all: Vec<&str> = t.all().map(|(_, name)| name).to_vec();
    all.extend(config.stage_topics());
    let before = real::partition_counts(&kafka);
    assert!(all.iter().all(|name| !before.contains_key(*name)));

    let shards = real::block_on(topics::ensure(&kafka.clients(), &config)).expect("ensure");
    assert_eq!(shards, 3);
    let counts = real::partition_counts(&kafka);
    for name in all {
        assert!(counts.contains_key(name), "{name} not created: {counts:?}");
    }
    for name in t.co_partitioned() {
        assert_eq!(
            counts[name], 3,
            "{name}: co-partitioned topics share the shard count"
        );
    }

    let compact = Some("compact".to_string());
    for name in [&t.changelog, &t.ctl] {
        let described = real::topic_config(&kafka, name);
        assert_eq!(
            described.get("cleanup.policy"),
            Some(&compact),
            "{name}: {described:?}"
        );
    }
    let results = real::topic_config(&kafka, &t.results);
    assert_ne!(results.get("cleanup.policy"), Some(&compact), "{results:?}");

    // A second start (or a second instance) finds everything in place.
    let again = real::block_on(topics::ensure(&kafka.clients(), &config)).expect("ensure again");
    assert_eq!(again, 3);
}

#[test]
fn co_partitioning_mismatch_is_refused() {
    let kafka = real::kafka("copart");
    let config = real::config(&kafka, TASKS, 3);
    let t = config.kafka.topics.clone();
    real::create_topic(&kafka, &t.results, 2);
    real::create_topic(&kafka, &t.commands, 3);

    let err = real::block_on(topics::ensure(&kafka.clients(), &config)).unwrap_err();
    assert!(matches!(err, Error::CoPartition { .. }), "{err}");
    assert!(!err.is_retryable());
    let message = err.to_string();
    assert!(
        message.contains(&format!("{}=2", t.results))
            && message.contains(&format!("{}=3", t.commands)),
        "{message}"
    );
    // Refused before creating anything.
    assert!(!real::partition_counts(&kafka).contains_key(&t.changelog));
}

#[test]
fn exactly_once_round_trip_commits_input_offsets_with_the_transaction() {
    let kafka = real::kafka("eos");
    let config = real::config(&kafka, TASKS, 2);
    kafka.create_topics(&config, 2);
    let t = config.kafka.topics.clone();
    let group = config.kafka.group_id.clone();
    let instance = kafka.start(&config, "a", 2);
    instance.wait_ready(WAIT);
    let producer = kafka.producer();

    real::send(
        &producer,
        &t.ctl,
        "dwh.orders/max_dt",
        &real::ctl("2024-05-01T10:00:00Z"),
    );
    // The support reader is `read_committed`: it sees only committed transactions.
    let reader = kafka.reader(&t.runs);
    let got = real::runs(&reader.read_until(WAIT, |r| !r.is_empty()));
    assert_eq!(got.len(), 1, "{got:?}");
    let run = &got[0];
    assert_eq!(run.run_id, "orders_daily#1");
    assert_eq!(run.reply_topic, t.results);
    assert_eq!(run.reply_key, "reports");

    real::succeed(&producer, run);
    real::send(
        &producer,
        &t.ctl,
        "dwh.orders/max_dt",
        &real::ctl("2024-05-02T01:00:00Z"),
    );
    let got = real::runs(&reader.read_until(WAIT, |r| !r.is_empty()));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].run_id, "orders_daily#2");
    assert_eq!(
        got[0].snapshot["dwh.orders/max_dt"].seconds,
        ts("2024-05-02T01:00:00Z").as_second()
    );

    // The result's offset reaches the group through the transaction (with
    // exactly-once on, Reactor never commits offsets any other way) while it runs …
    let owner = partition_for(b"reports", 2);
    let offsets = real::wait_committed(&kafka, &group, &t.results);
    assert_eq!(offsets[&owner], (Some(1), 1), "{offsets:?}");
    // … and after a graceful stop the group's committed offsets are at the end.
    instance.stop();
    let offsets = real::committed(&kafka, &group, &t.results);
    for (p, (committed, high)) in &offsets {
        if *high > 0 {
            assert_eq!(*committed, Some(*high), "results[{p}]: {offsets:?}");
        }
    }
    assert_eq!(offsets[&owner], (Some(1), 1), "{offsets:?}");

    let changelog = kafka.reader(&t.changelog).read_until(WAIT, |r| {
        last_seen_recorded(r, "orders_daily", ts("2024-05-01T10:00:00Z"))
    });
    assert!(last_seen_recorded(
        &changelog,
        "orders_daily",
        ts("2024-05-01T10:00:00Z")
    ));
}

#[test]
fn an_open_transaction_is_hidden_until_committed() {
    let kafka = real::kafka("opentx");
    let topic = format!("{}.tx", kafka.prefix);
    let input = format!("{}.in", kafka.prefix);
    let group = format!("{}-txgroup", kafka.prefix);
    real::create_topic(&kafka, &topic, 1);
    real::create_topic(&kafka, &input, 1);

    let producer: ThreadedProducer<DefaultProducerContext> = kafka
        .clients()
        .producer(Some(&format!("{}-tx", kafka.prefix)))
        .create()
        .expect("transactional producer");
    producer
        .init_transactions(Duration::from_secs(30))
        .expect("init transactions");
    producer.begin_transaction().expect("begin");
    producer
        .send(BaseRecord::to(&topic).key("k").payload("inside"))
        .map_err(|(e, _)| e)
        .expect("send");
    producer.flush(Duration::from_secs(10)).expect("flush");
    // Input offsets in the same transaction, as Reactor sends them.
    let group_consumer: BaseConsumer = kafka
        .clients()
        .reader()
        .set("group.id", &group)
        .create()
        .expect("group consumer");
    let metadata = group_consumer.group_metadata().expect("group metadata");
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset(&input, 0, Offset::Offset(7))
        .unwrap();
    producer
        .send_offsets_to_transaction(&offsets, &metadata, Duration::from_secs(30))
        .expect("send offsets");

    let uncommitted: BaseConsumer = kafka
        .clients()
        .reader()
        .set("isolation.level", "read_uncommitted")
        .set("enable.partition.eof", "false")
        .set("group.id", format!("{}-uncommitted", kafka.prefix))
        .create()
        .expect("read_uncommitted reader");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, Offset::Beginning)
        .unwrap();
    uncommitted.assign(&tpl).expect("assign");
    let until = Instant::now() + WAIT;
    let seen = loop {
        assert!(
            Instant::now() < until,
            "read_uncommitted never saw the record"
        );
        if let Some(Ok(m)) = uncommitted.poll(Duration::from_millis(100)) {
            break rdkafka::Message::payload(&m).map(<[u8]>::to_vec);
        }
    };
    assert_eq!(seen.as_deref(), Some(&b"inside"[..]));

    let committed_reader = kafka.reader(&topic);
    let early = committed_reader.read_until(Duration::from_secs(3), |r| !r.is_empty());
    assert!(
        early.is_empty(),
        "read_committed saw an open transaction: {early:?}"
    );
    assert_eq!(
        real::committed(&kafka, &group, &input)[&0].0,
        None,
        "offsets of an open transaction are not the group's yet"
    );

    producer
        .commit_transaction(Duration::from_secs(30))
        .expect("commit");
    let after = committed_reader.read_until(WAIT, |r| !r.is_empty());
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0].payload.as_deref(), Some(&b"inside"[..]));
    assert_eq!(real::committed(&kafka, &group, &input)[&0].0, Some(7));
}

/// `n` pool names whose murmur2 partitions cover all `partitions`.
fn pools_covering(partitions: i32, n: usize) -> Vec<String> {
    let mut by_partition: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    let mut i = 0;
    while (by_partition.len() as i32) < partitions || by_partition.values().flatten().count() < n {
        let name = format!("pool{i}");
        by_partition
            .entry(partition_for(name.as_bytes(), partitions))
            .or_default()
            .push(name);
        i += 1;
    }
    // One per partition first, then the rest in order.
    let mut firsts: Vec<String> = by_partition.values().map(|v| v[0].clone()).collect();
    let rest: Vec<String> = by_partition
        .values()
        .flat_map(|v| v[1..].iter().cloned())
        .collect();
    firsts.extend(rest);
    firsts.truncate(n);
    firsts
}

/// Two instances share the shards, one leaves and the other takes its
/// shards over. `.ci/run` runs this one on kfake, not tansu: tansu does not
/// complete a cooperative rebalance (the joining member is assigned nothing
/// in every round, so the shards revoked for it stay unowned).
#[test]
fn two_instances_share_the_shards_and_hand_them_over() {
    const PARTITIONS: i32 = 4;
    let kafka = real::kafka("group");
    let pools = pools_covering(PARTITIONS, 6);
    let mut tasks = String::new();
    for (i, pool) in pools.iter().enumerate() {
        tasks.push_str(&format!(
            "[[pool]]\nname = \"{pool}\"\nmax_running = 1\n\n\
             [[task]]\nid = \"t{i}\"\npool = \"{pool}\"\n\
             trigger = \"chunk_delta(dwh.orders/max_dt, day)\"\ntimeout = \"1h\"\n\n"
        ));
    }
    let config = real::config(&kafka, &tasks, PARTITIONS);
    kafka.create_topics(&config, PARTITIONS);
    let t = config.kafka.topics.clone();
    let task_ids: Vec<String> = (0..pools.len()).map(|i| format!("t{i}")).collect();

    // `a` joins first and leads the group; the follower `b` is the one that
    // leaves (tansu can wedge a group whose leader leaves first).
    let started = Instant::now();
    let phase = |what: &str| {
        eprintln!(
            "two instances: {what} at {:.1}s",
            started.elapsed().as_secs_f64()
        )
    };
    let a = kafka.start(&config, "a", PARTITIONS);
    a.wait_ready(WAIT);
    phase("a ready");
    let b = kafka.start(&config, "b", PARTITIONS);
    b.wait_ready(WAIT);
    phase("b ready");

    let producer = kafka.producer();
    let reader = kafka.reader(&t.runs);
    // Every record read; `real::runs` counts each (partition, offset) once,
    // so only a dispatch under two records shows as a duplicate.
    let mut records = Vec::new();
    let mut day = |n: usize| {
        let value = format!("2024-05-{n:02}T10:00:00Z");
        real::send(&producer, &t.ctl, "dwh.orders/max_dt", &real::ctl(&value));
        let suffix = format!("#{n}");
        let todays = |records: &[support::Record]| {
            let mut by_id = BTreeMap::new();
            for run in real::runs(records) {
                if run.run_id.ends_with(&suffix) {
                    by_id.entry(run.run_id.clone()).or_insert(run);
                }
            }
            by_id.into_values().collect::<Vec<_>>()
        };
        let until = Instant::now() + WAIT;
        while todays(&records).len() < task_ids.len() && Instant::now() < until {
            records.extend(reader.read_until(Duration::from_millis(500), |_| false));
        }
        let got = todays(&records);
        assert_eq!(got.len(), task_ids.len(), "day {n}: {got:?}");
        for run in &got {
            real::succeed(&producer, run);
        }
    };

    day(1);
    phase("day 1 answered");
    day(2);
    phase("day 2 answered");
    // The follower leaves; the leader takes its shards over (restoring them
    // from the changelog) and goes on dispatching for every pool.
    b.stop();
    phase("b stopped");
    day(3);
    phase("day 3 answered");
    // Any late duplicate shows up by now.
    records.extend(reader.read_until(Duration::from_secs(3), |_| false));
    real::wait_committed(&kafka, &config.kafka.group_id, &t.results);
    phase("results committed");
    a.stop();
    phase("a stopped");

    let all = real::runs(&records);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for run in &all {
        *counts.entry(run.run_id.as_str()).or_default() += 1;
    }
    let mut expected: BTreeMap<&str, usize> = BTreeMap::new();
    let ids: Vec<String> = task_ids
        .iter()
        .flat_map(|task| (1..=3).map(move |n| format!("{task}#{n}")))
        .collect();
    for id in &ids {
        expected.insert(id, 1);
    }
    assert_eq!(counts, expected, "every firing dispatched exactly once");
}

fn python_available() -> bool {
    Command::new("python3")
        .args(["-c", "import confluent_kafka"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn a_python_client_drives_reactor_in_json() {
    if !python_available() {
        assert!(
            std::env::var_os("REACTOR_TEST_REQUIRE_PYTHON").is_none(),
            "python3 with confluent_kafka is required (REACTOR_TEST_REQUIRE_PYTHON is set)"
        );
        eprintln!("skipping a_python_client_drives_reactor_in_json: python3 -c 'import confluent_kafka' fails");
        return;
    }
    let kafka = real::kafka("python");
    let mut config = real::config(&kafka, TASKS, 2);
    config.kafka.formats.runs = Format::Json;
    kafka.create_topics(&config, 2);
    let t = config.kafka.topics.clone();
    let instance = kafka.start(&config, "a", 2);
    instance.wait_ready(WAIT);

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/worker.py");
    // Output to files: a pipe nobody reads while waiting could fill up.
    let out_path = std::env::temp_dir().join(format!("{}-worker.out", kafka.prefix));
    let err_path = std::env::temp_dir().join(format!("{}-worker.err", kafka.prefix));
    let mut child = Command::new("python3")
        .arg(script)
        .args(["--brokers", &kafka.brokers])
        .args(["--group", &format!("{}-py", kafka.prefix)])
        .args(["--ctl-topic", &t.ctl, "--runs-topic", &t.runs])
        .args(["--entity", "dwh.orders", "--param", "max_dt"])
        .args(["--ctl-value", "2024-05-01T10:00:00Z"])
        .args(["--ctl-value", "2024-05-02T01:00:00+00:00"])
        .args(["--timeout", "60"])
        .stdout(std::fs::File::create(&out_path).expect("worker stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("worker stderr file"))
        .spawn()
        .expect("spawning python3");
    let until = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for python3") {
            break status;
        }
        if Instant::now() > until {
            eprintln!("worker.py did not finish in 180 s: killing it");
            let _ = child.kill();
            break child.wait().expect("killed worker");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    let _ = std::fs::remove_file(&err_path);
    assert!(
        status.success(),
        "worker.py failed ({status}); stderr:\n{stderr}\nstdout:\n{stdout}"
    );
    let runs: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON run command"))
        .collect();
    let ids: Vec<&str> = runs.iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["orders_daily#1", "orders_daily#2"], "{runs:?}");
    assert_eq!(runs[0]["task"], "orders_daily");
    assert_eq!(runs[0]["reply_topic"], t.results.as_str());
    assert_eq!(runs[0]["reply_key"], "reports");

    // Reactor accepted the Python worker's JSON result of run #2: it recorded
    // the day-2 value as last seen.
    let day2 = ts("2024-05-02T01:00:00Z");
    let changelog = kafka
        .reader(&t.changelog)
        .read_until(WAIT, |r| last_seen_recorded(r, "orders_daily", day2));
    assert!(
        last_seen_recorded(&changelog, "orders_daily", day2),
        "no changelog record with last-seen {day2}"
    );
    assert!(
        kafka
            .reader(&t.dead)
            .read_until(Duration::from_secs(2), |r| !r.is_empty())
            .is_empty(),
        "a record of the Python client went to dead letters"
    );
    instance.stop();
}

#[test]
fn an_offer_flows_through_a_stage_in_json_with_exactly_once() {
    let kafka = real::kafka("offers");
    let mut config = real::config(&kafka, &price_stage(&kafka), 2);
    config.kafka.formats.runs = Format::Json;
    config.kafka.formats.offer_state = Format::Json;
    let t = config.kafka.topics.clone();
    let stage_topic = config.stages[0].topic.clone();
    assert!(!real::partition_counts(&kafka).contains_key(&stage_topic));
    // Reactor creates every topic itself, the stage's run topic included.
    kafka.create_topics(&config, 2);
    assert_eq!(
        real::wait_for_topic(&kafka, &stage_topic),
        config.kafka.partitions
    );
    let instance = kafka.start(&config, "a", 2);
    instance.wait_ready(WAIT);

    // A stage worker in plain Rust: reads its run topic (read_committed),
    // answers in JSON to the reply topic, keyed by the reply key.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let worker = {
        let reader = kafka.reader(&stage_topic);
        let producer = kafka.producer();
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut answered = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for record in reader.read_until(Duration::from_millis(200), |_| false) {
                    let payload = record.payload.as_deref().expect("a run command");
                    assert_eq!(payload.first(), Some(&b'{'), "runs are JSON");
                    let wire = codec::to_json(codec::MessageKind::RunCommand, payload).unwrap();
                    let run = codec::decode_stage_run_command(payload).unwrap();
                    if answered.contains(&(run.run_id.clone(), run.pass)) {
                        continue; // a re-read, not a new dispatch
                    }
                    answered.push((run.run_id.clone(), run.pass));
                    let price = run.body["price"].as_i64().unwrap();
                    let result = reactor::engine::RunResult {
                        step: Default::default(),
                        run_id: run.run_id.to_string(),
                        pass: run.pass,
                        status: reactor::run::Status::Succeeded,
                        error: None,
                        stage: reactor::engine::StageReply {
                            version: Some(run.version),
                            update: Some(reactor::engine::Update::Patch(
                                serde_json::json!({"price_predicted": price + 18})
                                    .as_object()
                                    .unwrap()
                                    .clone(),
                            )),
                            state: Some(serde_json::json!({"model": 3})),
                            timer: None,
                        },
                    };
                    let reply_key = wire["reply_key"].as_str().unwrap();
                    let reply_topic = wire["reply_topic"].as_str().unwrap();
                    let payload = codec::encode_run_result(&result, reply_key, Format::Json);
                    real::send(&producer, reply_topic, reply_key, &payload);
                }
            }
            answered
        })
    };

    let producer = kafka.producer();
    real::send(
        &producer,
        &t.offers,
        "o1",
        br#"{"offer_id":"o1","body":{"status":"active","price":100}}"#,
    );
    // The support reader is read_committed: only committed transactions show.
    let reader = kafka.reader(&t.offer_state);
    let mut records = Vec::new();
    let until = Instant::now() + WAIT;
    let states = loop {
        records.extend(reader.read_until(Duration::from_millis(500), |_| false));
        let mut seen = std::collections::BTreeSet::new();
        let states: Vec<reactor::action::OfferState> = records
            .iter()
            .filter(|r| seen.insert((r.partition, r.offset)))
            .map(|r| {
                let payload = r.payload.as_deref().unwrap();
                assert_eq!(payload.first(), Some(&b'{'), "offer states are JSON");
                codec::decode_offer_state(payload).unwrap().0
            })
            .collect();
        if states.iter().any(|s| s.version == 2) || Instant::now() > until {
            break states;
        }
    };
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let answered = worker.join().expect("the worker");
    assert_eq!(answered, [("price/o1#1".into(), 1)]);
    let summary: Vec<(u64, &str)> = states
        .iter()
        .map(|s| (s.version, s.cause.as_str()))
        .collect();
    assert_eq!(summary, [(1, "external"), (2, "stage:price")], "{states:?}");
    let committed = &states[1];
    assert_eq!(committed.offer, "o1");
    assert_eq!(committed.changed_fields, ["price_predicted"]);
    assert_eq!(committed.body["price_predicted"], 118);
    assert_eq!(*committed.states["price"], serde_json::json!({"model": 3}));
    instance.stop();
}

#[test]
fn processes_launch_by_command_and_by_event_with_exactly_once() {
    use reactor::action::Event;
    use support::steps::{processes, step_runs, succeeded, worker};

    let kafka = real::kafka("processes");
    let mut config = real::config(&kafka, &processes(&kafka), 2);
    config.kafka.formats.runs = Format::Json;
    let t = config.kafka.topics.clone();
    let group = config.kafka.group_id.clone();
    let (reserve, send) = (config.jobs[0].topic.clone(), config.jobs[1].topic.clone());
    let payments = format!("{}.payments", kafka.prefix);
    // Reactor creates the job topics and the launch topic itself.
    kafka.create_topics(&config, 2);
    for topic in [&reserve, &send, &payments] {
        assert_eq!(real::wait_for_topic(&kafka, topic), 2, "{topic}");
    }
    let instance = kafka.start(&config, "a", 2);
    instance.wait_ready(WAIT);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answering = worker(
        &kafka,
        &[reserve.clone(), send.clone()],
        &t.results,
        std::sync::Arc::clone(&stop),
    );

    // By a command in JSON, and by a payment record as its producer wrote it.
    let producer = kafka.producer();
    real::send(
        &producer,
        &t.commands,
        "u1",
        br#"{"launch":{"process":"payout","keys":["u1"],"params":{"amount":5}}}"#,
    );
    real::send(&producer, &payments, "p1", br#"{"id":"p1","amount":7}"#);
    // Refused by `when` in the owning shard: an event, no run.
    real::send(&producer, &payments, "p0", br#"{"id":"p0","amount":0}"#);

    let events = kafka.reader(&t.events).read_until(WAIT, |r| {
        let events = support::events(r);
        succeeded(&events).len() >= 2
            && events
                .iter()
                .any(|e| matches!(e, Event::LaunchRejected { .. }))
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    answering.join().expect("the worker");
    let events = support::events(&events);
    assert_eq!(
        succeeded(&events),
        ["p1", "u1"].into_iter().map(String::from).collect()
    );
    let sends = step_runs(
        &kafka
            .reader(&send)
            .read_until(WAIT, |r| step_runs(r).len() >= 2),
    );
    assert_eq!(sends.len(), 2, "{sends:?}");
    for run in &sends {
        // The first step's output reached the second through the context.
        assert_eq!(run.context["by"], "reserve", "{run:?}");
    }
    assert_eq!(
        sends
            .iter()
            .find(|r| r.key == "p1")
            .map(|r| r.params["amount"].clone()),
        Some(serde_json::json!(7))
    );
    // The payment records' offsets were committed with the transactions
    // that forwarded their launches.
    real::wait_committed(&kafka, &group, &payments);
    instance.stop();
}
