//! `reactor search` and `reactor recover`: operations over every shard with
//! no service discovery (DESIGN §8). The CLI writes one command per
//! partition of `topics.commands` with an operation id; each partition's
//! owner answers on `topics.events` (`search_result`, `recovery_counted`,
//! `recovery_progress`), and the CLI gathers one answer per partition,
//! saying which partitions did not answer in time.
//!
//! [`Exchange`] is that scatter-gather, usable on its own (the mock-cluster
//! tests drive it); the verbs print what it gathers.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::Args;
use jiff::Timestamp;

use super::tools::{settings, usage, Target};
use crate::codec::validate;
use crate::engine::Command;
use crate::kafka::Clients;
use crate::ops::{Criteria, Kind, Match, Mode, Recover, Search};

mod exchange;

pub use exchange::{Exchange, Gathered, Progress};

/// Which items: the criteria shared by `search` and `recover`.
#[derive(Debug, Clone, Args)]
pub struct CriteriaArgs {
    /// Only this kind: task, stage or process.
    #[arg(long)]
    kind: Option<Kind>,
    /// Glob over the name (task id, stage, process): `*` any run, `?` one character.
    #[arg(long, value_name = "GLOB")]
    name: Option<String>,
    /// Glob over the key (a task's pool, the offer id, the business key).
    #[arg(long, value_name = "GLOB")]
    key: Option<String>,
    /// A run phase (idle, queued, running, backoff, parked, dead, paused) or
    /// how an instance ended (succeeded, failed, cancelled, timed_out).
    #[arg(long, value_name = "STATE")]
    state: Option<String>,
    /// A substring of the last error.
    #[arg(long, value_name = "TEXT")]
    error: Option<String>,
    /// Entered its state (failed, finished) at or after T: RFC 3339, or a
    /// duration ago (`2h`).
    #[arg(long, value_name = "T")]
    since: Option<String>,
    /// ...and before T: RFC 3339, or a duration ago.
    #[arg(long, value_name = "T")]
    until: Option<String>,
    /// Glob over the job of the current or failed step (processes).
    #[arg(long, value_name = "STEP")]
    step: Option<String>,
}

/// Where the operation goes, and how long to wait.
#[derive(Debug, Clone, Args)]
pub struct Conn {
    #[command(flatten)]
    target: Target,
    /// How long to wait for the partitions' answers (for `recover`: for the
    /// next progress report).
    #[arg(long, default_value = "10s")]
    timeout: crate::duration::Duration,
}

/// `reactor search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    #[command(flatten)]
    criteria: CriteriaArgs,
    /// Most matches per partition (at most 200).
    #[arg(long, default_value_t = crate::ops::DEFAULT_SEARCH_LIMIT)]
    limit: u32,
    /// Print JSON lines (one per match, with its partition) instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    conn: Conn,
}

/// `reactor recover`.
#[derive(Debug, Args)]
pub struct RecoverArgs {
    #[command(flatten)]
    criteria: CriteriaArgs,
    /// From scratch: a new process instance (launch rules apply); a task or
    /// stage slot again with its failure count reset.
    #[arg(long)]
    from_start: bool,
    /// A process instance's chain again from the first step running this job.
    #[arg(long, value_name = "STEP")]
    from_step: Option<String>,
    /// The failed or waiting step, task or stage slot once more (attempts go on).
    #[arg(long)]
    retry: bool,
    /// Only count what would be restarted.
    #[arg(long)]
    dry_run: bool,
    /// Return once the commands are sent (progress goes on as
    /// `recovery_progress` events).
    #[arg(long)]
    detach: bool,
    /// Stop the recovery with this operation id instead.
    #[arg(long, value_name = "OP", conflicts_with_all = ["from_start", "from_step", "retry", "dry_run"])]
    cancel: Option<String>,
    #[command(flatten)]
    conn: Conn,
}

/// A new operation id: the time and a few bits of the process and clock.
pub fn new_op_id() -> String {
    let now = Timestamp::now();
    let salt = (now.subsec_nanosecond() as u32) ^ std::process::id().rotate_left(16);
    format!("{}-{:06x}", now.strftime("%Y%m%dT%H%M%S"), salt & 0xff_ffff)
}

impl CriteriaArgs {
    fn criteria(&self, now: Timestamp) -> Result<Criteria, String> {
        let time = |flag: &str, text: &Option<String>| -> Result<Option<Timestamp>, String> {
            let Some(text) = text else { return Ok(None) };
            if let Ok(t) = text.parse::<Timestamp>() {
                return Ok(Some(t));
            }
            match crate::duration::parse(text) {
                Ok(ago) => Ok(Some(now.checked_sub(ago.get()).unwrap_or(Timestamp::MIN))),
                Err(_) => Err(format!(
                    "--{flag} {text}: neither an RFC 3339 time nor a duration (`2h`)"
                )),
            }
        };
        Ok(Criteria {
            kind: self.kind,
            name: self.name.clone(),
            key: self.key.clone(),
            state: self.state.clone(),
            error: self.error.clone(),
            since: time("since", &self.since)?,
            until: time("until", &self.until)?,
            step: self.step.clone(),
        })
    }
}

