use std::collections::BTreeMap;

use super::*;
use crate::action::RunCommand;
use crate::run::Rejection;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn run(task: &str) -> Action {
    Action::Run(RunCommand {
        run_id: format!("{task}#1").into(),
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
        run_id: "a#1".into(),
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
    record_actions(&mut Handles::new(), 0, &actions);
    record_result(
        &mut Handles::new(),
        &RunResult {
            step: Default::default(),
            stage: Default::default(),
            run_id: "a#1".into(),
            pass: 1,
            status: Status::Succeeded,
            error: None,
        },
        RunKind::Task,
        &actions,
    );
    record_dispatch_latency(
        &Handles::new(),
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
    // A health pass: the per-state gauges through the recorder, the ages
    // of the stalest tasks published for `/metrics` to render.
    let ages = TaskAges::new(10);
    let mut health = TaskHealth::new(&ages);
    health.add(
        [
            (
                TaskState::Idle,
                Some(("metrics_test_task", ts("2024-01-01T00:00:00Z"))),
            ),
            (TaskState::Idle, None),
        ],
        ts("2024-01-01T00:01:30Z"),
    );
    assert_eq!(health.count(TaskState::Idle), 2);
    health.finish(&ages);
    assert_eq!(ages.published(), [("metrics_test_task".to_string(), 90.0)]);
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
        run_id: "a#1".into(),
        pass: 2,
        status: Status::Succeeded,
        error: None,
    };
    let rejected = [Action::Event(Event::ResultRejected {
        subject: Subject::task("a"),
        run_id: "a#1".into(),
        pass: 2,
        reason: Rejection::NotCurrent,
    })];
    metrics::with_local_recorder(&recorder, || {
        record_result(&mut Handles::new(), &result, RunKind::Task, &rejected);
        record_result(&mut Handles::new(), &result, RunKind::Task, &[]);
        record_actions(
            &mut Handles::new(),
            0,
            &[moved_back("a"), moved_back("b"), moved_back("c")],
        );
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
        run_id: "price/o1#1".into(),
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
        run_id: "price/o1#1".into(),
        attempt: 1,
        pass: 1,
        version: 1,
        body: Default::default(),
        state: None,
        deadline: ts("2024-01-01T01:00:00Z"),
        topic: "stage.price.runs".into(),
        source: None,
    });
    let stale = Action::Event(Event::StaleVersion {
        stage: "price".to_string(),
        offer: "o1".to_string(),
        run_id: "price/o1#1".into(),
        computed_from: 1,
        current: 2,
    });
    let rejected = Action::Event(Event::ResultRejected {
        subject: Subject::stage("price", "o1"),
        run_id: "price/o1#1".into(),
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
            run_id: "price/o1#1".into(),
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
        record_actions(&mut Handles::new(), 3, &actions);
        // Discarded (stale version) and rejected results are no successes.
        record_result(
            &mut Handles::new(),
            &stage_result(1),
            RunKind::Stage,
            &[stale],
        );
        record_result(
            &mut Handles::new(),
            &stage_result(3),
            RunKind::Stage,
            &[rejected],
        );
        record_result(&mut Handles::new(), &stage_result(2), RunKind::Stage, &[]);
        record_dispatch_latency(
            &Handles::new(),
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

/// A shard's handles count steps by job and instances and their successes
/// by process, each counter made once and added to at every step.
#[test]
fn steps_and_instances_are_counted_by_job_and_process() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let subject = Subject::Process {
        process: "payout".to_string(),
        key: "u1".to_string(),
        instance: Some("payout/u1#1".to_string()),
        job: None,
    };
    let step = |job: &str| {
        Action::StepRun(Box::new(crate::action::StepRunCommand {
            process: "payout".to_string(),
            key: "u1".to_string(),
            instance: "payout/u1#1".to_string(),
            step: 0,
            job: job.into(),
            run_id: "payout/u1#1.0#1".into(),
            attempt: 1,
            pass: 1,
            params: Default::default(),
            context: Default::default(),
            deadline: ts("2024-01-01T00:00:00Z"),
            source: None,
            topic: "jobs.send".into(),
        }))
    };
    metrics::with_local_recorder(&recorder, || {
        let mut handles = Handles::new();
        let started = Action::Event(Event::ProcessStarted {
            subject: subject.clone(),
            source: None,
        });
        record_actions(&mut handles, 0, &[started, step("send")]);
        record_actions(&mut handles, 0, &[step("send"), step("notify")]);
        for _ in 0..2 {
            record_success(&mut handles, RunKind::Step, "payout/u1#1.0#1", 1, &[]);
        }
        let succeeded = Action::Event(Event::ProcessSucceeded {
            subject: subject.clone(),
        });
        record_actions(&mut handles, 0, &[succeeded]);
    });
    let text = handle.render();
    for (series, value) in [
        (
            format!("{RUNS_DISPATCHED}{{kind=\"job\",job_type=\"send\"}}"),
            2.0,
        ),
        (
            format!("{RUNS_DISPATCHED}{{kind=\"job\",job_type=\"notify\"}}"),
            1.0,
        ),
        (
            format!("{RUNS_SUCCEEDED}{{kind=\"job\",process=\"payout\"}}"),
            2.0,
        ),
        (format!("{PROCESSES_STARTED}{{process=\"payout\"}}"), 1.0),
        (
            format!("{PROCESSES_ENDED}{{process=\"payout\",outcome=\"succeeded\"}}"),
            1.0,
        ),
    ] {
        assert_eq!(sample(&text, &series), Some(value), "{series}\n{text}");
    }
}
