//! The offers workload: offer changes through stages, end to end.
//!
//! Every input is a new offer `o{i}` (`{"n": i, "price": …, "category": …}`).
//! `--stages` stages (`s0`, `s1` …) watch `n` and run while they have no
//! state, so each change wakes every stage once; Reactor runs them one at a
//! time per offer (DESIGN §6). A bench worker per stage answers every run at
//! once with the update `{"sK": version}` and the state `{"seen": version}`,
//! computed from the run's version; no stage watches another's field, so
//! nothing runs twice. One offer change thus makes `stages` stage runs,
//! `stages` results and `stages + 1` offer states, the last of them holding
//! every stage's state: that one completes the change.
//!
//! Measured with exactly-once on, with the same two phases as the tasks
//! workload: throughput is offer changes per second from the first produce
//! call to the last completing `OfferState` a `read_committed` reader
//! receives; in the paced phase each change's latency is taken to its own
//! `OfferState` (version 1: the change committed), to its first stage run
//! reaching a worker, and to its completing `OfferState`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::Message;
use serde_json::json;

use super::cluster::{Cluster, Inputs, Pace, Sent};
use super::instance::{self, Launched};
use super::report::OffersMeasurement;
use super::stats::{self, Summary};
use super::{auto_rate, join_within, phase, Error, Plan};
use crate::action::StageRunCommand;
use crate::codec::{self, Format};
use crate::config::Config;
use crate::engine::{RunResult, StageReply, Update};
use crate::offer::{Body, Change, OfferChange};
use crate::run::Status;

/// The offers workload as planned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct OffersPlan {
    /// Offer changes of the throughput phase.
    pub changes: usize,
    /// Offer changes of the latency phase.
    pub latency_changes: usize,
    /// Rate of the latency phase; `None`: half the measured throughput.
    pub latency_rate: Option<f64>,
    /// Stages every change goes through.
    pub stages: usize,
}

/// Name of stage `k`, also the body field its worker sets.
fn stage_name(k: usize) -> String {
    format!("s{k}")
}

/// Key and offer id of input `i`.
fn offer_id(i: usize) -> String {
    format!("o{i}")
}

/// Index of offer `o{i}`.
pub(super) fn offer_index(id: &str) -> Option<usize> {
    id.strip_prefix('o')?.parse().ok()
}

/// The input records: change `i` creates offer `o{i}`.
pub(super) fn inputs(n: usize) -> Inputs {
    let categories = ["sport", "home", "electronics", "books"];
    let records = (0..n)
        .map(|i| {
            let body = json!({
                "n": i,
                "price": 100 + i % 900,
                "category": categories[i % categories.len()],
            });
            let change = OfferChange {
                offer_id: offer_id(i),
                change: Change::Body(body.as_object().cloned().unwrap_or_default()),
                source: Some("reactor-bench".into()),
            };
            let value = codec::encode_offer_change(&change, Format::Protobuf);
            (change.offer_id, value)
        })
        .collect();
    Inputs { records }
}

/// `stages` stages with run topics `{prefix}.s{k}`; no tasks. Each stage
/// may run on every offer at once (`max_parallelism`), so the measurement is
/// of Reactor, not of a limit.
pub(super) fn config(stages: usize, prefix: &str) -> Result<Config, Error> {
    use std::fmt::Write;
    let mut text = String::new();
    for k in 0..stages {
        let _ = writeln!(
            text,
            "[[stage]]\nname = \"{name}\"\nwatch = [\"n\"]\nwhen = \"state == null\"\n\
             topic = \"{prefix}.{name}\"\nmax_parallelism = 1000000\ntimeout = \"1m\"\n",
            name = stage_name(k)
        );
    }
    crate::config::parse(&text, "bench-offers.toml")
        .map(|loaded| loaded.config)
        .map_err(|e| Error::Config(Box::new(e)))
}

/// What the bench worker answers: at once, success, computed from the run's
/// version, with the update `{"STAGE": version}` and the state `{"seen": version}`.
pub(super) fn answer(run: &StageRunCommand) -> RunResult {
    let mut update = Body::new();
    update.insert(run.stage.clone(), json!(run.version));
    let mut result = RunResult::new(run.run_id.clone(), run.pass, Status::Succeeded);
    result.stage = StageReply {
        version: Some(run.version),
        update: Some(Update::Patch(update)),
        state: Some(json!({"seen": run.version})),
        timer: None,
    };
    result
}

