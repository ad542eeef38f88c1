//! Glue for process tests on any broker: a two-step `payout` process, step
//! run commands and events read back, and a worker answering every step.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::producer::{BaseRecord, Producer};

use reactor::action::{Event, StepRunCommand, Subject};
use reactor::codec::{self, Format};
use reactor::engine::{RunResult, StepReply};
use reactor::run::Status;

use super::{distinct, Record, TestKafka};

/// A `payout` chain `reserve → send` over two jobs with their own topics,
/// launched by command or by a record on `PREFIX.payments`.
pub fn processes(kafka: &TestKafka) -> String {
    format!(
        r#"
[[job]]
name = "reserve"
topic = "{p}.reserve.runs"
timeout = "1m"

[[job]]
name = "send"
topic = "{p}.send.runs"
timeout = "1m"

[[process]]
name = "payout"
steps = ["reserve", "send"]
when = "params.amount > 0"
on = {{ topic = "{p}.payments", key = "record.id", params = "{{'amount': record.amount}}" }}
"#,
        p = kafka.prefix
    )
}

/// The step run commands among `records`.
pub fn step_runs(records: &[Record]) -> Vec<StepRunCommand> {
    distinct(records)
        .into_iter()
        .map(|r| codec::decode_step_run_command(r.payload.as_deref().unwrap()).unwrap())
        .collect()
}

/// Keys whose instance succeeded.
pub fn succeeded(events: &[Event]) -> BTreeSet<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ProcessSucceeded {
                subject: Subject::Process { key, .. },
            } => Some(key.clone()),
            _ => None,
        })
        .collect()
}

/// A worker's success for `run`, with an output.
pub fn success(run: &StepRunCommand, output: serde_json::Value) -> Vec<u8> {
    let result = RunResult {
        run_id: run.run_id.to_string(),
        pass: run.pass,
        status: Status::Succeeded,
        error: None,
        stage: Default::default(),
        step: StepReply {
            output: Some(output.as_object().unwrap().clone()),
            ..Default::default()
        },
    };
    codec::encode_run_result(&result, &run.key, Format::Protobuf)
}

/// A worker answering every step run command of `topics` (each run id and
/// pass once) with a success, until `stop`; returns what it answered.
pub fn worker(
    kafka: &TestKafka,
    topics: &[String],
    results: &str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<BTreeSet<(String, u64)>> {
    let readers: Vec<_> = topics.iter().map(|t| kafka.reader(t)).collect();
    let producer = kafka.producer();
    let results = results.to_string();
    std::thread::spawn(move || {
        let mut answered = BTreeSet::new();
        while !stop.load(Ordering::Relaxed) {
            for reader in &readers {
                for run in step_runs(&reader.read_until(Duration::from_millis(100), |_| false)) {
                    if answered.insert((run.run_id.to_string(), run.pass)) {
                        let payload = success(&run, serde_json::json!({"by": run.job}));
                        producer
                            .send(BaseRecord::to(&results).key(&run.key).payload(&payload))
                            .map_err(|(e, _)| e)
                            .expect("send");
                    }
                }
                // Once per read, not per answer: a flush waits a round trip.
                producer.flush(Duration::from_secs(10)).expect("flush");
            }
        }
        answered
    })
}
