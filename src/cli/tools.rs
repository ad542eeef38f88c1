//! `reactor run`, and the small Kafka tools: `ctl set`, `offer …`,
//! `rescan`, `tail`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use jiff::Timestamp;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaResult;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::{Message, Offset, TopicPartitionList};

use crate::changelog::Store;
use crate::clock::SystemClock;
use crate::codec::{self, CtlRecord, Format, MessageKind};
use crate::config::{Config, KafkaSettings};
use crate::kafka::Clients;
use crate::service::{self, Settings};

/// `reactor ctl …`
#[derive(Debug, Subcommand)]
pub enum CtlCmd {
    /// Publish a CTL change: ENTITY/PARAM now has VALUE.
    Set {
        /// Entity, e.g. dwh.orders.
        entity: String,
        /// Parameter, e.g. max_dt.
        param: String,
        /// New value (RFC 3339), e.g. 2024-05-01T00:00:00Z.
        value: Timestamp,
        #[command(flatten)]
        target: Target,
        /// Encoding of the record.
        #[arg(long, value_enum, default_value = "protobuf")]
        format: FormatArg,
        /// Who set it (the `source` field).
        #[arg(long, default_value = "reactor-cli")]
        source: String,
    },
}

/// Where the tools connect: brokers and topic names.
#[derive(Debug, Clone, Args)]
pub struct Target {
    /// Configuration file for brokers and topic names (optional).
    #[arg(short, long)]
    pub(super) config: Option<PathBuf>,
    /// Bootstrap servers (overrides the configuration).
    #[arg(long, env = "REACTOR_BROKERS")]
    pub(super) brokers: Option<String>,
}

/// Encodings on the command line.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum FormatArg {
    /// Protobuf.
    Protobuf,
    /// proto3 JSON.
    Json,
}

/// `reactor tail TOPIC`.
#[derive(Debug, Args)]
pub struct TailArgs {
    /// Topic to read.
    topic: String,
    #[command(flatten)]
    target: Target,
    /// Message type (ctl_change, run_command, run_result, event, command,
    /// offer_change, offer_state, one store's records — task_record,
    /// offer_record, rescan_record, key_record, schedule_record, seq_record,
    /// recovery_record — or changelog: by each key's store); default:
    /// guessed from the configured topic names (run topics of tasks and
    /// stages with --config).
    #[arg(long)]
    kind: Option<String>,
    /// Start at the beginning of every partition (default: only new records).
    #[arg(long)]
    from_beginning: bool,
    /// Stop after this many records.
    #[arg(long)]
    max: Option<usize>,
    /// Stop when no record came for this long (e.g. 10s); default: never.
    #[arg(long)]
    idle: Option<crate::duration::Duration>,
    /// Show records of open or aborted transactions too.
    #[arg(long)]
    uncommitted: bool,
}

/// What the tools connect to: brokers and the configuration's topics.
pub(super) struct Conn {
    pub(super) kafka: KafkaSettings,
    brokers: String,
    /// The configuration, when one was given.
    pub(super) config: Option<Config>,
}

impl Conn {
    pub(super) fn clients(&self) -> Clients {
        Clients {
            brokers: self.brokers.clone(),
            librdkafka: self.kafka.librdkafka.clone(),
        }
    }
}

pub(super) fn settings(target: &Target) -> Result<Conn, ExitCode> {
    let config = match &target.config {
        Some(path) => Some(super::load(path)?.config),
        None => None,
    };
    let kafka = config
        .as_ref()
        .map_or_else(KafkaSettings::default, |c| c.kafka.clone());
    match target.brokers.clone().or_else(|| kafka.brokers.clone()) {
        Some(brokers) => Ok(Conn {
            kafka,
            brokers,
            config,
        }),
        None => {
            eprintln!("error: no brokers: pass --brokers, set REACTOR_BROKERS, or kafka.brokers in the configuration");
            Err(ExitCode::from(2))
        }
    }
}

