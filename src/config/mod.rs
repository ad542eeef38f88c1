//! Configuration: the TOML file users write, and its validated form.
//!
//! Reading happens in two steps: serde reads the file's sections (unknown
//! keys are errors, and every value that is validated keeps its position as
//! a [`Spanned`]), then [`parse`] validates each section into the
//! definitions the engine runs on: it compiles triggers, zones, schedules and
//! CEL expressions and checks names, limits and references, so every error
//! names the file, line, subject (task, stage, job, process …) and field.
//!
//! One file per section: `task.rs` (pools and tasks, kept in the list of
//! `task_list.rs`), `stage.rs` (stages
//! and `[offers]`), `job.rs`, `process.rs` (with `launch.rs`: its `on` and
//! `schedule`), `kafka.rs`; `run.rs` holds the run policy keys every run
//! target shares, `names.rs` the rules for names and topics, `pieces.rs`
//! reads a file of many tasks in pieces (the parser's memory).

mod job;
mod kafka;
mod launch;
mod names;
mod pieces;
mod process;
mod run;
mod stage;
mod task;
mod task_list;

use std::fmt;
use std::path::Path;

use jiff::tz::TimeZone;
use serde::Deserialize;
use toml::Spanned;

use crate::cron::Cron;
use crate::duration::Duration;
use crate::stage::expr::Expr;

pub use job::{Job, Position, DEFAULT_JOB_TIMEOUT};
pub use kafka::{Formats, KafkaSettings, Topics};
pub use launch::{OnEvent, Schedule, ScheduleTargets, ON_VARIABLES, SELECT_VARIABLES};
pub use process::{Conflict, Process, Reuse, WHEN_VARIABLES};
pub use run::{Accept, RetryPolicy, RunPolicy};
pub use stage::{OffersSettings, PingPong, Stage, DEFAULT_MAX_PARALLELISM, DEFAULT_STAGE_TIMEOUT};
pub use task::{Pool, Task, DEFAULT_HOLD_MAX, DEFAULT_POOL, DEFAULT_TIMEOUT};
pub use task_list::{TaskList, TaskRef};

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

/// The configuration file as written: one field per top-level key or section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// Default IANA time zone for chunk truncation and schedules, e.g. "UTC" or "Europe/Moscow".
    time_zone: Option<Spanned<String>>,
    /// Treat lint warnings (a trigger that re-fires continuously) as errors.
    #[serde(default)]
    strict: bool,
    /// Task pools: concurrency limits shared by the tasks that name them.
    #[serde(default)]
    pool: Vec<Spanned<task::PoolFile>>,
    /// Reactive tasks.
    #[serde(default)]
    task: Vec<Spanned<task::TaskFile>>,
    /// Offer stages (`[[stage]]`), in file order.
    #[serde(default)]
    stage: Vec<stage::StageFile>,
    /// Settings shared by every offer (`[offers]`).
    offers: Option<stage::OffersFile>,
    /// Job types (`[[job]]`): the work process steps and submitted jobs run.
    #[serde(default)]
    job: Vec<job::JobFile>,
    /// Processes (`[[process]]`): chains of jobs over a business key.
    #[serde(default)]
    process: Vec<process::ProcessFile>,
    /// How to reach Kafka and which topics to use (`reactor run`).
    #[serde(default)]
    kafka: kafka::KafkaFile,
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
    /// Tasks in file order, shared with the router and every shard (a shard
    /// names its tasks by index here: no pointer or copy per task).
    pub tasks: std::sync::Arc<TaskList>,
    /// Every CTL parameter a task names (in a trigger or `produces`), each
    /// name kept once: tasks hold ids into it, and the router and the
    /// shards read the names here rather than keep copies.
    pub params: std::sync::Arc<crate::ctl::ParamNames>,
    /// Offer stages in file order.
    pub stages: Vec<Stage>,
    /// Settings shared by every offer (`[offers]`).
    pub offers: OffersSettings,
    /// Job types in file order; [`Process::steps`] index into it.
    pub jobs: Vec<Job>,
    /// Processes in file order.
    pub processes: Vec<Process>,
    /// Kafka settings.
    pub kafka: KafkaSettings,
}

impl Config {
    /// Every stage's run topic, each once, in the order of the stages.
    pub fn stage_topics(&self) -> Vec<&str> {
        distinct(self.stages.iter().map(|s| s.topic.as_str()))
    }

    /// Every job's run topic, each once, in the order of the jobs.
    pub fn job_topics(&self) -> Vec<&str> {
        distinct(self.jobs.iter().map(|j| j.topic.as_str()))
    }

