//! Resident memory per offer without Kafka: what the shards hold for offers
//! that went through every stage, as `reactor bench --workload offers`
//! drives them (5 stages; each stage's worker answers its run at once with
//! a body update and a state), against the offer's raw JSON (body and stage
//! states): `target/release/examples/offer_memory 200000 4` (offers,
//! shards). The bench's own figure is the whole process's growth, the
//! in-process brokers' copies of every record included; this one is what
//! an instance holds. For where it goes, run it under
//! `valgrind --tool=massif` with the global allocator lines removed. Every
//! output is encoded as the runtime encodes it, so an instruction count
//! (`valgrind --tool=callgrind … 5000 4`) covers the runtime thread's work
//! per offer too.

mod common;

use jiff::{SignedDuration, Timestamp};
use reactor::action::Action;
use reactor::engine::{Input, RunResult, StageReply, Update};
use reactor::offer::{Body, Change, OfferChange};
use reactor::router::Router;
use reactor::run::Status;
use serde_json::json;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const STAGES: usize = 5;

/// The bench's stages: each watches `n`, runs once (`state == null`).
fn config_toml() -> String {
    (0..STAGES)
        .map(|k| {
            format!(
                "[[stage]]\nname = \"s{k}\"\nwatch = [\"n\"]\nwhen = \"state == null\"\n\
                 topic = \"bench.s{k}\"\nmax_parallelism = 1000000\ntimeout = \"1m\"\n\n"
            )
        })
        .collect()
}

/// The bench's offer `i`.
fn body(i: usize) -> Body {
    let categories = ["sport", "home", "electronics", "books"];
    let body = json!({
        "n": i,
        "price": 100 + i % 900,
        "category": categories[i % categories.len()],
    });
    body.as_object().cloned().unwrap()
}

/// The bench worker's answer: the update `{"STAGE": version}` and the state
/// `{"seen": version}`.
fn answer(stage: &str, run_id: &str, pass: u64, version: u64) -> RunResult {
    let mut update = Body::new();
    update.insert(stage.to_string(), json!(version));
    let mut result = RunResult::new(run_id, pass, Status::Succeeded);
    result.stage = StageReply {
        version: Some(version),
        update: Some(Update::Patch(update)),
        state: Some(json!({"seen": version})),
        timer: None,
    };
    result
}

/// Bytes of the JSON of offer `i` complete: its body with every stage's
/// update, and every stage's state (as the bench counts it).
fn raw_bytes(i: usize) -> usize {
    let mut body = body(i);
    let mut states = serde_json::Map::new();
    for k in 0..STAGES {
        body.insert(format!("s{k}"), json!(k + 1));
        states.insert(format!("s{k}"), json!({"seen": k + 1}));
    }
    serde_json::to_vec(&body).unwrap().len() + serde_json::to_vec(&states).unwrap().len()
}

/// `action` as the runtime writes it to Kafka (the changelog record's value).
fn encode(action: &Action, at: Timestamp) -> Vec<u8> {
    use reactor::codec::{self, Format};
    match action {
        Action::StageRun(run) => {
            codec::encode_stage_run_command(run, "bench.results", at, Format::Protobuf)
        }
        Action::OfferState(state) => codec::encode_offer_state(state, at, Format::Protobuf),
        Action::Changelog(record) => codec::encode_changelog(record.clone())
            .1
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn main() {
    let mut args = common::counts();
    let offers = args.next().unwrap_or(200_000);
    let partitions = args.next().unwrap_or(4) as i32;
    let config = reactor::config::parse(&config_toml(), "probe.toml")
        .unwrap()
        .config;
    let router = Router::new(&config, partitions);
    let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut shards = common::fresh_shards(&config, &router, t0);
    let raw = (0..offers).map(raw_bytes).sum::<usize>() as f64 / offers as f64;
    std::thread::sleep(std::time::Duration::from_secs(2));
    let r0 = common::resident();
    let mut runs = 0usize;
    let mut encoded = 0usize;
    for i in 0..offers {
        let now = t0 + SignedDuration::from_millis(i as i64);
        let id = format!("o{i}");
        let shard = &mut shards[router.key(&id) as usize];
        let change = OfferChange {
            offer_id: id,
            change: Change::Body(body(i)),
            source: Some("reactor-bench".into()),
        };
        let mut out: Vec<(Timestamp, Action)> = Vec::new();
        shard
            .apply(Input::Offer(change), now, None, &mut out)
            .unwrap();
        // Answer each stage run as the bench worker does, one at a time,
        // until the offer asks for nothing more.
        loop {
            // Every output encoded as the runtime encodes it, so that an
            // instruction count of this probe covers the runtime thread's
            // work per offer.
            let mut run = None;
            for (at, action) in out.drain(..) {
                encoded += encode(&action, at).len();
                if let Action::StageRun(r) = action {
                    run = run.or(Some(r));
                }
            }
            let Some(run) = run else { break };
            runs += 1;
            let result = answer(&run.stage, &run.run_id, run.pass, run.version);
            shard
                .apply(Input::Result(result), now, None, &mut out)
                .unwrap();
        }
    }
    assert_eq!(runs, offers * STAGES, "every stage ran once on every offer");
    assert!(encoded > 0);
    let per = common::resident_growth(r0, offers);
    println!(
        "{offers} offers through {STAGES} stages, {raw:.0} B of JSON each (body and stage states): {per:.0} B resident per offer in the shards ({:.1}x)",
        per / raw
    );
    drop((shards, router, config));
}
