//! The recovery workload: live-lane latency while a mass recovery runs.
//!
//! `--recovery-instances` failed `payout` instances (`reserve → send`,
//! failed for good at `send`) are written straight into the changelog of
//! `--recovery-partitions` partitions, as the shards would have written
//! them, and one Reactor instance restores them. Live work is a one-step
//! process `order` launched at `--recovery-live-rate` by command, each
//! launch a new key; its latency is the time from the launch command's
//! produce call to its step run command reaching a `read_committed` reader.
//! It is measured for a while with no recovery, then while `reactor
//! recover --name payout --state failed --from-step send` (the same
//! commands the CLI writes, through [`reactor::cli::ops::Exchange`]) restarts
//! every failed instance, until every partition reports it finished.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::BaseConsumer;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::Message;

use super::cluster::Cluster;
use super::instance;
use super::stats::{per_second, Summary};
use super::{BenchArgs, Error, Plan, Workload};
use reactor::changelog::{ChangelogRecord, Store, Value};
use reactor::cli::ops::Exchange;
use reactor::codec::{self, Format};
use reactor::engine::Command;
use reactor::ops::{Criteria, Kind, Mode, Recover};
use reactor::process::{InstanceRecord, KeyRecord, Lane, Outcome, Status, Step};
use reactor::run::{Phase, RunSlot};

/// How long live work is measured before the recovery starts.
const BEFORE: Duration = Duration::from_secs(6);
/// Live launches of the first second are left out (readers and producers
/// warming up).
const WARM_UP: Duration = Duration::from_secs(1);

/// What the recovery workload measured.
#[derive(Debug, Clone)]
pub struct RecoveryReport {
    /// Where it ran.
    pub brokers: String,
    /// Partitions of the co-partitioned topics.
    pub partitions: i32,
    /// Failed instances seeded and recovered.
    pub instances: usize,
    /// From the instance's start to ready: the shards' restore.
    pub restore: Duration,
    /// Items the partitions reported restarted.
    pub restarted: u64,
    /// From the recovery commands to the last partition's last report.
    pub recovery: Duration,
    /// Rate of the live launches.
    pub live_rate: f64,
    /// Live latency with no recovery running.
    pub before: Option<Summary>,
    /// Live latency of launches sent while the recovery ran.
    pub during: Option<Summary>,
    /// Live launches whose run did not come within the wait.
    pub lost: usize,
}

impl fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let line = |f: &mut fmt::Formatter<'_>, what: &str, s: &Option<Summary>| {
            match s {
            Some(s) => writeln!(
                f,
                "  live latency {what:<16} p50 {:>7.1} ms   p99 {:>7.1} ms   max {:>7.1} ms   ({} launches)",
                ms(s.p50),
                ms(s.p99),
                ms(s.max),
                s.samples
            ),
            None => writeln!(f, "  live latency {what:<16} no samples"),
        }
        };
        writeln!(
            f,
            "recovery workload on {} ({} partitions, exactly-once on)",
            self.brokers, self.partitions
        )?;
        writeln!(
            f,
            "  {} failed instances restored in {:.1} s",
            self.instances,
            self.restore.as_secs_f64()
        )?;
        writeln!(
            f,
            "  recovery --from-step send: {} restarted in {:.1} s ({:.0}/s)",
            self.restarted,
            self.recovery.as_secs_f64(),
            per_second(self.restarted as usize, self.recovery)
        )?;
        writeln!(f, "  live launches at {:.0}/s:", self.live_rate)?;
        line(f, "before", &self.before)?;
        line(f, "during recovery", &self.during)?;
        if self.lost > 0 {
            writeln!(f, "  {} live launches got no run in time", self.lost)?;
        }
        Ok(())
    }
}

/// The bench configuration: the failed process and the live one.
fn config(prefix: &str) -> Result<reactor::config::Config, Error> {
    let text = format!(
        r#"
[[job]]
name = "reserve"
topic = "{prefix}.reserve.runs"

[[job]]
name = "send"
topic = "{prefix}.send.runs"
retry = {{ attempts = 1, backoff = "10s", tiers = [] }}

[[job]]
name = "live"
topic = "{prefix}.live.runs"

[[process]]
name = "payout"
steps = ["reserve", "send"]

[[process]]
name = "order"
steps = ["live"]
"#
    );
    reactor::config::parse(&text, "recovery-bench.toml")
        .map(|l| l.config)
        .map_err(|e| Error::Config(Box::new(e)))
}

