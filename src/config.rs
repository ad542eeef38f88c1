//! Configuration: the TOML file users write, and its validated form.
//!
//! Reading happens in two steps: serde reads [`File`] (unknown keys are
//! errors), then [`parse`] validates it into a [`Config`]: it compiles
//! triggers, zones and stage expressions and checks names, limits and
//! references, so every error can name the file, line, task (or stage) and
//! field.

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
    /// Offer stages (`[[stage]]`), in file order.
    #[serde(default)]
    pub stage: Vec<Spanned<StageFile>>,
    /// Settings shared by every offer (`[offers]`).
    #[serde(default)]
    pub offers: Option<Spanned<OffersFile>>,
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

    /// Reactor's own topics, which no stage may use as its run topic: every
    /// topic but `runs` (a shared run topic that workers already read).
    pub fn own(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.all()
            .into_iter()
            .filter(|(field, _)| *field != "topics.runs")
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
    /// `OfferState` records (post-commit offer events).
    pub offer_state: Format,
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

/// A `[[stage]]` section: an offer stage (DESIGN §6).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageFile {
    /// Unique stage name: ASCII letters, digits and `_ . : -`.
    pub name: String,
    /// Top-level body fields whose change can wake the stage; empty (default): every field.
    #[serde(default)]
    pub watch: Vec<String>,
    /// shouldProcess: a CEL predicate over `offer`, `meta`, `state` and `now` (default "true").
    #[serde(default)]
    pub when: Option<Spanned<String>>,
    /// Optional CEL wake-up time: a timestamp, or null for no timer.
    #[serde(default)]
    pub timer: Option<Spanned<String>>,
    /// Topic the run commands go to (default `stage.NAME.runs`).
    #[serde(default)]
    pub topic: Option<String>,
    /// Most runs in flight across all partitions (default 16).
    #[serde(default)]
    pub max_parallelism: Option<u32>,
    /// Most dispatches across all partitions, e.g. "50/s" or "300/min"; unlimited when absent.
    #[serde(default)]
    pub rate_limit: Option<Spanned<String>>,
    /// No result by then: the pass times out (default 1m).
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
}

/// The `[offers]` section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OffersFile {
    /// The ping-pong guard (`[offers.ping_pong]`).
    #[serde(default)]
    pub ping_pong: Option<PingPongFile>,
}

/// `[offers.ping_pong]`: too many stage runs of one offer in a window park it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PingPongFile {
    /// Most stage runs of one offer in a window (default 20).
    #[serde(default)]
    pub runs: Option<u32>,
    /// The window (default 1m).
    #[serde(default)]
    pub window: Option<Duration>,
    /// How long the offer's stage runs are parked when the limit is passed (default 1h).
    #[serde(default)]
    pub park: Option<Duration>,
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
    /// Timeout, result acceptance and retries of its runs.
    pub run: RunPolicy,
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

impl Config {
    /// Every stage's run topic, each once, in the order of the stages.
    pub fn stage_topics(&self) -> Vec<&str> {
        let mut topics: Vec<&str> = Vec::with_capacity(self.stages.len());
        for stage in &self.stages {
            if !topics.contains(&stage.topic.as_str()) {
                topics.push(&stage.topic);
            }
        }
        topics
    }
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

/// How the runs of a task or stage are supervised: the part of the run
/// lifecycle (DESIGN §7) both share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPolicy {
    /// No result by then: the pass times out.
    pub timeout: Duration,
    /// Re-dispatch at once after a timeout while attempts remain (else the
    /// timeout goes through the retry policy).
    pub restart_after_timeout: bool,
    /// Which pass's result is accepted.
    pub accept: Accept,
    /// Retries after failures.
    pub retry: RetryPolicy,
}

impl RunPolicy {
    /// Whether a pass that timed out after `failures` failed attempts is
    /// re-dispatched at once. A timeout is a failed attempt: the last one
    /// (or any, with `restart_after_timeout = false`) goes through the
    /// retry policy instead.
    pub fn restarts_on_timeout(&self, failures: u32) -> bool {
        self.restart_after_timeout && failures + 1 < self.retry.attempts
    }

    /// The error recorded for a timed-out attempt.
    pub fn timeout_error(&self) -> String {
        format!("timed out after {}", self.timeout)
    }
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
/// A stage's `when` when absent: every watched change enqueues the offer.
const DEFAULT_WHEN: &str = "true";

/// Whether `id` is a usable task id or stage name: non-empty ASCII letters,
/// digits and `_ . : -`. Run ids are `TASK#SEQ` and `STAGE/OFFER#SEQ`, so
/// neither `/` nor `#` may appear in one.
fn is_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

/// Whether Kafka accepts `name` as a topic name.
fn is_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

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

