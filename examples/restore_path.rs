//! The restorer's work per changelog record, without Kafka: every bench
//! task fired once and its record encoded as the shards write it, then each
//! shard rebuilt from its records as the restorer takes them
//! ([`reactor::runtime::rebuild`]). For instruction counts:
//! `valgrind --tool=callgrind --toggle-collect=restore_path::rebuild target/release/examples/restore_path 20000 4`
//! then `callgrind_annotate --inclusive=yes` on its output; divide by the
//! tasks (the first argument).

mod common;

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use reactor::codec;
use reactor::engine::{Engine, Input};
use reactor::router::Router;
use reactor::runtime::rebuild::Rebuild;

// As the binary: allocation is a good part of the path.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

type Records = BTreeMap<i32, Vec<(Vec<u8>, Option<Vec<u8>>)>>;

fn main() {
    let mut args = common::counts();
    let tasks = args.next().unwrap_or(20_000);
    let partitions = i32::try_from(args.next().unwrap_or(4)).unwrap();
    let text = common::bench_tasks_toml(tasks);
    let config = reactor::config::parse(&text, "probe.toml").unwrap().config;
    let router = Router::new(&config, partitions);
    let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut engine = Engine::new(&config);
    engine.start(t0).unwrap();
    for i in 0..tasks {
        let input = Input::Ctl {
            entity: format!("bench.t{i}"),
            param: "max_dt".into(),
            value: t0 + SignedDuration::from_secs(i as i64),
        };
        engine
            .apply(input, t0 + SignedDuration::new(3_600, 456_789_123))
            .unwrap();
    }
    let mut records = Records::new();
    for record in engine.snapshot() {
        let p = router.task(&record.key).unwrap();
        records
            .entry(p)
            .or_default()
            .push(codec::encode_changelog(record));
    }
    drop(engine);
    let restored = rebuild(&config, &router, &records);
    assert_eq!(restored, tasks, "every task restored");
}

/// The measured part (`--toggle-collect=restore_path::rebuild` profiles it alone).
#[inline(never)]
fn rebuild(config: &reactor::config::Config, router: &Router, records: &Records) -> usize {
    let mut restored = 0;
    for (p, records) in records {
        let mut shard = Rebuild::new(config, router, *p).unwrap();
        for (key, value) in records {
            shard.take(key, value.as_deref()).unwrap();
        }
        let (driver, _) = shard.finish(router, *p).unwrap();
        restored += driver.engine().task_count();
    }
    restored
}
