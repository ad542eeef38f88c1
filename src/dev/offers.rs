//! The offer half of the demo: a script of offer changes published to
//! `offer.changes`, the demo stage workers (`expire`, `price`) and the
//! lines the printer writes for stage runs and committed offer states.
//!
//! Everything here but the threads is pure, so the script and the workers'
//! answers are unit-tested.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::Message;
use serde_json::{json, Value};

use super::demo::{clock, sleep_unless, Rng};
use crate::action::{OfferState, StageRunCommand};
use crate::codec::{self, Format};
use crate::config::Config;
use crate::engine::{RunResult, StageReply, Update};
use crate::kafka::Clients;
use crate::offer::{Body, Change, OfferChange};
use crate::run::Status;

/// Exposure of an offer before the `expire` stage retires it (the `4320h` of
/// `examples/dev.toml`).
const EXPOSURE: SignedDuration = SignedDuration::from_hours(4320);
/// Time between two scripted changes.
const STEP: Duration = Duration::from_secs(3);
/// The model version the `price` worker predicts with (stored in its state).
const MODEL: i64 = 3;
/// The `source` of every demo change.
const SOURCE: &str = "reactor-dev";

/// Categories of demo offers, with the factor the demo price model applies.
const CATEGORIES: [(&str, f64); 4] = [
    ("sport", 0.95),
    ("home", 1.08),
    ("electronics", 0.9),
    ("books", 1.0),
];

/// The scripted offer changes: a few offers at once, then one change every
/// [`STEP`]. Dates are relative to the wall clock at the start, so that some
/// offers reach their 180 days of exposure a few seconds into the demo.
pub struct Script {
    start: Timestamp,
    rng: Rng,
    /// Ids of the offers published so far, in order.
    offers: Vec<String>,
    /// Current price of each offer, by position in `offers`.
    prices: Vec<i64>,
    step: u64,
}

/// One change of the script, as the demo publishes and prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct Scripted {
    /// The change.
    pub change: OfferChange,
    /// What it is about, for the demo's line.
    pub note: &'static str,
}

/// `t` in whole seconds, as the demo writes dates into offers.
fn date(t: Timestamp) -> String {
    Timestamp::from_second(t.as_second())
        .unwrap_or(t)
        .to_string()
}

fn body(value: Value) -> Body {
    match value {
        Value::Object(map) => map,
        _ => unreachable!("the script builds objects"),
    }
}

impl Script {
    /// A script whose dates count from `start`.
    pub fn new(start: Timestamp) -> Script {
        Script {
            start,
            rng: Rng::new(0x9e37_79b9_7f4a_7c15),
            offers: Vec::new(),
            prices: Vec::new(),
            step: 0,
        }
    }

    /// `published_at` of an offer that reaches its exposure `after` from now.
    fn expiring(&self, now: Timestamp, after: SignedDuration) -> String {
        date(now - EXPOSURE + after)
    }

    fn publish(&mut self, id: String, price: Option<i64>, value: Value) -> OfferChange {
        self.offers.push(id.clone());
        self.prices.push(price.unwrap_or(0));
        OfferChange {
            offer_id: id,
            change: Change::Body(body(value)),
            source: Some(SOURCE.into()),
        }
    }

    fn patch(&self, i: usize, value: Value) -> OfferChange {
        OfferChange {
            offer_id: self.offers[i].clone(),
            change: Change::Patch(body(value)),
            source: Some(SOURCE.into()),
        }
    }

