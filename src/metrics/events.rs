//! Notable events of the I/O side: each one struct whose `emit()` logs
//! and counts in one call.

use rdkafka::error::KafkaError;

use super::*;

/// Readiness changed (see [`crate::runtime::health::Readiness`]).
#[derive(Debug, Clone, Copy)]
pub struct ReadinessChanged<'a> {
    /// Ready now.
    pub ready: bool,
    /// Why not, when not.
    pub reason: Option<&'a str>,
}

impl ReadinessChanged<'_> {
    /// Logs at info (its causes, a broker down or a failed runtime, are
    /// warned about where they happen) and sets the [`READY`] gauge.
    pub fn emit(&self) {
        match self.reason {
            Some(reason) => tracing::info!(ready = self.ready, reason, "readiness changed"),
            None => tracing::info!(ready = self.ready, "readiness changed"),
        }
        gauge!(READY).set(if self.ready { 1.0 } else { 0.0 });
    }
}

/// An output record larger than the producer accepts: sent as a dead letter
/// (cut) instead, so that it cannot abort every transaction. Input limits
/// make this unreachable; seeing it is a bug to report.
#[derive(Debug, Clone, Copy)]
pub struct OutputOversize<'a> {
    /// The output's topic.
    pub topic: &'a str,
    /// Its size (key, value and headers).
    pub size: usize,
    /// The producer's limit.
    pub limit: usize,
}

impl OutputOversize<'_> {
    /// Logs an error (a burst per topic and window: [`super::throttle`])
    /// and counts it.
    pub fn emit(&self) {
        if let Some(held_back) = throttle::admit(&throttle::OVERSIZE_LINES, self.topic) {
            tracing::error!(
                topic = self.topic,
                size = self.size,
                limit = self.limit,
                held_back,
                "an output is larger than the producer accepts; sent to the dead-letter topic instead"
            );
        }
        counter!(OUTPUTS_OVERSIZE, "topic" => self.topic.to_string()).increment(1);
    }
}

/// A record the brokers did not take (its transaction aborts, or the
/// at-least-once batch is redone).
#[derive(Debug, Clone, Copy)]
pub struct DeliveryFailed<'a> {
    /// Its topic.
    pub topic: &'a str,
    /// Its partition.
    pub partition: i32,
    /// Why.
    pub error: &'a KafkaError,
}

impl DeliveryFailed<'_> {
    /// Logs a warning, a burst per topic and window ([`super::throttle`]):
    /// a broker outage fails every record of a batch at once.
    pub fn emit(&self) {
        if let Some(held_back) = throttle::admit(&throttle::DELIVERY_LINES, self.topic) {
            tracing::warn!(
                topic = self.topic,
                partition = self.partition,
                error = %self.error,
                held_back,
                "delivery failed"
            );
        }
    }
}

/// A changelog record this version cannot read, skipped by a restore: the
/// rest of the shard is still worth serving.
#[derive(Debug, Clone, Copy)]
pub struct ChangelogRecordSkipped<'a> {
    /// The changelog topic.
    pub topic: &'a str,
    /// Its partition.
    pub partition: i32,
    /// The record's offset.
    pub offset: i64,
    /// Why it could not be read.
    pub error: &'a dyn std::error::Error,
}

impl ChangelogRecordSkipped<'_> {
    /// Logs an error, a burst per topic and window ([`super::throttle`]):
    /// a changelog written by an incompatible version is unreadable
    /// record after record.
    pub fn emit(&self) {
        if let Some(held_back) = throttle::admit(&throttle::SKIPPED_LINES, self.topic) {
            tracing::error!(
                topic = self.topic,
                partition = self.partition,
                offset = self.offset,
                error = %self.error,
                held_back,
                "skipping an unreadable changelog record"
            );
        }
    }
}

