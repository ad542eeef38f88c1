//! `reactor bench`: the end-to-end harness of DESIGN §13. In one run on the
//! same brokers it measures a minimal rdkafka consume→produce loop (the
//! baseline) and Reactor with exactly-once on and off, each on fresh topics
//! and groups, and reports the ratios next to the targets. It measures and
//! never judges: a missed target is marked, not an error.
//!
//! Every CTL change moves a parameter of its own, watched by exactly one task
//! (`t{i}`: `delta(bench.t{i}/max_dt, 1min)`, pools `p0`..`p15`), so every
//! change fires exactly one run command and the outputs can be matched to
//! the inputs one to one. Nobody answers the runs: a running task is not
//! re-evaluated, so re-firing tasks through a worker would coalesce changes
//! and break that correspondence.
//!
//! The offers workload ([`offers`]) sends offer changes through five stages
//! answered by bench workers, with exactly-once on, and reports offer changes
//! per second end to end next to the same baseline.
//!
//! The loop runs first (throughput only) and last: every ratio is over the
//! mean of the two, so that a host whose speed drifts during the run
//! (±15–25 % within minutes on a shared one) moves both sides alike, and
//! the report says how far apart they were.
//!
//! Two phases per system, with the same producer and reader:
//! - throughput: `--changes` records produced as fast as the producer takes
//!   them; records per second from the first produce call to the last
//!   output a `read_committed` reader receives;
//! - latency: `--latency-changes` further records at a steady rate below
//!   capacity (default half of Reactor's exactly-once throughput, at most
//!   2000/s); per record, the time from its produce call to the reader
//!   receiving its output.

mod baseline;
mod chain;
mod cluster;
mod failover;
mod fired;
mod instance;
mod jobs;
pub mod memory;
mod method;
mod offer_load;
mod offers;
mod plan;
pub mod recovery;
mod report;
mod restore;
mod shape;
pub mod stats;
pub mod threads;
mod worker;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use rdkafka::error::KafkaError;

use crate::codec::{self, CtlRecord, Format};
use crate::config::Config;

pub use failover::FailoverMeasurement;
pub use plan::{BenchArgs, Workload};
pub use report::{RecordsLoop, Report};

use cluster::{Cluster, Inputs, Sent};
use fired::entity;
use plan::Plan;

/// Pools the bench tasks are spread over.
const POOLS: usize = 16;
/// Highest automatic rate of the latency phase, per second.
const MAX_LATENCY_RATE: f64 = 2000.0;

/// Why a bench could not be completed (a missed target is not an error).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The options make no bench.
    #[error("invalid bench options: {0}")]
    Args(String),
    /// A Kafka client call failed.
    #[error("{what}: {source}")]
    Kafka {
        /// What was being done.
        what: String,
        /// The client error.
        source: KafkaError,
    },
    /// Reactor's runtime failed.
    #[error("{what}: {source}")]
    Runtime {
        /// What was being done.
        what: String,
        /// The runtime's error.
        source: Box<crate::kafka::Error>,
    },
    /// The generated configuration was refused.
    #[error("building the bench configuration: {0}")]
    Config(Box<crate::config::Error>),
    /// A wait ran out.
    #[error("{what}: timed out after {seconds:.1}s ({detail})")]
    Timeout {
        /// What was being waited for.
        what: String,
        /// Seconds waited.
        seconds: f64,
        /// How far it got.
        detail: String,
    },
    /// Anything else, e.g. an output that could not be read.
    #[error("{what}: {message}")]
    Failed {
        /// What was being done.
        what: String,
        /// What went wrong.
        message: String,
    },
}

impl Error {
    fn kafka(what: impl Into<String>, source: KafkaError) -> Error {
        Error::Kafka {
            what: what.into(),
            source,
        }
    }
}

