//! No record can stop a shard: arbitrary bytes and adversarial structured
//! values (deep nesting, huge strings, long expressions, every field of the
//! wrong type, Schema Registry framing, oversized records) thrown at every
//! input through the path the runtime takes for each record
//! (`runtime::intake`), without Kafka. Every record must be applied or
//! refused with a reason and a dead letter; no panic, no stack overflow
//! (which would abort the whole test binary), and every record the shard
//! would produce must fit the producer's limit.
//!
//! Case counts: `PROPTEST_CASES` (default 64 per property).

use std::cell::RefCell;
use std::collections::BTreeMap;

use jiff::Timestamp;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use prost::Message;
use serde_json::{json, Value as Json};

use reactor::codec::{self, limits, Format};
use reactor::config::Config;
use reactor::engine::Engine;
use reactor::proto::v1;
use reactor::runtime::intake::{self, Context, Outcome, Received, Role, Router, Shard};
use reactor::runtime::output::OutTopics;
use reactor::runtime::supervisor::RUNTIME_STACK;
use reactor::shell::driver::Driver;

const CONFIG: &str = r#"
[[pool]]
name = "reports"
max_running = 2

[[task]]
id = "t"
pool = "reports"
trigger = "delta(dwh.orders/max_dt, 1h)"

[[stage]]
name = "price"
watch = ["price"]
when = "has(offer.price) && offer.price > 0"
timer = "has(offer.at) ? offer.at : null"

[[stage]]
name = "tags"
when = "has(offer.tags) && size(offer.tags) > 0"
"#;

/// The producer limit the shard works to.
const MAX_RECORD: usize = 1_000_000;

const ROLES: [Role; 4] = [Role::Ctl, Role::Offers, Role::Results, Role::Commands];

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// A shard of one partition owning everything, with offers, stage runs and
/// a task run in flight, so that results and commands reach real state.
struct Bench {
    config: Config,
    router: Router,
    shard: Shard,
    now: Timestamp,
    offset: i64,
}

