//! The runtime on librdkafka's in-process mock cluster (no service needed).
//! The mock accepts transactional calls without implementing them, so these
//! tests assert what reaches the topics and the recovery paths; transaction
//! visibility is proven on a real broker (`tests/real_broker.rs`).

mod support;

use std::time::Duration;

use reactor::codec::{self, CtlRecord, Format};
use reactor::engine::RunResult;
use reactor::run::Status;
use support::{ts, Record, TestKafka, TASKS};

fn ctl(entity: &str, param: &str, value: &str, format: Format) -> Vec<u8> {
    codec::encode_ctl_change(
        &CtlRecord {
            entity: entity.into(),
            param: param.into(),
            value: ts(value),
        },
        None,
        "test",
        format,
    )
}

fn runs(records: &[Record]) -> Vec<reactor::proto::v1::RunCommand> {
    records
        .iter()
        .map(|r| codec::decode_run_command(r.payload.as_deref().unwrap()).unwrap())
        .collect()
}

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn ctl_change_dispatches_a_run_and_success_records_last_seen() {
    let kafka = TestKafka::new("e2e");
    let config = kafka.config(TASKS, 2, true);
    kafka.create_topics(&config, 2);
    let t = config.kafka.topics.clone();
    let instance = kafka.start(&config, "a", 2);
    instance.wait_ready(WAIT);

    // JSON input, as kcat or a script would write it.
    kafka.send(
        &t.ctl,
        "dwh.orders/max_dt",
        br#"{"entity":"dwh.orders","param":"max_dt","value":"2024-05-01T10:00:00Z"}"#,
    );
    let reader = kafka.reader(&t.runs);
    let got = runs(&reader.read_until(WAIT, |r| !r.is_empty()));
    assert_eq!(got.len(), 1);
    let run = &got[0];
    assert_eq!(run.task, "orders_daily");
    assert_eq!(run.run_id, "orders_daily#1");
    assert_eq!(run.attempt, 1);
    assert_eq!(run.reply_topic, t.results);
    assert_eq!(run.reply_key, "reports");
    assert!(run.snapshot.contains_key("dwh.orders/max_dt"));

    // A protobuf result; the same day again changes nothing.
    let result = RunResult {
        step: Default::default(),
        stage: Default::default(),
        run_id: run.run_id.to_string(),
        pass: run.pass,
        status: Status::Succeeded,
        error: None,
    };
    kafka.send(
        &t.results,
        &run.reply_key,
        &codec::encode_run_result(&result, &run.reply_key, Format::Protobuf),
    );
    kafka.send(
        &t.ctl,
        "dwh.orders/max_dt",
        &ctl(
            "dwh.orders",
            "max_dt",
            "2024-05-01T12:00:00Z",
            Format::Protobuf,
        ),
    );
    // The next day fires again: proof that the first success recorded last-seen.
    kafka.send(
        &t.ctl,
        "dwh.orders/max_dt",
        &ctl("dwh.orders", "max_dt", "2024-05-02T01:00:00Z", Format::Json),
    );
    let got = runs(&reader.read_until(WAIT, |r| !r.is_empty()));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].run_id, "orders_daily#2");
    assert_eq!(
        got[0].snapshot["dwh.orders/max_dt"].seconds,
        ts("2024-05-02T01:00:00Z").as_second()
    );

    // The changelog holds the task's state with the recorded last-seen value.
    let changelog = kafka.reader(&t.changelog).read_until(WAIT, |r| {
        r.iter().any(|x| {
            codec::decode_changelog(&x.key, x.payload.as_deref())
                .ok()
                .and_then(|c| match c.value {
                    Some(reactor::changelog::Value::Task(t)) => {
                        t.last_seen.get("dwh.orders/max_dt").copied()
                    }
                    _ => None,
                })
                == Some(ts("2024-05-01T10:00:00Z"))
        })
    });
    assert!(!changelog.is_empty());

    // A health pass (every 5 s) publishes the task's age for `/metrics`.
    let until = std::time::Instant::now() + WAIT;
    let published = loop {
        let published = instance.task_ages.published();
        if !published.is_empty() || std::time::Instant::now() > until {
            break published;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let tasks: Vec<&str> = published.iter().map(|(task, _)| task.as_str()).collect();
    assert_eq!(tasks, ["orders_daily"], "{published:?}");
    assert!(published[0].1 >= 0.0);
    instance.stop();
}

#[test]
fn poison_records_go_to_dead_letters_and_processing_goes_on() {
    let kafka = TestKafka::new("poison");
    let config = kafka.config(TASKS, 1, true);
    kafka.create_topics(&config, 1);
    let t = config.kafka.topics.clone();
    let instance = kafka.start(&config, "a", 1);
    instance.wait_ready(WAIT);

    kafka.send(&t.results, "reports", b"\xff\x00garbage");
    kafka.send(&t.ctl, "x", b"{not json");
    kafka.send(
        &t.ctl,
        "dwh.orders/max_dt",
        &ctl(
            "dwh.orders",
            "max_dt",
            "2024-05-01T10:00:00Z",
            Format::Protobuf,
        ),
    );

    let dead = kafka.reader(&t.dead).read_until(WAIT, |r| r.len() >= 2);
    assert_eq!(dead.len(), 2, "{dead:?}");
    for d in &dead {
        let header = |k: &str| {
            d.headers
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| String::from_utf8_lossy(v).to_string())
                .unwrap_or_else(|| panic!("header {k} missing: {:?}", d.headers))
        };
        assert!(!header("reactor.reason").is_empty());
        assert!(
            header("reactor.source.topic") == t.results || header("reactor.source.topic") == t.ctl
        );
        header("reactor.source.partition");
        header("reactor.source.offset");
    }
    let got = runs(&kafka.reader(&t.runs).read_until(WAIT, |r| !r.is_empty()));
    assert_eq!(got.len(), 1, "processing went on after the poison records");
    instance.stop();
}

