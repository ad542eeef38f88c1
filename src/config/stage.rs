//! `[[stage]]` and `[offers]`: offer stages (DESIGN §6) and the settings
//! every offer shares.

use serde::Deserialize;
use toml::Spanned;

use super::run::{self, RetryFile, RunKeys};
use super::{names, Accept, Error, RunPolicy, Source, Topics};
use crate::duration::Duration;
use crate::stage::expr::{self, Expr};
use crate::stage::limit::RateLimit;

/// Default `timeout` of a stage.
pub const DEFAULT_STAGE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default `max_parallelism` of a stage.
pub const DEFAULT_MAX_PARALLELISM: u32 = 16;
/// A stage's `when` when absent: every watched change enqueues the offer.
const DEFAULT_WHEN: &str = "true";

/// A `[[stage]]` section: an offer stage (DESIGN §6).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StageFile {
    /// Unique stage name: ASCII letters, digits and `_ . : -`.
    name: Spanned<String>,
    /// Top-level body fields whose change can wake the stage; empty (default): every field.
    #[serde(default)]
    watch: Vec<Spanned<String>>,
    /// shouldProcess: a CEL predicate over `offer`, `meta`, `state` and `now` (default "true").
    when: Option<Spanned<String>>,
    /// Optional CEL wake-up time: a timestamp, or null for no timer.
    timer: Option<Spanned<String>>,
    /// Topic the run commands go to (default `stage.NAME.runs`).
    topic: Option<Spanned<String>>,
    /// Most runs in flight across all partitions (default 16).
    max_parallelism: Option<Spanned<u32>>,
    /// Most dispatches across all partitions, e.g. "50/s" or "300/min"; unlimited when absent.
    rate_limit: Option<Spanned<String>>,
    /// No result by then: the pass times out (default 1m).
    timeout: Option<Spanned<Duration>>,
    /// On timeout, re-dispatch (true, default) or count the run as failed.
    restart_after_timeout: Option<bool>,
    /// Which result wins when several attempts answer: "last" (only the
    /// current pass, default) or "first" (any attempt of the current run).
    accept: Option<Accept>,
    /// Retry policy after a failure.
    retry: Option<RetryFile>,
}

/// The `[offers]` section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OffersFile {
    /// The ping-pong guard (`[offers.ping_pong]`).
    ping_pong: Option<PingPongFile>,
}

/// `[offers.ping_pong]`: too many stage runs of one offer in a window park it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PingPongFile {
    /// Most stage runs of one offer in a window (default 20).
    runs: Option<Spanned<u32>>,
    /// The window (default 1m).
    window: Option<Spanned<Duration>>,
    /// How long the offer's stage runs are parked when the limit is passed (default 1h).
    park: Option<Spanned<Duration>>,
}

/// A validated offer stage (`[[stage]]`).
#[derive(Debug, Clone)]
pub struct Stage {
    /// Unique name: letters, digits, `_ . : -`.
    pub name: String,
    /// Top-level body fields whose change can wake the stage; empty means every field.
    pub watch: Vec<String>,
    /// shouldProcess: a CEL predicate over `offer`, `meta`, `state`, `now`.
    pub when: Expr,
    /// Optional CEL wake-up time (a timestamp, or null for no timer).
    pub timer: Option<Expr>,
    /// The run topic (default `stage.NAME.runs`).
    pub topic: String,
    /// Most runs in flight across all partitions (each partition gets an even share).
    pub max_parallelism: u32,
    /// Most dispatches per second across all partitions (each partition gets an even share).
    pub rate_limit: Option<RateLimit>,
    /// Timeout, result acceptance and retries of its runs.
    pub run: RunPolicy,
}

/// `[offers]`: settings shared by every offer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffersSettings {
    /// The ping-pong guard.
    pub ping_pong: PingPong,
}

/// Too many stage runs for one offer within `window` parks its stage runs for `park`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PingPong {
    /// Most stage runs of one offer in a window.
    pub runs: u32,
    /// The window.
    pub window: Duration,
    /// How long the offer's stage runs are parked when the limit is passed.
    pub park: Duration,
}

