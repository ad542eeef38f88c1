//! Prometheus metrics: every name and description lives here, so the
//! dashboard in `deploy/` and the code cannot drift apart name by name.
//!
//! Counters end in `_total` and durations in `_seconds` by name (the
//! exporter's unit suffixing stays off, so a name here is the name scraped).
//! Labels are the `as_str()` names of the crate's enums (from `strum`).
//!
//! The engine is pure and counts nothing itself; the shell feeds this module
//! what the engine returned ([`record_actions`], [`record_result`],
//! [`record_engine`], [`TaskHealth`], [`record_offer_counters`],
//! [`record_stages`]) and emits the notable events of the
//! I/O side ([`DeadLetter`], [`TransactionAborted`], [`Rebalance`], …), each
//! of which logs and counts in one call. This file holds the names, their
//! descriptions and the recorder; `record` the recording helpers, `events`
//! the notable events, `task_ages` the per-task ages `/metrics` renders
//! itself (all re-exported here), `throttle` the rate of lines logged per
//! record.

use std::collections::HashSet;
use std::fmt::Display;
use std::sync::{Mutex, OnceLock, PoisonError};

use jiff::Timestamp;
use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Counter,
    Histogram, Unit,
};
use metrics_exporter_prometheus::{BuildError, PrometheusBuilder, PrometheusHandle};

use crate::action::{Action, Event, OfferState, Subject};
use crate::engine::{JobStats, OfferCounters, PoolStats, RunKind, RunResult, StageStats, Stats};
use crate::name_index::ByName;
use crate::run::Status;
use crate::stage::Lane;
use crate::task::TaskState;

/// Records read from input topics, by `topic`.
pub const EVENTS_CONSUMED: &str = "reactor_events_consumed_total";
/// Trigger evaluations.
pub const TRIGGERS_EVALUATED: &str = "reactor_triggers_evaluated_total";
/// Trigger evaluations that queued a task.
pub const TRIGGERS_FIRED: &str = "reactor_triggers_fired_total";
/// Run commands sent to workers (first attempts, retries and re-dispatches),
/// by `kind` (`task`, `stage`, `job`; stage runs also by `stage`, job runs
/// by `job_type`).
pub const RUNS_DISPATCHED: &str = "reactor_runs_dispatched_total";
/// Runs whose success was applied, by `kind` (stage runs also by `stage`;
/// job runs by `process`: a step's run id names its process, not its job).
pub const RUNS_SUCCEEDED: &str = "reactor_runs_succeeded_total";
/// Failed attempts, by `kind` and what follows (`next`: `backoff`,
/// `parked`, `dead`; stage runs also by `stage`, job runs by `job_type`).
pub const RUNS_FAILED: &str = "reactor_runs_failed_total";
/// Passes that got no result before their deadline, by `kind` (stage runs
/// also by `stage`, job runs by `job_type`): the seed's workTimeoutCounter.
pub const RUNS_TIMED_OUT: &str = "reactor_runs_timed_out_total";
/// Results not applied, by `kind` and `reason`
/// ([`crate::run::Rejection::as_str`]). No `stage` label: a rejected result
/// may name any stage.
pub const RESULTS_REJECTED: &str = "reactor_results_rejected_total";
/// Operator commands that could not be applied, by `kind` (`task`, `stage`).
pub const COMMANDS_REJECTED: &str = "reactor_commands_rejected_total";
/// Offer changes committed (each bumped a version and published an
/// `OfferState`), by `cause` (`external`, `stage`, `command`, `deleted`).
pub const OFFER_CHANGES_COMMITTED: &str = "reactor_offer_changes_committed_total";
/// Stage results computed from an old offer version (discarded, re-run), by `stage`.
pub const STALE_VERSIONS: &str = "reactor_stale_versions_total";
/// Stage `when` / `timer` expressions that failed to evaluate, by `stage` and `field`.
pub const PREDICATE_ERRORS: &str = "reactor_predicate_errors_total";
/// Stage `when` predicates evaluated (changes and rescans).
pub const PREDICATES_EVALUATED: &str = "reactor_predicates_evaluated_total";
/// Offers parked by the ping-pong guard, by the `stage` whose run was refused.
pub const PING_PONG: &str = "reactor_ping_pong_total";
/// Stage state compare-and-set commands, by `applied` (`true`, `false`).
pub const STAGE_STATE_SETS: &str = "reactor_stage_state_sets_total";
/// Offers a stage's current rescan has checked, by `stage` and `partition`.
pub const RESCAN_CHECKED: &str = "reactor_rescan_checked";
/// Offers a stage's current rescan has queued, by `stage` and `partition`.
pub const RESCAN_QUEUED: &str = "reactor_rescan_queued";
/// Offers in the partition when the stage's current rescan started, by
/// `stage` and `partition`.
pub const RESCAN_TOTAL: &str = "reactor_rescan_total";
/// Stage queue entries ready to dispatch, by `stage` and `lane` (`live`, `rescan`).
pub const STAGE_QUEUED: &str = "reactor_stage_queued";
/// Stage runs in flight, by `stage`.
pub const STAGE_RUNNING: &str = "reactor_stage_running";
/// Offers held by the shards of this instance.
pub const OFFERS: &str = "reactor_offers";
/// Tasks without a success within their `expect_every`.
pub const SLA_MISSED: &str = "reactor_sla_missed_total";
/// CTL values that moved backwards.
pub const CTL_MOVED_BACK: &str = "reactor_ctl_moved_back_total";
/// Tasks queued per `pool`.
pub const POOL_QUEUED: &str = "reactor_pool_queued";
/// Runs in flight per `pool`.
pub const POOL_RUNNING: &str = "reactor_pool_running";
/// Tasks per `state` ([`TaskState::as_str`]) on this instance.
pub const TASKS: &str = "reactor_tasks";
/// Seconds since the last success, per `task`: the stalest tasks this
/// instance owns, at most `reactor run --task-age-series` of them (see
/// [`TaskAges`]; rendered by `/metrics`, not through the recorder).
pub const TASK_SECONDS_SINCE_SUCCESS: &str = "reactor_task_seconds_since_success";
/// [`TASK_SECONDS_SINCE_SUCCESS`]'s description.
pub const TASK_SECONDS_SINCE_SUCCESS_HELP: &str =
    "Seconds since the task's last success, for the stalest tasks this instance owns.";
