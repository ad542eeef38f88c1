//! The commit point of a batch: every shard's records and the input offsets,
//! in one Kafka transaction (or, with exactly-once off, produced and flushed
//! before the offsets are committed: at-least-once, deduplicated downstream
//! by the deterministic run ids).

use std::time::{Duration, Instant};

use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::output::OutRecord;

/// Commits redone after the group generation changed under them.
const GENERATION_RETRIES: u32 = 8;

/// Whether `e` says the offsets carried a group generation that is no
/// longer current (a rebalance in progress or just done).
fn is_generation_change(e: &Error) -> bool {
    let source = match e {
        Error::Client { source, .. } | Error::Record { source, .. } => source,
        _ => return false,
    };
    matches!(
        source.rdkafka_error_code(),
        Some(RDKafkaErrorCode::IllegalGeneration | RDKafkaErrorCode::RebalanceInProgress)
    )
}
use super::{Error, Runtime, CALL_TIMEOUT, METRICS_INTERVAL};
use crate::metrics;

impl Runtime {
    /// Commits what the shards decided since the last commit, with the input
    /// offsets. On failure the transaction is aborted and the error returned:
    /// the caller starts over from the committed state.
    pub(super) fn commit(&mut self) -> Result<(), Error> {
        let records: usize =
            self.shards.values().map(|s| s.pending.len()).sum::<usize>() + self.inbox.pending.len();
        if records == 0 && !self.consumed {
            // Inputs that decided nothing (a CTL change no owned task
            // fired on) leave no batch to hurry.
            self.batch_due = None;
            self.batch_records = 0;
            self.export_metrics();
            return Ok(());
        }
        let started = Instant::now();
        let result = if self.options.config.kafka.exactly_once {
            self.commit_transaction_retrying()
        } else {
            self.commit_at_least_once()
        };
        match result {
            Ok(()) => {
                for shard in self.shards.values_mut() {
                    // Committed: each dead letter is logged and counted once.
                    for note in &shard.dead {
                        note.emit();
                    }
                    shard.clear();
                }
                for note in &self.inbox.dead {
                    note.emit();
                }
                self.inbox.clear();
                self.consumed = false;
                self.batch_due = None;
                self.batch_records = 0;
                metrics::TransactionCommitted {
                    records,
                    seconds: started.elapsed().as_secs_f64(),
                }
                .emit();
                self.export_metrics();
                Ok(())
            }
            Err(e) => {
                metrics::TransactionAborted {
                    reason: &e,
                    retryable: e.is_retryable(),
                }
                .emit();
                Err(e)
            }
        }
    }

    fn offsets_list(&self) -> Result<TopicPartitionList, Error> {
        let mut tpl = TopicPartitionList::new();
        for ((topic, p), next) in &self.offsets {
            tpl.add_partition_offset(topic, *p, Offset::Offset(*next))
                .map_err(|e| Error::Record {
                    topic: topic.clone(),
                    partition: *p,
                    offset: *next,
                    source: e,
                })?;
        }
        Ok(tpl)
    }

    /// [`Runtime::commit_transaction`], redone when the group moved to a new
    /// generation meanwhile (another member joined or restarted): the
    /// offsets carried the old one, so the broker refused them and the
    /// transaction was aborted — nothing of it is visible, and this instance
    /// still owns its shards (a shard it must give up is revoked on the next
    /// poll, and committed first). Sent again with the new generation, the
    /// same records commit once.
    fn commit_transaction_retrying(&mut self) -> Result<(), Error> {
        let mut backoff =
            super::backoff::Backoff::new(Duration::from_millis(20), Duration::from_millis(500));
        let mut tries = 0;
        loop {
            match self.commit_transaction() {
                Err(e) if tries < GENERATION_RETRIES && is_generation_change(&e) => {
                    tries += 1;
                    let wait = backoff.next_delay();
                    tracing::info!(error = %e, ?wait, "the group generation changed during a commit; committing again");
                    if self.options.stop.wait(wait) == Some(super::StopKind::Crash) {
                        return Err(Error::Crashed);
                    }
                }
                result => return result,
            }
        }
    }