    /// The offers published when the demo starts: two expire 12 s and 22 s
    /// in, one is past its exposure already (it expires as soon as Reactor
    /// reads it), one is fresh, and one is a draft without price or date.
    pub fn opening(&mut self) -> Vec<Scripted> {
        let s = self.start;
        let mut out = Vec::new();
        let opening = [
            (
                "sport",
                640,
                self.expiring(s, SignedDuration::from_secs(12)),
                "expires ~12 s in",
            ),
            (
                "home",
                35,
                self.expiring(s, SignedDuration::from_secs(22)),
                "expires ~22 s in",
            ),
            (
                "home",
                120,
                date(s - SignedDuration::from_hours(200 * 24)),
                "published 200 days ago: expires at once",
            ),
            (
                "electronics",
                299,
                date(s - SignedDuration::from_hours(3 * 24)),
                "fresh: 177 days to go",
            ),
        ];
        for (k, (category, price, published_at, note)) in opening.into_iter().enumerate() {
            let id = format!("o-{}", 1001 + k);
            let change = self.publish(
                id,
                Some(price),
                json!({
                    "status": "active",
                    "category": category,
                    "price": price,
                    "published_at": published_at,
                }),
            );
            out.push(Scripted { change, note });
        }
        let change = self.publish(
            "o-1005".into(),
            None,
            json!({"status": "draft", "category": "books"}),
        );
        out.push(Scripted {
            change,
            note: "a draft: no price, no date, no stage runs",
        });
        out
    }

    /// The next scripted change at `now` (one every [`STEP`]), cycling
    /// through: a new offer (every other one expiring 15 s later), a price
    /// change, publishing the draft or a category change, another price change.
    pub fn next(&mut self, now: Timestamp) -> Scripted {
        self.step += 1;
        match self.step % 4 {
            1 => {
                let id = format!("o-{}", 1001 + self.offers.len());
                let (category, _) = CATEGORIES[self.offers.len() % CATEGORIES.len()];
                let price = 20 + (self.rng.next() % 880) as i64;
                let expiring = self.step % 8 == 1;
                let published_at = if expiring {
                    self.expiring(now, SignedDuration::from_secs(15))
                } else {
                    date(now)
                };
                let change = self.publish(
                    id,
                    Some(price),
                    json!({
                        "status": "active",
                        "category": category,
                        "price": price,
                        "published_at": published_at,
                    }),
                );
                let note = if expiring {
                    "new, expires ~15 s from now"
                } else {
                    "new"
                };
                Scripted { change, note }
            }
            3 if self.step == 3 && self.offers.len() > 4 => {
                // The draft of the opening goes live: both stages wake.
                self.prices[4] = 80;
                let change = self.patch(
                    4,
                    json!({"status": "active", "price": 80, "published_at": date(now)}),
                );
                Scripted {
                    change,
                    note: "the draft is published",
                }
            }
            3 => {
                let i = (self.rng.next() as usize) % self.offers.len();
                let (category, _) = CATEGORIES[(self.rng.next() as usize) % CATEGORIES.len()];
                let change = self.patch(i, json!({"category": category}));
                Scripted {
                    change,
                    note: "category only: `price` is asked, its `when` says no",
                }
            }
            _ => {
                // A price change of an offer that has a price.
                let priced: Vec<usize> = (0..self.offers.len())
                    .filter(|&i| self.prices[i] > 0)
                    .collect();
                let i = priced[(self.rng.next() as usize) % priced.len()];
                let pct = 3 + (self.rng.next() % 10) as i64;
                let up = self.rng.next() % 2 == 0;
                let old = self.prices[i];
                let delta = (old * pct / 100).max(1);
                let price = if up {
                    old + delta
                } else {
                    (old - delta).max(1)
                };
                self.prices[i] = price;
                let change = self.patch(i, json!({"price": price}));
                Scripted {
                    change,
                    note: "price change",
                }
            }
        }
    }
}

/// A demo worker's answer to a stage run, and its line.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The result to send to `reactor.results`, keyed by the offer id.
    pub result: RunResult,
    /// What the worker did, for the demo's line.
    pub note: String,
}