/// Six pools with one task each, spread over four partitions.
fn pooled_tasks() -> String {
    (0..6)
        .map(|i| {
            format!(
                "[[pool]]\nname = \"p{i}\"\nmax_running = 1\n\n[[task]]\nid = \"t{i}\"\npool = \"p{i}\"\ntrigger = \"delta(src/p{i}, 1min)\"\ntimeout = \"1h\"\n\n"
            )
        })
        .collect()
}

/// Publishes round `round` of the six parameters.
fn publish_round(kafka: &TestKafka, topic: &str, round: u32) {
    for i in 0..6 {
        let value = format!("2024-01-01T{:02}:00:00Z", round);
        kafka.send(
            topic,
            &format!("src/p{i}"),
            &ctl("src", &format!("p{i}"), &value, Format::Protobuf),
        );
    }
}

/// Answers every run command in `records` not answered yet.
fn answer(
    kafka: &TestKafka,
    topic: &str,
    records: &[Record],
    answered: &mut std::collections::HashSet<(String, u64)>,
) {
    for run in runs(records) {
        if answered.insert((run.run_id.clone(), run.pass)) {
            let result = RunResult {
                step: Default::default(),
                stage: Default::default(),
                run_id: run.run_id.to_string(),
                pass: run.pass,
                status: Status::Succeeded,
                error: None,
            };
            kafka.send(
                topic,
                &run.reply_key,
                &codec::encode_run_result(&result, &run.reply_key, Format::Json),
            );
        }
    }
}

/// Run ids expected after `rounds` rounds: t0#1 … t5#rounds.
fn expected_ids(rounds: u32) -> std::collections::BTreeSet<String> {
    (0..6)
        .flat_map(|i| (1..=rounds).map(move |n| format!("t{i}#{n}")))
        .collect()
}