/// The key record of failed instance `n` of key `k`.
fn failed_record(n: u64, at: jiff::Timestamp) -> KeyRecord {
    let error = "node down".to_string();
    let params = serde_json::json!({"amount": 5})
        .as_object()
        .cloned()
        .unwrap_or_default();
    let step = |job: &str| Step {
        job: job.to_string(),
        params: None,
    };
    let instance = InstanceRecord {
        n,
        params,
        context: Default::default(),
        chain: vec![step("reserve"), step("send")],
        step: 1,
        slot: RunSlot::from(crate::run::SlotParts {
            phase: Phase::Dead,
            run_seq: 1,
            pass_seq: 1,
            failures: 1,
            run: None,
            wake_at: None,
            last_error: Some(error.clone()),
            failed_at: Some(at),
        }),
        queued: None,
        step_deadline: None,
        overdue: false,
        priority: 0,
        lane: Lane::Live,
        started_at: at,
        progress_at: at,
        source: None,
        runs: 2,
        seq_base: 0,
    };
    KeyRecord {
        active: None,
        waiting: Vec::new(),
        last: Some(Outcome {
            n,
            status: Status::Failed,
            finished_at: at,
            context: Default::default(),
            error: Some(error),
            instance: Some(Box::new(instance)),
        }),
        goal: false,
    }
}

/// Writes `instances` failed payouts into the changelog, each on its key's
/// partition, with each partition's instance counter.
fn seed(
    cluster: &Cluster,
    changelog: &str,
    partitions: i32,
    instances: usize,
    timeout: Duration,
) -> Result<(), Error> {
    let producer = cluster.producer()?;
    let at = jiff::Timestamp::now();
    let mut counters = vec![0u64; partitions as usize];
    let send = |p: i32, key: &[u8], value: &[u8]| -> Result<(), Error> {
        let record = BaseRecord::to(changelog)
            .partition(p)
            .key(key)
            .payload(value);
        reactor::kafka::send_with_room(&producer, record, Some(timeout), || {
            producer.poll(Duration::from_millis(1))
        })
        .map_err(|e| Error::kafka(format!("seeding {changelog}"), e))
    };
    for i in 0..instances {
        let key = format!("k{i:07}");
        let p = reactor::kafka::partition_for(key.as_bytes(), partitions);
        let counter = &mut counters[p as usize];
        *counter += 1;
        let record = ChangelogRecord {
            store: Store::Process,
            key: format!("payout/{key}").into(),
            value: Some(Value::Process(std::sync::Arc::new(failed_record(
                *counter, at,
            )))),
        };
        let (k, v) = codec::encode_changelog(record);
        send(p, &k, v.as_deref().unwrap_or_default())?;
    }
    for (p, n) in counters.iter().enumerate() {
        let record = ChangelogRecord {
            store: Store::Seq,
            key: "payout".into(),
            value: Some(Value::Seq(*n)),
        };
        let (k, v) = codec::encode_changelog(record);
        send(p as i32, &k, v.as_deref().unwrap_or_default())?;
    }
    producer
        .flush(timeout)
        .map_err(|e| Error::kafka(format!("flushing {changelog}"), e))
}

/// Live launches: one a key, at `rate`, until `stop`; returns when each was sent.
fn live_producer(
    cluster: &Cluster,
    commands: String,
    rate: f64,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<Result<Vec<Instant>, Error>>, Error> {
    let producer = cluster.producer()?;
    Ok(std::thread::spawn(move || {
        let started = Instant::now();
        let mut sent = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let due = started + Duration::from_secs_f64(sent.len() as f64 / rate);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            let key = format!("live{}", sent.len());
            let command = Command::Launch {
                process: "order".into(),
                keys: vec![key.clone()],
                params: Default::default(),
                position: Default::default(),
                reset: false,
                source: None,
            };
            let payload = codec::encode_command(&command, Format::Protobuf);
            sent.push(Instant::now());
            producer
                .send(BaseRecord::to(&commands).key(&key).payload(&payload))
                .map_err(|(e, _)| Error::kafka(format!("producing to {commands}"), e))?;
        }
        producer
            .flush(Duration::from_secs(30))
            .map_err(|e| Error::kafka("flushing the live launches", e))?;
        Ok(sent)
    }))
}

/// When the run of live launch `j` reached the reader, by `j`.
type Arrivals = Arc<Mutex<Vec<Option<Instant>>>>;