/// An undecodable record sent to `reactor.dead`.
#[derive(Debug, Clone, Copy)]
pub struct DeadLetter<'a> {
    /// Source topic.
    pub topic: &'a str,
    /// Source partition.
    pub partition: i32,
    /// Source offset.
    pub offset: i64,
    /// Why it was refused.
    pub reason: &'a str,
    /// Whether the record was cut to fit the producer's limit.
    pub truncated: bool,
}

impl DeadLetter<'_> {
    /// Logs a warning (a burst per topic and window: [`super::throttle`])
    /// and counts it (and a cut one). Emitted when the dead letter is
    /// committed, so a record is counted once however often its batch is
    /// redone.
    pub fn emit(&self) {
        if let Some(held_back) = throttle::admit(&throttle::DEAD_LETTER_LINES, self.topic) {
            tracing::warn!(
                topic = self.topic,
                partition = self.partition,
                offset = self.offset,
                reason = self.reason,
                truncated = self.truncated,
                held_back,
                "dead letter"
            );
        }
        counter!(DEAD_LETTERS, "topic" => self.topic.to_string()).increment(1);
        if self.truncated {
            counter!(DEAD_LETTERS_TRUNCATED).increment(1);
        }
    }
}

/// An undecodable CTL record not reported: too many waited for shards this
/// instance does not own yet.
#[derive(Debug, Clone, Copy)]
pub struct CtlDeadLetterDropped<'a> {
    /// CTL partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Why it could not be decoded.
    pub reason: &'a str,
    /// The first one this runtime drops (later ones log at debug: every
    /// instance sees every CTL record, and the owner reports it).
    pub first: bool,
}

impl CtlDeadLetterDropped<'_> {
    /// Logs (a warning for the first) and counts it.
    pub fn emit(&self) {
        const WHAT: &str = "too many CTL dead letters wait for shards this instance does not own; this one is not reported here";
        if self.first {
            tracing::warn!(
                partition = self.partition,
                offset = self.offset,
                reason = self.reason,
                WHAT
            );
        } else {
            tracing::debug!(
                partition = self.partition,
                offset = self.offset,
                reason = self.reason,
                WHAT
            );
        }
        counter!(CTL_DEAD_LETTERS_DROPPED).increment(1);
    }
}

/// Sets the [`ADMIN_CONNECTIONS`] gauge.
pub fn admin_connections(open: usize) {
    gauge!(ADMIN_CONNECTIONS).set(open as f64);
}

/// The admin API closed a connection to stay within its limit.
#[derive(Debug, Clone, Copy)]
pub struct AdminConnectionClosed {
    /// `evicted` (the oldest idle one, for a new one) or `refused` (a new
    /// one, every open one being busy).
    pub why: &'static str,
}

impl AdminConnectionClosed {
    /// Logs at debug (a flood would flood the log) and counts it.
    pub fn emit(&self) {
        tracing::debug!(why = self.why, "admin API: connection closed at the limit");
        counter!(ADMIN_CONNECTIONS_CLOSED, "why" => self.why).increment(1);
    }
}

/// A Kafka transaction committed.
#[derive(Debug, Clone, Copy)]
pub struct TransactionCommitted {
    /// Records produced in it.
    pub records: usize,
    /// Time the commit took.
    pub seconds: f64,
}

impl TransactionCommitted {
    /// Logs at debug (one per batch: too many for info) and counts it.
    pub fn emit(&self) {
        tracing::debug!(
            records = self.records,
            seconds = self.seconds,
            "transaction committed"
        );
        counter!(TRANSACTIONS_COMMITTED).increment(1);
        histogram!(TRANSACTION_COMMIT).record(self.seconds);
    }
}

/// A Kafka transaction aborted; its inputs are processed again.
#[derive(Clone, Copy)]
pub struct TransactionAborted<'a> {
    /// Why.
    pub reason: &'a dyn Display,
    /// Whether the batch will be redone (otherwise the instance stops).
    pub retryable: bool,
}

impl std::fmt::Debug for TransactionAborted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionAborted")
            .field("reason", &format_args!("{}", self.reason))
            .field("retryable", &self.retryable)
            .finish()
    }
}

