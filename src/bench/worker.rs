//! Bench workers and what the answered workloads (offers, jobs) share: a
//! thread per run topic answering every run at once, marks of when each
//! input first got somewhere, and the two phases run while the workers
//! answer.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::BaseConsumer;
use rdkafka::message::BorrowedMessage;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::Message;

use super::cluster::{Cluster, IndexOf, Inputs, Sent};
use super::instance::{self, Launched};
use super::{burst_then_steady, join_within, Error, Phases, Plan, Readers};
use crate::config::{Config, Topics};

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

/// A worker's answer to one run command.
pub(super) struct Answer {
    /// The key of the result record (the offer, the business key).
    pub key: String,
    /// The input the run serves, marked on its first run.
    pub index: Option<usize>,
    /// The encoded `RunResult`.
    pub payload: Vec<u8>,
}

/// Reads a run command and answers it; an error text for a record that is
/// not a run command of the workload.
pub(super) type Answering = fn(&[u8]) -> Result<Answer, String>;

/// A bench worker: answers every run of one run topic at once.
struct Worker {
    topic: String,
    consumer: BaseConsumer,
    producer: ThreadedProducer<DefaultProducerContext>,
    results: String,
    answering: Answering,
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
        let answer =
            (self.answering)(m.payload().unwrap_or_default()).map_err(|message| Error::Failed {
                what: format!("reading {}[{}]@{}", m.topic(), m.partition(), m.offset()),
                message,
            })?;
        if let Some(i) = answer.index {
            self.first_run.mark(i);
        }
        let record = BaseRecord::to(&self.results)
            .key(answer.key.as_str())
            .payload(&answer.payload[..]);
        reactor::kafka::send_with_room(&self.producer, record, Some(self.call_timeout), || {
            std::thread::sleep(Duration::from_millis(1))
        })
        .map_err(|e| Error::kafka(format!("replying to {}", self.results), e))?;
        self.answered.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// The workers of one answered workload.
pub(super) struct Workers {
    threads: Vec<JoinHandle<Result<Duration, Error>>>,
    stop: Arc<AtomicBool>,
    /// When each input's first run reached a worker.
    pub first_run: Arc<Marks>,
    /// Runs answered.
    pub answered: Arc<AtomicU64>,
}

impl Workers {
    /// Starts one worker thread per run topic of `launched`, answering
    /// with `answering`; `inputs` inputs can be marked.
    pub fn start(
        cluster: &Cluster,
        launched: &Launched,
        run_topics: &[String],
        answering: Answering,
        inputs: usize,
        plan: &Plan,
    ) -> Result<Workers, Error> {
        let mut workers = Workers {
            threads: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            first_run: Arc::new(Marks::new(inputs)),
            answered: Arc::new(AtomicU64::new(0)),
        };
        for topic in run_topics {
            // On an error the workers started so far are stopped by `Drop`.
            let worker = Worker {
                topic: topic.clone(),
                consumer: cluster.assigned(&[topic], &format!("{topic}-bench-worker"))?,
                producer: cluster.producer()?,
                results: launched.topics.results.clone(),
                answering,
                first_run: Arc::clone(&workers.first_run),
                answered: Arc::clone(&workers.answered),
                stop: Arc::clone(&workers.stop),
                call_timeout: plan.timeout,
            };
            let thread = std::thread::Builder::new()
                .name("bench-worker".into())
                .spawn(move || worker.run())
                .map_err(|e| Error::Failed {
                    what: "starting a bench worker".into(),
                    message: e.to_string(),
                })?;
            workers.threads.push(thread);
        }
        Ok(workers)
    }

    /// Stops the workers; the longest any of them spent answering.
    pub fn stop(mut self, timeout: Duration) -> Result<Duration, Error> {
        self.stop.store(true, Ordering::Relaxed);
        let mut busy = Ok(Duration::ZERO);
        for w in std::mem::take(&mut self.threads) {
            let joined = join_within(w, timeout, "stopping a bench worker");
            busy = match (busy, joined) {
                (Ok(a), Ok(b)) => Ok(a.max(b)),
                (Err(e), _) | (_, Err(e)) => Err(e),
            };
        }
        busy
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Picks one of an instance's topics.
pub(super) type TopicOf = fn(&Topics) -> &String;

/// What an answered workload measured.
pub(super) struct Answered {
    /// Topic creation, start, group join until ready.
    pub setup: Duration,
    /// The two phases.
    pub phases: Phases,
    /// When each input's first run reached a worker.
    pub first_run: Arc<Marks>,
    /// Runs the workers answered, both phases.
    pub runs: u64,
    /// The longest time one worker spent answering (not waiting for runs).
    pub worker_busy: Duration,
}

/// Measures an answered workload with exactly-once on: starts Reactor on
/// `config` and a worker per run topic of its stages and jobs answering
/// with `answering`, runs the burst and (when planned) the paced phase of
/// `inputs` produced to the `input` topic with completions read from the
/// `output` topic by `index_of`, and stops them all whatever happened.
#[allow(clippy::too_many_arguments)]
pub(super) fn measure(
    system: &str,
    cluster: &Cluster,
    config: Config,
    plan: &Plan,
    inputs: &Arc<Inputs>,
    topics: (TopicOf, TopicOf),
    answering: Answering,
    latency_rate: Option<f64>,
    index_of: &IndexOf<'_>,
) -> Result<Answered, Error> {
    let run_topics: Vec<String> = config
        .stage_topics()
        .into_iter()
        .chain(config.job_topics())
        .map(str::to_string)
        .collect();
    let launched = instance::launch(cluster, config, plan, true, system)?;
    let total = plan.changes + plan.latency_changes;
    let workers = Workers::start(cluster, &launched, &run_topics, answering, total, plan)?;
    let (input, output) = (topics.0(&launched.topics), topics.1(&launched.topics));
    let measured = (|| {
        let producer = Arc::new(cluster.producer()?);
        let reader = cluster.reader(output)?;
        let setup = launched.setup_started.elapsed();
        tracing::info!(
            system,
            seconds = setup.as_secs_f64(),
            "Reactor ready; throughput phase"
        );
        let phases = burst_then_steady(
            system,
            &producer,
            inputs,
            input,
            &reader,
            plan,
            latency_rate,
            Readers::same(index_of),
        )?;
        Ok((setup, phases))
    })();
    let (first_run, runs) = (
        Arc::clone(&workers.first_run),
        Arc::clone(&workers.answered),
    );
    let stopped = workers.stop(plan.timeout);
    let Launched { instance, .. } = launched;
    let (setup, phases) = measured?;
    let worker_busy = stopped?;
    instance.stop(plan.timeout)?;
    Ok(Answered {
        setup,
        phases,
        first_run,
        runs: runs.load(Ordering::Relaxed),
        worker_busy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
