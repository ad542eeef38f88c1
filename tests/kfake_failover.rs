//! Failover on a broker with real transactions and static membership
//! (kfake, `../shared/brokers.md` §3), with real processes: three
//! `reactor run` instances in one group under steady load (offer changes,
//! each making one `OfferState`), and
//! - one killed with SIGKILL (mid-transaction: under load one is always
//!   open) and restarted with the same instance id: its shards come back to
//!   it and the other instances give up none of theirs;
//! - one killed and never restarted: its shards move to the others within
//!   the session timeout and a restore;
//! - one paused (SIGSTOP) until its shards moved, then resumed: a zombie,
//!   whose late transaction is fenced.
//!
//! In each, a `read_committed` reader sees every output once: none lost,
//! none twice.
//!
//! Ignored by plain `cargo test`; `.ci/run` starts a kfake broker and runs
//! them with `REACTOR_TEST_KFAKE=host:port cargo test --test kfake_failover
//! -- --ignored --test-threads=1`.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};

use reactor::codec::{self, Format};
use reactor::offer::{Change, OfferChange};
use support::TestKafka;

const PARTITIONS: i32 = 6;
const WAIT: Duration = Duration::from_secs(60);
/// The group session timeout of the instances (the shortest brokers accept).
const SESSION: Duration = Duration::from_secs(6);

/// Why the tests are ignored unless asked for.
const NEEDS_KFAKE: &str =
    "needs a kfake broker in REACTOR_TEST_KFAKE=host:port (.ci/run starts one)";

fn kfake(test: &str) -> TestKafka {
    let brokers = std::env::var("REACTOR_TEST_KFAKE").unwrap_or_default();
    assert!(!brokers.is_empty(), "{NEEDS_KFAKE}");
    TestKafka::on(&brokers, test)
}

/// One `reactor run` process.
struct Proc {
    id: String,
    admin: u16,
    child: Option<Child>,
    log: PathBuf,
}

impl Proc {
    fn start(config: &PathBuf, id: &str, admin: u16, dir: &std::path::Path) -> Proc {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let log = dir.join(format!("{id}-{stamp}.log"));
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_reactor"))
            .args(["run", "-c"])
            .arg(config)
            .args([
                "--instance-id",
                id,
                "--admin",
                &format!("127.0.0.1:{admin}"),
            ])
            .env("RUST_LOG", "warn,reactor=info")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .spawn()
            .expect("reactor run");
        Proc {
            id: id.to_string(),
            admin,
            child: Some(child),
            log,
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// SIGKILL, as an OOM kill or a node loss would.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {sig} {}", self.pid());
    }

    fn get(&self, path: &str) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.admin)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut text = String::new();
        s.read_to_string(&mut text).ok()?;
        Some(text.split_once("\r\n\r\n")?.1.to_string())
    }

    /// `(ready, shards)` from `/readyz`.
    fn readyz(&self) -> Option<(bool, Vec<i32>)> {
        let body = self.get("/readyz")?;
        let v: serde_json::Value = serde_json::from_str(body.trim()).ok()?;
        let shards = v["shards"]
            .as_array()?
            .iter()
            .filter_map(|p| p.as_i64().map(|p| p as i32))
            .collect();
        Some((v["ready"].as_bool()?, shards))
    }

    /// Revocations this instance went through so far
    /// (`reactor_rebalances_total{kind="revoked"}`).
    fn revocations(&self) -> f64 {
        let body = self.get("/metrics").unwrap_or_default();
        body.lines()
            .filter(|l| l.starts_with("reactor_rebalances_total") && l.contains("kind=\"revoked\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A paused one must be able to die.
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Steady load: offer changes `o0`, `o1`, … at `rate` per second until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(kafka: &TestKafka, topic: &str, rate: f64) -> Load {
        let producer = kafka.producer();
        let (stop, sent) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
        );
        let thread = {
            let (stop, sent, topic) = (Arc::clone(&stop), Arc::clone(&sent), topic.to_string());
            std::thread::spawn(move || {
                let started = Instant::now();
                let mut i = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let due = started + Duration::from_secs_f64(i as f64 / rate);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let change = OfferChange {
                        offer_id: format!("o{i}"),
                        change: Change::Body(
                            serde_json::json!({"n": i}).as_object().cloned().unwrap(),
                        ),
                        source: None,
                    };
                    let value = codec::encode_offer_change(&change, Format::Protobuf);
                    let record = BaseRecord::to(&topic)
                        .key(change.offer_id.as_str())
                        .payload(&value[..]);
                    producer.send(record).map_err(|(e, _)| e).expect("send");
                    i += 1;
                    sent.store(i, Ordering::Relaxed);
                }
                producer.flush(Duration::from_secs(30)).expect("flush");
            })
        };
        Load {
            stop,
            sent,
            thread: Some(thread),
        }
    }

    /// Stops and returns how many changes were sent.
    fn stop(mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().expect("producer thread");
        }
        self.sent.load(Ordering::Relaxed)
    }
}

