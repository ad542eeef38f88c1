//! How each figure of the bench's report was measured: the notes under
//! its table, kept apart from the figures so that what a workload does and
//! what its numbers mean are read in one place.

use std::fmt;
use std::time::Duration;

use super::report::{ratio, seconds, Report};

/// Writes the notes on how each figure of `r` was measured.
pub(super) fn write(r: &Report, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "  how:")?;
    if r.eos_on.is_some() {
        writeln!(
            f,
            "  - tasks: every CTL change moves a parameter of its own, watched by exactly one task \
             (t<i>: delta(bench.t<i>/max_dt, 1min)), so each change fires exactly one run \
             command; no worker answers (a running task is not re-evaluated, so answering and \
             re-firing would coalesce changes)"
        )?;
    }
    if let Some(restore) = r.restore {
        writeln!(
            f,
            "  - restore: the changelog of a configuration of {n} tasks, each fired once (one \
             record per task, written as the shards write them); one consumer configured as \
             the restorer's reads every partition from its beginning to its end \
             (read_committed), then the runtime's restorer restores every shard from it as an \
             instance taking them all over does (stable input offsets, the changelog read \
             once for all shards, every engine rebuilt; loading the CTL table is not counted); \
             the two alternate {rounds} times and the ratio is of their totals",
            n = restore.records,
            rounds = super::restore::ROUNDS
        )?;
    }
    if let Some(o) = &r.offers {
        writeln!(
            f,
            "  - offers: every change creates an offer; {n} stages (s0..s{last}: watch [\"n\"], \
             when \"state == null\") each run once on it, one at a time per offer; a bench worker \
             per stage topic answers each run at once with an update and a state, so one change \
             makes {n} stage runs, {n} results and {states} OfferStates, and completes with the \
             OfferState holding all {n} stage states",
            n = o.stages,
            last = o.stages.saturating_sub(1),
            states = o.stages + 1
        )?;
        writeln!(
            f,
            "  - offers: each change needs {} commit rounds (its own, then one per stage \
             result), so the throughput window includes that latency once: a small \
             --offer-changes understates the rate Reactor sustains",
            o.stages + 1
        )?;
    }
    if let Some(j) = &r.jobs {
        writeln!(
            f,
            "  - jobs: every launch starts process `chain` for a key of its own; its {n} steps \
             (jobs reserve, send, notify, each with a run topic) run one after another, each \
             answered at once by a bench worker with a success; a chain completes with its \
             process_succeeded event and needs {rounds} commit rounds",
            n = j.steps,
            rounds = j.steps + 1
        )?;
    }
    writeln!(
        f,
        "  - throughput: records from the first produce call to the last output received by a \
         read_committed reader (Reactor: run commands{}; baseline: relayed records)",
        match (r.offers.is_some(), r.jobs.is_some()) {
            (true, true) => "; offers: completing OfferStates; jobs: process_succeeded events",
            (true, false) => "; offers: completing OfferStates",
            (false, true) => "; jobs: process_succeeded events",
            (false, false) => "",
        }
    )?;
    writeln!(
        f,
        "  - the reader reads of each output only what it counts (a run command's key, its \
         issued_at in the latency phase only{}{}), as the baseline's reads its records' keys: \
         the harness's CPU counts against each system alike",
        if r.offers.is_some() {
            "; an OfferState's offer, version and number of stage states"
        } else {
            ""
        },
        if r.jobs.is_some() {
            "; an event's kind, process and key"
        } else {
            ""
        },
    )?;
    writeln!(
        f,
        "  - latency: per record, its produce call → the reader receiving its output \
         (one process, monotonic clock)"
    )?;
    writeln!(
        f,
        "  - baseline: one group consumer relays each record (the same CTL payloads) with a \
         producer configured as Reactor's; every commit interval it flushes, then commits \
         offsets (at-least-once)"
    )?;
    if r.records_loop.is_some() {
        writeln!(
            f,
            "  - loop writing Reactor's records (throughput only, after exactly-once off): the \
             baseline's loop, writing for each change what Reactor writes for it instead of \
             relaying it — the run command (keyed by the task id) to its output and the \
             changelog record to a compacted topic, in a partition named (the input's; Reactor \
             names its shard's) — Reactor's own bytes for a task of the same id length, fired by the engine and \
             encoded by the runtime's encoder under the topic names Reactor ran with: Reactor's \
             I/O without its work, so the distance between it and the baseline is the records \
             the design asks for (DESIGN §3) and the distance between Reactor and it is \
             Reactor's own work; not a target"
        )?;
    }
    writeln!(
        f,
        "  - each system on fresh topics and a fresh consumer group, one after the other; \
         Reactor records its metrics into the Prometheus recorder, upkept every 5 s, as \
         `reactor run` does"
    )?;
    let (a, b) = (r.baseline_first.throughput, r.baseline.throughput);
    writeln!(
        f,
        "  - the loop measured twice, first (throughput only) and last: \
         {a:.0} and {b:.0} records/s, {:.1} % apart; every ratio is over their mean \
         ({:.0}), CPU per record alike",
        ratio((a - b).abs(), a.max(b)).unwrap_or(0.0) * 100.0,
        r.loop_throughput()
    )?;
    if r.mock {
        writeln!(
            f,
            "  - exactly-once calls made; the mock cluster does not implement transaction \
             markers (read_committed sees everything), so the exactly-once cost is the \
             cost of the calls only"
        )?;
        writeln!(
            f,
            "  - fetch.wait.max.ms=10 on every client: the mock answers an empty fetch only \
             after that wait, even when records arrive meanwhile"
        )?;
    }
    // Each system's steady window and CPU per record, in all and by thread.
    type Cpu<'a> = (&'a str, Duration, Option<f64>, &'a [(&'static str, f64)]);
    let mut cpu: Vec<Cpu<'_>> = r
        .systems()
        .into_iter()
        .map(|(_, name, m)| (name, m.window, m.cpu_per_record, m.cpu_by_thread.as_slice()))
        .collect();
    if let Some(o) = &r.offers {
        cpu.push(("offers", o.window, o.cpu_per_record, &o.cpu_by_thread));
    }
    if let Some(j) = &r.jobs {
        cpu.push(("jobs", j.window, j.cpu_per_record, &j.cpu_by_thread));
    }
    let per_record = |cpu: Option<f64>| cpu.map_or("n/a".into(), |c| format!("{:.2} µs", c * 1e6));
    let efficiency: Vec<String> = cpu
        .iter()
        .map(|(name, window, total, _)| {
            format!("{name} {} over {}", per_record(*total), seconds(*window))
        })
        .collect();
    writeln!(
        f,
        "  - throughput and CPU over each burst's steady window (its first and last 5 % of \
         outputs left out); CPU per record in or out, user + system of the whole process \
         (the harness and, on the mock, the brokers included alike): {}",
        efficiency.join(", ")
    )?;
    let by_thread: Vec<String> = cpu
        .iter()
        .map(|(name, _, _, groups)| (*name, *groups))
        .filter(|(_, groups)| !groups.is_empty())
        .map(|(name, groups)| {
            let parts: Vec<String> = groups
                .iter()
                .filter(|(_, s)| *s >= 0.005e-6)
                .map(|(g, s)| format!("{g} {:.2} µs", s * 1e6))
                .collect();
            format!("{name}: {}", parts.join(", "))
        })
        .collect();
    if !by_thread.is_empty() {
        writeln!(
            f,
            "  - the same CPU per record by thread (librdkafka's client threads serve \
             Reactor and the harness alike): {}",
            by_thread.join("; ")
        )?;
    }
    let mut short: Vec<(&str, Duration, &str)> = r
        .systems()
        .into_iter()
        .map(|(_, name, m)| {
            let flag = if name.starts_with("baseline") || name.starts_with("loop") {
                "--baseline-changes"
            } else {
                "--changes"
            };
            (name, m.window, flag)
        })
        .collect();
    if let Some(o) = &r.offers {
        short.push(("offers", o.window, "--offer-changes"));
    }
    if let Some(j) = &r.jobs {
        short.push(("jobs", j.window, "--chains"));
    }
    for (name, window, flag) in short {
        if window < Duration::from_secs(5) {
            writeln!(
                f,
                "  - {name}: the steady window was only {}, under 5 s; raise {flag} for a steadier figure",
                seconds(window)
            )?;
        }
    }
    if let Some(m) = &r.task_memory {
        writeln!(
            f,
            "  - memory: {:.0} bytes resident per task (the configuration as read from its file, the router and the shards) for {:.0} bytes of TOML each, {} tasks without Kafka in a process of their own (`--workload task-memory`)",
            m.per_item, m.raw, m.items
        )?;
    }
    if let Some(offers) = &r.offers {
        let m = &offers.memory;
        writeln!(
            f,
            "  - memory: {:.0} bytes resident per offer in the shards for {:.0} bytes of JSON (body and stage states) each, {} offers through the shards without Kafka in a process of their own (`--workload offer-memory`)",
            m.per_item, m.raw, m.items
        )?;
    }
    let duplicates = [
        ("baseline", Some(r.baseline.duplicates)),
        ("exactly-once on", r.eos_on.as_ref().map(|m| m.duplicates)),
        ("exactly-once off", r.eos_off.as_ref().map(|m| m.duplicates)),
        (
            "loop writing Reactor's records",
            r.records_loop.as_ref().map(|l| l.measured.duplicates),
        ),
        ("offers", r.offers.as_ref().map(|o| o.duplicates)),
        ("jobs", r.jobs.as_ref().map(|j| j.duplicates)),
    ];
    if duplicates.iter().any(|(_, d)| d.unwrap_or(0) > 0) {
        let list: Vec<String> = duplicates
            .iter()
            .filter_map(|(name, d)| d.map(|d| format!("{name} {d}")))
            .collect();
        writeln!(f, "  - duplicates received: {}", list.join(", "))?;
    }
    Ok(())
}
