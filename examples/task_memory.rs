//! Resident memory per task without Kafka: what parsing the configuration,
//! building the router and restoring the shards a ready instance holds add
//! (idle tasks with `reactor bench`'s definitions), against the TOML:
//! `target/release/examples/task_memory 1000000 4` (tasks, shards). For
//! where it goes, run it under `valgrind --tool=massif` with the global
//! allocator lines and the `purging_at_once` call removed (valgrind would
//! follow only the first process), and read the heap just before the drops
//! at the end.

mod common;

use reactor::router::Router;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    common::purging_at_once();
    let mut args = common::counts();
    let tasks = args.next().unwrap_or(1_000_000);
    let partitions = args.next().unwrap_or(4) as i32;
    let r0 = common::resident();
    let text = common::bench_tasks_toml(tasks);
    let raw = text.len() as f64 / tasks as f64;
    let config = reactor::config::parse(&text, "probe.toml").unwrap().config;
    drop(text);
    let router = Router::new(&config, partitions);
    let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let shards = common::fresh_shards(&config, &router, now);
    // The text and the parser's temporaries are freed by now.
    let all = common::resident_growth(r0, tasks);
    println!(
        "{tasks} tasks, {raw:.0} B of TOML each: {all:.0} B resident per task for the configuration, the router and the restored shards ({:.1}x)",
        all / raw
    );
    drop((shards, router, config));
}
