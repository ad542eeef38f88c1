//! Processes and jobs through the real runtime on librdkafka's in-process
//! mock cluster: launches by command (a key list spread over partitions)
//! and by an event on any topic, step run commands out on the job topics,
//! worker results moving the chain with `output`, a crash in the middle of
//! chains with a successor that loses no step and runs none twice. The mock
//! accepts transactional calls without implementing them, so these tests
//! assert what reaches the topics (see `tests/kafka_mock.rs`).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use reactor::action::{Event, Subject};
use reactor::codec::{self, Format, MessageKind};
use reactor::engine::Command;
use reactor::process::Position;
use support::steps::{processes, step_runs, succeeded, success, worker};
use support::{distinct, events, Record, TestKafka};

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn launches_by_command_and_by_event_run_their_chains() {
    let kafka = TestKafka::new("proc-e2e");
    let config = kafka.config(&processes(&kafka), 3, true);
    kafka.create_topics(&config, 3);
    let t = config.kafka.topics.clone();
    let (reserve, send) = (config.jobs[0].topic.clone(), config.jobs[1].topic.clone());
    let instance = kafka.start(&config, "a", 3);
    instance.wait_ready(WAIT);

    // One command for keys of several partitions, as JSON: each key is
    // forwarded to its owner, where the launch is validated; u0 is refused.
    let keys = ["u1", "u2", "u3", "u4", "u5"];
    let owners: BTreeSet<i32> = keys
        .iter()
        .map(|k| reactor::kafka::partition_for(k.as_bytes(), 3))
        .collect();
    assert!(owners.len() > 1, "the keys span partitions");
    kafka.send(
        &t.commands,
        "u1",
        br#"{"launch":{"process":"payout","keys":["u1","u2","u3","u4","u5"],"params":{"amount":5}}}"#,
    );
    let command = Command::Launch {
        process: "payout".into(),
        keys: vec!["u0".into()],
        params: serde_json::json!({"amount": 0})
            .as_object()
            .unwrap()
            .clone(),
        position: Position::Back,
        reset: false,
        source: None,
    };
    kafka.send(
        &t.commands,
        "u0",
        &codec::encode_command(&command, Format::Protobuf),
    );
    // And by an event: a payment record (plain JSON of the producer's own).
    let payments = format!("{}.payments", kafka.prefix);
    kafka.send(&payments, "p9", br#"{"id":"p9","amount":7}"#);

    let reserve_reader = kafka.reader(&reserve);
    let first_records = reserve_reader.read_until(WAIT, |r| step_runs(r).len() >= 6);
    let first = step_runs(&first_records);
    let mut launched: Vec<&str> = first.iter().map(|r| r.key.as_str()).collect();
    launched.sort_unstable();
    assert_eq!(launched, ["p9", "u1", "u2", "u3", "u4", "u5"], "{first:?}");
    for run in &first {
        assert_eq!((run.step, &*run.job, run.attempt), (0, "reserve", 1));
        // Instance numbers count a process's instances on the key's shard.
        assert!(
            run.instance.starts_with(&format!("payout/{}#", run.key)),
            "{run:?}"
        );
    }
    let p9 = first.iter().find(|r| r.key == "p9").unwrap();
    assert_eq!(p9.params["amount"], 7);
    assert_eq!(
        p9.source.as_deref(),
        Some(format!("event:{payments}").as_str())
    );
    // What a worker in any language sees, keyed by the business key.
    let record = &first_records[0];
    let wire = codec::to_json(MessageKind::RunCommand, record.payload.as_deref().unwrap()).unwrap();
    assert_eq!(wire["kind"], codec::KIND_STEP);
    assert_eq!(wire["reply_topic"], t.results.as_str());
    assert_eq!(wire["reply_key"], wire["key"]);
    assert_eq!(record.key, wire["key"].as_str().unwrap().as_bytes());

    // u0 was refused by `when`, in its owner's shard.
    let events_reader = kafka.reader(&t.events);
    let rejected = events(&events_reader.read_until(WAIT, |r| {
        events(r)
            .iter()
            .any(|e| matches!(e, Event::LaunchRejected { .. }))
    }));
    assert!(
        rejected.iter().any(|e| matches!(
            e,
            Event::LaunchRejected { subject: Subject::Process { key, .. }, reason, .. }
                if key == "u0" && reason == "validation"
        )),
        "{rejected:?}"
    );

    // The workers answer: each chain goes on with the context.
    for run in &first {
        kafka.send(
            &t.results,
            &run.key,
            &success(run, serde_json::json!({"reserved": run.key})),
        );
    }
    let send_reader = kafka.reader(&send);
    let second = step_runs(&send_reader.read_until(WAIT, |r| step_runs(r).len() >= 6));
    for run in &second {
        assert_eq!((run.step, &*run.job), (1, "send"));
        assert_eq!(run.context["reserved"], run.key.as_str());
    }
    for run in &second {
        kafka.send(&t.results, &run.key, &success(run, serde_json::json!({})));
    }
    let done = events_reader.read_until(WAIT, |r| succeeded(&events(r)).len() >= 6);
    assert_eq!(
        succeeded(&events(&done)),
        ["p9", "u1", "u2", "u3", "u4", "u5"]
            .into_iter()
            .map(String::from)
            .collect()
    );

    // The admin API shows a finished key's last outcome.
    let view = instance
        .ask(|reply| reactor::admin::Query::Process {
            process: "payout".into(),
            key: "u2".into(),
            reply,
        })
        .expect("the runtime answers")
        .expect("this instance owns every partition");
    assert!(view.record.active.is_none());
    assert_eq!(
        view.record.last.map(|l| l.status),
        Some(reactor::process::Status::Succeeded)
    );
    instance.stop();

    // `reactor tail` shows every record of the changelog, process keys and
    // instance counters included.
    let lines = kafka.tail(&t.changelog, &["--kind", "changelog", "--idle", "3s"]);
    for line in &lines {
        assert!(line["value"].get("undecodable").is_none(), "{line}");
    }
    let u2 = lines
        .iter()
        .rev()
        .find(|l| l["key"] == "process/payout/u2")
        .unwrap_or_else(|| panic!("no record of payout/u2 in {lines:?}"));
    assert_eq!(
        u2["value"]["last"]["status"],
        reactor::process::Status::Succeeded.as_str(),
        "{u2}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["key"] == "seq/payout" && l["value"]["seq"].is_string()),
        "{lines:?}"
    );
}

/// On the mock cluster, transactional offsets are not stored: a successor
/// would read every command again. This test runs at-least-once (offsets
/// committed after the outputs are flushed), where only an uncommitted batch
/// is redone, with the same ids; the exactly-once crash test runs on kfake.
#[test]
fn a_crash_mid_chain_loses_no_step_and_runs_none_twice() {
    let kafka = TestKafka::new("proc-crash");
    let config = kafka.config(&processes(&kafka), 2, false);
    kafka.create_topics(&config, 2);
    let t = config.kafka.topics.clone();
    let (reserve, send) = (config.jobs[0].topic.clone(), config.jobs[1].topic.clone());
    let a = kafka.start(&config, "a", 2);
    a.wait_ready(WAIT);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answering = worker(
        &kafka,
        &[reserve.clone(), send.clone()],
        &t.results,
        std::sync::Arc::clone(&stop),
    );
    let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    for key in &keys {
        let command = Command::Launch {
            process: "payout".into(),
            keys: vec![key.clone()],
            params: serde_json::json!({"amount": 1})
                .as_object()
                .unwrap()
                .clone(),
            position: Position::Back,
            reset: false,
            source: None,
        };
        kafka.send(
            &t.commands,
            key,
            &codec::encode_command(&command, Format::Protobuf),
        );
    }
    // The instance dies once some chains have reached their second step.
    let send_reader = kafka.reader(&send);
    send_reader.read_until(WAIT, |r| !step_runs(r).is_empty());
    a.crash();
    // A successor restores every shard from the changelog and finishes
    // every chain.
    let b = kafka.start(&config, "b", 2);
    b.wait_ready(WAIT);
    let events_reader = kafka.reader(&t.events);
    let done = events(&events_reader.read_until(Duration::from_secs(90), |r| {
        succeeded(&events(r)).len() >= 20
    }));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    answering.join().expect("the worker");
    assert_eq!(succeeded(&done), keys.iter().cloned().collect());
    // Every step of every chain ran, each under one run id: the mock shows
    // aborted records too, so a redone batch may repeat a run command —
    // with the same run id.
    let all = |topic: &str| {
        step_runs(
            &kafka
                .reader(topic)
                .read_until(WAIT, |r| step_runs(r).len() >= 20),
        )
    };
    let (all_reserve, all_send) = (all(&reserve), all(&send));
    let mut ids: BTreeMap<(String, u32), BTreeSet<String>> = BTreeMap::new();
    for run in all_reserve.iter().chain(&all_send) {
        ids.entry((run.instance.clone(), run.step))
            .or_default()
            .insert(run.run_id.to_string());
    }
    assert_eq!(ids.len(), 40, "two steps of 20 chains: {ids:?}");
    for (step, runs) in &ids {
        assert_eq!(runs.len(), 1, "{step:?} ran as {runs:?}");
    }
    // Each key got one instance, whatever was redone.
    let mut instances: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in &done {
        if let Event::ProcessStarted {
            subject: Subject::Process { key, instance, .. },
            ..
        } = e
        {
            instances
                .entry(key.clone())
                .or_default()
                .insert(instance.clone().unwrap_or_default());
        }
    }
    assert_eq!(instances.len(), 20);
    assert!(instances.values().all(|i| i.len() == 1), "{instances:?}");
    b.stop();
}

#[test]
fn the_cli_launches_a_keys_file_and_submits_a_job() {
    let kafka = TestKafka::new("proc-cli");
    let text = kafka.config_text(&processes(&kafka), 3, true);
    let config = reactor::config::parse(&text, "t.toml").unwrap().config;
    kafka.create_topics(&config, 3);
    let t = config.kafka.topics.clone();
    let instance = kafka.start(&config, "a", 3);
    instance.wait_ready(WAIT);
    let dir = support::temp::TempDir::new(&format!("{}-cli", kafka.prefix));
    let path = dir.write("reactor.toml", &text);
    // More keys than one command holds: several commands per partition.
    let n = reactor::cli::KEYS_PER_COMMAND + 500;
    let keys: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
    let file = dir.join("keys.txt");
    std::fs::write(&file, format!("# payouts\n{}\n\n", keys.join("\n"))).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_reactor"))
        .args(["launch", "payout", "extra", "--keys-file"])
        .arg(&file)
        .args(["--param", "amount=3", "-c"])
        .arg(&path)
        .args(["--brokers", &kafka.brokers])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_reactor"))
        .args(["submit", "send", "j1", "--param", "to=x", "-c"])
        .arg(&path)
        .args(["--brokers", &kafka.brokers])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let started = |records: &[Record]| -> BTreeSet<String> {
        events(records)
            .into_iter()
            .filter_map(|e| match e {
                Event::ProcessStarted {
                    subject: Subject::Process { key, .. },
                    ..
                } => Some(key),
                _ => None,
            })
            .collect()
    };
    let records = kafka
        .reader(&t.events)
        .read_until(Duration::from_secs(60), |r| started(r).len() >= n + 2);
    let started = started(&records);
    assert_eq!(
        started.len(),
        n + 2,
        "every key of the file, `extra` and the job"
    );
    assert!(started.contains("extra") && started.contains("j1") && started.contains("c0"));
    // No command needed forwarding: each went to its keys' partition.
    let commands = kafka
        .reader(&t.commands)
        .read_until(Duration::from_secs(5), |_| false);
    for r in distinct(&commands) {
        let command = codec::decode_command(r.payload.as_deref().unwrap()).unwrap();
        let keys = match &command {
            Command::Launch { keys, params, .. } => {
                assert_eq!(params["amount"], 3);
                keys.clone()
            }
            Command::Submit { key, .. } => vec![key.clone()],
            other => panic!("{other:?}"),
        };
        assert!(keys.len() <= reactor::cli::KEYS_PER_COMMAND);
        for key in keys {
            assert_eq!(
                reactor::kafka::partition_for(key.as_bytes(), 3),
                r.partition
            );
        }
    }
    instance.stop();
}
