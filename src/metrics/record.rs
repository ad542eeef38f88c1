//! Recording what the engine returned: dispatches, results, successes,
//! latencies, and the gauges of tasks, pools, stages, offers and jobs.

use super::*;

/// `kind` label of task runs.
const TASK: &str = "task";
/// `kind` label of stage runs.
const STAGE: &str = "stage";
/// `kind` label of process steps and submitted jobs.
const JOB: &str = "job";
/// The label naming a job type. Not `job`: Prometheus gives every scraped
/// series a `job` label (the scrape job) and would rename ours.
const JOB_LABEL: &str = "job_type";

/// Handles of the metrics a shard records at every step whatever its work,
/// resolved once: `counter!` and `histogram!` build their key and look it
/// up in the recorder at every call, which was a tenth of the runtime
/// thread under load. Resolved against the recorder installed when made
/// (`reactor run` installs it before any shard exists).
///
/// Counters labelled by a name (a configured stage, job or process, or an
/// offer change's cause: bounded sets) are made on first use and kept.
#[derive(Debug, Clone)]
pub struct Handles {
    /// Task runs dispatched.
    task_runs: Counter,
    /// Input → dispatch latency of task runs, stage runs and steps.
    dispatch_latency: [Histogram; 3],
    /// Task runs succeeded.
    task_successes: Counter,
    /// Stage runs dispatched, by stage.
    stage_runs: ByName<Counter>,
    /// Steps dispatched, by job.
    job_runs: ByName<Counter>,
    /// Stage runs succeeded, by stage.
    stage_successes: ByName<Counter>,
    /// Steps succeeded, by process.
    step_successes: ByName<Counter>,
    /// Offer changes committed, by cause.
    offer_changes: ByName<Counter>,
    /// Process instances started, by process.
    processes_started: ByName<Counter>,
    /// Process instances succeeded, by process.
    processes_succeeded: ByName<Counter>,
}

impl Handles {
    /// The handles, from the recorder installed now.
    pub fn new() -> Handles {
        Handles {
            task_runs: counter!(RUNS_DISPATCHED, "kind" => TASK),
            dispatch_latency: [TASK, STAGE, JOB]
                .map(|kind| histogram!(DISPATCH_LATENCY, "kind" => kind)),
            task_successes: counter!(RUNS_SUCCEEDED, "kind" => TASK),
            stage_runs: ByName::default(),
            job_runs: ByName::default(),
            stage_successes: ByName::default(),
            step_successes: ByName::default(),
            offer_changes: ByName::default(),
            processes_started: ByName::default(),
            processes_succeeded: ByName::default(),
        }
    }
}

impl Default for Handles {
    fn default() -> Self {
        Handles::new()
    }
}

/// Adds one to the counter of `name` in `counters`, made by `make` the
/// first time.
fn bump(counters: &mut ByName<Counter>, name: &str, make: impl FnOnce(String) -> Counter) {
    if let Some(counter) = counters.get(name) {
        counter.increment(1);
        return;
    }
    let counter = make(name.to_string());
    counter.increment(1);
    counters.insert(name.to_string(), counter);
}