/// Creates the topics, starts instance "a", publishes round 1 and answers
/// its six runs: returns the instance, a reader of the run topic, the runs
/// read so far and the (run id, pass) pairs answered.
fn first_round(
    kafka: &TestKafka,
    config: &reactor::config::Config,
    partitions: i32,
) -> (
    support::Instance,
    support::Reader,
    Vec<Record>,
    std::collections::HashSet<(String, u64)>,
) {
    kafka.create_topics(config, partitions);
    let t = &config.kafka.topics;
    let reader = kafka.reader(&t.runs);
    let mut answered = std::collections::HashSet::new();
    let a = kafka.start(config, "a", partitions);
    a.wait_ready(WAIT);
    publish_round(kafka, &t.ctl, 1);
    let seen = reader.read_until(WAIT, |r| r.len() >= 6);
    answer(kafka, &t.results, &seen, &mut answered);
    (a, reader, seen, answered)
}

#[test]
fn two_instances_with_rebalances_dispatch_every_firing_exactly_once() {
    let kafka = TestKafka::new("rebalance");
    let config = kafka.config(&pooled_tasks(), 4, true);
    let t = config.kafka.topics.clone();
    let (a, reader, mut seen, mut answered) = first_round(&kafka, &config, 4);

    // A second instance joins: the partitions are split between the two.
    let b = kafka.start(&config, "b", 4);
    b.wait_ready(WAIT);
    std::thread::sleep(Duration::from_secs(2));
    publish_round(&kafka, &t.ctl, 2);
    seen.extend(reader.read_until(WAIT, |r| r.len() >= 6));
    answer(&kafka, &t.results, &seen, &mut answered);

    // One leaves gracefully: the other takes every partition over.
    b.stop();
    std::thread::sleep(Duration::from_secs(2));
    publish_round(&kafka, &t.ctl, 3);
    seen.extend(reader.read_until(WAIT, |r| r.len() >= 6));
    // Nothing more may come: wait a little for stragglers.
    seen.extend(reader.read_until(Duration::from_secs(3), |_| false));

    let ids: Vec<String> = runs(&seen).into_iter().map(|r| r.run_id).collect();
    let distinct: std::collections::BTreeSet<String> = ids.iter().cloned().collect();
    assert_eq!(distinct, expected_ids(3), "every firing dispatched");
    assert_eq!(
        ids.len(),
        distinct.len(),
        "no firing dispatched twice: {ids:?}"
    );
    a.stop();
}

#[test]
fn a_crashed_instance_loses_no_run_and_its_successor_reuses_the_same_ids() {
    // At-least-once mode, as brokers.md prescribes for crash tests on the
    // mock cluster: regular offset commits, duplicates only under the same run id.
    let kafka = TestKafka::new("crash");
    let config = kafka.config(&pooled_tasks(), 2, false);
    let t = config.kafka.topics.clone();
    let (a, reader, seen, _) = first_round(&kafka, &config, 2);
    // Round 2 arrives and the instance dies in the middle of it.
    publish_round(&kafka, &t.ctl, 2);
    std::thread::sleep(Duration::from_millis(30));
    a.crash();

    let b = kafka.start(&config, "b", 2);
    b.wait_ready(WAIT);
    let expected = expected_ids(2);
    let done = |r: &[Record]| {
        let ids: std::collections::BTreeSet<String> =
            runs(r).into_iter().map(|x| x.run_id).collect();
        ids.is_superset(&expected)
    };
    let mut all = seen.clone();
    all.extend(reader.read_until(WAIT, |r| {
        let mut both = seen.clone();
        both.extend_from_slice(r);
        done(&both)
    }));
    let commands = runs(&all);
    let distinct: std::collections::BTreeSet<String> =
        commands.iter().map(|r| r.run_id.clone()).collect();
    assert_eq!(distinct, expected, "no run lost across the crash");
    // A firing redone after the crash carries the same run id and snapshot:
    // one firing, one id, whichever instance sent it.
    for id in &distinct {
        let snapshots: std::collections::BTreeSet<String> = commands
            .iter()
            .filter(|r| &r.run_id == id)
            .map(|r| format!("{:?}", r.snapshot))
            .collect();
        assert_eq!(
            snapshots.len(),
            1,
            "{id} dispatched with different snapshots"
        );
    }
    b.stop();
}

