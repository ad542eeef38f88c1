//! Benchmarks of Reactor's pure core (DESIGN target: a CTL change fanning out
//! to 10 tasks costs under 1 µs).
//!
//! - `fanout/10`, `fanout/1000`: `Engine::apply_ctl` on a restored shard of
//!   1,000,000 tasks, for a parameter referenced by 10 (resp. 1000) tasks
//!   whose triggers are evaluated but do not fire.
//! - `fanout_fire/10`: the same change when all 10 tasks fire, on a restored
//!   shard of 10,000 tasks: evaluation, queueing, dispatch, the run commands
//!   and the changelog records; `fanout_fire/10_encoded` adds encoding them
//!   into Kafka records, which is all the runtime's thread does per change
//!   besides polling, decoding and routing it.
//! - `eval/*`: `Trigger::eval` alone.
//!
//! Run with `cargo bench --bench core` (add `-- --quick` for a fast pass).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use reactor::action::Action;
use reactor::changelog::{ChangelogRecord, Store, Value};
use reactor::config::{self, Accept, Config, Pool, RetryPolicy, RunPolicy, Task, TaskList};
use reactor::ctl::{ParamId, ParamName, ParamNames};
use reactor::engine::{Engine, Input, RunResult};
use reactor::run::{RunSlot, Status};
use reactor::runtime::output;
use reactor::task::{TaskRecord, TaskState};
use reactor::trigger::{self, Trigger, Values};

/// The parameter every benchmark task watches on its entity.
const PARAM: &str = "max_dt";
/// The entity referenced by the 1000 tasks of `fanout/1000`.
const HOT: &str = "src.hot";
/// Tasks per ordinary parameter.
const PER_PARAM: usize = 10;

/// Last-seen and current value of every parameter when the shard is restored.
fn t0() -> Timestamp {
    "2021-04-25T03:27:33Z".parse().expect("valid timestamp")
}

/// The clock of the non-firing benchmarks: half an hour after `t0`.
fn now() -> Timestamp {
    t0() + SignedDuration::from_mins(30)
}

fn entity(group: usize) -> String {
    format!("src.t{group}")
}

/// The trigger of the `k`-th task on `entity`: 70% `delta`, 20%
/// `chunk_delta(day)` (counted in Europe/Moscow), 10% `all(delta, delay)`.
fn task(
    entity: &str,
    k: usize,
    moscow: &TimeZone,
    params: &mut ParamNames,
    tasks: &mut TaskList,
) -> Task {
    let p = format!("{entity}/{PARAM}");
    let (text, time_zone) = match k % 10 {
        0..=6 => (format!("delta({p}, 1h)"), TimeZone::UTC),
        7 | 8 => (format!("chunk_delta({p}, day)"), moscow.clone()),
        _ => (
            format!("all(delta({p}, 1h), delay({p}, 2h))"),
            TimeZone::UTC,
        ),
    };
    Task {
        pool: 0,
        trigger: trigger::parse(&text)
            .expect("valid trigger")
            .map(&mut |name: &ParamName| params.intern(name.parts())),
        zone: tasks.zone_index(&time_zone).expect("two zones"),
        run: std::sync::Arc::new(RunPolicy {
            timeout: config::DEFAULT_TIMEOUT,
            restart_after_timeout: true,
            accept: Accept::Last,
            retry: RetryPolicy::default(),
        }),
        conflict: config::Conflict::default(),
        extra: None,
    }
}

/// `groups` parameters watched by 10 tasks each, plus `hot` tasks on [`HOT`].
fn shard_config(groups: usize, hot: usize) -> Config {
    let moscow = TimeZone::get("Europe/Moscow").expect("bundled zone");
    let mut tasks = TaskList::default();
    let mut params = ParamNames::new();
    for g in 0..groups {
        let e = entity(g);
        for k in 0..PER_PARAM {
            let def = task(&e, k, &moscow, &mut params, &mut tasks);
            tasks.push(&format!("t{g}_{k}"), def);
        }
    }
    for k in 0..hot {
        let def = task(HOT, k, &moscow, &mut params, &mut tasks);
        tasks.push(&format!("hot_{k}"), def);
    }
    tasks.finish();
    Config {
        time_zone: TimeZone::UTC,
        strict: false,
        pools: vec![Pool {
            name: config::DEFAULT_POOL.to_string(),
            max_running: None,
            hold_max: config::DEFAULT_HOLD_MAX,
        }],
        tasks: std::sync::Arc::new(tasks),
        params: std::sync::Arc::new(params),
        stages: Vec::new(),
        offers: config::OffersSettings::default(),
        jobs: Vec::new(),
        processes: Vec::new(),
        kafka: config::KafkaSettings::default(),
    }
}

