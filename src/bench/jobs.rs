//! The jobs workload: process chains launched by command, end to end.
//!
//! Every input is a `launch` command of process `chain` for a key of its own
//! (`k{i}`), on `reactor.commands`. The chain is three steps over three jobs
//! with run topics of their own (`reserve → send → notify`, as in the
//! payout example); a bench worker per job topic answers every step run at
//! once with a success. One launch thus makes three step runs, three
//! results and the instance's events, and completes with its
//! `process_succeeded` event.
//!
//! Measured with exactly-once on, with the same two phases as the other
//! workloads: throughput is chains per second from the first launch to the
//! last `process_succeeded` a `read_committed` reader receives, and records
//! in and out per second (launches, results, step runs and events) as a
//! ratio to the baseline; in the paced phase each launch's latency is taken
//! to its first step run reaching a worker (the queue's dispatch latency)
//! and to its `process_succeeded`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rdkafka::message::BorrowedMessage;
use rdkafka::Message;

use super::chain::{PROCESS, STEPS};
use super::cluster::{Cluster, Inputs};
use super::report::JobsMeasurement;
use super::stats::Summary;
use super::worker::{self, Answer};
use super::{Error, Plan};
use crate::action::StepRunCommand;
use crate::codec::{self, Format};
use crate::config::Config;
use crate::engine::{Command, RunResult};
use crate::run::Status;

/// The jobs workload as planned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct JobsPlan {
    /// Launches of the throughput phase.
    pub chains: usize,
    /// Launches of the latency phase.
    pub latency_chains: usize,
    /// Rate of the latency phase; `None`: half the measured throughput.
    pub latency_rate: Option<f64>,
}

/// Key of input `i`.
fn key(i: usize) -> String {
    format!("k{i}")
}

/// Index of key `k{i}`.
fn key_index(key: &str) -> Option<usize> {
    key.strip_prefix('k')?.parse().ok()
}

/// The input records: launch `i` starts the chain for key `k{i}`, keyed by
/// it (so it lands on the partition that owns the key).
pub(super) fn inputs(n: usize) -> Inputs {
    let records = (0..n)
        .map(|i| {
            let command = Command::Launch {
                process: PROCESS.into(),
                keys: vec![key(i)],
                params: Default::default(),
                position: Default::default(),
                reset: false,
                source: None,
            };
            (key(i), codec::encode_command(&command, Format::Protobuf))
        })
        .collect();
    Inputs { records }
}

/// The chain's three jobs with run topics `{prefix}.JOB`, unlimited, and
/// the process over them.
pub(super) fn config(prefix: &str) -> Result<Config, Error> {
    crate::config::parse(&super::chain::toml(prefix), "bench-jobs.toml")
        .map(|loaded| loaded.config)
        .map_err(|e| Error::Config(Box::new(e)))
}

/// What the bench worker answers: at once, success.
fn answer(run: &StepRunCommand) -> RunResult {
    RunResult::new(run.run_id.clone(), run.pass, Status::Succeeded)
}

/// The bench worker's answering of a step run command.
fn reply(bytes: &[u8]) -> Result<Answer, String> {
    let run = codec::decode_step_run_command(bytes)
        .map_err(|e| format!("not a step run command: {e}"))?;
    Ok(Answer {
        index: key_index(&run.key),
        payload: codec::encode_run_result(&answer(&run), &run.key, Format::Protobuf),
        key: run.key,
    })
}

/// The wire name of the event that completes a chain.
const SUCCEEDED: &str = "process_succeeded";

/// Only what the reader needs of an `Event` (schemas/reactor.proto): its
/// kind, process and key, the rest skipped unread. Decoding every event
/// whole was harness work counted against Reactor's CPU per record.
#[derive(Clone, PartialEq, prost::Message)]
struct EventHead {
    #[prost(string, tag = "1")]
    kind: String,
    #[prost(string, optional, tag = "35")]
    process: Option<String>,
    #[prost(string, optional, tag = "36")]
    key: Option<String>,
}

/// The index of the chain the event `payload` completes, if it is the
/// chain's `process_succeeded`.
fn completes(payload: &[u8]) -> Result<Option<usize>, String> {
    use prost::Message;
    let event = EventHead::decode(payload).map_err(|e| format!("not an event: {e}"))?;
    Ok(
        match (event.kind.as_str(), event.process.as_deref(), event.key) {
            (SUCCEEDED, Some(PROCESS), Some(key)) => key_index(&key),
            _ => None,
        },
    )
}

