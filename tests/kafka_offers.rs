//! Offer stages through the real runtime on librdkafka's in-process mock
//! cluster: offer changes in, stage run commands out, worker results
//! committed by compare-and-set on the offer version, `OfferState` on
//! `offer.state`, a crash with a successor, and rescans from the CLI. The
//! mock accepts transactional calls without implementing them, so these
//! tests assert what reaches the topics (see `tests/kafka_mock.rs`).

mod support;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reactor::action::{Event, OfferState, StageRunCommand};
use reactor::codec::{self, Format, MessageKind};
use reactor::engine::{RunResult, StageReply, Update};
use reactor::offer::Body;
use reactor::run::Status;
use support::{distinct, events, Record, TestKafka};

const WAIT: Duration = Duration::from_secs(30);

/// One stage, `price`, on every active offer; its run topic is unique to the test.
fn price_stage(kafka: &TestKafka, extra: &str) -> String {
    format!(
        r#"
[[stage]]
name = "price"
when = "offer.status == 'active'"
topic = "{p}.price.runs"
max_parallelism = 8
timeout = "1m"
{extra}
"#,
        p = kafka.prefix
    )
}

fn body(json: serde_json::Value) -> Body {
    json.as_object().expect("a JSON object").clone()
}

/// Each record once: a re-read (or at-least-once duplicate) of the same
/// (partition, offset) is not a second record.
fn stage_runs(records: &[Record]) -> Vec<StageRunCommand> {
    distinct(records)
        .into_iter()
        .map(|r| codec::decode_stage_run_command(r.payload.as_deref().unwrap()).unwrap())
        .collect()
}

fn offer_states(records: &[Record]) -> Vec<OfferState> {
    distinct(records)
        .into_iter()
        .map(|r| {
            codec::decode_offer_state(r.payload.as_deref().unwrap())
                .unwrap()
                .0
        })
        .collect()
}

/// A worker's success for `run`: computed from the run's version, with
/// `update` as a merge patch and an optional new state.
fn success(
    run: &StageRunCommand,
    update: serde_json::Value,
    state: Option<serde_json::Value>,
) -> RunResult {
    RunResult {
        step: Default::default(),
        run_id: run.run_id.to_string(),
        pass: run.pass,
        status: Status::Succeeded,
        error: None,
        stage: StageReply {
            version: Some(run.version),
            update: Some(Update::Patch(body(update))),
            state,
            timer: None,
        },
    }
}

