//! Property tests of the offer half: random streams of offer changes,
//! stage results and commands, crashed and restored at a random point, must
//! decide exactly what the uncrashed run decides, end in an equal state and
//! keep the stage invariants.

use proptest::prelude::*;

use crate::action::Action;
use crate::config;
use crate::stage::Phase;

const CONFIG: &str = r#"
[offers.ping_pong]
runs = 5
window = "10m"
park = "20m"

[[stage]]
name = "a"
watch = ["x"]
when = "offer.x % 3 != 0"
timer = "has(offer.t) ? timestamp(offer.t) : null"
timeout = "10m"

[[stage]]
name = "b"
watch = ["y"]
when = "true"
max_parallelism = 1
timeout = "10m"
retry = { attempts = 2, backoff = "1m", tiers = ["5m"] }

[[stage]]
name = "c"
when = "offer.x > offer.y"
timeout = "3m"
restart_after_timeout = false
accept = "first"
"#;

const OFFERS: [&str; 3] = ["o0", "o1", "o2"];
const STAGES: [&str; 3] = ["a", "b", "c"];
const FIELDS: [&str; 3] = ["x", "y", "t"];

#[derive(Debug, Clone)]
enum Op {
    Body(usize, i64, Option<i64>),
    Patch(usize, usize, Option<i64>),
    Delete(usize),
    Complete {
        stage: usize,
        offer: usize,
        ok: bool,
        update: Option<(usize, i64)>,
        state: Option<Option<i64>>,
        timer: Option<Option<i64>>,
        version: Option<u64>,
    },
    Cas(usize, usize, u64),
    Rescan(usize, bool),
    Unpark(usize),
}

fn value(field: usize, v: i64) -> String {
    if FIELDS[field] == "t" {
        let base: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        format!("\"{}\"", base + jiff::SignedDuration::from_mins(v.abs()))
    } else {
        v.to_string()
    }
}

fn op() -> impl Strategy<Value = (u32, Op)> {
    let op = prop_oneof![
        2 => (0..3usize, 0..7i64, prop::option::of(0..7i64)).prop_map(|(o, x, y)| Op::Body(o, x, y)),
        3 => (0..3usize, 0..3usize, prop::option::of(0..200i64)).prop_map(|(o, f, v)| Op::Patch(o, f, v)),
        1 => (0..3usize).prop_map(Op::Delete),
        6 => (
            0..3usize,
            0..3usize,
            any::<bool>(),
            prop::option::of((0..3usize, 0..200i64)),
            prop::option::of(prop::option::of(0..5i64)),
            prop::option::of(prop::option::of(0..300i64)),
            prop::option::of(0..6u64),
        )
            .prop_map(|(stage, offer, ok, update, state, timer, version)| Op::Complete {
                stage,
                offer,
                ok,
                update,
                state,
                timer,
                version,
            }),
        1 => (0..3usize, 0..3usize, 0..6u64).prop_map(|(o, s, v)| Op::Cas(o, s, v)),
        1 => (0..3usize, any::<bool>()).prop_map(|(s, f)| Op::Rescan(s, f)),
        1 => (0..3usize).prop_map(Op::Unpark),
    ];
    (0..8u32, op)
}

