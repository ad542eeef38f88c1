//! `[kafka]`: brokers, group, topics, formats, exactly-once, client pass-through.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::{Error, Source};
use crate::codec::Format;
use crate::duration::Duration;

/// The `[kafka]` section: brokers, group, topics, exactly-once, client pass-through.
#[derive(Debug, Clone, Serialize)]
pub struct KafkaSettings {
    /// Bootstrap servers, e.g. "localhost:9092" (overridden by `--brokers` / `REACTOR_BROKERS`).
    pub brokers: Option<String>,
    /// Consumer group of all Reactor instances of one deployment.
    pub group_id: String,
    /// This instance's stable name; the transactional id is `GROUP-INSTANCE`. Default: the host name.
    pub instance_id: Option<String>,
    /// Commit outputs, state and input offsets in one Kafka transaction (false: at-least-once
    /// with an idempotent producer, for brokers without transactions).
    pub exactly_once: bool,
    /// How long an input waits for its outputs to be committed: a batch is
    /// committed so that its oldest input's outputs are visible about this
    /// long after it was produced (less the time a commit takes lately).
    pub commit_interval: Duration,
    /// How long the group waits for an instance that stopped heartbeating
    /// before its shards move (librdkafka `session.timeout.ms`). An instance
    /// that restarts within it takes its shards back without a rebalance
    /// (static membership by `instance_id`); one that never returns has its
    /// shards moved after it. Also the transaction timeout, so that a
    /// transaction left open by a killed instance is aborted by then.
    pub session_timeout: Duration,
    /// Warm standbys: with 1 or more, this instance keeps reading the
    /// changelog of every shard it does not own, so taking one over restores
    /// only the records written since (memory: the state of every shard).
    pub standbys: u32,
    /// Partitions of the topics Reactor creates when they are missing.
    pub partitions: i32,
    /// Replication factor of the topics Reactor creates.
    pub replication_factor: i32,
    /// Topic names.
    pub topics: Topics,
    /// Encoding of each output topic.
    pub formats: Formats,
    /// Properties passed to every librdkafka client as they are (e.g. "security.protocol").
    pub librdkafka: BTreeMap<String, String>,
}

impl Default for KafkaSettings {
    fn default() -> Self {
        KafkaSettings {
            brokers: None,
            group_id: "reactor".to_string(),
            instance_id: None,
            exactly_once: true,
            commit_interval: Duration::from_millis(100),
            session_timeout: Duration::from_secs(10),
            standbys: 0,
            partitions: 6,
            replication_factor: 1,
            topics: Topics::default(),
            formats: Formats::default(),
            librdkafka: BTreeMap::new(),
        }
    }
}

/// `[kafka.topics]`: every topic name is configurable.
#[derive(Debug, Clone, Serialize)]
pub struct Topics {
    /// CTL changes (in; read whole by every instance).
    pub ctl: String,
    /// Worker results (in; co-partitioned).
    pub results: String,
    /// Operator commands (in; co-partitioned).
    pub commands: String,
    /// Run commands of tasks without a `topic` of their own (out).
    pub runs: String,
    /// Audit and alert events (out).
    pub events: String,
    /// Records that could not be decoded (out).
    pub dead: String,
    /// Compacted state changelog (internal; co-partitioned).
    pub changelog: String,
    /// Offer changes (in; co-partitioned).
    pub offers: String,
    /// Offer states after each commit: post-commit events (out).
    pub offer_state: String,
}

impl Default for Topics {
    fn default() -> Self {
        Topics {
            ctl: "ctl.changes".into(),
            results: "reactor.results".into(),
            commands: "reactor.commands".into(),
            runs: "reactor.runs".into(),
            events: "reactor.events".into(),
            dead: "reactor.dead".into(),
            changelog: "reactor.changelog".into(),
            offers: "offer.changes".into(),
            offer_state: "offer.state".into(),
        }
    }
}

impl Topics {
    /// Every topic with its configuration key; the co-partitioned ones first.
    pub fn all(&self) -> [(&'static str, &str); 9] {
        [
            ("topics.results", &self.results),
            ("topics.commands", &self.commands),
            ("topics.changelog", &self.changelog),
            ("topics.offers", &self.offers),
            ("topics.ctl", &self.ctl),
            ("topics.runs", &self.runs),
            ("topics.events", &self.events),
            ("topics.dead", &self.dead),
            ("topics.offer_state", &self.offer_state),
        ]
    }

    /// The topics that must have the same partition count (one shard per partition).
    pub fn co_partitioned(&self) -> [&str; 4] {
        [&self.results, &self.commands, &self.changelog, &self.offers]
    }

    /// Reactor's own topics, which no task, stage or job may use as its run topic:
    /// every topic but `runs` (a shared run topic that workers already read).
    pub fn own(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.all()
            .into_iter()
            .filter(|(field, _)| *field != "topics.runs")
    }
}

/// `[kafka.formats]`: `"protobuf"` (default) or `"json"` per output topic.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Formats {
    /// Run commands.
    pub runs: Format,
    /// Events.
    pub events: Format,
    /// `OfferState` records (post-commit offer events).
    pub offer_state: Format,
}

