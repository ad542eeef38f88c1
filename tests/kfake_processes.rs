//! Processes on a broker with real transactions (kfake, `../shared/brokers.md`
//! §3): a `reactor run` that aborts itself mid-commit, then is killed with
//! SIGKILL, while chains are in flight — launched by command
//! and by event records, some sent while it is down — is restarted under
//! the same name; `read_committed` readers then see every key start once,
//! every step run command once, every forwarded event launch once and
//! every chain succeed once: nothing lost, nothing visible twice.
//!
//! Ignored by plain `cargo test`; `.ci/run` starts a kfake broker and runs
//! it with `REACTOR_TEST_KFAKE=host:port cargo test --test kfake_processes --
//! --ignored`.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::producer::{BaseRecord, Producer};

use reactor::action::{Event, Subject};
use reactor::codec::{self, Format};
use reactor::engine::Command;
use reactor::process::Position;
use support::child::ReactorChild;
use support::steps::{processes, step_runs, succeeded, worker};
use support::{events, TestKafka};

const WAIT: Duration = Duration::from_secs(60);

/// Keys launched by command and by event, before and after the crash.
const KEYS: usize = 1000;

fn launch(key: &str) -> Vec<u8> {
    let command = Command::Launch {
        process: "payout".into(),
        keys: vec![key.to_string()],
        params: serde_json::json!({"amount": 1})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        position: Position::Back,
        reset: false,
        source: None,
    };
    codec::encode_command(&command, Format::Protobuf)
}

