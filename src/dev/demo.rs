//! The demo's moving parts: a CTL producer, workers that answer run commands,
//! the offer producer and stage workers of [`super::offers`], and a printer
//! of committed decisions.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::Message;

use crate::codec::{self, CtlRecord, Format, MessageKind};
use crate::config::Config;
use crate::ctl::{ParamName, ParamRef};
use crate::engine::RunResult;
use crate::kafka::Clients;
use crate::run::Status;

use super::offers;

/// The demo threads.
pub struct Demo {
    threads: Vec<JoinHandle<()>>,
}

impl Demo {
    /// Waits for every demo thread (after the stop flag was set).
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Starts the producers, the workers and the printer.
pub fn start(brokers: &str, config: &Arc<Config>, stop: Arc<AtomicBool>) -> Demo {
    let clients = Clients {
        brokers: brokers.to_string(),
        librdkafka: Default::default(),
    };
    let mut threads = Vec::new();
    for (name, job) in [
        (
            "demo-ctl",
            ctl_producer as fn(Clients, Arc<Config>, Arc<AtomicBool>),
        ),
        ("demo-workers", workers),
        ("demo-offers", offers::producer),
        ("demo-stage-workers", offers::workers),
        ("demo-launcher", super::payouts::launcher),
        ("demo-job-workers", super::payouts::workers),
        ("demo-printer", printer),
    ] {
        let (clients, config, stop) = (clients.clone(), Arc::clone(config), Arc::clone(&stop));
        threads.push(
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || job(clients, config, stop))
                .expect("spawning a demo thread"),
        );
    }
    Demo { threads }
}

/// A small xorshift: enough randomness for a demo, no dependency.
pub(super) struct Rng(u64);

impl Rng {
    /// A generator from a non-zero seed.
    pub(super) fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// The next number.
    #[allow(clippy::should_implement_trait)]
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The wall clock as the demo's lines start.
pub(super) fn clock() -> String {
    Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::system())
        .strftime("%H:%M:%S")
        .to_string()
}

fn send_ctl(
    producer: &ThreadedProducer<DefaultProducerContext>,
    config: &Config,
    name: ParamRef<'_>,
    value: Timestamp,
) {
    let record = CtlRecord {
        entity: name.entity.to_string(),
        param: name.param.to_string(),
        value,
    };
    let payload = codec::encode_ctl_change(
        &record,
        Some(Timestamp::now()),
        "reactor-dev",
        Format::Protobuf,
    );
    let key = name.joined();
    let _ = producer.send(
        BaseRecord::to(&config.kafka.topics.ctl)
            .key(key.as_str())
            .payload(&payload),
    );
    println!("{}  ctl     {name} = {value}", clock());
}

/// Moves `raw.orders/max_dt` every few seconds and `dwh.users/updated_at`
/// now and then, as loads landing in a warehouse would.
fn ctl_producer(clients: Clients, config: Arc<Config>, stop: Arc<AtomicBool>) {
    let Ok(producer) = clients.producer(None).create::<ThreadedProducer<_>>() else {
        return;
    };
    let orders = ParamName::new("raw.orders", "max_dt");
    let users = ParamName::new("dwh.users", "updated_at");
    let mut tick = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let now = Timestamp::now();
        if tick % 4 == 0 {
            send_ctl(&producer, &config, orders.parts(), now);
        }
        if tick % 30 == 0 {
            send_ctl(&producer, &config, users.parts(), now);
        }
        tick += 1;
        sleep_unless(&stop, Duration::from_secs(5));
    }
    let _ = producer.flush(Duration::from_secs(5));
}