/// Counts what a batch of engine actions of shard `partition` contains:
/// dispatches, committed offer changes and each kind of event.
///
/// Successes leave no action behind; count them with [`record_result`].
/// Each `CtlMovedBack` event names one affected task; a move is counted once
/// per batch, however many tasks it touched.
pub fn record_actions(handles: &mut Handles, partition: i32, actions: &[Action]) {
    let mut moved_back = HashSet::new();
    for action in actions {
        let event = match action {
            Action::Run(_) => {
                handles.task_runs.increment(1);
                continue;
            }
            Action::StageRun(run) => {
                bump(
                    &mut handles.stage_runs,
                    &run.stage,
                    |stage| counter!(RUNS_DISPATCHED, "kind" => STAGE, "stage" => stage),
                );
                continue;
            }
            Action::StepRun(run) => {
                bump(
                    &mut handles.job_runs,
                    &run.job,
                    |job| counter!(RUNS_DISPATCHED, "kind" => JOB, JOB_LABEL => job),
                );
                continue;
            }
            Action::OfferState(state) => {
                bump(
                    &mut handles.offer_changes,
                    cause_kind(state),
                    |cause| counter!(OFFER_CHANGES_COMMITTED, "cause" => cause),
                );
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
            Event::ProcessStarted {
                subject: Subject::Process { process, .. },
                ..
            } => bump(&mut handles.processes_started, process, |process| {
                counter!(PROCESSES_STARTED, "process" => process)
            }),
            Event::ProcessSucceeded {
                subject: Subject::Process { process, .. },
            } => bump(&mut handles.processes_succeeded, process, |process| {
                counter!(PROCESSES_ENDED, "process" => process, "outcome" => "succeeded")
            }),
            // Their subject is always a process.
            Event::ProcessStarted { .. } | Event::ProcessSucceeded { .. } => {}
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
pub fn record_result(handles: &mut Handles, result: &RunResult, kind: RunKind, actions: &[Action]) {
    if result.status != Status::Succeeded {
        return;
    }
    record_success(handles, kind, &result.run_id, result.pass, actions);
}

/// [`record_result`] for a success of run `run_id`/`pass` of `kind`.
pub fn record_success(
    handles: &mut Handles,
    kind: RunKind,
    run_id: &str,
    pass: u64,
    actions: &[Action],
) {
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
    let name = run_id.split_once('/').map_or("", |(name, _)| name);
    match kind {
        RunKind::Task => handles.task_successes.increment(1),
        RunKind::Stage => bump(
            &mut handles.stage_successes,
            name,
            |stage| counter!(RUNS_SUCCEEDED, "kind" => STAGE, "stage" => stage),
        ),
        RunKind::Step => bump(
            &mut handles.step_successes,
            name,
            |process| counter!(RUNS_SUCCEEDED, "kind" => JOB, "process" => process),
        ),
    }
}

/// Records, for each dispatch in `actions`, the latency from `caused_at`
/// (the timestamp of the input record the actions answer) to `now`.
pub fn record_dispatch_latency(
    handles: &Handles,
    actions: &[Action],
    caused_at: Timestamp,
    now: Timestamp,
) {
    let seconds = now.duration_since(caused_at).as_secs_f64().max(0.0);
    let [task, stage, job] = &handles.dispatch_latency;
    for action in actions {
        match action {
            Action::Run(_) => task.record(seconds),
            Action::StageRun(_) => stage.record(seconds),
            Action::StepRun(_) => job.record(seconds),
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

/// The per-state task counts and the stalest tasks' seconds since their
/// last success, counted a part at a time: the stalest are kept as they
/// are added, the per-state gauges set and the stalest published once the
/// last part is in (an instance of millions of tasks walks them over
/// several commits, not in one pause of its shards).
#[derive(Debug, Default)]
pub struct TaskHealth {
    /// Tasks counted per state, in [`TaskState`]'s order.
    counts: Vec<usize>,
    /// The stalest tasks that ever succeeded.
    stalest: Stalest,
}

impl TaskHealth {
    /// Counts nothing yet; keeps at most `ages`' limit of stalest tasks.
    pub fn new(ages: &TaskAges) -> TaskHealth {
        TaskHealth {
            counts: Vec::new(),
            stalest: Stalest::new(ages.limit()),
        }
    }

    /// Counts `tasks` by state and weighs the staleness of each that
    /// succeeded, at `now`.
    pub fn add<'a>(
        &mut self,
        tasks: impl IntoIterator<Item = (TaskState, Option<(&'a str, Timestamp)>)>,
        now: Timestamp,
    ) {
        self.counts
            .resize(<TaskState as strum::VariantArray>::VARIANTS.len(), 0);
        for (state, succeeded) in tasks {
            if let Some(n) = slot(state).and_then(|i| self.counts.get_mut(i)) {
                *n += 1;
            }
            if let Some((id, last)) = succeeded {
                self.stalest.offer(id, last, now);
            }
        }
    }

    /// Tasks added in `state`.
    pub fn count(&self, state: TaskState) -> usize {
        slot(state)
            .and_then(|i| self.counts.get(i))
            .copied()
            .unwrap_or(0)
    }

    /// Sets the per-state gauges from every task added and publishes the
    /// stalest to `ages`, replacing what the last pass published.
    pub fn finish(mut self, ages: &TaskAges) {
        let states = <TaskState as strum::VariantArray>::VARIANTS;
        self.counts.resize(states.len(), 0);
        for (&state, &n) in states.iter().zip(&self.counts) {
            gauge!(TASKS, "state" => state.as_str()).set(n as f64);
        }
        ages.publish(self.stalest);
    }
}

/// Where [`TaskHealth`] counts `state`.
fn slot(state: TaskState) -> Option<usize> {
    <TaskState as strum::VariantArray>::VARIANTS
        .iter()
        .position(|s| *s == state)
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