/// A shard restored from its changelog: every task idle after one successful
/// run that saw `t0` on its parameter, and every parameter still at `t0`.
fn restored_shard(groups: usize, hot: usize) -> Engine {
    let started = Instant::now();
    let config = shard_config(groups, hot);
    let records = config.tasks.iter().map(|t| {
        let last_seen = t
            .trigger
            .params()
            .into_iter()
            .map(|&p| (config.params.name(p).joined(), t0()))
            .collect();
        ChangelogRecord {
            store: Store::Task,
            key: t.id().into(),
            value: Some(Value::Task(Box::new(TaskRecord {
                slot: RunSlot::from(reactor::run::SlotParts {
                    phase: TaskState::Idle,
                    run_seq: 1,
                    pass_seq: 1,
                    ..Default::default()
                }),
                since: Some(t0()),
                last_seen,
                last_success: Some(t0()),
                ..TaskRecord::default()
            }))),
        }
    });
    let mut engine = Engine::restore(&config, |_| true, records).expect("valid records");
    for g in 0..groups {
        engine.load_ctl(&ParamName::new(entity(g), PARAM), t0());
    }
    if hot > 0 {
        engine.load_ctl(&ParamName::new(HOT, PARAM), t0());
    }
    let actions = engine.start(now()).expect("a restored shard starts");
    assert!(actions.is_empty(), "a restored shard at rest fires nothing");
    assert_eq!(engine.task_count(), groups * PER_PARAM + hot);
    eprintln!(
        "restored a shard of {} tasks in {:.2?}",
        engine.task_count(),
        started.elapsed()
    );
    engine
}

/// `apply_ctl` of a change that every referencing task evaluates to false:
/// each iteration moves the value 1 ns forward (an equal value would return
/// before evaluating, a smaller one would emit `ctl_moved_back` events), so
/// `delta(…, 1h)` and `chunk_delta(…, day)` stay false.
fn fanout(c: &mut Criterion) {
    let mut group = c.benchmark_group("fanout");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    // 99,900 parameters × 10 tasks + 1 hot parameter × 1000 tasks = 1,000,000
    // tasks. Built before the benchmarks rather than lazily inside them: the
    // routine's first call is timed (quick mode even stops after it when it
    // exceeds the measurement time).
    let mut engine = restored_shard(99_900, 1000);
    let (t0, now) = (t0(), now());
    for (id, target) in [("10", entity(0)), ("1000", HOT.to_string())] {
        let mut step: i64 = 0;
        group.bench_function(id, |b| {
            b.iter(|| {
                step += 1;
                let value = t0 + SignedDuration::from_nanos(step);
                let actions = engine
                    .apply_ctl(black_box(&target), black_box(PARAM), value, black_box(now))
                    .expect("applies");
                assert!(actions.is_empty(), "no trigger fires");
                actions
            });
        });
    }
    group.finish();
}

