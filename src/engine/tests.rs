//! Property tests of the whole shard: random input streams, crashed and
//! restored at a random point, must decide exactly what the uncrashed run
//! decides and end in an equal state.

use proptest::prelude::*;

use crate::action::Action;
use crate::config;
use crate::sim;

const CONFIG: &str = r#"
[[pool]]
name = "etl"
max_running = 1

[[pool]]
name = "reports"
max_running = 2
hold_max = "20m"

[[task]]
id = "load"
pool = "etl"
trigger = "delta(raw/a, 1min)"
produces = ["dwh/b"]
timeout = "10m"
retry = { attempts = 2, backoff = "1m", tiers = ["5m"] }

[[task]]
id = "report"
pool = "reports"
priority = 10
trigger = "all(chunk_delta(dwh/b, hour), delay(dwh/c, 2h))"
timeout = "15m"
expect_every = "30m"

[[task]]
id = "minor"
pool = "reports"
trigger = "any(delta(dwh/c, 1min), all(delta(raw/a, 1min), ref_delay(raw/a, dwh/b, 1h)))"
timeout = "5m"
accept = "first"

[[task]]
id = "tail"
pool = "reports"
priority = 5
trigger = "chunk_delta(dwh/c, 30min, 1)"
timeout = "20m"
restart_after_timeout = false
retry = { attempts = 1, backoff = "2m", tiers = [] }
"#;

const PARAMS: [(&str, &str); 3] = [("raw", "a"), ("dwh", "b"), ("dwh", "c")];
const TASKS: [&str; 4] = ["load", "report", "minor", "tail"];

#[derive(Debug, Clone)]
enum Op {
    Ctl {
        param: usize,
        minutes: i64,
    },
    Complete {
        task: usize,
        ok: bool,
        attempt: Option<u32>,
    },
    Pause(usize),
    Resume(usize),
}

fn op() -> impl Strategy<Value = (u32, Op)> {
    let op = prop_oneof![
        4 => (0..3usize, -30..300i64).prop_map(|(param, minutes)| Op::Ctl { param, minutes }),
        4 => (0..4usize, any::<bool>(), prop::option::of(1..4u32))
            .prop_map(|(task, ok, attempt)| Op::Complete { task, ok, attempt }),
        1 => (0..4usize).prop_map(Op::Pause),
        1 => (0..4usize).prop_map(Op::Resume),
    ];
    (0..40u32, op)
}

