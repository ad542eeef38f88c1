//! Configuration: the TOML file users write, and its validated form.
//!
//! Reading happens in two steps: serde reads [`File`] (unknown keys are
//! errors), then [`Config::validate`] compiles triggers and zones and checks
//! references, so every error can name the file, line, task and field.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::Path;

use jiff::tz::TimeZone;
use serde::Deserialize;
use toml::Spanned;

use crate::codec::Format;
use crate::ctl::ParamName;
use crate::duration::Duration;
use crate::stage::expr::Expr;
use crate::stage::limit::RateLimit;
use crate::trigger::{self, Trigger};

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("{origin}: {source}")]
    Io {
        /// The file.
        origin: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// TOML syntax, an unknown key or a value of the wrong type.
    #[error("{origin}: {message}")]
    Syntax {
        /// The file.
        origin: String,
        /// The parser's message, which names the line and the key.
        message: String,
    },
    /// A value that reads fine but means nothing valid.
    #[error("{origin}:{line}: {subject}, field `{field}`: {message}")]
    Invalid {
        /// The file.
        origin: String,
        /// 1-based line of the offending value (or of the section when unknown).
        line: usize,
        /// What the field belongs to, e.g. "task `orders_daily`".
        subject: String,
        /// The field's key.
        field: String,
        /// What is wrong and what would be right.
        message: String,
    },
}

impl Error {
    /// Configuration errors are never retryable: the file must change.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// A lint finding: the configuration works but probably not as meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// Where, as `file:line: task `id`, field `trigger``.
    pub location: String,
    /// What will happen and how to avoid it.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "warning: {}: {}", self.location, self.message)
    }
}

/// The configuration file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    /// Default IANA time zone for chunk truncation, e.g. "UTC" or "Europe/Moscow".
    #[serde(default)]
    pub time_zone: Option<Spanned<String>>,
    /// Treat lint warnings (a trigger that re-fires continuously) as errors.
    #[serde(default)]
    pub strict: bool,
    /// Task pools: concurrency limits shared by the tasks that name them.
    #[serde(default)]
    pub pool: Vec<Spanned<PoolFile>>,
    /// Reactive tasks.
    #[serde(default)]
    pub task: Vec<Spanned<TaskFile>>,
    /// How to reach Kafka and which topics to use (`reactor run`).
    #[serde(default)]
    pub kafka: KafkaSettings,
}

/// The `[kafka]` section: brokers, group, topics, exactly-once, client pass-through.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
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
    /// How long a batch collects inputs before it is committed.
    pub commit_interval: Duration,
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
            partitions: 6,
            replication_factor: 1,
            topics: Topics::default(),
            formats: Formats::default(),
            librdkafka: BTreeMap::new(),
        }
    }
}

/// `[kafka.topics]`: every topic name is configurable.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
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
        }
    }
}

impl Topics {
    /// Every topic with its configuration key; the co-partitioned ones first.
    pub fn all(&self) -> [(&'static str, &str); 7] {
        [
            ("topics.results", &self.results),
            ("topics.commands", &self.commands),
            ("topics.changelog", &self.changelog),
            ("topics.ctl", &self.ctl),
            ("topics.runs", &self.runs),
            ("topics.events", &self.events),
            ("topics.dead", &self.dead),
        ]
    }

    /// The topics that must have the same partition count (one shard per partition).
    pub fn co_partitioned(&self) -> [&str; 3] {
        [&self.results, &self.commands, &self.changelog]
    }
}

/// `[kafka.formats]`: `"protobuf"` (default) or `"json"` per output topic.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Formats {
    /// Run commands.
    pub runs: Format,
    /// Events.
    pub events: Format,
}

/// A `[[pool]]` section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolFile {
    /// Pool name, referenced by `task.pool`.
    pub name: String,
    /// Most runs of this pool's tasks at once; unlimited when absent.
    #[serde(default)]
    pub max_running: Option<u32>,
    /// Longest time a slot stays held for a higher-priority task waiting on
    /// data that a running task produces.
    #[serde(default)]
    pub hold_max: Option<Duration>,
}

