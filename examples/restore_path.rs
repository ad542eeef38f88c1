//! The restorer's work per changelog record, without Kafka: every bench
//! task fired once and its record encoded as the shards write it, then each
//! shard rebuilt from its records as the restorer takes them
//! ([`reactor::runtime::rebuild`]). For instruction counts:
//! `valgrind --tool=callgrind --toggle-collect=restore_path::rebuild target/release/examples/restore_path 20000 4`
//! then `callgrind_annotate --inclusive=yes` on its output; divide by the
//! tasks (the first argument). Run alone, it prints the wall time per
//! record; with `PROBE_DECODE=1`, first that of decoding the records alone
//! and of building and finishing the empty shards alone.

mod common;

// The records the bench's restore measurement writes, not a copy of them.
#[path = "../src/bench/fired.rs"]
mod fired;

use std::collections::BTreeMap;

use jiff::Timestamp;
use reactor::codec;
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
    let records: Records = fired::records(&config, &router, t0)
        .unwrap()
        .into_iter()
        .map(|(p, records)| {
            let encoded = records.into_iter().map(codec::encode_changelog).collect();
            (p, encoded)
        })
        .collect();
    if std::env::var_os("PROBE_DECODE").is_some() {
        let started = std::time::Instant::now();
        let (mut n, mut values) = (0usize, Vec::new());
        for records in records.values() {
            for (key, value) in records {
                // As the restorer reads them: parameter values in place.
                let (_, id) = codec::read_changelog_key(key).unwrap();
                let r = value
                    .as_deref()
                    .map(|v| codec::read_task_record(v, &mut values))
                    .transpose()
                    .unwrap();
                n += id.len() + usize::from(r.is_some()) + values.len();
            }
        }
        eprintln!(
            "decode only: {:.0} ns per record ({n})",
            started.elapsed().as_secs_f64() * 1e9 / tasks as f64
        );
        let started = std::time::Instant::now();
        for p in records.keys() {
            let shard = Rebuild::new(&config, &router, *p).unwrap();
            let (driver, _) = shard.finish(&router, *p).unwrap();
            n += driver.engine().task_count();
        }
        eprintln!(
            "empty shards built and finished: {:.0} ns per record ({n})",
            started.elapsed().as_secs_f64() * 1e9 / tasks as f64
        );
    }
    let started = std::time::Instant::now();
    let restored = rebuild(&config, &router, &records);
    let took = started.elapsed();
    assert_eq!(restored, tasks, "every task restored");
    // Wall time on one thread, cache misses included (callgrind counts
    // instructions only).
    eprintln!(
        "rebuilt {tasks} tasks in {:.1} ms: {:.0} ns per record",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e9 / tasks as f64
    );
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
