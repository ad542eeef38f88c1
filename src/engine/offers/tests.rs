//! Rules of the offer half, on a shard built in code.

use jiff::Timestamp;
use serde_json::json;

use crate::action::{Action, Event};
use crate::config::{self, Accept, Config, RetryPolicy, RunPolicy, Stage};
use crate::duration::Duration;
use crate::engine::{Command, Engine, Input, RunResult, StageReply, TimerChange, Update};
use crate::offer::{Change, OfferChange};
use crate::run::Status;
use crate::stage::expr::Expr;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn stage(name: &str, watch: &[&str], when: &str, timer: Option<&str>) -> Stage {
    Stage {
        name: name.to_string(),
        watch: watch.iter().map(|w| w.to_string()).collect(),
        when: Expr::compile(when).unwrap(),
        timer: timer.map(|t| Expr::compile(t).unwrap()),
        topic: format!("stage.{name}.runs"),
        max_parallelism: 10,
        rate_limit: None,
        run: RunPolicy {
            timeout: Duration::from_secs(60),
            restart_after_timeout: true,
            accept: Accept::Last,
            retry: RetryPolicy::default(),
        },
    }
}

fn config(stages: Vec<Stage>) -> Config {
    let mut c = config::parse("", "test.toml").unwrap().config;
    c.stages = stages;
    c
}

fn body(id: &str, v: serde_json::Value) -> Input {
    Input::Offer(OfferChange {
        offer_id: id.to_string(),
        change: Change::Body(v.as_object().unwrap().clone()),
        source: None,
    })
}

fn patch(id: &str, v: serde_json::Value) -> Input {
    Input::Offer(OfferChange {
        offer_id: id.to_string(),
        change: Change::Patch(v.as_object().unwrap().clone()),
        source: None,
    })
}

fn runs(actions: &[Action]) -> Vec<(String, String, u64, u64)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::StageRun(r) => Some((r.stage.clone(), r.run_id.to_string(), r.pass, r.version)),
            _ => None,
        })
        .collect()
}

fn states(actions: &[Action]) -> Vec<(u64, String, Vec<String>)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::OfferState(s) => Some((s.version, s.cause.clone(), s.changed_fields.clone())),
            _ => None,
        })
        .collect()
}

fn success(run_id: &str, pass: u64, reply: StageReply) -> Input {
    let mut r = RunResult::new(run_id, pass, Status::Succeeded);
    r.stage = reply;
    Input::Result(r)
}

fn update(v: serde_json::Value) -> StageReply {
    StageReply {
        update: Some(Update::Patch(v.as_object().unwrap().clone())),
        ..Default::default()
    }
}

#[test]
fn a_new_offer_wakes_every_stage_and_a_result_commits_once() {
    let c = config(vec![stage("price", &["price"], "true", None)]);
    let mut e = Engine::new(&c);
    let t = ts("2024-01-01T00:00:00Z");
    e.start(t).unwrap();
    let a = e.apply(body("o1", json!({"price": 100})), t).unwrap();
    assert_eq!(states(&a), [(1, "external".into(), vec!["price".into()])]);
    assert_eq!(runs(&a), [("price".into(), "price/o1#1".into(), 1, 1)]);
    let a = e
        .apply(
            success("price/o1#1", 1, update(json!({"price_predicted": 118}))),
            t,
        )
        .unwrap();
    assert_eq!(
        states(&a),
        [(2, "stage:price".into(), vec!["price_predicted".into()])]
    );
    // The stage does not wake itself, and price did not change.
    assert!(runs(&a).is_empty());
    let view = e.offer_view("o1").unwrap();
    assert_eq!(view.version, 2);
    assert_eq!(view.body["price_predicted"], json!(118));
}

#[test]
fn a_change_during_a_run_discards_the_stale_result_and_reruns() {
    let c = config(vec![stage("price", &["price"], "true", None)]);
    let mut e = Engine::new(&c);
    let t = ts("2024-01-01T00:00:00Z");
    e.start(t).unwrap();
    e.apply(body("o1", json!({"price": 100})), t).unwrap();
    let a = e.apply(patch("o1", json!({"price": 120})), t).unwrap();
    assert_eq!(states(&a).len(), 1);
    assert!(runs(&a).is_empty(), "one run per offer at a time");
    let a = e
        .apply(success("price/o1#1", 1, update(json!({"p": 1}))), t)
        .unwrap();
    assert!(states(&a).is_empty());
    assert!(a.iter().any(|x| matches!(
        x,
        Action::Event(Event::StaleVersion {
            computed_from: 1,
            current: 2,
            ..
        })
    )));
    assert_eq!(runs(&a), [("price".into(), "price/o1#1".into(), 2, 2)]);
    let a = e
        .apply(success("price/o1#1", 2, update(json!({"p": 1}))), t)
        .unwrap();
    assert_eq!(states(&a), [(3, "stage:price".into(), vec!["p".into()])]);
    assert!(runs(&a).is_empty());
}