impl Bench {
    fn new() -> Bench {
        let config = reactor::config::parse(CONFIG, "poison.toml")
            .unwrap()
            .config;
        let router = Router::new(&config, 1);
        let shard = Shard::new(
            Driver::new(0, Engine::for_shard(&config, |_| true)),
            BTreeMap::new(),
        );
        let mut bench = Bench {
            config,
            router,
            shard,
            now: ts("2024-06-01T00:00:00Z"),
            offset: 0,
        };
        for i in 0..5 {
            let body = json!({"price": 100 + i, "status": "active", "tags": ["a"], "at": "2030-01-01T00:00:00Z"});
            let change = format!(r#"{{"offer_id":"o{i}","body":{body}}}"#);
            let outcome = bench.take(
                Role::Offers,
                Some(format!("o{i}").as_bytes()),
                Some(change.as_bytes()),
            );
            assert_eq!(outcome, Outcome::Applied);
        }
        let ctl = br#"{"entity":"dwh.orders","param":"max_dt","value":"2024-06-01T00:00:00Z"}"#;
        assert_eq!(bench.take(Role::Ctl, None, Some(ctl)), Outcome::Applied);
        bench
    }

    fn topic(&self, role: Role) -> String {
        let t = &self.config.kafka.topics;
        match role {
            Role::Ctl => t.ctl.clone(),
            Role::Offers => t.offers.clone(),
            Role::Results => t.results.clone(),
            Role::Commands => t.commands.clone(),
        }
    }

    /// One record through the runtime's path for its topic.
    fn take(&mut self, role: Role, key: Option<&[u8]>, payload: Option<&[u8]>) -> Outcome {
        self.offset += 1;
        self.now += jiff::SignedDuration::from_secs(7);
        let topic = self.topic(role);
        let record = Received {
            topic: &topic,
            partition: 0,
            offset: self.offset,
            key,
            payload,
            produced_at: None,
            trace: Default::default(),
        };
        let topics = OutTopics::new(&self.config.kafka.topics);
        let ctx = Context {
            settings: &self.config.kafka,
            topics: &topics,
            max_record_bytes: MAX_RECORD,
            router: &self.router,
        };
        let now = self.now;
        let outcome = match role {
            // As `Runtime::on_ctl`: every shard applies a change; the
            // owner of `partition % shards` reports a bad record.
            Role::Ctl => match intake::decode_ctl(&self.router, key, payload) {
                Ok(found) => {
                    if let Some(known) = found {
                        intake::apply_ctl(
                            &mut self.shard,
                            &ctx,
                            known.value,
                            known.id,
                            &record,
                            now,
                        );
                    }
                    Outcome::Applied
                }
                Err(e) => {
                    let reason = e.to_string();
                    assert!(self.shard.report_ctl_dead(&ctx, &record, reason.clone()));
                    Outcome::Rejected { reason }
                }
            },
            role => intake::take(&mut self.shard, &ctx, role, &record, now),
        };
        intake::tick(&mut self.shard, &ctx, now);
        outcome
    }

    /// What a commit would check: every record fits; a refusal left a dead
    /// letter with the reason. Then forgets them, as a commit does.
    fn check(&mut self, outcome: &Outcome) -> Result<(), TestCaseError> {
        for r in self.shard.pending() {
            prop_assert!(
                r.size() <= MAX_RECORD,
                "a {} record of {} bytes",
                r.topic,
                r.size()
            );
        }
        if let Outcome::Rejected { reason } = outcome {
            prop_assert!(!reason.is_empty());
            let dead = self.shard.dead_letters();
            prop_assert_eq!(dead.last().map(|d| d.offset), Some(self.offset));
            let letter = self
                .shard
                .pending()
                .iter()
                .rev()
                .find(|r| *r.topic == *self.config.kafka.topics.dead)
                .expect("a dead letter");
            let header = letter
                .headers
                .iter()
                .find(|(k, _)| k == "reactor.reason")
                .map(|(_, v)| String::from_utf8_lossy(v).into_owned());
            prop_assert!(header.is_some_and(|h| !h.is_empty()));
        }
        self.shard.clear();
        Ok(())
    }

    /// Events of kind `kind` among the pending records.
    fn events(&self, kind: &str) -> Vec<reactor::action::Event> {
        self.shard
            .pending()
            .iter()
            .filter(|r| *r.topic == *self.config.kafka.topics.events)
            .filter_map(|r| codec::decode_event(r.payload?).ok())
            .map(|(e, _)| e)
            .filter(|e| codec::event_kind(e) == kind)
            .collect()
    }
}

/// Runs `body` on a thread with the runtime thread's stack: the engine
/// evaluates CEL there, and a debug build needs more than a test thread has.
fn on_runtime_stack(body: impl FnOnce() + Send) {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(RUNTIME_STACK)
            .spawn_scoped(scope, body)
            .unwrap()
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    });
}

fn runner() -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(64);
    TestRunner::new(RunnerConfig {
        cases,
        failure_persistence: None,
        ..RunnerConfig::default()
    })
}

/// One record to throw: its topic, key and value, and whether it must be
/// refused (else it may be applied or refused).
type Case = (Role, Option<Vec<u8>>, Option<Vec<u8>>, bool);

/// Runs `strategy`'s records through one bench, checking each.
fn throw<S>(strategy: S)
where
    S: Strategy<Value = Case> + Send,
{
    on_runtime_stack(move || {
        let bench = RefCell::new(Bench::new());
        let result = runner().run(&strategy, |(role, key, payload, must_refuse)| {
            let mut bench = bench.borrow_mut();
            let outcome = bench.take(role, key.as_deref(), payload.as_deref());
            if must_refuse {
                prop_assert!(matches!(outcome, Outcome::Rejected { .. }), "{outcome:?}");
            }
            bench.check(&outcome)
        });
        if let Err(e) = result {
            panic!("{e}");
        }
    });
}

fn role() -> impl Strategy<Value = Role> {
    prop::sample::select(ROLES.to_vec())
}

fn key() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        Just(None),
        Just(Some(b"o1".to_vec())),
        Just(Some(b"reports".to_vec())),
        prop::collection::vec(any::<u8>(), 0..16).prop_map(Some),
        (limits::MAX_NAME_BYTES..limits::MAX_INPUT_BYTES).prop_map(|n| Some(vec![b'k'; n])),
    ]
}