/// Measures the jobs workload with exactly-once on. `plan` is the bench's
/// plan with the jobs workload's launches.
pub(super) fn measure(
    cluster: &Cluster,
    plan: &Plan,
    jobs: &JobsPlan,
    inputs: &Arc<Inputs>,
) -> Result<JobsMeasurement, Error> {
    let config = config(&super::prefix("job"))?;
    let events_read = AtomicU64::new(0);
    let index_of = |m: &BorrowedMessage<'_>| {
        let index = completes(m.payload().unwrap_or_default())?;
        events_read.fetch_add(1, Ordering::Relaxed);
        Ok(index.map(|index| (index, None)))
    };
    let a = worker::measure(
        "jobs",
        cluster,
        config,
        plan,
        inputs,
        (|t| &t.commands, |t| &t.events),
        reply,
        jobs.latency_rate,
        &index_of,
    )?;
    let m = &a.phases;
    let events = events_read.load(Ordering::Relaxed);
    // Per chain: the launch and a result per step in, a run per step and
    // the instance's events out (counted, not assumed).
    let events_per_chain = events as f64 / (plan.changes + plan.latency_changes).max(1) as f64;
    let per_chain = 2.0 * STEPS.len() as f64 + 1.0 + events_per_chain;
    let (cpu_per_record, cpu_by_thread) = m
        .burst
        .cpu_per_record(m.burst.window_outputs as f64 * per_chain);
    Ok(JobsMeasurement {
        steps: STEPS.len(),
        chains: plan.changes,
        latency_chains: plan.latency_changes,
        latency_rate: m.steady.is_some().then_some(m.rate),
        latency_rate_auto: jobs.latency_rate.is_none(),
        window: m.burst.window,
        throughput: m.throughput,
        records: m.throughput * per_chain,
        cpu_per_record,
        cpu_by_thread,
        first_run: m
            .steady
            .as_ref()
            .and_then(|s| Summary::of(a.first_run.latencies(plan.latency_range().start, &s.sent))),
        done: m
            .steady
            .as_ref()
            .and_then(|s| Summary::of(s.latencies.clone())),
        step_runs: a.runs,
        worker_busy: a.worker_busy,
        events,
        events_per_chain,
        duplicates: m.burst.duplicates + m.steady.as_ref().map_or(0, |s| s.duplicates),
        setup: a.setup,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_launch_the_chain_for_a_key_each() {
        let inputs = inputs(3);
        assert_eq!(inputs.records[2].0, "k2");
        let command = codec::decode_command(&inputs.records[2].1).unwrap();
        let Command::Launch { process, keys, .. } = command else {
            panic!("{command:?}");
        };
        assert_eq!((process.as_str(), keys), ("chain", vec!["k2".to_string()]));
        assert_eq!(key_index("k2"), Some(2));
        assert_eq!(key_index("o2"), None);

        let config = config("bench-x").unwrap();
        assert_eq!(config.jobs.len(), 3);
        assert_eq!(config.job_topics()[2], "bench-x.notify");
        assert!(config.tasks.is_empty() && config.stages.is_empty());
    }

    /// One launch through the pure engine: three step runs, one at a time,
    /// each answered by the bench worker, then `process_succeeded`.
    #[test]
    fn one_launch_runs_three_steps_and_succeeds() {
        use crate::action::{Action, Event, Subject};
        use crate::engine::{Engine, Input};
        let config = config("bench-x").unwrap();
        let mut engine = Engine::new(&config);
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        engine.start(now).unwrap();
        let launch = codec::decode_command(&inputs(1).records[0].1).unwrap();
        let mut actions = engine.apply(Input::Command(launch), now).unwrap();
        let (mut jobs, mut done) = (Vec::new(), Vec::new());
        loop {
            let mut next = Vec::new();
            for action in actions {
                match action {
                    Action::StepRun(run) => next.push(*run),
                    Action::Event(e) => {
                        let bytes = codec::encode_event(&e, now, Format::Protobuf);
                        let index = completes(&bytes).unwrap();
                        // The reader's head finds the event the chain ends with.
                        let ends = matches!(&e, Event::ProcessSucceeded { subject: Subject::Process { process, key, .. } } if process == PROCESS && key == "k0");
                        assert_eq!(index.is_some(), ends, "{e:?}");
                        if ends {
                            assert_eq!(e.name(), SUCCEEDED);
                        }
                        done.extend(index);
                    }
                    _ => {}
                }
            }
            assert!(next.len() <= 1, "one step at a time");
            let Some(run) = next.pop() else { break };
            jobs.push(run.job.to_string());
            let answer = reply(&codec::encode_step_run_command(
                &run,
                "results",
                now,
                Format::Protobuf,
            ))
            .unwrap();
            assert_eq!((answer.key.as_str(), answer.index), ("k0", Some(0)));
            let result = codec::decode_run_result(&answer.payload).unwrap();
            actions = engine.apply(Input::Result(result), now).unwrap();
        }
        assert_eq!(jobs, STEPS);
        assert_eq!(done, [0]);
    }
}