#[test]
fn an_offer_change_runs_the_stage_and_its_result_commits_a_new_version() {
    let kafka = TestKafka::new("offer-e2e");
    let config = kafka.config(&price_stage(&kafka, ""), 2, true);
    kafka.create_topics(&config, 2);
    let t = config.kafka.topics.clone();
    let stage_topic = config.stages[0].topic.clone();
    let instance = kafka.start(&config, "a", 2);
    instance.wait_ready(WAIT);

    // JSON, as kcat or a script would write it.
    kafka.send(
        &t.offers,
        "o1",
        br#"{"offer_id":"o1","body":{"status":"active","price":100}}"#,
    );
    let runs_reader = kafka.reader(&stage_topic);
    let records = runs_reader.read_until(WAIT, |r| !r.is_empty());
    let runs = stage_runs(&records);
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = &runs[0];
    assert_eq!(run.stage, "price");
    assert_eq!(run.offer, "o1");
    assert_eq!(run.run_id, "price/o1#1");
    assert_eq!(run.attempt, 1);
    assert_eq!(run.version, 1);
    assert_eq!(
        *run.body,
        body(serde_json::json!({"status": "active", "price": 100}))
    );
    assert_eq!(run.state, None);
    // What a worker in any language sees: kind, where to reply, keyed by the offer.
    let wire = codec::to_json(
        MessageKind::RunCommand,
        records[0].payload.as_deref().unwrap(),
    )
    .unwrap();
    assert_eq!(wire["kind"], codec::KIND_STAGE);
    assert_eq!(wire["reply_topic"], t.results.as_str());
    assert_eq!(wire["reply_key"], "o1");
    assert_eq!(records[0].key, b"o1");

    // The offer as the admin API shows it: version 1, the stage running on it.
    let view = instance
        .ask(|reply| reactor::admin::Query::Offer {
            id: "o1".into(),
            reply,
        })
        .expect("the runtime answers")
        .expect("this instance owns every partition");
    assert_eq!(view.version, 1);
    assert_eq!(view.stages["price"].run_id.as_deref(), Some("price/o1#1"));
    let stages = instance
        .ask(|reply| reactor::admin::Query::Stages { reply })
        .unwrap();
    assert_eq!(stages.len(), 1);
    assert_eq!((stages[0].stage.as_str(), stages[0].running), ("price", 1));

    // A protobuf result with an update and a state.
    let result = success(
        run,
        serde_json::json!({"price_predicted": 118}),
        Some(serde_json::json!({"model": 3})),
    );
    kafka.send(
        &t.results,
        "o1",
        &codec::encode_run_result(&result, "o1", Format::Protobuf),
    );
    let states_reader = kafka.reader(&t.offer_state);
    let states = offer_states(&states_reader.read_until(WAIT, |r| r.len() >= 2));
    assert_eq!(states.len(), 2, "{states:?}");
    let (first, second) = (&states[0], &states[1]);
    assert_eq!((first.version, first.cause.as_str()), (1, "external"));
    assert_eq!(first.changed_fields, ["price", "status"]);
    assert_eq!(second.offer, "o1");
    assert_eq!(second.version, 2);
    assert_eq!(second.cause, "stage:price");
    assert_eq!(second.changed_fields, ["price_predicted"]);
    assert_eq!(
        *second.body,
        body(serde_json::json!({"status": "active", "price": 100, "price_predicted": 118}))
    );
    assert_eq!(
        second.states,
        BTreeMap::from([("price".to_string(), serde_json::json!({"model": 3}).into())])
    );

    // The changelog holds the offer record at version 2 with the stage's state.
    let offer_record = |records: &[Record]| {
        records.iter().find_map(|x| {
            match codec::decode_changelog(&x.key, x.payload.as_deref())
                .ok()?
                .value
            {
                Some(reactor::changelog::Value::Offer(o)) if o.version == 2 => Some(o),
                _ => None,
            }
        })
    };
    let changelog = kafka
        .reader(&t.changelog)
        .read_until(WAIT, |r| offer_record(r).is_some());
    let record = offer_record(&changelog).expect("offer record at version 2");
    assert_eq!(record.body, second.body);
    assert_eq!(
        record.stages.get("price").unwrap().state,
        Some(serde_json::json!({"model": 3}).into())
    );

    // A change produced to the wrong partition (another partitioner) is
    // forwarded to the partition that owns the offer and applied there.
    let owner = reactor::kafka::partition_for(b"o2", 2);
    kafka.send_to(
        &t.offers,
        1 - owner,
        "o2",
        br#"{"offer_id":"o2","body":{"status":"draft"}}"#,
    );
    let o2 = |records: &[Record]| offer_states(records).into_iter().find(|s| s.offer == "o2");
    let more = states_reader.read_until(WAIT, |r| o2(r).is_some());
    let o2 = o2(&more).expect("o2 committed");
    assert_eq!((o2.version, o2.cause.as_str()), (1, "external"));
    let forwarded = kafka.reader(&t.offers).read_until(WAIT, |r| {
        r.iter().any(|x| x.key == b"o2" && x.partition == owner)
    });
    assert!(
        forwarded
            .iter()
            .any(|x| x.key == b"o2" && x.partition == owner),
        "forwarded to the owner: {forwarded:?}"
    );

    // An undecodable offer change is a dead letter; the rest goes on.
    kafka.send(
        &t.offers,
        "o3",
        br#"{"offer_id":"o3","body":{},"patch":{}}"#,
    );
    let dead = kafka.reader(&t.dead).read_until(WAIT, |r| !r.is_empty());
    assert_eq!(dead.len(), 1, "{dead:?}");
    let source = dead[0]
        .headers
        .iter()
        .find(|(k, _)| k == "reactor.source.topic")
        .map(|(_, v)| String::from_utf8_lossy(v).to_string());
    assert_eq!(source.as_deref(), Some(t.offers.as_str()));
    instance.stop();
}

