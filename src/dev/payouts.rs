//! The demo's processes: a launcher that starts a `payout` for a new user
//! every few seconds (and, now and then, one with an amount of zero, which
//! the process's `when` refuses), and job workers for its chain `reserve →
//! send_tx → notify`. The `send_tx` worker plays a flaky RPC node: it is
//! down for a while every so often, so steps fail, back off, are archived
//! for a tier, and the rest of their chain waits with them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::Message;

use super::demo::{clock, sleep_unless};
use crate::action::StepRunCommand;
use crate::codec::{self, Format};
use crate::config::Config;
use crate::engine::{Command, RunResult, StepReply};
use crate::kafka::Clients;
use crate::run::Status;
use reactor::process::Position;

/// How long the demo's RPC node stays down, and how often it goes down.
const NODE_DOWN: Duration = Duration::from_secs(12);
const NODE_CYCLE: Duration = Duration::from_secs(45);

/// Launches a payout for user `u-N` every few seconds.
pub fn launcher(clients: Clients, config: Arc<Config>, stop: Arc<AtomicBool>) {
    if !config.processes.iter().any(|p| p.name == "payout") {
        return;
    }
    let Ok(producer) = clients.producer(None).create::<ThreadedProducer<_>>() else {
        return;
    };
    let mut n = 1u64;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("u-{n}");
        // Every seventh payout has no amount: `when` refuses it.
        let amount = if n % 7 == 0 { 0 } else { 10 * n };
        let command = Command::Launch {
            process: "payout".into(),
            keys: vec![key.clone()],
            params: serde_json::json!({ "amount": amount })
                .as_object()
                .cloned()
                .unwrap_or_default(),
            position: Position::Back,
            reset: false,
            source: Some("demo".into()),
        };
        let payload = codec::encode_command(&command, Format::Protobuf);
        let _ = producer.send(
            BaseRecord::to(&config.kafka.topics.commands)
                .key(&key)
                .payload(&payload),
        );
        println!("{}  launch  payout for {key}, amount {amount}", clock());
        n += 1;
        sleep_unless(&stop, Duration::from_secs(6));
    }
    let _ = producer.flush(Duration::from_secs(5));
}

/// What the job workers answer for `run` at `since_start` into the demo.
pub fn answer(run: &StepRunCommand, since_start: Duration) -> RunResult {
    let node_down = since_start.as_secs() % NODE_CYCLE.as_secs() < NODE_DOWN.as_secs()
        && since_start > NODE_CYCLE / 2;
    let (ok, output) = match &*run.job {
        "reserve" => (
            true,
            serde_json::json!({ "reserved": run.params.get("amount") }),
        ),
        "send_tx" if node_down => (false, serde_json::json!({})),
        "send_tx" => (
            true,
            serde_json::json!({ "tx": format!("0x{:08x}", reactor::router::murmur2(run.key.as_bytes())) }),
        ),
        _ => (true, serde_json::json!({ "notified": true })),
    };
    RunResult {
        run_id: run.run_id.to_string(),
        pass: run.pass,
        status: if ok {
            Status::Succeeded
        } else {
            Status::Failed
        },
        error: (!ok).then(|| "RPC node unreachable".to_string()),
        stage: Default::default(),
        step: StepReply {
            output: ok.then(|| output.as_object().cloned().unwrap_or_default()),
            ..Default::default()
        },
    }
}

/// Answers every step run command of the configured jobs.
pub fn workers(clients: Clients, config: Arc<Config>, stop: Arc<AtomicBool>) {
    let topics = config.job_topics();
    if topics.is_empty() {
        return;
    }
    let consumer: BaseConsumer = match clients
        .base()
        .set("group.id", "reactor-dev-job-workers")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .create()
    {
        Ok(c) => c,
        Err(e) => return eprintln!("demo job workers: {e}"),
    };
    if consumer.subscribe(&topics).is_err() {
        return;
    }
    let Ok(producer) = clients.producer(None).create::<ThreadedProducer<_>>() else {
        return;
    };
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let Ok(run) = codec::decode_step_run_command(m.payload().unwrap_or_default()) else {
            continue;
        };
        sleep_unless(&stop, Duration::from_millis(200));
        let result = answer(&run, started.elapsed());
        let verdict = match &result.error {
            None => "succeeded".to_string(),
            Some(e) => format!("failed: {e}"),
        };
        let reply_topic = &config.kafka.topics.results;
        let payload = codec::encode_run_result(&result, &run.key, Format::Protobuf);
        let _ = producer.send(BaseRecord::to(reply_topic).key(&run.key).payload(&payload));
        println!(
            "{}  worker  {} ({}) attempt {} {verdict}",
            clock(),
            run.run_id,
            run.job,
            run.attempt
        );
    }
}

/// A step run command as the printer shows it.
pub fn describe_run(run: &StepRunCommand) -> String {
    format!(
        "{} step {} ({}) attempt {} pass {}  params {}  context {}",
        run.run_id,
        run.step,
        run.job,
        run.attempt,
        run.pass,
        serde_json::Value::Object(run.params.clone()),
        serde_json::Value::Object(run.context.clone())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(job: &str) -> StepRunCommand {
        StepRunCommand {
            process: "payout".into(),
            key: "u-1".into(),
            instance: "payout/u-1#1".into(),
            step: 1,
            job: job.into(),
            run_id: "payout/u-1#1.1#1".into(),
            attempt: 1,
            pass: 1,
            params: serde_json::json!({"amount": 10})
                .as_object()
                .unwrap()
                .clone(),
            context: Default::default(),
            deadline: "2024-01-01T00:00:00Z".parse().unwrap(),
            source: None,
            topic: "".into(),
        }
    }

    #[test]
    fn the_node_goes_down_and_comes_back() {
        let up = answer(&run("send_tx"), Duration::from_secs(20));
        assert_eq!(up.status, Status::Succeeded);
        assert!(up.step.output.unwrap().contains_key("tx"));
        let down = answer(&run("send_tx"), Duration::from_secs(45 + 3));
        assert_eq!(down.status, Status::Failed);
        let reserve = answer(&run("reserve"), Duration::from_secs(50));
        assert_eq!(reserve.step.output.unwrap()["reserved"], 10);
        // Answers survive the wire as a worker would send them.
        let bytes = codec::encode_run_result(&down, "u-1", Format::Protobuf);
        assert_eq!(codec::decode_run_result(&bytes).unwrap(), down);
    }
}
