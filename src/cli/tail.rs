//! `reactor tail`: a topic's records decoded as JSON lines, by the kind
//! its configured name or `--kind` gives.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};

use crate::changelog::Store;
use crate::codec::{self, MessageKind};

use super::tools::{settings, Conn, Target};

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
