//! What the probes share: the configuration `reactor bench` measures, their
//! arguments, and fresh shards (each probe uses a part of it).

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