impl TransactionAborted<'_> {
    /// Logs (a warning when it will be redone, an error otherwise) and counts it.
    pub fn emit(&self) {
        if self.retryable {
            tracing::warn!(reason = %self.reason, retryable = true, "transaction aborted");
        } else {
            tracing::error!(reason = %self.reason, retryable = false, "transaction aborted");
        }
        let retryable = if self.retryable { "true" } else { "false" };
        counter!(TRANSACTIONS_ABORTED, "retryable" => retryable).increment(1);
    }
}

/// Which way partitions moved in a rebalance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum RebalanceKind {
    /// Partitions given to this instance.
    Assigned,
    /// Partitions taken from this instance.
    Revoked,
}

impl RebalanceKind {
    /// Metric label and log field.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Partitions assigned to or revoked from this instance.
#[derive(Debug, Clone, Copy)]
pub struct Rebalance<'a> {
    /// Which way.
    pub kind: RebalanceKind,
    /// The partitions that moved.
    pub partitions: &'a [i32],
    /// Shards owned once the rebalance is applied.
    pub owned: usize,
}

impl Rebalance<'_> {
    /// Logs at info, counts it and sets the [`SHARDS_OWNED`] gauge.
    pub fn emit(&self) {
        tracing::info!(
            kind = self.kind.as_str(),
            partitions = ?self.partitions,
            owned = self.owned,
            "rebalance"
        );
        counter!(REBALANCES, "kind" => self.kind.as_str()).increment(1);
        gauge!(SHARDS_OWNED).set(self.owned as f64);
    }
}

/// A shard broke an internal invariant on an input (a bug in Reactor): the
/// input is dead-lettered and the shard rebuilt from its changelog.
#[derive(Debug, Clone, Copy)]
pub struct EngineFailed<'a> {
    /// The shard.
    pub partition: i32,
    /// Where the input came from (`timers` for a tick).
    pub topic: &'a str,
    /// Its offset (-1 for a tick).
    pub offset: i64,
    /// What broke.
    pub error: &'a crate::engine::Error,
}

impl EngineFailed<'_> {
    /// Logs an error (this is a bug to report) and counts it.
    pub fn emit(&self) {
        tracing::error!(
            partition = self.partition,
            topic = self.topic,
            offset = self.offset,
            error = %self.error,
            "a shard broke an invariant; the input is dead-lettered and the shard rebuilt"
        );
        counter!(ENGINE_FAILURES, "topic" => self.topic.to_string()).increment(1);
    }
}

/// A shard restored: rebuilt from its changelog, or resumed from memory.
#[derive(Debug, Clone, Copy)]
pub struct ShardRestored {
    /// The changelog partition.
    pub partition: i32,
    /// Records read.
    pub records: u64,
    /// Time the restore took.
    pub seconds: f64,
    /// Kept in memory since this instance gave it up, and resumed: nothing
    /// was written to its changelog meanwhile.
    pub resumed: bool,
}

impl ShardRestored {
    /// Logs at info and records the restore time and records read.
    pub fn emit(&self) {
        tracing::info!(
            partition = self.partition,
            records = self.records,
            seconds = self.seconds,
            resumed = self.resumed,
            "shard restored"
        );
        counter!(RECORDS_RESTORED).increment(self.records);
        histogram!(RESTORE).record(self.seconds);
        if self.resumed {
            counter!(SHARDS_RESUMED).increment(1);
        }
    }
}

/// The ping-pong guard parked an offer: its stages ran too often in the window.
#[derive(Debug, Clone, Copy)]
pub struct PingPong<'a> {
    /// The offer.
    pub offer: &'a str,
    /// The stage whose run was refused.
    pub stage: &'a str,
    /// Runs counted in the window.
    pub runs: u32,
    /// Stage runs of the offer resume then (or on `unpark_offer`).
    pub until: Timestamp,
}

