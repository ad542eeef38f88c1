//! Prometheus metrics: every name and description lives here, so the
//! dashboard in `deploy/` and the code cannot drift apart name by name.
//!
//! Counters end in `_total` and durations in `_seconds` by name (the
//! exporter's unit suffixing stays off, so a name here is the name scraped).
//! Labels are the `as_str()` names of the crate's enums.
//!
//! The engine is pure and counts nothing itself; the shell feeds this module
//! what the engine returned ([`record_actions`], [`record_result`],
//! [`record_engine`], [`record_tasks`], [`record_offer_counters`],
//! [`record_stages`]) and emits the notable events of the
//! I/O side ([`DeadLetter`], [`TransactionAborted`], [`Rebalance`], …), each
//! of which logs and counts in one call.

use std::collections::HashSet;
use std::fmt::Display;
use std::sync::{Mutex, OnceLock, PoisonError};

use jiff::Timestamp;
use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Unit,
};
use metrics_exporter_prometheus::{BuildError, PrometheusBuilder, PrometheusHandle};

use crate::action::{Action, Event, OfferState, Subject};
use crate::engine::{
    JobStats, OfferCounters, PoolStats, RunKind, RunResult, StageStats, Stats, TaskSummary,
};
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
/// Seconds since the last success, per `task`.
pub const TASK_SECONDS_SINCE_SUCCESS: &str = "reactor_task_seconds_since_success";
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
    describe_gauge!(
        TASK_SECONDS_SINCE_SUCCESS,
        Unit::Seconds,
        "Seconds since the task's last success."
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

/// `kind` label of task runs.
const TASK: &str = "task";
/// `kind` label of stage runs.
const STAGE: &str = "stage";
/// `kind` label of process steps and submitted jobs.
const JOB: &str = "job";
/// The label naming a job type. Not `job`: Prometheus gives every scraped
/// series a `job` label (the scrape job) and would rename ours.
const JOB_LABEL: &str = "job_type";

/// Counts what a batch of engine actions of shard `partition` contains:
/// dispatches, committed offer changes and each kind of event.
///
/// Successes leave no action behind; count them with [`record_result`].
/// Each `CtlMovedBack` event names one affected task; a move is counted once
/// per batch, however many tasks it touched.
pub fn record_actions(partition: i32, actions: &[Action]) {
    let mut moved_back = HashSet::new();
    for action in actions {
        let event = match action {
            Action::Run(_) => {
                counter!(RUNS_DISPATCHED, "kind" => TASK).increment(1);
                continue;
            }
            Action::StageRun(run) => {
                counter!(RUNS_DISPATCHED, "kind" => STAGE, "stage" => run.stage.clone())
                    .increment(1);
                continue;
            }
            Action::StepRun(run) => {
                counter!(RUNS_DISPATCHED, "kind" => JOB, JOB_LABEL => run.job.clone()).increment(1);
                continue;
            }
            Action::OfferState(state) => {
                counter!(OFFER_CHANGES_COMMITTED, "cause" => cause_kind(state)).increment(1);
                continue;
            }
            Action::Event(event) => event,
            Action::Changelog(_) => continue,
        };
        match event {
            Event::CtlMovedBack {
                entity,
                param,
                previous,
                value,
                ..
            } => {
                if moved_back.insert((entity, param, previous, value)) {
                    counter!(CTL_MOVED_BACK).increment(1);
                }
            }
            // By kind only: a rejected result may name any stage or job.
            Event::ResultRejected {
                subject, reason, ..
            } => counter!(RESULTS_REJECTED, "kind" => subject.worker_type().0, "reason" => reason.as_str())
                .increment(1),
            Event::RunTimedOut { subject, .. } => run_counter(RUNS_TIMED_OUT, subject, &[]),
            Event::RunFailed { subject, .. } => {
                run_counter(RUNS_FAILED, subject, &[("next", "backoff")]);
            }
            Event::Parked { subject, .. } => {
                run_counter(RUNS_FAILED, subject, &[("next", "parked")]);
            }
            Event::Dead { subject, .. } => run_counter(RUNS_FAILED, subject, &[("next", "dead")]),
            Event::SlaMissed { .. } => counter!(SLA_MISSED).increment(1),
            Event::CommandRejected { subject, .. } => {
                counter!(COMMANDS_REJECTED, "kind" => subject.worker_type().0).increment(1);
            }
            Event::StaleVersion { stage, .. } => {
                counter!(STALE_VERSIONS, "stage" => stage.clone()).increment(1);
            }
            Event::PredicateError { stage, field, .. } => {
                counter!(PREDICATE_ERRORS, "stage" => stage.clone(), "field" => field.clone())
                    .increment(1);
            }
            Event::PingPong {
                offer,
                stage,
                runs,
                until,
                ..
            } => PingPong {
                offer,
                stage,
                runs: *runs,
                until: *until,
            }
            .emit(),
            Event::ProcessStarted { subject, .. } => process_counter(PROCESSES_STARTED, subject, None),
            Event::ProcessSucceeded { subject } => {
                process_counter(PROCESSES_ENDED, subject, Some("succeeded"));
            }
            Event::ProcessFailed { subject, .. } => {
                process_counter(PROCESSES_ENDED, subject, Some("failed"));
            }
            Event::ProcessCancelled { subject, .. } => {
                process_counter(PROCESSES_ENDED, subject, Some("cancelled"));
            }
            Event::ProcessTimedOut { subject } => {
                process_counter(PROCESSES_ENDED, subject, Some("timed_out"));
            }
            Event::ProcessIdle { subject, .. } => process_counter(PROCESSES_IDLE, subject, None),
            Event::LaunchRejected { subject, reason, .. } => {
                let process = match subject {
                    Subject::Process { process, .. } => process.clone(),
                    Subject::Task { .. } => "task".to_string(),
                    Subject::Stage { .. } => String::new(),
                };
                counter!(LAUNCHES_REJECTED, "process" => process, "reason" => reason.clone())
                    .increment(1);
            }
            Event::LaunchQueued { subject } => process_counter(LAUNCHES_QUEUED, subject, None),
            Event::DeadlineExceeded { subject, .. } => {
                run_counter(DEADLINES_EXCEEDED, subject, &[]);
            }
            Event::StageState { applied, .. } => {
                let applied = if *applied { "true" } else { "false" };
                counter!(STAGE_STATE_SETS, "applied" => applied).increment(1);
            }
            Event::SearchResult { .. } => {
                counter!(OPERATIONS, "kind" => "search").increment(1);
            }
            Event::RecoveryCounted { .. } => {
                counter!(OPERATIONS, "kind" => "dry_run").increment(1);
            }
            Event::RecoveryProgress {
                op,
                partition: shard,
                done,
                total,
                finished,
                cancelled,
            } => RecoveryProgress {
                op,
                partition: *shard,
                done: *done,
                total: *total,
                finished: *finished,
                cancelled: *cancelled,
            }
            .emit(),
            Event::Recovered { subject, mode, .. } => {
                let kind = match subject {
                    Subject::Task { .. } => "task",
                    Subject::Stage { .. } => "stage",
                    Subject::Process { .. } => "process",
                };
                counter!(RECOVERED, "kind" => kind, "mode" => mode.clone()).increment(1);
            }
            Event::RescanProgress {
                stage,
                checked,
                queued,
                total,
                errors,
                done,
            } => RescanProgress {
                partition,
                stage,
                checked: *checked,
                queued: *queued,
                total: *total,
                errors: *errors,
                done: *done,
            }
            .emit(),
        }
    }
}

/// Counts one event of a process instance on `name`, by process (and
/// `outcome`, for ends). Processes are configured: a bounded label.
fn process_counter(name: &'static str, subject: &Subject, outcome: Option<&'static str>) {
    let Subject::Process { process, .. } = subject else {
        return;
    };
    match outcome {
        Some(outcome) => {
            counter!(name, "process" => process.clone(), "outcome" => outcome).increment(1);
        }
        None => counter!(name, "process" => process.clone()).increment(1),
    }
}

/// Counts one run-lifecycle event of `subject` on `name`, labelled by the
/// worker type: `kind` (`task`, `stage`, `job`) and, for stages and jobs, the
/// stage or job (a bounded set, from the configuration). Tasks are counted
/// by kind only: a deployment may have thousands.
fn run_counter(name: &'static str, subject: &Subject, extra: &[(&'static str, &'static str)]) {
    let (kind, worker) = subject.worker_type();
    let mut labels: Vec<metrics::Label> = vec![metrics::Label::new("kind", kind)];
    match subject {
        Subject::Task { .. } => {}
        Subject::Stage { .. } => labels.push(metrics::Label::new("stage", worker.to_string())),
        Subject::Process { .. } => labels.push(metrics::Label::new(JOB_LABEL, worker.to_string())),
    }
    labels.extend(extra.iter().map(|(k, v)| metrics::Label::new(*k, *v)));
    metrics::counter!(name, labels).increment(1);
}

/// The `cause` label of a committed offer change.
fn cause_kind(state: &OfferState) -> &'static str {
    if state.deleted {
        "deleted"
    } else if state.cause.starts_with("stage:") {
        "stage"
    } else if state.cause == "command" {
        "command"
    } else {
        "external"
    }
}