#[test]
fn a_change_during_a_stage_run_discards_its_result_and_reruns_on_the_new_version() {
    let kafka = TestKafka::new("offer-cas");
    let config = kafka.config(&price_stage(&kafka, ""), 2, true);
    kafka.create_topics(&config, 2);
    let t = config.kafka.topics.clone();
    let instance = kafka.start(&config, "a", 2);
    instance.wait_ready(WAIT);
    let change = |body: serde_json::Value| {
        let change = reactor::offer::OfferChange {
            offer_id: "o1".into(),
            change: reactor::offer::Change::Patch(self::body(body)),
            source: None,
        };
        codec::encode_offer_change(&change, Format::Protobuf)
    };

    kafka.send(
        &t.offers,
        "o1",
        &change(serde_json::json!({"status": "active", "price": 100})),
    );
    let runs_reader = kafka.reader(&config.stages[0].topic);
    let first = stage_runs(&runs_reader.read_until(WAIT, |r| !r.is_empty()));
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!((first[0].version, first[0].pass), (1, 1));

    // The offer moves while the stage runs; the stage is busy, so no new run yet.
    kafka.send(&t.offers, "o1", &change(serde_json::json!({"price": 120})));
    let states_reader = kafka.reader(&t.offer_state);
    let mut states = offer_states(&states_reader.read_until(WAIT, |r| r.len() >= 2));
    assert_eq!(states.len(), 2, "{states:?}");
    assert_eq!(
        (states[1].version, states[1].cause.as_str()),
        (2, "external")
    );

    // The worker answers from version 1: discarded, reported, re-run on version 2.
    let stale = success(&first[0], serde_json::json!({"price_predicted": 118}), None);
    kafka.send(
        &t.results,
        "o1",
        &codec::encode_run_result(&stale, "o1", Format::Json),
    );
    let rerun = stage_runs(&runs_reader.read_until(WAIT, |r| !r.is_empty()));
    assert_eq!(rerun.len(), 1, "{rerun:?}");
    let rerun = &rerun[0];
    assert_eq!(rerun.run_id, first[0].run_id, "the same run, a new pass");
    assert_eq!((rerun.version, rerun.pass), (2, 2));
    assert_eq!(rerun.body["price"], 120);
    let events_reader = kafka.reader(&t.events);
    let seen = events_reader.read_until(WAIT, |r| {
        events(r)
            .iter()
            .any(|e| matches!(e, Event::StaleVersion { .. }))
    });
    let stale_events: Vec<Event> = events(&seen)
        .into_iter()
        .filter(|e| matches!(e, Event::StaleVersion { .. }))
        .collect();
    assert_eq!(
        stale_events,
        [Event::StaleVersion {
            stage: "price".into(),
            offer: "o1".into(),
            run_id: "price/o1#1".into(),
            computed_from: 1,
            current: 2,
        }]
    );
    assert!(
        seen.iter().all(|r| r.key == b"o1"),
        "events keyed by the offer"
    );

    // The re-run's answer commits version 3; a late duplicate of the stale
    // answer changes nothing.
    let fresh = success(rerun, serde_json::json!({"price_predicted": 141}), None);
    kafka.send(
        &t.results,
        "o1",
        &codec::encode_run_result(&fresh, "o1", Format::Protobuf),
    );
    kafka.send(
        &t.results,
        "o1",
        &codec::encode_run_result(&stale, "o1", Format::Protobuf),
    );
    states.extend(offer_states(
        &states_reader.read_until(WAIT, |r| !r.is_empty()),
    ));
    // Anything more would come by now.
    states.extend(offer_states(
        &states_reader.read_until(Duration::from_secs(2), |_| false),
    ));
    let by_stage: Vec<&OfferState> = states
        .iter()
        .filter(|s| s.cause.starts_with("stage:"))
        .collect();
    assert_eq!(by_stage.len(), 1, "exactly one stage commit: {states:?}");
    assert_eq!(by_stage[0].version, 3);
    assert_eq!(by_stage[0].cause, "stage:price");
    assert_eq!(by_stage[0].body["price_predicted"], 141);
    assert_eq!(by_stage[0].body["price"], 120);
    let rejected = events(&events_reader.read_until(WAIT, |r| {
        events(r)
            .iter()
            .any(|e| matches!(e, Event::ResultRejected { .. }))
    }));
    assert!(
        rejected.iter().any(|e| matches!(
            e,
            Event::ResultRejected { run_id, pass: 1, .. } if run_id == "price/o1#1"
        )),
        "{rejected:?}"
    );
    instance.stop();
}