fn host_name() -> Option<String> {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

/// `reactor run`.
pub fn run(
    config: Config,
    brokers: Option<String>,
    admin: std::net::SocketAddr,
    instance_id: Option<String>,
) -> ExitCode {
    let Some(brokers) = brokers.or_else(|| config.kafka.brokers.clone()) else {
        eprintln!("error: no brokers: pass --brokers, set REACTOR_BROKERS, or kafka.brokers in the configuration");
        return ExitCode::from(2);
    };
    let instance_id = instance_id
        .or_else(|| config.kafka.instance_id.clone())
        .or_else(host_name)
        .unwrap_or_else(|| format!("pid{}", std::process::id()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let settings = Settings {
        config: Arc::new(config),
        brokers,
        admin,
        instance_id,
        clock: Arc::new(SystemClock),
    };
    match runtime.block_on(service::serve(settings, service::signal())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `reactor ctl set`.
pub fn ctl(command: CtlCmd) -> ExitCode {
    let CtlCmd::Set {
        entity,
        param,
        value,
        target,
        format,
        source,
    } = command;
    let conn = match settings(&target) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let record = CtlRecord {
        entity: entity.clone(),
        param: param.clone(),
        value,
    };
    if let Err(e) = format!("{entity}/{param}").parse::<crate::ctl::ParamName>() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let payload = codec::encode_ctl_change(&record, Some(Timestamp::now()), &source, format.into());
    let key = format!("{entity}/{param}");
    let topic = &conn.kafka.topics.ctl;
    match produce(
        &conn.clients(),
        topic,
        &[(None, key.as_bytes(), Some(&payload))],
    ) {
        Ok(()) => {
            println!("{key} = {value} → {topic}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: producing to {topic}: {e}");
            ExitCode::FAILURE
        }
    }
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Protobuf => Format::Protobuf,
            FormatArg::Json => Format::Json,
        }
    }
}

/// One record to produce: explicit partition (`None`: murmur2 by key),
/// key, value (`None`: tombstone).
type Outgoing<'a> = (Option<i32>, &'a [u8], Option<&'a [u8]>);

/// Produces `records` to `topic` with the Java-compatible partitioner and
/// waits until every one is acknowledged.
fn produce(clients: &Clients, topic: &str, records: &[Outgoing<'_>]) -> KafkaResult<()> {
    let producer: ThreadedProducer<_> = clients.producer(None).create()?;
    for (partition, key, payload) in records {
        let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic).key(*key);
        if let Some(payload) = payload {
            record = record.payload(*payload);
        }
        if let Some(p) = partition {
            record = record.partition(*p);
        }
        producer.send(record).map_err(|(e, _)| e)?;
    }
    producer.flush(Duration::from_secs(30))
}

/// `reactor offer …`
#[derive(Debug, Subcommand)]
pub enum OfferCmd {
    /// Replace an offer's body (creates the offer when it is new).
    Put {
        /// Offer id (the record key).
        id: String,
        /// The body: a JSON object.
        json: String,
        #[command(flatten)]
        out: OfferOut,
    },
    /// Apply a JSON merge patch (RFC 7396) to an offer's body.
    Patch {
        /// Offer id (the record key).
        id: String,
        /// The patch: a JSON object (`null` removes a field).
        json: String,
        #[command(flatten)]
        out: OfferOut,
    },
    /// Delete an offer (its stage queues and timers are cancelled).
    Delete {
        /// Offer id (the record key).
        id: String,
        #[command(flatten)]
        out: OfferOut,
    },
    /// Replace a stage's state on an offer if the offer is still at
    /// `--version` (compare-and-set; the answer is a `stage_state` event).
    SetState {
        /// Offer id.
        id: String,
        /// Stage name.
        stage: String,
        /// The new state, any JSON value (`null` clears it).
        json: String,
        /// The offer version the state was read at (`/offers/{id}` shows it).
        #[arg(long)]
        version: u64,
        #[command(flatten)]
        out: OfferOut,
    },
    /// End an offer's ping-pong park and give its dead stages one more attempt.
    Unpark {
        /// Offer id.
        id: String,
        #[command(flatten)]
        out: OfferOut,
    },
}

/// Where and how `reactor offer …` writes.
#[derive(Debug, Args)]
pub struct OfferOut {
    #[command(flatten)]
    target: Target,
    /// Encoding of the record.
    #[arg(long, value_enum, default_value = "protobuf")]
    format: FormatArg,
    /// Who made the change (the `source` field of put, patch and delete).
    #[arg(long, default_value = "reactor-cli")]
    source: String,
}

/// A JSON object from the command line.
fn json_object(what: &str, text: &str) -> Result<crate::offer::Body, String> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(body)) => Ok(body),
        Ok(_) => Err(format!("{what} must be a JSON object")),
        Err(e) => Err(format!("{what} is not JSON: {e}")),
    }
}

