//! The baseline: a minimal rdkafka consume→produce loop over the same
//! records. One consumer in a group relays every input record as it is to an
//! output topic with a producer configured as Reactor's; every commit
//! interval it flushes the producer and then commits the consumed offsets
//! (plain at-least-once, no transactions).
//!
//! Given Reactor's records ([`RecordShape`]), the same loop writes for each
//! input what Reactor writes for it instead — a run command to the output
//! topic and a changelog record to a second — and nothing else: Reactor's
//! I/O without Reactor's work.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::Message;

use super::cluster::{Cluster, Inputs};
use super::report::Measurement;
use super::shape::RecordShape;
use super::stats::Summary;
use super::{burst_then_steady, index_in, join_within, prefix, Error, Phases, Plan, Readers};

/// Measures the relay loop, writing each input as it is or, given `shape`,
/// as the records Reactor writes for it; `latency_rate` `None` derives the
/// latency phase's rate from this run's throughput.
pub(super) fn measure(
    cluster: &Cluster,
    plan: &Plan,
    inputs: &Arc<Inputs>,
    latency_rate: Option<f64>,
    shape: Option<&RecordShape>,
) -> Result<Measurement, Error> {
    let setup_started = Instant::now();
    let system = if shape.is_some() {
        "baseline-records"
    } else {
        "baseline"
    };
    let p = prefix(system);
    let (input, output) = (format!("{p}.in"), format!("{p}.out"));
    let n = plan.partitions;
    let mut topics = vec![(input.clone(), n, false), (output.clone(), n, false)];
    let shaped = shape.map(|shape| Shaped {
        shape: shape.clone(),
        changelog: format!("{p}.changelog"),
        key: Vec::new(),
    });
    if let Some(s) = &shaped {
        // Compacted, as Reactor's changelog is.
        topics.push((s.changelog.clone(), n, true));
    }
    cluster.create_topics(&topics)?;

    let consumer: BaseConsumer = cluster
        .group_consumer(&format!("{p}-group"))
        .create()
        .map_err(|e| Error::kafka("creating the baseline consumer", e))?;
    consumer
        .subscribe(&[input.as_str()])
        .map_err(|e| Error::kafka(format!("subscribing to {input}"), e))?;
    let relay_producer: BaseProducer =
        cluster
            .producer_clients()
            .runtime_producer(None)
            .create()
            .map_err(|e| Error::kafka("creating the baseline producer", e))?;
    let stop = Arc::new(AtomicBool::new(false));
    let assigned = Arc::new(AtomicBool::new(false));
    let relay = Relay {
        consumer,
        producer: relay_producer,
        output: output.clone(),
        shaped,
        interval: plan.commit_interval,
        call_timeout: plan.timeout,
        stop: Arc::clone(&stop),
        assigned: Arc::clone(&assigned),
    };
    let thread = std::thread::Builder::new()
        .name("bench-baseline".into())
        .spawn(move || relay.run())
        .map_err(|e| Error::Failed {
            what: "starting the baseline thread".into(),
            message: e.to_string(),
        })?;
    let stop_relay = |thread| {
        stop.store(true, Ordering::Relaxed);
        join_within(thread, plan.timeout, "stopping the baseline loop")
    };

    let deadline = Instant::now() + plan.timeout;
    while !assigned.load(Ordering::Relaxed) {
        if thread.is_finished() || Instant::now() > deadline {
            let joined = stop_relay(thread);
            return Err(match joined {
                Err(e) => e,
                Ok(_) => Error::Timeout {
                    what: "waiting for the baseline consumer to join its group".into(),
                    seconds: plan.timeout.as_secs_f64(),
                    detail: "no partitions assigned".into(),
                },
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let producer = Arc::new(cluster.producer()?);
    let reader = cluster.reader(&output)?;
    let setup = setup_started.elapsed();
    tracing::info!(
        system,
        seconds = setup.as_secs_f64(),
        "baseline ready; throughput phase"
    );

    // The input's key, or the task id Reactor's run command has for key.
    let index_of = |m: &rdkafka::message::BorrowedMessage<'_>| {
        let key = std::str::from_utf8(m.key().unwrap_or_default()).unwrap_or_default();
        let index = index_in(key).ok_or_else(|| format!("unexpected key {key:?}"))?;
        Ok(Some((index, None)))
    };
    let run = || {
        burst_then_steady(
            system,
            &producer,
            inputs,
            &input,
            &reader,
            plan,
            latency_rate,
            Readers::same(&index_of),
        )
    };
    let measured = run();
    let relayed = stop_relay(thread);
    let Phases {
        burst,
        throughput,
        steady,
        ..
    } = measured?;
    tracing::info!(system, records = relayed?, "baseline loop stopped");

    // A relayed record is one record in and one out.
    let records = 2.0 * burst.window_outputs as f64;
    let (cpu_per_record, cpu_by_thread) = burst.cpu_per_record(records);
    Ok(Measurement {
        window: burst.window,
        throughput: 2.0 * throughput,
        cpu_per_record,
        cpu_by_thread,
        latency: steady.and_then(|s| Summary::of(s.latencies)),
        dispatch: None,
        duplicates: burst.duplicates,
        setup,
    })
}

/// The consume→produce loop.
struct Relay {
    consumer: BaseConsumer,
    /// A `BaseProducer` served by this loop: `flush` of rdkafka 0.39 waits
    /// up to 100 ms per round on the delivery queue, which a
    /// `ThreadedProducer`'s own thread empties first, so every flush of one
    /// would take 100 ms.
    producer: BaseProducer,
    output: String,
    /// Reactor's records instead of the input's, if given.
    shaped: Option<Shaped>,
    interval: Duration,
    call_timeout: Duration,
    stop: Arc<AtomicBool>,
    assigned: Arc<AtomicBool>,
}

/// What the loop writes Reactor's records with.
struct Shaped {
    shape: RecordShape,
    /// The topic of the changelog records.
    changelog: String,
    /// A changelog key's buffer, reused.
    key: Vec<u8>,
}

impl Relay {
    /// Relays until stopped; returns how many records it relayed.
    fn run(mut self) -> Result<u64, Error> {
        // Polls as Reactor's runtime does when its group inputs are idle.
        let poll = (self.interval / 4).clamp(Duration::from_millis(1), Duration::from_millis(50));
        let mut relayed = 0u64;
        let mut uncommitted = false;
        let mut last_commit = Instant::now();
        loop {
            if self.stop.load(Ordering::Relaxed) {
                if uncommitted {
                    self.commit()?;
                }
                self.consumer.unsubscribe();
                return Ok(relayed);
            }
            // Delivery reports.
            self.producer.poll(Duration::ZERO);
            match self.consumer.poll(poll) {
                None => {}
                Some(Ok(m)) => {
                    match self.shaped.take() {
                        None => self.send(&self.output, None, m.key(), m.payload())?,
                        Some(mut shaped) => {
                            let sent = self.send_as_reactor(&mut shaped, &m);
                            self.shaped = Some(shaped);
                            sent?;
                        }
                    }
                    self.consumer
                        .store_offset_from_message(&m)
                        .map_err(|e| Error::kafka("storing a consumed offset", e))?;
                    relayed += 1;
                    uncommitted = true;
                }
                Some(Err(KafkaError::PartitionEOF(_))) => {}
                Some(Err(e)) => tracing::debug!(error = %e, "baseline consumer error (retried)"),
            }
            if !self.assigned.load(Ordering::Relaxed)
                && self.consumer.assignment().is_ok_and(|a| a.count() > 0)
            {
                self.assigned.store(true, Ordering::Relaxed);
            }
            if uncommitted && last_commit.elapsed() >= self.interval {
                self.commit()?;
                uncommitted = false;
                last_commit = Instant::now();
            }
        }
    }

    /// Writes the run command and the changelog record Reactor writes for
    /// input `m` (a change of `bench.t<i>/max_dt`, task `t<i>`).
    fn send_as_reactor(&self, shaped: &mut Shaped, m: &impl Message) -> Result<(), Error> {
        let key = m.key().unwrap_or_default();
        let id = key
            .strip_prefix(b"bench.")
            .and_then(|rest| rest.split(|&b| b == b'/').next())
            .unwrap_or_default();
        let change = shaped.shape.for_id(id).ok_or_else(|| Error::Failed {
            what: "relaying as Reactor writes".into(),
            message: format!(
                "no record shape for input key {:?}",
                String::from_utf8_lossy(key)
            ),
        })?;
        for (topic, written) in [
            (&self.output, &change.run),
            (&shaped.changelog, &change.changelog),
        ] {
            written.key_into(id, &mut shaped.key);
            let partition = written.own_partition.then(|| m.partition());
            self.send(topic, partition, Some(&shaped.key), Some(&written.value))?;
        }
        Ok(())
    }

    fn send(
        &self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
    ) -> Result<(), Error> {
        let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic);
        if let Some(p) = partition {
            record = record.partition(p);
        }
        if let Some(key) = key {
            record = record.key(key);
        }
        if let Some(payload) = payload {
            record = record.payload(payload);
        }
        reactor::kafka::send_with_room(&self.producer, record, Some(self.call_timeout), || {
            self.producer.poll(Duration::from_millis(1))
        })
        .map_err(|e| Error::kafka(format!("relaying to {topic}"), e))
    }

    /// Waits until every output is acknowledged. Not `Producer::flush`: in
    /// rdkafka 0.39 it polls in rounds of up to 100 ms, and a poll round
    /// lasts its whole timeout, so a flush with anything in flight takes at
    /// least 100 ms.
    fn flush(&self) -> Result<(), Error> {
        let deadline = Instant::now() + self.call_timeout;
        loop {
            // A zero-timeout flush sends what lingers and reports whether
            // anything is still in flight.
            match self.producer.flush(Duration::ZERO) {
                Ok(()) => return Ok(()),
                Err(KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut))
                    if Instant::now() < deadline =>
                {
                    self.producer.poll(Duration::from_millis(1));
                }
                Err(e) => return Err(Error::kafka("flushing the baseline outputs", e)),
            }
        }
    }

    /// At-least-once: outputs delivered before their inputs are committed.
    fn commit(&self) -> Result<(), Error> {
        self.flush()?;
        match self.consumer.commit_consumer_state(CommitMode::Async) {
            Ok(()) | Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => Ok(()),
            Err(e) => Err(Error::kafka("committing the baseline offsets", e)),
        }
    }
}