fn render(ops: &[(u32, Op)]) -> String {
    let base: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
    let mut minutes = 0i64;
    let mut lines = Vec::new();
    for (gap, op) in ops {
        minutes += i64::from(*gap);
        let at = base + jiff::SignedDuration::from_mins(minutes);
        let body = match op {
            Op::Ctl { param, minutes: m } => {
                let (entity, p) = PARAMS[*param];
                let value = base + jiff::SignedDuration::from_mins(minutes + m);
                format!(r#""ctl":{{"entity":"{entity}","param":"{p}","value":"{value}"}}"#)
            }
            Op::Complete { task, ok, attempt } => {
                let status = if *ok { "succeeded" } else { "failed" };
                let attempt = attempt.map_or(String::new(), |n| format!(r#","attempt":{n}"#));
                format!(
                    r#""complete":{{"task":"{}","status":"{status}"{attempt}}}"#,
                    TASKS[*task]
                )
            }
            Op::Pause(t) => format!(r#""command":{{"op":"pause","task":"{}"}}"#, TASKS[*t]),
            Op::Resume(t) => format!(r#""command":{{"op":"resume","task":"{}"}}"#, TASKS[*t]),
        };
        lines.push(format!(r#"{{"at":"{at}",{body}}}"#));
    }
    lines.join("\n")
}

/// The changelog records a run wrote, in order.
fn changelog_records(out: &[sim::Output]) -> Vec<crate::changelog::ChangelogRecord> {
    out.iter()
        .filter_map(|o| match &o.action {
            Action::Changelog(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

fn decisions(out: &[sim::Output]) -> Vec<String> {
    out.iter()
        .filter(|o| !matches!(o.action, Action::Changelog(_)))
        .map(|o| serde_json::to_string(o).unwrap())
        .collect()
}

/// Runs `input` straight and with a crash + restore after input `crash`;
/// both must decide the same and end equal, and a restore from the whole
/// changelog must give the same state. Returns the straight run.
pub(super) fn straight_and_crashed(
    config: &config::Config,
    input: &str,
    crash: usize,
) -> Result<(sim::Simulator, Vec<sim::Output>), TestCaseError> {
    let (straight_sim, straight) = sim::run(config.clone(), input, None, None, true).unwrap();
    let (crashed_sim, crashed) = sim::run(config.clone(), input, None, Some(crash), true).unwrap();
    prop_assert_eq!(decisions(&straight), decisions(&crashed));
    prop_assert_eq!(
        straight_sim.engine().snapshot(),
        crashed_sim.engine().snapshot()
    );
    let records = straight.iter().filter_map(|o| match &o.action {
        Action::Changelog(r) => Some(r.clone()),
        _ => None,
    });
    let restored = super::Engine::restore(config, |_| true, records).unwrap();
    prop_assert_eq!(restored.snapshot(), straight_sim.engine().snapshot());
    Ok((straight_sim, straight))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn crash_and_restore_changes_nothing(ops in prop::collection::vec(op(), 1..60), crash in 1usize..60) {
        let config = config::parse(CONFIG, "prop.toml").unwrap().config;
        let input = render(&ops);
        let crash = crash.min(ops.len());
        let (straight_sim, _) = straight_and_crashed(&config, &input, crash)?;

        // Invariants of the final state.
        let engine = straight_sim.engine();
        for pool in engine.tasks.pool_list() {
            prop_assert!(pool.max_running.is_none_or(|m| pool.running <= m), "{} over its limit", pool.name);
        }
        for (i, slot) in engine.tasks.slots().enumerate() {
            let running = slot.phase == crate::task::TaskState::Running;
            prop_assert_eq!(running, slot.run().is_some(), "task {} run/state mismatch", i);
        }
        // A record written straight from a task is the one its `TaskRecord`
        // encodes to (`minor` names its parameters out of name order).
        prop_assert_eq!(engine.tasks.first_record_written_otherwise(), None);
    }
}

/// Parameters whose joined names sort otherwise than their parts do
/// (`a.b/x` before `a/x`, as `.` comes before `/`) are written in the
/// order of their joined names, as a record's map holds them.
#[test]
fn a_record_written_straight_orders_its_parameters_by_name() {
    let config = config::parse(
        r#"
[[pool]]
name = "p"

[[task]]
id = "t"
pool = "p"
trigger = "all(delta(a/x, 1min), delta(a.b/x, 1min), delta(a/w, 1min))"
timeout = "10m"
"#,
        "order.toml",
    )
    .unwrap()
    .config;
    let input = [("a", "x"), ("a.b", "x"), ("a", "w")]
        .iter()
        .enumerate()
        .map(|(i, (entity, param))| {
            format!(
                r#"{{"at":"2024-01-01T00:0{i}:00Z","ctl":{{"entity":"{entity}","param":"{param}","value":"2024-01-01T00:0{i}:00Z"}}}}"#
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let (sim, out) = sim::run(config, &input, None, None, true).unwrap();
    assert!(
        out.iter()
            .any(|o| matches!(&o.action, Action::Run(r) if r.snapshot.iter().count() == 3)),
        "the task ran with all three values"
    );
    assert_eq!(sim.engine().tasks.first_record_written_otherwise(), None);
}

#[test]
fn records_of_removed_tasks_are_tombstoned_at_start() {
    let config = config::parse(CONFIG, "prop.toml").unwrap().config;
    let input = render(&[(
        0,
        Op::Ctl {
            param: 0,
            minutes: 0,
        },
    )]);
    let (_, out) = sim::run(config, &input, None, None, true).unwrap();
    let records = changelog_records(&out);
    assert!(records.iter().any(|r| r.key == "load"));
    let without_load = config::parse(
        &CONFIG.replace("id = \"load\"", "id = \"load_v2\""),
        "prop.toml",
    )
    .unwrap()
    .config;
    let mut engine = super::Engine::restore(&without_load, |_| true, records).unwrap();
    let actions = engine
        .start("2024-01-01T00:00:00Z".parse().unwrap())
        .unwrap();
    let tombstones: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Changelog(r) if r.value.is_none() => Some(r.key.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(tombstones, vec!["load"]);
}

/// A key restored with a launch waiting behind an instance whose chain
/// names a job no longer configured: the instance is dropped (its outcome
/// stays) and the waiting launch starts at start, under the new
/// configuration, where it had waited for an end that could not come.
#[test]
fn a_launch_waiting_behind_a_dropped_instance_starts_at_start() {
    let before = r#"
[[job]]
name = "old"

[[process]]
name = "p"
steps = ["old"]
conflict = "queue"
"#;
    let config = config::parse(before, "before.toml").unwrap().config;
    let input = [
        r#"{"at":"2024-01-01T00:00:00Z","launch":{"process":"p","keys":["k"]}}"#,
        r#"{"at":"2024-01-01T00:00:01Z","launch":{"process":"p","keys":["k"]}}"#,
    ]
    .join("\n");
    let (_, out) = sim::run(config, &input, None, None, true).unwrap();
    let records = changelog_records(&out);
    let after = config::parse(&before.replace("\"old\"", "\"new\""), "after.toml")
        .unwrap()
        .config;
    let mut engine = super::Engine::restore(&after, |_| true, records).unwrap();
    let actions = engine
        .start("2024-01-01T00:01:00Z".parse().unwrap())
        .unwrap();
    let runs: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::StepRun(run) => Some((run.instance.as_str(), &*run.job)),
            _ => None,
        })
        .collect();
    assert_eq!(runs, vec![("p/k#2", "new")]);
}

/// A task's record names the parameters its trigger read when it was
/// written; restored under a configuration whose trigger reads others (a
/// name found among the trigger's own, one found only among the
/// configuration's, one the configuration no longer names), it keeps every
/// name and value.
#[test]
fn a_record_restored_under_another_trigger_keeps_its_values() {
    let before = r#"
[[task]]
id = "t"
trigger = "all(delta(a/x, 1min), delta(a/y, 1min), delta(a/z, 1min))"
timeout = "10m"

[[task]]
id = "u"
trigger = "delta(a/y, 1min)"
timeout = "10m"
"#;
    let input = ["x", "y", "z"]
        .iter()
        .enumerate()
        .map(|(i, param)| {
            format!(
                r#"{{"at":"2024-01-01T00:0{i}:00Z","ctl":{{"entity":"a","param":"{param}","value":"2024-01-01T00:0{i}:00Z"}}}}"#
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let config = config::parse(before, "before.toml").unwrap().config;
    let (sim, out) = sim::run(config, &input, None, None, true).unwrap();
    let written = sim.engine().tasks.record(0).unwrap();
    let records = changelog_records(&out);
    assert!(records.iter().any(|r| r.key == "t"), "t was written");
    let after = before.replace(
        "all(delta(a/x, 1min), delta(a/y, 1min), delta(a/z, 1min))",
        "all(delta(a/x, 1min), delta(a/w, 1min))",
    );
    let config = config::parse(&after, "after.toml").unwrap().config;
    let engine = super::Engine::restore(&config, |_| true, records).unwrap();
    assert_eq!(engine.tasks.record(0).unwrap(), written);
}

/// A launch's parameters live in the task's rarely set part only while
/// they matter: once its runs have succeeded, the part is dropped again.
#[test]
fn a_launched_task_keeps_no_rare_part_once_its_runs_are_done() {
    let config = config::parse(
        r#"
        [[task]]
        id = "export"
        trigger = "delta(raw/a, 1min)"
        conflict = "queue"
        "#,
        "rare.toml",
    )
    .unwrap()
    .config;
    let launched = [
        r#"{"at": "2024-06-01T00:00:00Z", "launch": {"task": "export", "params": {"day": "1"}}}"#,
        r#"{"at": "2024-06-01T00:00:01Z", "launch": {"task": "export", "params": {"day": "2"}}}"#,
    ];
    let done =
        r#"{"at": "2024-06-01T00:00:02Z", "complete": {"task": "export", "status": "succeeded"}}"#;
    let (sim, _) = sim::run(config.clone(), &launched.join("\n"), None, None, true).unwrap();
    assert_eq!(sim.engine().tasks.with_rare_part(), 1);
    let all = [launched[0], launched[1], done, done].join("\n");
    let (sim, out) = sim::run(config, &all, None, None, true).unwrap();
    let runs = out
        .iter()
        .filter(|o| matches!(o.action, Action::Run(_)))
        .count();
    assert_eq!(runs, 2, "the queued launch ran after the first");
    assert_eq!(sim.engine().tasks.with_rare_part(), 0);
}

/// A shard holding some of the configured tasks finds each of its own by
/// id (through the configuration's index, then its entries in the
/// configuration's order) and none of the others.
#[test]
fn a_shard_finds_its_own_tasks_by_id() {
    let mut text = String::from("[[pool]]\nname = \"a\"\n[[pool]]\nname = \"b\"\n");
    for i in 0..200 {
        let pool = if i % 3 == 0 { "a" } else { "b" };
        text.push_str(&format!(
            "[[task]]\nid = \"t{i}\"\npool = \"{pool}\"\ntrigger = \"delta(x.t{i}/max_dt, 1h)\"\n"
        ));
    }
    let config = config::parse(&text, "find.toml").unwrap().config;
    let a = super::Engine::for_shard(&config, |pool| pool == "a");
    let b = super::Engine::for_shard(&config, |pool| pool == "b");
    for i in 0..200 {
        let id = format!("t{i}");
        assert_eq!(a.has_task(&id), i % 3 == 0, "{id}");
        assert_eq!(b.has_task(&id), i % 3 != 0, "{id}");
    }
    assert!(!a.has_task("t200") && !b.has_task(""));
}

/// A task listing is a page of the tasks a filter asks for, by id: paging
/// with `after` walks every match once, whatever order the shard holds
/// them in.
#[test]
fn a_task_listing_pages_by_id() {
    let mut text = String::from("[[pool]]\nname = \"a\"\n[[pool]]\nname = \"b\"\n");
    // Declared out of id order: the shard holds them as declared.
    let ids: Vec<String> = (0..30).map(|i| format!("t{:02}", (i * 7) % 30)).collect();
    for (i, id) in ids.iter().enumerate() {
        let pool = if i % 3 == 0 { "a" } else { "b" };
        text.push_str(&format!(
            "[[task]]\nid = \"{id}\"\npool = \"{pool}\"\ntrigger = \"delta(x.{id}/max_dt, 1h)\"\ntimeout = \"1h\"\n"
        ));
    }
    let config = config::parse(&text, "list.toml").unwrap().config;
    let fired = ["t03", "t11", "t29"];
    let input: Vec<String> = fired
        .iter()
        .map(|id| {
            format!(
                r#"{{"at":"2024-01-01T00:00:00Z","ctl":{{"entity":"x.{id}","param":"max_dt","value":"2024-01-01T00:00:00Z"}}}}"#
            )
        })
        .collect();
    let (sim, _) = sim::run(config, &input.join("\n"), None, None, true).unwrap();
    let engine = sim.engine();
    let listed = |filter: &super::TaskFilter, limit| {
        let page = engine.task_page(filter, limit);
        let ids: Vec<String> = page.tasks.iter().map(|t| t.id.clone()).collect();
        (page.total, page.remaining, ids)
    };
    let mut sorted = ids.clone();
    sorted.sort();
    let all = super::TaskFilter::default();
    assert_eq!(listed(&all, 1000), (30, 30, sorted.clone()));
    let running = super::TaskFilter {
        state: Some(crate::task::TaskState::Running),
        ..Default::default()
    };
    assert_eq!(
        listed(&running, 1000),
        (3, 3, fired.map(String::from).to_vec())
    );
    let in_a = super::TaskFilter {
        pool: Some("a".into()),
        ..Default::default()
    };
    let mut want_a: Vec<String> = ids.iter().step_by(3).cloned().collect();
    want_a.sort();
    assert_eq!(listed(&in_a, 1000), (10, 10, want_a));
    let nowhere = super::TaskFilter {
        pool: Some("nope".into()),
        ..Default::default()
    };
    assert_eq!(listed(&nowhere, 1000), (0, 0, vec![]));
    // Seven at a time: five pages, each knowing whether another follows.
    for limit in [1, 7, 29, 30] {
        let mut walked = Vec::new();
        let mut filter = all.clone();
        loop {
            let page = engine.task_page(&filter, limit);
            assert_eq!(page.total, 30);
            assert_eq!(page.remaining, 30 - walked.len());
            walked.extend(page.tasks.iter().map(|t| t.id.clone()));
            if !page.more() {
                break;
            }
            filter.after = page.tasks.last().map(|t| t.id.clone());
        }
        assert_eq!(walked, sorted, "limit {limit}");
    }
    // Shards' pages merge into the first tasks of all of them.
    let halves = [
        super::TaskFilter {
            pool: Some("a".into()),
            ..Default::default()
        },
        super::TaskFilter {
            pool: Some("b".into()),
            ..Default::default()
        },
    ];
    let merged = super::TaskPage::merge(halves.iter().map(|f| engine.task_page(f, 4)), 4);
    assert_eq!((merged.total, merged.remaining), (30, 30));
    let first: Vec<&str> = merged.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(first, sorted[..4]);
    assert!(merged.more());
}

/// A task its trigger queued in this step is dispatched without asking
/// the trigger again; one queued in an earlier step is asked at dispatch,
/// and goes back to idle when its trigger no longer holds.
#[test]
fn only_a_task_queued_in_an_earlier_step_is_asked_again_at_dispatch() {
    let config = config::parse(
        r#"
[[pool]]
name = "p"
max_running = 1

[[task]]
id = "a"
pool = "p"
trigger = "delta(x/a, 1min)"
timeout = "1h"

[[task]]
id = "b"
pool = "p"
trigger = "delay(x/b, 10min)"
timeout = "1h"
"#,
        "fresh.toml",
    )
    .unwrap()
    .config;
    let ctl = |at: &str, param: &str| {
        format!(r#"{{"at":"{at}","ctl":{{"entity":"x","param":"{param}","value":"{at}"}}}}"#)
    };
    let first = ctl("2024-01-01T00:00:00Z", "a");
    let (sim, out) = sim::run(config.clone(), &first, None, None, true).unwrap();
    assert!(out
        .iter()
        .any(|o| matches!(&o.action, Action::Run(r) if r.task() == "a")));
    // `b` had no value at start (not true, one evaluation each); `a` was
    // asked once, when its value came, and not again at its dispatch.
    assert_eq!(sim.engine().stats().evaluated, 3);
    let input = [
        first,
        // `b` holds and queues behind `a`, then no longer holds when
        // `a`'s success frees the slot 30 minutes later.
        ctl("2024-01-01T00:00:01Z", "b"),
        r#"{"at":"2024-01-01T00:30:00Z","complete":{"task":"a","status":"succeeded"}}"#.to_string(),
    ]
    .join("\n");
    let (_, out) = sim::run(config, &input, None, None, true).unwrap();
    let runs: Vec<_> = out
        .iter()
        .filter_map(|o| match &o.action {
            Action::Run(r) => Some(r.task().to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(runs, ["a"], "b was asked again at dispatch and did not run");
}

/// A task queued without asking its trigger (a recovered dead task) is
/// asked at dispatch: here its trigger no longer holds, so it goes back to
/// idle instead of running again.
#[test]
fn a_recovered_task_is_asked_at_dispatch() {
    let config = config::parse(
        r#"
[[task]]
id = "t"
trigger = "delay(x/t, 10min)"
timeout = "1h"
retry = { attempts = 1, backoff = "1m", tiers = [] }
"#,
        "recover.toml",
    )
    .unwrap()
    .config;
    let input = [
        r#"{"at":"2024-01-01T00:00:00Z","ctl":{"entity":"x","param":"t","value":"2024-01-01T00:00:00Z"}}"#,
        r#"{"at":"2024-01-01T00:01:00Z","complete":{"task":"t","status":"failed"}}"#,
        r#"{"at":"2024-01-01T01:00:00Z","command":{"recover":{"kind":"task","state":"dead","retry":true}}}"#,
    ]
    .join("\n");
    let (sim, out) = sim::run(config, &input, None, None, true).unwrap();
    let runs = out
        .iter()
        .filter(|o| matches!(o.action, Action::Run(_)))
        .count();
    assert_eq!(
        runs, 1,
        "the recovered task ran though its trigger no longer holds"
    );
    assert_eq!(sim.engine().stats().fired, 1);
}

/// A task record read with its parameter values in place (as a restore
/// reads it) restores as the record read whole, whether its values come in
/// name order (as Reactor writes them) or not, a name repeated (protobuf's
/// map: the last of a name), or naming a parameter no task names.
#[test]
fn a_task_record_read_in_place_restores_as_read_whole() {
    use crate::changelog::{ChangelogRecord, Store, Value};
    use crate::codec;
    use crate::task::{InPlace, TaskRecord};
    use prost::Message;

    let config = config::parse(
        r#"
[[task]]
id = "t"
trigger = "all(delta(a/x, 1min), delta(a/y, 1min))"
timeout = "10m"
"#,
        "in_place.toml",
    )
    .unwrap()
    .config;
    let ts = |s: &str| -> jiff::Timestamp { s.parse().unwrap() };
    let record = TaskRecord {
        snapshot: vec![
            ("a/x".to_string(), ts("2024-01-01T00:01:00Z")),
            ("a/y".to_string(), ts("2024-01-01T00:02:00Z")),
        ]
        .into(),
        last_seen: vec![
            ("a/y".to_string(), ts("2024-01-01T00:00:30Z")),
            ("b/z".to_string(), ts("2024-01-01T00:00:10Z")),
        ]
        .into(),
        ..TaskRecord::default()
    };
    let (_, payload) = codec::encode_changelog(ChangelogRecord {
        store: Store::Task,
        key: "t".into(),
        value: Some(Value::Task(Box::new(record))),
    });
    let in_order = payload.unwrap();
    // The same record with one more value of `a/x` after the others.
    let mut again = in_order.clone();
    crate::proto::v1::TaskRecord {
        snapshot: [(
            "a/x".to_string(),
            codec::timestamp_to_proto(ts("2024-01-01T00:03:00Z")),
        )]
        .into(),
        ..Default::default()
    }
    .encode(&mut again)
    .unwrap();
    for (bytes, x) in [(&in_order, "00:01"), (&again, "00:03")] {
        let whole = codec::decode_task_record(bytes).unwrap();
        let mut values = Vec::new();
        let placed = codec::read_task_record(bytes, &mut values).unwrap();
        assert_eq!(values.len(), 4 + usize::from(x == "00:03"), "read in place");
        // The record and the bytes written straight from the task's state
        // (which would show a value held twice).
        let restored = |f: &dyn Fn(&mut super::Engine)| {
            let mut e = super::Engine::restore(&config, |_| true, std::iter::empty()).unwrap();
            f(&mut e);
            e.restored().unwrap();
            (e.tasks.record(0).unwrap(), e.tasks.encoded(0).unwrap())
        };
        let from_whole = restored(&|e| e.restore_task("t", Some(whole.clone())).unwrap());
        let from_place = restored(&|e| {
            let placed_values = InPlace {
                bytes,
                values: &values,
            };
            e.restore_task_in_place("t", placed.clone(), placed_values)
                .unwrap()
        });
        assert_eq!(from_place, from_whole);
        let Some(Value::Task(restored)) = from_place.0.value else {
            panic!("t restored as a task record");
        };
        assert_eq!(
            restored.snapshot.get("a/x"),
            Some(&ts(&format!("2024-01-01T{x}:00Z")))
        );
        assert_eq!(restored.last_seen.iter().len(), 2, "b/z kept");
    }
}