    /// Every topic a process launches on (`on.topic`), each once, in the
    /// order of the processes: the event topics Reactor consumes.
    pub fn event_topics(&self) -> Vec<&str> {
        distinct(
            self.processes
                .iter()
                .filter_map(|p| p.on.as_ref().map(|on| on.topic.as_str())),
        )
    }
}

fn distinct<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for name in names {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// A configuration with the lint findings that did not stop it.
#[derive(Debug)]
pub struct Loaded {
    /// The configuration.
    pub config: Config,
    /// Lint warnings, to print on standard error.
    pub warnings: Vec<Warning>,
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
    parse_in_pieces(text, origin, pieces::PIECE_TASKS)
}

/// [`parse`], reading a file of many tasks in pieces of `per_piece` tasks
/// (see `pieces.rs`): each piece's tasks are validated and dropped before
/// the next piece is read. Whenever that fails — a piece that does not
/// read alone, any error — the whole file is read and validated as one
/// document instead, so a file means what it always meant and every error
/// is the one the whole file gives.
fn parse_in_pieces(text: &str, origin: &str, per_piece: usize) -> Result<Loaded, Error> {
    let source = Source {
        text,
        origin,
        base: 0,
    };
    if let Some(loaded) = load_in_pieces(&source, per_piece) {
        return Ok(loaded);
    }
    let file: File = toml::from_str(text).map_err(|e| Error::Syntax {
        origin: origin.to_string(),
        message: match e.span() {
            Some(span) => format!(
                "line {}: {}",
                source.line(span.start),
                e.message().trim_end()
            ),
            None => e.message().trim_end().to_string(),
        },
    })?;
    let tasks = file.task.len();
    validate(&source, file, std::iter::empty(), tasks)
}

/// The configuration read piece by piece; `None` when the file is one
/// piece, or when a piece does not read alone or holds an error.
fn load_in_pieces(source: &Source<'_>, per_piece: usize) -> Option<Loaded> {
    let text = source.text;
    let (cuts, tasks) = pieces::cuts(text, per_piece);
    let first: File = toml::from_str(text.get(..*cuts.first()?)?).ok()?;
    let unread = std::cell::Cell::new(false);
    let rest = cuts.iter().enumerate().map_while(|(i, &start)| {
        let end = cuts.get(i + 1).copied().unwrap_or(text.len());
        let tasks = text.get(start..end).and_then(pieces::tasks);
        unread.set(tasks.is_none());
        Some((start, tasks?))
    });
    let loaded = validate(source, first, rest, tasks).ok()?;
    (!unread.get()).then_some(loaded)
}

/// Validates `file` (read from `source`) and, after its own tasks, the
/// tasks of each further piece in `rest` (its offset in the text, its
/// tasks); `tasks`: how many there are in all, about.
fn validate(
    source: &Source<'_>,
    mut file: File,
    rest: impl Iterator<Item = (usize, Vec<Spanned<task::TaskFile>>)>,
    tasks: usize,
) -> Result<Loaded, Error> {
    let time_zone = match &file.time_zone {
        Some(name) => source.section("configuration", 0).zone(name)?,
        None => TimeZone::UTC,
    };
    let kafka = kafka::settings(source, file.kafka)?;
    let pools = task::pools(source, &file.pool)?;
    let mut warnings = Vec::new();
    let mut params = crate::ctl::ParamNames::new();
    let mut reader = task::Reader::new(task::Context {
        pools: &pools,
        time_zone: &time_zone,
        strict: file.strict,
        topics: &kafka.topics,
    });
    reader.read(
        source,
        &std::mem::take(&mut file.task),
        &mut params,
        &mut warnings,
    )?;
    // Room for all of them at once, by what the first ones took: grown by
    // doubling, the lists and indexes left blocks as large as themselves
    // freed behind them, which the allocator kept resident.
    reader.reserve(tasks, &mut params);
    for (offset, tasks) in rest {
        // The spans count from the start of the piece the task was read from.
        let piece = Source {
            base: offset,
            ..*source
        };
        reader.read(&piece, &tasks, &mut params, &mut warnings)?;
    }
    let tasks = reader.finish();
    let stages = stage::stages(source, &file.stage, &kafka.topics)?;
    let offers = match &file.offers {
        Some(offers) => stage::offers(source, offers)?,
        None => OffersSettings::default(),
    };
    let jobs = job::jobs(source, &file.job, &stages, &kafka.topics)?;
    let processes = process::processes(
        source,
        &file.process,
        process::Context {
            jobs: &jobs,
            stages: &stages,
            tasks: &tasks,
            time_zone: &time_zone,
            topics: &kafka.topics,
        },
    )?;
    Ok(Loaded {
        config: Config {
            time_zone,
            strict: file.strict,
            pools,
            tasks: std::sync::Arc::new(tasks),
            params: std::sync::Arc::new({
                params.shrink_to_fit();
                params
            }),
            stages,
            offers,
            jobs,
            processes,
            kafka,
        },
        warnings,
    })
}

/// The text being validated and where it came from: turns the byte offset
/// of a [`Spanned`] value into `file:line`.
#[derive(Clone, Copy)]
struct Source<'a> {
    text: &'a str,
    origin: &'a str,
    /// Where the piece whose spans are read starts in `text` ([`pieces`]).
    base: usize,
}