/// A `[[task]]` section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskFile {
    /// Unique task id.
    pub id: String,
    /// Pool whose queue and limit the task uses; "default" when absent.
    #[serde(default)]
    pub pool: Option<Spanned<String>>,
    /// Higher runs first within the pool.
    #[serde(default)]
    pub priority: i64,
    /// The trigger, in the trigger DSL.
    pub trigger: Spanned<String>,
    /// Zone for chunk truncation, overriding the global `time_zone`.
    #[serde(default)]
    pub time_zone: Option<Spanned<String>>,
    /// No result by then: re-dispatch with a new pass (default 1h).
    #[serde(default)]
    pub timeout: Option<Duration>,
    /// On timeout, re-dispatch (true, default) or count the run as failed.
    #[serde(default)]
    pub restart_after_timeout: Option<bool>,
    /// Which result wins when several attempts answer: "last" (only the
    /// current pass, default) or "first" (any attempt of the current run).
    #[serde(default)]
    pub accept: Option<Accept>,
    /// Retry policy after a failure.
    #[serde(default)]
    pub retry: Option<RetryFile>,
    /// Parameters this task's runs bring forward (for the queue hold).
    #[serde(default)]
    pub produces: Vec<Spanned<String>>,
    /// Staleness SLA: report `sla_missed` when no run succeeded for this long.
    #[serde(default)]
    pub expect_every: Option<Duration>,
    /// Parameters passed to every run of the task.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Topic the run commands go to (default: the runtime's run topic).
    #[serde(default)]
    pub topic: Option<String>,
}

/// `retry = { attempts = 3, backoff = "1m", tiers = ["30m", "1d"] }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryFile {
    /// Failed attempts before the first tier (default 3).
    #[serde(default)]
    pub attempts: Option<u32>,
    /// First backoff; doubles after every further failure (default 1m).
    #[serde(default)]
    pub backoff: Option<Duration>,
    /// Park times after the attempts are used up, one more attempt after each (default 30m, 1d).
    #[serde(default)]
    pub tiers: Option<Vec<Duration>>,
}

/// Result acceptance when a run was re-dispatched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Accept {
    /// Only a result carrying the current pass is accepted.
    #[default]
    Last,
    /// The first result of any attempt of the current run is accepted.
    First,
}

/// The retry policy of DESIGN §7.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Failed attempts before parking.
    pub attempts: u32,
    /// Backoff after the first failure; doubles each time.
    pub backoff: Duration,
    /// Park times, each followed by one more attempt.
    pub tiers: Vec<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            backoff: Duration::from_secs(60),
            tiers: vec![Duration::from_secs(1800), Duration::from_secs(86_400)],
        }
    }
}

/// A validated pool.
#[derive(Debug, Clone)]
pub struct Pool {
    /// Name.
    pub name: String,
    /// Concurrency limit, `None` for unlimited.
    pub max_running: Option<u32>,
    /// Bound on a queue hold.
    pub hold_max: Duration,
}

/// A validated task.
#[derive(Debug, Clone)]
pub struct Task {
    /// Unique id.
    pub id: String,
    /// Index into [`Config::pools`].
    pub pool: usize,
    /// Higher runs first.
    pub priority: i64,
    /// Parsed trigger.
    pub trigger: Trigger<ParamName>,
    /// The trigger as written.
    pub trigger_text: String,
    /// Zone for chunk truncation.
    pub time_zone: TimeZone,
    /// Per-attempt timeout.
    pub timeout: Duration,
    /// Re-dispatch on timeout.
    pub restart_after_timeout: bool,
    /// Result acceptance.
    pub accept: Accept,
    /// Retry policy.
    pub retry: RetryPolicy,
    /// Parameters this task produces.
    pub produces: Vec<ParamName>,
    /// Staleness SLA.
    pub expect_every: Option<Duration>,
    /// Run parameters.
    pub params: BTreeMap<String, String>,
    /// Run topic override.
    pub topic: Option<String>,
}