#[test]
fn watch_filters_and_when_decides() {
    let c = config(vec![
        stage("a", &["x"], "offer.x > 1", None),
        stage("b", &[], "true", None),
    ]);
    let mut e = Engine::new(&c);
    let t = ts("2024-01-01T00:00:00Z");
    e.start(t).unwrap();
    let a = e.apply(body("o1", json!({"x": 1, "y": 1})), t).unwrap();
    // New offer: a's when is false; b runs.
    assert_eq!(
        runs(&a).iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        ["b"]
    );
    e.apply(success("b/o1#1", 1, StageReply::default()), t)
        .unwrap();
    let a = e.apply(patch("o1", json!({"y": 5})), t).unwrap();
    // y is not watched by a; b watches everything.
    assert_eq!(
        runs(&a).iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        ["b"]
    );
    e.apply(success("b/o1#2", 2, StageReply::default()), t)
        .unwrap();
    let a = e.apply(patch("o1", json!({"x": 5})), t).unwrap();
    let mut names: Vec<String> = runs(&a).into_iter().map(|r| r.0).collect();
    names.sort();
    // Only one stage runs at a time on an offer.
    assert_eq!(names.len(), 1);
    let (first, run_id, pass, _) = runs(&a).pop().unwrap();
    let other = if first == "a" { "b" } else { "a" };
    let a = e
        .apply(success(&run_id, pass, StageReply::default()), t)
        .unwrap();
    assert_eq!(
        runs(&a).iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        [other]
    );
}

#[test]
fn timers_wake_the_stage_and_results_can_reschedule() {
    let c = config(vec![stage(
        "expire",
        &["published_at"],
        "false",
        Some("timestamp(offer.published_at) + duration('4320h')"),
    )]);
    let mut e = Engine::new(&c);
    let t = ts("2024-01-01T00:00:00Z");
    e.start(t).unwrap();
    let a = e
        .apply(
            body("o1", json!({"published_at": "2024-01-01T00:00:00Z"})),
            t,
        )
        .unwrap();
    assert!(runs(&a).is_empty());
    assert_eq!(e.next_deadline(), Some(ts("2024-06-29T00:00:00Z")));
    let a = e.tick(ts("2024-06-29T00:00:00Z")).unwrap();
    assert_eq!(runs(&a).len(), 1);
    let reply = StageReply {
        timer: Some(TimerChange::Set(ts("2024-07-01T00:00:00Z"))),
        state: Some(json!({"checked": 1})),
        ..Default::default()
    };
    let a = e
        .apply(success("expire/o1#1", 1, reply), ts("2024-06-29T00:00:01Z"))
        .unwrap();
    assert_eq!(states(&a), [(2, "stage:expire".into(), vec![])]);
    assert_eq!(e.next_deadline(), Some(ts("2024-07-01T00:00:00Z")));
}

#[test]
fn the_ping_pong_guard_parks_an_offer() {
    let mut c = config(vec![
        stage("a", &["x"], "true", None),
        stage("b", &["y"], "true", None),
    ]);
    c.offers.ping_pong.runs = 4;
    let mut e = Engine::new(&c);
    let t = ts("2024-01-01T00:00:00Z");
    e.start(t).unwrap();
    let mut a = e.apply(body("o1", json!({"x": 0, "y": 0})), t).unwrap();
    let mut parked = false;
    for k in 0..10 {
        let Some((stage, run_id, pass, _)) = runs(&a).pop() else {
            parked = a
                .iter()
                .any(|x| matches!(x, Action::Event(Event::PingPong { .. })));
            break;
        };
        let field = if stage == "a" { "y" } else { "x" };
        a = e
            .apply(success(&run_id, pass, update(json!({ field: k + 1 }))), t)
            .unwrap();
    }
    assert!(parked);
    assert!(e.offer_view("o1").unwrap().parked_until.is_some());
    let a = e
        .apply(
            Input::Command(Command::UnparkOffer { offer: "o1".into() }),
            t,
        )
        .unwrap();
    assert_eq!(runs(&a).len(), 1);
}