/// Confluent Schema Registry framing in front of `payload`, sometimes.
fn framed(payload: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => Just(payload.clone()),
        1 => (any::<u32>(), prop::collection::vec(any::<u8>(), 0..4)).prop_map(move |(id, idx)| {
            let mut v = vec![0];
            v.extend(id.to_be_bytes());
            if payload.first().is_none_or(|b| *b != b'{') {
                v.extend(idx);
            }
            v.extend(&payload);
            v
        }),
    ]
}

/// JSON values of every type, some huge, some nested.
fn value() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "[a-z0-9_/#.:-]{0,12}".prop_map(Json::String),
        (1usize..300_000).prop_map(|n| Json::String("s".repeat(n))),
        prop::sample::select(vec![
            "2024-06-01T00:00:00Z",
            "price/o1#1",
            "price/o1",
            "t#1",
            "RUN_STATUS_SUCCEEDED",
            "RUN_STATUS_FAILED",
            "dwh.orders/max_dt",
            "o1",
            "",
            "not a time",
        ])
        .prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Json::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..6)
                .prop_map(|m| Json::Object(m.into_iter().collect())),
        ]
    })
}

/// Deeply nested JSON text, mostly beyond every limit, and its depth.
fn deep_text() -> impl Strategy<Value = (String, usize)> {
    (1usize..5000, any::<bool>()).prop_map(|(n, arrays)| {
        let text = if arrays {
            format!("{}1{}", "[".repeat(n), "]".repeat(n))
        } else {
            format!("{}1{}", r#"{"a":"#.repeat(n), "}".repeat(n))
        };
        (text, n)
    })
}

/// CEL text of every shape the parser recurses on, most of it over the limits.
fn expression() -> impl Strategy<Value = String> {
    prop_oneof![
        (0usize..3000).prop_map(|n| format!("1{} > 0", "+1".repeat(n))),
        (0usize..20_000).prop_map(|n| format!("offer{} == 1", ".a".repeat(n))),
        (0usize..50_000).prop_map(|n| format!("offer{} == 1", "['a']".repeat(n))),
        (0usize..400).prop_map(|n| format!("{}true{}", "(".repeat(n), ")".repeat(n))),
        (0usize..400).prop_map(|n| format!("{}true", "!".repeat(n))),
        (0usize..400).prop_map(|n| format!("{}1{} == 1", "int(".repeat(n), ")".repeat(n))),
        (0usize..400).prop_map(|n| format!("{}1", "true ? 1 : ".repeat(n))),
        (0usize..200, 0usize..60).prop_map(|(ops, nest)| format!(
            "{}offer.price{}{} > 0",
            "(".repeat(nest),
            " * 1 + offer.price".repeat(ops),
            ")".repeat(nest)
        )),
        "[ -~]{0,64}",
    ]
}

/// A JSON object with some of `fields`, each any value.
fn object_of(fields: &'static [&'static str]) -> impl Strategy<Value = Json> {
    prop::collection::btree_map(
        prop::sample::select(fields.to_vec()),
        value(),
        0..fields.len(),
    )
    .prop_map(|m| Json::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()))
}

/// A JSON record of `role` with fields of the schema holding values of any type.
fn structured(role: Role) -> BoxedStrategy<Json> {
    const CTL: &[&str] = &[
        "entity",
        "param",
        "value",
        "changed_at",
        "changedAt",
        "source",
    ];
    const OFFER: &[&str] = &["offer_id", "offerId", "body", "patch", "deleted", "source"];
    const RESULT: &[&str] = &[
        "run_id",
        "runId",
        "pass",
        "reply_key",
        "status",
        "error",
        "version",
        "update",
        "body",
        "state",
        "clear_state",
        "timer",
        "clear_timer",
    ];
    const INNER: &[&str] = &[
        "task", "param", "value", "offer_id", "stage", "state", "version", "when",
    ];
    const OPS: &[&str] = &[
        "pause",
        "resume",
        "set_last",
        "clear_last",
        "set_stage_state",
        "rescan",
        "unpark_offer",
    ];
    match role {
        Role::Ctl => object_of(CTL).boxed(),
        Role::Offers => object_of(OFFER).boxed(),
        Role::Results => object_of(RESULT).boxed(),
        Role::Commands => (prop::sample::select(OPS.to_vec()), object_of(INNER))
            .prop_map(|(op, inner)| Json::Object([(op.to_string(), inner)].into_iter().collect()))
            .boxed(),
    }
}