/// The validated configuration the engine runs on.
#[derive(Debug, Clone)]
pub struct Config {
    /// Default zone.
    pub time_zone: TimeZone,
    /// Lint warnings are errors.
    pub strict: bool,
    /// Pools; "default" is always present.
    pub pools: Vec<Pool>,
    /// Tasks in file order.
    pub tasks: Vec<Task>,
    /// Offer stages in file order.
    pub stages: Vec<Stage>,
    /// Settings shared by every offer (`[offers]`).
    pub offers: OffersSettings,
    /// Kafka settings.
    pub kafka: KafkaSettings,
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
    /// No result by then: the pass times out.
    pub timeout: Duration,
    /// Re-dispatch at once after a timeout (else the timeout counts as a failure).
    pub restart_after_timeout: bool,
    /// Which pass's result is accepted.
    pub accept: Accept,
    /// Retries after failures.
    pub retry: RetryPolicy,
}

/// `[offers]`: settings shared by every offer.
#[derive(Debug, Clone, PartialEq, Eq)]
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

impl Default for OffersSettings {
    fn default() -> Self {
        OffersSettings {
            ping_pong: PingPong::default(),
        }
    }
}

/// Default `timeout` of a stage.
pub const DEFAULT_STAGE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default `max_parallelism` of a stage.
pub const DEFAULT_MAX_PARALLELISM: u32 = 16;

/// A configuration with the lint findings that did not stop it.
#[derive(Debug)]
pub struct Loaded {
    /// The configuration.
    pub config: Config,
    /// Lint warnings, to print on standard error.
    pub warnings: Vec<Warning>,
}

/// Default per-attempt timeout of a task.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);
/// Default bound of a queue hold.
pub const DEFAULT_HOLD_MAX: Duration = Duration::from_secs(600);
/// Name of the pool a task without `pool` joins.
pub const DEFAULT_POOL: &str = "default";

/// Reads and validates a configuration file.
pub fn load(path: &Path) -> Result<Loaded, Error> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        origin: origin.clone(),
        source,
    })?;
    parse(&text, &origin)
}

/// Parses and validates configuration text; `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<Loaded, Error> {
    let file: File = toml::from_str(text).map_err(|e| Error::Syntax {
        origin: origin.to_string(),
        message: syntax_message(text, &e),
    })?;
    Validator { text, origin }.validate(file)
}

fn syntax_message(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) => format!(
            "line {}: {}",
            line_of(text, span.start),
            e.message().trim_end()
        ),
        None => e.message().trim_end().to_string(),
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

struct Validator<'a> {
    text: &'a str,
    origin: &'a str,
}

