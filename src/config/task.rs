//! `[[pool]]` and `[[task]]`: reactive tasks over CTL parameters (DESIGN §5)
//! and the pools whose queues and limits they share.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use jiff::tz::TimeZone;
use serde::Deserialize;
use toml::Spanned;

use super::run::{self, RetryFile, RunKeys};
use super::{names, Accept, Conflict, Error, RunPolicy, Source, TaskList, Topics, Warning};
use crate::cron::Cron;
use crate::ctl::{ParamId, ParamName, ParamNames};
use crate::duration::Duration;
use crate::trigger::{self, Trigger};

/// Default per-attempt timeout of a task.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);
/// Default bound of a queue hold.
pub const DEFAULT_HOLD_MAX: Duration = Duration::from_secs(600);
/// Name of the pool a task without `pool` joins.
pub const DEFAULT_POOL: &str = "default";

/// A `[[pool]]` section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PoolFile {
    /// Pool name, referenced by `task.pool`.
    name: Spanned<String>,
    /// Most runs of this pool's tasks at once; unlimited when absent.
    max_running: Option<Spanned<u32>>,
    /// Longest time a slot stays held for a higher-priority task waiting on
    /// data that a running task produces.
    hold_max: Option<Duration>,
}

/// A `[[task]]` section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TaskFile {
    /// Unique task id (errors about it point at the section).
    id: String,
    /// Pool whose queue and limit the task uses; "default" when absent.
    pool: Option<Spanned<String>>,
    /// Higher runs first within the pool.
    #[serde(default)]
    priority: i64,
    /// The trigger, in the trigger DSL.
    trigger: Spanned<String>,
    /// Zone for chunk truncation and `schedule`, overriding the global `time_zone`.
    time_zone: Option<Spanned<String>>,
    /// No result by then: re-dispatch with a new pass (default 1h).
    timeout: Option<Spanned<Duration>>,
    /// On timeout, re-dispatch (true, default) or count the run as failed.
    restart_after_timeout: Option<bool>,
    /// Which result wins when several attempts answer: "last" (only the
    /// current pass, default) or "first" (any attempt of the current run).
    accept: Option<Accept>,
    /// Retry policy after a failure.
    retry: Option<RetryFile>,
    /// Parameters this task's runs bring forward (for the queue hold).
    #[serde(default)]
    produces: Vec<Spanned<String>>,
    /// Staleness SLA: report `sla_missed` when no run succeeded for this long.
    expect_every: Option<Spanned<Duration>>,
    /// Parameters passed to every run of the task.
    #[serde(default)]
    params: BTreeMap<String, String>,
    /// Topic the run commands go to (default: the runtime's run topic).
    topic: Option<Spanned<String>>,
    /// A five-field cron schedule that launches the task ("run now"), in its zone.
    schedule: Option<Spanned<String>>,
    /// What a `launch` does while the task is queued or running (default "reject").
    conflict: Option<Conflict>,
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
    /// Index into [`Config::pools`](super::Config::pools), read through
    /// [`Task::pool`] (4 bytes: a configuration may hold millions of tasks).
    pub pool: u32,
    /// Parsed trigger over ids into [`Config::params`](super::Config::params)
    /// (the text as written is not kept, a million tasks' worth of it: with
    /// the names put back, its `Display` writes DSL text that parses back to
    /// it).
    pub trigger: Trigger<ParamId>,
    /// Index of its zone (for chunk truncation and for `schedule`) among
    /// its list's zones ([`TaskList::zone_index`]), read through
    /// [`TaskRef::time_zone`] (2 bytes where a zone takes 8: most tasks
    /// share the global one).
    ///
    /// [`TaskRef::time_zone`]: super::TaskRef::time_zone
    pub zone: u16,
    /// Timeout, result acceptance and retries of its runs (shared by the
    /// tasks whose policies are equal: most tasks take the defaults).
    pub run: Arc<RunPolicy>,
    /// What a `launch` of the task does while it is queued or running.
    pub conflict: Conflict,
    /// What few tasks set (see [`TaskExtra`]), read through
    /// [`Task::extra`]; `None` while none of it is set.
    pub extra: Option<Box<TaskExtra>>,
}

