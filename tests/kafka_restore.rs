//! The restorer on librdkafka's in-process mock cluster: shards rebuilt
//! from their changelog partitions as they are read, and a warm standby's
//! shard taken over with only the records written since it caught up.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use reactor::action::Action;
use reactor::changelog::{ChangelogRecord, Store};
use reactor::codec;
use reactor::config::Config;
use reactor::engine::{Engine, Input, RunResult};
use reactor::router::Router;
use reactor::run::Status;
use reactor::runtime::restorer::{Reply, Request, Restored, Restorer, State};
use support::TestKafka;

const WAIT: Duration = Duration::from_secs(20);
const PARTITIONS: i32 = 4;

/// Eight pools with one task each, spread over the partitions.
fn pooled_tasks() -> String {
    (0..8)
        .map(|i| {
            format!(
                "[[pool]]\nname = \"p{i}\"\n\n[[task]]\nid = \"t{i}\"\npool = \"p{i}\"\ntrigger = \"delta(src/p{i}, 1min)\"\ntimeout = \"1h\"\n\n"
            )
        })
        .collect()
}

/// Every task fired once by an engine of them all: the engine, and the run
/// commands it sent.
fn fired(config: &Config, t0: Timestamp) -> (Engine, Vec<reactor::action::RunCommand>) {
    let mut engine = Engine::new(config);
    engine.start(t0).expect("start");
    let mut runs = Vec::new();
    for i in 0..config.tasks.len() {
        let input = Input::Ctl {
            entity: "src".into(),
            param: format!("p{i}"),
            value: t0 + SignedDuration::from_mins(i as i64 + 1),
        };
        let actions = engine
            .apply(input, t0 + SignedDuration::from_hours(1))
            .expect("a change");
        runs.extend(actions.into_iter().filter_map(|a| match a {
            Action::Run(run) => Some(run),
            _ => None,
        }));
    }
    assert_eq!(runs.len(), config.tasks.len(), "every task fired");
    (engine, runs)
}

/// The records of `engine`'s tasks by the partition that owns each.
fn by_partition(engine: &Engine, router: &Router) -> BTreeMap<i32, Vec<ChangelogRecord>> {
    let mut out: BTreeMap<i32, Vec<ChangelogRecord>> = BTreeMap::new();
    for record in engine.snapshot() {
        assert_eq!(record.store, Store::Task);
        let p = router.task(&record.key).expect("a task's partition");
        out.entry(p).or_default().push(record);
    }
    out
}

fn write(kafka: &TestKafka, topic: &str, partition: i32, records: &[ChangelogRecord]) {
    for record in records {
        let (key, value) = codec::encode_changelog(record.clone());
        kafka.send_to(
            topic,
            partition,
            std::str::from_utf8(&key).expect("a UTF-8 key"),
            value.as_deref().unwrap_or_default(),
        );
    }
}

fn restored(restorer: &Restorer) -> Restored {
    let until = Instant::now() + WAIT;
    loop {
        match restorer.try_reply() {
            Some(Reply::Restored(r)) => return r,
            Some(Reply::Failed(e)) => panic!("the restore failed: {e}"),
            None => {
                assert!(Instant::now() < until, "no shard restored in {WAIT:?}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// The records a restored shard would write again, by key.
fn records_of(r: Restored) -> Vec<ChangelogRecord> {
    match r.state {
        State::Rebuilt(driver, _) => driver.engine().snapshot(),
        State::Unchanged => panic!("shard {} was not rebuilt", r.partition),
    }
}

#[test]
fn shards_restore_from_their_changelog_and_a_standby_reads_only_what_follows() {
    let kafka = TestKafka::new("restore");
    let mut config = kafka.config(&pooled_tasks(), PARTITIONS, true);
    config.kafka.standbys = 1;
    kafka.create_topics(&config, PARTITIONS);
    let changelog = config.kafka.topics.changelog.clone();
    let router = Router::new(&config, PARTITIONS);
    let t0: Timestamp = "2026-01-01T00:00:00Z".parse().expect("a time");
    let (mut engine, runs) = fired(&config, t0);
    let expected = by_partition(&engine, &router);
    assert!(expected.len() >= 2, "tasks on several shards: {expected:?}");
    for (p, records) in &expected {
        write(&kafka, &changelog, *p, records);
    }

    let config = Arc::new(config);
    let restorer =
        Restorer::spawn(&kafka.clients(), Arc::clone(&config), router.clone()).expect("restorer");
    let mut shards = expected.keys().copied();
    let (first, second) = (
        shards.next().expect("a shard"),
        shards.next().expect("another"),
    );

    // A shard read from its beginning holds every record written.
    restorer.ask(Request::Restore {
        partition: first,
        known: None,
    });
    let r = restored(&restorer);
    assert_eq!(
        (r.partition, r.records),
        (first, expected[&first].len() as u64)
    );
    assert_eq!(records_of(r), expected[&first]);

    // Tail every other shard as a standby until it has caught up.
    let others = |but: i32| {
        (0..PARTITIONS)
            .filter(|p| *p != first && *p != but)
            .collect()
    };
    restorer.ask(Request::Standby(others(-1)));
    std::thread::sleep(Duration::from_secs(2));

    // A task of `second` succeeds: one more record there.
    let run = runs
        .iter()
        .find(|r| router.task(r.task()) == Some(second))
        .expect("a run of the second shard");
    let result = RunResult {
        run_id: run.run_id.to_string(),
        pass: run.pass,
        status: Status::Succeeded,
        error: None,
        stage: Default::default(),
        step: Default::default(),
    };
    engine
        .apply(Input::Result(result), t0 + SignedDuration::from_hours(2))
        .expect("a result");
    let now = by_partition(&engine, &router);
    let changed: Vec<ChangelogRecord> = now[&second]
        .iter()
        .filter(|r| !expected[&second].contains(r))
        .cloned()
        .collect();
    assert_eq!(changed.len(), 1, "the succeeded task's record changed");
    write(&kafka, &changelog, second, &changed);

    // The owner asks for the restore, then for the standbys without it (as
    // the runtime does): the standby's shard is handed over, having read
    // for this restore at most the record that followed (the standby may
    // have read it already), not the partition again.
    restorer.ask(Request::Restore {
        partition: second,
        known: None,
    });
    restorer.ask(Request::Standby(others(second)));
    let r = restored(&restorer);
    assert_eq!(r.partition, second);
    assert!(
        r.records <= 1,
        "{} records read: the standby's shard was read anew ({} in the partition)",
        r.records,
        now[&second].len() + 1
    );
    assert_eq!(records_of(r), now[&second]);
}