impl PingPong<'_> {
    /// Logs a warning (an operator may want to look at the stages) and counts it.
    pub fn emit(&self) {
        tracing::warn!(
            offer = self.offer,
            stage = self.stage,
            runs = self.runs,
            until = %self.until,
            "ping-pong: offer parked"
        );
        counter!(PING_PONG, "stage" => self.stage.to_string()).increment(1);
    }
}

/// A step of a stage rescan over one shard.
#[derive(Debug, Clone, Copy)]
pub struct RescanProgress<'a> {
    /// The shard.
    pub partition: i32,
    /// The stage.
    pub stage: &'a str,
    /// Offers checked so far.
    pub checked: u64,
    /// Offers queued so far.
    pub queued: u64,
    /// Offers in the shard when the rescan started.
    pub total: u64,
    /// Predicates that failed so far.
    pub errors: u64,
    /// Every offer checked.
    pub done: bool,
}

impl RescanProgress<'_> {
    /// Logs (at info when done, debug before) and sets the rescan gauges of
    /// the stage on this shard.
    pub fn emit(&self) {
        if self.done {
            tracing::info!(
                partition = self.partition,
                stage = self.stage,
                checked = self.checked,
                queued = self.queued,
                errors = self.errors,
                "rescan done"
            );
        } else {
            tracing::debug!(
                partition = self.partition,
                stage = self.stage,
                checked = self.checked,
                queued = self.queued,
                total = self.total,
                "rescan progress"
            );
        }
        let labels = [
            ("stage", self.stage.to_string()),
            ("partition", self.partition.to_string()),
        ];
        gauge!(RESCAN_CHECKED, &labels).set(self.checked as f64);
        gauge!(RESCAN_QUEUED, &labels).set(self.queued as f64);
        gauge!(RESCAN_TOTAL, &labels).set(self.total as f64);
    }
}

/// A recovery's progress on one shard, after a chunk.
#[derive(Clone, Copy)]
pub struct RecoveryProgress<'a> {
    /// The operation.
    pub op: &'a str,
    /// The shard.
    pub partition: u32,
    /// Items restarted so far.
    pub done: u64,
    /// Items it expected to restart.
    pub total: u64,
    /// No more chunks come.
    pub finished: bool,
    /// Stopped by an operator.
    pub cancelled: bool,
}

impl RecoveryProgress<'_> {
    /// Logs (at info when it starts and ends, debug between) and sets the
    /// shard's remaining-items gauge of the operation.
    pub fn emit(&self) {
        if self.finished || self.done == 0 {
            tracing::info!(
                op = self.op,
                partition = self.partition,
                done = self.done,
                total = self.total,
                finished = self.finished,
                cancelled = self.cancelled,
                "recovery"
            );
        } else {
            tracing::debug!(
                op = self.op,
                partition = self.partition,
                done = self.done,
                total = self.total,
                "recovery progress"
            );
        }
        if self.done == 0 && !self.finished {
            counter!(OPERATIONS, "kind" => "recover").increment(1);
        }
        let remaining = if self.finished {
            0
        } else {
            self.total.saturating_sub(self.done)
        };
        gauge!(RECOVERY_REMAINING, "op" => self.op.to_string(), "partition" => self.partition.to_string())
            .set(remaining as f64);
    }
}

/// The broker could not be reached; the shell retries with backoff.
#[derive(Clone, Copy)]
pub struct BrokerUnavailable<'a> {
    /// The client's error.
    pub error: &'a dyn Display,
}

impl std::fmt::Debug for BrokerUnavailable<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerUnavailable")
            .field("error", &format_args!("{}", self.error))
            .finish()
    }
}

impl BrokerUnavailable<'_> {
    /// Logs a warning and counts it. Readiness is the caller's to clear
    /// ([`set_ready`]), as only it knows when the broker is back.
    pub fn emit(&self) {
        tracing::warn!(error = %self.error, "broker unavailable");
        counter!(BROKER_UNAVAILABLE).increment(1);
    }
}
