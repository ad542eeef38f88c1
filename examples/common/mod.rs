//! What the examples share: the configuration `reactor bench` measures,
//! fresh shards, and reading the resident memory (each example uses a part
//! of it).

use std::fmt::Write;

/// `tasks` tasks as `reactor bench` configures them: task `t{i}` fires on
/// `bench.t{i}/max_dt`, the tasks spread over 16 pools.
#[allow(dead_code)]
pub fn bench_tasks_toml(tasks: usize) -> String {
    let mut text = String::new();
    for p in 0..16 {
        let _ = writeln!(text, "[[pool]]\nname = \"p{p}\"\n");
    }
    for i in 0..tasks {
        let _ = writeln!(
            text,
            "[[task]]\nid = \"t{i}\"\npool = \"p{}\"\ntrigger = \"delta(bench.t{i}/max_dt, 1min)\"\ntimeout = \"1h\"\n",
            i % 16
        );
    }
    text
}

/// The probe's arguments, each a count (items, shards …).
#[allow(dead_code)]
pub fn counts() -> impl Iterator<Item = usize> {
    std::env::args().skip(1).map(|a| {
        a.parse()
            .unwrap_or_else(|_| panic!("`{a}` is not a count: the arguments are counts"))
    })
}

/// Runs this probe again with mimalloc told to give freed pages back at
/// once (`MIMALLOC_PURGE_DELAY=0`), unless it already was: mimalloc gives
/// them back only when it is next called after its delay, so memory a probe
/// freed (the parser's) and then slept over read as resident or not by
/// timing alone (a million tasks: 931 or 414 B per task from the same build).
#[allow(dead_code)]
pub fn purging_at_once() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(std::env::args_os().skip(1))
        .env("MIMALLOC_PURGE_DELAY", "0")
        .status()
        .unwrap();
    std::process::exit(status.code().unwrap_or(1));
}

/// Resident memory of this process, in bytes.
#[allow(dead_code)]
pub fn resident() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// Every shard of `router` as a new owner starts it, with an empty
/// changelog, at `now`.
#[allow(dead_code)]
pub fn fresh_shards(
    config: &reactor::config::Config,
    router: &reactor::router::Router,
    now: jiff::Timestamp,
) -> Vec<reactor::shell::driver::Driver> {
    (0..router.partitions())
        .map(|p| {
            let mut d = reactor::shell::driver::Driver::restore(
                config,
                router,
                p,
                std::iter::empty(),
                std::iter::empty(),
            )
            .unwrap();
            d.start(now, &mut Vec::new()).unwrap();
            d
        })
        .collect()
}

/// Resident growth since `start` (a [`resident`] reading) per item, read
/// after a 2 s wait: the allocator gives freed pages back to the system
/// after a delay, and without the wait the figure depended on whether it
/// had yet.
#[allow(dead_code)]
pub fn resident_growth(start: u64, items: usize) -> f64 {
    std::thread::sleep(std::time::Duration::from_secs(2));
    resident().saturating_sub(start) as f64 / items as f64
}