/// Every offer state a `read_committed` reader sees, counted per offer.
struct Outputs {
    seen: Arc<Mutex<BTreeMap<String, usize>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Outputs {
    fn read(kafka: &TestKafka, topic: &str) -> Outputs {
        let consumer: BaseConsumer = kafka
            .clients()
            .reader()
            .set("enable.partition.eof", "false")
            .set("group.id", format!("{}-outputs", kafka.prefix))
            .create()
            .expect("reader");
        let mut tpl = TopicPartitionList::new();
        for p in 0..PARTITIONS {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .unwrap();
        }
        consumer.assign(&tpl).expect("assign");
        let (seen, stop) = (
            Arc::new(Mutex::new(BTreeMap::new())),
            Arc::new(AtomicBool::new(false)),
        );
        let thread = {
            let (seen, stop) = (Arc::clone(&seen), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
                        let (state, _) = codec::decode_offer_state(m.payload().unwrap_or_default())
                            .expect("an offer state");
                        *seen.lock().unwrap().entry(state.offer).or_default() += 1;
                    }
                }
            })
        };
        Outputs {
            seen,
            stop,
            thread: Some(thread),
        }
    }

    /// Settles (see [`Outputs::settle`]) and asserts that each of `sent`
    /// offers was seen exactly once; `context` is added to a failure.
    fn assert_each_once(self, sent: usize, context: &str) {
        let (lost, duplicated) = self.settle(sent);
        assert!(
            lost.is_empty(),
            "{} of {sent} lost: {:?} {context}",
            lost.len(),
            &lost[..lost.len().min(10)]
        );
        assert!(
            duplicated.is_empty(),
            "seen twice: {duplicated:?} {context}"
        );
    }

    /// Waits until an output of each of `sent` offers was seen (or the
    /// timeout), reads on a little for late duplicates, and returns
    /// `(lost, duplicated)`.
    fn settle(mut self, sent: usize) -> (Vec<String>, Vec<String>) {
        let until = Instant::now() + WAIT;
        while Instant::now() < until && self.seen.lock().unwrap().len() < sent {
            std::thread::sleep(Duration::from_millis(200));
        }
        std::thread::sleep(Duration::from_secs(2));
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().expect("reader thread");
        }
        let seen = self.seen.lock().unwrap();
        let lost = (0..sent)
            .map(|i| format!("o{i}"))
            .filter(|id| !seen.contains_key(id))
            .collect();
        let duplicated = seen
            .iter()
            .filter(|(_, &n)| n > 1)
            .map(|(id, _)| id.clone())
            .collect();
        (lost, duplicated)
    }
}

/// A test group: its configuration file and three instances.
struct Group {
    kafka: TestKafka,
    config: PathBuf,
    /// Kept while the instances run (their logs are in it).
    dir: support::temp::TempDir,
    procs: Vec<Proc>,
}

impl Group {
    fn start(test: &str) -> Group {
        let kafka = kfake(test);
        let dir = support::temp::TempDir::new(&format!("reactor-{}", kafka.prefix));
        let mut text = kafka.config_text("", PARTITIONS, true);
        // The test glue's librdkafka timing is the instances' own here.
        text = text.replace(
            "[kafka.librdkafka]\n\"session.timeout.ms\" = \"6000\"\n\"heartbeat.interval.ms\" = \"500\"\n",
            "",
        );
        text = text.replace(
            "[kafka]\n",
            &format!("[kafka]\nsession_timeout = \"{}s\"\n", SESSION.as_secs()),
        );
        let config = dir.write("reactor.toml", text);
        let procs = ["a", "b", "c"]
            .iter()
            .map(|id| Proc::start(&config, id, support::child::free_port(), &dir))
            .collect();
        let group = Group {
            kafka,
            config,
            dir,
            procs,
        };
        group.wait_spread(&[0, 1, 2]);
        group
    }

    fn topic(&self, which: &str) -> String {
        format!("{}.{which}", self.kafka.prefix)
    }