impl Default for PingPong {
    fn default() -> Self {
        PingPong {
            runs: 20,
            window: Duration::from_secs(60),
            park: Duration::from_secs(3600),
        }
    }
}

/// Validates the `[[stage]]` sections; `topics` are Reactor's own, which no
/// stage's run topic may be.
pub(super) fn stages(
    source: &Source<'_>,
    files: &[StageFile],
    topics: &Topics,
) -> Result<Vec<Stage>, Error> {
    let mut stages: Vec<Stage> = Vec::with_capacity(files.len());
    for s in files {
        let section = names::named(source, "stage", &s.name, "STAGE/OFFER#SEQ")?;
        let name = s.name.get_ref();
        if stages.iter().any(|b| b.name == *name) {
            return Err(section.invalid(&s.name, "name", "declared twice"));
        }
        let mut watch: Vec<String> = Vec::with_capacity(s.watch.len());
        for field in &s.watch {
            if field.get_ref().is_empty() {
                return Err(section.invalid(field, "watch", "field names must not be empty"));
            }
            if watch.contains(field.get_ref()) {
                return Err(section.invalid(
                    field,
                    "watch",
                    format!("`{}` is listed twice", field.get_ref()),
                ));
            }
            watch.push(field.get_ref().clone());
        }
        let when = match &s.when {
            Some(text) => section.expr(text, &expr::VARIABLES, "when")?,
            None => Expr::compile(DEFAULT_WHEN)
                .map_err(|e| section.at_section("when", format!("`{DEFAULT_WHEN}`: {e}")))?,
        };
        let timer = match &s.timer {
            Some(text) => Some(section.expr(text, &expr::VARIABLES, "timer")?),
            None => None,
        };
        let topic = names::run_topic(
            &section,
            s.topic.as_ref(),
            format!("stage.{name}.runs"),
            &s.name,
            "stage",
            topics,
        )?;
        let max_parallelism = match &s.max_parallelism {
            Some(n) => section.at_least_one(n, "max_parallelism", "")?,
            None => DEFAULT_MAX_PARALLELISM,
        };
        let rate_limit = match &s.rate_limit {
            Some(text) => Some(
                text.get_ref()
                    .parse::<RateLimit>()
                    .map_err(|e| section.invalid(text, "rate_limit", e.to_string()))?,
            ),
            None => None,
        };
        let (run, _) = run::policy(
            &section,
            RunKeys {
                timeout: s.timeout.as_ref(),
                restart_after_timeout: s.restart_after_timeout,
                accept: s.accept,
                retry: s.retry.as_ref(),
            },
            run::Defaults {
                timeout: DEFAULT_STAGE_TIMEOUT,
                accept: Accept::Last,
                requeue: None,
            },
        )?;
        stages.push(Stage {
            name: name.clone(),
            watch,
            when,
            timer,
            topic,
            max_parallelism,
            rate_limit,
            run,
        });
    }
    Ok(stages)
}