/// `[kafka]` as written: the keys that are validated keep their position.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct KafkaFile {
    /// Bootstrap servers.
    brokers: Option<String>,
    /// Consumer group (default "reactor").
    group_id: Option<Spanned<String>>,
    /// This instance's stable name (default: the host name).
    instance_id: Option<String>,
    /// Exactly-once transactions (default true).
    exactly_once: Option<bool>,
    /// Batch commit interval (default 100ms).
    commit_interval: Option<Spanned<Duration>>,
    /// Group session timeout (default 10s).
    session_timeout: Option<Spanned<Duration>>,
    /// Warm standbys (default 0).
    standbys: Option<u32>,
    /// Partitions of created topics (default 6).
    partitions: Option<Spanned<i32>>,
    /// Replication factor of created topics (default 1).
    replication_factor: Option<Spanned<i32>>,
    /// `[kafka.topics]`.
    #[serde(default)]
    topics: TopicsFile,
    /// `[kafka.formats]`.
    #[serde(default)]
    formats: Formats,
    /// `[kafka.librdkafka]`.
    #[serde(default)]
    librdkafka: BTreeMap<String, Spanned<String>>,
}

/// `[kafka.topics]` as written; [`Topics`] has the defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopicsFile {
    /// CTL changes.
    ctl: Option<Spanned<String>>,
    /// Worker results.
    results: Option<Spanned<String>>,
    /// Operator commands.
    commands: Option<Spanned<String>>,
    /// The shared run topic.
    runs: Option<Spanned<String>>,
    /// Events.
    events: Option<Spanned<String>>,
    /// Dead letters.
    dead: Option<Spanned<String>>,
    /// State changelog.
    changelog: Option<Spanned<String>>,
    /// Offer changes.
    offers: Option<Spanned<String>>,
    /// Offer states.
    offer_state: Option<Spanned<String>>,
}