/// A valid record of `role` about real state, with one field replaced by
/// any value: reaches the engine more often than random fields do.
fn mutated(role: Role) -> BoxedStrategy<Json> {
    let base = match role {
        Role::Ctl => {
            json!({"entity": "dwh.orders", "param": "max_dt", "value": "2024-06-02T00:00:00Z"})
        }
        Role::Offers => json!({"offer_id": "o1", "patch": {"price": 5, "tags": ["b"]}}),
        Role::Results => {
            json!({"run_id": "price/o1#1", "pass": 1, "status": "RUN_STATUS_SUCCEEDED",
                                "update": {"price_seen": 1}, "state": {"n": 1}})
        }
        Role::Commands => json!({"rescan": {"stage": "price", "when": "offer.price > 0"}}),
    };
    (any::<prop::sample::Index>(), value())
        .prop_map(move |(at, v)| {
            let mut record = base.clone();
            let target = match role {
                Role::Commands => record.get_mut("rescan").unwrap(),
                _ => &mut record,
            };
            let object = target.as_object_mut().unwrap();
            let keys: Vec<String> = object.keys().cloned().collect();
            object.insert(at.get(&keys).clone(), v);
            record
        })
        .boxed()
}

fn text(v: &Json) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

/// A `google.protobuf.Struct` nested `n` levels deep.
fn deep_struct(n: usize) -> pbjson_types::Struct {
    let mut s = pbjson_types::Struct::default();
    for _ in 0..n {
        let mut outer = pbjson_types::Struct::default();
        outer
            .fields
            .insert("a".into(), pbjson_types::value::Kind::StructValue(s).into());
        s = outer;
    }
    s
}

/// Protobuf records with adversarial fields.
fn protobuf() -> impl Strategy<Value = (Role, Vec<u8>)> {
    let text = prop_oneof!["[ -~]{0,24}", (0usize..600_000).prop_map(|n| "r".repeat(n))];
    prop_oneof![
        (text.clone(), any::<u64>(), any::<i32>(), 0usize..200).prop_map(
            |(run_id, pass, status, depth)| {
                let m = v1::RunResult {
                    run_id,
                    pass,
                    status,
                    update: Some(deep_struct(depth)),
                    ..Default::default()
                };
                (Role::Results, m.encode_to_vec())
            }
        ),
        (text.clone(), 0usize..200).prop_map(|(offer_id, depth)| {
            let m = v1::OfferChange {
                offer_id,
                body: Some(deep_struct(depth)),
                ..Default::default()
            };
            (Role::Offers, m.encode_to_vec())
        }),
        (text.clone(), text.clone(), any::<i64>(), any::<i32>()).prop_map(
            |(entity, param, seconds, nanos)| {
                let m = v1::CtlChange {
                    entity,
                    param,
                    value: Some(pbjson_types::Timestamp { seconds, nanos }),
                    ..Default::default()
                };
                (Role::Ctl, m.encode_to_vec())
            }
        ),
        (expression(), text).prop_map(|(when, stage)| {
            let m = v1::Command {
                op: Some(v1::command::Op::Rescan(v1::command::Rescan {
                    stage,
                    when: Some(when),
                })),
            };
            (Role::Commands, m.encode_to_vec())
        }),
    ]
}

#[test]
fn arbitrary_bytes_are_refused_with_a_reason() {
    throw(
        (role(), key(), prop::collection::vec(any::<u8>(), 0..2048)).prop_flat_map(
            |(role, key, bytes)| {
                framed(bytes).prop_map(move |b| (role, key.clone(), Some(b), false))
            },
        ),
    );
}

#[test]
fn structured_values_of_every_type_never_stop_the_shard() {
    throw(
        (role(), key(), any::<bool>())
            .prop_flat_map(|(role, key, mutate)| {
                let record = if mutate {
                    mutated(role)
                } else {
                    structured(role)
                };
                record.prop_map(move |v| (role, key.clone(), text(&v)))
            })
            .prop_flat_map(|(role, key, bytes)| {
                framed(bytes).prop_map(move |b| (role, key.clone(), Some(b), false))
            }),
    );
}

