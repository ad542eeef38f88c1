//! Decoding commands, dispatching to handlers and encoding replies, with no
//! broker: `Worker::handle` on hand-made `RunCommand`s of every kind.

use std::collections::BTreeMap;

use jiff::Timestamp;
use prost::Message;
use reactor_worker::proto::{self, RunCommand, RunResult, RunStatus};
use reactor_worker::{decode, JobResult, NextJob, Position, Run, StageResult, Worker};
use serde_json::{json, Map, Value};

fn ts(s: &str) -> pbjson_types::Timestamp {
    let t: Timestamp = s.parse().unwrap();
    pbjson_types::Timestamp {
        seconds: t.as_second(),
        nanos: t.subsec_nanosecond(),
    }
}

fn object(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn pb_struct(v: Value) -> pbjson_types::Struct {
    serde_json::from_value(v).unwrap()
}

fn task_command() -> RunCommand {
    RunCommand {
        run_id: "orders_daily#7".into(),
        kind: "task".into(),
        task: "orders_daily".into(),
        attempt: 2,
        pass: 12,
        params: BTreeMap::from([("format".to_string(), "parquet".to_string())]),
        snapshot: BTreeMap::from([("dwh.orders/max_dt".to_string(), ts("2024-05-31T00:00:00Z"))]),
        deadline: Some(ts("2024-06-01T00:01:00Z")),
        reply_topic: "reactor.results".into(),
        reply_key: "reports".into(),
        ..Default::default()
    }
}

fn stage_command() -> RunCommand {
    RunCommand {
        run_id: "price/o1#3".into(),
        kind: "stage".into(),
        stage: "price".into(),
        offer_id: "o1".into(),
        version: 4,
        attempt: 1,
        pass: 9,
        offer: Some(pb_struct(
            json!({"status": "active", "price": 100.0, "tags": [1.0, 2.5]}),
        )),
        deadline: Some(ts("2024-06-01T00:01:00Z")),
        reply_topic: "reactor.results".into(),
        reply_key: "o1".into(),
        ..Default::default()
    }
}

fn step_command() -> RunCommand {
    RunCommand {
        run_id: "payout/k1#1/0".into(),
        kind: "step".into(),
        process: "payout".into(),
        key: "k1".into(),
        instance: "payout/k1#1".into(),
        step: 0,
        job: "send_tx".into(),
        attempt: 1,
        pass: 3,
        args: Some(pb_struct(json!({"amount": 250}))),
        context: Some(pb_struct(json!({"reserved": true}))),
        source: "op:42".into(),
        reply_topic: "reactor.results".into(),
        reply_key: "k1".into(),
        ..Default::default()
    }
}

fn worker() -> Worker {
    Worker::new("unused:9092", "g").clock(|| "2024-06-01T00:00:30Z".parse().unwrap())
}

fn result(value: &[u8]) -> RunResult {
    if value.first() == Some(&b'{') {
        serde_json::from_slice(value).unwrap()
    } else {
        RunResult::decode(value).unwrap()
    }
}

#[tokio::test]
async fn task_run_is_decoded_and_answered_in_protobuf() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let w = worker().task("orders_daily", move |run| {
        let tx = tx.clone();
        async move {
            tx.send(run).unwrap();
            Ok(())
        }
    });
    let headers = vec![("traceparent".to_string(), b"00-ab-cd-01".to_vec())];
    let reply = w
        .handle(&task_command().encode_to_vec(), headers.clone(), "t")
        .await
        .expect("a reply");
    let run = rx.recv().await.unwrap();
    assert_eq!(run.task, "orders_daily");
    assert_eq!((run.run.attempt, run.run.pass), (2, 12));
    assert_eq!(run.params["format"], "parquet");
    assert_eq!(
        run.snapshot["dwh.orders/max_dt"],
        "2024-05-31T00:00:00Z".parse::<Timestamp>().unwrap()
    );
    assert_eq!(run.run.headers, headers);
    // The trace goes on in the reply.
    assert_eq!(reply.headers, headers);
    assert_eq!(
        (reply.topic.as_str(), reply.key.as_str()),
        ("reactor.results", "reports")
    );
    assert!(!reply.failed && reply.value.first() != Some(&b'{'));
    let r = result(&reply.value);
    assert_eq!(
        (r.run_id.as_str(), r.pass, r.reply_key.as_str()),
        ("orders_daily#7", 12, "reports")
    );
    assert_eq!(r.status, RunStatus::Succeeded as i32);
}