/// `reactor bench`: runs the workload asked (blocking) and prints what it
/// measured; exits 1 when it could not complete (a missed target is not a
/// failure).
pub fn command(args: &BenchArgs) -> std::process::ExitCode {
    reactor::cli::init_logs(false);
    let printed = match args.workload {
        Workload::Recovery => recovery::run(args).map(|r| r.to_string()),
        Workload::TaskMemory | Workload::OfferMemory => {
            let (item, items) = match args.workload {
                Workload::TaskMemory => (memory::Item::Task, args.tasks.unwrap_or(1_000_000)),
                _ => (memory::Item::Offer, args.memory_offers),
            };
            let how = if args.in_process {
                memory::measure
            } else {
                memory::in_child
            };
            how(item, items, args.stages, args.partitions).map(|m| m.to_string())
        }
        Workload::Restore => run_restore(args).map(|m| m.to_string()),
        Workload::Failover => run_failover(args).map(|m| {
            format!(
                "{m}\n  {} instances, {} offer changes at {:.0}/s; shards of the stopped \
                 instance: {:?}; the others' longest gap before the stop {:.2} s (the commit \
                 rhythm); restart → ready {:.2} s",
                m.instances,
                m.changes,
                m.rate,
                m.moved,
                m.steady_gap.as_secs_f64(),
                m.ready.as_secs_f64()
            )
        }),
        Workload::All | Workload::Tasks | Workload::Offers | Workload::Jobs => {
            run(args).map(|r| r.to_string())
        }
    };
    match printed {
        Ok(text) => {
            println!("{text}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Runs the whole bench (blocking) and returns its report.
pub fn run(args: &BenchArgs) -> Result<Report, Error> {
    let started = Instant::now();
    let plan = Plan::new(args)?;
    let cluster = Cluster::new(args.brokers.as_deref())?;
    tracing::info!(
        brokers = cluster.describe(),
        changes = plan.changes,
        latency_changes = plan.latency_changes,
        tasks = plan.tasks,
        partitions = plan.partitions,
        "bench starting"
    );
    // One set of CTL inputs for the loop and the tasks workload: the
    // loop relays at least as many (`baseline_changes ≥ changes`), and
    // change `i` is the same record for both.
    let baseline_plan = plan.for_baseline();
    let inputs = Arc::new(inputs(
        baseline_plan.changes + baseline_plan.latency_changes,
    ));
    // The loop first, throughput only, and again last (below): the two
    // bracket Reactor's systems.
    let loop_throughput_only = Plan {
        latency_changes: 0,
        ..baseline_plan.clone()
    };
    let baseline_first = baseline::measure(&cluster, &loop_throughput_only, &inputs, None, None)?;

    let (eos_on, eos_off, records_loop, rate, task_memory, restore) = if plan.workload.tasks() {
        // Memory per task: what the configuration and the shards hold, in
        // a process of their own (this one's growth would reuse what the
        // loop just freed).
        let task_memory = memory::in_child(memory::Item::Task, plan.tasks, 0, plan.partitions)?;
        let (config, _) = tasks_config(plan.tasks)?;
        let (eos_on, _) =
            instance::measure(&cluster, config, &plan, &inputs, true, plan.latency_rate)?;
        let rate = plan
            .latency_rate
            .unwrap_or_else(|| auto_rate(eos_on.throughput / 2.0));
        let (config, _) = tasks_config(plan.tasks)?;
        let (eos_off, topics) =
            instance::measure(&cluster, config, &plan, &inputs, false, Some(rate))?;
        // The loop writing Reactor's records, next to Reactor's two runs,
        // throughput only and as many changes as the baseline's (a window
        // as long): Reactor's I/O without its work.
        let last = loop_throughput_only.changes.saturating_sub(1);
        let shape = shape::RecordShape::of_reactor(&topics, last)?;
        let records_loop =
            baseline::measure(&cluster, &loop_throughput_only, &inputs, None, Some(&shape))?;
        let records_loop = RecordsLoop {
            measured: records_loop,
            bytes: shape.mean_bytes(last),
        };
        let restore = (plan.restore_tasks > 0)
            .then(|| restore::tasks(&cluster, &plan, plan.restore_tasks))
            .transpose()?;
        (
            Some(eos_on),
            Some(eos_off),
            Some(records_loop),
            rate,
            Some(task_memory),
            restore,
        )
    } else {
        (
            None,
            None,
            None,
            plan.latency_rate.unwrap_or(MAX_LATENCY_RATE),
            None,
            None,
        )
    };
    let offers = match &plan.offers {
        Some(o) => {
            let offers_plan = plan.for_offers(o);
            let inputs = Arc::new(offers::inputs(o.changes + o.latency_changes));
            Some(offers::measure(&cluster, &offers_plan, o, &inputs)?)
        }
        None => None,
    };
    let jobs = match &plan.jobs {
        Some(j) => {
            let jobs_plan = plan.for_jobs(j);
            let inputs = Arc::new(jobs::inputs(j.chains + j.latency_chains));
            Some(jobs::measure(&cluster, &jobs_plan, j, &inputs)?)
        }
        None => None,
    };
    let baseline = baseline::measure(&cluster, &baseline_plan, &inputs, Some(rate), None)?;

    let report = Report {
        cluster: cluster.describe(),
        mock: cluster.is_mock(),
        partitions: plan.partitions,
        changes: plan.changes,
        latency_changes: plan.latency_changes,
        latency_rate: (plan.latency_changes > 0).then_some(rate),
        latency_rate_auto: plan.latency_rate.is_none(),
        tasks: if plan.workload.tasks() { plan.tasks } else { 0 },
        pools: if plan.workload.tasks() {
            POOLS.min(plan.tasks)
        } else {
            0
        },
        commit_interval: plan.commit_interval,
        baseline,
        baseline_first,
        task_memory,
        restore,
        eos_on,
        eos_off,
        records_loop,
        offers,
        jobs,
        wall: started.elapsed(),
    };
    tracing::info!(seconds = report.wall.as_secs_f64(), "bench done");
    Ok(report)
}

/// Runs the failover workload (blocking): three instances, one stopped and
/// restarted (see [`failover`]).
pub fn run_failover(args: &BenchArgs) -> Result<FailoverMeasurement, Error> {
    plan::positive_rate(
        "--failover-rate",
        "of changes per second",
        args.failover_rate,
    )?;
    let plan = Plan::new(&BenchArgs {
        workload: Workload::Tasks,
        ..args.clone()
    })?;
    let cluster = Cluster::new(args.brokers.as_deref())?;
    failover::measure(&cluster, &plan, args.failover_rate)
}

/// Runs the restore workload alone (blocking): a changelog of
/// `--restore-tasks` tasks read raw and restored.
pub fn run_restore(args: &BenchArgs) -> Result<restore::RestoreMeasurement, Error> {
    let plan = Plan::new(&BenchArgs {
        workload: Workload::Tasks,
        ..args.clone()
    })?;
    if plan.restore_tasks == 0 {
        return Err(Error::Args("--restore-tasks must be at least 1".into()));
    }
    let cluster = Cluster::new(args.brokers.as_deref())?;
    restore::tasks(&cluster, &plan, plan.restore_tasks)
}

/// Rate of the latency phase when not given: half of what Reactor sustained
/// with exactly-once on, so that the phase measures latency, not a backlog.
fn auto_rate(eos_throughput: f64) -> f64 {
    (eos_throughput / 2.0).clamp(10.0, MAX_LATENCY_RATE)
}

/// Topic and group names unique to one system of one bench.
fn prefix(system: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!(
        "bench-{}-{}-{}-{system}",
        std::process::id(),
        Timestamp::now().as_millisecond(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// The input records: CTL change `i` moves `bench.t{i}/max_dt`.
fn inputs(n: usize) -> Inputs {
    let base: Timestamp = "2024-01-01T00:00:00Z".parse().expect("a valid timestamp");
    let records = (0..n)
        .map(|i| {
            let record = CtlRecord {
                entity: entity(i),
                param: "max_dt".into(),
                value: base + jiff::SignedDuration::from_secs(i as i64),
            };
            let key = format!("{}/max_dt", record.entity);
            let value = codec::encode_ctl_change(&record, None, "reactor-bench", Format::Protobuf);
            (key, value)
        })
        .collect();
    Inputs { records }
}

/// Index of the input whose key is `bench.t{i}/max_dt` or whose task is `t{i}`.
fn index_in(text: &str) -> Option<usize> {
    let rest = text.strip_prefix("bench.").unwrap_or(text);
    let rest = rest.strip_prefix('t')?;
    let digits = rest.split('/').next()?;
    digits.parse().ok()
}

/// `tasks` tasks (`t{i}` fires on any change of `bench.t{i}/max_dt`) in
/// [`POOLS`] unlimited pools; the `[kafka]` section is set per system.
/// Written to a file a line at a time and read as `reactor run -c` reads
/// one ([`crate::config::load`]): the memory per task is then what the
/// product takes, not a copy of the text the harness built and freed.
fn tasks_config(tasks: usize) -> Result<(Config, usize), Error> {
    use std::io::Write;
    let started = Instant::now();
    let failed = |what: &str, e: &dyn std::fmt::Display| Error::Failed {
        what: what.into(),
        message: e.to_string(),
    };
    let path = std::env::temp_dir().join(format!("reactor-{}.toml", prefix("tasks")));
    let file = std::fs::File::create(&path)
        .map_err(|e| failed(&format!("creating {}", path.display()), &e))?;
    let mut out = std::io::BufWriter::new(file);
    let mut write = || -> std::io::Result<()> {
        for p in 0..POOLS.min(tasks) {
            writeln!(out, "[[pool]]\nname = \"p{p}\"\n")?;
        }
        for i in 0..tasks {
            writeln!(
                out,
                "[[task]]\nid = \"t{i}\"\npool = \"p{}\"\ntrigger = \"delta({}/max_dt, 1min)\"\ntimeout = \"1h\"\n",
                i % POOLS,
                entity(i)
            )?;
        }
        out.flush()
    };
    let written = write();
    drop(out);
    let loaded = written
        .map_err(|e| failed(&format!("writing {}", path.display()), &e))
        .and_then(|()| {
            let bytes = std::fs::metadata(&path)
                .map_err(|e| failed(&format!("reading {}", path.display()), &e))?
                .len();
            let loaded = crate::config::load(&path).map_err(|e| Error::Config(Box::new(e)))?;
            Ok((loaded.config, usize::try_from(bytes).unwrap_or(usize::MAX)))
        });
    let _ = std::fs::remove_file(&path);
    let (config, bytes) = loaded?;
    tracing::info!(
        tasks,
        seconds = started.elapsed().as_secs_f64(),
        "bench tasks configured"
    );
    Ok((config, bytes))
}

/// The share of outputs left out at each end of a burst: the steady window
/// is between them.
const RAMP: f64 = 0.05;

/// One phase of one system: produce `range` at `pace`, read every output.
struct Phase {
    /// First produce call to the last output received.
    elapsed: Duration,
    /// The steady window: between the first and last [`RAMP`] of outputs.
    window: Duration,
    /// Outputs received in the window.
    window_outputs: usize,
    /// CPU seconds (user + system) of the whole process in the window, in
    /// all and by thread.
    window_cpu: Option<stats::WindowCpu>,
    /// Produce call → output received, per record.
    latencies: Vec<Duration>,
    /// Produce call → run command issued, per record (Reactor only).
    dispatch: Vec<Duration>,
    /// Outputs seen more than once.
    duplicates: usize,
    /// When each input of the phase was produced, in order.
    sent: Vec<Sent>,
}

impl Phase {
    /// CPU seconds per record, `records` of them in the steady window: of
    /// the whole process (`None` where it could not be read), and by thread
    /// group, the largest first.
    fn cpu_per_record(&self, records: f64) -> (Option<f64>, Vec<(&'static str, f64)>) {
        let n = records.max(1.0);
        match &self.window_cpu {
            Some(c) => (
                Some(c.total / n),
                c.by_thread.iter().map(|(g, s)| (*g, s / n)).collect(),
            ),
            None => (None, Vec::new()),
        }
    }
}

/// Runs one phase with the system's producer and reader.
#[allow(clippy::too_many_arguments)]
fn phase(
    producer: &Arc<rdkafka::producer::ThreadedProducer<rdkafka::producer::DefaultProducerContext>>,
    inputs: &Arc<Inputs>,
    topic: &str,
    reader: &cluster::Reader,
    range: std::ops::Range<usize>,
    pace: cluster::Pace,
    timeout: Duration,
    index_of: &cluster::IndexOf<'_>,
) -> Result<Phase, Error> {
    let cpu = stats::CpuSamples::start();
    let completed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let handle = cluster::produce(
        Arc::clone(producer),
        Arc::clone(inputs),
        topic.to_string(),
        range.clone(),
        pace,
        timeout,
        Some(Arc::clone(&completed)),
    );
    let collected = reader.collect(range.clone(), timeout, index_of, &completed);
    let cpu = cpu.finish();
    let sent = cluster::join_producer(handle)?;
    let collected = collected?;
    if let (Some(a), Some(b)) = (sent.first(), sent.last()) {
        tracing::info!(
            records = sent.len(),
            produce_seconds = b.at.duration_since(a.at).as_secs_f64(),
            "inputs produced"
        );
    }
    let first = sent.first().map(|s| s.at);
    let last = collected.seen.iter().map(|s| s.at).max();
    let elapsed = match (first, last) {
        (Some(first), Some(last)) => last.saturating_duration_since(first),
        _ => Duration::ZERO,
    };
    let mut arrivals: Vec<Instant> = collected.seen.iter().map(|s| s.at).collect();
    let (window, window_outputs, window_cpu) = match stats::steady_window(&mut arrivals, RAMP) {
        Some((from, to, n)) => (
            to.saturating_duration_since(from),
            n,
            stats::cpu_between(&cpu, from, to),
        ),
        None => (elapsed, collected.seen.len(), None),
    };
    let mut latencies = Vec::with_capacity(collected.seen.len());
    let mut dispatch = Vec::new();
    for seen in &collected.seen {
        let s = &sent[seen.index - range.start];
        latencies.push(seen.at.saturating_duration_since(s.at));
        if let Some(issued) = seen.issued_at {
            let d = issued.duration_since(s.wall);
            dispatch.push(Duration::try_from(d).unwrap_or_default());
        }
    }
    Ok(Phase {
        elapsed,
        window,
        window_outputs,
        window_cpu,
        latencies,
        dispatch,
        duplicates: collected.duplicates,
        sent,
    })
}

/// What one system measured: the burst, its throughput, the paced phase.
struct Phases {
    burst: Phase,
    /// Inputs completed per second over the burst's steady window.
    throughput: f64,
    /// The rate of the paced phase.
    rate: f64,
    steady: Option<Phase>,
}

/// How a system's outputs are read in each phase.
struct Readers<'r, 'f> {
    /// In the burst: only what finds an output's input (its key), as the
    /// baseline reads its records; the burst measures throughput and CPU
    /// per record, and reading more would be harness work counted against
    /// the system.
    burst: &'r cluster::IndexOf<'f>,
    /// In the paced phase, which measures latency: also what the latency
    /// figures need (a run command's `issued_at`).
    paced: &'r cluster::IndexOf<'f>,
}

impl<'r, 'f> Readers<'r, 'f> {
    /// One reader for both phases.
    fn same(index_of: &'r cluster::IndexOf<'f>) -> Self {
        Readers {
            burst: index_of,
            paced: index_of,
        }
    }
}

/// Runs a system's two phases: a burst for throughput, then (when latency
/// changes are planned) a paced phase for latency, at `latency_rate` or a
/// rate derived from the burst.
#[allow(clippy::too_many_arguments)]
fn burst_then_steady(
    system: &str,
    producer: &Arc<rdkafka::producer::ThreadedProducer<rdkafka::producer::DefaultProducerContext>>,
    inputs: &Arc<Inputs>,
    topic: &str,
    reader: &cluster::Reader,
    plan: &Plan,
    latency_rate: Option<f64>,
    readers: Readers<'_, '_>,
) -> Result<Phases, Error> {
    let run = |range, pace, index_of| {
        phase(
            producer,
            inputs,
            topic,
            reader,
            range,
            pace,
            plan.timeout,
            index_of,
        )
    };
    let burst = run(plan.throughput_range(), cluster::Pace::Burst, readers.burst)?;
    let throughput = stats::per_second(burst.window_outputs, burst.window);
    tracing::info!(
        system,
        throughput,
        seconds = burst.elapsed.as_secs_f64(),
        "throughput phase done"
    );
    let rate = latency_rate.unwrap_or_else(|| auto_rate(throughput));
    let steady = if plan.latency_changes > 0 {
        tracing::info!(system, rate, "latency phase");
        Some(run(
            plan.latency_range(),
            cluster::Pace::Rate(rate),
            readers.paced,
        )?)
    } else {
        None
    };
    Ok(Phases {
        burst,
        throughput,
        rate,
        steady,
    })
}

/// Waits for a thread at most `timeout`; a thread still running then is
/// left behind and reported.
fn join_within<T>(
    handle: std::thread::JoinHandle<Result<T, Error>>,
    timeout: Duration,
    what: &str,
) -> Result<T, Error> {
    let deadline = Instant::now() + timeout;
    while !handle.is_finished() {
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: what.to_string(),
                seconds: timeout.as_secs_f64(),
                detail: "the thread is still running".into(),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    handle.join().unwrap_or_else(|_| {
        Err(Error::Failed {
            what: what.to_string(),
            message: "the thread panicked".into(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_of_keys_and_tasks() {
        assert_eq!(index_in("bench.t42/max_dt"), Some(42));
        assert_eq!(index_in("t7"), Some(7));
        assert_eq!(index_in("orders"), None);
        let inputs = inputs(3);
        assert_eq!(inputs.records[2].0, "bench.t2/max_dt");
        let change = codec::decode_ctl_change(&inputs.records[2].1).unwrap();
        assert_eq!(change.entity, "bench.t2");
    }

    #[test]
    fn plan_checks_the_options() {
        let plan = Plan::new(&BenchArgs::default()).unwrap();
        assert_eq!(plan.tasks, 2_402_000);
        assert_eq!(plan.latency_range(), 2_400_000..2_402_000);
        assert_eq!(plan.for_baseline().throughput_range(), 0..5_000_000);
        let quick = Plan::new(&BenchArgs {
            quick: true,
            ..BenchArgs::default()
        })
        .unwrap();
        assert_eq!((quick.changes, quick.latency_changes), (2000, 300));
        assert_eq!(quick.baseline_changes, 2000);
        let few_tasks = BenchArgs {
            tasks: Some(1000),
            ..BenchArgs::default()
        };
        assert!(matches!(Plan::new(&few_tasks), Err(Error::Args(_))));
        let (config, text) = tasks_config(20).unwrap();
        assert!(text > 20 * 60, "{text}");
        assert_eq!(config.tasks.len(), 20);
        assert_eq!(config.pools.len(), 17, "16 bench pools and the default one");
        let offers = plan.offers.unwrap();
        assert_eq!(
            (offers.changes, offers.latency_changes, offers.stages),
            (150_000, 500, 5)
        );
        let quick_offers = quick.offers.unwrap();
        assert_eq!(
            (quick_offers.changes, quick_offers.latency_changes),
            (1000, 100)
        );
        let tasks_only = Plan::new(&BenchArgs {
            workload: Workload::Tasks,
            ..BenchArgs::default()
        })
        .unwrap();
        assert!(tasks_only.offers.is_none());
        for bad in [
            BenchArgs {
                stages: 0,
                ..BenchArgs::default()
            },
            BenchArgs {
                offer_changes: 0,
                ..BenchArgs::default()
            },
            BenchArgs {
                offer_latency_rate: Some(-1.0),
                ..BenchArgs::default()
            },
        ] {
            assert!(matches!(Plan::new(&bad), Err(Error::Args(_))), "{bad:?}");
        }
        // The offers flags do not matter when the offers workload does not run.
        let ignored = BenchArgs {
            workload: Workload::Tasks,
            stages: 0,
            ..BenchArgs::default()
        };
        assert!(Plan::new(&ignored).is_ok());
    }

    #[test]
    fn options_parse_as_a_flattened_subcommand() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            bench: BenchArgs,
        }
        let cli = Cli::try_parse_from(["bench"]).unwrap();
        assert_eq!(
            (cli.bench.changes, cli.bench.baseline_changes),
            (2_400_000, 5_000_000)
        );
        assert_eq!(
            cli.bench.commit_interval.to_std(),
            Duration::from_millis(100)
        );
        let cli = Cli::try_parse_from([
            "bench",
            "--quick",
            "--commit-interval",
            "50ms",
            "--tasks",
            "30000",
            "--latency-rate",
            "500",
        ])
        .unwrap();
        let plan = Plan::new(&cli.bench).unwrap();
        assert_eq!(plan.commit_interval, Duration::from_millis(50));
        assert_eq!((plan.changes, plan.tasks), (2000, 30000));
        assert_eq!(plan.latency_rate, Some(500.0));
        assert!(Cli::try_parse_from(["bench", "--commit-interval", "soon"]).is_err());
        let cli = Cli::try_parse_from([
            "bench",
            "--workload",
            "offers",
            "--offer-changes",
            "300",
            "--stages",
            "3",
        ])
        .unwrap();
        assert_eq!(cli.bench.workload, Workload::Offers);
        let plan = Plan::new(&cli.bench).unwrap();
        assert!(!plan.workload.tasks());
        assert_eq!(plan.offers.map(|o| (o.changes, o.stages)), Some((300, 3)));
        assert!(Cli::try_parse_from(["bench", "--workload", "ctl"]).is_err());
    }

    /// The whole bench with tiny numbers on the mock cluster: it completes
    /// and measures something (timings are not asserted).
    #[test]
    fn tiny_bench_on_the_mock_cluster() {
        let args = BenchArgs {
            brokers: Some(String::new()),
            changes: 50,
            latency_changes: 20,
            latency_rate: Some(200.0),
            partitions: 2,
            offer_changes: 30,
            memory_offers: 50,
            offer_latency_changes: 10,
            offer_latency_rate: Some(50.0),
            chains: 30,
            chain_latency_launches: 10,
            chain_latency_rate: Some(50.0),
            restore_tasks: Some(500),
            ..BenchArgs::default()
        };
        let report = run(&args).unwrap();
        let restore = report.restore.expect("the restore measured");
        assert_eq!(restore.records, 500, "{report}");
        assert!(restore.raw > 0.0 && restore.restore > 0.0, "{report}");
        let (on, off) = (report.eos_on.as_ref(), report.eos_off.as_ref());
        for m in [Some(&report.baseline), on, off] {
            let m = m.expect("both workloads ran");
            assert!(m.throughput > 0.0, "{report}");
            assert_eq!(m.latency.map(|l| l.samples), Some(20), "{report}");
        }
        // The loop writing Reactor's records: every change's run command
        // found by its task id, once.
        let io = report
            .records_loop
            .as_ref()
            .expect("the tasks workload ran");
        assert!(io.measured.throughput > 0.0, "{report}");
        assert_eq!(io.measured.duplicates, 0, "{report}");
        assert!(io.bytes.0 > 50.0 && io.bytes.1 > 50.0, "{report}");
        let offers = report.offers.as_ref().expect("both workloads ran");
        assert_eq!((offers.changes, offers.stages), (30, 5));
        assert!(offers.throughput > 0.0, "{report}");
        for latency in [offers.committed, offers.first_run, offers.done] {
            assert_eq!(latency.map(|l| l.samples), Some(10), "{report}");
        }
        // Five runs per change, and six offer states (both phases).
        assert_eq!(offers.stage_runs, 40 * 5, "{report}");
        assert_eq!(offers.offer_states, 40 * 6, "{report}");
        assert_eq!(offers.duplicates, 0, "{report}");
        let jobs = report.jobs.as_ref().expect("the jobs workload ran");
        assert!(jobs.throughput > 0.0, "{report}");
        for latency in [jobs.first_run, jobs.done] {
            assert_eq!(latency.map(|l| l.samples), Some(10), "{report}");
        }
        // Three step runs per launch (both phases), and one success each.
        assert_eq!(jobs.step_runs, 40 * 3, "{report}");
        assert!(jobs.events >= 40, "{report}");
        assert_eq!(jobs.duplicates, 0, "{report}");
        let text = report.to_string();
        assert!(
            text.contains("does not implement transaction markers"),
            "{text}"
        );
        assert!(text.contains("≥ 0.50×"), "{text}");
        assert!(text.contains("offers, 5 stages, exactly-once on"), "{text}");
        assert!(
            text.contains("jobs, 3-step chains, exactly-once on"),
            "{text}"
        );
    }
}