/// The part of a task's definition few tasks set, kept apart: a
/// configuration may hold millions of tasks, most of which set none of it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskExtra {
    /// Higher runs first (read through [`Task::priority`]).
    pub priority: i64,
    /// Parameters this task produces (ids into
    /// [`Config::params`](super::Config::params)).
    pub produces: Vec<ParamId>,
    /// Staleness SLA.
    pub expect_every: Option<Duration>,
    /// Run parameters.
    pub params: BTreeMap<String, String>,
    /// Run topic override.
    pub topic: Option<String>,
    /// A cron schedule that launches the task ("run now", under `conflict`),
    /// read in [`TaskRef::time_zone`](super::TaskRef::time_zone).
    pub schedule: Option<Cron>,
}

/// What a task without a [`TaskExtra`] part reads.
static NO_EXTRA: TaskExtra = TaskExtra {
    priority: 0,
    produces: Vec::new(),
    expect_every: None,
    params: BTreeMap::new(),
    topic: None,
    schedule: None,
};

impl Task {
    /// What few tasks set (all unset when the task sets none of it).
    pub fn extra(&self) -> &TaskExtra {
        self.extra.as_deref().unwrap_or(&NO_EXTRA)
    }

    /// Index into [`Config::pools`](super::Config::pools).
    pub fn pool(&self) -> usize {
        self.pool as usize
    }

    /// Higher runs first.
    pub fn priority(&self) -> i64 {
        self.extra().priority
    }
}

/// Validates the `[[pool]]` sections; the "default" pool comes first,
/// declared or not.
pub(super) fn pools(source: &Source<'_>, files: &[Spanned<PoolFile>]) -> Result<Vec<Pool>, Error> {
    let mut pools = vec![Pool {
        name: DEFAULT_POOL.to_string(),
        max_running: None,
        hold_max: DEFAULT_HOLD_MAX,
    }];
    for spanned in files {
        let p = spanned.get_ref();
        let name = p.name.get_ref();
        if name.is_empty() {
            return Err(source.section("pool", spanned.span().start).invalid(
                &p.name,
                "name",
                "must not be empty",
            ));
        }
        let section = source.section(format!("pool `{name}`"), spanned.span().start);
        let max_running = match &p.max_running {
            Some(n) => {
                Some(section.at_least_one(n, "max_running", " (leave it out for no limit)")?)
            }
            None => None,
        };
        let pool = Pool {
            name: name.clone(),
            max_running,
            hold_max: p.hold_max.unwrap_or(DEFAULT_HOLD_MAX),
        };
        if name == DEFAULT_POOL {
            pools[0] = pool;
        } else if pools.iter().any(|q| q.name == *name) {
            return Err(section.invalid(&p.name, "name", "declared twice"));
        } else {
            pools.push(pool);
        }
    }
    Ok(pools)
}

/// What tasks are validated against.
pub(super) struct Context<'a> {
    /// The validated pools.
    pub pools: &'a [Pool],
    /// The global zone.
    pub time_zone: &'a TimeZone,
    /// Lint findings are errors.
    pub strict: bool,
    /// Reactor's topics, which a task's run topic must not be.
    pub topics: &'a Topics,
}

/// Validates the `[[task]]` sections, a piece of the file at a time (see
/// `pieces.rs`), into the configured task list.
pub(super) struct Reader<'a> {
    cx: Context<'a>,
    /// Equal run policies, shared.
    policies: HashMap<RunPolicy, Arc<RunPolicy>>,
    tasks: TaskList,
    /// The global zone's index among the list's zones.
    global_zone: u16,
}

