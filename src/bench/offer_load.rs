//! The offers workload's load: its stages as configuration text, its input
//! records and its worker's answer. It names the crate only by the modules
//! the binary and a probe both import at their root, so that the probe
//! `examples/offer_path.rs` includes this very file and counts the work of
//! the offers the bench measures.

use std::fmt::Write;

use serde_json::json;

use crate::action::StageRunCommand;
use crate::codec::{self, Format};
use crate::engine::{RunResult, StageReply, Update};
use crate::offer::{Body, Change, OfferChange};
use crate::run::Status;

/// Name of stage `k`, also the body field its worker sets.
pub fn stage_name(k: usize) -> String {
    format!("s{k}")
}

/// Key and offer id of input `i`.
pub fn offer_id(i: usize) -> String {
    format!("o{i}")
}

/// Index of offer `o{i}`.
pub fn offer_index(id: &str) -> Option<usize> {
    id.strip_prefix('o')?.parse().ok()
}

/// Input `i`, keyed by its offer id: the change that creates offer `o{i}`
/// (`{"n": i, "price": …, "category": …}`).
pub fn input(i: usize) -> (String, Vec<u8>) {
    let categories = ["sport", "home", "electronics", "books"];
    let body = json!({
        "n": i,
        "price": 100 + i % 900,
        "category": categories.get(i % categories.len()).copied().unwrap_or_default(),
    });
    let change = OfferChange {
        offer_id: offer_id(i),
        change: Change::Body(body.as_object().cloned().unwrap_or_default()),
        source: Some("reactor-bench".into()),
    };
    let value = codec::encode_offer_change(&change, Format::Protobuf);
    (change.offer_id, value)
}

/// `stages` stages with run topics `{prefix}.s{k}`, as configuration text;
/// no tasks. Each stage watches `n`, runs while it has no state, and may run
/// on every offer at once (`max_parallelism`), so the measurement is of
/// Reactor, not of a limit.
pub fn toml(stages: usize, prefix: &str) -> String {
    let mut text = String::new();
    for k in 0..stages {
        let _ = writeln!(
            text,
            "[[stage]]\nname = \"{name}\"\nwatch = [\"n\"]\nwhen = \"state == null\"\n\
             topic = \"{prefix}.{name}\"\nmax_parallelism = 1000000\ntimeout = \"1m\"\n",
            name = stage_name(k)
        );
    }
    text
}

/// What the bench worker answers: at once, success, computed from the run's
/// version, with the update `{"STAGE": version}` and the state `{"seen": version}`.
pub fn answer(run: &StageRunCommand) -> RunResult {
    let mut update = Body::new();
    update.insert(run.stage.clone(), json!(run.version));
    let mut result = RunResult::new(run.run_id.clone(), run.pass, Status::Succeeded);
    result.stage = StageReply {
        version: Some(run.version),
        update: Some(Update::Patch(update)),
        state: Some(json!({"seen": run.version})),
        timer: None,
    };
    result
}