/// What the demo workers answer to a stage run. `roll` is a random number:
/// the `price` worker fails when it is a multiple of ten. The answer is
/// computed from the command's version, which it echoes.
///
/// - `expire` sets `status` to `expired`;
/// - `price` predicts a price from the offer's price and category, and keeps
///   the model and the price it predicted from as the stage's state;
/// - any other stage (a configuration given with `-c`) succeeds without
///   changing anything.
pub fn answer(run: &StageRunCommand, roll: u64) -> Answer {
    let mut result = RunResult::new(run.run_id.clone(), run.pass, Status::Succeeded);
    result.stage = StageReply {
        version: Some(run.version),
        ..StageReply::default()
    };
    let note = match run.stage.as_str() {
        "expire" => {
            result.stage.update = Some(Update::Patch(body(json!({"status": "expired"}))));
            "status=expired".to_string()
        }
        "price" => match run.body.get("price").filter(|p| p.is_number()) {
            None => "no price: nothing to predict".to_string(),
            Some(_) if roll % 10 == 0 => {
                result.status = Status::Failed;
                result.error = Some("demo failure: the model server is busy".into());
                result.stage = StageReply::default();
                "failed: the model server is busy".to_string()
            }
            Some(price) => {
                let factor = run
                    .body
                    .get("category")
                    .and_then(Value::as_str)
                    .and_then(|c| CATEGORIES.iter().find(|(name, _)| *name == c))
                    .map_or(1.0, |(_, f)| *f);
                let predicted = (price.as_f64().unwrap_or(0.0) * factor).round() as i64;
                result.stage.update =
                    Some(Update::Patch(body(json!({"price_predicted": predicted}))));
                result.stage.state = Some(json!({"model": MODEL, "price": price}));
                format!("price_predicted={predicted} (model {MODEL})")
            }
        },
        _ => "done (no update)".to_string(),
    };
    Answer { result, note }
}