/// Brokers, topics and clients from `--config` / `--brokers`.
fn connect(conn: &Conn) -> Result<(Clients, crate::config::Topics), ExitCode> {
    let conn = settings(&conn.target)?;
    Ok((conn.clients(), conn.kafka.topics))
}

/// A one-line progress bar on stderr, when stderr is a terminal.
struct Bar {
    on: bool,
}

impl Bar {
    fn new() -> Bar {
        Bar {
            on: std::io::stderr().is_terminal(),
        }
    }

    fn show(&self, fraction: f64, text: &str) {
        if !self.on {
            return;
        }
        let width = 30usize;
        let filled = ((fraction.clamp(0.0, 1.0)) * width as f64).round() as usize;
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r[{}{}] {text}\x1b[K",
            "#".repeat(filled),
            "-".repeat(width - filled)
        );
        let _ = err.flush();
    }

    fn done(&self) {
        if self.on {
            eprintln!();
        }
    }
}

fn missing_note(missing: &[u32], timeout: crate::duration::Duration) -> Option<String> {
    (!missing.is_empty()).then(|| {
        let list: Vec<String> = missing.iter().map(u32::to_string).collect();
        format!(
            "no answer from partition{} {} within {timeout}: their owner is slow, restoring, or gone",
            if missing.len() == 1 { "" } else { "s" },
            list.join(", ")
        )
    })
}

