//! The commit point of a batch: every shard's records and the input offsets,
//! in one Kafka transaction (or, with exactly-once off, produced and flushed
//! before the offsets are committed: at-least-once, deduplicated downstream
//! by the deterministic run ids), made by the [`super::committer`] while
//! the runtime decides the next batch.

use std::time::{Duration, Instant};

use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::types::RDKafkaErrorCode;

use super::committer::{Batch, Done};
use super::dead::DeadNote;
use super::output::OutRecords;

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
use super::{Error, Runtime, METRICS_INTERVAL};
use crate::metrics;

/// What the runtime keeps of a batch the committer has.
#[derive(Default)]
pub(super) struct InFlight {
    /// Its dead letters, logged and counted once it is committed.
    notes: Vec<DeadNote>,
    /// Commits redone after a generation change.
    tries: u32,
}

impl Runtime {
    /// Hands what the shards decided since the last hand-over, with the
    /// input offsets, to the committer, once the batch before it is
    /// committed. Fails when that one failed (its transaction aborted):
    /// the caller starts over from the committed state.
    pub(super) fn commit(&mut self) -> Result<(), Error> {
        self.settle_with(CommitMode::Async)?;
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
        let mut batch = Batch {
            records: Vec::with_capacity(self.shards.len() + 1),
            offsets: self.offsets.list()?,
            group: None,
        };
        let mut notes = Vec::new();
        for shard in self.shards.values_mut() {
            let spare = self.spare.pop().unwrap_or_default();
            batch
                .records
                .push(std::mem::replace(&mut shard.pending, spare));
            notes.append(&mut shard.dead);
        }
        let spare = self.spare.pop().unwrap_or_default();
        batch
            .records
            .push(std::mem::replace(&mut self.inbox.pending, spare));
        notes.append(&mut self.inbox.dead);
        self.consumed = false;
        self.batch_due = None;
        self.batch_records = 0;
        self.in_flight = InFlight { notes, tries: 0 };
        self.hand_over(batch)
    }

    /// Commits everything decided so far and waits until it is committed:
    /// before shards are given up, a shard is rebuilt, or the instance stops.
    pub(super) fn commit_and_settle(&mut self) -> Result<(), Error> {
        self.commit()?;
        self.settle()
    }

    /// [`Runtime::settle_with`] committing at-least-once offsets at once.
    pub(super) fn settle(&mut self) -> Result<(), Error> {
        self.settle_with(CommitMode::Sync)
    }

    fn hand_over(&mut self, mut batch: Batch) -> Result<(), Error> {
        if self.options.config.kafka.exactly_once && batch.offsets.count() > 0 {
            batch.group = self.group.group_metadata();
            if batch.group.is_none() {
                return Err(Error::Topic {
                    topic: self.options.config.kafka.topics.results.clone(),
                    message: "no consumer group metadata (not in the group)".into(),
                });
            }
        }
        self.committer.hand_over(batch)
    }

    /// Waits for the batch the committer has, if any, and takes its
    /// outcome. A commit refused because the group generation changed
    /// meanwhile (another member joined or restarted) was aborted — nothing
    /// of it is visible, and this instance still owns its shards (one it
    /// must give up is revoked on the next poll, after a commit) — so the
    /// same records are sent again with the new generation, and commit once.
    ///
    /// At-least-once, the batch's input offsets are committed in `mode`:
    /// asynchronously between batches (a lost commit only means inputs
    /// read again), synchronously before shards are given up or the
    /// instance stops.
    fn settle_with(&mut self, mode: CommitMode) -> Result<(), Error> {
        let mut backoff =
            super::backoff::Backoff::new(Duration::from_millis(20), Duration::from_millis(500));
        while let Some(done) = self.committer.wait() {
            let mut done = done?;
            match std::mem::replace(&mut done.result, Ok(())) {
                Err(e) if self.in_flight.tries < GENERATION_RETRIES && is_generation_change(&e) => {
                    self.in_flight.tries += 1;
                    let wait = backoff.next_delay();
                    tracing::info!(error = %e, ?wait, "the group generation changed during a commit; committing again");
                    if self.options.stop.wait(wait) == Some(super::StopKind::Crash) {
                        return Err(Error::Crashed);
                    }
                    self.hand_over(done.batch)?;
                }
                Err(e) => {
                    metrics::TransactionAborted {
                        reason: &e,
                        retryable: e.is_retryable(),
                    }
                    .emit();
                    return Err(e);
                }
                Ok(()) => {
                    self.committed(&done, mode)?;
                    self.keep_spare(done.batch.records);
                }
            }
        }
        Ok(())
    }

    /// Keeps a committed batch's emptied record lists for the next batches
    /// (as many as one batch takes: one per shard and the runtime's own).
    fn keep_spare(&mut self, lists: Vec<OutRecords>) {
        let wanted = self.shards.len() + 1;
        for mut list in lists {
            if self.spare.len() >= wanted {
                break;
            }
            if list.has_room() {
                list.clear();
                self.spare.push(list);
            }
        }
    }

    /// A batch the committer made durable: at-least-once, its offsets are
    /// committed now; each dead letter is logged and counted once.
    fn committed(&mut self, done: &Done, mode: CommitMode) -> Result<(), Error> {
        if !self.options.config.kafka.exactly_once {
            super::failpoint::before_commit();
            if done.batch.offsets.count() > 0 {
                self.group
                    .commit(&done.batch.offsets, mode)
                    .map_err(|e| Error::client("committing input offsets", e))?;
            }
        }
        // A fifth of each new time: steady under a commit's jitter, and
        // following a broker that slows down within a few commits.
        let half = self.options.config.kafka.commit_interval.to_std() / 2;
        let took = Duration::from_secs_f64(done.seconds.max(0.0)).min(half);
        self.commit_lead = (self.commit_lead * 4 + took) / 5;
        let flight = std::mem::take(&mut self.in_flight);
        for note in &flight.notes {
            note.emit();
        }
        metrics::TransactionCommitted {
            records: done.records,
            seconds: done.seconds,
        }
        .emit();
        self.export_metrics();
        Ok(())
    }

    /// Engine counters, pool and stage gauges at most every
    /// [`METRICS_INTERVAL`]; task health a part per call
    /// ([`super::task_health`]).
    fn export_metrics(&mut self) {
        let now = self.now();
        self.task_health.step(&self.shards, now);
        if self.metrics_at.elapsed() < METRICS_INTERVAL {
            return;
        }
        self.metrics_at = Instant::now();
        metrics::flush_held_lines();
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
        metrics::record_stages(&stages, offers);
        metrics::record_jobs(&jobs, &active);
    }
}
