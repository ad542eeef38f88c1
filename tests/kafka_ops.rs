//! Operations through the real runtime on librdkafka's in-process mock
//! cluster, driven by the CLI's scatter-gather ([`reactor::cli::ops::Exchange`]):
//! a search and a dry run answered by every partition of two instances, a
//! recovery from a step followed to its end with every restarted run tagged
//! `op:<id>`, and — a hung member in the group — the partitions it holds
//! reported as not answering while the others answer.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use reactor::action::{Event, StepRunCommand, Subject};
use reactor::cli::ops::{new_op_id, Exchange};
use reactor::codec::{self, Format};
use reactor::engine::{Command, RunResult};
use reactor::ops::{Criteria, Kind, Mode, Recover, Search};
use reactor::run::Status;
use support::{Record, TestKafka};

const WAIT: Duration = Duration::from_secs(30);
const PARTITIONS: i32 = 4;
const KEYS: usize = 12;

fn processes(kafka: &TestKafka) -> String {
    format!(
        r#"
[[job]]
name = "reserve"
topic = "{p}.reserve.runs"

[[job]]
name = "send"
topic = "{p}.send.runs"
retry = {{ attempts = 1, backoff = "10s", tiers = [] }}

[[process]]
name = "payout"
steps = ["reserve", "send"]
"#,
        p = kafka.prefix
    )
}

fn step_runs(records: &[Record]) -> Vec<StepRunCommand> {
    let mut seen = BTreeSet::new();
    records
        .iter()
        .filter(|r| seen.insert((r.partition, r.offset)))
        .map(|r| codec::decode_step_run_command(r.payload.as_deref().unwrap()).unwrap())
        .collect()
}

fn answer(kafka: &TestKafka, topic: &str, run: &StepRunCommand, status: Status) {
    let mut result = RunResult::new(run.run_id.clone(), run.pass, status);
    result.error = (status == Status::Failed).then(|| "node down".to_string());
    kafka.send(
        topic,
        &run.key,
        &codec::encode_run_result(&result, &run.key, Format::Protobuf),
    );
}