impl<'a> Reader<'a> {
    pub(super) fn new(cx: Context<'a>) -> Reader<'a> {
        let mut tasks = TaskList::default();
        // The global zone is the list's first: index 0.
        let global_zone = tasks.zone_index(cx.time_zone).unwrap_or(0);
        Reader {
            cx,
            policies: HashMap::new(),
            tasks,
            global_zone,
        }
    }

    /// Reserves room for `total` tasks in all and their parameter names,
    /// extrapolating from the tasks read so far.
    pub(super) fn reserve(&mut self, total: usize, params: &mut ParamNames) {
        let read = self.tasks.len();
        if read == 0 || total <= read {
            return;
        }
        let more = total - read;
        self.tasks.reserve(more);
        let names = params.len() * more / read;
        params.reserve(names, params.text_len() * more / read);
    }

    /// The validated tasks.
    pub(super) fn finish(mut self) -> TaskList {
        self.tasks.finish();
        self.tasks
    }

    /// Validates the `[[task]]` sections of one piece read from `source`
    /// (their spans count from its `base`); lint findings go to `warnings`
    /// (or are errors in strict mode).
    pub(super) fn read(
        &mut self,
        source: &Source<'_>,
        files: &[Spanned<TaskFile>],
        params: &mut ParamNames,
        warnings: &mut Vec<Warning>,
    ) -> Result<(), Error> {
        for spanned in files {
            self.read_one(source, spanned, params, warnings)?;
        }
        Ok(())
    }

    fn read_one(
        &mut self,
        source: &Source<'_>,
        spanned: &Spanned<TaskFile>,
        params: &mut ParamNames,
        warnings: &mut Vec<Warning>,
    ) -> Result<(), Error> {
        let cx = &self.cx;
        let tasks = &mut self.tasks;
        let at = spanned.span().start;
        let t = spanned.get_ref();
        if t.id.is_empty() {
            return Err(source
                .section("task", at)
                .at_section("id", "must not be empty"));
        }
        let section = source.section(format!("task `{}`", t.id), at);
        if !names::is_id(&t.id) {
            return Err(section.at_section("id", "task ids use letters, digits and `_ . : -`"));
        }
        if tasks.find(&t.id).is_some() {
            return Err(section.at_section("id", "declared twice"));
        }
        let trigger = trigger::parse(t.trigger.get_ref()).map_err(|e| {
            section.invalid(
                &t.trigger,
                "trigger",
                format!("`{}`: {e}", t.trigger.get_ref()),
            )
        })?;
        if let Some(lint) = trigger.lint() {
            if cx.strict {
                return Err(section.invalid(
                    &t.trigger,
                    "trigger",
                    format!("{lint} (strict mode)"),
                ));
            }
            warnings.push(Warning {
                location: format!(
                    "{}:{}: {}, field `trigger`",
                    source.origin,
                    source.line(t.trigger.span().start),
                    section.subject
                ),
                message: lint.to_string(),
            });
        }
        let pool = match &t.pool {
            None => 0,
            Some(name) => cx
                .pools
                .iter()
                .position(|p| p.name == *name.get_ref())
                .and_then(|p| u32::try_from(p).ok())
                .ok_or_else(|| {
                    section.invalid(
                        name,
                        "pool",
                        format!(
                            "no pool named `{}`; declare it in a [[pool]] section",
                            name.get_ref()
                        ),
                    )
                })?,
        };
        let zone = match &t.time_zone {
            Some(name) => {
                let zone = section.zone(name)?;
                tasks.zone_index(&zone).ok_or_else(|| {
                    section.invalid(
                        name,
                        "time_zone",
                        format!(
                            "more than {} distinct task time zones",
                            super::task_list::MAX_ZONES
                        ),
                    )
                })?
            }
            None => self.global_zone,
        };
        let (run, _) = run::policy(
            &section,
            RunKeys {
                timeout: t.timeout.as_ref(),
                restart_after_timeout: t.restart_after_timeout,
                accept: t.accept,
                retry: t.retry.as_ref(),
            },
            run::Defaults {
                timeout: DEFAULT_TIMEOUT,
                accept: Accept::Last,
                requeue: None,
            },
        )?;
        let expect_every = match &t.expect_every {
            Some(every) => Some(section.positive(every, "expect_every")?),
            None => None,
        };
        let mut produces = Vec::with_capacity(t.produces.len());
        for p in &t.produces {
            let name = p
                .get_ref()
                .parse::<ParamName>()
                .map_err(|e| section.invalid(p, "produces", e.to_string()))?;
            produces.push(params.intern(name.parts()));
        }
        let topic = match &t.topic {
            Some(topic) => Some(names::written_topic(&section, topic, "task", cx.topics)?),
            None => None,
        };
        let schedule = match &t.schedule {
            Some(text) => Some(section.cron(text, "schedule")?),
            None => None,
        };
        let run = Arc::clone(
            self.policies
                .entry(run)
                .or_insert_with_key(|run| Arc::new(run.clone())),
        );
        let extra = TaskExtra {
            priority: t.priority,
            produces,
            expect_every,
            params: t.params.clone(),
            topic,
            schedule,
        };
        tasks.push(
            &t.id,
            Task {
                pool,
                trigger: trigger.map(&mut |name: &ParamName| params.intern(name.parts())),
                zone,
                run,
                conflict: t.conflict.unwrap_or_default(),
                extra: (extra != NO_EXTRA).then(|| Box::new(extra)),
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{error, parse, RetryPolicy};
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
        let task = loaded.config.tasks.get(0).unwrap();
        assert_eq!(task.id(), "orders_daily");
        assert_eq!(loaded.config.pools[task.pool()].name, "reports");
        assert_eq!(loaded.config.pools[task.pool()].max_running, Some(2));
        assert_eq!(task.priority(), 10);
        assert_eq!(task.run.timeout, Duration::from_secs(3600));
        assert_eq!(task.run.retry, RetryPolicy::default());
        assert_eq!(
            task.time_zone().iana_name(),
            Some("Europe/Moscow"),
            "bundled tz database"
        );
        assert_eq!(task.extra().schedule, None);
        assert_eq!(task.conflict, Conflict::Reject);
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

    fn task_error(lines: &str) -> String {
        error(&format!(
            "[[task]]\nid = \"a\"\ntrigger = \"delta(a/b, 1h)\"\n{lines}"
        ))
    }

    #[test]
    fn task_field_errors_name_their_line() {
        let cases = [
            ("timeout = \"0s\"\n", "timeout", "must be positive"),
            (
                "expect_every = \"0s\"\n",
                "expect_every",
                "must be positive",
            ),
            ("produces = [\"nope\"]\n", "produces", "nope"),
            (
                "retry = { attempts = 0 }\n",
                "retry.attempts",
                "must be at least 1",
            ),
            ("topic = \"a b\"\n", "topic", "is not a Kafka topic name"),
            (
                "topic = \"reactor.results\"\n",
                "topic",
                "is Reactor's own topic (kafka.topics.results)",
            ),
            ("schedule = \"0 0 3 * * *\"\n", "schedule", "five fields"),
            ("schedule = \"0 25 * * *\"\n", "schedule", "`0 25 * * *`: "),
            (
                "retry = { requeue = \"back\" }\n",
                "retry.requeue",
                "only jobs have a queue",
            ),
        ];
        for (line, field, message) in cases {
            let e = task_error(&format!("pool = \"default\"\n{line}"));
            assert!(
                e.starts_with(&format!("t.toml:5: task `a`, field `{field}`: ")),
                "{line}: {e}"
            );
            assert!(e.contains(message), "{line}: {e}");
        }
        let e = task_error("conflict = \"later\"\n");
        assert!(e.contains("line 4") && e.contains("later"), "{e}");
    }

    #[test]
    fn schedule_and_conflict() {
        let text = "time_zone = \"Europe/Moscow\"\n[[task]]\nid = \"a\"\n\
                    trigger = \"delta(a/b, 1h)\"\nschedule = \"0 3 * * *\"\n\
                    conflict = \"queue\"\ntopic = \"reactor.runs\"\n";
        let config = parse(text, "t.toml").unwrap().config;
        let task = config.tasks.get(0).unwrap();
        assert_eq!(
            task.extra().schedule.as_ref().map(Cron::text),
            Some("0 3 * * *")
        );
        assert_eq!(task.conflict, Conflict::Queue);
        assert_eq!(task.time_zone().iana_name(), Some("Europe/Moscow"));
        assert_eq!(task.extra().topic.as_deref(), Some("reactor.runs"));
        let next = task
            .extra()
            .schedule
            .as_ref()
            .unwrap()
            .next_after("2024-06-01T12:00:00Z".parse().unwrap(), task.time_zone());
        assert_eq!(next, Some("2024-06-02T00:00:00Z".parse().unwrap()));
    }

    #[test]
    fn pools() {
        let config = parse(
            "[[pool]]\nname = \"default\"\nmax_running = 4\n[[pool]]\nname = \"etl\"\n\
             hold_max = \"30m\"\n",
            "t.toml",
        )
        .unwrap()
        .config;
        assert_eq!(config.pools[0].name, DEFAULT_POOL);
        assert_eq!(config.pools[0].max_running, Some(4));
        assert_eq!(config.pools[1].hold_max, Duration::from_secs(1800));
        let e = error("[[pool]]\nname = \"\"\n");
        assert!(
            e.starts_with("t.toml:2: pool, field `name`: must not be empty"),
            "{e}"
        );
        let e = error("[[pool]]\nname = \"p\"\n\nmax_running = 0\n");
        assert!(
            e.starts_with("t.toml:4: pool `p`, field `max_running`: must be at least 1"),
            "{e}"
        );
        let e = error("[[pool]]\nname = \"p\"\n[[pool]]\nname = \"p\"\n");
        assert!(
            e.starts_with("t.toml:4: pool `p`, field `name`: declared twice"),
            "{e}"
        );
    }
}