impl Validator<'_> {
    fn invalid(&self, at: usize, subject: &str, field: &str, message: impl Into<String>) -> Error {
        Error::Invalid {
            origin: self.origin.to_string(),
            line: line_of(self.text, at),
            subject: subject.to_string(),
            field: field.to_string(),
            message: message.into(),
        }
    }

    fn zone(&self, name: &Spanned<String>, subject: &str) -> Result<TimeZone, Error> {
        TimeZone::get(name.get_ref()).map_err(|e| {
            self.invalid(
                name.span().start,
                subject,
                "time_zone",
                format!(
                    "unknown time zone `{}` ({e}); use an IANA name such as UTC or Europe/Moscow",
                    name.get_ref()
                ),
            )
        })
    }

    fn validate(&self, file: File) -> Result<Loaded, Error> {
        let time_zone = match &file.time_zone {
            Some(name) => self.zone(name, "configuration")?,
            None => TimeZone::UTC,
        };
        let mut pools = vec![Pool {
            name: DEFAULT_POOL.to_string(),
            max_running: None,
            hold_max: DEFAULT_HOLD_MAX,
        }];
        for spanned in &file.pool {
            let at = spanned.span().start;
            let p = spanned.get_ref();
            let subject = format!("pool `{}`", p.name);
            if p.name.is_empty() {
                return Err(self.invalid(at, "pool", "name", "must not be empty"));
            }
            if p.max_running == Some(0) {
                return Err(self.invalid(
                    at,
                    &subject,
                    "max_running",
                    "must be at least 1 (leave it out for no limit)",
                ));
            }
            let pool = Pool {
                name: p.name.clone(),
                max_running: p.max_running,
                hold_max: p.hold_max.unwrap_or(DEFAULT_HOLD_MAX),
            };
            if p.name == DEFAULT_POOL {
                pools[0] = pool;
            } else if pools.iter().any(|q| q.name == p.name) {
                return Err(self.invalid(at, &subject, "name", "declared twice"));
            } else {
                pools.push(pool);
            }
        }
        let mut ids = HashSet::new();
        let mut tasks = Vec::with_capacity(file.task.len());
        let mut warnings = Vec::new();
        for spanned in &file.task {
            let at = spanned.span().start;
            let t = spanned.get_ref();
            let subject = format!("task `{}`", t.id);
            if t.id.is_empty() {
                return Err(self.invalid(at, "task", "id", "must not be empty"));
            }
            if !ids.insert(t.id.as_str()) {
                return Err(self.invalid(at, &subject, "id", "declared twice"));
            }
            let trigger_at = t.trigger.span().start;
            let trigger = trigger::parse(t.trigger.get_ref()).map_err(|e| {
                self.invalid(
                    trigger_at,
                    &subject,
                    "trigger",
                    format!("`{}`: {e}", t.trigger.get_ref()),
                )
            })?;
            if let Some(lint) = trigger.lint() {
                let location = format!(
                    "{}:{}: {subject}, field `trigger`",
                    self.origin,
                    line_of(self.text, trigger_at)
                );
                if file.strict {
                    return Err(self.invalid(
                        trigger_at,
                        &subject,
                        "trigger",
                        format!("{lint} (strict mode)"),
                    ));
                }
                warnings.push(Warning {
                    location,
                    message: lint.to_string(),
                });
            }
            let pool = match &t.pool {
                None => 0,
                Some(name) => pools
                    .iter()
                    .position(|p| p.name == *name.get_ref())
                    .ok_or_else(|| {
                        self.invalid(
                            name.span().start,
                            &subject,
                            "pool",
                            format!(
                                "no pool named `{}`; declare it in a [[pool]] section",
                                name.get_ref()
                            ),
                        )
                    })?,
            };
            let zone = match &t.time_zone {
                Some(name) => self.zone(name, &subject)?,
                None => time_zone.clone(),
            };
            let retry = self.retry(t, at, &subject)?;
            let timeout = t.timeout.unwrap_or(DEFAULT_TIMEOUT);
            if timeout.is_zero() {
                return Err(self.invalid(at, &subject, "timeout", "must be positive"));
            }
            if t.expect_every.is_some_and(Duration::is_zero) {
                return Err(self.invalid(at, &subject, "expect_every", "must be positive"));
            }
            let mut produces = Vec::with_capacity(t.produces.len());
            for p in &t.produces {
                produces.push(p.get_ref().parse::<ParamName>().map_err(|e| {
                    self.invalid(p.span().start, &subject, "produces", e.to_string())
                })?);
            }
            tasks.push(Task {
                id: t.id.clone(),
                pool,
                priority: t.priority,
                trigger,
                trigger_text: t.trigger.get_ref().clone(),
                time_zone: zone,
                timeout,
                restart_after_timeout: t.restart_after_timeout.unwrap_or(true),
                accept: t.accept.unwrap_or_default(),
                retry,
                produces,
                expect_every: t.expect_every,
                params: t.params.clone(),
                topic: t.topic.clone(),
            });
        }
        Ok(Loaded {
            config: Config {
                time_zone,
                strict: file.strict,
                pools,
                tasks,
                stages: Vec::new(),
                offers: OffersSettings::default(),
                kafka: self.kafka(file.kafka)?,
            },
            warnings,
        })
    }

    fn kafka(&self, k: KafkaSettings) -> Result<KafkaSettings, Error> {
        let at = self.text.find("[kafka").unwrap_or(0);
        let bad = |field: &str, message: &str| self.invalid(at, "section [kafka]", field, message);
        if k.group_id.is_empty() {
            return Err(bad("group_id", "must not be empty"));
        }
        if k.commit_interval.is_zero() {
            return Err(bad("commit_interval", "must be positive, e.g. \"100ms\""));
        }
        if k.partitions < 1 {
            return Err(bad("partitions", "must be at least 1"));
        }
        if k.replication_factor < 1 {
            return Err(bad("replication_factor", "must be at least 1"));
        }
        for (field, name) in k.topics.all() {
            if name.is_empty() {
                return Err(bad(field, "must not be empty"));
            }
        }
        Ok(k)
    }

    fn retry(&self, t: &TaskFile, at: usize, subject: &str) -> Result<RetryPolicy, Error> {
        let mut policy = RetryPolicy::default();
        if let Some(r) = &t.retry {
            if let Some(attempts) = r.attempts {
                if attempts == 0 {
                    return Err(self.invalid(at, subject, "retry.attempts", "must be at least 1"));
                }
                policy.attempts = attempts;
            }
            if let Some(backoff) = r.backoff {
                policy.backoff = backoff;
            }
            if let Some(tiers) = &r.tiers {
                if tiers.iter().any(|d| d.is_zero()) {
                    return Err(self.invalid(
                        at,
                        subject,
                        "retry.tiers",
                        "every tier must be positive",
                    ));
                }
                policy.tiers = tiers.clone();
            }
        }
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
time_zone = "UTC"

[[pool]]
name = "reports"
max_running = 2

[[task]]
id = "orders_daily"
pool = "reports"
priority = 10
trigger = "chunk_delta(dwh.orders/max_dt, day)"
time_zone = "Europe/Moscow"
timeout = "1h"
retry = { attempts = 3, backoff = "1m", tiers = ["30m", "1d"] }
"#;

    #[test]
    fn design_sample_loads() {
        let loaded = parse(SAMPLE, "sample.toml").unwrap();
        assert!(loaded.warnings.is_empty());
        let task = &loaded.config.tasks[0];
        assert_eq!(task.id, "orders_daily");
        assert_eq!(loaded.config.pools[task.pool].name, "reports");
        assert_eq!(loaded.config.pools[task.pool].max_running, Some(2));
        assert_eq!(task.priority, 10);
        assert_eq!(task.timeout, Duration::from_secs(3600));
        assert_eq!(task.retry, RetryPolicy::default());
        assert_eq!(
            task.time_zone.iana_name(),
            Some("Europe/Moscow"),
            "bundled tz database"
        );
    }

    fn error(text: &str) -> String {
        parse(text, "t.toml").unwrap_err().to_string()
    }

    #[test]
    fn unknown_key_names_line_and_key() {
        let e = error("[[task]]\nid = \"a\"\ntrigger = \"delta(a/b, 1h)\"\ntimeot = \"1h\"\n");
        assert!(e.contains("t.toml: line 4"), "{e}");
        assert!(e.contains("timeot"), "{e}");
    }

    #[test]
    fn bad_trigger_names_task_field_and_column() {
        let e = error("[[task]]\nid = \"a\"\ntrigger = \"delta(a/b, 2x)\"\n");
        assert!(e.starts_with("t.toml:3: task `a`, field `trigger`"), "{e}");
        assert!(e.contains("column"), "{e}");
    }

    #[test]
    fn unknown_pool_and_zone() {
        let e = error("[[task]]\nid = \"a\"\npool = \"x\"\ntrigger = \"delta(a/b, 1h)\"\n");
        assert!(e.contains("task `a`, field `pool`"), "{e}");
        let e = error(
            "[[task]]\nid = \"a\"\ntime_zone = \"Mars/Base\"\ntrigger = \"delta(a/b, 1h)\"\n",
        );
        assert!(e.contains("t.toml:3: task `a`, field `time_zone`"), "{e}");
    }

    #[test]
    fn duplicate_task() {
        let e = error("[[task]]\nid = \"a\"\ntrigger = \"delta(a/b, 1h)\"\n[[task]]\nid = \"a\"\ntrigger = \"delta(a/b, 1h)\"\n");
        assert!(e.contains("task `a`, field `id`: declared twice"), "{e}");
    }

    #[test]
    fn lint_warns_or_fails_in_strict_mode() {
        let text = "[[task]]\nid = \"a\"\ntrigger = \"delay(a/b, 1h)\"\n";
        let loaded = parse(text, "t.toml").unwrap();
        assert_eq!(loaded.warnings.len(), 1);
        assert!(loaded.warnings[0].location.contains("task `a`"));
        let e = error(&format!("strict = true\n{text}"));
        assert!(e.contains("strict mode"), "{e}");
    }
}