impl<'a> Source<'a> {
    /// 1-based line of byte `offset` of the piece.
    fn line(&self, offset: usize) -> usize {
        let before = self.text.get(..self.base + offset).unwrap_or(self.text);
        before.matches('\n').count() + 1
    }

    /// A section (or one entry of an array of sections) whose errors name
    /// `subject`; `at` is where the section starts, for errors about keys
    /// that were left out.
    fn section(&self, subject: impl Into<String>, at: usize) -> Section<'_> {
        Section {
            source: self,
            subject: subject.into(),
            at,
        }
    }
}

/// One section under validation: builds errors that name the file, the
/// line, the section's subject and the field, and checks the kinds of value
/// every section has (zones, durations, CEL, cron).
struct Section<'s> {
    source: &'s Source<'s>,
    subject: String,
    at: usize,
}

impl Section<'_> {
    /// An error about `field`, whose value starts at byte `at`.
    fn error(&self, at: usize, field: &str, message: impl Into<String>) -> Error {
        Error::Invalid {
            origin: self.source.origin.to_string(),
            line: self.source.line(at),
            subject: self.subject.clone(),
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// An error about the value `value` of `field`.
    fn invalid<T>(&self, value: &Spanned<T>, field: &str, message: impl Into<String>) -> Error {
        self.error(value.span().start, field, message)
    }

    /// An error about `field` that points at the section itself: for keys
    /// left out, and for task ids (which have always pointed at `[[task]]`).
    fn at_section(&self, field: &str, message: impl Into<String>) -> Error {
        self.error(self.at, field, message)
    }

    /// The zone named by `time_zone`.
    fn zone(&self, name: &Spanned<String>) -> Result<TimeZone, Error> {
        TimeZone::get(name.get_ref()).map_err(|e| {
            self.invalid(
                name,
                "time_zone",
                format!(
                    "unknown time zone `{}` ({e}); use an IANA name such as UTC or Europe/Moscow",
                    name.get_ref()
                ),
            )
        })
    }

    /// A duration that must be above zero.
    fn positive(&self, value: &Spanned<Duration>, field: &str) -> Result<Duration, Error> {
        if value.get_ref().is_zero() {
            return Err(self.invalid(value, field, "must be positive"));
        }
        Ok(*value.get_ref())
    }

    /// A count that must be at least one; `hint` tells what to write instead of zero.
    fn at_least_one(&self, value: &Spanned<u32>, field: &str, hint: &str) -> Result<u32, Error> {
        if *value.get_ref() == 0 {
            return Err(self.invalid(value, field, format!("must be at least 1{hint}")));
        }
        Ok(*value.get_ref())
    }

    /// A CEL expression over `variables`; the error quotes it and gives the
    /// column inside it.
    fn expr(
        &self,
        text: &Spanned<String>,
        variables: &'static [&'static str],
        field: &str,
    ) -> Result<Expr, Error> {
        let source = text.get_ref();
        Expr::compile_for(source, variables)
            .map_err(|e| self.invalid(text, field, format!("`{source}`: {e}")))
    }

    /// A five-field cron schedule.
    fn cron(&self, text: &Spanned<String>, field: &str) -> Result<Cron, Error> {
        let source = text.get_ref();
        Cron::parse(source).map_err(|e| self.invalid(text, field, format!("`{source}`: {e}")))
    }
}