#[test]
fn a_failed_commit_is_aborted_and_redone() {
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
    let kafka = TestKafka::new("txn-errors");
    let config = kafka.config(TASKS, 1, true);
    kafka.create_topics(&config, 1);
    let t = config.kafka.topics.clone();
    let instance = kafka.start(&config, "a", 1);
    instance.wait_ready(WAIT);
    let mock = kafka.mock.as_ref().expect("mock cluster");
    // The next commits fail with an abortable error, then succeed again.
    mock.request_errors(
        RDKafkaApiKey::EndTxn,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID; 2],
    );
    kafka.send(
        &t.ctl,
        "dwh.orders/max_dt",
        &ctl(
            "dwh.orders",
            "max_dt",
            "2024-05-01T10:00:00Z",
            Format::Protobuf,
        ),
    );
    let reader = kafka.reader(&t.runs);
    let first = runs(&reader.read_until(WAIT, |r| !r.is_empty()));
    assert!(!first.is_empty());
    // The mock shows aborted records (no markers), so the same command may
    // appear twice, but always under the same deterministic id.
    assert!(
        first.iter().all(|r| r.run_id == "orders_daily#1"),
        "{first:?}"
    );
    // The instance recovered and keeps working.
    let result = RunResult {
        step: Default::default(),
        stage: Default::default(),
        run_id: "orders_daily#1".into(),
        pass: first[0].pass,
        status: Status::Succeeded,
        error: None,
    };
    kafka.send(
        &t.results,
        "reports",
        &codec::encode_run_result(&result, "reports", Format::Protobuf),
    );
    kafka.send(
        &t.ctl,
        "dwh.orders/max_dt",
        &ctl(
            "dwh.orders",
            "max_dt",
            "2024-05-02T10:00:00Z",
            Format::Protobuf,
        ),
    );
    let later = runs(&reader.read_until(WAIT, |r| {
        runs(r).iter().any(|x| x.run_id == "orders_daily#2")
    }));
    assert!(
        later.iter().any(|x| x.run_id == "orders_daily#2"),
        "{later:?}"
    );
    instance.stop();
}

/// `reactor_shards_resumed_total` as the recorder renders it.
fn shards_resumed(metrics: &metrics_exporter_prometheus::PrometheusHandle) -> u64 {
    metrics
        .render()
        .lines()
        .find_map(|l| l.strip_prefix("reactor_shards_resumed_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn shards_given_back_unchanged_are_resumed_without_a_restore() {
    let metrics = reactor::metrics::install().expect("metrics recorder");
    let kafka = TestKafka::new("resume");
    let config = kafka.config(&pooled_tasks(), 4, true);
    let t = config.kafka.topics.clone();
    let (a, reader, mut seen, mut answered) = first_round(&kafka, &config, 4);
    // Round 1's results committed, so every shard's changelog holds records.
    std::thread::sleep(Duration::from_secs(1));
    let before = shards_resumed(&metrics);

    // `b` joins and takes shards from `a`, which keeps them in memory with
    // where their changelog ended; no input comes, so `b` writes nothing
    // to them. Killed, `b` leaves no record behind: once its session
    // expires, `a` gets them back and resumes the shards it kept.
    let b = kafka.start(&config, "b", 4);
    b.wait_ready(WAIT);
    b.crash();
    let until = std::time::Instant::now() + WAIT;
    while shards_resumed(&metrics) == before {
        assert!(
            std::time::Instant::now() < until,
            "no shard resumed from memory after the other instance died"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    a.wait_ready(WAIT);

    // The resumed shards go on where they were: every task fires once more.
    publish_round(&kafka, &t.ctl, 2);
    seen.extend(reader.read_until(WAIT, |r| {
        runs(r)
            .into_iter()
            .filter(|x| x.run_id.ends_with("#2"))
            .count()
            >= 6
    }));
    answer(&kafka, &t.results, &seen, &mut answered);
    seen.extend(reader.read_until(Duration::from_secs(2), |_| false));
    let ids: Vec<String> = runs(&seen).into_iter().map(|r| r.run_id).collect();
    let distinct: std::collections::BTreeSet<String> = ids.iter().cloned().collect();
    assert_eq!(distinct, expected_ids(2), "every firing dispatched");
    assert_eq!(ids.len(), distinct.len(), "none twice: {ids:?}");
    a.stop();
}
