//! W3C trace context through the runtime (mock cluster): a record's
//! `traceparent` (and `tracestate`) reaches every record it causes — a CTL
//! change's run command, a launch command's step run and events, a worker
//! result's next step, an event record's forwarded launch and the run that
//! follows — and never the changelog; a malformed one is not carried.

mod support;

use std::time::Duration;

use reactor::codec::{self, CtlRecord, Format};
use support::steps::{processes, step_runs, success};
use support::{distinct, ts, Record, TestKafka, TASKS};

const WAIT: Duration = Duration::from_secs(30);

fn parent(n: u8) -> String {
    format!("00-{:032x}-{:016x}-01", u128::from(n) + 1, u64::from(n) + 1)
}

fn header<'a>(r: &'a Record, name: &str) -> Option<&'a str> {
    r.headers
        .iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| std::str::from_utf8(v).ok())
}

fn ctl(value: &str) -> Vec<u8> {
    codec::encode_ctl_change(
        &CtlRecord {
            entity: "dwh.orders".into(),
            param: "max_dt".into(),
            value: ts(value),
        },
        None,
        "test",
        Format::Protobuf,
    )
}

#[test]
fn trace_context_follows_a_change_into_what_it_causes() {
    let kafka = TestKafka::new("trace");
    let config = kafka.config(&format!("{TASKS}\n{}", processes(&kafka)), 2, true);
    kafka.create_topics(&config, 2);
    let t = config.kafka.topics.clone();
    let (reserve, send) = (config.jobs[0].topic.clone(), config.jobs[1].topic.clone());
    let instance = kafka.start(&config, "a", 2);
    instance.wait_ready(WAIT);

    // A CTL change: its run command carries its context, state included.
    kafka.send_headers(
        &t.ctl,
        "dwh.orders/max_dt",
        &ctl("2024-05-01T10:00:00Z"),
        &[("traceparent", &parent(1)), ("tracestate", "vendor=abc")],
    );
    let runs = kafka.reader(&t.runs).read_until(WAIT, |r| !r.is_empty());
    assert_eq!(header(&runs[0], "traceparent"), Some(parent(1).as_str()));
    assert_eq!(header(&runs[0], "tracestate"), Some("vendor=abc"));

    // A launch command: the first step's run and the start event.
    kafka.send_headers(
        &t.commands,
        "u1",
        br#"{"launch":{"process":"payout","keys":["u1"],"params":{"amount":5}}}"#,
        &[("traceparent", &parent(2))],
    );
    let first = kafka.reader(&reserve).read_until(WAIT, |r| !r.is_empty());
    assert_eq!(header(&first[0], "traceparent"), Some(parent(2).as_str()));
    assert_eq!(header(&first[0], "tracestate"), None);
    let events = kafka.reader(&t.events).read_until(WAIT, |r| !r.is_empty());
    assert!(
        distinct(&events)
            .iter()
            .all(|r| header(r, "traceparent") == Some(parent(2).as_str())),
        "{events:?}"
    );

    // The worker's reply goes on with its own span: the next step has it.
    let run = &step_runs(&first)[0];
    kafka.send_headers(
        &t.results,
        "u1",
        &success(run, serde_json::json!({"reserved": 5})),
        &[("traceparent", &parent(3))],
    );
    let second = kafka.reader(&send).read_until(WAIT, |r| !r.is_empty());
    assert_eq!(header(&second[0], "traceparent"), Some(parent(3).as_str()));

    // An event record: its launch is forwarded to the key's owner with the
    // context, and the run it causes there carries it too.
    let payments = format!("{}.payments", kafka.prefix);
    kafka.send_headers(
        &payments,
        "p1",
        br#"{"id":"p1","amount":7}"#,
        &[("traceparent", &parent(4))],
    );
    let reserves = kafka
        .reader(&reserve)
        .read_until(WAIT, |r| step_runs(r).iter().any(|run| run.key == "p1"));
    let p1 = distinct(&reserves)
        .into_iter()
        .find(|r| r.key == b"p1")
        .expect("p1's run");
    assert_eq!(header(p1, "traceparent"), Some(parent(4).as_str()));
    let commands = kafka
        .reader(&t.commands)
        .read_until(WAIT, |r| r.iter().any(|c| c.key == b"p1"));
    let forwarded = commands.iter().find(|c| c.key == b"p1").expect("forwarded");
    assert_eq!(header(forwarded, "traceparent"), Some(parent(4).as_str()));

    // A malformed context is dropped, not copied.
    kafka.send_headers(
        &t.commands,
        "u2",
        br#"{"launch":{"process":"payout","keys":["u2"],"params":{"amount":5}}}"#,
        &[("traceparent", "00-ab-cd-01")],
    );
    let reserves = kafka
        .reader(&reserve)
        .read_until(WAIT, |r| step_runs(r).iter().any(|run| run.key == "u2"));
    let u2 = distinct(&reserves)
        .into_iter()
        .find(|r| r.key == b"u2")
        .expect("u2's run");
    assert_eq!(header(u2, "traceparent"), None, "{u2:?}");

    // The changelog is Reactor's own state: no trace headers.
    let changelog = kafka
        .reader(&t.changelog)
        .read_until(Duration::from_secs(3), |_| false);
    assert!(!changelog.is_empty());
    assert!(changelog.iter().all(|r| header(r, "traceparent").is_none()));
    instance.stop();
}