/// Counts a success: call with a worker's result and the actions the engine
/// returned for it (alongside [`record_actions`], which counts failures).
///
/// A successful result counts unless the engine rejected it, so a late or
/// duplicate success is not counted twice; a stage result computed from an
/// old offer version (`stale_version`: discarded and re-run) does not count
/// either.
pub fn record_result(result: &RunResult, kind: RunKind, actions: &[Action]) {
    if result.status != Status::Succeeded {
        return;
    }
    record_success(kind, &result.run_id, result.pass, actions);
}

/// [`record_result`] for a success of run `run_id`/`pass` of `kind`.
pub fn record_success(kind: RunKind, run_id: &str, pass: u64, actions: &[Action]) {
    let discarded = actions.iter().any(|a| match a {
        Action::Event(Event::ResultRejected {
            run_id: r, pass: q, ..
        }) => r == run_id && *q == pass,
        Action::Event(Event::StaleVersion { run_id: r, .. }) => r == run_id,
        _ => false,
    });
    if discarded {
        return;
    }
    // Accepted, so the stage or process is a configured one: a bounded label.
    let name = run_id
        .split_once('/')
        .map_or("", |(name, _)| name)
        .to_string();
    match kind {
        RunKind::Task => counter!(RUNS_SUCCEEDED, "kind" => TASK).increment(1),
        RunKind::Stage => counter!(RUNS_SUCCEEDED, "kind" => STAGE, "stage" => name).increment(1),
        RunKind::Step => counter!(RUNS_SUCCEEDED, "kind" => JOB, "process" => name).increment(1),
    }
}