/// Reads the live job's runs until `stop`: when the run of launch `j` came.
fn live_reader(
    cluster: &Cluster,
    topic: &str,
    stop: Arc<AtomicBool>,
) -> Result<(JoinHandle<()>, Arrivals), Error> {
    let consumer: BaseConsumer = cluster.assigned(&[topic], &format!("{topic}-live-reader"))?;
    let seen = Arc::new(Mutex::new(Vec::<Option<Instant>>::new()));
    let out = Arc::clone(&seen);
    let handle = std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Some(Ok(m)) = consumer.poll(Duration::from_millis(50)) else {
                continue;
            };
            let at = Instant::now();
            let Some(j) = m
                .key()
                .and_then(|k| std::str::from_utf8(k).ok())
                .and_then(|k| k.strip_prefix("live"))
                .and_then(|j| j.parse::<usize>().ok())
            else {
                continue;
            };
            if let Ok(mut seen) = out.lock() {
                if seen.len() <= j {
                    seen.resize(j + 1, None);
                }
                if let Some(slot) = seen.get_mut(j) {
                    slot.get_or_insert(at);
                }
            }
        }
    });
    Ok((handle, seen))
}

/// `reactor recover --kind process --name payout --state failed --from-step send`.
fn recovery(id: String) -> Recover {
    Recover {
        id: if id.is_empty() {
            reactor::cli::ops::new_op_id()
        } else {
            id
        },
        criteria: Criteria {
            kind: Some(Kind::Process),
            name: Some("payout".into()),
            state: Some("failed".into()),
            ..Criteria::default()
        },
        mode: Mode::FromStep("send".into()),
        dry_run: false,
    }
}

