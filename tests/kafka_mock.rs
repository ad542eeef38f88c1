//! The runtime on librdkafka's in-process mock cluster (no service needed).
//! The mock accepts transactional calls without implementing them, so these
//! tests assert what reaches the topics and the recovery paths; transaction
//! visibility is proven on a real broker (`tests/real_broker.rs`).

mod support;

use std::time::Duration;

use jiff::Timestamp;
use reactor::codec::{self, CtlRecord, Format};
use reactor::engine::RunResult;
use reactor::run::Status;
use support::{Record, TestKafka};

const TASKS: &str = r#"
[[pool]]
name = "reports"
max_running = 4

[[task]]
id = "orders_daily"
pool = "reports"
trigger = "chunk_delta(dwh.orders/max_dt, day)"
timeout = "1h"
"#;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn ctl(entity: &str, param: &str, value: &str, format: Format) -> Vec<u8> {
    codec::encode_ctl_change(
        &CtlRecord {
            entity: entity.into(),
            param: param.into(),
            value: ts(value),
        },
        None,
        "test",
        format,
    )
}

fn runs(records: &[Record]) -> Vec<reactor::proto::v1::RunCommand> {
    records
        .iter()
        .map(|r| codec::decode_run_command(r.payload.as_deref().unwrap()).unwrap())
        .collect()
}

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn ctl_change_dispatches_a_run_and_success_records_last_seen() {
    let kafka = TestKafka::new("e2e");
    let config = kafka.config(TASKS, 2, true);
    kafka.create_topics(&config, 2);
    let t = config.kafka.topics.clone();
    let instance = kafka.start(&config, "a", 2);
    instance.wait_ready(WAIT);

    // JSON input, as kcat or a script would write it.
    kafka.send(
        &t.ctl,
        "dwh.orders/max_dt",
        br#"{"entity":"dwh.orders","param":"max_dt","value":"2024-05-01T10:00:00Z"}"#,
    );
    let reader = kafka.reader(&t.runs);
    let got = runs(&reader.read_until(WAIT, |r| !r.is_empty()));
    assert_eq!(got.len(), 1);
    let run = &got[0];
    assert_eq!(run.task, "orders_daily");
    assert_eq!(run.run_id, "orders_daily#1");
    assert_eq!(run.attempt, 1);
    assert_eq!(run.reply_topic, t.results);
    assert_eq!(run.reply_key, "reports");
    assert!(run.snapshot.contains_key("dwh.orders/max_dt"));

    // A protobuf result; the same day again changes nothing.
    let result = RunResult {
        run_id: run.run_id.clone(),
        pass: run.pass,
        status: Status::Succeeded,
        error: None,
    };
    kafka.send(
        &t.results,
        &run.reply_key,
        &codec::encode_run_result(&result, &run.reply_key, Format::Protobuf),
    );
    kafka.send(
        &t.ctl,
        "dwh.orders/max_dt",
        &ctl(
            "dwh.orders",
            "max_dt",
            "2024-05-01T12:00:00Z",
            Format::Protobuf,
        ),
    );
    // The next day fires again: proof that the first success recorded last-seen.
    kafka.send(
        &t.ctl,
        "dwh.orders/max_dt",
        &ctl("dwh.orders", "max_dt", "2024-05-02T01:00:00Z", Format::Json),
    );
    let got = runs(&reader.read_until(WAIT, |r| !r.is_empty()));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].run_id, "orders_daily#2");
    assert_eq!(
        got[0].snapshot["dwh.orders/max_dt"].seconds,
        ts("2024-05-02T01:00:00Z").as_second()
    );

    // The changelog holds the task's state with the recorded last-seen value.
    let changelog = kafka.reader(&t.changelog).read_until(WAIT, |r| {
        r.iter().any(|x| {
            codec::decode_changelog(&x.key, x.payload.as_deref())
                .ok()
                .and_then(|c| match c.value {
                    Some(reactor::changelog::Value::Task(t)) => {
                        t.last_seen.get("dwh.orders/max_dt").copied()
                    }
                    None => None,
                })
                == Some(ts("2024-05-01T10:00:00Z"))
        })
    });
    assert!(!changelog.is_empty());
    instance.stop();
}

#[test]
fn poison_records_go_to_dead_letters_and_processing_goes_on() {
    let kafka = TestKafka::new("poison");
    let config = kafka.config(TASKS, 1, true);
    kafka.create_topics(&config, 1);
    let t = config.kafka.topics.clone();
    let instance = kafka.start(&config, "a", 1);
    instance.wait_ready(WAIT);

    kafka.send(&t.results, "reports", b"\xff\x00garbage");
    kafka.send(&t.ctl, "x", b"{not json");
    kafka.send(
        &t.ctl,
        "dwh.orders/max_dt",
        &ctl(
            "dwh.orders",
            "max_dt",
            "2024-05-01T10:00:00Z",
            Format::Protobuf,
        ),
    );

    let dead = kafka.reader(&t.dead).read_until(WAIT, |r| r.len() >= 2);
    assert_eq!(dead.len(), 2, "{dead:?}");
    for d in &dead {
        let header = |k: &str| {
            d.headers
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| String::from_utf8_lossy(v).to_string())
                .unwrap_or_else(|| panic!("header {k} missing: {:?}", d.headers))
        };
        assert!(!header("reactor.reason").is_empty());
        assert!(
            header("reactor.source.topic") == t.results || header("reactor.source.topic") == t.ctl
        );
        header("reactor.source.partition");
        header("reactor.source.offset");
    }
    let got = runs(&kafka.reader(&t.runs).read_until(WAIT, |r| !r.is_empty()));
    assert_eq!(got.len(), 1, "processing went on after the poison records");
    instance.stop();
}