/// Records, for each dispatch in `actions`, the latency from `caused_at`
/// (the timestamp of the input record the actions answer) to `now`.
pub fn record_dispatch_latency(actions: &[Action], caused_at: Timestamp, now: Timestamp) {
    let seconds = now.duration_since(caused_at).as_secs_f64().max(0.0);
    for action in actions {
        match action {
            Action::Run(_) => histogram!(DISPATCH_LATENCY, "kind" => TASK).record(seconds),
            Action::StageRun(_) => histogram!(DISPATCH_LATENCY, "kind" => STAGE).record(seconds),
            Action::StepRun(_) => histogram!(DISPATCH_LATENCY, "kind" => JOB).record(seconds),
            _ => {}
        }
    }
}

/// Counts `records` read from `topic`.
pub fn record_consumed(topic: &str, records: u64) {
    counter!(EVENTS_CONSUMED, "topic" => topic.to_string()).increment(records);
}

/// Exports one shard's evaluation counters and pool gauges.
///
/// The engine's [`Stats`] count from its construction, while counters here
/// live as long as the process; `previous` holds what was already exported
/// and is advanced to `now`. Reset it to `Stats::default()` when the shard's
/// engine is rebuilt (restore after a rebalance). Pools are partitioned by
/// shard, so each pool's gauges have one writer.
pub fn record_engine(previous: &mut Stats, now: Stats, pools: &[PoolStats]) {
    counter!(TRIGGERS_EVALUATED).increment(now.evaluated.saturating_sub(previous.evaluated));
    counter!(TRIGGERS_FIRED).increment(now.fired.saturating_sub(previous.fired));
    *previous = now;
    for p in pools {
        gauge!(POOL_QUEUED, "pool" => p.pool.clone()).set(p.queued as f64);
        gauge!(POOL_RUNNING, "pool" => p.pool.clone()).set(f64::from(p.running));
    }
}