#[test]
#[ignore = "needs a kfake broker in REACTOR_TEST_KFAKE=host:port (.ci/run starts one)"]
fn kills_mid_chain_commit_every_step_and_event_once() {
    let kafka = TestKafka::kfake("proc-eos");
    // Attempts long enough that no run times out during the test: every
    // run command seen twice would then be a duplicate, not a re-dispatch.
    let text = kafka.config_text(&processes(&kafka).replace("\"1m\"", "\"10m\""), 2, true);
    let config = reactor::config::parse(&text, "t.toml")
        .expect("config")
        .config;
    let dir = support::temp::TempDir::new(&kafka.prefix);
    let path = dir.write("reactor.toml", &text);
    kafka.create_topics(&config, 2);
    let t = config.kafka.topics.clone();
    let (reserve, send) = (config.jobs[0].topic.clone(), config.jobs[1].topic.clone());
    let payments = format!("{}.payments", kafka.prefix);

    // The first run aborts itself on its 30th commit, after its records
    // were delivered and before the transaction commits: the worst moment.
    let failpoint = [(reactor::runtime::failpoint::VAR, "before_commit:30")];
    let mut a = ReactorChild::spawn_with(&path, "a", &dir.join("a.log"), &failpoint);
    a.wait_ready(WAIT);
    let stop = Arc::new(AtomicBool::new(false));
    let answering = worker(
        &kafka,
        &[reserve.clone(), send.clone()],
        &t.results,
        Arc::clone(&stop),
    );
    // Half the keys by command, half by payment records, interleaved and
    // spread over a few seconds, so that the kill lands while batches are
    // being committed; the rest arrive while the instance is down.
    let keys: Vec<String> = (0..KEYS).map(|i| format!("k{i}")).collect();
    let sending = {
        let producer = kafka.producer();
        let (commands, payments, keys) = (t.commands.clone(), payments.clone(), keys.clone());
        std::thread::spawn(move || {
            for (i, key) in keys.iter().enumerate() {
                let (topic, payload) = if i % 2 == 0 {
                    (&commands, launch(key))
                } else {
                    let record = serde_json::json!({"id": key, "amount": 1});
                    (&payments, record.to_string().into_bytes())
                };
                producer
                    .send(BaseRecord::to(topic).key(key).payload(&payload))
                    .map_err(|(e, _)| e)
                    .expect("send");
                std::thread::sleep(Duration::from_millis(10));
            }
            producer.flush(Duration::from_secs(10)).expect("flush");
        })
    };
    a.wait_exit(WAIT);
    // Restarted under the same name, whose transactional id fences the
    // dead one's open transaction: read_committed readers never see it.
    // Then killed once more (SIGKILL, wherever it lands) with chains at
    // their second step and others in flight.
    let mut a = ReactorChild::spawn(&path, "a", &dir.join("a1.log"));
    a.wait_ready(WAIT);
    kafka
        .reader(&send)
        .read_until(WAIT, |r| step_runs(r).len() >= KEYS / 2);
    a.kill();
    let mut a = ReactorChild::spawn(&path, "a", &dir.join("a2.log"));
    a.wait_ready(WAIT);
    sending.join().expect("the sender");
    let events_reader = kafka.reader(&t.events);
    let mut records = events_reader.read_until(Duration::from_secs(120), |r| {
        succeeded(&events(r)).len() >= KEYS
    });
    // A little longer, so that a duplicate committed late would be seen.
    records.extend(events_reader.read_until(Duration::from_secs(3), |_| false));
    stop.store(true, Ordering::Relaxed);
    let answered = answering.join().expect("the worker");
    let done = events(&records);
    assert_eq!(succeeded(&done), keys.iter().cloned().collect());

    let mut started: BTreeMap<String, usize> = BTreeMap::new();
    let mut ended: BTreeMap<String, usize> = BTreeMap::new();
    for e in &done {
        match e {
            Event::ProcessStarted {
                subject: Subject::Process { key, .. },
                ..
            } => *started.entry(key.clone()).or_default() += 1,
            Event::ProcessSucceeded {
                subject: Subject::Process { key, .. },
            } => *ended.entry(key.clone()).or_default() += 1,
            _ => {}
        }
    }
    // An input read again after a kill would be answered again: a result
    // as not current, a launch as refused (the key's instance is active).
    let redone: Vec<&Event> = done
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::ResultRejected { .. } | Event::LaunchRejected { .. }
            )
        })
        .collect();
    assert!(redone.is_empty(), "inputs processed twice: {redone:?}");
    assert_eq!(started.len(), KEYS, "{started:?}");
    assert!(
        started.values().all(|&n| n == 1),
        "started twice: {started:?}"
    );
    assert!(
        ended.values().all(|&n| n == 1),
        "succeeded twice: {ended:?}"
    );

    // Every step's run command is committed exactly once.
    let all = |topic: &str| {
        step_runs(
            &kafka
                .reader(topic)
                .read_until(WAIT, |r| step_runs(r).len() >= KEYS),
        )
    };
    let mut runs: BTreeMap<(String, u32), usize> = BTreeMap::new();
    for run in all(&reserve).into_iter().chain(all(&send)) {
        assert_eq!(run.pass, 1, "no run was re-dispatched: {run:?}");
        *runs.entry((run.instance.clone(), run.step)).or_default() += 1;
    }
    assert_eq!(runs.len(), 2 * KEYS, "two steps of every chain: {runs:?}");
    assert!(
        runs.values().all(|&n| n == 1),
        "a run command twice: {runs:?}"
    );
    assert_eq!(answered.len(), 2 * KEYS, "the worker saw each run once");

    // Each payment record was forwarded as one launch command.
    let commands = kafka
        .reader(&t.commands)
        .read_until(Duration::from_secs(5), |_| false);
    let mut forwarded: BTreeMap<String, usize> = BTreeMap::new();
    for r in &commands {
        if let Ok(Command::Launch { keys, source, .. }) =
            codec::decode_command(r.payload.as_deref().unwrap_or_default())
        {
            if source.is_some_and(|s| s.starts_with("event:")) {
                for key in keys {
                    *forwarded.entry(key).or_default() += 1;
                }
            }
        }
    }
    assert_eq!(forwarded.len(), KEYS / 2, "{forwarded:?}");
    assert!(
        forwarded.values().all(|&n| n == 1),
        "forwarded twice: {forwarded:?}"
    );
    a.kill();
}
