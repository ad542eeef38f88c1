//! The command line: `run`, `dev`, `simulate`, `check`, `ctl set`, `offer …`,
//! `rescan`, `search`, `recover`, `tail`, `bench`.
//!
//! Exit codes: 0 success, 1 a failure while running (bad input line, I/O),
//! 2 invalid configuration or usage.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use jiff::Timestamp;

use crate::config::{self, Loaded};
use crate::sim::{self, Simulator};

pub mod ops;
mod tools;

/// Reactor turns change streams into work.
#[derive(Debug, Parser)]
#[command(name = "reactor", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run an instance against Kafka (all instances of a deployment share `kafka.group_id`).
    Run {
        /// Configuration file (TOML).
        #[arg(short, long)]
        config: PathBuf,
        /// Bootstrap servers (overrides `kafka.brokers`).
        #[arg(long, env = "REACTOR_BROKERS")]
        brokers: Option<String>,
        /// Admin API address.
        #[arg(long, default_value = crate::admin::DEFAULT_ADDR)]
        admin: std::net::SocketAddr,
        /// This instance's stable name (transactional id suffix; default: host name).
        #[arg(long, env = "REACTOR_INSTANCE_ID")]
        instance_id: Option<String>,
        /// Log as JSON lines.
        #[arg(long)]
        log_json: bool,
    },
    /// Run Reactor on its embedded default: an in-process mock Kafka cluster,
    /// a demo CTL producer and demo workers, printing every decision.
    Dev {
        /// Configuration file (default: the embedded examples/dev.toml).
        #[arg(short, long)]
        config: Option<PathBuf>,
        /// Admin API address.
        #[arg(long, default_value = crate::admin::DEFAULT_ADDR)]
        admin: std::net::SocketAddr,
        /// Stop after this long (e.g. 30s); default: until Ctrl-C.
        #[arg(long, value_name = "DURATION")]
        r#for: Option<crate::duration::Duration>,
        /// Log as JSON lines.
        #[arg(long)]
        log_json: bool,
    },
    /// CTL parameters on any broker.
    Ctl {
        #[command(subcommand)]
        command: tools::CtlCmd,
    },
    /// Offers on any broker: changes to `topics.offers`, stage state and
    /// unpark commands to `topics.commands`.
    Offer {
        #[command(subcommand)]
        command: tools::OfferCmd,
    },
    /// Rescan a stage: one command per partition of `topics.commands`; each
    /// partition's owner checks its offers again and queues those the stage
    /// wants in its low-priority rescan lane.
    Rescan(tools::RescanArgs),
    /// Find tasks, stage slots and process instances by criteria on every
    /// partition: one `search` command each, one answer each, as a table.
    Search(ops::SearchArgs),
    /// Restart what the criteria find on every partition (from the start,
    /// from a step, or retrying), in the low-priority lanes, following the
    /// progress; or count it (`--dry-run`), or cancel one (`--cancel OP`).
    Recover(ops::RecoverArgs),
    /// Print a topic's records decoded, as JSON lines.
    Tail(tools::TailArgs),
    /// Measure end-to-end throughput and latency against a minimal rdkafka
    /// consume→produce loop on the same broker, exactly-once on and off.
    Bench(crate::bench::BenchArgs),
    /// Run the engine offline: timed JSON-lines inputs on stdin (or --input),
    /// every decision as a JSON line on stdout.
    Simulate {
        /// Configuration file (TOML).
        #[arg(short, long)]
        config: PathBuf,
        /// Read inputs from this file instead of standard input.
        #[arg(short, long)]
        input: Option<PathBuf>,
        /// After the last input, advance the clock to this time (RFC 3339).
        #[arg(long)]
        until: Option<Timestamp>,
        /// Print changelog records too.
        #[arg(long)]
        changelog: bool,
        /// Drop the engine after input N and restore it from its changelog.
        #[arg(long, value_name = "N")]
        crash_after: Option<usize>,
        /// At the end, print TASK's state and trigger explanation (repeatable):
        /// a JSON line `{"kind":"explain",…}` on stdout and a tree on stderr.
        #[arg(long, value_name = "TASK")]
        explain: Vec<String>,
    },
    /// Validate a configuration and print lint warnings.
    Check {
        /// Configuration file (TOML).
        #[arg(short, long)]
        config: PathBuf,
    },
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Run {
            config,
            brokers,
            admin,
            instance_id,
            log_json,
        } => {
            init_logs(log_json);
            let loaded = match load(&config) {
                Ok(loaded) => loaded,
                Err(code) => return code,
            };
            tools::run(loaded.config, brokers, admin, instance_id)
        }
        Cmd::Dev {
            config,
            admin,
            r#for,
            log_json,
        } => {
            init_logs(log_json);
            let config = match config
                .map(|p| std::fs::read_to_string(&p).map(|t| (t, p.display().to_string())))
            {
                None => None,
                Some(Ok(c)) => Some(c),
                Some(Err(e)) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let options = crate::dev::DevOptions {
                config,
                admin,
                duration: r#for.map(crate::duration::Duration::to_std),
            };
            match crate::dev::run(options) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e @ crate::dev::Error::Config(_)) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::Ctl { command } => tools::ctl(command),
        Cmd::Offer { command } => tools::offer(command),
        Cmd::Rescan(args) => tools::rescan(args),
        Cmd::Search(args) => ops::search(args),
        Cmd::Recover(args) => ops::recover(args),
        Cmd::Tail(args) => tools::tail(args),
        Cmd::Bench(args) if args.workload == crate::bench::Workload::Recovery => {
            init_logs(false);
            match crate::bench::recovery::run(&args) {
                Ok(report) => {
                    println!("{report}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::Bench(args) => {
            init_logs(false);
            match crate::bench::run(&args) {
                Ok(report) => {
                    println!("{report}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::Check { config } => match load(&config) {
            Ok(loaded) => {
                let c = &loaded.config;
                println!(
                    "{}: ok ({} tasks, {} pools, {} stages, {} jobs, {} processes, {} warnings)",
                    config.display(),
                    c.tasks.len(),
                    c.pools.len(),
                    c.stages.len(),
                    c.jobs.len(),
                    c.processes.len(),
                    loaded.warnings.len()
                );
                ExitCode::SUCCESS
            }
            Err(code) => code,
        },
        Cmd::Simulate {
            config,
            input,
            until,
            changelog,
            crash_after,
            explain,
        } => {
            let loaded = match load(&config) {
                Ok(loaded) => loaded,
                Err(code) => return code,
            };
            let options = SimOptions {
                until,
                changelog,
                crash_after,
                explain,
            };
            match simulate(loaded, input, options) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// Logs go to stderr; `RUST_LOG` filters them (default `info`).
fn init_logs(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// Loads a configuration, printing warnings; on error prints it and gives exit code 2.
pub(crate) fn load(path: &std::path::Path) -> Result<Loaded, ExitCode> {
    match config::load(path) {
        Ok(loaded) => {
            for w in &loaded.warnings {
                eprintln!("{w}");
            }
            Ok(loaded)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Err(ExitCode::from(2))
        }
    }
}

struct SimOptions {
    until: Option<Timestamp>,
    changelog: bool,
    crash_after: Option<usize>,
    explain: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
enum SimError {
    #[error("{0}")]
    Sim(#[from] sim::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("--explain {0}: no such task")]
    UnknownTask(String),
}

#[derive(serde::Serialize)]
struct ExplainLine<'a> {
    at: Timestamp,
    kind: &'static str,
    #[serde(flatten)]
    view: &'a crate::engine::TaskView,
}

/// Streams inputs through the simulator, writing each output as it happens.
fn simulate(loaded: Loaded, input: Option<PathBuf>, options: SimOptions) -> Result<(), SimError> {
    let reader: Box<dyn BufRead> = match input {
        Some(path) => Box::new(std::io::BufReader::new(std::fs::File::open(path)?)),
        None => Box::new(std::io::stdin().lock()),
    };
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    let mut sim = Simulator::new(loaded.config);
    let write = |outputs: Vec<sim::Output>, w: &mut dyn Write| -> Result<(), SimError> {
        for o in outputs {
            if options.changelog || !matches!(o.action, crate::action::Action::Changelog(_)) {
                serde_json::to_writer(&mut *w, &o)?;
                w.write_all(b"\n")?;
            }
        }
        Ok(())
    };
    sim::drive(
        &mut sim,
        reader.lines().map(|l| l.map_err(SimError::from)),
        options.crash_after,
        options.until,
        |outputs| write(outputs, &mut w),
    )?;
    for task in &options.explain {
        let (at, view) = sim
            .explain(task)
            .ok_or_else(|| SimError::UnknownTask(task.clone()))?;
        let line = ExplainLine {
            at,
            kind: "explain",
            view: &view,
        };
        serde_json::to_writer(&mut w, &line)?;
        w.write_all(b"\n")?;
        w.flush()?;
        eprintln!(
            "{task} ({}) at {at}:\n{}",
            view.state.as_str(),
            view.explain
        );
    }
    w.flush()?;
    Ok(())
}