#[test]
fn state_compare_and_set_and_rescan() {
    let c = config(vec![stage("s", &["never"], "offer.k % 2 == 0", None)]);
    let mut e = Engine::new(&c);
    let t = ts("2024-01-01T00:00:00Z");
    e.start(t).unwrap();
    for k in 0..5 {
        let a = e.apply(body(&format!("o{k}"), json!({"k": k})), t).unwrap();
        if let Some((_, run_id, pass, _)) = runs(&a).pop() {
            e.apply(success(&run_id, pass, StageReply::default()), t)
                .unwrap();
        }
    }
    let cas = |version| {
        Input::Command(Command::SetStageState {
            offer: "o1".into(),
            stage: "s".into(),
            state: json!({"n": 1}),
            version,
        })
    };
    let a = e.apply(cas(7), t).unwrap();
    assert!(a.iter().any(|x| matches!(
        x,
        Action::Event(Event::StageState {
            applied: false,
            version: 1,
            ..
        })
    )));
    let a = e.apply(cas(1), t).unwrap();
    assert!(a.iter().any(|x| matches!(
        x,
        Action::Event(Event::StageState {
            applied: true,
            version: 2,
            ..
        })
    )));
    assert_eq!(states(&a), [(2, "command".into(), vec![])]);
    let a = e
        .apply(
            Input::Command(Command::Rescan {
                stage: "s".into(),
                when: Some("offer.k > 0".into()),
            }),
            t,
        )
        .unwrap();
    // o2 and o4 pass both; o0 fails the filter.
    assert_eq!(runs(&a).len(), 2);
    assert!(a.iter().any(|x| matches!(
        x,
        Action::Event(Event::RescanProgress {
            checked: 5,
            queued: 2,
            done: true,
            ..
        })
    )));
}

#[test]
fn restore_reproduces_the_shard() {
    let c = config(vec![
        stage("a", &["x"], "true", Some("now + duration('1h')")),
        stage("b", &[], "offer.x > 2", None),
    ]);
    let mut e = Engine::new(&c);
    let mut log = Vec::new();
    let t = ts("2024-01-01T00:00:00Z");
    let keep = |actions: Vec<Action>, log: &mut Vec<_>| {
        for a in actions {
            if let Action::Changelog(r) = a {
                log.push(r);
            }
        }
    };
    keep(e.start(t).unwrap(), &mut log);
    keep(e.apply(body("o1", json!({"x": 1})), t).unwrap(), &mut log);
    keep(e.apply(body("o2", json!({"x": 3})), t).unwrap(), &mut log);
    keep(e.apply(patch("o1", json!({"x": 4})), t).unwrap(), &mut log);
    keep(
        e.apply(
            success(
                "a/o2#1",
                1,
                StageReply {
                    version: Some(1),
                    ..Default::default()
                },
            ),
            t,
        )
        .unwrap(),
        &mut log,
    );
    let restored = Engine::restore(&c, |_| true, log.clone()).unwrap();
    assert_eq!(restored.snapshot(), e.snapshot());
    assert_eq!(restored.next_deadline(), e.next_deadline());
    assert_eq!(restored.stage_stats(), e.stage_stats());
    // Taken one by one as the restorer takes them, the same.
    let taken = taken_as_read(&c, log.clone());
    assert_eq!(taken.snapshot(), e.snapshot());
    assert_eq!(taken.next_deadline(), e.next_deadline());
    assert_eq!(taken.stage_stats(), e.stage_stats());
    // Restored from the records as read from Kafka (offers held as their
    // bytes, running ones too), the same.
    let as_read = log.into_iter().map(|r| match r.value {
        Some(value @ crate::changelog::Value::Offer(_)) => {
            let mut bytes = Vec::new();
            crate::codec::encode_value_into(&r.key, value, &mut bytes);
            crate::changelog::ChangelogRecord {
                value: Some(crate::changelog::Value::OfferEncoded(bytes)),
                ..r
            }
        }
        _ => r,
    });
    let restored = Engine::restore(&c, |_| true, as_read).unwrap();
    assert_eq!(restored.snapshot(), e.snapshot());
    assert_eq!(restored.next_deadline(), e.next_deadline());
    assert_eq!(restored.stage_stats(), e.stage_stats());
}

