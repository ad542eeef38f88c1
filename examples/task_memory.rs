//! Resident memory per task without Kafka: what parsing the configuration,
//! building the router and restoring the shards a ready instance holds add
//! (idle tasks with `reactor bench`'s definitions), against the TOML:
//! `target/release/examples/task_memory 1000000 4` (tasks, shards). The
//! parts are indicative only (memory the parser frees is reused by what
//! follows); the total is the figure. For where it goes, run it under
//! `valgrind --tool=massif` with the global allocator line removed.

mod common;

use reactor::router::Router;
use reactor::shell::driver::Driver;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn resident() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().unwrap());
    let tasks = args.next().unwrap_or(1_000_000);
    let partitions = args.next().unwrap_or(4) as i32;
    let text = common::bench_tasks_toml(tasks);
    let raw = text.len() as f64 / tasks as f64;
    let per = |b: u64, a: u64| a.saturating_sub(b) as f64 / tasks as f64;
    let r0 = resident();
    let config = reactor::config::parse(&text, "probe.toml").unwrap().config;
    drop(text);
    let r1 = resident();
    let router = Router::new(&config, partitions);
    let r2 = resident();
    let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let shards: Vec<Driver> = (0..partitions)
        .map(|p| {
            let mut d =
                Driver::restore(&config, &router, p, std::iter::empty(), std::iter::empty())
                    .unwrap();
            let mut sink: Vec<(jiff::Timestamp, reactor::action::Action)> = Vec::new();
            d.start(now, &mut sink).unwrap();
            d
        })
        .collect();
    let r3 = resident();
    println!(
        "{tasks} tasks, {raw:.0} B of TOML each: configuration {:.0} B, router {:.0} B, shards {:.0} B, all {:.0} B per task ({:.1}x)",
        per(r0, r1),
        per(r1, r2),
        per(r2, r3),
        per(r0, r3),
        per(r0, r3) / raw
    );
    drop((shards, router, config));
}
