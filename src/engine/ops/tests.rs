//! Recoveries walked in small chunks: one chunk per tick, progress after
//! each, a crash between any two chunks restarting no key twice, and a
//! cancel that stops the walk.

use jiff::Timestamp;

use crate::action::{Action, Event};
use crate::changelog::ChangelogRecord;
use crate::config::Config;
use crate::engine::{Command, Engine, Input, RunResult};
use crate::ops::{Criteria, Kind, Mode, Recover};
use crate::run::Status;

const CONFIG: &str = r#"
[[job]]
name = "reserve"

[[job]]
name = "send_tx"
retry = { attempts = 1, backoff = "10s", tiers = [] }

[[process]]
name = "payout"
steps = ["reserve", "send_tx"]
"#;

const KEYS: usize = 23;
const CHUNK: usize = 4;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn config() -> Config {
    crate::config::parse(CONFIG, "ops.toml").unwrap().config
}

/// An engine with its changelog so far.
struct Shard {
    engine: Engine,
    log: Vec<ChangelogRecord>,
}

impl Shard {
    fn keep(&mut self, actions: Vec<Action>) -> Vec<Action> {
        for a in &actions {
            if let Action::Changelog(r) = a {
                self.log.push(r.clone());
            }
        }
        actions
    }

    fn apply(&mut self, input: Input, now: Timestamp) -> Vec<Action> {
        let actions = self.engine.apply(input, now).unwrap();
        self.keep(actions)
    }

    fn complete(&mut self, key: &str, status: Status, now: Timestamp) -> Vec<Action> {
        let (run_id, pass) = self.engine.step_run("payout", key).unwrap();
        let mut result = RunResult::new(run_id, pass, status);
        result.error = Some("node down".into());
        self.apply(Input::Result(result), now)
    }

    /// Drops the engine and restores it from its changelog, as a new owner.
    fn crash(&mut self, now: Timestamp) -> Vec<Action> {
        self.engine = Engine::restore(&config(), |_| true, self.log.clone()).unwrap();
        self.engine.ops.set_chunk(CHUNK);
        let actions = self.engine.start(now).unwrap();
        self.keep(actions)
    }

    fn tick(&mut self, now: Timestamp) -> Option<Vec<Action>> {
        self.engine.next_deadline().filter(|at| *at <= now)?;
        let actions = self.engine.tick(now).unwrap();
        Some(self.keep(actions))
    }
}

/// `KEYS` payouts failed at `send_tx`.
fn failed() -> (Shard, Timestamp) {
    let mut engine = Engine::new(&config());
    engine.ops.set_chunk(CHUNK);
    let mut shard = Shard {
        engine,
        log: Vec::new(),
    };
    let now = t("2024-06-01T00:00:00Z");
    let keys: Vec<String> = (0..KEYS).map(|i| format!("k{i:02}")).collect();
    let started = shard.engine.start(now).unwrap();
    shard.keep(started);
    shard.apply(
        Input::Command(Command::Launch {
            process: "payout".into(),
            keys: keys.clone(),
            params: Default::default(),
            position: Default::default(),
            reset: false,
            source: None,
        }),
        now,
    );
    for key in &keys {
        shard.complete(key, Status::Succeeded, now);
        shard.complete(key, Status::Failed, now);
    }
    (shard, now)
}

fn recover(id: &str) -> Input {
    Input::Command(Command::Recover(Recover {
        id: id.into(),
        criteria: Criteria {
            kind: Some(Kind::Process),
            state: Some("failed".into()),
            ..Criteria::default()
        },
        mode: Mode::FromStep("send_tx".into()),
        dry_run: false,
    }))
}

fn recovered_keys(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::StepRun(run) if run.source.as_deref() == Some("op:r") => Some(run.key.clone()),
            _ => None,
        })
        .collect()
}

fn progress(actions: &[Action]) -> Vec<(u64, u64, bool)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Event(Event::RecoveryProgress {
                done,
                total,
                finished,
                ..
            }) => Some((*done, *total, *finished)),
            _ => None,
        })
        .collect()
}

#[test]
fn chunks_go_one_per_tick_with_progress_after_each() {
    let (mut shard, now) = failed();
    let started = shard.apply(recover("r"), now);
    assert_eq!(progress(&started), [(0, KEYS as u64, false)]);
    assert!(recovered_keys(&started).is_empty());
    let mut seen = Vec::new();
    let mut reports = Vec::new();
    while let Some(actions) = shard.tick(now) {
        let keys = recovered_keys(&actions);
        assert!(keys.len() <= CHUNK, "{keys:?}");
        seen.extend(keys);
        reports.extend(progress(&actions));
    }
    let all: Vec<String> = (0..KEYS).map(|i| format!("k{i:02}")).collect();
    assert_eq!(seen, all);
    let chunks = KEYS.div_ceil(CHUNK);
    assert_eq!(reports.len(), chunks);
    assert_eq!(reports.last(), Some(&(KEYS as u64, KEYS as u64, true)));
    assert!(reports.windows(2).all(|w| w[0].0 < w[1].0));
}

#[test]
fn a_crash_between_any_two_chunks_restarts_no_key_twice() {
    let chunks = KEYS.div_ceil(CHUNK);
    for crash_after in 0..=chunks {
        let (mut shard, now) = failed();
        let mut seen = recovered_keys(&shard.apply(recover("r"), now));
        let mut n = 0;
        loop {
            if n == crash_after {
                seen.extend(recovered_keys(&shard.crash(now)));
            }
            let Some(actions) = shard.tick(now) else {
                break;
            };
            seen.extend(recovered_keys(&actions));
            n += 1;
        }
        let mut sorted = seen.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            sorted.len(),
            seen.len(),
            "crash after {crash_after}: {seen:?}"
        );
        assert_eq!(seen.len(), KEYS, "crash after {crash_after}");
        // Nothing failed is left, and nothing is in progress.
        let left = shard.apply(
            Input::Command(Command::Recover(Recover {
                dry_run: true,
                ..match recover("again") {
                    Input::Command(Command::Recover(r)) => r,
                    _ => unreachable!(),
                }
            })),
            now,
        );
        assert!(
            left.iter()
                .any(|a| matches!(a, Action::Event(Event::RecoveryCounted { total: 0, .. }))),
            "{left:?}"
        );
        assert!(shard.engine.ops.recoveries.is_empty());
    }
}

#[test]
fn a_cancel_stops_the_walk_and_keeps_what_it_restarted() {
    let (mut shard, now) = failed();
    shard.apply(recover("r"), now);
    let first = shard.tick(now).unwrap();
    assert_eq!(recovered_keys(&first).len(), CHUNK);
    let cancelled = shard.apply(
        Input::Command(Command::CancelOperation { id: "r".into() }),
        now,
    );
    assert!(cancelled.iter().any(|a| matches!(
        a,
        Action::Event(Event::RecoveryProgress {
            finished: true,
            cancelled: true,
            done,
            ..
        }) if *done == CHUNK as u64
    )));
    assert!(shard.tick(now).is_none());
    // A restored shard has no recovery to go on with.
    assert!(recovered_keys(&shard.crash(now)).is_empty());
    assert!(shard.engine.ops.recoveries.is_empty());
    // An unknown operation is no error.
    assert!(shard
        .apply(
            Input::Command(Command::CancelOperation { id: "x".into() }),
            now
        )
        .is_empty());
}
