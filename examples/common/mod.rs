//! What the examples share: the configuration `reactor bench` measures.

use std::fmt::Write;

/// `tasks` tasks as `reactor bench` configures them: task `t{i}` fires on
/// `bench.t{i}/max_dt`, the tasks spread over 16 pools.
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
