//! The command line of the product: `run`, `simulate`, `check`, `ctl set`,
//! `offer …`, `launch`, `submit`, `rescan`, `search`, `recover`, `tail`. The
//! `reactor` binary adds its tools (`dev`, `bench`), which live outside the
//! library.
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

mod launch;
pub mod ops;
mod tail;
mod tools;

pub use launch::KEYS_PER_COMMAND;

/// Reactor turns change streams into work.
#[derive(Debug, Parser)]
#[command(name = "reactor", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

/// The product's commands (the binary adds its tools, `dev` and `bench`).
#[derive(Debug, Subcommand)]
pub enum Cmd {
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
        /// Most tasks exported in `reactor_task_seconds_since_success`: the
        /// stalest this instance owns (each is a Prometheus series).
        #[arg(long, env = "REACTOR_TASK_AGE_SERIES", default_value_t = crate::metrics::DEFAULT_SERIES)]
        task_age_series: usize,
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
    /// Launch a process for keys (from the command line or a keys file), or
    /// run a task now (--task): commands to the partitions owning the keys.
    Launch(launch::LaunchArgs),
    /// Submit a job for a key: a key's jobs run one at a time, in queue order.
    Submit(launch::SubmitArgs),
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
    Tail(tail::TailArgs),
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

/// Entry point of a binary with only the product's commands.
pub fn main() -> ExitCode {
    run(Cli::parse().command)
}

/// Runs one of the product's commands.
pub fn run(command: Cmd) -> ExitCode {
    match command {
        Cmd::Run {
            config,
            brokers,
            admin,
            instance_id,
            task_age_series,
            log_json,
        } => {
            init_logs(log_json);
            let loaded = match load(&config) {
                Ok(loaded) => loaded,
                Err(code) => return code,
            };
            tools::run(loaded.config, brokers, admin, instance_id, task_age_series)
        }
        Cmd::Ctl { command } => tools::ctl(command),
        Cmd::Offer { command } => tools::offer(command),
        Cmd::Rescan(args) => tools::rescan(args),
        Cmd::Launch(args) => launch::launch(args),
        Cmd::Submit(args) => launch::submit(args),
        Cmd::Search(args) => ops::search(args),
        Cmd::Recover(args) => ops::recover(args),
        Cmd::Tail(args) => tail::tail(args),
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
pub fn init_logs(json: bool) {
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