/// Validates `[offers]`.
pub(super) fn offers(source: &Source<'_>, offers: &OffersFile) -> Result<OffersSettings, Error> {
    let mut settings = OffersSettings::default();
    let Some(p) = &offers.ping_pong else {
        return Ok(settings);
    };
    let section = source.section("section [offers.ping_pong]", 0);
    let pong = &mut settings.ping_pong;
    if let Some(runs) = &p.runs {
        pong.runs = section.at_least_one(runs, "runs", "")?;
    }
    if let Some(window) = &p.window {
        pong.window = section.positive(window, "window")?;
    }
    if let Some(park) = &p.park {
        pong.park = section.positive(park, "park")?;
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::super::{error, parse, RetryPolicy};
    use super::*;

    const STAGES: &str = r#"
[[stage]]
name = "expire"
watch = ["published_at", "status"]   # only changes to these fields wake the stage
when = "false"                        # CEL shouldProcess over offer, meta, state, now
timer = "timestamp(offer.published_at) + duration('4320h')"  # optional CEL wake-up time
max_parallelism = 10
timeout = "1m"

[[stage]]
name = "price"
watch = ["price", "category"]
when = "offer.status == 'active' && state == null"
topic = "pricing.runs"
rate_limit = "50/s"
restart_after_timeout = false
accept = "first"
retry = { attempts = 5, backoff = "10s", tiers = ["1h"] }
"#;

    fn stage_error(stage: &str) -> String {
        error(&format!("[[stage]]\nname = \"s\"\n{stage}"))
    }

    #[test]
    fn design_stage_sample_loads() {
        let config = parse(STAGES, "stages.toml").unwrap().config;
        let [expire, price] = &config.stages[..] else {
            panic!("{:?}", config.stages);
        };
        assert_eq!(expire.name, "expire");
        assert_eq!(expire.watch, ["published_at", "status"]);
        assert_eq!(expire.when.text(), "false");
        assert_eq!(
            expire.timer.as_ref().map(Expr::text),
            Some("timestamp(offer.published_at) + duration('4320h')")
        );
        assert_eq!(expire.topic, "stage.expire.runs");
        assert_eq!(expire.max_parallelism, 10);
        assert_eq!(expire.rate_limit, None);
        assert_eq!(expire.run.timeout, Duration::from_secs(60));
        assert!(expire.run.restart_after_timeout);
        assert_eq!(expire.run.accept, Accept::Last);
        assert_eq!(expire.run.retry, RetryPolicy::default());

        assert_eq!(price.topic, "pricing.runs");
        assert_eq!(price.max_parallelism, DEFAULT_MAX_PARALLELISM);
        assert_eq!(price.rate_limit, Some("50/s".parse().unwrap()));
        assert!(!price.run.restart_after_timeout);
        assert_eq!(price.run.accept, Accept::First);
        assert_eq!(
            price.run.retry,
            RetryPolicy {
                attempts: 5,
                backoff: Duration::from_secs(10),
                tiers: vec![Duration::from_secs(3600)],
            }
        );
        assert_eq!(config.stage_topics(), ["stage.expire.runs", "pricing.runs"]);
        assert_eq!(config.offers, OffersSettings::default());
    }

    #[test]
    fn stage_defaults() {
        let config = parse("[[stage]]\nname = \"enrich\"\n", "t.toml")
            .unwrap()
            .config;
        let stage = &config.stages[0];
        assert!(stage.watch.is_empty(), "empty watch: every field");
        assert_eq!(stage.when.text(), "true");
        assert!(stage.timer.is_none());
        assert_eq!(stage.topic, "stage.enrich.runs");
        assert_eq!(stage.max_parallelism, DEFAULT_MAX_PARALLELISM);
        assert_eq!(stage.rate_limit, None);
        assert_eq!(stage.run.timeout, DEFAULT_STAGE_TIMEOUT);
        assert!(stage.run.restart_after_timeout);
        assert_eq!(stage.run.accept, Accept::Last);
        assert_eq!(stage.run.retry, RetryPolicy::default());
        assert!(parse("", "t.toml").unwrap().config.stages.is_empty());
    }

    #[test]
    fn stage_topics_are_deduplicated_in_order() {
        let config = parse(
            "[[stage]]\nname = \"a\"\ntopic = \"x\"\n[[stage]]\nname = \"b\"\n\
             [[stage]]\nname = \"c\"\ntopic = \"x\"\n",
            "t.toml",
        )
        .unwrap()
        .config;
        assert_eq!(config.stage_topics(), ["x", "stage.b.runs"]);
    }

    #[test]
    fn bad_when_names_stage_field_line_and_column() {
        let e = stage_error("watch = [\"price\"]\nwhen = \"offer.price >\"\n");
        assert!(
            e.starts_with("t.toml:4: stage `s`, field `when`: `offer.price >`: column "),
            "{e}"
        );
    }

    #[test]
    fn bad_timer_names_stage_field_line_and_column() {
        let e = error(
            "[[stage]]\nname = \"expire\"\n\n\
             timer = \"timestamp(offer.published_at) +\"\n",
        );
        assert!(
            e.starts_with(
                "t.toml:4: stage `expire`, field `timer`: \
                 `timestamp(offer.published_at) +`: column 32: "
            ),
            "{e}"
        );
    }

    #[test]
    fn unknown_variable_names_the_column() {
        let e = stage_error("when = \"offer.x == 'price' && prise.y > 1\"\n");
        assert!(
            e.starts_with(
                "t.toml:3: stage `s`, field `when`: `offer.x == 'price' && prise.y > 1`: \
                 column 23: unknown variable `prise`"
            ),
            "{e}"
        );
    }

    #[test]
    fn stage_names() {
        let e = error("[[stage]]\nname = \"\"\n");
        assert!(
            e.starts_with("t.toml:2: stage, field `name`: must not be empty"),
            "{e}"
        );
        for bad in ["price/v2", "price#2", "price v2", "цена"] {
            let e = error(&format!("\n[[stage]]\nname = \"{bad}\"\n"));
            assert!(
                e.starts_with(&format!("t.toml:3: stage `{bad}`, field `name`: ")),
                "{e}"
            );
            assert!(e.contains("letters, digits and `_ . : -`"), "{e}");
        }
        let e = error("[[stage]]\nname = \"a\"\n\n[[stage]]\nwatch = [\"x\"]\nname = \"a\"\n");
        assert!(
            e.starts_with("t.toml:6: stage `a`, field `name`: declared twice"),
            "{e}"
        );
        let ok = parse(
            "[[stage]]\nname = \"Price_v2.eu:fast-lane\"\ntopic = \"price\"\n",
            "t.toml",
        );
        assert!(ok.is_ok(), "{ok:?}");
    }

    #[test]
    fn stage_field_errors_name_their_line() {
        let cases = [
            ("watch = [\"a\", \"\"]\n", "watch", "must not be empty"),
            (
                "watch = [\"a\", \"b\", \"a\"]\n",
                "watch",
                "`a` is listed twice",
            ),
            (
                "max_parallelism = 0\n",
                "max_parallelism",
                "must be at least 1",
            ),
            ("timeout = \"0s\"\n", "timeout", "must be positive"),
            (
                "rate_limit = \"50/fortnight\"\n",
                "rate_limit",
                "`50/fortnight`: unknown unit",
            ),
            (
                "rate_limit = \"0/s\"\n",
                "rate_limit",
                "the count must be positive",
            ),
            (
                "retry = { attempts = 0 }\n",
                "retry.attempts",
                "must be at least 1",
            ),
            (
                "retry = { tiers = [\"1h\", \"0s\"] }\n",
                "retry.tiers",
                "every tier must be positive",
            ),
            ("topic = \"a/b\"\n", "topic", "is not a Kafka topic name"),
            ("topic = \"\"\n", "topic", "is not a Kafka topic name"),
        ];
        for (line, field, message) in cases {
            let e = stage_error(&format!("when = \"true\"\n{line}"));
            assert!(
                e.starts_with(&format!("t.toml:4: stage `s`, field `{field}`: ")),
                "{line}: {e}"
            );
            assert!(e.contains(message), "{line}: {e}");
        }
    }

    #[test]
    fn retry_keys_on_their_own_lines() {
        let e =
            stage_error("\n[stage.retry]\nattempts = 2\n\ntiers = [\n  \"1h\",\n  \"0s\",\n]\n");
        assert!(
            e.starts_with("t.toml:9: stage `s`, field `retry.tiers`: every tier must be positive"),
            "{e}"
        );
        let e = stage_error("retry = { backoff = \"0s\" }\n");
        assert!(
            e.starts_with("t.toml:3: stage `s`, field `retry.backoff`: must be positive"),
            "{e}"
        );
        let e = stage_error("retry = { requeue = \"front\" }\n");
        assert!(
            e.starts_with("t.toml:3: stage `s`, field `retry.requeue`: only jobs"),
            "{e}"
        );
    }

    #[test]
    fn default_topic_must_be_a_kafka_name() {
        let e = error("[[stage]]\nname = \"eu:price\"\n");
        assert!(
            e.starts_with("t.toml:2: stage `eu:price`, field `topic`: "),
            "{e}"
        );
        assert!(e.contains("set `topic`"), "{e}");
        let config = parse(
            "[[stage]]\nname = \"eu:price\"\ntopic = \"eu.price\"\n",
            "t.toml",
        )
        .unwrap()
        .config;
        assert_eq!(config.stages[0].topic, "eu.price");
    }

    #[test]
    fn unknown_key_in_stage_is_rejected() {
        let e = error("[[stage]]\nname = \"a\"\nwhenn = \"true\"\n");
        assert!(e.contains("t.toml: line 3"), "{e}");
        assert!(e.contains("whenn"), "{e}");
        let e = error("[[stage]]\nname = \"a\"\nretry = { attempt = 2 }\n");
        assert!(e.contains("attempt"), "{e}");
        let e = error("[offers.ping_pong]\nrun = 2\n");
        assert!(e.contains("t.toml: line 2") && e.contains("run"), "{e}");
    }

    #[test]
    fn stage_topic_must_not_be_a_reactor_topic() {
        for (topic, key) in [
            ("reactor.results", "topics.results"),
            ("reactor.commands", "topics.commands"),
            ("reactor.changelog", "topics.changelog"),
            ("ctl.changes", "topics.ctl"),
            ("reactor.events", "topics.events"),
            ("reactor.dead", "topics.dead"),
            ("offer.changes", "topics.offers"),
            ("offer.state", "topics.offer_state"),
        ] {
            let e = stage_error(&format!("topic = \"{topic}\"\n"));
            assert!(e.starts_with("t.toml:3: stage `s`, field `topic`: "), "{e}");
            assert!(
                e.contains(&format!("`{topic}` is Reactor's own topic (kafka.{key})")),
                "{e}"
            );
        }
        // Renamed topics are what counts.
        let text = "[[stage]]\nname = \"s\"\ntopic = \"offers.in\"\n";
        assert!(parse(text, "t.toml").is_ok());
        let e = error(&format!("{text}[kafka.topics]\noffers = \"offers.in\"\n"));
        assert!(e.contains("(kafka.topics.offers)"), "{e}");
        // The shared run topic may be used by stages as by tasks.
        assert!(parse(
            "[[stage]]\nname = \"s\"\ntopic = \"reactor.runs\"\n",
            "t.toml"
        )
        .is_ok());
    }

    #[test]
    fn ping_pong_defaults_and_overrides() {
        let defaults = parse("[offers]\n", "t.toml").unwrap().config.offers;
        assert_eq!(defaults.ping_pong, PingPong::default());
        let text = "[offers.ping_pong]\nruns = 5\nwindow = \"10min\"\npark = \"2h\"\n";
        let pong = parse(text, "t.toml").unwrap().config.offers.ping_pong;
        assert_eq!(
            pong,
            PingPong {
                runs: 5,
                window: Duration::from_secs(600),
                park: Duration::from_secs(7200),
            }
        );
        let text = "[offers]\nping_pong = { runs = 3 }\n";
        let pong = parse(text, "t.toml").unwrap().config.offers.ping_pong;
        assert_eq!(pong.runs, 3);
        assert_eq!(pong.window, PingPong::default().window);
        assert_eq!(pong.park, PingPong::default().park);
    }

    #[test]
    fn ping_pong_errors() {
        let cases = [
            ("park = \"1h\"", "runs = 0", "runs", "must be at least 1"),
            ("runs = 2", "window = \"0s\"", "window", "must be positive"),
            ("runs = 2", "park = \"0s\"", "park", "must be positive"),
        ];
        for (other, line, field, message) in cases {
            let e = error(&format!(
                "[[stage]]\nname = \"a\"\n\n[offers.ping_pong]\n{other}\n{line}\n"
            ));
            let want = format!("t.toml:6: section [offers.ping_pong], field `{field}`: {message}");
            assert!(e.starts_with(&want), "{e}");
        }
        let e = error("\n[offers]\nping_pong = { runs = 0 }\n");
        assert!(
            e.starts_with("t.toml:3: section [offers.ping_pong], field `runs`"),
            "{e}"
        );
    }
}
