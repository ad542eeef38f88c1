//! The runtime thread's work per process chain, without Kafka: a launch
//! command starts `chain` for a key of its own, and each of its three steps
//! (jobs reserve, send, notify) is answered at once with a success, as
//! `reactor bench --workload jobs` drives them: the launch and each answer
//! decoded from their bytes as the runtime decodes them, every output
//! encoded as the runtime encodes it. For instruction counts that do not
//! depend on a noisy machine:
//! `valgrind --tool=callgrind --toggle-collect='*common::take' target/release/examples/job_path 5000 4`
//! (chains, shards), then `callgrind_annotate --inclusive=yes`; divide by the
//! chains. Without valgrind it prints the wall time per chain.

mod common;
// The bench's own chain, not a copy of it.
#[path = "../src/bench/chain.rs"]
mod chain;

use jiff::{SignedDuration, Timestamp};
use reactor::action::Action;
use reactor::codec::{self, Format};
use reactor::engine::{Command, RunResult};
use reactor::router::Router;
use reactor::run::Status;
use reactor::runtime::intake::Role;

// As the binary: allocation is a good part of the path.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut args = common::counts();
    let chains = args.next().unwrap_or(5_000);
    let partitions = args.next().unwrap_or(4) as i32;
    let config = reactor::config::parse(&chain::toml("bench"), "probe.toml")
        .unwrap()
        .config;
    let router = Router::new(&config, partitions);
    let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut shards = common::fresh_shards(&config, &router, t0);
    let launches: Vec<(String, Vec<u8>)> = (0..chains)
        .map(|i| {
            let key = format!("k{i}");
            let launch = Command::Launch {
                process: chain::PROCESS.into(),
                keys: vec![key.clone()],
                params: Default::default(),
                position: Default::default(),
                reset: false,
                source: None,
            };
            (key, codec::encode_command(&launch, Format::Protobuf))
        })
        .collect();
    let mut path = common::Path::new();
    let started = std::time::Instant::now();
    let mut runs = 0;
    for (i, (key, launch)) in launches.iter().enumerate() {
        let now = t0 + SignedDuration::from_millis(i as i64);
        let partition = router.key(key);
        let shard = &mut shards[partition as usize];
        let mut record = (Role::Commands, launch.clone());
        loop {
            let (role, payload) = &record;
            common::take(
                &mut path,
                shard,
                partition,
                Some((*role, None, payload)),
                now,
            );
            // The worker's part, outside the measured one: a success for
            // the step run the step asked for, as bytes.
            let Some(run) = path.out.iter().find_map(|(_, a)| match a {
                Action::StepRun(run) => Some(run),
                _ => None,
            }) else {
                break;
            };
            let answer = RunResult::new(run.run_id.as_str(), run.pass, Status::Succeeded);
            record = (
                Role::Results,
                codec::encode_run_result(&answer, key, Format::Protobuf),
            );
            runs += 1;
        }
        common::take(&mut path, shard, partition, None, now);
    }
    let elapsed = started.elapsed();
    assert_eq!(
        runs,
        chains * chain::STEPS.len(),
        "every step ran once per chain"
    );
    println!(
        "{chains} chains: {runs} step runs, {} records written; {:.0} ns per chain (worker included)",
        path.records,
        elapsed.as_nanos() as f64 / chains as f64
    );
}