/// Patches per offer in the crash test; each sets a field of its own.
const PATCHES: u32 = 20;

/// Answers every stage run on `topic` once per (run id, pass) until `stop`:
/// the update records how many patch fields the worker saw.
fn worker(
    kafka: &TestKafka,
    topic: &str,
    results: &str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    let reader = kafka.reader(topic);
    let producer = kafka.producer();
    let results = results.to_string();
    std::thread::spawn(move || {
        let mut answered = HashSet::new();
        while !stop.load(Ordering::Relaxed) {
            let records = reader.read_until(Duration::from_millis(100), |_| false);
            for run in stage_runs(&records) {
                if !answered.insert((run.run_id.clone(), run.pass)) {
                    continue;
                }
                let seen = run.body.keys().filter(|k| k.starts_with('p')).count();
                let result = success(&run, serde_json::json!({ "seen": seen }), None);
                producer
                    .send(
                        rdkafka::producer::BaseRecord::to(&results)
                            .key(&run.offer)
                            .payload(&codec::encode_run_result(&result, &run.offer, Format::Json)),
                    )
                    .map_err(|(e, _)| e)
                    .expect("send a result");
            }
            rdkafka::producer::Producer::flush(&producer, Duration::from_secs(10))
                .expect("flush results");
        }
        answered.len()
    })
}