/// From the input record that caused a dispatch to the dispatch, by `kind`.
pub const DISPATCH_LATENCY: &str = "reactor_dispatch_latency_seconds";
/// Time to commit one Kafka transaction.
pub const TRANSACTION_COMMIT: &str = "reactor_transaction_commit_seconds";
/// Kafka transactions committed.
pub const TRANSACTIONS_COMMITTED: &str = "reactor_transactions_committed_total";
/// Kafka transactions aborted, by `retryable`.
pub const TRANSACTIONS_ABORTED: &str = "reactor_transactions_aborted_total";
/// Time to restore one shard from its changelog.
pub const RESTORE: &str = "reactor_restore_seconds";
/// Changelog records read while restoring.
pub const RECORDS_RESTORED: &str = "reactor_records_restored_total";
/// Shards given back to this instance and resumed from memory.
pub const SHARDS_RESUMED: &str = "reactor_shards_resumed_total";
/// Records sent to the dead-letter topic, by source `topic`.
pub const DEAD_LETTERS: &str = "reactor_dead_letters_total";
/// Consumer group rebalances, by `kind` (`assigned`, `revoked`).
pub const REBALANCES: &str = "reactor_rebalances_total";
/// Shards (changelog partitions) this instance owns.
pub const SHARDS_OWNED: &str = "reactor_shards_owned";
/// 1 when the instance is ready, 0 otherwise.
pub const READY: &str = "reactor_ready";
/// Times the broker could not be reached.
pub const BROKER_UNAVAILABLE: &str = "reactor_broker_unavailable_total";
/// Inputs on which a shard broke an internal invariant (a bug): each is
/// dead-lettered and the shard rebuilt from its changelog.
pub const ENGINE_FAILURES: &str = "reactor_engine_failures_total";
/// Process instances started, by process.
pub const PROCESSES_STARTED: &str = "reactor_processes_started_total";
/// Process instances ended, by process and outcome.
pub const PROCESSES_ENDED: &str = "reactor_processes_ended_total";
/// Instances reported idle (no step progress for `idle_timeout`), by process.
pub const PROCESSES_IDLE: &str = "reactor_processes_idle_total";
/// Launches refused, by process and reason (`active`, `reuse`, `validation`).
pub const LAUNCHES_REJECTED: &str = "reactor_launches_rejected_total";
/// Launches waiting behind an active instance, by process.
pub const LAUNCHES_QUEUED: &str = "reactor_launches_queued_total";
/// Steps failed for good by their job's deadline, by job.
pub const DEADLINES_EXCEEDED: &str = "reactor_deadlines_exceeded_total";
/// Steps waiting in a job's queue, by job and lane.
pub const JOB_QUEUED: &str = "reactor_job_queued";
/// Steps of a job in flight, by job.
pub const JOB_RUNNING: &str = "reactor_job_running";
/// Active process instances, by process.
pub const PROCESSES_ACTIVE: &str = "reactor_processes_active";
/// Dead letters whose record was cut to fit the producer's limit.
pub const DEAD_LETTERS_TRUNCATED: &str = "reactor_dead_letters_truncated_total";
/// Outputs larger than the producer's limit, sent as dead letters instead.
pub const OUTPUTS_OVERSIZE: &str = "reactor_outputs_oversize_total";
/// CTL dead letters not reported: more waited for an unowned shard than kept.
pub const CTL_DEAD_LETTERS_DROPPED: &str = "reactor_ctl_dead_letters_dropped_total";
/// Open admin API connections.
pub const ADMIN_CONNECTIONS: &str = "reactor_admin_connections";
/// Admin API connections closed to make room, by `why` (`evicted`, `refused`).
pub const ADMIN_CONNECTIONS_CLOSED: &str = "reactor_admin_connections_closed_total";

