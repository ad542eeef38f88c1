//! The `reactor` binary: the product's command line ([`reactor::cli`]) and
//! two tools that are not part of the library — `reactor dev` (the embedded
//! demo on an in-process mock cluster) and `reactor bench` (the end-to-end
//! harness of DESIGN §13). The tools use the library through its public API
//! only, as any user of the crate would.

mod bench;
mod dev;

/// Records are many small, short-lived buffers (decoded inputs, actions,
/// encoded outputs): glibc's malloc spent a fifth of the runtime thread on
/// them; mimalloc a fraction of that. Built without transparent huge
/// pages, and overriding `malloc` for librdkafka too (Cargo.toml says why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// The tools' paths name library modules as `crate::…`; these imports make
// those names the library's.
use reactor::{
    action, admin, clock, codec, config, ctl, duration, engine, kafka, metrics, offer, proto,
    router, run, runtime, service, shell,
};

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Reactor turns change streams into work.
#[derive(Debug, Parser)]
#[command(name = "reactor", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    #[command(flatten)]
    Product(reactor::cli::Cmd),
    /// Run Reactor on its embedded default: an in-process mock Kafka cluster,
    /// a demo CTL producer and demo workers, printing every decision.
    Dev {
        /// Configuration file (default: the embedded examples/dev.toml).
        #[arg(short, long)]
        config: Option<std::path::PathBuf>,
        /// Admin API address.
        #[arg(long, default_value = reactor::admin::DEFAULT_ADDR)]
        admin: std::net::SocketAddr,
        /// Stop after this long (e.g. 30s); default: until Ctrl-C.
        #[arg(long, value_name = "DURATION")]
        r#for: Option<duration::Duration>,
        /// Log as JSON lines.
        #[arg(long)]
        log_json: bool,
    },
    /// Measure end-to-end throughput and latency against a minimal rdkafka
    /// consume→produce loop on the same broker, exactly-once on and off.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Product(command) => reactor::cli::run(command),
        Command::Dev {
            config,
            admin,
            r#for,
            log_json,
        } => {
            reactor::cli::init_logs(log_json);
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
            let options = dev::DevOptions {
                config,
                admin,
                duration: r#for.map(duration::Duration::to_std),
            };
            match dev::run(options) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e @ dev::Error::Config(_)) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Bench(args) => bench::command(&args),
    }
}