/// A group member that takes partitions and never answers: a hung
/// instance, as the group sees one.
struct Hung {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Hung {
    fn join(kafka: &TestKafka, config: &reactor::config::Config) -> Hung {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let k = &config.kafka;
        let consumer: BaseConsumer = kafka
            .clients()
            .base()
            .set("group.id", &k.group_id)
            .set("enable.auto.commit", "false")
            // As an instance joins: the group's one protocol, on the one
            // co-partitioned topic the group subscribes to.
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set("session.timeout.ms", "6000")
            .create()
            .unwrap();
        consumer.subscribe(&[&k.topics.results]).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            // Polls to stay in the group, and drops what it gets.
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = consumer.poll(Duration::from_millis(50));
            }
        });
        Hung {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Hung {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn failed() -> Criteria {
    Criteria {
        kind: Some(Kind::Process),
        state: Some("failed".into()),
        ..Criteria::default()
    }
}

/// Waits until the two instances own disjoint, non-empty sets of shards
/// covering every partition.
fn split(a: &support::Instance, b: &support::Instance) {
    let until = Instant::now() + WAIT;
    loop {
        let (ra, rb) = (a.readiness.report(), b.readiness.report());
        let (sa, sb): (BTreeSet<i32>, BTreeSet<i32>) = (
            ra.shards.iter().copied().collect(),
            rb.shards.iter().copied().collect(),
        );
        let all: BTreeSet<i32> = sa.union(&sb).copied().collect();
        if ra.ready
            && rb.ready
            && !sa.is_empty()
            && !sb.is_empty()
            && sa.is_disjoint(&sb)
            && all.len() == PARTITIONS as usize
        {
            return;
        }
        assert!(
            Instant::now() < until,
            "the partitions were not split: {ra:?} {rb:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn search_and_recover_over_every_partition_and_report_the_silent_ones() {
    let kafka = TestKafka::new("ops-e2e");
    let config = kafka.config(&processes(&kafka), PARTITIONS, true);
    kafka.create_topics(&config, PARTITIONS);
    let t = config.kafka.topics.clone();
    let (reserve, send) = (config.jobs[0].topic.clone(), config.jobs[1].topic.clone());
    let a = kafka.start(&config, "a", PARTITIONS);
    let b = kafka.start(&config, "b", PARTITIONS);
    split(&a, &b);

    // Twelve payouts over the partitions; send fails for good on each.
    let keys: Vec<String> = (0..KEYS).map(|i| format!("u{i}")).collect();
    let owners: BTreeSet<i32> = keys
        .iter()
        .map(|k| reactor::kafka::partition_for(k.as_bytes(), PARTITIONS))
        .collect();
    assert!(owners.len() > 1, "the keys span partitions");
    let launch = Command::Launch {
        process: "payout".into(),
        keys: keys.clone(),
        params: Default::default(),
        position: Default::default(),
        reset: false,
        source: None,
    };
    kafka.send(
        &t.commands,
        "u0",
        &codec::encode_command(&launch, Format::Protobuf),
    );
    let reserve_reader = kafka.reader(&reserve);
    for run in step_runs(&reserve_reader.read_until(WAIT, |r| step_runs(r).len() >= KEYS)) {
        answer(&kafka, &t.results, &run, Status::Succeeded);
    }
    let send_reader = kafka.reader(&send);
    let first = step_runs(&send_reader.read_until(WAIT, |r| step_runs(r).len() >= KEYS));
    for run in &first {
        answer(&kafka, &t.results, run, Status::Failed);
    }
    let events = kafka.reader(&t.events);
    events.read_until(WAIT, |r| {
        r.iter()
            .filter_map(|r| codec::decode_event(r.payload.as_deref()?).ok())
            .filter(|(e, _)| matches!(e, Event::ProcessFailed { .. }))
            .count()
            >= KEYS
    });

    // Search: one answer per partition, twelve failed in all.
    let exchange = Exchange::new(&kafka.clients(), &t.commands, &t.events).unwrap();
    assert_eq!(exchange.partitions(), PARTITIONS as u32);
    let mut counts = Vec::new();
    let found = exchange
        .search(
            Search {
                id: new_op_id(),
                criteria: Criteria {
                    error: Some("node".into()),
                    ..failed()
                },
                limit: Some(5),
            },
            WAIT,
            &mut |n, _| counts.push(n),
        )
        .unwrap();
    assert!(found.missing.is_empty(), "{found:?}");
    assert_eq!(counts, [1, 2, 3, 4]);
    let total: u64 = found.answers.values().map(|(t, _)| t).sum();
    assert_eq!(total, KEYS as u64);
    for (p, (_, matches)) in &found.answers {
        for m in matches {
            assert_eq!(
                reactor::kafka::partition_for(m.key.as_bytes(), PARTITIONS),
                *p as i32
            );
            assert_eq!(
                (m.state.as_str(), m.step.as_deref()),
                ("failed", Some("send"))
            );
        }
    }

    // A dry run counts them; a recovery from `send` restarts each once.
    let recover = |dry_run| Recover {
        id: new_op_id(),
        criteria: failed(),
        mode: Mode::FromStep("send".into()),
        dry_run,
    };
    let counted = exchange.count(recover(true), WAIT, &mut |_, _| {}).unwrap();
    assert!(counted.missing.is_empty());
    assert_eq!(counted.answers.values().sum::<u64>(), KEYS as u64);
    let r = recover(false);
    let op = r.id.clone();
    exchange.send(&Command::Recover(r), &op).unwrap();
    let followed = exchange.follow(&op, WAIT, &mut |_| {});
    assert!(followed.missing.is_empty(), "{followed:?}");
    assert_eq!(
        followed.answers.values().map(|p| p.done).sum::<u64>(),
        KEYS as u64
    );
    let again = step_runs(&send_reader.read_until(WAIT, |r| step_runs(r).len() >= 2 * KEYS));
    let restarted: Vec<&StepRunCommand> = again
        .iter()
        .filter(|r| r.source.as_deref() == Some(format!("op:{op}").as_str()))
        .collect();
    let restarted_keys: BTreeSet<&str> = restarted.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(restarted.len(), KEYS, "{again:?}");
    assert_eq!(restarted_keys.len(), KEYS);
    for run in &restarted {
        assert_eq!(&*run.job, "send");
        let before = first.iter().find(|f| f.key == run.key).unwrap();
        assert_eq!(run.instance, before.instance, "the same instance");
        assert_ne!(run.run_id, before.run_id, "a new run id");
    }
    // Each restart was reported with its source.
    let recovered = events.read_until(WAIT, |r| {
        r.iter()
            .filter_map(|r| codec::decode_event(r.payload.as_deref()?).ok())
            .filter(|(e, _)| matches!(e, Event::Recovered { .. }))
            .count()
            >= KEYS
    });
    let keys_recovered: BTreeSet<String> = recovered
        .iter()
        .filter_map(|r| codec::decode_event(r.payload.as_deref()?).ok())
        .filter_map(|(e, _)| match e {
            Event::Recovered {
                subject: Subject::Process { key, .. },
                source,
                ..
            } if source == format!("op:{op}") => Some(key),
            _ => None,
        })
        .collect();
    assert_eq!(keys_recovered.len(), KEYS);

    // Instance b leaves; a hung member takes its place in the group: it
    // holds partitions and never answers. A search says which did not.
    b.stop();
    let hung = Hung::join(&kafka, &config);
    // The assignment settles in steps (a cooperative rebalance hands
    // partitions over one round at a time): wait until a's share has held
    // for two seconds.
    let owned_by_a = {
        let until = Instant::now() + WAIT;
        let mut stable: Option<(BTreeSet<i32>, Instant)> = None;
        loop {
            let r = a.readiness.report();
            if r.ready && !r.shards.is_empty() && r.shards.len() < PARTITIONS as usize {
                let owned: BTreeSet<i32> = r.shards.iter().copied().collect();
                match &stable {
                    Some((held, since)) if *held == owned => {
                        if since.elapsed() >= Duration::from_secs(2) {
                            break owned;
                        }
                    }
                    _ => stable = Some((owned, Instant::now())),
                }
            } else {
                stable = None;
            }
            assert!(Instant::now() < until, "the hung member got nothing: {r:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let exchange = Exchange::new(&kafka.clients(), &t.commands, &t.events).unwrap();
    let partial = exchange
        .search(
            Search {
                id: new_op_id(),
                criteria: Criteria::default(),
                limit: None,
            },
            Duration::from_secs(5),
            &mut |_, _| {},
        )
        .unwrap();
    let missing: BTreeSet<i32> = partial.missing.iter().map(|&p| p as i32).collect();
    let answered: BTreeSet<i32> = partial.answers.keys().map(|&p| p as i32).collect();
    assert_eq!(answered, owned_by_a, "{partial:?}");
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();
    assert_eq!(
        missing,
        all.difference(&owned_by_a).copied().collect(),
        "{partial:?}"
    );
    drop(hung);
    a.stop();
}