/// Items a recovery restarted, by `kind` (task, stage, process) and `mode`.
pub const RECOVERED: &str = "reactor_recovered_total";
/// Items a recovery in progress has yet to walk on a shard, by `op` and
/// `partition` (0 once it finished): a value that stops falling is a stuck
/// operation.
pub const RECOVERY_REMAINING: &str = "reactor_recovery_remaining";
/// Operations answered by a shard, by `op` kind (`search`, `dry_run`, `recover`).
pub const OPERATIONS: &str = "reactor_operations_total";

/// Histogram bucket bounds in seconds: from a fast commit to a slow restore.
pub const BUCKETS: [f64; 15] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Why metrics could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The exporter refused its configuration, or another global recorder
    /// was installed first.
    #[error("cannot install the Prometheus recorder: {0}")]
    Install(#[from] BuildError),
}

impl Error {
    /// A recorder slot taken by someone else stays taken.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// Registers the description and unit of every metric.
pub fn describe() {
    describe_counter!(
        RECOVERED,
        Unit::Count,
        "Items restarted by operator recoveries, by kind (task, stage, process) and mode."
    );
    describe_gauge!(
        RECOVERY_REMAINING,
        Unit::Count,
        "Items a recovery has yet to restart on a shard, by op and partition (0 when it finished)."
    );
    describe_counter!(
        OPERATIONS,
        Unit::Count,
        "Operations a shard answered or started, by kind (search, dry_run, recover)."
    );
    describe_counter!(
        PROCESSES_STARTED,
        Unit::Count,
        "Process instances started, by process."
    );
    describe_counter!(
        PROCESSES_ENDED,
        Unit::Count,
        "Process instances ended, by process and outcome (succeeded, failed, cancelled, timed_out)."
    );
    describe_counter!(
        PROCESSES_IDLE,
        Unit::Count,
        "Instances with no step progress for idle_timeout, by process."
    );
    describe_counter!(
        LAUNCHES_REJECTED,
        Unit::Count,
        "Launches refused, by process and reason (active, reuse, validation)."
    );
    describe_counter!(
        LAUNCHES_QUEUED,
        Unit::Count,
        "Launches waiting behind the key's active instance, by process."
    );
    describe_counter!(
        DEADLINES_EXCEEDED,
        Unit::Count,
        "Steps failed for good by their job's deadline, by job."
    );
    describe_gauge!(
        JOB_QUEUED,
        Unit::Count,
        "Steps waiting in a job's queue on the shards of this instance, by job and lane."
    );
    describe_gauge!(
        JOB_RUNNING,
        Unit::Count,
        "Steps of a job in flight on the shards of this instance, by job."
    );
    describe_gauge!(
        PROCESSES_ACTIVE,
        Unit::Count,
        "Active process instances on the shards of this instance, by process."
    );
    describe_counter!(
        ENGINE_FAILURES,
        Unit::Count,
        "Inputs on which a shard broke an internal invariant (a bug): dead-lettered, shard rebuilt."
    );
    describe_counter!(
        EVENTS_CONSUMED,
        Unit::Count,
        "Records read from input topics, by topic."
    );
    describe_counter!(TRIGGERS_EVALUATED, Unit::Count, "Trigger evaluations.");
    describe_counter!(
        TRIGGERS_FIRED,
        Unit::Count,
        "Trigger evaluations that queued a task."
    );
    describe_counter!(
        RUNS_DISPATCHED,
        Unit::Count,
        "Run commands sent to workers, by kind (and stage)."
    );
    describe_counter!(
        RUNS_SUCCEEDED,
        Unit::Count,
        "Runs whose success was applied, by kind (and stage)."
    );
    describe_counter!(
        RUNS_FAILED,
        Unit::Count,
        "Failed attempts, by kind (and stage) and what follows (backoff, parked, dead)."
    );
    describe_counter!(
        RUNS_TIMED_OUT,
        Unit::Count,
        "Passes without a result before their deadline, by kind (and stage)."
    );
    describe_counter!(
        RESULTS_REJECTED,
        Unit::Count,
        "Run results not applied, by kind and reason."
    );
    describe_counter!(
        COMMANDS_REJECTED,
        Unit::Count,
        "Operator commands not applied, by kind."
    );
    describe_counter!(
        OFFER_CHANGES_COMMITTED,
        Unit::Count,
        "Offer changes committed, by cause (external, stage, command, deleted)."
    );
    describe_counter!(
        STALE_VERSIONS,
        Unit::Count,
        "Stage results computed from an old offer version (discarded and re-run), by stage."
    );
    describe_counter!(
        PREDICATE_ERRORS,
        Unit::Count,
        "Stage expressions that failed to evaluate, by stage and field."
    );
    describe_counter!(
        PREDICATES_EVALUATED,
        Unit::Count,
        "Stage when predicates evaluated."
    );
    describe_counter!(
        PING_PONG,
        Unit::Count,
        "Offers parked by the ping-pong guard, by stage."
    );
    describe_counter!(
        STAGE_STATE_SETS,
        Unit::Count,
        "Stage state compare-and-set commands, by applied."
    );
    describe_gauge!(
        RESCAN_CHECKED,
        Unit::Count,
        "Offers the stage's current rescan has checked, by stage and partition."
    );
    describe_gauge!(
        RESCAN_QUEUED,
        Unit::Count,
        "Offers the stage's current rescan has queued, by stage and partition."
    );
    describe_gauge!(
        RESCAN_TOTAL,
        Unit::Count,
        "Offers in the partition when the stage's rescan started, by stage and partition."
    );
    describe_gauge!(
        STAGE_QUEUED,
        Unit::Count,
        "Stage queue entries ready to dispatch, by stage and lane."
    );
    describe_gauge!(
        STAGE_RUNNING,
        Unit::Count,
        "Stage runs in flight, by stage."
    );
    describe_gauge!(OFFERS, Unit::Count, "Offers held by this instance.");
    describe_counter!(
        SLA_MISSED,
        Unit::Count,
        "Tasks without a success within expect_every."
    );
    describe_counter!(
        CTL_MOVED_BACK,
        Unit::Count,
        "CTL values that moved backwards."
    );
    describe_gauge!(POOL_QUEUED, Unit::Count, "Tasks queued, by pool.");
    describe_gauge!(POOL_RUNNING, Unit::Count, "Runs in flight, by pool.");
    describe_gauge!(
        TASKS,
        Unit::Count,
        "Tasks owned by this instance, by state."
    );
    // Described for the table, though rendered by `TaskAges`: the recorder
    // prints a description only beside series of its own.
    describe_gauge!(
        TASK_SECONDS_SINCE_SUCCESS,
        Unit::Seconds,
        TASK_SECONDS_SINCE_SUCCESS_HELP
    );
    describe_histogram!(
        DISPATCH_LATENCY,
        Unit::Seconds,
        "From the input record that caused a dispatch to the dispatch, by kind."
    );
    describe_histogram!(
        TRANSACTION_COMMIT,
        Unit::Seconds,
        "Time to commit one Kafka transaction."
    );
    describe_counter!(
        TRANSACTIONS_COMMITTED,
        Unit::Count,
        "Kafka transactions committed."
    );
    describe_counter!(
        TRANSACTIONS_ABORTED,
        Unit::Count,
        "Kafka transactions aborted, by retryable."
    );
    describe_histogram!(
        RESTORE,
        Unit::Seconds,
        "Time to restore one shard from its changelog."
    );
    describe_counter!(
        RECORDS_RESTORED,
        Unit::Count,
        "Changelog records read while restoring."
    );
    describe_counter!(
        SHARDS_RESUMED,
        Unit::Count,
        "Shards given back to this instance and resumed from memory: nothing was written to their changelog since it gave them up."
    );
    describe_counter!(
        DEAD_LETTERS,
        Unit::Count,
        "Records sent to reactor.dead, by source topic."
    );
    describe_counter!(
        REBALANCES,
        Unit::Count,
        "Consumer group rebalances, by kind."
    );
    describe_gauge!(SHARDS_OWNED, Unit::Count, "Shards this instance owns.");
    describe_gauge!(READY, "1 when the instance is ready, 0 otherwise.");
    describe_counter!(
        BROKER_UNAVAILABLE,
        Unit::Count,
        "Times the broker could not be reached."
    );
    describe_counter!(
        DEAD_LETTERS_TRUNCATED,
        Unit::Count,
        "Dead letters whose record was cut to fit the producer's limit."
    );
    describe_counter!(
        OUTPUTS_OVERSIZE,
        Unit::Count,
        "Outputs larger than the producer's limit, sent as dead letters instead, by topic."
    );
    describe_counter!(
        CTL_DEAD_LETTERS_DROPPED,
        Unit::Count,
        "CTL dead letters not reported: more waited for an unowned shard than kept."
    );
    describe_gauge!(
        ADMIN_CONNECTIONS,
        Unit::Count,
        "Open admin API connections."
    );
    describe_counter!(
        ADMIN_CONNECTIONS_CLOSED,
        Unit::Count,
        "Admin API connections closed to make room, by why (evicted, refused)."
    );
}

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
// Serialises installation: the global recorder can be set only once, and a
// second caller must wait for the first's handle rather than fail.
static INSTALLING: Mutex<()> = Mutex::new(());

/// Installs the global Prometheus recorder and describes every metric.
///
/// Idempotent: later calls (tests start several runtimes in one process)
/// return a clone of the first handle. The recorder runs no upkeep task of
/// its own; [`crate::admin::serve`] runs it.
pub fn install() -> Result<PrometheusHandle, Error> {
    if let Some(handle) = HANDLE.get() {
        return Ok(handle.clone());
    }
    let _guard = INSTALLING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(handle) = HANDLE.get() {
        return Ok(handle.clone());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets(&BUCKETS)?
        .install_recorder()?;
    describe();
    Ok(HANDLE.get_or_init(|| handle).clone())
}

mod events;
mod record;
mod task_ages;
#[cfg(test)]
mod tests;
mod throttle;

pub use events::*;
pub use record::*;
pub use task_ages::*;
pub use throttle::flush_held_lines;