/// A shard restored from `log` as the restorer takes each record: decoded
/// from its bytes, which go along (an idle offer is kept as them).
fn taken_as_read(c: &Config, log: Vec<crate::changelog::ChangelogRecord>) -> Engine {
    let mut taken = Engine::for_shard(c, |_| true);
    for r in log {
        let (key, value) = crate::codec::encode_changelog(r);
        let decoded = crate::codec::decode_changelog(&key, value.as_deref()).unwrap();
        taken.restore_record(decoded, value.as_deref()).unwrap();
    }
    taken.restored().unwrap();
    taken
}

#[test]
fn an_idle_offer_restored_as_read_is_kept_as_the_bytes_read() {
    let c = config(vec![stage("a", &["x"], "false", None)]);
    let mut e = Engine::new(&c);
    let t = ts("2024-01-01T00:00:00Z");
    let mut log = Vec::new();
    for input in [
        body("o1", json!({"x": 1, "y": [1.5, "two"]})),
        patch("o1", json!({"x": 2})),
    ] {
        log.extend(
            e.apply(input, t)
                .unwrap()
                .into_iter()
                .filter_map(|a| match a {
                    Action::Changelog(r) => Some(r),
                    _ => None,
                }),
        );
    }
    assert!(!log.is_empty());
    let mut taken = taken_as_read(&c, log);
    assert_eq!(taken.snapshot(), e.snapshot());
    assert_eq!(taken.offer_body("o1").unwrap(), e.offer_body("o1").unwrap());
}

#[test]
fn a_timeout_is_a_failed_attempt_and_escalates_like_a_task() {
    let mut flaky = stage("slow", &["x"], "true", None);
    flaky.run.retry = RetryPolicy {
        attempts: 2,
        backoff: Duration::from_secs(60),
        tiers: vec![Duration::from_secs(600)],
    };
    let c = config(vec![flaky]);
    let mut e = Engine::new(&c);
    let t = ts("2024-01-01T00:00:00Z");
    e.start(t).unwrap();
    let a = e.apply(body("o1", json!({"x": 1})), t).unwrap();
    assert_eq!(runs(&a), [("slow".into(), "slow/o1#1".into(), 1, 1)]);
    // First timeout: re-dispatched at once, same run, attempt 2, new pass.
    let a = e.tick(ts("2024-01-01T00:01:00Z")).unwrap();
    assert!(a.iter().any(|x| matches!(
        x,
        Action::Event(Event::RunTimedOut {
            attempt: 1,
            restarted: true,
            ..
        })
    )));
    let attempts: Vec<(u32, u64)> = a
        .iter()
        .filter_map(|x| match x {
            Action::StageRun(r) => Some((r.attempt, r.pass)),
            _ => None,
        })
        .collect();
    assert_eq!(attempts, [(2, 2)]);
    // The timed-out pass answers late: stale.
    let a = e
        .apply(
            success("slow/o1#1", 1, StageReply::default()),
            ts("2024-01-01T00:01:30Z"),
        )
        .unwrap();
    assert!(a.iter().any(|x| matches!(
        x,
        Action::Event(Event::ResultRejected {
            reason: crate::run::Rejection::StalePass,
            ..
        })
    )));
    // Second timeout: attempts are used up, so it is a failure: parked, not re-run forever.
    let a = e.tick(ts("2024-01-01T00:02:00Z")).unwrap();
    assert!(a.iter().any(|x| matches!(
        x,
        Action::Event(Event::RunTimedOut {
            attempt: 2,
            restarted: false,
            ..
        })
    )));
    assert!(a
        .iter()
        .any(|x| matches!(x, Action::Event(Event::Parked { tier: 1, .. }))));
    assert!(runs(&a).is_empty());
}

#[test]
fn deleting_an_offer_lists_its_removed_fields_sorted() {
    let c = config(vec![stage("s", &["never"], "false", None)]);
    let mut e = Engine::new(&c);
    let t = ts("2024-01-01T00:00:00Z");
    e.start(t).unwrap();
    e.apply(body("o1", json!({"zeta": 1, "alpha": 2, "mid": 3})), t)
        .unwrap();
    let a = e
        .apply(
            Input::Offer(OfferChange {
                offer_id: "o1".into(),
                change: Change::Deleted,
                source: None,
            }),
            t,
        )
        .unwrap();
    assert_eq!(
        states(&a),
        [(
            2,
            "external".into(),
            vec!["alpha".into(), "mid".into(), "zeta".into()]
        )]
    );
}

