//! End to end on a broker: a real `reactor run` dispatches a task run and a
//! stage run, a worker built with this crate answers them, and what Reactor
//! committed is read back (the task's last-seen values on the admin API, the
//! stage's update and state in an `OfferState`).
//!
//! Gated: runs only when `REACTOR_TEST_BROKERS` names a broker (`.ci/ecosystem`
//! starts kfake); it then needs the reactor binary (`REACTOR_BIN`, else
//! `target/debug/reactor` of this workspace: `cargo build --bin reactor`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use prost::Message as _;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{ClientConfig, Message};
use reactor_worker::proto::{CtlChange, OfferChange, OfferState};
use reactor_worker::{StageResult, Worker};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(90);

fn config(p: &str) -> String {
    format!(
        r#"
[[task]]
id = "report"
trigger = "delta(raw.sales/max_dt, 1min)"
timeout = "30s"

[[stage]]
name = "price"
watch = ["price"]
topic = "{p}.stage.price.runs"
timeout = "30s"

[kafka]
group_id = "{p}"
partitions = 3

[kafka.topics]
ctl = "{p}.ctl"
offers = "{p}.offers"
results = "{p}.results"
commands = "{p}.commands"
runs = "{p}.runs"
offer_state = "{p}.offer_state"
events = "{p}.events"
dead = "{p}.dead"
changelog = "{p}.changelog"

[kafka.librdkafka]
"session.timeout.ms" = "6000"
"heartbeat.interval.ms" = "1000"
"#
    )
}

/// Stops the reactor process however the test ends.
struct Reactor(Child);

impl Drop for Reactor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn reactor_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("REACTOR_BIN") {
        return bin.into();
    }
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/reactor");
    assert!(
        bin.exists(),
        "no reactor binary at {}: cargo build --bin reactor, or set REACTOR_BIN",
        bin.display()
    );
    bin
}

/// `GET path` on the admin API: (status, body); `None` while nothing listens.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((status, body))
}

fn wait_for<T>(what: &str, reactor: &mut Reactor, mut check: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + WAIT;
    loop {
        if let Ok(Some(status)) = reactor.0.try_wait() {
            panic!("reactor exited ({status}) while waiting for {what}");
        }
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn reactor_accepts_what_the_worker_answers() {
    let Some(brokers) = std::env::var("REACTOR_TEST_BROKERS")
        .ok()
        .filter(|b| !b.is_empty())
    else {
        eprintln!("skipping: REACTOR_TEST_BROKERS names no broker");
        return;
    };
    let p = format!("rwe{}", std::process::id());
    let dir = std::env::temp_dir().join(&p);
    std::fs::create_dir_all(&dir).unwrap();
    let config_path = dir.join("reactor.toml");
    std::fs::write(&config_path, config(&p)).unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Kept when the test fails (the directory is removed at the end).
    eprintln!("reactor log: {}", dir.join("reactor.log").display());
    let log = std::fs::File::create(dir.join("reactor.log")).unwrap();
    let mut reactor = Reactor(
        Command::new(reactor_bin())
            .args(["run", "--config"])
            .arg(&config_path)
            .args(["--brokers", &brokers, "--instance-id", "rust-e2e"])
            .args(["--admin", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("reactor starts"),
    );
    wait_for("/readyz", &mut reactor, || {
        get(port, "/readyz").filter(|(s, _)| *s == 200)
    });

    let worker = Worker::new(&brokers, format!("{p}-workers"))
        .topics([format!("{p}.runs"), format!("{p}.stage.price.runs")])
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "1000")
        .task("report", |_| async { Ok(()) })
        .stage("price", |run| async move {
            let price = run.offer["price"].as_i64().ok_or("no integer price")?;
            Ok(StageResult {
                update: json!({"price_predicted": price * 2}).as_object().cloned(),
                state: Some(json!({"model": 1, "seen": [price]})),
                ..Default::default()
            })
        });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async {
        let _ = stopped.await;
    }));

    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("partitioner", "murmur2_random")
        .create()
        .expect("producer");
    let ctl = CtlChange {
        entity: "raw.sales".into(),
        param: "max_dt".into(),
        value: Some(pbjson_types::Timestamp {
            seconds: 1_714_521_600,
            nanos: 0,
        }),
        ..Default::default()
    }
    .encode_to_vec();
    let offer = OfferChange {
        offer_id: "o-1".into(),
        body: serde_json::from_value(json!({"price": 21, "title": "lamp"})).unwrap(),
        ..Default::default()
    }
    .encode_to_vec();
    for (topic, key, value) in [
        (format!("{p}.ctl"), "raw.sales/max_dt", &ctl),
        (format!("{p}.offers"), "o-1", &offer),
    ] {
        producer
            .send(BaseRecord::to(&topic).key(key).payload(value))
            .map_err(|(e, _)| e)
            .expect("queued");
    }
    producer.flush(Duration::from_secs(15)).expect("flushed");

    // The task: its run succeeded and recorded what it saw.
    let view: Value = wait_for("report to succeed", &mut reactor, || {
        let (status, body) = get(port, "/tasks/report")?;
        let view: Value = serde_json::from_str(&body).ok()?;
        (status == 200 && view["last_seen"]["raw.sales/max_dt"] == "2024-05-01T00:00:00Z")
            .then_some(view)
    });
    assert_eq!(view["failures"], 0);

    // The stage: its update and state committed together.
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("group.id", format!("{p}-reader"))
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .create()
        .expect("reader");
    reader
        .subscribe(&[&format!("{p}.offer_state")])
        .expect("subscribe");
    let state = wait_for("the OfferState of price's result", &mut reactor, || {
        let m = reader.poll(Duration::from_millis(200))?.ok()?;
        let state = OfferState::decode(m.payload()?).ok()?;
        (state.cause == "stage:price").then_some(state)
    });
    let body = serde_json::to_value(state.body.unwrap()).unwrap();
    assert_eq!(body["price_predicted"], json!(42.0));
    assert_eq!(body["title"], "lamp");
    assert_eq!(
        serde_json::to_value(&state.states["price"]).unwrap(),
        json!({"model": 1.0, "seen": [21.0]})
    );
    assert_eq!(state.changed_fields, ["price_predicted"]);

    stop.send(()).unwrap();
    running.await.unwrap().expect("the worker ran");
    drop(reactor);
    let _ = std::fs::remove_dir_all(&dir);
}
