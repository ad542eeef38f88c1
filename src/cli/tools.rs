//! `reactor run`, and the small Kafka tools: `ctl set`, `tail`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use jiff::Timestamp;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::{Message, Offset, TopicPartitionList};

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
#[derive(Debug, Args)]
pub struct Target {
    /// Configuration file for brokers and topic names (optional).
    #[arg(short, long)]
    config: Option<PathBuf>,
    /// Bootstrap servers (overrides the configuration).
    #[arg(long, env = "REACTOR_BROKERS")]
    brokers: Option<String>,
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
    /// task_record); default: guessed from the configured topic names.
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

fn settings(target: &Target) -> Result<(KafkaSettings, String), ExitCode> {
    let kafka = match &target.config {
        Some(path) => super::load(path)?.config.kafka,
        None => KafkaSettings::default(),
    };
    match target.brokers.clone().or_else(|| kafka.brokers.clone()) {
        Some(brokers) => Ok((kafka, brokers)),
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
    let (kafka, brokers) = match settings(&target) {
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
    let format = match format {
        FormatArg::Protobuf => Format::Protobuf,
        FormatArg::Json => Format::Json,
    };
    let payload = codec::encode_ctl_change(&record, Some(Timestamp::now()), &source, format);
    let clients = Clients {
        brokers,
        librdkafka: kafka.librdkafka.clone(),
    };
    let key = format!("{entity}/{param}");
    let result = clients
        .producer(None)
        .create::<ThreadedProducer<_>>()
        .and_then(|p| {
            p.send(
                BaseRecord::to(&kafka.topics.ctl)
                    .key(&key)
                    .payload(&payload),
            )
            .map_err(|(e, _)| e)?;
            p.flush(Duration::from_secs(30))
        });
    match result {
        Ok(()) => {
            println!("{key} = {value} → {}", kafka.topics.ctl);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: producing to {}: {e}", kafka.topics.ctl);
            ExitCode::FAILURE
        }
    }
}

fn guess_kind(kafka: &KafkaSettings, topic: &str) -> Option<MessageKind> {
    let t = &kafka.topics;
    Some(match topic {
        x if x == t.ctl => MessageKind::CtlChange,
        x if x == t.runs => MessageKind::RunCommand,
        x if x == t.results => MessageKind::RunResult,
        x if x == t.events => MessageKind::Event,
        x if x == t.commands => MessageKind::Command,
        x if x == t.changelog => MessageKind::TaskRecord,
        _ => return None,
    })
}

/// `reactor tail`.
pub fn tail(args: TailArgs) -> ExitCode {
    let (kafka, brokers) = match settings(&args.target) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let kind = match args.kind.as_deref() {
        Some(name) => MessageKind::from_name(name),
        None => guess_kind(&kafka, &args.topic),
    };
    let Some(kind) = kind else {
        eprintln!(
            "error: cannot tell the message type of {}; pass --kind (one of {})",
            args.topic,
            MessageKind::ALL.map(MessageKind::as_str).join(", ")
        );
        return ExitCode::from(2);
    };
    let clients = Clients {
        brokers,
        librdkafka: kafka.librdkafka.clone(),
    };
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
        let value = match m.payload() {
            None => serde_json::Value::Null,
            Some(bytes) => match codec::to_json(kind, bytes) {
                Ok(v) => v,
                Err(e) => serde_json::json!({ "undecodable": e.to_string() }),
            },
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