/// A JSON value as the demo prints it: strings without quotes.
fn show(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One line for a committed offer state: version, cause, the changed fields
/// with their new values, and the stage states.
pub fn describe_state(state: &OfferState) -> String {
    let mut line = format!("{} v{}  {}", state.offer, state.version, state.cause);
    if state.deleted {
        line.push_str("  deleted");
        return line;
    }
    let changed: Vec<String> = state
        .changed_fields
        .iter()
        .map(|f| match state.body.get(f) {
            Some(v) => format!("{f}={}", show(v)),
            None => format!("{f} removed"),
        })
        .collect();
    if changed.is_empty() {
        line.push_str("  (state only)");
    } else {
        line.push_str("  ");
        line.push_str(&changed.join(" "));
    }
    if !state.states.is_empty() {
        let states: Vec<String> = state
            .states
            .iter()
            .map(|(stage, s)| format!("{stage}={s}"))
            .collect();
        line.push_str("   states: ");
        line.push_str(&states.join(" "));
    }
    line
}

/// One line for a stage run command.
pub fn describe_run(run: &StageRunCommand) -> String {
    format!(
        "{} attempt {} pass {}  on v{}",
        run.run_id, run.attempt, run.pass, run.version
    )
}

/// Publishes the opening offers, then one scripted change every [`STEP`].
pub fn producer(clients: Clients, config: Arc<Config>, stop: Arc<AtomicBool>) {
    if config.stages.is_empty() {
        return;
    }
    let Ok(producer) = clients.producer(None).create::<ThreadedProducer<_>>() else {
        return;
    };
    let topic = &config.kafka.topics.offers;
    let mut script = Script::new(Timestamp::now());
    for scripted in script.opening() {
        send(&producer, topic, &scripted);
    }
    while !stop.load(Ordering::Relaxed) {
        sleep_unless(&stop, STEP);
        if stop.load(Ordering::Relaxed) {
            break;
        }
        send(&producer, topic, &script.next(Timestamp::now()));
    }
    let _ = producer.flush(Duration::from_secs(5));
}

fn send(producer: &ThreadedProducer<DefaultProducerContext>, topic: &str, s: &Scripted) {
    let payload = codec::encode_offer_change(&s.change, Format::Protobuf);
    let _ = producer.send(
        BaseRecord::to(topic)
            .key(&s.change.offer_id)
            .payload(&payload),
    );
    let (what, fields) = match &s.change.change {
        Change::Body(b) => ("new  ", Value::Object(b.clone())),
        Change::Patch(p) => ("patch", Value::Object(p.clone())),
        Change::Deleted => ("delete", Value::Null),
    };
    println!(
        "{}  offer   {} {what} {fields}   ({})",
        clock(),
        s.change.offer_id,
        s.note
    );
}

/// Answers every stage run after a short "work" (see [`answer`]), replying
/// to the results topic keyed by the offer id.
pub fn workers(clients: Clients, config: Arc<Config>, stop: Arc<AtomicBool>) {
    let topics = config.stage_topics();
    if topics.is_empty() {
        return;
    }
    let consumer: BaseConsumer = match clients
        .base()
        .set("group.id", "reactor-dev-stage-workers")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .create()
    {
        Ok(c) => c,
        Err(e) => return eprintln!("demo stage workers: {e}"),
    };
    if consumer.subscribe(&topics).is_err() {
        return;
    }
    let Ok(producer) = clients.producer(None).create::<ThreadedProducer<_>>() else {
        return;
    };
    let results = &config.kafka.topics.results;
    let mut rng = Rng::new(0x2f6b_1d3a_94c5_e807);
    while !stop.load(Ordering::Relaxed) {
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        // A task's run on a topic shared with a stage is not ours.
        let Ok(run) = codec::decode_stage_run_command(m.payload().unwrap_or_default()) else {
            continue;
        };
        let roll = rng.next();
        sleep_unless(&stop, Duration::from_millis(100 + roll % 400));
        let Answer { result, note } = answer(&run, roll);
        let payload = codec::encode_run_result(&result, &run.offer, Format::Protobuf);
        let _ = producer.send(BaseRecord::to(results).key(&run.offer).payload(&payload));
        println!(
            "{}  worker  {} on v{}  {note}",
            clock(),
            run.run_id,
            run.version
        );
    }
    let _ = producer.flush(Duration::from_secs(5));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn run(stage: &str, body: Value, version: u64) -> StageRunCommand {
        StageRunCommand {
            stage: stage.into(),
            offer: "o-1".into(),
            run_id: format!("{stage}/o-1#1").into(),
            attempt: 1,
            pass: 7,
            version,
            body: super::body(body).into(),
            state: None,
            deadline: "2026-01-01T00:00:00Z".parse().unwrap(),
            topic: "".into(),
            source: None,
        }
    }

    #[test]
    fn expire_sets_the_status_and_echoes_the_version() {
        let a = answer(&run("expire", json!({"status": "active"}), 4), 1);
        assert_eq!(a.result.run_id, "expire/o-1#1");
        assert_eq!(a.result.pass, 7);
        assert_eq!(a.result.status, Status::Succeeded);
        assert_eq!(a.result.stage.version, Some(4));
        assert_eq!(
            a.result.stage.update,
            Some(Update::Patch(body(json!({"status": "expired"}))))
        );
        assert_eq!(a.result.stage.state, None);
    }

    #[test]
    fn price_predicts_from_price_and_category_and_keeps_its_state() {
        let a = answer(
            &run("price", json!({"price": 640, "category": "sport"}), 2),
            1,
        );
        assert_eq!(a.result.status, Status::Succeeded);
        assert_eq!(a.result.stage.version, Some(2));
        assert_eq!(
            a.result.stage.update,
            Some(Update::Patch(body(json!({"price_predicted": 608}))))
        );
        assert_eq!(
            a.result.stage.state,
            Some(json!({"model": 3, "price": 640}))
        );
        // Unknown category: factor 1.
        let a = answer(
            &run("price", json!({"price": 35, "category": "misc"}), 1),
            1,
        );
        assert_eq!(
            a.result.stage.update,
            Some(Update::Patch(body(json!({"price_predicted": 35}))))
        );
        // No price: success without update.
        let a = answer(&run("price", json!({"status": "draft"}), 1), 1);
        assert_eq!(a.result.status, Status::Succeeded);
        assert_eq!(a.result.stage.update, None);
        // One roll in ten fails, without stage fields.
        let a = answer(&run("price", json!({"price": 10}), 1), 20);
        assert_eq!(a.result.status, Status::Failed);
        assert!(a.result.error.is_some());
        assert!(a.result.stage.is_empty());
        // Another stage: success, nothing changed.
        let a = answer(&run("moderate", json!({"price": 10}), 3), 20);
        assert_eq!(a.result.status, Status::Succeeded);
        assert_eq!(a.result.stage.update, None);
    }

    #[test]
    fn answers_survive_the_wire() {
        let a = answer(
            &run("price", json!({"price": 640, "category": "sport"}), 2),
            1,
        );
        let bytes = codec::encode_run_result(&a.result, "o-1", Format::Protobuf);
        assert_eq!(codec::decode_run_result(&bytes).unwrap(), a.result);
    }

    #[test]
    fn the_script_dates_offers_from_the_start() {
        let start: Timestamp = "2026-06-01T12:00:00.5Z".parse().unwrap();
        let mut script = Script::new(start);
        let opening = script.opening();
        assert_eq!(opening.len(), 5);
        let published = |s: &Scripted| -> Option<Timestamp> {
            let Change::Body(b) = &s.change.change else {
                return None;
            };
            b.get("published_at")?.as_str()?.parse().ok()
        };
        // o-1001 reaches 180 days of exposure 12 s (rounded down) after the start.
        let expiry = published(&opening[0]).unwrap() + EXPOSURE;
        assert_eq!(expiry, "2026-06-01T12:00:12Z".parse().unwrap());
        assert!(published(&opening[2]).unwrap() + EXPOSURE < start);
        assert!(published(&opening[3]).unwrap() + EXPOSURE > start);
        assert_eq!(published(&opening[4]), None, "the draft has no date");

        // The steps cycle through new offers, price patches, the draft going
        // live and category changes; every patch names a published offer.
        let now = start + SignedDuration::from_secs(3);
        let steps: Vec<Scripted> = (0..12).map(|_| script.next(now)).collect();
        assert!(matches!(steps[0].change.change, Change::Body(_)));
        let Change::Patch(p) = &steps[1].change.change else {
            panic!("{:?}", steps[1]);
        };
        assert!(p.contains_key("price"));
        assert_eq!(steps[2].change.offer_id, "o-1005");
        let ids: Vec<String> = (1001..1001 + 8).map(|n| format!("o-{n}")).collect();
        for s in &steps {
            assert!(ids.contains(&s.change.offer_id), "{s:?}");
            if let Change::Patch(p) = &s.change.change {
                if let Some(price) = p.get("price") {
                    assert!(price.as_i64().unwrap() > 0);
                }
            }
        }
        // Encodable as an input of `offer.changes`.
        let bytes = codec::encode_offer_change(&steps[0].change, Format::Protobuf);
        let decoded =
            codec::decode_offer_change(Some(steps[0].change.offer_id.as_bytes()), Some(&bytes))
                .unwrap();
        assert_eq!(decoded, steps[0].change);
    }

    #[test]
    fn offer_state_lines() {
        let mut states = BTreeMap::new();
        states.insert(
            "price".to_string(),
            json!({"model": 3, "price": 640}).into(),
        );
        let state = OfferState {
            offer: "o-1001".into(),
            version: 2,
            body: body(json!({"price": 640, "price_predicted": 608, "status": "active"})).into(),
            cause: "stage:price".into(),
            changed_fields: vec!["price_predicted".into()],
            states,
            deleted: false,
        };
        assert_eq!(
            describe_state(&state),
            r#"o-1001 v2  stage:price  price_predicted=608   states: price={"model":3,"price":640}"#
        );
        let state = OfferState {
            changed_fields: vec!["status".into(), "x".into()],
            cause: "stage:expire".into(),
            states: BTreeMap::new(),
            ..state
        };
        assert_eq!(
            describe_state(&state),
            "o-1001 v2  stage:expire  status=active x removed"
        );
    }

    /// The demo on the embedded configuration, through the pure engine with
    /// a manual clock: workers answer every stage run a second later (one in
    /// ten price runs fails), the script runs for 40 s. The expiring offers
    /// expire on time, every priced offer gets a prediction.
    #[test]
    fn the_demo_script_drives_both_stages_of_the_embedded_config() {
        use crate::action::Action;
        use crate::engine::{Engine, Input};

        let config = crate::config::parse(super::super::DEV_CONFIG, "dev.toml")
            .unwrap()
            .config;
        let start: Timestamp = "2026-06-01T12:00:00Z".parse().unwrap();
        let mut engine = Engine::new(&config);
        let mut pending: Vec<(Timestamp, StageRunCommand)> = Vec::new();
        let mut states: BTreeMap<String, OfferState> = BTreeMap::new();
        let mut runs: BTreeMap<String, u32> = BTreeMap::new();
        let mut expired_at: BTreeMap<String, Timestamp> = BTreeMap::new();
        let mut rng = Rng::new(7);
        let mut take = |actions: Vec<Action>,
                        now: Timestamp,
                        pending: &mut Vec<(Timestamp, StageRunCommand)>| {
            for action in actions {
                match action {
                    Action::StageRun(run) => {
                        // Through the wire, as a worker reads it.
                        let bytes = codec::encode_stage_run_command(
                            &run,
                            "reactor.results",
                            now,
                            Format::Protobuf,
                        );
                        let run = codec::decode_stage_run_command(&bytes).unwrap();
                        *runs.entry(run.stage.clone()).or_default() += 1;
                        pending.push((now + SignedDuration::from_secs(1), run));
                    }
                    Action::OfferState(state) => {
                        if state.cause == "stage:expire" {
                            expired_at.insert(state.offer.clone(), now);
                        }
                        states.insert(state.offer.clone(), state);
                    }
                    _ => {}
                }
            }
        };
        let actions = engine.start(start).unwrap();
        take(actions, start, &mut pending);
        let mut script = Script::new(start);
        for s in script.opening() {
            let actions = engine.apply(Input::Offer(s.change), start).unwrap();
            take(actions, start, &mut pending);
        }
        for second in 1..=40 {
            let now = start + SignedDuration::from_secs(second);
            let actions = engine.tick(now).unwrap();
            take(actions, now, &mut pending);
            let (due, later): (Vec<_>, Vec<_>) = pending.drain(..).partition(|(at, _)| *at <= now);
            pending = later;
            for (_, run) in due {
                let Answer { result, .. } = answer(&run, rng.next());
                let bytes = codec::encode_run_result(&result, &run.offer, Format::Protobuf);
                let result = codec::decode_run_result(&bytes).unwrap();
                let actions = engine.apply(Input::Result(result), now).unwrap();
                take(actions, now, &mut pending);
            }
            if second % 3 == 0 {
                let change = script.next(now).change;
                let actions = engine.apply(Input::Offer(change), now).unwrap();
                take(actions, now, &mut pending);
            }
        }
        assert!(runs["expire"] >= 4, "{runs:?}");
        assert!(runs["price"] >= 8, "{runs:?}");
        let at = |s: i64| start + SignedDuration::from_secs(s);
        // Past its exposure: due at once, it runs when the price run ends (one
        // stage at a time), so its answer comes 2 s in. Then 12 s and 22 s in
        // (runs are answered 1 s later).
        assert_eq!(expired_at["o-1003"], at(2));
        assert_eq!(expired_at["o-1001"], at(13));
        assert_eq!(expired_at["o-1002"], at(23));
        assert!(!expired_at.contains_key("o-1004"), "{expired_at:?}");
        for (id, state) in &states {
            let body = &state.body;
            if body.get("price").is_some() {
                assert!(body.contains_key("price_predicted"), "{id}: {state:?}");
                assert_eq!(state.states["price"]["model"], json!(3), "{id}");
            }
        }
        assert_eq!(states["o-1001"].body["status"], json!("expired"));
        assert_eq!(states["o-1004"].body["status"], json!("active"));
        assert_eq!(
            states["o-1005"].body["status"],
            json!("active"),
            "published"
        );
    }
}
