//! Property tests of the process half: random streams of launches, submits,
//! event records, step results and commands, crashed and restored at a
//! random point, must decide exactly what the uncrashed run decides, end in
//! an equal state and keep the process invariants (one active instance per
//! key; each active step in exactly one place; job limits held; instance
//! and run ids never reused).

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use crate::action::{Action, Event};
use crate::config;
use crate::run::Phase;

const CONFIG: &str = r#"
[[job]]
name = "a"
max_running = 2
timeout = "5m"
retry = { attempts = 2, backoff = "1m", tiers = ["3m"], requeue = "back" }

[[job]]
name = "b"
timeout = "4m"
accept = "last"
restart_after_timeout = false
deadline = "20m"
retry = { attempts = 1, backoff = "1m", tiers = ["2m"] }

[[job]]
name = "c"
max_running = 1
deadline = "15m"
force_finish = true

[[process]]
name = "p"
steps = ["a", "b"]
conflict = "queue"
reuse = "failed_only"
idle_timeout = "7m"
when = "!has(params.deny)"

[[process]]
name = "q"
steps = ["b", "c", "a"]
conflict = "replace"
reuse = "until_reset"
timeout = "30m"
on = { topic = "t", key = "record.k", when = "record.go" }

[[process]]
name = "r"
steps = ["c"]
schedule = { cron = "*/20 * * * *", keys = ["k0", "k1"] }
"#;

const KEYS: [&str; 3] = ["k0", "k1", "k2"];
const PROCS: [&str; 6] = ["p", "q", "r", "a", "b", "c"];
const JOBS: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone)]
enum Op {
    Launch(usize, Vec<usize>, bool, bool),
    Submit(usize, usize, bool),
    Record(usize, bool),
    Complete {
        process: usize,
        key: usize,
        ok: bool,
        attempt: Option<u32>,
        next: Option<(usize, bool)>,
        goal: bool,
    },
    Cancel(usize, usize),
    Reset(usize, usize),
}

fn op() -> impl Strategy<Value = (u32, Op)> {
    let op = prop_oneof![
        3 => (0..3usize, prop::collection::vec(0..3usize, 1..4), any::<bool>(), prop::bool::weighted(0.1))
            .prop_map(|(p, keys, front, deny)| Op::Launch(p, keys, front, deny)),
        2 => (0..3usize, 0..3usize, any::<bool>()).prop_map(|(j, k, front)| Op::Submit(j, k, front)),
        1 => (0..3usize, any::<bool>()).prop_map(|(k, go)| Op::Record(k, go)),
        7 => (
            0..6usize,
            0..3usize,
            prop::bool::weighted(0.7),
            prop::option::weighted(0.15, 1..4u32),
            prop::option::weighted(0.15, (0..3usize, any::<bool>())),
            prop::bool::weighted(0.1),
        )
            .prop_map(|(process, key, ok, attempt, next, goal)| Op::Complete {
                process,
                key,
                ok,
                attempt,
                next,
                goal,
            }),
        1 => (0..6usize, 0..3usize).prop_map(|(p, k)| Op::Cancel(p, k)),
        1 => (0..3usize, 0..3usize).prop_map(|(p, k)| Op::Reset(p, k)),
    ];
    (0..6u32, op)
}

