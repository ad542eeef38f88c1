//! `reactor run`, and the small Kafka tools: `ctl set`, `offer …`,
//! `rescan` (`tail` has a file of its own).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use jiff::Timestamp;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaResult;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};

use crate::clock::SystemClock;
use crate::codec::{self, CtlRecord, Format};
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

/// What the tools connect to: brokers and the configuration's topics.
pub(super) struct Conn {
    pub(super) kafka: KafkaSettings,
    pub(super) brokers: String,
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
    task_age_series: usize,
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
        task_age_series,
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