/// `reactor search`.
pub fn search(args: SearchArgs) -> ExitCode {
    let now = Timestamp::now();
    let criteria = match args.criteria.criteria(now) {
        Ok(c) => c,
        Err(e) => return usage(&e),
    };
    let search = Search {
        id: new_op_id(),
        criteria,
        limit: Some(args.limit),
    };
    if let Err(e) = validate::command(Command::Search(search.clone())) {
        return usage(&e.to_string());
    }
    let (clients, topics) = match connect(&args.conn) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let exchange = match Exchange::new(&clients, &topics.commands, &topics.events) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let bar = Bar::new();
    let gathered = match exchange.search(search, args.conn.timeout.to_std(), &mut |n, of| {
        bar.show(
            f64::from(n as u32) / f64::from(of),
            &format!("{n}/{of} partitions answered"),
        )
    }) {
        Ok(g) => g,
        Err(e) => {
            bar.done();
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    bar.done();
    let total: u64 = gathered.answers.values().map(|(t, _)| t).sum();
    let rows: Vec<(u32, &Match)> = gathered
        .answers
        .iter()
        .flat_map(|(p, (_, ms))| ms.iter().map(move |m| (*p, m)))
        .collect();
    let mut out = std::io::stdout().lock();
    if args.json {
        for (p, m) in &rows {
            let mut line = serde_json::to_value(m).unwrap_or_default();
            if let Some(o) = line.as_object_mut() {
                o.insert("partition".into(), (*p).into());
            }
            let _ = writeln!(out, "{line}");
        }
    } else {
        let _ = write!(out, "{}", table(&rows));
        let _ = writeln!(
            out,
            "{total} found on {} of {} partitions ({} shown)",
            gathered.answers.len(),
            exchange.partitions(),
            rows.len()
        );
    }
    match missing_note(&gathered.missing, args.conn.timeout) {
        Some(note) => {
            eprintln!("warning: {note}");
            ExitCode::FAILURE
        }
        None => ExitCode::SUCCESS,
    }
}

/// The matches as an aligned table.
fn table(rows: &[(u32, &Match)]) -> String {
    let header = [
        "PART", "KIND", "NAME", "KEY", "STATE", "STEP", "AT", "RUN", "ERROR",
    ];
    let cells: Vec<[String; 9]> = rows
        .iter()
        .map(|(p, m)| {
            [
                p.to_string(),
                m.kind.to_string(),
                m.name.clone(),
                m.key.clone(),
                m.state.clone(),
                m.step.clone().unwrap_or_default(),
                m.at.map(|t| t.to_string()).unwrap_or_default(),
                m.run_id.clone().unwrap_or_default(),
                m.error.clone().unwrap_or_default().replace('\n', " "),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut text = String::new();
    let mut line = |row: &[String]| {
        let mut l = String::new();
        for (k, (c, w)) in row.iter().zip(widths).enumerate() {
            if k + 1 == row.len() {
                l.push_str(c);
            } else {
                l.push_str(&format!("{c:<w$}  "));
            }
        }
        text.push_str(l.trim_end());
        text.push('\n');
    };
    line(&header.map(str::to_string));
    for row in &cells {
        line(row);
    }
    text
}

/// `reactor recover`.
pub fn recover(args: RecoverArgs) -> ExitCode {
    let (clients, topics) = match connect(&args.conn) {
        Ok(x) => x,
        Err(code) => return code,
    };
    if let Some(op) = &args.cancel {
        return cancel(&clients, &topics, op);
    }
    let mode = match (args.from_start, args.from_step.clone(), args.retry) {
        (true, None, false) => Mode::FromStart,
        (false, Some(step), false) => Mode::FromStep(step),
        (false, None, true) => Mode::Retry,
        _ => return usage("give exactly one of --from-start, --from-step STEP, --retry"),
    };
    let criteria = match args.criteria.criteria(Timestamp::now()) {
        Ok(c) => c,
        Err(e) => return usage(&e),
    };
    let recover = Recover {
        id: new_op_id(),
        criteria,
        mode,
        dry_run: args.dry_run,
    };
    if let Err(e) = validate::command(Command::Recover(recover.clone())) {
        return usage(&e.to_string());
    }
    let exchange = match Exchange::new(&clients, &topics.commands, &topics.events) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let bar = Bar::new();
    let timeout = args.conn.timeout;
    if args.dry_run {
        let counted = match exchange.count(recover, timeout.to_std(), &mut |n, of| {
            bar.show(
                f64::from(n as u32) / f64::from(of),
                &format!("{n}/{of} partitions counted"),
            )
        }) {
            Ok(g) => g,
            Err(e) => {
                bar.done();
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        bar.done();
        let total: u64 = counted.answers.values().sum();
        println!(
            "would restart {total} on {} of {} partitions",
            counted.answers.len(),
            exchange.partitions()
        );
        return finish(&counted.missing, timeout);
    }
    let op = recover.id.clone();
    if let Err(e) = exchange.send(&Command::Recover(recover), &op) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    println!(
        "recovery {op} sent to {} partitions (source op:{op}); cancel with `reactor recover --cancel {op}`",
        exchange.partitions()
    );
    if args.detach {
        return ExitCode::SUCCESS;
    }
    let partitions = exchange.partitions();
    let followed = exchange.follow(&op, timeout.to_std(), &mut |latest| {
        let (done, total) = latest
            .values()
            .fold((0, 0), |(d, t), p| (d + p.done, t + p.total));
        let finished = latest.values().filter(|p| p.finished).count();
        let fraction = if total == 0 {
            finished as f64 / f64::from(partitions)
        } else {
            done as f64 / total as f64
        };
        bar.show(
            fraction,
            &format!("{done}/{total} restarted, {finished}/{partitions} partitions done"),
        );
    });
    bar.done();
    let (done, total) = followed
        .answers
        .values()
        .fold((0, 0), |(d, t), p| (d + p.done, t + p.total));
    let cancelled = followed.answers.values().any(|p| p.cancelled);
    println!(
        "recovery {op}: {done} of {total} restarted{}",
        if cancelled { " (cancelled)" } else { "" }
    );
    finish(&followed.missing, timeout)
}

fn finish(missing: &[u32], timeout: crate::duration::Duration) -> ExitCode {
    match missing_note(missing, timeout) {
        Some(note) => {
            eprintln!("warning: {note}");
            ExitCode::FAILURE
        }
        None => ExitCode::SUCCESS,
    }
}

fn cancel(clients: &Clients, topics: &crate::config::Topics, op: &str) -> ExitCode {
    let exchange = match Exchange::new(clients, &topics.commands, &topics.events) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match exchange.send(&Command::CancelOperation { id: op.to_string() }, op) {
        Ok(()) => {
            println!(
                "cancel of {op} sent to {} partitions; each still running it reports a last recovery_progress (cancelled)",
                exchange.partitions()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_instants_or_durations_ago() {
        let now: Timestamp = "2024-06-01T12:00:00Z".parse().unwrap();
        let args = CriteriaArgs {
            kind: Some(Kind::Process),
            name: None,
            key: None,
            state: None,
            error: None,
            since: Some("2h".into()),
            until: Some("2024-06-01T11:30:00Z".into()),
            step: None,
        };
        let c = args.criteria(now).unwrap();
        assert_eq!(c.since, Some("2024-06-01T10:00:00Z".parse().unwrap()));
        assert_eq!(c.until, Some("2024-06-01T11:30:00Z".parse().unwrap()));
        let bad = CriteriaArgs {
            since: Some("yesterday".into()),
            ..args
        };
        assert!(bad.criteria(now).unwrap_err().contains("--since yesterday"));
    }

    #[test]
    fn a_table_aligns_its_columns() {
        let m = Match {
            kind: Kind::Process,
            name: "payout".into(),
            key: "u1".into(),
            state: "failed".into(),
            error: Some("node\ndown".into()),
            at: Some("2024-06-01T00:00:00Z".parse().unwrap()),
            step: Some("send_tx".into()),
            instance: Some("payout/u1#1".into()),
            run_id: Some("payout/u1#1.1#1".into()),
            attempt: Some(1),
        };
        let text = table(&[(3, &m)]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("PART  KIND     NAME    KEY  STATE   STEP"));
        assert!(lines[1].starts_with("3     process  payout  u1   failed  send_tx"));
        assert!(lines[1].ends_with("node down"));
        assert_eq!(lines[0].find("STEP"), lines[1].find("send_tx"));
    }

    #[test]
    fn operation_ids_differ() {
        let a = new_op_id();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_ne!(a, new_op_id());
        assert!(validate::name("id", a).is_ok());
    }
}