/// `apply_ctl` of a change that fires all 10 tasks of a parameter: each is
/// queued, dispatched (run command, timeout timer) and written to the
/// changelog. `10` times only that call (its returned actions are dropped
/// untimed); `10_encoded` also times encoding the actions into the records
/// the runtime's thread hands to the committer (dropping those records is
/// the committer's, untimed). Then, untimed, every run succeeds so that the
/// tasks are idle again with the new value as last seen. The value advances
/// one day per iteration so that `delta(…, 1h)` and `chunk_delta(…, day)`
/// fire again.
fn fanout_fire(c: &mut Criterion) {
    // Far enough from Timestamp::MAX (year 9999) to leave room for `now`.
    const MAX_DAYS: i64 = 2_000_000;
    let mut group = c.benchmark_group("fanout_fire");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let pristine = restored_shard(1000, 0);
    let settings = config::KafkaSettings::default();
    let names = output::OutTopics::new(&settings.topics);
    for (id, encoded) in [("10", false), ("10_encoded", true)] {
        let mut engine = pristine.clone();
        let (target, t0) = (entity(0), t0());
        let mut day: i64 = 0;
        let mut records = output::OutRecords::default();
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    day += 1;
                    if day > MAX_DAYS {
                        engine = pristine.clone();
                        day = 1;
                    }
                    let value = t0 + SignedDuration::from_hours(24 * day);
                    let now = value + SignedDuration::from_mins(30);
                    let start = Instant::now();
                    let actions = engine
                        .apply_ctl(black_box(&target), black_box(PARAM), value, black_box(now))
                        .expect("applies");
                    timed += start.elapsed();
                    let results: Vec<RunResult> = actions
                        .iter()
                        .filter_map(|a| match a {
                            Action::Run(run) => Some(RunResult {
                                step: Default::default(),
                                stage: Default::default(),
                                run_id: run.run_id.to_string(),
                                pass: run.pass,
                                status: Status::Succeeded,
                                error: None,
                            }),
                            _ => None,
                        })
                        .collect();
                    assert_eq!(results.len(), PER_PARAM, "every task fires");
                    assert_eq!(actions.len(), 2 * PER_PARAM, "a run and a record each");
                    if encoded {
                        let start = Instant::now();
                        output::encode(actions, 0, &settings, &names, now, &mut records);
                        timed += start.elapsed();
                        assert_eq!(black_box(&records).len(), 2 * PER_PARAM);
                        records.clear();
                    } else {
                        drop(black_box(actions));
                    }
                    for result in results {
                        engine.apply(Input::Result(result), now).expect("applies");
                    }
                }
                timed
            });
        });
    }
    group.finish();
}

/// Two fixed values for every parameter.
struct Fixed {
    current: Timestamp,
    last: Timestamp,
}

impl Values<ParamId> for Fixed {
    fn current(&self, _: &ParamId) -> Option<Timestamp> {
        Some(self.current)
    }

    fn last(&self, _: &ParamId) -> Option<Timestamp> {
        Some(self.last)
    }
}

/// `Trigger::eval` alone, compiled to parameter ids as the engine does.
fn eval(c: &mut Criterion) {
    let mut group = c.benchmark_group("eval");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let ts = |s: &str| -> Timestamp { s.parse().expect("valid timestamp") };
    // The DESIGN example: a new day (06:27 in Moscow, far from midnight), 32 min behind `now`.
    let day = Fixed {
        current: ts("2021-04-25T03:27:33Z"),
        last: ts("2021-04-24T03:51:16Z"),
    };
    // 22:27 and 22:51 in Moscow: within 3 h of local midnight, where the
    // fall-back check costs extra offset lookups.
    let late = Fixed {
        current: ts("2021-04-25T19:27:33Z"),
        last: ts("2021-04-24T19:51:16Z"),
    };
    let now = ts("2021-04-25T04:00:00Z");
    let utc = TimeZone::UTC;
    let moscow = TimeZone::get("Europe/Moscow").expect("bundled zone");
    let cases: [(&str, &str, &Fixed, &TimeZone); 5] = [
        ("delta", "delta(a/x, 1h)", &day, &utc),
        ("chunk_delta_day_utc", "chunk_delta(a/x, day)", &day, &utc),
        (
            "chunk_delta_day_moscow",
            "chunk_delta(a/x, day)",
            &day,
            &moscow,
        ),
        (
            "chunk_delta_day_moscow_near_midnight",
            "chunk_delta(a/x, day)",
            &late,
            &moscow,
        ),
        (
            "all_chunk_delta_delay",
            "all(chunk_delta(a/x, day), delay(b/y, 2h))",
            &day,
            &utc,
        ),
    ];
    for (id, text, values, tz) in cases {
        let trigger: Trigger<ParamId> = trigger::parse(text)
            .expect("valid trigger")
            .map(&mut |p: &ParamName| ParamId(u32::from(p.entity() != "a")));
        assert!(trigger.eval(values, now, tz), "{id} fires on these values");
        group.bench_function(id, |b| {
            b.iter(|| black_box(&trigger).eval(black_box(values), black_box(now), black_box(tz)))
        });
    }
    group.finish();
}

criterion_group!(benches, fanout, fanout_fire, eval);
criterion_main!(benches);