/// `reactor offer …`: offer changes to `topics.offers`, offer commands to
/// `topics.commands`, each keyed by the offer id so it reaches the
/// partition that owns the offer.
pub fn offer(command: OfferCmd) -> ExitCode {
    use crate::engine::Command;
    use crate::offer::{Change, OfferChange};
    enum Out {
        Change(Change),
        Command(Command),
    }
    let (id, out, what) = match command {
        OfferCmd::Put { id, json, out } => match json_object("the body", &json) {
            Ok(body) => (id, out, Out::Change(Change::Body(body))),
            Err(e) => return usage(&e),
        },
        OfferCmd::Patch { id, json, out } => match json_object("the patch", &json) {
            Ok(patch) => (id, out, Out::Change(Change::Patch(patch))),
            Err(e) => return usage(&e),
        },
        OfferCmd::Delete { id, out } => (id, out, Out::Change(Change::Deleted)),
        OfferCmd::SetState {
            id,
            stage,
            json,
            version,
            out,
        } => match serde_json::from_str(&json) {
            Ok(state) => {
                let command = Command::SetStageState {
                    offer: id.clone(),
                    stage,
                    state,
                    version,
                };
                (id, out, Out::Command(command))
            }
            Err(e) => return usage(&format!("the state is not JSON: {e}")),
        },
        OfferCmd::Unpark { id, out } => {
            let command = Command::UnparkOffer { offer: id.clone() };
            (id, out, Out::Command(command))
        }
    };
    if id.is_empty() {
        return usage("the offer id must not be empty");
    }
    let conn = match settings(&out.target) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let topics = &conn.kafka.topics;
    let (topic, payload) = match &what {
        Out::Change(change) => {
            let change = OfferChange {
                offer_id: id.clone(),
                change: change.clone(),
                source: Some(out.source.clone()).filter(|s| !s.is_empty()),
            };
            (
                &topics.offers,
                codec::encode_offer_change(&change, out.format.into()),
            )
        }
        Out::Command(command) => (
            &topics.commands,
            codec::encode_command(command, out.format.into()),
        ),
    };
    match produce(
        &conn.clients(),
        topic,
        &[(None, id.as_bytes(), Some(&payload))],
    ) {
        Ok(()) => {
            let verb = match &what {
                Out::Change(Change::Body(_)) => "put",
                Out::Change(Change::Patch(_)) => "patch",
                Out::Change(Change::Deleted) => "delete",
                Out::Command(Command::SetStageState { .. }) => "set-state",
                Out::Command(_) => "unpark",
            };
            println!("offer {id}: {verb} → {topic}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: producing to {topic}: {e}");
            ExitCode::FAILURE
        }
    }
}

