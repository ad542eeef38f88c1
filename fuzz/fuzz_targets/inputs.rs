//! Any bytes, on any input topic, through the path the runtime takes for
//! each record (`reactor::runtime::intake`): applied or refused with a
//! reason and a dead letter, never a panic, never an output larger than the
//! producer accepts. The first byte picks the topic; the second, whether
//! the rest is split into a key and a value at the third byte's position.
#![no_main]

use std::cell::RefCell;
use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use reactor::config::Config;
use reactor::engine::Engine;
use reactor::runtime::intake::{self, Context, Outcome, Received, Role, Router, Shard};

const CONFIG: &str = r#"
[[task]]
id = "t"
trigger = "delta(dwh.orders/max_dt, 1h)"

[[stage]]
name = "price"
watch = ["price"]
when = "has(offer.price) && offer.price > 0"
timer = "has(offer.at) ? offer.at : null"
"#;

const MAX_RECORD: usize = 1_000_000;

struct Bench {
    config: Config,
    router: Router,
    shard: Shard,
    offset: i64,
}

thread_local! {
    static BENCH: RefCell<Bench> = RefCell::new({
        let config = reactor::config::parse(CONFIG, "fuzz.toml").unwrap().config;
        let router = Router::new(&config, 1);
        let shard = Shard::new(0, Engine::for_shard(&config, |_| true), BTreeMap::new());
        Bench { config, router, shard, offset: 0 }
    });
}

fuzz_target!(|data: &[u8]| {
    let (role, split, rest) = match data {
        [r, s, rest @ ..] => (*r, *s, rest),
        _ => return,
    };
    let role = [Role::Ctl, Role::Offers, Role::Results, Role::Commands][usize::from(role % 4)];
    let (key, payload) = match (split % 3, rest) {
        (0, rest) => (None, Some(rest)),
        (1, [at, rest @ ..]) => {
            let at = usize::from(*at).min(rest.len());
            (Some(&rest[..at]), Some(&rest[at..]))
        }
        (_, rest) => (Some(rest), None),
    };
    BENCH.with(|bench| {
        let bench = &mut *bench.borrow_mut();
        bench.offset += 1;
        let topic = format!("{role:?}");
        let record = Received {
            topic: &topic,
            partition: 0,
            offset: bench.offset,
            key,
            payload,
            produced_at: None,
        };
        let ctx = Context {
            settings: &bench.config.kafka,
            max_record_bytes: MAX_RECORD,
            router: &bench.router,
        };
        let now = "2024-06-01T00:00:00Z".parse::<jiff::Timestamp>().unwrap()
            + jiff::SignedDuration::from_secs(bench.offset);
        let outcome = match role {
            Role::Ctl => match intake::decode_ctl(key, payload) {
                Ok(change) => {
                    intake::apply_ctl(&mut bench.shard, &ctx, &change, None, now);
                    Outcome::Applied
                }
                Err(e) => {
                    bench.shard.report_ctl_dead(&ctx, &record, e.to_string());
                    Outcome::Rejected {
                        reason: e.to_string(),
                    }
                }
            },
            role => intake::take(&mut bench.shard, &ctx, role, &record, now),
        };
        intake::tick(&mut bench.shard, &ctx, now);
        if let Outcome::Rejected { reason } = &outcome {
            assert!(!reason.is_empty());
        }
        for r in bench.shard.pending() {
            assert!(r.size() <= MAX_RECORD, "{} bytes to {}", r.size(), r.topic);
        }
        bench.shard.clear();
    });
});