fn render(ops: &[(u32, Op)]) -> String {
    let base: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
    let mut minutes = 0i64;
    let mut lines = Vec::new();
    for (gap, op) in ops {
        minutes += i64::from(*gap);
        let at = base + jiff::SignedDuration::from_mins(minutes);
        let position = |front: bool| if front { "front" } else { "back" };
        let body = match op {
            Op::Launch(p, keys, front, deny) => {
                let keys: Vec<String> = keys.iter().map(|k| format!("\"{}\"", KEYS[*k])).collect();
                let params = if *deny { r#"{"deny":1}"# } else { r#"{"n":1}"# };
                format!(
                    r#""launch":{{"process":"{}","keys":[{}],"params":{params},"position":"{}"}}"#,
                    PROCS[*p],
                    keys.join(","),
                    position(*front)
                )
            }
            Op::Submit(j, k, front) => format!(
                r#""submit":{{"job":"{}","key":"{}","position":"{}"}}"#,
                JOBS[*j],
                KEYS[*k],
                position(*front)
            ),
            Op::Record(k, go) => format!(
                r#""record":{{"topic":"t","key":"{0}","value":{{"k":"{0}","go":{go}}}}}"#,
                KEYS[*k]
            ),
            Op::Complete {
                process,
                key,
                ok,
                attempt,
                next,
                goal,
            } => {
                let status = if *ok { "succeeded" } else { "failed" };
                let attempt = attempt.map_or(String::new(), |n| format!(r#","attempt":{n}"#));
                let next = next.map_or(String::new(), |(j, front)| {
                    format!(
                        r#","next":[{{"job":"{}","position":"{}"}}]"#,
                        JOBS[j],
                        position(front)
                    )
                });
                format!(
                    r#""complete":{{"process":"{}","key":"{}","status":"{status}","output":{{"m":{}}},"goal_reached":{goal}{attempt}{next}}}"#,
                    PROCS[*process], KEYS[*key], minutes
                )
            }
            Op::Cancel(p, k) => format!(
                r#""command":{{"cancel":{{"process":"{}","key":"{}"}}}}"#,
                PROCS[*p], KEYS[*k]
            ),
            Op::Reset(p, k) => format!(
                r#""command":{{"reset_key":{{"process":"{}","key":"{}"}}}}"#,
                PROCS[*p], KEYS[*k]
            ),
        };
        lines.push(format!(r#"{{"at":"{at}",{body}}}"#));
    }
    lines.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn crash_and_restore_changes_nothing(ops in prop::collection::vec(op(), 1..60), crash in 1usize..60) {
        let config = config::parse(CONFIG, "prop.toml").unwrap().config;
        let input = render(&ops);
        let crash = crash.min(ops.len());
        let (straight_sim, straight) =
            crate::engine::tests::straight_and_crashed(&config, &input, crash)?;

        let processes = &straight_sim.engine().processes;
        // Each job's running count is what the instances say, within its share.
        let mut running = vec![0u32; processes.jobs.len()];
        for (p, key, record) in processes.keys.iter() {
            let Some(inst) = &record.active else { continue };
            let j = processes.current_job(p, key).unwrap() as usize;
            prop_assert_eq!(inst.slot.phase == Phase::Running, inst.slot.run().is_some(), "{}/{}", p, key);
            prop_assert_eq!(inst.slot.phase == Phase::Queued, inst.queued.is_some(), "{}/{}", p, key);
            if inst.slot.phase == Phase::Running {
                running[j] += 1;
            }
        }
        for (j, job) in processes.jobs.iter().enumerate() {
            prop_assert_eq!(job.running, running[j], "job {}", j);
            prop_assert!(job.share.is_none_or(|s| job.running <= s), "job {} over its share", j);
        }
        // At most one active instance per key at any time: between a
        // key's `process_started` and its end nothing else starts; instance
        // ids and run ids never name two different things.
        let mut active: BTreeMap<(String, String), String> = BTreeMap::new();
        let mut instances = BTreeSet::new();
        let mut runs: BTreeMap<String, (String, u32)> = BTreeMap::new();
        for o in &straight {
            // Key records, whatever state the stream left them in, are
            // written straight as prost writes them.
            if let Action::Changelog(crate::changelog::ChangelogRecord {
                value: Some(crate::changelog::Value::Process(record)),
                ..
            }) = &o.action
            {
                prop_assert!(crate::codec::key_record_written_as_prost(record), "{:?}", record);
            }
            match &o.action {
                Action::Event(Event::ProcessStarted { subject, .. }) => {
                    let crate::action::Subject::Process { process, key, instance, .. } = subject else { continue };
                    let instance = instance.clone().unwrap_or_default();
                    prop_assert!(instances.insert(instance.clone()), "instance {} twice", instance);
                    let previous = active.insert((process.clone(), key.clone()), instance);
                    prop_assert!(previous.is_none(), "{}/{} started while {:?} is active", process, key, previous);
                }
                Action::Event(
                    Event::ProcessSucceeded { subject }
                    | Event::ProcessFailed { subject, .. }
                    | Event::ProcessCancelled { subject, .. }
                    | Event::ProcessTimedOut { subject },
                ) => {
                    let crate::action::Subject::Process { process, key, instance, .. } = subject else { continue };
                    if instance.is_some() {
                        active.remove(&(process.clone(), key.clone()));
                    }
                }
                Action::StepRun(run) => {
                    let mine = (run.instance.clone(), run.step);
                    if let Some(owner) = runs.insert(run.run_id.to_string(), mine.clone()) {
                        prop_assert_eq!(owner, mine, "run id {} reused", &run.run_id);
                    }
                }
                _ => {}
            }
        }
    }
}

/// A key made idle by `reset_key` after its instance ended is dropped when
/// a restore would drop it. Found by a long run of the property above: the
/// burial was armed only where an instance ended, so such a key stayed for
/// ever in the live engine while a restored one dropped it.
#[test]
fn a_key_made_idle_by_a_reset_is_buried_as_a_restore_buries_it() {
    let config = config::parse(CONFIG, "prop.toml").unwrap().config;
    let ops = [
        (0, Op::Launch(2, vec![2], false, false)),
        (
            0,
            Op::Complete {
                process: 2,
                key: 2,
                ok: true,
                attempt: None,
                next: None,
                goal: true,
            },
        ),
        (0, Op::Reset(2, 2)),
        (10, Op::Launch(0, vec![0], false, false)),
    ];
    let input = render(&ops);
    for crash in 1..ops.len() {
        let (_, straight) =
            crate::engine::tests::straight_and_crashed(&config, &input, crash).unwrap();
        let buried = straight.iter().any(|o| {
            matches!(&o.action, Action::Changelog(r)
                if r.key.as_str() == "r/k2" && r.value.is_none())
        });
        assert!(buried, "r/k2 is never dropped");
    }
}