#[test]
fn deep_nesting_is_refused_with_a_reason() {
    throw((role(), deep_text()).prop_map(|(role, (deep, depth))| {
        let record = match role {
            Role::Ctl => format!(r#"{{"entity":"e","param":"p","value":{deep}}}"#),
            Role::Offers => format!(r#"{{"offer_id":"o1","patch":{{"d":{deep}}}}}"#),
            Role::Results => format!(
                r#"{{"run_id":"price/o1#1","pass":1,"status":"RUN_STATUS_SUCCEEDED","state":{deep}}}"#
            ),
            Role::Commands => format!(
                r#"{{"set_stage_state":{{"offer_id":"o1","stage":"price","version":1,"state":{deep}}}}}"#
            ),
        };
        let too_deep = depth > limits::MAX_JSON_DEPTH + 1;
        (role, Some(b"o1".to_vec()), Some(record.into_bytes()), too_deep)
    }));
}

#[test]
fn long_expressions_in_rescans_never_stop_the_shard() {
    throw((expression(), any::<bool>()).prop_map(|(when, json)| {
        let command = reactor::engine::Command::Rescan {
            stage: "price".into(),
            when: Some(when),
        };
        let format = if json { Format::Json } else { Format::Protobuf };
        (
            Role::Commands,
            None,
            Some(codec::encode_command(&command, format)),
            false,
        )
    }));
}

#[test]
fn adversarial_protobuf_never_stops_the_shard() {
    throw(
        protobuf()
            .prop_flat_map(|(role, bytes)| framed(bytes).prop_map(move |b| (role, b)))
            .prop_map(|(role, b)| (role, Some(b"o1".to_vec()), Some(b), false)),
    );
}

/// The poison records of the issue, one by one, with what becomes of each.
#[test]
fn each_poison_kind_of_the_issue_is_refused_or_rejected_and_work_goes_on() {
    on_runtime_stack(|| {
        let mut bench = Bench::new();
        // A 3,000-term rescan filter: a `command_rejected` event naming the
        // limit, not a stack overflow.
        let rescan = format!(
            r#"{{"rescan":{{"stage":"price","when":"1{} > 0"}}}}"#,
            "+1".repeat(2999)
        );
        assert_eq!(
            bench.take(Role::Commands, None, Some(rescan.as_bytes())),
            Outcome::Applied
        );
        let rejected = bench.events("command_rejected");
        assert_eq!(rejected.len(), 1, "{rejected:?}");
        assert!(
            format!("{rejected:?}").contains("expression too large"),
            "{rejected:?}"
        );
        bench.check(&Outcome::Applied).unwrap();
        for when in [
            format!("offer{} == 1", ".a".repeat(20_000)),
            format!("offer{} == 1", "['a']".repeat(50_000)),
        ] {
            let command = format!(r#"{{"rescan":{{"stage":"price","when":"{when}"}}}}"#);
            bench.take(Role::Commands, None, Some(command.as_bytes()));
            assert_eq!(bench.events("command_rejected").len(), 1);
            bench.check(&Outcome::Applied).unwrap();
        }

        // A record larger than the producer accepts, on every input: its
        // dead letter is cut to fit.
        let huge = vec![b'x'; MAX_RECORD + 100];
        for role in ROLES {
            let outcome = bench.take(role, Some(b"o1"), Some(&huge));
            let Outcome::Rejected { reason } = &outcome else {
                panic!("{outcome:?}")
            };
            assert!(reason.contains("over the input limit"), "{reason}");
            let letter = bench.shard.pending().first().unwrap();
            assert!(letter.size() <= MAX_RECORD);
            assert!(letter
                .headers
                .iter()
                .any(|(k, v)| k == "reactor.truncated" && v == b"true"));
            bench.check(&outcome).unwrap();
        }

        // What Kafka refuses and simulate used to accept.
        for (role, key, payload, expected) in [
            (
                Role::Ctl,
                None,
                &br#"{"entity":"","param":"p","value":"2024-06-01T00:00:00Z"}"#[..],
                "missing field `entity`",
            ),
            (
                Role::Offers,
                None,
                br#"{"offer_id":"","body":{"a":1}}"#,
                "missing field `offer_id`",
            ),
            (Role::Offers, None, b"\xff\x00garbage", "protobuf: "),
            (
                Role::Results,
                Some(&b"o1"[..]),
                br#"{"run_id":1}"#,
                "json: ",
            ),
            (
                Role::Commands,
                None,
                br#"{"pause":{"task":""}}"#,
                "missing field `task`",
            ),
        ] {
            let outcome = bench.take(role, key, Some(payload));
            let Outcome::Rejected { reason } = &outcome else {
                panic!("{outcome:?}")
            };
            assert!(reason.starts_with(expected), "{reason}");
            bench.check(&outcome).unwrap();
        }
        // A tombstone without a key on `offer.changes`.
        let outcome = bench.take(Role::Offers, None, None);
        assert!(matches!(outcome, Outcome::Rejected { .. }), "{outcome:?}");
        bench.check(&outcome).unwrap();

        // A patch that would grow a body past the limit is refused before
        // it is applied; the offer keeps its body.
        let half = "h".repeat(limits::MAX_BODY_BYTES / 2 + 1);
        for field in ["a", "b"] {
            let patch = format!(r#"{{"offer_id":"o2","patch":{{"{field}":"{half}"}}}}"#);
            let outcome = bench.take(Role::Offers, None, Some(patch.as_bytes()));
            bench.check(&outcome).unwrap();
            if field == "b" {
                let Outcome::Rejected { reason } = outcome else {
                    panic!("the second half should not fit")
                };
                assert!(reason.contains("the offer's body would be"), "{reason}");
            }
        }
        let view = bench.shard.engine().offer_view("o2").unwrap();
        assert!(view.body.contains_key("a") && !view.body.contains_key("b"));

        // And later valid input is processed.
        let change = br#"{"offer_id":"o9","body":{"price":7,"status":"active"}}"#;
        assert_eq!(
            bench.take(Role::Offers, Some(b"o9"), Some(change)),
            Outcome::Applied
        );
        assert!(bench
            .shard
            .pending()
            .iter()
            .any(|r| *r.topic == *bench.config.kafka.topics.offer_state));
    });
}

/// A CTL record is reported once per shard, however often it is read (every
/// restart reads the whole CTL topic again): the mark goes to the changelog
/// with the dead letter, and a shard restored with it reports nothing again.
#[test]
fn a_bad_ctl_record_is_reported_once_across_restores() {
    let config = reactor::config::parse(CONFIG, "poison.toml")
        .unwrap()
        .config;
    let router = Router::new(&config, 1);
    let topics = OutTopics::new(&config.kafka.topics);
    let ctx = Context {
        settings: &config.kafka,
        topics: &topics,
        max_record_bytes: MAX_RECORD,
        router: &router,
    };
    let record = |offset| Received {
        topic: "ctl.changes",
        partition: 0,
        offset,
        key: Some(b"x"),
        payload: Some(b"{not json"),
        produced_at: None,
        trace: Default::default(),
    };
    let mut shard = Shard::new(
        Driver::new(0, Engine::for_shard(&config, |_| true)),
        BTreeMap::new(),
    );
    assert!(shard.report_ctl_dead(&ctx, &record(3), "json: bad".into()));
    assert!(!shard.report_ctl_dead(&ctx, &record(3), "json: bad".into()));
    let marks: BTreeMap<i32, i64> = shard
        .pending()
        .iter()
        .filter(|r| *r.topic == *config.kafka.topics.changelog)
        .filter_map(|r| codec::decode_ctl_dead_mark(r.key, r.payload))
        .map(|m| {
            let (p, offset) = m.unwrap();
            (p, offset.unwrap())
        })
        .collect();
    assert_eq!(marks, BTreeMap::from([(0, 3)]));
    // Restored with its marks, the shard reports only later offsets.
    let mut restored = Shard::new(Driver::new(0, Engine::for_shard(&config, |_| true)), marks);
    assert!(!restored.report_ctl_dead(&ctx, &record(2), "json: bad".into()));
    assert!(!restored.report_ctl_dead(&ctx, &record(3), "json: bad".into()));
    assert!(restored.pending().is_empty());
    assert!(restored.report_ctl_dead(&ctx, &record(4), "json: bad".into()));
}
