//! The runtime thread's work per CTL change, without Kafka: decode the
//! change and find its parameter in the router, apply it to one shard where
//! it fires one task, encode the run command and changelog record. For instruction counts that do not depend
//! on a noisy machine, counted over the changes alone:
//! `valgrind --tool=callgrind --toggle-collect=fire_path::fire target/release/examples/fire_path 20000`
//! then `callgrind_annotate --inclusive=yes` on its output; divide by the
//! changes (the second argument, default all tasks). With `PROBE_BYTES=1`
//! it also prints the bytes each change makes per topic (outside a
//! profile: counting them is not the runtime's work).

mod common;

use jiff::{SignedDuration, Timestamp};
use reactor::codec::{self, CtlRecord, Format};
use reactor::config::KafkaSettings;
use reactor::engine::Engine;
use reactor::router::Router;
use reactor::runtime::output;

// As the binary: allocation is a good part of the path.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut args = common::counts();
    let tasks = args.next().unwrap_or(20_000);
    let changes = args.next().unwrap_or(tasks).min(tasks);
    let text = common::bench_tasks_toml(tasks);
    let config = reactor::config::parse(&text, "probe.toml").unwrap().config;
    let mut engine = Engine::restore(&config, |_| true, std::iter::empty()).unwrap();
    let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let settings = KafkaSettings::default();
    // Built for every task whatever `changes` is: only applying them differs.
    let inputs: Vec<Vec<u8>> = (0..tasks)
        .map(|i| {
            let record = CtlRecord {
                entity: format!("bench.t{i}"),
                param: "max_dt".into(),
                value: t0 + SignedDuration::from_secs(i as i64),
            };
            codec::encode_ctl_change(&record, None, "", Format::Protobuf)
        })
        .collect();
    engine.start(t0).unwrap();
    // A clock's reading has nanoseconds, as the runtime's `now` has: whole
    // seconds would write shorter timestamps than a run does.
    let now = t0 + SignedDuration::new(3_600, 456_789_123);
    let router = Router::new(&config, 4);
    let started = std::time::Instant::now();
    let (records, bytes) = fire(&mut engine, &router, &inputs[..changes], &settings, now);
    // Wall time too: the instruction count misses what cache misses cost
    // once the tasks outgrow the caches (the bench's millions).
    eprintln!(
        "{} ns per change over {changes} changes of {tasks} tasks",
        started.elapsed().as_nanos() / changes.max(1) as u128
    );
    // Bytes (key and value) per record: what the brokers and librdkafka
    // copy and checksum for each.
    let input: usize = inputs[..changes].iter().map(Vec::len).sum();
    let per = |n: usize| n as f64 / changes.max(1) as f64;
    if !bytes.is_empty() {
        eprintln!(
            "bytes per change: input {:.0} (value), {}",
            per(input),
            bytes
                .iter()
                .map(|(topic, n)| format!("{topic} {:.0}", per(*n)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    assert_eq!(
        records,
        2 * changes,
        "a run command and a record per change"
    );
}

/// Changes looked up and fetched ahead together, as the runtime does.
const CHUNK: usize = 32;

/// The measured part (`--toggle-collect=fire_path::fire` profiles it alone).
#[inline(never)]
fn fire(
    engine: &mut Engine,
    router: &Router,
    inputs: &[Vec<u8>],
    settings: &KafkaSettings,
    now: Timestamp,
) -> (usize, std::collections::BTreeMap<String, usize>) {
    let names = output::OutTopics::new(&settings.topics);
    let mut out = output::OutRecords::default();
    let mut records = 0;
    let mut bytes = std::collections::BTreeMap::<String, usize>::new();
    // Off by default: counting is not the runtime's work.
    let count_bytes = std::env::var_os("PROBE_BYTES").is_some();
    let prefetch = std::env::var_os("PROBE_NO_PREFETCH").is_none();
    let (mut named, mut ids) = (Vec::with_capacity(CHUNK), Vec::with_capacity(CHUNK));
    for chunk in inputs.chunks(CHUNK) {
        // As the runtime reads CTL records: a chunk's parameters looked up
        // in the router, what applying them reads fetched ahead, then each
        // applied to the shard.
        named.clear();
        named.extend(chunk.iter().map(|bytes| {
            codec::read_known_ctl_change(bytes, |e, p| router.ctl_id(e, p))
                .unwrap()
                .unwrap()
        }));
        if prefetch {
            // A list reused, as the runtime's is.
            ids.clear();
            ids.extend(named.iter().map(|&(id, _)| id));
            engine.prefetch_named_ctl(&ids);
        }
        for &(id, value) in &named {
            let mut actions = engine.apply_named_ctl(id, value, now).unwrap();
            output::encode(actions.drain(..), 0, settings, &names, now, &mut out);
            // As the shard driver does: the list goes back to the engine.
            engine.recycle(actions);
            records += out.len();
            for r in out.iter().filter(|_| count_bytes) {
                *bytes.entry(r.topic.to_string()).or_default() +=
                    r.key.len() + r.payload.map_or(0, <[u8]>::len);
            }
            out.clear();
        }
    }
    (records, bytes)
}
