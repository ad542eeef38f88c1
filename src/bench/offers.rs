//! The offers workload: offer changes through stages, end to end.
//!
//! Every input is a new offer `o{i}` (`{"n": i, "price": …, "category": …}`).
//! `--stages` stages (`s0`, `s1` …) watch `n` and run while they have no
//! state, so each change wakes every stage once; Reactor runs them one at a
//! time per offer (DESIGN §6). A bench worker per stage answers every run at
//! once with the update `{"sK": version}` and the state `{"seen": version}`,
//! computed from the run's version; no stage watches another's field, so
//! nothing runs twice. One offer change thus makes `stages` stage runs,
//! `stages` results and `stages + 1` offer states, the last of them holding
//! every stage's state: that one completes the change.
//!
//! Measured with exactly-once on, with the same two phases as the tasks
//! workload: throughput is offer changes per second from the first produce
//! call to the last completing `OfferState` a `read_committed` reader
//! receives; in the paced phase each change's latency is taken to its own
//! `OfferState` (version 1: the change committed), to its first stage run
//! reaching a worker, and to its completing `OfferState`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rdkafka::message::BorrowedMessage;
use rdkafka::Message;
use serde_json::json;

use super::cluster::{Cluster, Inputs};
use super::offer_load::stage_name;
pub(super) use super::offer_load::{answer, input, offer_index, toml};
use super::report::OffersMeasurement;
use super::stats::Summary;
use super::worker::{self, Answer, Marks};
use super::{Error, Plan};
use crate::codec::{self, Format};
use crate::config::Config;
use crate::offer::Change;

/// The offers workload as planned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct OffersPlan {
    /// Offer changes of the throughput phase.
    pub changes: usize,
    /// Offer changes of the latency phase.
    pub latency_changes: usize,
    /// Rate of the latency phase; `None`: half the measured throughput.
    pub latency_rate: Option<f64>,
    /// Stages every change goes through.
    pub stages: usize,
    /// Offers the memory per offer is measured with.
    pub memory_offers: usize,
}

/// The input records: change `i` creates offer `o{i}`.
pub(super) fn inputs(n: usize) -> Inputs {
    Inputs {
        records: (0..n).map(input).collect(),
    }
}

/// The configuration of `stages` stages with run topics `{prefix}.s{k}`
/// ([`toml`]).
pub(super) fn config(stages: usize, prefix: &str) -> Result<Config, Error> {
    crate::config::parse(&toml(stages, prefix), "bench-offers.toml")
        .map(|loaded| loaded.config)
        .map_err(|e| Error::Config(Box::new(e)))
}

/// Bytes of the JSON of offer `o{i}` complete (its body with every stage's
/// update, and every stage's state): the raw payload Reactor holds for it.
pub(super) fn complete_offer_bytes(i: usize, stages: usize) -> usize {
    let mut body = codec::decode_offer_change(None, Some(&input(i).1))
        .ok()
        .and_then(|c| match c.change {
            Change::Body(b) => Some(b),
            _ => None,
        })
        .unwrap_or_default();
    let mut states = serde_json::Map::new();
    for k in 0..stages {
        body.insert(stage_name(k), json!(k + 1));
        states.insert(stage_name(k), json!({"seen": k + 1}));
    }
    serde_json::to_vec(&body).map_or(0, |b| b.len())
        + serde_json::to_vec(&states).map_or(0, |s| s.len())
}

/// The bench worker's [`Answering`] of a stage run command.
fn reply(bytes: &[u8]) -> Result<Answer, String> {
    let run = codec::decode_stage_run_command(bytes)
        .map_err(|e| format!("not a stage run command: {e}"))?;
    Ok(Answer {
        index: offer_index(&run.offer),
        payload: codec::encode_run_result(&answer(&run), &run.offer, Format::Protobuf),
        key: run.offer,
    })
}

/// Measures the offers workload with exactly-once on. `plan` is the bench's
/// plan with the offers workload's changes.
pub(super) fn measure(
    cluster: &Cluster,
    plan: &Plan,
    offers: &OffersPlan,
    inputs: &Arc<Inputs>,
) -> Result<OffersMeasurement, Error> {
    let stages = offers.stages;
    let config = config(stages, &super::prefix("stage"))?;
    let committed = Marks::new(plan.changes + plan.latency_changes);
    let states_read = AtomicU64::new(0);
    let index_of = |m: &BorrowedMessage<'_>| {
        let state = StateHead::read(m.payload().unwrap_or_default())?;
        let index = offer_index(&state.offer_id)
            .ok_or_else(|| format!("unknown offer {}", state.offer_id))?;
        states_read.fetch_add(1, Ordering::Relaxed);
        if state.version == 1 {
            committed.mark(index);
        }
        Ok((state.states.len() >= stages).then_some((index, None)))
    };
    let a = worker::measure(
        "offers",
        cluster,
        config,
        plan,
        inputs,
        (|t| &t.offers, |t| &t.offer_state),
        reply,
        offers.latency_rate,
        &index_of,
    )?;
    let m = &a.phases;
    // What an instance holds per offer, in a process of its own: this
    // process's growth holds the in-process brokers' records too.
    let memory = super::memory::in_child(
        super::memory::Item::Offer,
        offers.memory_offers,
        stages,
        plan.partitions,
    )?;
    // Per change: the change and one result per stage in, one run per stage
    // and one offer state more than stages out.
    let per_change = (3 * stages + 2) as f64;
    let (cpu_per_record, cpu_by_thread) = m
        .burst
        .cpu_per_record(m.burst.window_outputs as f64 * per_change);
    let latency = |marks: &Marks| {
        m.steady
            .as_ref()
            .and_then(|s| Summary::of(marks.latencies(plan.latency_range().start, &s.sent)))
    };
    Ok(OffersMeasurement {
        stages,
        changes: plan.changes,
        latency_changes: plan.latency_changes,
        latency_rate: m.steady.is_some().then_some(m.rate),
        latency_rate_auto: offers.latency_rate.is_none(),
        window: m.burst.window,
        throughput: m.throughput,
        records: m.throughput * per_change,
        cpu_per_record,
        cpu_by_thread,
        memory,
        committed: latency(&committed),
        first_run: latency(&a.first_run),
        done: m
            .steady
            .as_ref()
            .and_then(|s| Summary::of(s.latencies.clone())),
        stage_runs: a.runs,
        worker_busy: a.worker_busy,
        offer_states: states_read.load(Ordering::Relaxed),
        duplicates: m.burst.duplicates + m.steady.as_ref().map_or(0, |s| s.duplicates),
        setup: a.setup,
    })
}

