//! The runtime thread's work per process chain, without Kafka: a launch
//! command starts `chain` for a key of its own, and each of its three steps
//! (jobs reserve, send, notify) is answered at once with a success, as
//! `reactor bench --workload jobs` drives them; every output is encoded as
//! the runtime encodes it. For instruction counts that do not depend on a
//! noisy machine:
//! `valgrind --tool=callgrind --toggle-collect=job_path::chains_through target/release/examples/job_path 5000 4`
//! (chains, shards), then `callgrind_annotate --inclusive=yes`; divide by the
//! chains.

mod common;
// The bench's own chain, not a copy of it.
#[path = "../src/bench/chain.rs"]
mod chain;

use jiff::{SignedDuration, Timestamp};
use reactor::action::Action;
use reactor::config::KafkaSettings;
use reactor::engine::{Command, Input, RunResult};
use reactor::router::Router;
use reactor::run::Status;
use reactor::runtime::output::{self, OutRecords, OutTopics};
use reactor::shell::driver::Driver;

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
    let (runs, records) = chains_through(&mut shards, &router, chains, t0);
    assert_eq!(
        runs,
        chains * chain::STEPS.len(),
        "every step ran once per chain"
    );
    println!("{chains} chains: {runs} step runs, {records} records written");
}

/// The measured part (`--toggle-collect=job_path::chains_through` profiles it
/// alone): launches, answers, and the encoding of every output.
#[inline(never)]
fn chains_through(
    shards: &mut [Driver],
    router: &Router,
    chains: usize,
    t0: Timestamp,
) -> (usize, usize) {
    let settings = KafkaSettings::default();
    let names = OutTopics::new(&settings.topics);
    let mut encoded = OutRecords::default();
    let mut out: Vec<(Timestamp, Action)> = Vec::new();
    let (mut runs, mut records) = (0, 0);
    for i in 0..chains {
        let now = t0 + SignedDuration::from_millis(i as i64);
        let key = format!("k{i}");
        let partition = router.key(&key);
        let shard = &mut shards[partition as usize];
        let launch = Command::Launch {
            process: chain::PROCESS.into(),
            keys: vec![key],
            params: Default::default(),
            position: Default::default(),
            reset: false,
            source: None,
        };
        shard
            .apply(Input::Command(launch), now, None, &mut out)
            .unwrap();
        // Each step run answered as the bench worker does, until the chain
        // asks for nothing more.
        loop {
            let mut answer = None;
            for (_, action) in &out {
                if let Action::StepRun(run) = action {
                    answer = Some(RunResult::new(
                        run.run_id.clone(),
                        run.pass,
                        Status::Succeeded,
                    ));
                }
            }
            output::encode(
                out.drain(..).map(|(_, a)| a),
                partition,
                &settings,
                &names,
                now,
                &mut encoded,
            );
            records += encoded.len();
            encoded.clear();
            let Some(result) = answer else { break };
            runs += 1;
            shard
                .apply(Input::Result(result), now, None, &mut out)
                .unwrap();
        }
    }
    (runs, records)
}