    /// Offset of the line that sets `key` in the section whose header is at
    /// `section` (looking no further than the next header), or `section`
    /// itself when the key is not found there (e.g. inside an inline table).
    fn key_at(&self, section: usize, key: &str) -> usize {
        let text = self.text;
        let Some(end_of_header) = text[section.min(text.len())..].find('\n') else {
            return section;
        };
        let mut offset = section + end_of_header + 1;
        for line in text[offset..].split_inclusive('\n') {
            let trimmed = line.trim_start();
            if trimmed.starts_with('[') {
                break;
            }
            if let Some(rest) = trimmed.strip_prefix(key) {
                let rest = rest.trim_start();
                if rest.starts_with('=') || rest.starts_with('.') {
                    return offset + (line.len() - trimmed.len());
                }
            }
            offset += line.len();
        }
        section
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
            if !is_id(&t.id) {
                return Err(self.invalid(
                    at,
                    &subject,
                    "id",
                    "task ids use letters, digits and `_ . : -`",
                ));
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
            let retry = self.retry(t.retry.as_ref(), at, &subject)?;
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
                run: RunPolicy {
                    timeout,
                    restart_after_timeout: t.restart_after_timeout.unwrap_or(true),
                    accept: t.accept.unwrap_or_default(),
                    retry,
                },
                produces,
                expect_every: t.expect_every,
                params: t.params.clone(),
                topic: t.topic.clone(),
            });
        }
        let kafka = self.kafka(file.kafka)?;
        let mut stages: Vec<Stage> = Vec::with_capacity(file.stage.len());
        for spanned in &file.stage {
            let stage = self.stage(spanned, &stages, &kafka.topics)?;
            stages.push(stage);
        }
        let offers = match &file.offers {
            Some(offers) => self.offers(offers)?,
            None => OffersSettings::default(),
        };
        Ok(Loaded {
            config: Config {
                time_zone,
                strict: file.strict,
                pools,
                tasks,
                stages,
                offers,
                kafka,
            },
            warnings,
        })
    }

    /// Validates one `[[stage]]` given the stages `before` it; `topics` are
    /// Reactor's own, which the stage's run topic must not be.
    fn stage(
        &self,
        spanned: &Spanned<StageFile>,
        before: &[Stage],
        topics: &Topics,
    ) -> Result<Stage, Error> {
        let section = spanned.span().start;
        let at = |key: &str| self.key_at(section, key);
        let s = spanned.get_ref();
        if s.name.is_empty() {
            return Err(self.invalid(at("name"), "stage", "name", "must not be empty"));
        }
        let subject = format!("stage `{}`", s.name);
        if !is_id(&s.name) {
            return Err(self.invalid(
                at("name"),
                &subject,
                "name",
                "stage names use letters, digits and `_ . : -` \
                 (run ids are `STAGE/OFFER#SEQ`)",
            ));
        }
        if before.iter().any(|b| b.name == s.name) {
            return Err(self.invalid(at("name"), &subject, "name", "declared twice"));
        }
        let mut watch: Vec<String> = Vec::with_capacity(s.watch.len());
        for field in &s.watch {
            if field.is_empty() {
                return Err(self.invalid(
                    at("watch"),
                    &subject,
                    "watch",
                    "field names must not be empty",
                ));
            }
            if watch.contains(field) {
                return Err(self.invalid(
                    at("watch"),
                    &subject,
                    "watch",
                    format!("`{field}` is listed twice"),
                ));
            }
            watch.push(field.clone());
        }
        let when = match &s.when {
            Some(text) => self.expr(text, &subject, "when")?,
            None => Expr::compile(DEFAULT_WHEN).map_err(|e| {
                self.invalid(section, &subject, "when", format!("`{DEFAULT_WHEN}`: {e}"))
            })?,
        };
        let timer = match &s.timer {
            Some(text) => Some(self.expr(text, &subject, "timer")?),
            None => None,
        };
        let topic = match &s.topic {
            Some(topic) => {
                if !is_topic_name(topic) {
                    return Err(self.invalid(
                        at("topic"),
                        &subject,
                        "topic",
                        format!(
                            "`{topic}` is not a Kafka topic name: use 1 to 249 ASCII \
                             letters, digits and `_ . -`"
                        ),
                    ));
                }
                topic.clone()
            }
            None => {
                let topic = format!("stage.{}.runs", s.name);
                if !is_topic_name(&topic) {
                    // The name makes the default topic: point at it.
                    return Err(self.invalid(
                        at("name"),
                        &subject,
                        "topic",
                        format!(
                            "the default run topic `{topic}` is not a Kafka topic name \
                             (no `:`, at most 249 characters); set `topic`"
                        ),
                    ));
                }
                topic
            }
        };
        if let Some((field, _)) = topics.own().find(|(_, name)| *name == topic) {
            return Err(self.invalid(
                at("topic"),
                &subject,
                "topic",
                format!(
                    "`{topic}` is Reactor's own topic (kafka.{field}); \
                     give the stage a run topic of its own"
                ),
            ));
        }
        let max_parallelism = s.max_parallelism.unwrap_or(DEFAULT_MAX_PARALLELISM);
        if max_parallelism == 0 {
            return Err(self.invalid(
                at("max_parallelism"),
                &subject,
                "max_parallelism",
                "must be at least 1",
            ));
        }
        let rate_limit = match &s.rate_limit {
            Some(text) => Some(text.get_ref().parse::<RateLimit>().map_err(|e| {
                self.invalid(text.span().start, &subject, "rate_limit", e.to_string())
            })?),
            None => None,
        };
        let timeout = s.timeout.unwrap_or(DEFAULT_STAGE_TIMEOUT);
        if timeout.is_zero() {
            return Err(self.invalid(at("timeout"), &subject, "timeout", "must be positive"));
        }
        Ok(Stage {
            name: s.name.clone(),
            watch,
            when,
            timer,
            topic,
            max_parallelism,
            rate_limit,
            run: RunPolicy {
                timeout,
                restart_after_timeout: s.restart_after_timeout.unwrap_or(true),
                accept: s.accept.unwrap_or_default(),
                retry: self.retry(s.retry.as_ref(), at("retry"), &subject)?,
            },
        })
    }

    /// Compiles a stage's CEL expression; the error quotes it and gives the column.
    fn expr(&self, text: &Spanned<String>, subject: &str, field: &str) -> Result<Expr, Error> {
        let source = text.get_ref();
        Expr::compile(source).map_err(|e| {
            let detail = e.to_string();
            self.invalid(
                text.span().start,
                subject,
                field,
                format!("`{source}`: {detail}"),
            )
        })
    }

    /// Validates `[offers]`.
    fn offers(&self, offers: &Spanned<OffersFile>) -> Result<OffersSettings, Error> {
        let mut settings = OffersSettings::default();
        let Some(p) = &offers.get_ref().ping_pong else {
            return Ok(settings);
        };
        // `[offers.ping_pong]` or `ping_pong = {…}` under `[offers]`.
        let start = offers.span().start;
        let section = self.text[start.min(self.text.len())..]
            .find("ping_pong")
            .map_or(start, |i| start + i);
        let subject = "section [offers.ping_pong]";
        let at = |key: &str| self.key_at(section, key);
        let pong = &mut settings.ping_pong;
        if let Some(runs) = p.runs {
            if runs == 0 {
                return Err(self.invalid(at("runs"), subject, "runs", "must be at least 1"));
            }
            pong.runs = runs;
        }
        if let Some(window) = p.window {
            if window.is_zero() {
                return Err(self.invalid(at("window"), subject, "window", "must be positive"));
            }
            pong.window = window;
        }
        if let Some(park) = p.park {
            if park.is_zero() {
                return Err(self.invalid(at("park"), subject, "park", "must be positive"));
            }
            pong.park = park;
        }
        Ok(settings)
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

    /// The retry policy of a task or stage (`retry`), defaults filled in.
    fn retry(&self, r: Option<&RetryFile>, at: usize, subject: &str) -> Result<RetryPolicy, Error> {
        let mut policy = RetryPolicy::default();
        if let Some(r) = r {
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
        assert_eq!(task.run.timeout, Duration::from_secs(3600));
        assert_eq!(task.run.retry, RetryPolicy::default());
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

    #[test]
    fn task_ids_use_a_restricted_alphabet() {
        for bad in ["a/b", "a#1", "a b"] {
            let e = error(&format!(
                "[[task]]\nid = \"{bad}\"\ntrigger = \"delta(a/b, 1h)\"\n"
            ));
            assert!(
                e.starts_with(&format!("t.toml:1: task `{bad}`, field `id`: ")),
                "{e}"
            );
            assert!(
                e.contains("task ids use letters, digits and `_ . : -`"),
                "{e}"
            );
        }
        let text = "[[task]]\nid = \"dwh.orders:daily-v2_x\"\ntrigger = \"delta(a/b, 1h)\"\n";
        assert!(parse(text, "t.toml").is_ok());
    }

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
}