    fn commit_transaction(&mut self) -> Result<(), Error> {
        let tx = |what: &str, e: KafkaError| Error::client(format!("transaction: {what}"), e);
        self.producer
            .begin_transaction()
            .map_err(|e| tx("begin", e))?;
        let sent = self.send_all().and_then(|()| {
            if self.offsets.is_empty() {
                return Ok(());
            }
            let tpl = self.offsets_list()?;
            let metadata = self.group.group_metadata().ok_or_else(|| Error::Topic {
                topic: self.options.config.kafka.topics.results.clone(),
                message: "no consumer group metadata (not in the group)".into(),
            })?;
            self.producer
                .send_offsets_to_transaction(&tpl, &metadata, CALL_TIMEOUT)
                .map_err(|e| tx("send offsets", e))
        });
        let committed = sent.and_then(|()| self.wait_delivered()).and_then(|()| {
            super::failpoint::before_commit();
            self.producer
                .commit_transaction(CALL_TIMEOUT)
                .map_err(|e| tx("commit", e))
        });
        if let Err(e) = committed {
            // Served by the producer's own thread, so abort can complete.
            if let Err(abort) = self.producer.abort_transaction(CALL_TIMEOUT) {
                tracing::warn!(error = %abort, "aborting the transaction failed");
            }
            return Err(e);
        }
        Ok(())
    }

    fn commit_at_least_once(&mut self) -> Result<(), Error> {
        let failures = self.producer.context().failures();
        self.send_all()?;
        self.wait_delivered()?;
        if self.producer.context().failures() != failures {
            return Err(Error::client(
                "delivering outputs",
                KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut),
            ));
        }
        super::failpoint::before_commit();
        if !self.offsets.is_empty() {
            let tpl = self.offsets_list()?;
            self.group
                .commit(&tpl, CommitMode::Sync)
                .map_err(|e| Error::client("committing input offsets", e))?;
        }
        Ok(())
    }

    /// Waits until every produced record is acknowledged. rdkafka's
    /// `flush` polls the event queue in 100 ms rounds that race with the
    /// producer's own polling thread, so every commit would stall ~100 ms;
    /// the producer thread serves delivery reports, so watching the in-flight
    /// count is enough. (`commit_transaction` flushes too, then at once.)
    fn wait_delivered(&self) -> Result<(), Error> {
        // A zero-timeout flush asks librdkafka to send now instead of lingering.
        let _ = self.producer.flush(Duration::ZERO);
        let deadline = Instant::now() + CALL_TIMEOUT;
        while self.producer.in_flight_count() > 0 {
            if Instant::now() > deadline {
                return Err(Error::client(
                    "waiting for deliveries",
                    KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut),
                ));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    }

    fn send_all(&self) -> Result<(), Error> {
        for shard in self.shards.values() {
            for record in &shard.pending {
                self.send(record)?;
            }
        }
        for record in &self.inbox.pending {
            self.send(record)?;
        }
        Ok(())
    }

    /// Produces one record, waiting while the local queue is full.
    fn send(&self, r: &OutRecord) -> Result<(), Error> {
        let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(&r.topic).key(&r.key[..]);
        if !r.headers.is_empty() {
            // Only dead letters carry headers: no header list for the rest.
            let mut headers = OwnedHeaders::new_with_capacity(r.headers.len());
            for (key, value) in &r.headers {
                headers = headers.insert(Header {
                    key,
                    value: Some(value),
                });
            }
            record = record.headers(headers);
        }
        if let Some(payload) = &r.payload {
            record = record.payload(&payload[..]);
        }
        if let Some(p) = r.partition {
            record = record.partition(p);
        }
        let deadline = Instant::now() + CALL_TIMEOUT;
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back))
                    if Instant::now() < deadline =>
                {
                    record = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err((e, _)) => {
                    return Err(Error::Record {
                        topic: r.topic.clone(),
                        partition: r.partition.unwrap_or(-1),
                        offset: -1,
                        source: e,
                    })
                }
            }
        }
    }

    /// Engine counters, pool and stage gauges and task staleness, at most every
    /// [`METRICS_INTERVAL`]: listing every task is not for every commit.
    fn export_metrics(&mut self) {
        if self.metrics_at.elapsed() < METRICS_INTERVAL {
            return;
        }
        self.metrics_at = Instant::now();
        let now = self.now();
        let mut stages = Vec::with_capacity(self.shards.len());
        let mut jobs = Vec::with_capacity(self.shards.len());
        let mut active = Vec::with_capacity(self.shards.len());
        let mut offers = 0;
        for shard in self.shards.values_mut() {
            let engine = shard.driver.engine();
            metrics::record_engine(&mut shard.stats, engine.stats(), &engine.pool_stats());
            metrics::record_offer_counters(&mut shard.offer_stats, engine.offer_counters());
            stages.push(shard.engine().stage_stats());
            jobs.push(shard.engine().job_stats());
            active.push(shard.engine().active_instances());
            offers += shard.engine().offer_count();
        }
        metrics::record_task_health(
            self.shards.values().flat_map(|s| s.engine().task_health()),
            now,
        );
        metrics::record_stages(&stages, offers);
        metrics::record_jobs(&jobs, &active);
    }
}