#[cfg(test)]
fn error(text: &str) -> String {
    match parse(text, "t.toml") {
        Ok(loaded) => panic!("loaded: {loaded:?}"),
        Err(e) => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_key_names_line_and_key() {
        let e = error("[[task]]\nid = \"a\"\ntrigger = \"delta(a/b, 1h)\"\ntimeot = \"1h\"\n");
        assert!(e.contains("t.toml: line 4"), "{e}");
        assert!(e.contains("timeot"), "{e}");
    }

    #[test]
    fn unknown_top_level_zone() {
        let e = error("\ntime_zone = \"Mars/Base\"\n");
        assert!(
            e.starts_with("t.toml:2: configuration, field `time_zone`: unknown time zone"),
            "{e}"
        );
    }

    /// Reading in pieces gives the configuration, the warnings and the
    /// errors reading the whole file gives, wherever the pieces are cut.
    #[test]
    fn pieces_read_as_the_whole_file() {
        let task = |i: usize, trigger: &str| {
            format!("[[task]]\nid = \"t{i}\"\npool = \"p\"\ntrigger = \"{trigger}\"\n\n")
        };
        let mut text = String::from("time_zone = \"UTC\"\n[[pool]]\nname = \"p\"\n\n");
        for i in 0..7 {
            text.push_str(&task(i, &format!("delta(a.t{i}/x, 1min)")));
        }
        // A task's own sub-table, and a multi-line string holding a header line.
        text.push_str("[[task]]\nid = \"sub\"\ntrigger = \"delta(a.s/x, 1min)\"\n[task.params]\nk = \"v\"\n\n");
        text.push_str("[[task]]\nid = \"multi\"\ntrigger = \"delta(a.m/x, 1min)\"\n[task.params]\nnote = \"\"\"\n[[task]]\n\"\"\"\n\n");
        // A lint warning (a trigger that re-fires as soon as a run
        // succeeds), in the last piece: its line counts from the file's start.
        text.push_str(&task(9, "delay(a.w/x, 2h)"));
        let whole = |text: &str| parse_in_pieces(text, "c.toml", usize::MAX);
        let show = |l: Loaded| {
            let warnings: Vec<String> = l.warnings.iter().map(|w| w.to_string()).collect();
            format!("{:?} {warnings:?}", l.config)
        };
        // Cut inside the multi-line string (1 and 3 tasks per piece), the
        // pieces do not read and the whole file is read instead.
        let in_pieces = |text: &str, n| pieces::read_alone(text, n);
        assert_eq!(
            (1..5).map(|n| in_pieces(&text, n)).collect::<Vec<_>>(),
            [false, true, false, true]
        );
        // Where they do, the pieces are validated one after the other.
        let source = Source {
            text: &text,
            origin: "c.toml",
            base: 0,
        };
        assert!(load_in_pieces(&source, 2).is_some() && load_in_pieces(&source, 4).is_some());
        assert!(load_in_pieces(&source, 3).is_none());
        let expected = show(whole(&text).unwrap());
        let line = text
            .lines()
            .position(|l| l.contains("delay(a.w/x"))
            .unwrap()
            + 1;
        assert!(
            expected.contains(&format!("c.toml:{line}: task `t9`, field `trigger`")),
            "{expected}"
        );
        for per_piece in 1..5 {
            let got = show(parse_in_pieces(&text, "c.toml", per_piece).unwrap());
            assert_eq!(got, expected, "{per_piece} tasks per piece");
        }
        // An error in a later piece names the line the whole file gives.
        let broken_trigger = text.replace("delta(a.t5/x, 1min)", "delta(a.t5/x, 1min");
        let unknown_pool =
            text.replace("id = \"t6\"\npool = \"p\"", "id = \"t6\"\npool = \"nope\"");
        for bad in [broken_trigger, unknown_pool] {
            assert!(in_pieces(&bad, 2));
            let expected = whole(&bad).unwrap_err().to_string();
            assert!(expected.contains("c.toml:"), "{expected}");
            for per_piece in 1..5 {
                let got = parse_in_pieces(&bad, "c.toml", per_piece)
                    .unwrap_err()
                    .to_string();
                assert_eq!(got, expected, "{per_piece} tasks per piece");
            }
        }
        // Another section after the tasks: read whole, as it always was.
        let kafka_last = text.clone() + "[kafka]\nbrokers = \"b:9092\"\n";
        assert!(!in_pieces(&kafka_last, 2));
        assert!(parse_in_pieces(&kafka_last, "c.toml", 2).is_ok());
    }

    #[test]
    fn lines_count_from_one_and_stop_at_the_text() {
        let source = Source {
            text: "a\nb\n",
            origin: "t",
            base: 0,
        };
        assert_eq!(source.line(0), 1);
        assert_eq!(source.line(2), 2);
        assert_eq!(source.line(4), 3);
        assert_eq!(source.line(99), 3);
    }

    #[test]
    fn empty_file_is_an_empty_configuration() {
        let config = parse("", "t.toml").unwrap().config;
        assert_eq!(config.pools.len(), 1);
        assert!(config.tasks.is_empty() && config.stages.is_empty());
        assert!(config.jobs.is_empty() && config.processes.is_empty());
        assert_eq!(config.time_zone, TimeZone::UTC);
    }
}