#[tokio::test]
async fn json_command_gets_a_json_reply() {
    let w = worker().task("orders_daily", |_| async { Ok(()) });
    let mut command = serde_json::to_value(task_command()).unwrap();
    // Camel case and a field a newer Reactor may add are read too.
    let map = command.as_object_mut().unwrap();
    let id = map.remove("run_id").unwrap();
    map.insert("runId".into(), id);
    map.insert("a_newer_field".into(), json!(1));
    let value = serde_json::to_vec(&command).unwrap();
    let reply = w.handle(&value, Vec::new(), "t").await.unwrap();
    let body: Value = serde_json::from_slice(&reply.value).unwrap();
    assert_eq!(
        body,
        json!({"run_id": "orders_daily#7", "pass": "12", "reply_key": "reports", "status": "RUN_STATUS_SUCCEEDED"})
    );
}

#[tokio::test]
async fn stage_run_and_result() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let w = worker().stage("price", move |run| {
        let tx = tx.clone();
        async move {
            tx.send(run).unwrap();
            Ok(StageResult {
                update: Some(object(json!({"price_predicted": 118, "promo": null}))),
                state: Some(json!({"model": 3})),
                timer: Some("2024-07-01T00:00:00Z".parse().unwrap()),
                ..Default::default()
            })
        }
    });
    let reply = w
        .handle(&stage_command().encode_to_vec(), Vec::new(), "t")
        .await
        .unwrap();
    let run = rx.recv().await.unwrap();
    // Struct numbers are doubles on the wire; integral ones read as integers.
    assert_eq!(
        Value::Object(run.offer.clone()),
        json!({"price": 100, "status": "active", "tags": [1, 2.5]})
    );
    assert!(run.offer["price"].is_i64());
    assert_eq!(
        (
            run.stage.as_str(),
            run.offer_id.as_str(),
            run.version,
            run.state
        ),
        ("price", "o1", 4, None)
    );
    let r = result(&reply.value);
    assert_eq!((r.version, r.pass, r.reply_key.as_str()), (4, 9, "o1"));
    assert_eq!(
        serde_json::to_value(r.update.unwrap()).unwrap(),
        json!({"price_predicted": 118.0, "promo": null})
    );
    assert_eq!(
        serde_json::to_value(r.state.unwrap()).unwrap(),
        json!({"model": 3.0})
    );
    assert_eq!(r.timer, Some(ts("2024-07-01T00:00:00Z")));
    assert!(!r.clear_state && !r.clear_timer && r.body.is_none());
}

#[tokio::test]
async fn step_run_and_job_result() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let w = worker().job("send_tx", move |run| {
        let tx = tx.clone();
        async move {
            tx.send(run).unwrap();
            Ok(JobResult {
                output: Some(object(json!({"tx": "t-1"}))),
                next: vec![
                    NextJob {
                        job: "notify".into(),
                        params: Some(object(json!({"channel": "sms"}))),
                        position: Position::Front,
                    },
                    NextJob {
                        job: "audit".into(),
                        ..Default::default()
                    },
                ],
                goal_reached: true,
            })
        }
    });
    let reply = w
        .handle(&step_command().encode_to_vec(), Vec::new(), "t")
        .await
        .unwrap();
    let run = rx.recv().await.unwrap();
    assert_eq!(
        (
            run.process.as_str(),
            run.key.as_str(),
            run.instance.as_str(),
            run.step,
            run.job.as_str()
        ),
        ("payout", "k1", "payout/k1#1", 0, "send_tx")
    );
    assert_eq!(Value::Object(run.args), json!({"amount": 250}));
    assert_eq!(Value::Object(run.context), json!({"reserved": true}));
    assert_eq!(run.run.source, "op:42");
    let r = result(&reply.value);
    assert_eq!(
        (r.reply_key.as_str(), r.status, r.goal_reached),
        ("k1", RunStatus::Succeeded as i32, true)
    );
    assert_eq!(
        serde_json::to_value(r.output.unwrap()).unwrap(),
        json!({"tx": "t-1"})
    );
    let next: Vec<(String, String, bool)> = r
        .next
        .iter()
        .map(|n| (n.job.clone(), n.position.clone(), n.params.is_some()))
        .collect();
    assert_eq!(
        next,
        [
            ("notify".into(), "front".into(), true),
            ("audit".into(), "back".into(), false)
        ]
    );
}