/// First time something happened to each input, settable from any thread
/// (the first mark wins).
pub(super) struct Marks {
    base: Instant,
    nanos: Vec<AtomicU64>,
}

impl Marks {
    /// Marks for inputs `0..n`.
    pub fn new(n: usize) -> Marks {
        Marks {
            base: Instant::now(),
            nanos: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Marks input `i` now unless it was marked before.
    pub fn mark(&self, i: usize) {
        if let Some(slot) = self.nanos.get(i) {
            let now = self.base.elapsed().as_nanos() as u64 + 1;
            let _ = slot.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// When input `i` was first marked.
    pub fn get(&self, i: usize) -> Option<Instant> {
        match self.nanos.get(i)?.load(Ordering::Relaxed) {
            0 => None,
            n => Some(self.base + Duration::from_nanos(n - 1)),
        }
    }

    /// Sent → marked, for the inputs `start..` sent at `sent` that were marked.
    pub fn latencies(&self, start: usize, sent: &[Sent]) -> Vec<Duration> {
        sent.iter()
            .enumerate()
            .filter_map(|(k, s)| Some(self.get(start + k)?.saturating_duration_since(s.at)))
            .collect()
    }
}

/// A bench worker: answers every run of one stage topic at once.
struct Worker {
    topic: String,
    consumer: BaseConsumer,
    producer: ThreadedProducer<DefaultProducerContext>,
    results: String,
    first_run: Arc<Marks>,
    answered: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    call_timeout: Duration,
}

impl Worker {
    /// Answers until stopped; returns the time spent answering.
    fn run(self) -> Result<Duration, Error> {
        // Time spent answering (not waiting for runs): were the workers the
        // bottleneck, it would approach the phases' length.
        let mut busy = Duration::ZERO;
        let mut answered = 0u64;
        while !self.stop.load(Ordering::Relaxed) {
            let m = match self.consumer.poll(Duration::from_millis(20)) {
                None => continue,
                Some(Ok(m)) => m,
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "bench worker consumer error (retried)");
                    continue;
                }
            };
            let started = Instant::now();
            self.answer(&m)?;
            busy += started.elapsed();
            answered += 1;
        }
        tracing::debug!(
            topic = self.topic,
            answered,
            busy_seconds = busy.as_secs_f64(),
            "bench worker stopped"
        );
        self.producer
            .flush(self.call_timeout)
            .map_err(|e| Error::kafka("flushing the bench worker's results", e))?;
        Ok(busy)
    }

    fn answer(&self, m: &BorrowedMessage<'_>) -> Result<(), Error> {
        let run =
            codec::decode_stage_run_command(m.payload().unwrap_or_default()).map_err(|e| {
                Error::Failed {
                    what: format!("reading {}[{}]@{}", m.topic(), m.partition(), m.offset()),
                    message: format!("not a stage run command: {e}"),
                }
            })?;
        if let Some(i) = offer_index(&run.offer) {
            self.first_run.mark(i);
        }
        let payload = codec::encode_run_result(&answer(&run), &run.offer, Format::Protobuf);
        let mut record = BaseRecord::to(&self.results)
            .key(run.offer.as_str())
            .payload(&payload[..]);
        let deadline = Instant::now() + self.call_timeout;
        loop {
            match self.producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back))
                    if Instant::now() < deadline =>
                {
                    record = back;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err((e, _)) => {
                    return Err(Error::kafka(format!("replying to {}", self.results), e))
                }
            }
        }
        self.answered.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Starts one worker thread per stage topic.
fn start_workers(
    cluster: &Cluster,
    launched: &Launched,
    first_run: &Arc<Marks>,
    answered: &Arc<AtomicU64>,
    stop: &Arc<AtomicBool>,
    plan: &Plan,
) -> Result<Vec<JoinHandle<Result<Duration, Error>>>, Error> {
    let mut threads = Vec::new();
    for topic in &launched.stage_topics {
        let worker = Worker {
            topic: topic.clone(),
            consumer: cluster.assigned(&[topic], &format!("{topic}-bench-worker"))?,
            producer: cluster.producer()?,
            results: launched.topics.results.clone(),
            first_run: Arc::clone(first_run),
            answered: Arc::clone(answered),
            stop: Arc::clone(stop),
            call_timeout: plan.timeout,
        };
        let thread = std::thread::Builder::new()
            .name("bench-worker".into())
            .spawn(move || worker.run())
            .map_err(|e| Error::Failed {
                what: "starting a bench worker".into(),
                message: e.to_string(),
            })?;
        threads.push(thread);
    }
    Ok(threads)
}

/// Measures the offers workload with exactly-once on. `plan` is the bench's
/// plan with the offers workload's changes.
pub(super) fn measure(
    cluster: &Cluster,
    plan: &Plan,
    offers: &OffersPlan,
    inputs: &Arc<Inputs>,
) -> Result<OffersMeasurement, Error> {
    let system = "offers";
    let stage_prefix = super::prefix("stage");
    let config = config(offers.stages, &stage_prefix)?;
    let launched = instance::launch(cluster, config, plan, true, system)?;
    let total = plan.changes + plan.latency_changes;
    let first_run = Arc::new(Marks::new(total));
    let committed = Marks::new(total);
    let answered = Arc::new(AtomicU64::new(0));
    let states_read = AtomicU64::new(0);
    let stop = Arc::new(AtomicBool::new(false));
    let workers = start_workers(cluster, &launched, &first_run, &answered, &stop, plan);
    // Stops the workers; the longest any of them spent answering.
    let stop_workers = |workers: Vec<JoinHandle<Result<Duration, Error>>>| {
        stop.store(true, Ordering::Relaxed);
        let mut busy = Ok(Duration::ZERO);
        for w in workers {
            let joined = join_within(w, plan.timeout, "stopping a bench worker");
            busy = match (busy, joined) {
                (Ok(a), Ok(b)) => Ok(a.max(b)),
                (Err(e), _) | (_, Err(e)) => Err(e),
            };
        }
        busy
    };
    let workers = match workers {
        Ok(w) => w,
        Err(e) => {
            stop.store(true, Ordering::Relaxed);
            return Err(e);
        }
    };
    let stages = offers.stages;
    let index_of = |m: &BorrowedMessage<'_>| {
        let (state, _) = codec::decode_offer_state(m.payload().unwrap_or_default())
            .map_err(|e| format!("not an offer state: {e}"))?;
        let index =
            offer_index(&state.offer).ok_or_else(|| format!("unknown offer {}", state.offer))?;
        states_read.fetch_add(1, Ordering::Relaxed);
        if state.version == 1 {
            committed.mark(index);
        }
        Ok((state.states.len() >= stages).then_some((index, None)))
    };
    // Everything that may fail while the workers run, so that they are
    // stopped whatever happens.
    let measured = (|| {
        let producer = Arc::new(cluster.producer()?);
        let reader = cluster.reader(&launched.topics.offer_state)?;
        let setup = launched.setup_started.elapsed();
        tracing::info!(
            system,
            stages,
            seconds = setup.as_secs_f64(),
            "Reactor ready; throughput phase"
        );
        let run = |range, pace| {
            phase(
                &producer,
                inputs,
                &launched.topics.offers,
                &reader,
                range,
                pace,
                plan.timeout,
                &index_of,
            )
        };
        let burst = run(plan.throughput_range(), Pace::Burst)?;
        let throughput = stats::per_second(plan.changes, burst.elapsed);
        tracing::info!(
            system,
            throughput,
            seconds = burst.elapsed.as_secs_f64(),
            "throughput phase done"
        );
        let rate = offers.latency_rate.unwrap_or_else(|| auto_rate(throughput));
        let steady = if plan.latency_changes > 0 {
            tracing::info!(system, rate, "latency phase");
            Some(run(plan.latency_range(), Pace::Rate(rate))?)
        } else {
            None
        };
        Ok((setup, burst, throughput, rate, steady))
    })();
    let stopped = stop_workers(workers);
    let Launched { instance, .. } = launched;
    let (setup, burst, throughput, rate, steady) = measured?;
    let worker_busy = stopped?;
    instance.stop(plan.timeout)?;

    let latency = |marks: &Marks| {
        steady
            .as_ref()
            .and_then(|s| Summary::of(marks.latencies(plan.latency_range().start, &s.sent)))
    };
    Ok(OffersMeasurement {
        stages,
        changes: plan.changes,
        latency_changes: plan.latency_changes,
        latency_rate: steady.is_some().then_some(rate),
        latency_rate_auto: offers.latency_rate.is_none(),
        elapsed: burst.elapsed,
        throughput,
        committed: latency(&committed),
        first_run: latency(&first_run),
        done: steady
            .as_ref()
            .and_then(|s| Summary::of(s.latencies.clone())),
        stage_runs: answered.load(Ordering::Relaxed),
        worker_busy,
        offer_states: states_read.load(Ordering::Relaxed),
        duplicates: burst.duplicates + steady.as_ref().map_or(0, |s| s.duplicates),
        setup,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_create_offers_the_stages_watch() {
        let inputs = inputs(3);
        assert_eq!(inputs.records[2].0, "o2");
        let change = codec::decode_offer_change(Some(b"o2"), Some(&inputs.records[2].1)).unwrap();
        let Change::Body(body) = change.change else {
            panic!("{change:?}");
        };
        assert_eq!(body["n"], json!(2));
        assert_eq!(offer_index("o2"), Some(2));
        assert_eq!(offer_index("x2"), None);

        let config = config(5, "bench-x").unwrap();
        assert_eq!(config.stages.len(), 5);
        assert_eq!(config.stage_topics()[4], "bench-x.s4");
        assert!(config.tasks.is_empty());
        assert!(config.stages.iter().all(|s| s.watch == ["n"]));
    }

    #[test]
    fn the_worker_answers_from_the_runs_version() {
        let run = StageRunCommand {
            stage: "s3".into(),
            offer: "o9".into(),
            run_id: "s3/o9#1".into(),
            attempt: 1,
            pass: 4,
            version: 3,
            body: Body::new(),
            state: None,
            deadline: "2026-01-01T00:00:00Z".parse().unwrap(),
            topic: String::new(),
            source: None,
        };
        let result = answer(&run);
        assert_eq!((result.run_id.as_str(), result.pass), ("s3/o9#1", 4));
        assert_eq!(result.stage.version, Some(3));
        let Some(Update::Patch(patch)) = &result.stage.update else {
            panic!("{result:?}");
        };
        assert_eq!(patch["s3"], json!(3));
        let bytes = codec::encode_run_result(&result, "o9", Format::Protobuf);
        assert_eq!(codec::decode_run_result(&bytes).unwrap(), result);
    }

    /// Five stages through the pure engine: one change makes five runs (one
    /// at a time), six offer states, and the last holds every stage's state.
    #[test]
    fn one_change_makes_a_run_per_stage_and_a_completing_state() {
        use crate::action::Action;
        use crate::engine::{Engine, Input};
        let config = config(5, "bench-x").unwrap();
        let mut engine = Engine::new(&config);
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        engine.start(now).unwrap();
        let inputs = inputs(1);
        let change = codec::decode_offer_change(Some(b"o0"), Some(&inputs.records[0].1)).unwrap();
        let mut actions = engine.apply(Input::Offer(change), now).unwrap();
        let (mut runs, mut states) = (0, Vec::new());
        loop {
            let mut next = Vec::new();
            for action in actions {
                match action {
                    Action::StageRun(run) => {
                        runs += 1;
                        next.push(run);
                    }
                    Action::OfferState(state) => states.push(state),
                    _ => {}
                }
            }
            assert!(next.len() <= 1, "one stage at a time");
            let Some(run) = next.pop() else { break };
            actions = engine.apply(Input::Result(answer(&run)), now).unwrap();
        }
        assert_eq!(runs, 5);
        assert_eq!(states.len(), 6);
        assert_eq!(states[0].version, 1);
        assert!(states[..5].iter().all(|s| s.states.len() < 5));
        assert_eq!(states[5].states.len(), 5);
    }

    #[test]
    fn marks_keep_the_first_time() {
        let marks = Marks::new(3);
        assert_eq!(marks.get(1), None);
        marks.mark(1);
        let first = marks.get(1).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        marks.mark(1);
        assert_eq!(marks.get(1), Some(first));
        marks.mark(7); // out of range: ignored
        let sent = [Sent {
            at: first - Duration::from_millis(5),
            wall: jiff::Timestamp::now(),
        }];
        assert_eq!(marks.latencies(1, &sent), [Duration::from_millis(5)]);
        assert!(marks.latencies(0, &sent).is_empty());
    }
}