/// Answers every run command after a short "work", failing one in ten; a
/// successful run of a task that `produces` parameters publishes them.
fn workers(clients: Clients, config: Arc<Config>, stop: Arc<AtomicBool>) {
    let consumer: BaseConsumer = match clients
        .base()
        .set("group.id", "reactor-dev-workers")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .create()
    {
        Ok(c) => c,
        Err(e) => return eprintln!("demo workers: {e}"),
    };
    let mut topics = vec![config.kafka.topics.runs.clone()];
    topics.extend(config.tasks.iter().filter_map(|t| t.extra().topic.clone()));
    let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
    if consumer.subscribe(&topics).is_err() {
        return;
    }
    let Ok(producer) = clients.producer(None).create::<ThreadedProducer<_>>() else {
        return;
    };
    let mut rng = Rng::new(0x2545_f491_4f6c_dd1d);
    while !stop.load(Ordering::Relaxed) {
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let Ok(run) = codec::decode_run_command(m.payload().unwrap_or_default()) else {
            continue;
        };
        let seed = rng.next();
        sleep_unless(&stop, Duration::from_millis(300 + seed % 900));
        let ok = seed % 10 != 0;
        let result = RunResult {
            step: Default::default(),
            stage: Default::default(),
            run_id: run.run_id.clone(),
            pass: run.pass,
            status: if ok {
                Status::Succeeded
            } else {
                Status::Failed
            },
            error: (!ok).then(|| "demo failure".to_string()),
        };
        if ok {
            publish_produced(&producer, &config, &run);
        }
        let payload = codec::encode_run_result(&result, &run.reply_key, Format::Protobuf);
        let _ = producer.send(
            BaseRecord::to(&run.reply_topic)
                .key(&run.reply_key)
                .payload(&payload),
        );
        let verdict = if ok {
            "succeeded"
        } else {
            "failed: demo failure"
        };
        println!(
            "{}  worker  {} attempt {} {verdict}",
            clock(),
            run.run_id,
            run.attempt
        );
    }
}

/// Publishes what a successful run produced: its parameters move to the
/// newest value the run saw.
fn publish_produced(
    producer: &ThreadedProducer<DefaultProducerContext>,
    config: &Config,
    run: &crate::proto::v1::RunCommand,
) {
    let Some(task) = config.tasks.iter().find(|t| t.id() == run.task) else {
        return;
    };
    let newest = run
        .snapshot
        .values()
        .filter_map(|t| codec::timestamp_from_proto(t).ok())
        .max();
    if let Some(value) = newest {
        for &name in &task.extra().produces {
            send_ctl(producer, config, config.params.name(name), value);
        }
    }
}

/// Prints every committed run command (tasks' and stages'), event and
/// offer state.
fn printer(clients: Clients, config: Arc<Config>, stop: Arc<AtomicBool>) {
    let t = &config.kafka.topics;
    let consumer: BaseConsumer = match clients
        .base()
        .set("group.id", "reactor-dev-printer")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .create()
    {
        Ok(c) => c,
        Err(e) => return eprintln!("demo printer: {e}"),
    };
    let mut topics = vec![t.runs.as_str(), t.events.as_str()];
    topics.extend(
        config
            .tasks
            .iter()
            .filter_map(|t| t.def.extra().topic.as_deref()),
    );
    if !config.stages.is_empty() {
        topics.push(t.offer_state.as_str());
        topics.extend(config.stage_topics());
    }
    topics.extend(config.job_topics());
    topics.sort_unstable();
    topics.dedup();
    if consumer.subscribe(&topics).is_err() {
        return;
    }
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let payload = m.payload().unwrap_or_default();
        if m.topic() == t.events {
            if let Ok(event) = codec::to_json(MessageKind::Event, payload) {
                println!("{}  EVENT   {event}", clock());
            }
        } else if m.topic() == t.offer_state {
            if let Ok((state, _)) = codec::decode_offer_state(payload) {
                println!("{}  OFFER   {}", clock(), offers::describe_state(&state));
            }
        } else if let Ok(run) = codec::decode_step_run_command(payload) {
            println!(
                "{}  RUN     {}",
                clock(),
                super::payouts::describe_run(&run)
            );
        } else if let Ok(run) = codec::decode_run_command(payload) {
            let snapshot: Vec<String> = run
                .snapshot
                .iter()
                .filter_map(|(k, v)| {
                    codec::timestamp_from_proto(v)
                        .ok()
                        .map(|v| format!("{k}={v}"))
                })
                .collect();
            println!(
                "{}  RUN     {} attempt {} pass {}  {}",
                clock(),
                run.run_id,
                run.attempt,
                run.pass,
                snapshot.join(" ")
            );
        } else if let Ok(run) = codec::decode_stage_run_command(payload) {
            println!("{}  RUN     {}", clock(), offers::describe_run(&run));
        }
    }
    tracing::debug!(
        seconds = started.elapsed().as_secs(),
        "demo printer stopped"
    );
}

/// Sleeps `d`, or less when the demo stops meanwhile.
pub(super) fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
}