#[tokio::test]
async fn errors_and_panics_fail_the_run() {
    let w = worker()
        .task("orders_daily", |_| async { Err("db down".into()) })
        .stage("price", |run| async move {
            if run.version > 0 {
                panic!("boom");
            }
            Ok(StageResult::default())
        })
        .job("send_tx", |_| async { Ok(JobResult::default()) });
    let reply = w
        .handle(&task_command().encode_to_vec(), Vec::new(), "t")
        .await
        .unwrap();
    let r = result(&reply.value);
    assert!(reply.failed);
    assert_eq!(
        (r.status, r.error.as_str(), r.pass),
        (RunStatus::Failed as i32, "db down", 12)
    );
    let r = result(
        &w.handle(&stage_command().encode_to_vec(), Vec::new(), "t")
            .await
            .unwrap()
            .value,
    );
    assert_eq!(r.status, RunStatus::Failed as i32);
    assert!(r.error.starts_with("the handler panicked"), "{}", r.error);
    assert_eq!(r.version, 4);
}

#[tokio::test]
async fn an_invalid_stage_result_fails_the_run() {
    let w = worker().stage("price", |_| async {
        Ok(StageResult {
            update: Some(Map::new()),
            body: Some(Map::new()),
            ..Default::default()
        })
    });
    let r = result(
        &w.handle(&stage_command().encode_to_vec(), Vec::new(), "t")
            .await
            .unwrap()
            .value,
    );
    assert_eq!(r.status, RunStatus::Failed as i32);
    assert_eq!(r.error, "a stage result has at most one of update and body");
    assert!(r.update.is_none() && r.body.is_none());
}

#[tokio::test]
async fn skipped_commands_get_no_reply() {
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = calls.clone();
    let late = Worker::new("unused:9092", "g")
        .clock(|| "2024-06-01T00:05:00Z".parse().unwrap())
        .task("orders_daily", move |_| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { Ok(()) }
        });
    // Past its deadline.
    assert!(late
        .handle(&task_command().encode_to_vec(), Vec::new(), "t")
        .await
        .is_none());
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    let w = worker().task("other", |_| async { Ok(()) });
    // No handler; undecodable; missing reply key; unknown kind.
    assert!(w
        .handle(&task_command().encode_to_vec(), Vec::new(), "t")
        .await
        .is_none());
    assert!(w.handle(b"\xff\xff\xff", Vec::new(), "t").await.is_none());
    assert!(w.handle(b"{not json", Vec::new(), "t").await.is_none());
    assert!(w.handle(b"", Vec::new(), "t").await.is_none());
    let mut no_key = task_command();
    no_key.reply_key.clear();
    assert!(decode(&no_key.encode_to_vec(), Vec::new()).is_err());
    let mut far = task_command();
    far.snapshot.insert(
        "dwh.orders/max_dt".into(),
        pbjson_types::Timestamp {
            seconds: i64::MAX,
            nanos: 0,
        },
    );
    assert!(decode(&far.encode_to_vec(), Vec::new()).is_err());
    let mut cron = task_command();
    cron.kind = "cron".into();
    assert!(decode(&cron.encode_to_vec(), Vec::new()).is_err());
    assert!(matches!(
        decode(&task_command().encode_to_vec(), Vec::new()),
        Ok(Run::Task(_))
    ));
}

#[test]
fn topics_follow_the_handlers_unless_given() {
    let w = worker()
        .task("a", |_| async { Ok(()) })
        .task("b", |_| async { Ok(()) })
        .stage("price", |_| async { Ok(StageResult::default()) })
        .job("send_tx", |_| async { Ok(JobResult::default()) });
    assert_eq!(
        w.run_topics(),
        ["reactor.runs", "stage.price.runs", "job.send_tx.runs"]
    );
    let given = Worker::new("b:9092", "g").topics(["pricing.runs"]);
    assert_eq!(given.run_topics(), ["pricing.runs"]);
}

#[tokio::test]
async fn duplicate_handlers_and_no_handlers_are_refused() {
    let dup = worker()
        .task("a", |_| async { Ok(()) })
        .task("a", |_| async { Ok(()) });
    let e = dup.run(async {}).await.unwrap_err();
    assert_eq!(e.to_string(), "two handlers for task \"a\"");
    assert!(matches!(
        worker().run(async {}).await,
        Err(reactor_worker::Error::NoHandlers)
    ));
}

#[test]
fn settings() {
    let w = Worker::new("b:9092", "g").set("security.protocol", "SASL_SSL");
    let (c, p) = (w.consumer_config(), w.producer_config());
    assert_eq!(c.get("isolation.level"), Some("read_committed"));
    assert_eq!(c.get("enable.auto.offset.store"), Some("false"));
    assert_eq!(p.get("partitioner"), Some("murmur2_random"));
    assert_eq!(c.get("security.protocol"), p.get("security.protocol"));
    // The generated types are usable for other topics too.
    let _ = proto::CtlChange::default();
}