#[test]
fn a_timer_in_the_past_is_due_at_once() {
    let c = config(vec![stage(
        "expire",
        &["status"],
        "false",
        Some("offer.status == 'active' ? timestamp(offer.published_at) + duration('4320h') : null"),
    )]);
    let mut e = Engine::new(&c);
    let t = ts("2024-09-01T00:00:00Z");
    e.start(t).unwrap();
    // Published long ago: the timer (2024-06-29) is already past.
    let a = e
        .apply(
            body(
                "o1",
                json!({"status": "active", "published_at": "2024-01-01T00:00:00Z"}),
            ),
            t,
        )
        .unwrap();
    assert!(runs(&a).is_empty());
    // Due now, not at a time before the clock: a driver that ticks at the
    // next deadline dispatches at `now` with a deadline after it.
    assert_eq!(e.next_deadline(), Some(t));
    let a = e.tick(t).unwrap();
    let deadline = a.iter().find_map(|x| match x {
        Action::StageRun(r) => Some(r.deadline),
        _ => None,
    });
    assert_eq!(deadline, Some(ts("2024-09-01T00:01:00Z")));
}

#[test]
fn a_timer_due_while_its_stage_runs_wakes_it_after_the_run() {
    let c = config(vec![stage("video", &["video"], "true", None)]);
    let mut e = Engine::new(&c);
    let t = ts("2024-06-01T10:00:00Z");
    e.start(t).unwrap();
    e.apply(body("o1", json!({"video": "a"})), t).unwrap();
    // The first run schedules the stage for 11:00.
    let reply = StageReply {
        timer: Some(TimerChange::Set(ts("2024-06-01T11:00:00Z"))),
        ..Default::default()
    };
    e.apply(success("video/o1#1", 1, reply), ts("2024-06-01T10:00:10Z"))
        .unwrap();
    // A change at 10:59:50 starts a run that is still going at 11:00.
    let a = e
        .apply(
            patch("o1", json!({"video": "b"})),
            ts("2024-06-01T10:59:50Z"),
        )
        .unwrap();
    assert_eq!(runs(&a), [("video".into(), "video/o1#2".into(), 2, 2)]);
    let a = e.tick(ts("2024-06-01T11:00:00Z")).unwrap();
    assert!(runs(&a).is_empty(), "one run per offer at a time");
    // That run was dispatched before 11:00, so the wake-up is still owed:
    // the stage runs again when it ends.
    let a = e
        .apply(
            success("video/o1#2", 2, StageReply::default()),
            ts("2024-06-01T11:00:05Z"),
        )
        .unwrap();
    assert_eq!(runs(&a), [("video".into(), "video/o1#3".into(), 3, 2)]);
    // A run dispatched at or after the due time covers it: no further run.
    let a = e
        .apply(
            success("video/o1#3", 3, StageReply::default()),
            ts("2024-06-01T11:00:10Z"),
        )
        .unwrap();
    assert!(runs(&a).is_empty());
    assert_eq!(e.offer_view("o1").unwrap().stages["video"].timer, None);
}

#[test]
fn a_recreated_offer_continues_its_version_and_never_takes_an_old_result() {
    let c = config(vec![stage("price", &["price"], "true", None)]);
    let mut e = Engine::new(&c);
    let t = ts("2024-01-01T00:00:00Z");
    e.start(t).unwrap();
    let a = e.apply(body("o1", json!({"price": 100})), t).unwrap();
    assert_eq!(runs(&a), [("price".into(), "price/o1#1".into(), 1, 1)]);
    let a = e
        .apply(
            Input::Offer(OfferChange {
                offer_id: "o1".into(),
                change: Change::Deleted,
                source: None,
            }),
            t,
        )
        .unwrap();
    assert_eq!(states(&a)[0].0, 2);
    assert!(e.offer_view("o1").is_none());
    let a = e.apply(body("o1", json!({"price": 100})), t).unwrap();
    assert_eq!(states(&a)[0].0, 3, "the version goes on after a delete");
    assert_eq!(runs(&a), [("price".into(), "price/o1#2".into(), 2, 3)]);
    // The worker of the run from before the delete answers: not this run.
    let a = e
        .apply(
            success(
                "price/o1#1",
                1,
                StageReply {
                    version: Some(3),
                    ..update(json!({"x": 1}))
                },
            ),
            t,
        )
        .unwrap();
    assert!(states(&a).is_empty());
    assert!(a
        .iter()
        .any(|x| matches!(x, Action::Event(Event::ResultRejected { .. }))));
    // Once the longest timeout has passed, a deleted offer's record is gone.
    e.apply(
        Input::Offer(OfferChange {
            offer_id: "o1".into(),
            change: Change::Deleted,
            source: None,
        }),
        t,
    )
    .unwrap();
    let a = e.tick(ts("2024-01-01T00:01:00Z")).unwrap();
    assert!(a
        .iter()
        .any(|x| matches!(x, Action::Changelog(r) if r.key == "o1" && r.value.is_none())));
    let a = e
        .apply(body("o1", json!({"price": 1})), ts("2024-01-01T00:02:00Z"))
        .unwrap();
    assert_eq!(states(&a)[0].0, 1);
}