pub(super) fn usage(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

/// `reactor rescan STAGE`.
#[derive(Debug, Args)]
pub struct RescanArgs {
    /// The stage whose `when` is checked again over every offer.
    stage: String,
    /// Only offers for which this CEL filter (over `offer`, `meta`, `state`,
    /// `now`) is true are considered.
    #[arg(long, value_name = "CEL")]
    when: Option<String>,
    /// Configuration file: the stage must be declared there.
    #[arg(short, long)]
    config: PathBuf,
    /// Bootstrap servers (overrides the configuration).
    #[arg(long, env = "REACTOR_BROKERS")]
    brokers: Option<String>,
    /// Encoding of the commands.
    #[arg(long, value_enum, default_value = "protobuf")]
    format: FormatArg,
}

/// `reactor rescan`: one `Rescan` command per partition of
/// `topics.commands` (each partition's owner rescans its own offers),
/// written to explicit partitions and keyed by the stage name.
pub fn rescan(args: RescanArgs) -> ExitCode {
    let target = Target {
        config: Some(args.config.clone()),
        brokers: args.brokers.clone(),
    };
    let conn = match settings(&target) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let config = conn.config.as_ref().expect("loaded from --config");
    if !config.stages.iter().any(|s| s.name == args.stage) {
        let known: Vec<&str> = config.stages.iter().map(|s| s.name.as_str()).collect();
        return usage(&format!(
            "{}: no stage `{}` (declared: {})",
            args.config.display(),
            args.stage,
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ));
    }
    if let Some(filter) = &args.when {
        if let Err(e) = crate::stage::expr::Expr::compile(filter) {
            return usage(&format!("--when `{filter}`: {e}"));
        }
    }
    let topic = &conn.kafka.topics.commands;
    let partitions = match partition_count(&conn.clients(), topic) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let command = crate::engine::Command::Rescan {
        stage: args.stage.clone(),
        when: args.when.clone(),
    };
    let payload = codec::encode_command(&command, args.format.into());
    let records: Vec<Outgoing<'_>> = (0..partitions)
        .map(|p| (Some(p), args.stage.as_bytes(), Some(&payload[..])))
        .collect();
    match produce(&conn.clients(), topic, &records) {
        Ok(()) => {
            println!(
                "rescan of stage {}: {partitions} commands sent to {topic} (one per partition); progress on {} as rescan_progress events",
                args.stage, conn.kafka.topics.events
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: producing to {topic}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The partition count of `topic` from the cluster metadata.
pub(super) fn partition_count(clients: &Clients, topic: &str) -> Result<i32, String> {
    let consumer: BaseConsumer = clients
        .reader()
        .create()
        .map_err(|e| format!("creating a client: {e}"))?;
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .map_err(|e| format!("metadata of {topic}: {e}"))?;
    let n = metadata
        .topics()
        .first()
        .filter(|t| t.error().is_none())
        .map_or(0, |t| t.partitions().len() as i32);
    if n == 0 {
        return Err(format!("topic {topic} does not exist"));
    }
    Ok(n)
}

/// How `tail` decodes a topic's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TailKind {
    /// Every record is of this kind.
    Fixed(MessageKind),
    /// The changelog: the kind follows the store in the key (`task/…`,
    /// `offer/…`, `process/…` …).
    Changelog,
}

impl TailKind {
    fn from_name(name: &str) -> Option<TailKind> {
        if name == "changelog" {
            return Some(TailKind::Changelog);
        }
        MessageKind::from_name(name).map(TailKind::Fixed)
    }

    /// The kind of one record with `key`.
    fn of(self, key: Option<&[u8]>) -> Option<MessageKind> {
        match self {
            TailKind::Fixed(kind) => Some(kind),
            TailKind::Changelog => {
                Store::split_key(key?).map(|(store, _)| MessageKind::of_store(store))
            }
        }
    }
}

fn guess_kind(conn: &Conn, topic: &str) -> Option<TailKind> {
    let t = &conn.kafka.topics;
    let run_topic = conn.config.as_ref().is_some_and(|c| {
        c.stage_topics().contains(&topic)
            || c.tasks
                .iter()
                .any(|task| task.extra().topic.as_deref() == Some(topic))
    });
    Some(TailKind::Fixed(match topic {
        x if x == t.changelog => return Some(TailKind::Changelog),
        x if x == t.ctl => MessageKind::CtlChange,
        x if x == t.runs => MessageKind::RunCommand,
        x if x == t.results => MessageKind::RunResult,
        x if x == t.events => MessageKind::Event,
        x if x == t.commands => MessageKind::Command,
        x if x == t.offers => MessageKind::OfferChange,
        x if x == t.offer_state => MessageKind::OfferState,
        _ if run_topic => MessageKind::RunCommand,
        _ => return None,
    }))
}

/// `reactor tail`.
pub fn tail(args: TailArgs) -> ExitCode {
    let conn = match settings(&args.target) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let kind = match args.kind.as_deref() {
        Some(name) => TailKind::from_name(name),
        None => guess_kind(&conn, &args.topic),
    };
    let Some(kind) = kind else {
        eprintln!(
            "error: cannot tell the message type of {}; pass --kind (one of {}, changelog)",
            args.topic,
            MessageKind::ALL
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return ExitCode::from(2);
    };
    let clients = conn.clients();
    let mut config = clients.reader();
    config.set("enable.partition.eof", "false").set(
        "isolation.level",
        if args.uncommitted {
            "read_uncommitted"
        } else {
            "read_committed"
        },
    );
    let consumer: BaseConsumer = match config.create() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let partitions = match consumer.fetch_metadata(Some(&args.topic), Duration::from_secs(10)) {
        Ok(m) => m
            .topics()
            .first()
            .map_or(0, |t| t.partitions().len() as i32),
        Err(e) => {
            eprintln!("error: metadata of {}: {e}", args.topic);
            return ExitCode::FAILURE;
        }
    };
    if partitions == 0 {
        eprintln!("error: topic {} does not exist", args.topic);
        return ExitCode::FAILURE;
    }
    let start = if args.from_beginning {
        Offset::Beginning
    } else {
        Offset::End
    };
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        let _ = tpl.add_partition_offset(&args.topic, p, start);
    }
    if let Err(e) = consumer.assign(&tpl) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let mut seen = 0usize;
    let mut last = Instant::now();
    loop {
        if args.max.is_some_and(|max| seen >= max) {
            break;
        }
        if args
            .idle
            .is_some_and(|idle| last.elapsed() >= idle.to_std())
        {
            break;
        }
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        last = Instant::now();
        seen += 1;
        let key = m.key().map(|k| String::from_utf8_lossy(k).to_string());
        let value = match (m.payload(), kind.of(m.key())) {
            (None, _) => serde_json::Value::Null,
            (Some(bytes), Some(kind)) => match codec::to_json(kind, bytes) {
                Ok(v) => v,
                Err(e) => serde_json::json!({ "undecodable": e.to_string() }),
            },
            // The runtime's own changelog records: CTL dead-letter marks.
            (Some(bytes), None) => {
                match codec::decode_ctl_dead_mark(m.key().unwrap_or_default(), Some(bytes)) {
                    Some(Ok((_, offset))) => serde_json::json!({ "ctl_dead_offset": offset }),
                    Some(Err(e)) => serde_json::json!({ "undecodable": e.to_string() }),
                    None => {
                        serde_json::json!({ "undecodable": "unknown changelog store in the key" })
                    }
                }
            }
        };
        let line = serde_json::json!({
            "topic": m.topic(),
            "partition": m.partition(),
            "offset": m.offset(),
            "key": key,
            "value": value,
        });
        println!("{line}");
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_guesses_offer_topics_stage_runs_and_changelog_stores() {
        let text = r#"
[[stage]]
name = "price"
topic = "price.runs"

[[task]]
id = "t"
trigger = "delta(a/b, 1h)"
topic = "t.runs"
"#;
        let config = crate::config::parse(text, "t.toml").unwrap().config;
        let conn = Conn {
            kafka: config.kafka.clone(),
            brokers: "localhost:9092".into(),
            config: Some(config),
        };
        let fixed = |k| Some(TailKind::Fixed(k));
        assert_eq!(
            guess_kind(&conn, "offer.changes"),
            fixed(MessageKind::OfferChange)
        );
        assert_eq!(
            guess_kind(&conn, "offer.state"),
            fixed(MessageKind::OfferState)
        );
        assert_eq!(
            guess_kind(&conn, "price.runs"),
            fixed(MessageKind::RunCommand)
        );
        assert_eq!(guess_kind(&conn, "t.runs"), fixed(MessageKind::RunCommand));
        assert_eq!(guess_kind(&conn, "elsewhere"), None);
        let changelog = guess_kind(&conn, "reactor.changelog").unwrap();
        assert_eq!(changelog, TailKind::Changelog);
        assert_eq!(TailKind::from_name("changelog"), Some(TailKind::Changelog));
        assert_eq!(changelog.of(Some(b"task/t")), Some(MessageKind::TaskRecord));
        assert_eq!(
            changelog.of(Some(b"offer/a/b")),
            Some(MessageKind::OfferRecord)
        );
        assert_eq!(
            changelog.of(Some(b"rescan/price")),
            Some(MessageKind::RescanRecord)
        );
        assert_eq!(
            changelog.of(Some(b"process/payout/k1")),
            Some(MessageKind::KeyRecord)
        );
        assert_eq!(
            changelog.of(Some(b"schedule/payout")),
            Some(MessageKind::ScheduleRecord)
        );
        assert_eq!(
            changelog.of(Some(b"seq/payout")),
            Some(MessageKind::SeqRecord)
        );
        assert_eq!(
            changelog.of(Some(b"recovery/op1")),
            Some(MessageKind::RecoveryRecord)
        );
        // The runtime's CTL dead-letter marks are no store's.
        assert_eq!(changelog.of(Some(b"ctl-dead/3")), None);
        assert_eq!(changelog.of(Some(b"nope/x")), None);
        assert_eq!(changelog.of(None), None);
    }
}