/// Validates `[kafka]`, filling in the defaults.
pub(super) fn settings(source: &Source<'_>, k: KafkaFile) -> Result<KafkaSettings, Error> {
    let section = source.section("section [kafka]", 0);
    if let Some(protocol) = k.librdkafka.get("security.protocol") {
        let tls = protocol.get_ref().to_ascii_uppercase().ends_with("SSL");
        if tls && !cfg!(feature = "tls") {
            return Err(section.invalid(
                protocol,
                "librdkafka.security.protocol",
                format!(
                    "{} needs TLS, and this build of reactor has none: build with \
                     `cargo build --release --features tls` (the container image has it)",
                    protocol.get_ref()
                ),
            ));
        }
    }
    let mut settings = KafkaSettings {
        brokers: k.brokers,
        instance_id: k.instance_id,
        formats: k.formats,
        librdkafka: k
            .librdkafka
            .into_iter()
            .map(|(key, value)| (key, value.into_inner()))
            .collect(),
        ..KafkaSettings::default()
    };
    if let Some(exactly_once) = k.exactly_once {
        settings.exactly_once = exactly_once;
    }
    if let Some(group) = k.group_id {
        if group.get_ref().is_empty() {
            return Err(section.invalid(&group, "group_id", "must not be empty"));
        }
        settings.group_id = group.into_inner();
    }
    if let Some(interval) = &k.commit_interval {
        if interval.get_ref().is_zero() {
            return Err(section.invalid(
                interval,
                "commit_interval",
                "must be positive, e.g. \"100ms\"",
            ));
        }
        settings.commit_interval = *interval.get_ref();
    }
    if let Some(timeout) = &k.session_timeout {
        // The bounds every Kafka broker accepts by default
        // (group.min/max.session.timeout.ms).
        if timeout.get_ref().to_std() < std::time::Duration::from_secs(6)
            || timeout.get_ref().to_std() > std::time::Duration::from_secs(300)
        {
            return Err(section.invalid(
                timeout,
                "session_timeout",
                "must be between 6s and 5min (the brokers' default bounds), e.g. \"10s\"",
            ));
        }
        settings.session_timeout = *timeout.get_ref();
    }
    if let Some(standbys) = k.standbys {
        settings.standbys = standbys;
    }
    for (value, field, target) in [
        (&k.partitions, "partitions", &mut settings.partitions),
        (
            &k.replication_factor,
            "replication_factor",
            &mut settings.replication_factor,
        ),
    ] {
        if let Some(n) = value {
            if *n.get_ref() < 1 {
                return Err(section.invalid(n, field, "must be at least 1"));
            }
            *target = *n.get_ref();
        }
    }
    let t = k.topics;
    let topics = &mut settings.topics;
    for (value, field, target) in [
        (t.ctl, "topics.ctl", &mut topics.ctl),
        (t.results, "topics.results", &mut topics.results),
        (t.commands, "topics.commands", &mut topics.commands),
        (t.runs, "topics.runs", &mut topics.runs),
        (t.events, "topics.events", &mut topics.events),
        (t.dead, "topics.dead", &mut topics.dead),
        (t.changelog, "topics.changelog", &mut topics.changelog),
        (t.offers, "topics.offers", &mut topics.offers),
        (t.offer_state, "topics.offer_state", &mut topics.offer_state),
    ] {
        if let Some(name) = value {
            if name.get_ref().is_empty() {
                return Err(section.invalid(&name, field, "must not be empty"));
            }
            *target = name.into_inner();
        }
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::super::{error, parse};
    use super::*;

    #[test]
    fn topics_list_offers() {
        let t = Topics::default();
        let all = t.all();
        assert!(all.contains(&("topics.offers", "offer.changes")));
        assert!(all.contains(&("topics.offer_state", "offer.state")));
        assert_eq!(
            t.co_partitioned(),
            [
                "reactor.results",
                "reactor.commands",
                "reactor.changelog",
                "offer.changes",
            ]
        );
        assert_eq!(t.own().count(), all.len() - 1);
        assert!(t.own().all(|(key, _)| key != "topics.runs"));
        assert_eq!(Formats::default().offer_state, Format::Protobuf);
        let text = "[kafka.topics]\noffer_state = \"\"\n";
        assert!(error(text).contains("field `topics.offer_state`: must not be empty"));
        let text = "[kafka.formats]\noffer_state = \"json\"\n";
        let config = parse(text, "t.toml").unwrap().config;
        assert_eq!(config.kafka.formats.offer_state, Format::Json);
    }

    #[test]
    fn settings_and_defaults() {
        let k = parse("", "t.toml").unwrap().config.kafka;
        assert_eq!(k.group_id, "reactor");
        assert!(k.exactly_once);
        assert_eq!(k.commit_interval, Duration::from_millis(100));
        assert_eq!(k.partitions, 6);
        assert_eq!(k.session_timeout, Duration::from_secs(10));
        assert_eq!(k.standbys, 0);
        let text = "[kafka]\nbrokers = \"b:9092\"\ngroup_id = \"g\"\ninstance_id = \"i\"\n\
                    exactly_once = false\ncommit_interval = \"1s\"\npartitions = 3\n\
                    session_timeout = \"30s\"\nstandbys = 1\n\
                    replication_factor = 2\n[kafka.topics]\nruns = \"r\"\n\
                    [kafka.librdkafka]\n\"security.protocol\" = \"SASL_PLAINTEXT\"\n";
        let k = parse(text, "t.toml").unwrap().config.kafka;
        assert_eq!(k.brokers.as_deref(), Some("b:9092"));
        assert_eq!(k.group_id, "g");
        assert_eq!(k.instance_id.as_deref(), Some("i"));
        assert!(!k.exactly_once);
        assert_eq!(k.commit_interval, Duration::from_secs(1));
        assert_eq!(
            (k.session_timeout, k.standbys),
            (Duration::from_secs(30), 1)
        );
        assert_eq!((k.partitions, k.replication_factor), (3, 2));
        assert_eq!(k.topics.runs, "r");
        assert_eq!(k.topics.results, "reactor.results");
        assert_eq!(k.librdkafka["security.protocol"], "SASL_PLAINTEXT");
    }

    #[test]
    fn tls_needs_a_build_with_tls() {
        let text = "[kafka]\nbrokers = \"b:9093\"\n[kafka.librdkafka]\n\"security.protocol\" = \"sasl_ssl\"\n";
        let parsed = parse(text, "t.toml");
        if cfg!(feature = "tls") {
            assert!(parsed.is_ok(), "{parsed:?}");
        } else {
            let e = parsed.unwrap_err().to_string();
            assert!(e.contains("t.toml:4"), "{e}");
            assert!(e.contains("librdkafka.security.protocol"), "{e}");
            assert!(e.contains("--features tls"), "{e}");
        }
    }

    #[test]
    fn errors_name_the_line_of_the_key() {
        let cases = [
            ("group_id = \"\"", "group_id", "must not be empty"),
            (
                "commit_interval = \"0s\"",
                "commit_interval",
                "must be positive",
            ),
            ("partitions = 0", "partitions", "must be at least 1"),
            (
                "session_timeout = \"2s\"",
                "session_timeout",
                "must be between 6s and 5min",
            ),
            (
                "replication_factor = -1",
                "replication_factor",
                "must be at least 1",
            ),
        ];
        for (line, field, message) in cases {
            let e = error(&format!("[kafka]\nbrokers = \"b\"\n\n{line}\n"));
            let want = format!("t.toml:4: section [kafka], field `{field}`: {message}");
            assert!(e.starts_with(&want), "{e}");
        }
        let e = error("[kafka]\ntopics = { dead = \"\" }\n");
        assert!(
            e.starts_with("t.toml:2: section [kafka], field `topics.dead`"),
            "{e}"
        );
        let e = error("[kafka.topics]\nresult = \"x\"\n");
        assert!(e.contains("line 2") && e.contains("result"), "{e}");
    }
}