    /// Waits until the instances `live` are ready and own every shard between them.
    fn wait_spread(&self, live: &[usize]) -> BTreeMap<usize, Vec<i32>> {
        let until = Instant::now() + WAIT;
        loop {
            let mut owned = BTreeMap::new();
            let mut all = BTreeSet::new();
            let mut ready = true;
            for &k in live {
                match self.procs[k].readyz() {
                    Some((r, shards)) => {
                        ready &= r;
                        all.extend(shards.iter().copied());
                        owned.insert(k, shards);
                    }
                    None => ready = false,
                }
            }
            let owns_all = all.len() == PARTITIONS as usize
                && owned.values().map(Vec::len).sum::<usize>() == PARTITIONS as usize;
            if ready && owns_all {
                return owned;
            }
            if Instant::now() > until {
                let logs: Vec<String> = live
                    .iter()
                    .map(|&k| format!("--- {}:\n{}", self.procs[k].id, self.procs[k].log_tail()))
                    .collect();
                panic!(
                    "instances {live:?} did not serve every shard in time: {owned:?}\n{}",
                    logs.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // The instances end before their directory goes.
        self.procs.clear();
    }
}

#[test]
#[ignore = "needs a kfake broker in REACTOR_TEST_KFAKE (.ci/run)"]
fn a_killed_instance_restarted_with_its_id_takes_its_shards_back_alone() {
    let mut group = Group::start("failover-restart");
    let outputs = Outputs::read(&group.kafka, &group.topic("offer_state"));
    let load = Load::start(&group.kafka, &group.topic("offers"), 300.0);
    std::thread::sleep(Duration::from_secs(3));
    let before = group.wait_spread(&[0, 1, 2]);
    let revoked_before: Vec<f64> = [1, 2]
        .iter()
        .map(|&k| group.procs[k].revocations())
        .collect();

    group.procs[0].kill();
    std::thread::sleep(Duration::from_secs(1));
    let (admin, config, dir) = (
        group.procs[0].admin,
        group.config.clone(),
        group.dir.to_path_buf(),
    );
    group.procs[0] = Proc::start(&config, "a", admin, &dir);
    let after = group.wait_spread(&[0, 1, 2]);
    std::thread::sleep(Duration::from_secs(3));
    let sent = load.stop();

    assert_eq!(
        after, before,
        "each instance serves the shards it served before"
    );
    let revoked_after: Vec<f64> = [1, 2]
        .iter()
        .map(|&k| group.procs[k].revocations())
        .collect();
    assert_eq!(
        revoked_after, revoked_before,
        "the instances that kept running gave up no shard"
    );
    outputs.assert_each_once(sent, "");
}

#[test]
#[ignore = "needs a kfake broker in REACTOR_TEST_KFAKE (.ci/run)"]
fn a_killed_instance_that_never_returns_has_its_shards_moved() {
    let mut group = Group::start("failover-gone");
    let outputs = Outputs::read(&group.kafka, &group.topic("offer_state"));
    let load = Load::start(&group.kafka, &group.topic("offers"), 300.0);
    std::thread::sleep(Duration::from_secs(3));
    let killed_at = Instant::now();
    group.procs[0].kill();
    let owned = group.wait_spread(&[1, 2]);
    let moved_in = killed_at.elapsed();
    eprintln!(
        "shards moved {:.1} s after the kill: {owned:?}",
        moved_in.as_secs_f64()
    );
    std::thread::sleep(Duration::from_secs(2));
    let sent = load.stop();
    outputs.assert_each_once(sent, "");
}

#[test]
#[ignore = "needs a kfake broker in REACTOR_TEST_KFAKE (.ci/run)"]
fn a_paused_instance_whose_shards_moved_is_fenced() {
    let group = Group::start("failover-zombie");
    let outputs = Outputs::read(&group.kafka, &group.topic("offer_state"));
    let load = Load::start(&group.kafka, &group.topic("offers"), 300.0);
    std::thread::sleep(Duration::from_secs(3));
    // Paused mid-stream: its open transaction and decided outputs wait with it.
    group.procs[0].signal("-STOP");
    let owned = group.wait_spread(&[1, 2]);
    eprintln!("the others took every shard: {owned:?}");
    std::thread::sleep(Duration::from_secs(1));
    group.procs[0].signal("-CONT");
    // The zombie finds itself fenced, starts over and rejoins.
    group.wait_spread(&[0, 1, 2]);
    std::thread::sleep(Duration::from_secs(2));
    let sent = load.stop();
    eprintln!("--- the zombie's log:\n{}", group.procs[0].log_tail());
    outputs.assert_each_once(
        sent,
        &format!(
            "(the zombie was not fenced?)\n{}",
            group.procs[0].log_tail()
        ),
    );
}