/// Only what the reader needs of an `OfferState` (schemas/reactor.proto):
/// the offer, the version and how many stages have a state, each state
/// (a map entry) left as its bytes and the body skipped unread. Decoding
/// every state whole (the body as a `Struct`, each stage's value) was
/// harness work counted against Reactor's CPU per record.
#[derive(Clone, PartialEq, prost::Message)]
struct StateHead {
    #[prost(string, tag = "1")]
    offer_id: String,
    #[prost(uint64, tag = "2")]
    version: u64,
    #[prost(bytes = "vec", repeated, tag = "6")]
    states: Vec<Vec<u8>>,
}

impl StateHead {
    fn read(payload: &[u8]) -> Result<StateHead, String> {
        use prost::Message;
        StateHead::decode(payload).map_err(|e| format!("not an offer state: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::StageRunCommand;
    use crate::engine::Update;
    use crate::offer::Body;

    #[test]
    fn inputs_create_offers_the_stages_watch() {
        let inputs = inputs(3);
        assert_eq!(inputs.records[2].0, "o2");
        let change = codec::decode_offer_change(Some(b"o2"), Some(&inputs.records[2].1)).unwrap();
        let Change::Body(body) = change.change else {
            panic!("{change:?}");
        };
        assert_eq!(body["n"], json!(2));
        assert_eq!(offer_index("o2"), Some(2));
        assert_eq!(offer_index("x2"), None);

        let config = config(5, "bench-x").unwrap();
        assert_eq!(config.stages.len(), 5);
        assert_eq!(config.stage_topics()[4], "bench-x.s4");
        assert!(config.tasks.is_empty());
        assert!(config.stages.iter().all(|s| s.watch == ["n"]));
    }

    #[test]
    fn the_worker_answers_from_the_runs_version() {
        let run = StageRunCommand {
            stage: "s3".into(),
            offer: "o9".into(),
            run_id: "s3/o9#1".into(),
            attempt: 1,
            pass: 4,
            version: 3,
            body: Body::new().into(),
            state: None,
            deadline: "2026-01-01T00:00:00Z".parse().unwrap(),
            topic: "".into(),
            source: None,
        };
        let result = answer(&run);
        assert_eq!((result.run_id.as_str(), result.pass), ("s3/o9#1", 4));
        assert_eq!(result.stage.version, Some(3));
        let Some(Update::Patch(patch)) = &result.stage.update else {
            panic!("{result:?}");
        };
        assert_eq!(patch["s3"], json!(3));
        let bytes = codec::encode_run_result(&result, "o9", Format::Protobuf);
        assert_eq!(codec::decode_run_result(&bytes).unwrap(), result);
    }

    /// Five stages through the pure engine: one change makes five runs (one
    /// at a time), six offer states, and the last holds every stage's state.
    #[test]
    fn one_change_makes_a_run_per_stage_and_a_completing_state() {
        use crate::action::Action;
        use crate::engine::{Engine, Input};
        let config = config(5, "bench-x").unwrap();
        let mut engine = Engine::new(&config);
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        engine.start(now).unwrap();
        let inputs = inputs(1);
        let change = codec::decode_offer_change(Some(b"o0"), Some(&inputs.records[0].1)).unwrap();
        let mut actions = engine.apply(Input::Offer(change), now).unwrap();
        let (mut runs, mut states) = (0, Vec::new());
        loop {
            let mut next = Vec::new();
            for action in actions {
                match action {
                    Action::StageRun(run) => {
                        runs += 1;
                        next.push(run);
                    }
                    Action::OfferState(state) => states.push(state),
                    _ => {}
                }
            }
            assert!(next.len() <= 1, "one stage at a time");
            let Some(run) = next.pop() else { break };
            actions = engine.apply(Input::Result(answer(&run)), now).unwrap();
        }
        assert_eq!(runs, 5);
        assert_eq!(states.len(), 6);
        // The reader's head of each state is the state's own offer,
        // version and number of stage states.
        for state in &states {
            let bytes = codec::encode_offer_state(state, now, Format::Protobuf);
            let head = StateHead::read(&bytes).unwrap();
            assert_eq!(
                (head.offer_id.as_str(), head.version, head.states.len()),
                (state.offer.as_str(), state.version, state.states.len())
            );
        }
        assert_eq!(states[0].version, 1);
        assert!(states[..5].iter().all(|s| s.states.len() < 5));
        assert_eq!(states[5].states.len(), 5);
    }
}