/// Runs the recovery workload.
pub fn run(args: &BenchArgs) -> Result<RecoveryReport, Error> {
    let instances = if args.quick {
        args.recovery_instances.min(20_000)
    } else {
        args.recovery_instances
    };
    let partitions = args.recovery_partitions;
    if partitions < 1 || instances == 0 {
        return Err(Error::Args(
            "--recovery-partitions and --recovery-instances must be at least 1".into(),
        ));
    }
    let rate = args.recovery_live_rate;
    super::plan::positive_rate("--recovery-live-rate", "per second", rate)?;
    let timeout = args.timeout.to_std();
    let plan = Plan {
        workload: Workload::Recovery,
        changes: 0,
        latency_changes: 0,
        baseline_changes: 0,
        tasks: 0,
        partitions,
        commit_interval: args.commit_interval.to_std(),
        timeout: timeout.max(Duration::from_secs(600)),
        latency_rate: None,
        offers: None,
        jobs: None,
        restore_tasks: 0,
    };
    let cluster = Cluster::new(args.brokers.as_deref())?;
    let prefix = super::prefix("recovery-jobs");
    // Creates the job topics too.
    let config = instance::prepare(&cluster, config(&prefix)?, &plan, true, "recovery")?;
    let t = config.kafka.topics.clone();
    let live_topic = config
        .jobs
        .iter()
        .find(|j| j.name == "live")
        .map(|j| j.topic.clone())
        .unwrap_or_default();
    tracing::info!(instances, partitions, "seeding failed instances");
    seed(&cluster, &t.changelog, partitions, instances, plan.timeout)?;
    let started = Instant::now();
    let mut reactor = instance::start(&cluster, &Arc::new(config), "bench", plan.partitions)?;
    reactor.wait_ready(plan.timeout)?;
    let restore = started.elapsed();
    tracing::info!(seconds = restore.as_secs_f64(), "restored");

    let exchange =
        Exchange::new(&cluster.producer_clients(), &t.commands, &t.events).map_err(|message| {
            Error::Failed {
                what: "preparing the recovery commands".into(),
                message,
            }
        })?;
    // Every seeded instance must be there (the mock cluster keeps only a
    // few MB per partition: run large counts with --brokers).
    let counted = exchange
        .count(recovery(String::new()), plan.timeout, &mut |_, _| {})
        .map_err(|message| Error::Failed {
            what: "counting the failed instances".into(),
            message,
        })?;
    let found: u64 = counted.answers.values().sum();
    if found != instances as u64 || !counted.missing.is_empty() {
        return Err(Error::Failed {
            what: "checking the seeded instances".into(),
            message: format!(
                "{found} of {instances} failed instances found (partitions without an answer: {:?}); \
                 the mock cluster keeps about 5 MB per partition: run large counts with --brokers",
                counted.missing
            ),
        });
    }
    let stop_reader = Arc::new(AtomicBool::new(false));
    let (reader, seen) = live_reader(&cluster, &live_topic, Arc::clone(&stop_reader))?;
    let stop_live = Arc::new(AtomicBool::new(false));
    let live = live_producer(&cluster, t.commands.clone(), rate, Arc::clone(&stop_live))?;
    let live_started = Instant::now();
    std::thread::sleep(BEFORE);

    let recovery_started = Instant::now();
    let op = reactor::cli::ops::new_op_id();
    let recover = recovery(op.clone());
    exchange
        .send(&Command::Recover(recover), &op)
        .map_err(|message| Error::Failed {
            what: "sending the recovery".into(),
            message,
        })?;
    let followed = exchange.follow(&op, Duration::from_secs(120), &mut |latest| {
        let done: u64 = latest.values().map(|p| p.done).sum();
        tracing::debug!(done, "recovery progress");
    });
    let recovery = recovery_started.elapsed();
    if !followed.missing.is_empty() {
        return Err(Error::Failed {
            what: "following the recovery".into(),
            message: format!("partitions {:?} did not finish", followed.missing),
        });
    }
    let restarted = followed.answers.values().map(|p| p.done).sum();
    std::thread::sleep(Duration::from_secs(1));
    stop_live.store(true, Ordering::Relaxed);
    let sent = live.join().map_err(|_| Error::Failed {
        what: "producing live launches".into(),
        message: "the thread panicked".into(),
    })??;
    // Wait for the runs of every live launch (or give up after a while).
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let got = seen
            .lock()
            .map(|s| s.iter().filter(|x| x.is_some()).count())
            .unwrap_or(0);
        if got >= sent.len() || Instant::now() > until {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    stop_reader.store(true, Ordering::Relaxed);
    let _ = reader.join();
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    let (mut before, mut during, mut lost) = (Vec::new(), Vec::new(), 0);
    let recovery_ended = recovery_started + recovery;
    for (j, at) in sent.iter().enumerate() {
        match seen.get(j).copied().flatten() {
            Some(got) => {
                let latency = got.saturating_duration_since(*at);
                if *at < recovery_started && *at >= live_started + WARM_UP {
                    before.push(latency);
                } else if *at >= recovery_started && *at < recovery_ended {
                    during.push(latency);
                }
            }
            None => lost += 1,
        }
    }
    reactor.stop(plan.timeout)?;
    Ok(RecoveryReport {
        brokers: cluster.describe(),
        partitions,
        instances,
        restore,
        restarted,
        recovery,
        live_rate: rate,
        before: Summary::of(before),
        during: Summary::of(during),
        lost,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use reactor::engine::{Engine, Input};

    /// The seeded records are what a shard restores as failed instances,
    /// each restarted once by the bench's recovery.
    #[test]
    fn seeded_records_restore_as_failed_instances_the_recovery_restarts() {
        let config = config("t").unwrap();
        let at: jiff::Timestamp = "2024-06-01T00:00:00Z".parse().unwrap();
        let records: Vec<ChangelogRecord> = (1..=3)
            .map(|n| ChangelogRecord {
                store: Store::Process,
                key: format!("payout/k{n}").into(),
                value: Some(Value::Process(std::sync::Arc::new(failed_record(n, at)))),
            })
            .chain([ChangelogRecord {
                store: Store::Seq,
                key: "payout".into(),
                value: Some(Value::Seq(3)),
            }])
            .collect();
        // Through the wire format, as the runtime reads them.
        let decoded = records.iter().map(|r| {
            let (k, v) = codec::encode_changelog(r.clone());
            codec::decode_changelog(&k, v.as_deref()).unwrap()
        });
        let mut engine = Engine::restore(&config, |_| true, decoded).unwrap();
        engine.start(at).unwrap();
        let (total, matches) = engine.find(&recovery("x".into()).criteria, 10);
        assert_eq!(total, 3);
        assert!(matches.iter().all(|m| m.step.as_deref() == Some("send")));
        let actions = engine
            .apply(Input::Command(Command::Recover(recovery("x".into()))), at)
            .unwrap();
        let mut all = actions;
        while engine.next_deadline().is_some_and(|d| d <= at) {
            all.extend(engine.tick(at).unwrap());
        }
        let runs: Vec<_> = all
            .iter()
            .filter_map(|a| match a {
                reactor::action::Action::StepRun(r) => Some((r.key.clone(), r.run_id.to_string())),
                _ => None,
            })
            .collect();
        assert_eq!(
            runs,
            [
                ("k1".to_string(), "payout/k1#1.1#3".to_string()),
                ("k2".to_string(), "payout/k2#2.1#3".to_string()),
                ("k3".to_string(), "payout/k3#3.1#3".to_string())
            ]
        );
    }
}