fn render(ops: &[(u32, Op)]) -> String {
    let base: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
    let mut minutes = 0i64;
    let mut lines = Vec::new();
    for (gap, op) in ops {
        minutes += i64::from(*gap);
        let at = base + jiff::SignedDuration::from_mins(minutes);
        let body = match op {
            Op::Body(o, x, y) => {
                let y = y.map_or(String::new(), |y| format!(r#","y":{y}"#));
                format!(r#""offer":{{"id":"{}","body":{{"x":{x}{y}}}}}"#, OFFERS[*o])
            }
            Op::Patch(o, f, v) => {
                let v = v.map_or("null".to_string(), |v| value(*f, v));
                format!(
                    r#""offer":{{"id":"{}","patch":{{"{}":{v}}}}}"#,
                    OFFERS[*o], FIELDS[*f]
                )
            }
            Op::Delete(o) => format!(r#""offer":{{"id":"{}","deleted":true}}"#, OFFERS[*o]),
            Op::Complete {
                stage,
                offer,
                ok,
                update,
                state,
                timer,
                version,
            } => {
                let mut s = format!(
                    r#""complete":{{"stage":"{}","offer":"{}","status":"{}""#,
                    STAGES[*stage],
                    OFFERS[*offer],
                    if *ok { "succeeded" } else { "failed" }
                );
                if let Some((f, v)) = update {
                    s += &format!(r#","update":{{"{}":{}}}"#, FIELDS[*f], value(*f, *v));
                }
                match state {
                    None => {}
                    Some(None) => s += r#","state":null"#,
                    Some(Some(n)) => s += &format!(r#","state":{{"n":{n}}}"#),
                }
                match timer {
                    None => {}
                    Some(None) => s += r#","timer":null"#,
                    Some(Some(m)) => {
                        s += &format!(
                            r#","timer":"{}""#,
                            base + jiff::SignedDuration::from_mins(*m)
                        )
                    }
                }
                if let Some(v) = version {
                    s += &format!(r#","version":{v}"#);
                }
                s + "}"
            }
            Op::Cas(o, st, v) => format!(
                r#""command":{{"op":"set_stage_state","offer":"{}","stage":"{}","state":{{"cas":{v}}},"version":{v}}}"#,
                OFFERS[*o], STAGES[*st]
            ),
            Op::Rescan(st, filter) => {
                let when = if *filter {
                    r#","when":"offer.x > 2""#
                } else {
                    ""
                };
                format!(
                    r#""command":{{"op":"rescan","stage":"{}"{when}}}"#,
                    STAGES[*st]
                )
            }
            Op::Unpark(o) => format!(
                r#""command":{{"op":"unpark_offer","offer":"{}"}}"#,
                OFFERS[*o]
            ),
        };
        lines.push(format!(r#"{{"at":"{at}",{body}}}"#));
    }
    lines.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn crash_and_restore_changes_nothing(ops in prop::collection::vec(op(), 1..60), crash in 1usize..60) {
        let config = config::parse(CONFIG, "prop.toml").unwrap().config;
        let input = render(&ops);
        let crash = crash.min(ops.len());
        let (straight_sim, straight) =
            crate::engine::tests::straight_and_crashed(&config, &input, crash)?;

        let offers = &straight_sim.engine().offers;
        for (s, st) in offers.stages.iter().enumerate() {
            prop_assert!(st.running <= st.share, "stage {} over its share", s);
        }
        let mut running = vec![0u32; STAGES.len()];
        for (id, kept) in offers.map.iter() {
            let rt = offers.full(id, kept).unwrap();
            // Only an offer nothing works on is kept as its record.
            prop_assert!(
                matches!(kept, super::Kept::Hot(_)) || rt.idle(),
                "{} kept as a record while a stage works on it", id
            );
            let busy = rt.slots.iter().filter(|(_, x)| x.slot.phase == Phase::Running).count();
            prop_assert!(busy <= 1, "{} runs {} stages at once", id, busy);
            for (s, slot) in &rt.slots {
                prop_assert_eq!(slot.slot.phase == Phase::Running, slot.slot.run().is_some(), "{}/{} run/phase", id, s);
                if slot.slot.phase == Phase::Running {
                    running[*s as usize] += 1;
                }
            }
        }
        let counted: Vec<u32> = offers.stages.iter().map(|st| st.running).collect();
        prop_assert_eq!(&running, &counted);
        // Versions in offer_state lines increase by one per offer, across a
        // delete too; only once a deleted offer's grave is gone does a
        // re-created one start again at 1.
        let mut last: std::collections::HashMap<String, (u64, bool)> = Default::default();
        for o in &straight {
            // Offer records, in whatever state the stream left them, are
            // written straight as the generated messages wrote them.
            if let Action::Changelog(crate::changelog::ChangelogRecord {
                value: Some(crate::changelog::Value::Offer(record)),
                ..
            }) = &o.action
            {
                prop_assert!(crate::codec::offer_record_written_as_prost(record), "{:?}", record);
            }
            // Those a step writes from the offer where it lies, too.
            if let Action::Changelog(crate::changelog::ChangelogRecord {
                value: Some(crate::changelog::Value::OfferEncoded(bytes)),
                key,
                ..
            }) = &o.action
            {
                prop_assert!(crate::codec::offer_bytes_as_prost(bytes), "offer {}", key);
            }
            if let Action::OfferState(s) = &o.action {
                let (prev, deleted) = last.get(&s.offer).copied().unwrap_or((0, false));
                prop_assert!(
                    s.version == prev + 1 || (deleted && s.version == 1),
                    "{} version {} after {}", s.offer, s.version, prev
                );
                last.insert(s.offer.clone(), (s.version, s.deleted));
            }
        }
    }
}
