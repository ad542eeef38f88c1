//! Start, stop and readiness on librdkafka's mock cluster: the CTL table is
//! read up to the end it had when the read started, however fast it grows;
//! a stop is honoured during that read; readiness follows the brokers.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::ClientConfig;

use reactor::codec::{self, CtlRecord, Format};
use support::{ts, TestKafka, TASKS};

const WAIT: Duration = Duration::from_secs(60);

fn ctl(param: &str, value: &str) -> Vec<u8> {
    codec::encode_ctl_change(
        &CtlRecord {
            entity: "load.e".into(),
            param: param.into(),
            value: ts(value),
        },
        None,
        "test",
        Format::Protobuf,
    )
}

/// Produces `n` CTL changes to `topic` as fast as the client goes.
fn preload(kafka: &TestKafka, topic: &str, n: usize) {
    let producer: rdkafka::producer::ThreadedProducer<_> = ClientConfig::new()
        .set("bootstrap.servers", &kafka.brokers)
        .set("queue.buffering.max.messages", "1000000")
        .set("linger.ms", "20")
        .create()
        .expect("producer");
    let value = ctl("p", "2024-06-01T00:00:00Z");
    for i in 0..n {
        let key = format!("load.e/p{}", i % 1000);
        producer
            .send(BaseRecord::to(topic).key(&key).payload(&value))
            .map_err(|(e, _)| e)
            .expect("send");
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
}

/// Keeps producing CTL changes to `topic` until `stop` is set.
fn keep_producing(
    kafka: &TestKafka,
    topic: &str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    let producer = kafka.producer();
    let topic = topic.to_string();
    std::thread::spawn(move || {
        let mut n = 0;
        let value = ctl("p", "2024-06-01T00:00:00Z");
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..50 {
                let key = format!("load.e/p{}", n % 1000);
                let _ = producer.send(BaseRecord::to(&topic).key(&key).payload(&value));
                n += 1;
            }
            let _ = producer.flush(Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(10));
        }
        n
    })
}

/// Waits until `ready()` says `want`, or fails after `timeout`.
fn wait_for(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    let until = Instant::now() + timeout;
    while !ready() {
        assert!(Instant::now() < until, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The start does not wait for a moving end: with CTL changes arriving all
/// the time the instance reads what was there when it started, serves, and
/// applies what comes after.
#[test]
fn start_under_load_serves_and_keeps_applying() {
    let kafka = TestKafka::new("ctl-load");
    let config = kafka.config(TASKS, 2, true);
    kafka.create_topics(&config, 2);
    let t = config.kafka.topics.clone();
    preload(&kafka, &t.ctl, 20_000);
    let stop = Arc::new(AtomicBool::new(false));
    let producing = keep_producing(&kafka, &t.ctl, Arc::clone(&stop));

    let instance = kafka.start(&config, "a", 2);
    instance.wait_ready(WAIT);
    // Still arriving, and applied: a change of the task's parameter fires it.
    kafka.send(
        &t.ctl,
        "dwh.orders/max_dt",
        &codec::encode_ctl_change(
            &CtlRecord {
                entity: "dwh.orders".into(),
                param: "max_dt".into(),
                value: ts("2024-05-02T01:00:00Z"),
            },
            None,
            "test",
            Format::Json,
        ),
    );
    let runs = kafka.reader(&t.runs).read_until(WAIT, |r| !r.is_empty());
    assert_eq!(runs.len(), 1);
    stop.store(true, Ordering::Relaxed);
    assert!(producing.join().unwrap() > 0);
    instance.stop();
}

/// A stop asked while the CTL table loads ends the start there: the
/// instance never goes on to join the group.
#[test]
fn a_stop_during_the_ctl_read_is_honoured() {
    let kafka = TestKafka::new("ctl-stop");
    let config = kafka.config(TASKS, 1, true);
    kafka.create_topics(&config, 1);
    preload(&kafka, &config.kafka.topics.ctl, 100_000);

    let instance = kafka.start(&config, "a", 1);
    let phases = Arc::new(Mutex::new(Vec::<String>::new()));
    let watching = {
        let (readiness, phases) = (Arc::clone(&instance.readiness), Arc::clone(&phases));
        std::thread::spawn(move || loop {
            let reason = readiness.report().reason.unwrap_or_default();
            let mut seen = phases.lock().unwrap();
            if seen.last() != Some(&reason) {
                seen.push(reason.clone());
            }
            if reason == "stopped" {
                return;
            }
            drop(seen);
            std::thread::sleep(Duration::from_millis(1));
        })
    };
    wait_for("loading the CTL table", WAIT, || {
        instance.readiness.report().reason.as_deref() == Some("loading the CTL table")
    });
    instance.stop();
    watching.join().unwrap();
    let phases = phases.lock().unwrap().clone();
    assert!(
        !phases.iter().any(|p| p == "joining the consumer group"),
        "{phases:?}"
    );
    assert_eq!(phases.last().map(String::as_str), Some("stopped"));
}

/// Readiness goes false within seconds of the brokers freezing (no answer)
/// or going down, says why and which shards, and comes back with them.
#[test]
fn readiness_follows_the_brokers() {
    let kafka = TestKafka::new("ready");
    let config = kafka.config(TASKS, 2, true);
    kafka.create_topics(&config, 2);
    let instance = kafka.start(&config, "a", 2);
    instance.wait_ready(WAIT);
    let mock = kafka.mock.as_ref().expect("the mock cluster");
    let brokers = 1..=3;

    // Frozen: connections stay up, nothing answers.
    for b in brokers.clone() {
        mock.broker_round_trip_time(b, Duration::from_secs(30))
            .unwrap();
    }
    wait_for("not ready while frozen", WAIT, || {
        !instance.readiness.is_ready()
    });
    let report = instance.readiness.report();
    assert!(
        report
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with("brokers unreachable") || r.starts_with("starting over")),
        "{report:?}"
    );
    for b in brokers.clone() {
        mock.broker_round_trip_time(b, Duration::ZERO).unwrap();
    }
    instance.wait_ready(WAIT);
    let report = instance.readiness.report();
    assert_eq!((report.shards, report.not_ready), (vec![0, 1], vec![]));

    // Down: connections refused.
    for b in brokers.clone() {
        mock.broker_down(b).unwrap();
    }
    wait_for("not ready while down", WAIT, || {
        !instance.readiness.is_ready()
    });
    for b in brokers {
        mock.broker_up(b).unwrap();
    }
    instance.wait_ready(WAIT);
    instance.stop();
}
