//! The runtime thread's work per offer change, without Kafka: each change of
//! the offers workload (`reactor bench --workload offers`) decoded as the
//! runtime decodes it, each stage run answered as the bench worker answers
//! it (encoded, then decoded by the runtime's decoder) until the offer asks
//! for nothing more, every output encoded as the runtime encodes it. For
//! instruction counts that do not depend on a noisy machine:
//! `valgrind --tool=callgrind --toggle-collect='*common::take' target/release/examples/offer_path 5000 4 5`
//! (offers, shards, stages), then `callgrind_annotate --inclusive=yes`;
//! divide by the offers. Without valgrind it prints the wall time per offer.

mod common;
// The bench's own load, not a copy of it: that file names the crate's
// modules through these imports.
#[allow(dead_code)]
#[path = "../src/bench/offer_load.rs"]
mod offer_load;

#[allow(unused_imports)]
use reactor::{action, codec, engine, offer, run};

use jiff::{SignedDuration, Timestamp};
use reactor::action::Action;
use reactor::router::Router;
use reactor::runtime::intake::Role;

// As the binary: allocation is a good part of the path.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut args = common::counts();
    let offers = args.next().unwrap_or(5_000);
    let partitions = args.next().unwrap_or(4) as i32;
    let stages = args.next().unwrap_or(5);
    let config = reactor::config::parse(&offer_load::toml(stages, "bench"), "probe.toml")
        .unwrap()
        .config;
    let router = Router::new(&config, partitions);
    let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut shards = common::fresh_shards(&config, &router, t0);
    let inputs: Vec<(String, Vec<u8>)> = (0..offers).map(offer_load::input).collect();
    let mut path = common::Path::new();
    let started = std::time::Instant::now();
    let mut runs = 0;
    for (i, (key, value)) in inputs.iter().enumerate() {
        let now = t0 + SignedDuration::from_millis(i as i64);
        let partition = router.key(key);
        let shard = &mut shards[partition as usize];
        let mut record = (Role::Offers, key.clone().into_bytes(), value.clone());
        loop {
            let (role, key, payload) = &record;
            common::take(
                &mut path,
                shard,
                partition,
                Some((*role, Some(key), payload)),
                now,
            );
            // The worker's part, outside the measured one: answer the run
            // the step asked for, as bytes the runtime decodes next.
            let Some(run) = path.out.iter().find_map(|(_, a)| match a {
                Action::StageRun(run) => Some(run),
                _ => None,
            }) else {
                break;
            };
            let answer = offer_load::answer(run);
            let payload = codec::encode_run_result(&answer, &run.offer, codec::Format::Protobuf);
            record = (Role::Results, run.offer.clone().into_bytes(), payload);
            runs += 1;
        }
        common::take(&mut path, shard, partition, None, now);
    }
    let elapsed = started.elapsed();
    assert_eq!(runs, offers * stages, "every stage ran once per offer");
    println!(
        "{offers} offers: {runs} stage runs, {} records written; {:.0} ns per offer (worker included)",
        path.records,
        elapsed.as_nanos() as f64 / offers as f64
    );
}