/// Exports the per-state task counts and each task's seconds since its last
/// success, at `now`.
///
/// Pass every task this instance owns in one call: the state gauges are
/// instance totals. A task never successful has no age gauge. Gauges of tasks
/// whose shard moved away keep their last value (the exporter cannot drop a
/// label set); the owning instance exports the live one.
pub fn record_tasks(tasks: &[TaskSummary], now: Timestamp) {
    record_task_health(
        tasks
            .iter()
            .map(|t| (t.state, t.last_success.map(|at| (t.id.as_str(), at)))),
        now,
    );
}

/// [`record_tasks`] from the state of every task and, for one that
/// succeeded, its id and last success.
pub fn record_task_health<'a>(
    tasks: impl IntoIterator<Item = (TaskState, Option<(&'a str, Timestamp)>)>,
    now: Timestamp,
) {
    let states = <TaskState as strum::VariantArray>::VARIANTS;
    let mut counts = vec![0usize; states.len()];
    for (state, succeeded) in tasks {
        if let Some(n) = states
            .iter()
            .position(|s| *s == state)
            .and_then(|i| counts.get_mut(i))
        {
            *n += 1;
        }
        if let Some((id, last)) = succeeded {
            let age = now.duration_since(last).as_secs_f64().max(0.0);
            gauge!(TASK_SECONDS_SINCE_SUCCESS, "task" => id.to_string()).set(age);
        }
    }
    for (&state, n) in states.iter().zip(counts) {
        gauge!(TASKS, "state" => state.as_str()).set(n as f64);
    }
}

/// Exports one shard's offer counters (as [`record_engine`] does for the
/// tasks: `previous` holds what was already exported and is advanced to `now`).
pub fn record_offer_counters(previous: &mut OfferCounters, now: OfferCounters) {
    counter!(PREDICATES_EVALUATED).increment(now.evaluated.saturating_sub(previous.evaluated));
    *previous = now;
}

/// Exports each stage's queue depths and running runs, and the offers held.
///
/// Pass the figures of every shard this instance owns in one call: stages
/// live on every shard, so the gauges are instance totals (sum over
/// instances in queries).
pub fn record_stages(shards: &[Vec<StageStats>], offers: usize) {
    let mut totals: Vec<StageStats> = Vec::new();
    for stats in shards.iter().flatten() {
        match totals.iter_mut().find(|t| t.stage == stats.stage) {
            Some(t) => {
                t.live += stats.live;
                t.rescan += stats.rescan;
                t.running += stats.running;
            }
            None => totals.push(stats.clone()),
        }
    }
    for t in &totals {
        gauge!(STAGE_QUEUED, "stage" => t.stage.clone(), "lane" => Lane::Live.as_str())
            .set(t.live as f64);
        gauge!(STAGE_QUEUED, "stage" => t.stage.clone(), "lane" => Lane::Rescan.as_str())
            .set(t.rescan as f64);
        gauge!(STAGE_RUNNING, "stage" => t.stage.clone()).set(f64::from(t.running));
    }
    gauge!(OFFERS).set(offers as f64);
}

/// Every job's figures summed over shards (each shard lists every job).
pub fn sum_jobs(shards: &[Vec<JobStats>]) -> Vec<JobStats> {
    let mut totals: Vec<JobStats> = Vec::new();
    for stats in shards.iter().flatten() {
        match totals.iter_mut().find(|t| t.job == stats.job) {
            Some(t) => {
                t.queued += stats.queued;
                t.queued_low += stats.queued_low;
                t.running += stats.running;
                t.share = match (t.share, stats.share) {
                    (Some(a), Some(b)) => Some(a + b),
                    _ => None,
                };
            }
            None => totals.push(stats.clone()),
        }
    }
    totals
}

/// Exports job queue depths (by lane) and running steps, and active
/// instances per process, summed over the owned shards.
pub fn record_jobs(shards: &[Vec<JobStats>], active: &[Vec<(String, usize)>]) {
    for t in sum_jobs(shards) {
        gauge!(JOB_QUEUED, JOB_LABEL => t.job.clone(), "lane" => "live").set(t.queued as f64);
        gauge!(JOB_QUEUED, JOB_LABEL => t.job.clone(), "lane" => "low").set(t.queued_low as f64);
        gauge!(JOB_RUNNING, JOB_LABEL => t.job.clone()).set(f64::from(t.running));
    }
    let mut totals: Vec<(String, usize)> = Vec::new();
    for (process, n) in active.iter().flatten() {
        match totals.iter_mut().find(|(p, _)| p == process) {
            Some((_, total)) => *total += n,
            None => totals.push((process.clone(), *n)),
        }
    }
    for (process, n) in totals {
        gauge!(PROCESSES_ACTIVE, "process" => process).set(n as f64);
    }
}

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
    /// Logs an error and counts it.
    pub fn emit(&self) {
        tracing::error!(
            topic = self.topic,
            size = self.size,
            limit = self.limit,
            "an output is larger than the producer accepts; sent to the dead-letter topic instead"
        );
        counter!(OUTPUTS_OVERSIZE, "topic" => self.topic.to_string()).increment(1);
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
    /// Logs a warning and counts it (and a cut one). Emitted when the dead
    /// letter is committed, so a record is counted once however often its
    /// batch is redone.
    pub fn emit(&self) {
        tracing::warn!(
            topic = self.topic,
            partition = self.partition,
            offset = self.offset,
            reason = self.reason,
            truncated = self.truncated,
            "dead letter"
        );
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RebalanceKind {
    /// Partitions given to this instance.
    Assigned,
    /// Partitions taken from this instance.
    Revoked,
}

impl RebalanceKind {
    /// Metric label and log field.
    pub fn as_str(self) -> &'static str {
        match self {
            RebalanceKind::Assigned => "assigned",
            RebalanceKind::Revoked => "revoked",
        }
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::action::RunCommand;
    use crate::run::Rejection;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn run(task: &str) -> Action {
        Action::Run(RunCommand {
            run_id: format!("{task}#1"),
            attempt: 1,
            pass: 1,
            snapshot: Default::default(),
            params: BTreeMap::new(),
            deadline: ts("2024-01-01T01:00:00Z"),
            key: "default".into(),
            topic: None,
            source: None,
        })
    }

    fn moved_back(task: &str) -> Action {
        Action::Event(Event::CtlMovedBack {
            task: task.to_string(),
            entity: "metrics_test".to_string(),
            param: "p".to_string(),
            previous: ts("2024-01-01T00:00:00Z"),
            value: ts("2023-12-31T00:00:00Z"),
        })
    }

    /// The value of the sample line starting with `series ` (name and labels).
    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .map(|v| v.trim().parse().unwrap())
    }

    #[test]
    fn install_is_idempotent() {
        let a = install().unwrap();
        let b = install().unwrap();
        counter!(DEAD_LETTERS, "topic" => "metrics_test_idempotent").increment(1);
        let series = format!("{DEAD_LETTERS}{{topic=\"metrics_test_idempotent\"}}");
        assert_eq!(sample(&a.render(), &series), Some(1.0));
        assert_eq!(sample(&b.render(), &series), Some(1.0));
    }

    #[test]
    fn records_and_renders() {
        let handle = install().unwrap();
        let rejected = Action::Event(Event::ResultRejected {
            subject: Subject::task("a"),
            run_id: "a#1".to_string(),
            pass: 1,
            reason: Rejection::StalePass,
        });
        let actions = [
            run("a"),
            moved_back("a"),
            moved_back("b"),
            rejected,
            Action::Event(Event::Dead {
                subject: Subject::task("a"),
                attempts: 3,
                error: "boom".to_string(),
            }),
        ];
        record_actions(0, &actions);
        record_result(
            &RunResult {
                step: Default::default(),
                stage: Default::default(),
                run_id: "a#1".to_string(),
                pass: 1,
                status: Status::Succeeded,
                error: None,
            },
            RunKind::Task,
            &actions,
        );
        record_dispatch_latency(
            &actions,
            ts("2024-01-01T00:00:00Z"),
            ts("2024-01-01T00:00:02Z"),
        );
        record_consumed("metrics_test_topic", 3);
        let mut previous = Stats::default();
        record_engine(
            &mut previous,
            Stats {
                evaluated: 5,
                fired: 2,
            },
            &[PoolStats {
                pool: "metrics_test_pool".to_string(),
                queued: 4,
                running: 1,
            }],
        );
        assert_eq!(previous.evaluated, 5);
        let summary = TaskSummary {
            id: "metrics_test_task".to_string(),
            pool: "default".to_string(),
            state: TaskState::Idle,
            since: None,
            failures: 0,
            last_success: Some(ts("2024-01-01T00:00:00Z")),
        };
        record_tasks(&[summary], ts("2024-01-01T00:01:30Z"));
        DeadLetter {
            topic: "metrics_test_dead",
            partition: 0,
            offset: 7,
            reason: "bad json",
            truncated: true,
        }
        .emit();
        TransactionCommitted {
            records: 3,
            seconds: 0.004,
        }
        .emit();
        TransactionAborted {
            reason: &"fenced",
            retryable: true,
        }
        .emit();
        Rebalance {
            kind: RebalanceKind::Assigned,
            partitions: &[0, 1],
            owned: 2,
        }
        .emit();
        ShardRestored {
            partition: 0,
            records: 10,
            seconds: 0.5,
            resumed: true,
        }
        .emit();
        BrokerUnavailable {
            error: &"all brokers down",
        }
        .emit();
        ReadinessChanged {
            ready: true,
            reason: None,
        }
        .emit();

        let text = handle.render();
        for needle in [
            "# HELP reactor_runs_dispatched_total Run commands sent to workers, by kind (and stage).",
            "# TYPE reactor_dispatch_latency_seconds histogram",
            "reactor_dispatch_latency_seconds_bucket{kind=\"task\",le=\"2.5\"}",
            "reactor_results_rejected_total{kind=\"task\",reason=\"stale_pass\"}",
            "reactor_runs_failed_total{kind=\"task\",next=\"dead\"}",
            "reactor_ctl_moved_back_total",
            "reactor_transaction_commit_seconds_bucket{le=\"0.005\"}",
            "reactor_restore_seconds_count",
            "reactor_records_restored_total",
            "reactor_transactions_aborted_total{retryable=\"true\"}",
            "reactor_rebalances_total{kind=\"assigned\"}",
            "reactor_broker_unavailable_total",
            "reactor_triggers_evaluated_total",
            "reactor_triggers_fired_total",
            "reactor_tasks{state=\"idle\"}",
        ] {
            assert!(text.contains(needle), "{needle} missing from\n{text}");
        }
        let check = |series: &str, value: f64| {
            assert_eq!(sample(&text, series), Some(value), "{series} in\n{text}");
        };
        check(
            "reactor_events_consumed_total{topic=\"metrics_test_topic\"}",
            3.0,
        );
        check(
            "reactor_dead_letters_total{topic=\"metrics_test_dead\"}",
            1.0,
        );
        check("reactor_pool_queued{pool=\"metrics_test_pool\"}", 4.0);
        check("reactor_pool_running{pool=\"metrics_test_pool\"}", 1.0);
        check(
            "reactor_task_seconds_since_success{task=\"metrics_test_task\"}",
            90.0,
        );
        check("reactor_shards_owned", 2.0);
        check("reactor_ready", 1.0);
    }

    #[test]
    fn rejected_success_is_not_counted() {
        // Exact counts need a recorder of our own: tests running in parallel
        // add to the global one.
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let result = RunResult {
            step: Default::default(),
            stage: Default::default(),
            run_id: "a#1".to_string(),
            pass: 2,
            status: Status::Succeeded,
            error: None,
        };
        let rejected = [Action::Event(Event::ResultRejected {
            subject: Subject::task("a"),
            run_id: "a#1".to_string(),
            pass: 2,
            reason: Rejection::NotCurrent,
        })];
        metrics::with_local_recorder(&recorder, || {
            record_result(&result, RunKind::Task, &rejected);
            record_result(&result, RunKind::Task, &[]);
            record_actions(0, &[moved_back("a"), moved_back("b"), moved_back("c")]);
        });
        let text = handle.render();
        let succeeded = format!("{RUNS_SUCCEEDED}{{kind=\"task\"}}");
        assert_eq!(sample(&text, &succeeded), Some(1.0), "{text}");
        assert_eq!(sample(&text, CTL_MOVED_BACK), Some(1.0), "{text}");
    }

    fn stage_result(pass: u64) -> RunResult {
        RunResult {
            step: Default::default(),
            stage: Default::default(),
            run_id: "price/o1#1".to_string(),
            pass,
            status: Status::Succeeded,
            error: None,
        }
    }

    fn offer_state(cause: &str, deleted: bool) -> Action {
        Action::OfferState(OfferState {
            offer: "o1".to_string(),
            version: 2,
            body: Default::default(),
            cause: cause.to_string(),
            changed_fields: Vec::new(),
            states: BTreeMap::new(),
            deleted,
        })
    }

    #[test]
    fn stage_actions_and_results() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let stage_run = Action::StageRun(crate::action::StageRunCommand {
            stage: "price".to_string(),
            offer: "o1".to_string(),
            run_id: "price/o1#1".to_string(),
            attempt: 1,
            pass: 1,
            version: 1,
            body: Default::default(),
            state: None,
            deadline: ts("2024-01-01T01:00:00Z"),
            topic: "stage.price.runs".to_string(),
            source: None,
        });
        let stale = Action::Event(Event::StaleVersion {
            stage: "price".to_string(),
            offer: "o1".to_string(),
            run_id: "price/o1#1".to_string(),
            computed_from: 1,
            current: 2,
        });
        let rejected = Action::Event(Event::ResultRejected {
            subject: Subject::stage("price", "o1"),
            run_id: "price/o1#1".to_string(),
            pass: 3,
            reason: Rejection::StalePass,
        });
        let events = [
            Event::PredicateError {
                stage: "price".to_string(),
                offer: "o1".to_string(),
                field: "when".to_string(),
                error: "no such key".to_string(),
            },
            Event::PingPong {
                offer: "o1".to_string(),
                stage: "price".to_string(),
                runs: 20,
                window: crate::duration::Duration::from_secs(60),
                until: ts("2024-01-01T01:00:00Z"),
            },
            Event::RunTimedOut {
                subject: Subject::stage("price", "o1"),
                run_id: "price/o1#1".to_string(),
                attempt: 1,
                restarted: true,
            },
            Event::Dead {
                subject: Subject::stage("price", "o1"),
                attempts: 3,
                error: "boom".to_string(),
            },
            Event::RescanProgress {
                stage: "price".to_string(),
                checked: 7,
                queued: 3,
                total: 9,
                errors: 0,
                done: false,
            },
            Event::StageState {
                stage: "price".to_string(),
                offer: "o1".to_string(),
                expected: 1,
                version: 2,
                applied: true,
            },
            Event::CommandRejected {
                subject: Subject::stage("nope", ""),
                reason: "unknown stage".to_string(),
            },
        ];
        metrics::with_local_recorder(&recorder, || {
            let mut actions = vec![
                stage_run.clone(),
                stale.clone(),
                rejected.clone(),
                offer_state("external", false),
                offer_state("stage:price", false),
                offer_state("command", false),
                offer_state("external", true),
            ];
            actions.extend(events.iter().cloned().map(Action::Event));
            record_actions(3, &actions);
            // Discarded (stale version) and rejected results are no successes.
            record_result(&stage_result(1), RunKind::Stage, &[stale]);
            record_result(&stage_result(3), RunKind::Stage, &[rejected]);
            record_result(&stage_result(2), RunKind::Stage, &[]);
            record_dispatch_latency(
                &[stage_run],
                ts("2024-01-01T00:00:00Z"),
                ts("2024-01-01T00:00:01Z"),
            );
            record_stages(
                &[
                    vec![StageStats {
                        stage: "price".to_string(),
                        live: 2,
                        rescan: 5,
                        running: 1,
                        share: 4,
                    }],
                    vec![StageStats {
                        stage: "price".to_string(),
                        live: 1,
                        rescan: 0,
                        running: 3,
                        share: 4,
                    }],
                ],
                11,
            );
            let mut previous = OfferCounters::default();
            record_offer_counters(
                &mut previous,
                OfferCounters {
                    committed: 4,
                    evaluated: 6,
                    predicate_errors: 1,
                },
            );
        });
        let text = handle.render();
        let check = |series: &str, value: f64| {
            assert_eq!(sample(&text, series), Some(value), "{series} in\n{text}");
        };
        check(
            "reactor_runs_dispatched_total{kind=\"stage\",stage=\"price\"}",
            1.0,
        );
        check(
            "reactor_runs_succeeded_total{kind=\"stage\",stage=\"price\"}",
            1.0,
        );
        check(
            "reactor_runs_timed_out_total{kind=\"stage\",stage=\"price\"}",
            1.0,
        );
        check(
            "reactor_runs_failed_total{kind=\"stage\",stage=\"price\",next=\"dead\"}",
            1.0,
        );
        check(
            "reactor_results_rejected_total{kind=\"stage\",reason=\"stale_pass\"}",
            1.0,
        );
        for cause in ["external", "stage", "command", "deleted"] {
            check(
                &format!("reactor_offer_changes_committed_total{{cause=\"{cause}\"}}"),
                1.0,
            );
        }
        check("reactor_stale_versions_total{stage=\"price\"}", 1.0);
        check(
            "reactor_predicate_errors_total{stage=\"price\",field=\"when\"}",
            1.0,
        );
        check("reactor_ping_pong_total{stage=\"price\"}", 1.0);
        check("reactor_stage_state_sets_total{applied=\"true\"}", 1.0);
        check("reactor_commands_rejected_total{kind=\"stage\"}", 1.0);
        check(
            "reactor_rescan_checked{stage=\"price\",partition=\"3\"}",
            7.0,
        );
        check(
            "reactor_rescan_queued{stage=\"price\",partition=\"3\"}",
            3.0,
        );
        check("reactor_rescan_total{stage=\"price\",partition=\"3\"}", 9.0);
        check("reactor_stage_queued{stage=\"price\",lane=\"live\"}", 3.0);
        check("reactor_stage_queued{stage=\"price\",lane=\"rescan\"}", 5.0);
        check("reactor_stage_running{stage=\"price\"}", 4.0);
        check("reactor_offers", 11.0);
        check("reactor_predicates_evaluated_total", 6.0);
        check(
            "reactor_dispatch_latency_seconds_count{kind=\"stage\"}",
            1.0,
        );
    }
}