#[test]
fn a_crash_mid_stream_loses_no_patch_and_no_stage_update() {
    // At-least-once mode, as brokers.md prescribes for crash tests on the
    // mock cluster (it has no transaction semantics): outputs are flushed,
    // then input offsets committed. A record may then be seen twice, but
    // only as an identical duplicate: versions and bodies are functions of
    // the committed state and the inputs.
    let kafka = TestKafka::new("offer-crash");
    let stage = price_stage(
        &kafka,
        "\n[offers.ping_pong]\nruns = 1000\nwindow = \"1m\"\npark = \"1h\"\n",
    );
    let config = kafka.config(&stage, 2, false);
    kafka.create_topics(&config, 2);
    let t = config.kafka.topics.clone();
    let offers: Vec<String> = (0..6).map(|i| format!("o{i}")).collect();
    let a = kafka.start(&config, "a", 2);
    a.wait_ready(WAIT);
    let stop = Arc::new(AtomicBool::new(false));
    let worker = worker(
        &kafka,
        &config.stages[0].topic,
        &t.results,
        Arc::clone(&stop),
    );

    // The stream: every offer created active, then patched PATCHES times.
    let stream = {
        let producer = kafka.producer();
        let topic = t.offers.clone();
        let offers = offers.clone();
        std::thread::spawn(move || {
            for n in 0..=PATCHES {
                for id in &offers {
                    let patch = if n == 0 {
                        serde_json::json!({"status": "active"})
                    } else {
                        serde_json::json!({ format!("p{n:02}"): n })
                    };
                    let change = reactor::offer::OfferChange {
                        offer_id: id.clone(),
                        change: reactor::offer::Change::Patch(body(patch)),
                        source: None,
                    };
                    let payload = codec::encode_offer_change(&change, Format::Protobuf);
                    producer
                        .send(
                            rdkafka::producer::BaseRecord::to(&topic)
                                .key(id)
                                .payload(&payload),
                        )
                        .map_err(|(e, _)| e)
                        .expect("send a patch");
                }
                rdkafka::producer::Producer::flush(&producer, Duration::from_secs(10))
                    .expect("flush patches");
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    // The instance dies in the middle of the stream, once it has committed
    // some of it; a successor restores its shards from the changelog and
    // resumes from the committed offsets.
    let states_reader = kafka.reader(&t.offer_state);
    let mut records = states_reader.read_until(WAIT, |r| r.len() >= 2 * offers.len());
    a.crash();
    eprintln!(
        "crashed after {} offer states, {} the stream ended",
        records.len(),
        if stream.is_finished() {
            "after"
        } else {
            "before"
        }
    );
    let b = kafka.start(&config, "b", 2);
    stream.join().expect("the stream");
    b.wait_ready(WAIT);

    // Done when every offer's latest state has every patch and the stage's
    // update computed from all of them.
    let complete = |s: &OfferState| {
        (1..=PATCHES).all(|n| s.body.contains_key(&format!("p{n:02}")))
            && s.body.get("seen") == Some(&serde_json::json!(PATCHES))
    };
    let until = Instant::now() + Duration::from_secs(40);
    loop {
        records.extend(states_reader.read_until(Duration::from_millis(200), |_| false));
        let states = offer_states(&records);
        let mut latest: BTreeMap<&str, &OfferState> = BTreeMap::new();
        for s in &states {
            let e = latest.entry(s.offer.as_str()).or_insert(s);
            if s.version > e.version {
                *e = s;
            }
        }
        if latest.len() == offers.len() && latest.values().all(|s| complete(s)) {
            break;
        }
        assert!(
            Instant::now() < until,
            "not every offer got every patch and stage update: {latest:#?}"
        );
    }
    // Anything late would come by now.
    records.extend(states_reader.read_until(Duration::from_secs(1), |_| false));
    stop.store(true, Ordering::Relaxed);
    let answered = worker.join().expect("the worker");
    assert!(answered >= offers.len());

    for id in &offers {
        let mut bodies: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
        for s in offer_states(&records).iter().filter(|s| &s.offer == id) {
            bodies
                .entry(s.version)
                .or_default()
                .insert(serde_json::to_string(&s.body).unwrap());
        }
        let versions: Vec<u64> = bodies.keys().copied().collect();
        let last = *versions.last().unwrap();
        assert_eq!(
            versions,
            (1..=last).collect::<Vec<_>>(),
            "{id}: versions in offer.state are contiguous"
        );
        for (version, distinct) in &bodies {
            assert_eq!(
                distinct.len(),
                1,
                "{id} v{version} was published with different bodies: {distinct:?}"
            );
        }
        // Every patch was applied once: PATCHES + 1 external commits, the
        // rest are the stage's.
        let last_body: Body = serde_json::from_str(bodies[&last].first().unwrap()).unwrap();
        assert_eq!(last_body["status"], "active");
        assert_eq!(last_body["seen"], PATCHES);
    }
    b.stop();
}

#[test]
fn a_rescan_from_the_cli_queues_the_matching_offers_on_every_partition() {
    let kafka = TestKafka::new("offer-rescan");
    // `price` is not watched: a price change never asks the stage, so only
    // a rescan finds offers whose price has grown past 100.
    let stage = format!(
        r#"
[[stage]]
name = "price"
watch = ["status"]
when = "offer.status == 'active' && offer.price > 100"
topic = "{p}.price.runs"
"#,
        p = kafka.prefix
    );
    let partitions = 3;
    let text = kafka.config_text(&stage, partitions, true);
    let config = reactor::config::parse(&text, "test.toml").unwrap().config;
    kafka.create_topics(&config, partitions);
    let t = config.kafka.topics.clone();
    let instance = kafka.start(&config, "a", partitions);
    instance.wait_ready(WAIT);

    // Ten active offers at price 50 (the stage does not want them), then
    // every one moves to 150; only the "eu" ones are in the rescan's filter.
    let producer = kafka.producer();
    let offer = |i: usize| format!("offer-{i}");
    let region = |i: usize| if i % 2 == 0 { "eu" } else { "us" };
    for i in 0..10 {
        let json = format!(
            r#"{{"offer_id":"{}","body":{{"status":"active","price":50,"region":"{}"}}}}"#,
            offer(i),
            region(i)
        );
        kafka.send_with(&producer, &t.offers, &offer(i), json.as_bytes());
    }
    for i in 0..10 {
        let json = format!(r#"{{"offer_id":"{}","patch":{{"price":150}}}}"#, offer(i));
        kafka.send_with(&producer, &t.offers, &offer(i), json.as_bytes());
    }
    let states_reader = kafka.reader(&t.offer_state);
    let states = offer_states(&states_reader.read_until(WAIT, |r| r.len() >= 20));
    assert_eq!(states.len(), 20, "{states:?}");
    let runs_reader = kafka.reader(&config.stages[0].topic);
    assert!(
        runs_reader
            .read_until(Duration::from_secs(1), |r| !r.is_empty())
            .is_empty(),
        "no stage run before the rescan"
    );

    // The operator's command line.
    let dir = support::temp::TempDir::new(&kafka.prefix);
    let path = dir.write("config.toml", &text);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_reactor"))
        .args(["rescan", "price", "--when", "offer.region == 'eu'", "-c"])
        .arg(&path)
        .args(["--brokers", &kafka.brokers])
        .output()
        .expect("running reactor rescan");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("{partitions} commands sent to {}", t.commands)),
        "{stdout}"
    );

    // Every partition's owner rescans its offers and says so when done.
    let events_reader = kafka.reader(&t.events);
    let progress = |records: &[Record]| -> Vec<(u64, u64, bool)> {
        events(records)
            .into_iter()
            .filter_map(|e| match e {
                Event::RescanProgress {
                    checked,
                    queued,
                    done,
                    ..
                } => Some((checked, queued, done)),
                _ => None,
            })
            .collect()
    };
    let seen = events_reader.read_until(WAIT, |r| {
        progress(r).iter().filter(|(_, _, done)| *done).count() >= partitions as usize
    });
    let done: Vec<(u64, u64, bool)> = progress(&seen).into_iter().filter(|p| p.2).collect();
    assert_eq!(done.len(), partitions as usize, "{done:?}");
    let checked: u64 = done.iter().map(|p| p.0).sum();
    let queued: u64 = done.iter().map(|p| p.1).sum();
    assert_eq!((checked, queued), (10, 5), "{done:?}");

    // The queued offers run: exactly the eu ones.
    let runs = stage_runs(&runs_reader.read_until(WAIT, |r| r.len() >= 5));
    let ran: BTreeSet<String> = runs.iter().map(|r| r.offer.clone()).collect();
    let expected: BTreeSet<String> = (0..10).filter(|i| i % 2 == 0).map(offer).collect();
    assert_eq!(ran, expected);
    assert!(runs
        .iter()
        .all(|r| r.version == 2 && r.body["price"] == 150));
    instance.stop();

    // `reactor tail` tells every topic's records apart by the configuration,
    // the changelog's by each key's store.
    let config_path = path.to_str().unwrap();
    let tail =
        |topic: &str, extra: &[&str]| kafka.tail(topic, &[&["-c", config_path], extra].concat());
    let changelog = tail(&t.changelog, &["--idle", "3s"]);
    let keys: BTreeSet<&str> = changelog
        .iter()
        .map(|l| l["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains("offer/offer-0"), "{keys:?}");
    assert!(keys.contains("rescan/price"), "{keys:?}");
    for line in &changelog {
        assert!(line["value"].get("undecodable").is_none(), "{line}");
    }
    let run = tail(&config.stages[0].topic, &["--max", "1"]);
    assert_eq!(run[0]["value"]["kind"], "stage", "{run:?}");
    let change = tail(&t.offers, &["--max", "1"]);
    assert_eq!(
        change[0]["value"]["offer_id"], change[0]["key"],
        "{change:?}"
    );
    let state = tail(&t.offer_state, &["--max", "1"]);
    assert_eq!(state[0]["value"]["cause"], "external", "{state:?}");
}