#[test]
fn an_idle_offer_is_kept_as_its_record_and_read_back_by_what_touches_it() {
    let c = config(vec![
        stage(
            "price",
            &["price"],
            "state == null || offer.price != state.seen",
            None,
        ),
        stage("expire", &["price"], "false", Some("now + duration('1h')")),
    ]);
    let mut e = Engine::new(&c);
    let mut log = Vec::new();
    let keep = |actions: Vec<Action>, log: &mut Vec<_>| {
        for a in &actions {
            if let Action::Changelog(r) = a {
                log.push(r.clone());
            }
        }
        actions
    };
    let cold = |e: &Engine| matches!(e.offers.map.kept("o1"), Some(super::Kept::Cold(_)));
    let t = ts("2024-01-01T00:00:00Z");
    keep(e.start(t).unwrap(), &mut log);
    keep(
        e.apply(body("o1", json!({"price": 100, "ratio": 0.1})), t)
            .unwrap(),
        &mut log,
    );
    assert!(!cold(&e), "a stage runs on it: kept in full");
    let reply = StageReply {
        update: Some(Update::Patch(
            json!({"p": 1.5}).as_object().unwrap().clone(),
        )),
        state: Some(json!({"seen": 100})),
        ..Default::default()
    };
    let a = keep(
        e.apply(success("price/o1#1", 1, reply), t).unwrap(),
        &mut log,
    );
    assert!(cold(&e), "nothing works on it: kept as its record");
    // The record written is the one kept, and reads as the offer.
    assert!(a.iter().any(|x| matches!(
        x,
        Action::Changelog(crate::changelog::ChangelogRecord {
            value: Some(crate::changelog::Value::OfferEncoded(_)),
            ..
        })
    )));
    let view = e.offer_view("o1").unwrap();
    assert_eq!(view.version, 2);
    assert_eq!(
        view.stages["price"].state,
        Some(json!({"seen": 100}).into())
    );
    assert_eq!(
        view.stages["expire"].timer,
        Some(ts("2024-01-01T01:00:00Z"))
    );
    let restored = Engine::restore(&c, |_| true, log.clone()).unwrap();
    assert_eq!(restored.snapshot(), e.snapshot());
    assert!(cold(&restored));
    // A late result (a pass no longer current) is rejected and leaves it kept.
    let a = e
        .apply(success("price/o1#1", 1, StageReply::default()), t)
        .unwrap();
    assert!(a
        .iter()
        .any(|x| matches!(x, Action::Event(Event::ResultRejected { .. }))));
    assert!(cold(&e));
    // A change reads it back: the predicate reads the state, the run
    // carries the whole body and the state.
    let a = e.apply(patch("o1", json!({"price": 120})), t).unwrap();
    assert_eq!(states(&a), [(3, "external".into(), vec!["price".into()])]);
    let run = a
        .iter()
        .find_map(|x| match x {
            Action::StageRun(r) => Some(r.clone()),
            _ => None,
        })
        .expect("the stage runs again: the price moved off what it saw");
    assert_eq!(
        serde_json::Value::Object((*run.body).clone()),
        json!({"price": 120, "ratio": 0.1, "p": 1.5})
    );
    assert_eq!(run.state.as_deref(), Some(&json!({"seen": 100})));
    assert!(!cold(&e));
    // The same change on the restored shard does the same.
    let b = restored
        .clone()
        .apply(patch("o1", json!({"price": 120})), t);
    assert_eq!(b.unwrap(), a);
    // The expire stage's timer fires on a kept offer too.
    let mut e = restored;
    let a = e.tick(ts("2024-01-01T01:00:00Z")).unwrap();
    assert_eq!(runs(&a), [("expire".into(), "expire/o1#1".into(), 1, 2)]);
}
