//! `[[process]]`: a chain of job steps over a business key (DESIGN §7.2),
//! with its launch rules (`reuse`, `conflict`, `when`) and launch sources
//! (`on` an event, a cron `schedule`).

pub use crate::process::{Conflict, Reuse};
use jiff::tz::TimeZone;
use serde::Deserialize;
use toml::Spanned;

use super::launch::{self, OnEvent, OnFile, Schedule, ScheduleFile};
use super::{names, Error, Job, Section, Source, Stage, Topics};
use crate::duration::Duration;
use crate::stage::expr::Expr;

/// What a process `when` sees: the launch's `key` (string) and `params`
/// (map), the key's `last` instance (status, finished_at, context; `null`
/// if none), the key's `context`, and `now`.
pub const WHEN_VARIABLES: &[&str] = &["key", "params", "last", "context", "now"];

/// A `[[process]]` section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProcessFile {
    /// Unique process name: ASCII letters, digits and `_ . : -`.
    name: Spanned<String>,
    /// Job names, run one at a time, in order (at least one).
    steps: Spanned<Vec<Spanned<String>>>,
    /// When a finished instance exists: "allow" (default), "failed_only", "until_reset".
    reuse: Option<Reuse>,
    /// When an instance is active: "reject" (default), "queue", "replace".
    conflict: Option<Conflict>,
    /// Validation before launch: CEL over `key`, `params`, `last`, `context`, `now`.
    when: Option<Spanned<String>>,
    /// The whole instance must finish within this (optional).
    timeout: Option<Spanned<Duration>>,
    /// No step progress for this long: `process_idle`, the step is re-dispatched (optional).
    idle_timeout: Option<Spanned<Duration>>,
    /// Higher runs first in the job queues (default 0).
    #[serde(default)]
    priority: i64,
    /// Zone of `schedule`, overriding the global `time_zone`.
    time_zone: Option<Spanned<String>>,
    /// Launch on every matching record of a topic (`on = { topic, key, params, when, reset }`).
    on: Option<OnFile>,
    /// Launch on a cron schedule, for a key list or the offers a CEL selects.
    schedule: Option<Spanned<ScheduleFile>>,
}

/// A validated `[[process]]`.
#[derive(Debug, Clone)]
pub struct Process {
    /// Unique name: letters, digits, `_ . : -`; instances are `NAME/KEY#N`.
    pub name: String,
    /// Indices into [`Config::jobs`](super::Config::jobs), in order; at least one.
    pub steps: Vec<usize>,
    /// Whether a new instance may start when a finished one exists.
    pub reuse: Reuse,
    /// What a launch does while an instance is active.
    pub conflict: Conflict,
    /// Validation before launch: CEL over [`WHEN_VARIABLES`] giving a bool.
    pub when: Option<Expr>,
    /// The whole instance must finish within this (`process_timed_out`).
    pub timeout: Option<Duration>,
    /// No step progress for this long: `process_idle`, the step is re-dispatched.
    pub idle_timeout: Option<Duration>,
    /// Higher runs first in the job queues.
    pub priority: i64,
    /// The process's `time_zone`, or the global one: the zone of `schedule`.
    pub time_zone: TimeZone,
    /// Launch on records of a topic.
    pub on: Option<OnEvent>,
    /// Launch on a cron schedule.
    pub schedule: Option<Schedule>,
}

/// What processes are validated against.
pub(super) struct Context<'a> {
    /// The validated jobs, which `steps` name.
    pub jobs: &'a [Job],
    /// The validated stages, whose names a process may not take.
    pub stages: &'a [Stage],
    /// The validated tasks, whose run topics `on.topic` may not be.
    pub tasks: &'a super::TaskList,
    /// The global zone.
    pub time_zone: &'a TimeZone,
    /// Reactor's topics, which `on.topic` may not be.
    pub topics: &'a Topics,
}

/// Validates the `[[process]]` sections.
pub(super) fn processes(
    source: &Source<'_>,
    files: &[ProcessFile],
    cx: Context<'_>,
) -> Result<Vec<Process>, Error> {
    let mut processes: Vec<Process> = Vec::with_capacity(files.len());
    for p in files {
        let section = names::named(source, "process", &p.name, "PROCESS/KEY#N")?;
        let name = p.name.get_ref();
        if processes.iter().any(|b| b.name == *name) {
            return Err(section.invalid(&p.name, "name", "declared twice"));
        }
        let taken = if cx.jobs.iter().any(|j| j.name == *name) {
            Some(format!(
                "job `{name}` has this name (a submitted job runs as a process named after it)"
            ))
        } else if cx.stages.iter().any(|s| s.name == *name) {
            Some(format!("stage `{name}` has this name"))
        } else {
            None
        };
        if let Some(why) = taken {
            return Err(section.invalid(
                &p.name,
                "name",
                format!("{why}; run ids `{name}/…` must name one target, rename one of them"),
            ));
        }
        let steps = steps(&section, &p.steps, cx.jobs)?;
        let when = match &p.when {
            Some(text) => Some(section.expr(text, WHEN_VARIABLES, "when")?),
            None => None,
        };
        let timeout = match &p.timeout {
            Some(d) => Some(section.positive(d, "timeout")?),
            None => None,
        };
        let idle_timeout = match &p.idle_timeout {
            Some(d) => Some(section.positive(d, "idle_timeout")?),
            None => None,
        };
        let time_zone = match &p.time_zone {
            Some(zone) => section.zone(zone)?,
            None => cx.time_zone.clone(),
        };
        let on = match &p.on {
            Some(on) => Some(launch::on_event(&section, on, &cx)?),
            None => None,
        };
        let schedule = match &p.schedule {
            Some(schedule) => Some(launch::schedule(&section, schedule)?),
            None => None,
        };
        processes.push(Process {
            name: name.clone(),
            steps,
            reuse: p.reuse.unwrap_or_default(),
            conflict: p.conflict.unwrap_or_default(),
            when,
            timeout,
            idle_timeout,
            priority: p.priority,
            time_zone,
            on,
            schedule,
        });
    }
    Ok(processes)
}

/// `steps`: job names, as indices into `jobs`.
fn steps(
    section: &Section<'_>,
    steps: &Spanned<Vec<Spanned<String>>>,
    jobs: &[Job],
) -> Result<Vec<usize>, Error> {
    if steps.get_ref().is_empty() {
        return Err(section.invalid(steps, "steps", "name at least one job"));
    }
    steps
        .get_ref()
        .iter()
        .map(|step| {
            jobs.iter()
                .position(|j| j.name == *step.get_ref())
                .ok_or_else(|| {
                    section.invalid(
                        step,
                        "steps",
                        format!(
                            "no job named `{}`; declare it in a [[job]] section",
                            step.get_ref()
                        ),
                    )
                })
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::{error, parse, Position, ScheduleTargets};
    use super::*;
    use crate::cron::Cron;

    pub(crate) const JOBS: &str = "[[job]]\nname = \"reserve\"\n[[job]]\nname = \"send_tx\"\n\
                        [[job]]\nname = \"notify\"\n";

    const DESIGN: &str = r#"
[[process]]
name = "payout"
steps = ["reserve", "send_tx", "notify"]   # job names, run one at a time, in order
reuse = "failed_only"        # allow | failed_only | until_reset   (when a finished instance exists)
conflict = "reject"          # reject | queue | replace            (when an instance is active)
when = "params.amount > 0 && (last == null || last.status != 'succeeded')"  # CEL validation
timeout = "1d"               # whole instance (optional)
idle_timeout = "30m"         # no step progress for this long → process_idle, step re-dispatched
priority = 0
on = { topic = "payments.created", key = "record.payment_id", params = "record", when = "record.amount > 0" }
schedule = { cron = "0 3 * * *", select = "offer.status == 'active'" }   # or keys = ["k1", "k2"]
"#;

    #[test]
    fn design_process_sample_loads() {
        let config = parse(&format!("{JOBS}{DESIGN}"), "t.toml").unwrap().config;
        let [p] = &config.processes[..] else {
            panic!("{:?}", config.processes)
        };
        assert_eq!(p.name, "payout");
        assert_eq!(p.steps, [0, 1, 2]);
        assert_eq!(config.jobs[p.steps[1]].name, "send_tx");
        assert_eq!(p.reuse, Reuse::FailedOnly);
        assert_eq!(p.conflict, Conflict::Reject);
        assert_eq!(
            p.when.as_ref().map(Expr::text),
            Some("params.amount > 0 && (last == null || last.status != 'succeeded')")
        );
        assert_eq!(p.timeout, Some(Duration::from_secs(86_400)));
        assert_eq!(p.idle_timeout, Some(Duration::from_secs(1800)));
        assert_eq!(p.priority, 0);
        assert_eq!(p.time_zone, TimeZone::UTC);
        let on = p.on.as_ref().unwrap();
        assert_eq!(on.topic, "payments.created");
        assert_eq!(on.key.text(), "record.payment_id");
        assert_eq!(on.params.as_ref().map(Expr::text), Some("record"));
        assert_eq!(on.when.as_ref().map(Expr::text), Some("record.amount > 0"));
        assert!(!on.reset);
        let schedule = p.schedule.as_ref().unwrap();
        assert_eq!(schedule.cron, Cron::parse("0 3 * * *").unwrap());
        assert_eq!(
            schedule.targets,
            ScheduleTargets::Select(Expr::compile("offer.status == 'active'").unwrap())
        );
        assert_eq!(config.event_topics(), ["payments.created"]);
    }

    #[test]
    fn process_defaults_and_keys() {
        let text = format!(
            "time_zone = \"Europe/Moscow\"\n{JOBS}[[process]]\nname = \"p\"\n\
             steps = [\"notify\", \"notify\"]\n\
             [[process]]\nname = \"q\"\nsteps = [\"reserve\"]\nreuse = \"until_reset\"\n\
             conflict = \"replace\"\ntime_zone = \"Europe/Berlin\"\npriority = -2\n\
             on = {{ topic = \"t\", key = \"headers.id\", reset = true }}\n\
             [process.schedule]\ncron = \"*/5 * * * *\"\nkeys = [\"k1\", \"k2\"]\n"
        );
        let config = parse(&text, "t.toml").unwrap().config;
        let [p, q] = &config.processes[..] else {
            panic!("{:?}", config.processes)
        };
        assert_eq!(p.steps, [2, 2], "a job may run twice in one chain");
        assert_eq!((p.reuse, p.conflict), (Reuse::Allow, Conflict::Reject));
        assert!(p.when.is_none() && p.on.is_none() && p.schedule.is_none());
        assert_eq!((p.timeout, p.idle_timeout, p.priority), (None, None, 0));
        assert_eq!(p.time_zone.iana_name(), Some("Europe/Moscow"));
        assert_eq!(
            (q.reuse, q.conflict),
            (Reuse::UntilReset, Conflict::Replace)
        );
        assert_eq!(q.time_zone.iana_name(), Some("Europe/Berlin"));
        assert_eq!(q.priority, -2);
        let on = q.on.as_ref().unwrap();
        assert!(on.reset && on.params.is_none() && on.when.is_none());
        assert_eq!(
            q.schedule.as_ref().unwrap().targets,
            ScheduleTargets::Keys(vec!["k1".into(), "k2".into()])
        );
    }

    pub(crate) fn process_error(lines: &str) -> String {
        error(&format!(
            "{JOBS}[[process]]\nname = \"p\"\nsteps = [\"reserve\"]\n{lines}"
        ))
    }

    #[test]
    fn process_field_errors_name_their_line() {
        let cases = [
            ("when = \"amount > 0\"", "when", "`amount > 0`: column 1: unknown variable `amount`; expressions here see key, params, last, context, now"),
            ("when = \"params.amount >\"", "when", "`params.amount >`: column "),
            ("timeout = \"0s\"", "timeout", "must be positive"),
            ("idle_timeout = \"0s\"", "idle_timeout", "must be positive"),
            ("time_zone = \"Mars/Base\"", "time_zone", "unknown time zone"),
        ];
        for (line, field, message) in cases {
            let e = process_error(&format!("\n{line}\n"));
            assert!(
                e.starts_with(&format!("t.toml:11: process `p`, field `{field}`: ")),
                "{line}: {e}"
            );
            assert!(e.contains(message), "{line}: {e}");
        }
        for (line, key) in [
            ("reuse = \"never\"", "never"),
            ("conflict = \"wait\"", "wait"),
            ("on = { topic = \"t\" }", "key"),
            (
                "on = { topic = \"t\", key = \"record.id\", rest = true }",
                "rest",
            ),
            ("schedule = { keys = [\"a\"] }", "cron"),
            ("retry = { attempts = 2 }", "retry"),
        ] {
            let e = process_error(&format!("\n{line}\n"));
            assert!(e.contains("line 11") && e.contains(key), "{line}: {e}");
        }
    }

    #[test]
    fn steps_name_jobs() {
        let e = error(&format!("{JOBS}[[process]]\nname = \"p\"\nsteps = []\n"));
        assert!(
            e.starts_with("t.toml:9: process `p`, field `steps`: name at least one job"),
            "{e}"
        );
        let e = error(&format!(
            "{JOBS}[[process]]\nname = \"p\"\nsteps = [\n  \"reserve\",\n  \"send\",\n]\n"
        ));
        assert!(
            e.starts_with("t.toml:11: process `p`, field `steps`: no job named `send`"),
            "{e}"
        );
        let e = error(&format!("{JOBS}[[process]]\nname = \"p\"\n"));
        assert!(e.contains("steps"), "{e}");
    }

    #[test]
    fn process_names() {
        let e = error(&format!(
            "{JOBS}[[process]]\nname = \"a/b\"\nsteps = [\"notify\"]\n"
        ));
        assert!(
            e.starts_with(
                "t.toml:8: process `a/b`, field `name`: process names use letters, digits \
                 and `_ . : -` (run ids are `PROCESS/KEY#N`)"
            ),
            "{e}"
        );
        let e = error(&format!(
            "{JOBS}[[process]]\nname = \"\"\nsteps = [\"notify\"]\n"
        ));
        assert!(
            e.starts_with("t.toml:8: process, field `name`: must not be empty"),
            "{e}"
        );
        let twice = format!(
            "{JOBS}[[process]]\nname = \"p\"\nsteps = [\"notify\"]\n\
             [[process]]\nname = \"p\"\nsteps = [\"notify\"]\n"
        );
        let e = error(&twice);
        assert!(
            e.starts_with("t.toml:11: process `p`, field `name`: declared twice"),
            "{e}"
        );
        let e = error(&format!(
            "{JOBS}[[process]]\nname = \"send_tx\"\nsteps = [\"notify\"]\n"
        ));
        assert!(
            e.starts_with(
                "t.toml:8: process `send_tx`, field `name`: job `send_tx` has this name \
                 (a submitted job runs as a process named after it)"
            ),
            "{e}"
        );
        let e = error(&format!(
            "[[stage]]\nname = \"price\"\n{JOBS}[[process]]\nname = \"price\"\nsteps = [\"notify\"]\n"
        ));
        assert!(
            e.starts_with("t.toml:10: process `price`, field `name`: stage `price` has this name"),
            "{e}"
        );
    }

    #[test]
    fn enums_read_and_print_in_snake_case() {
        assert_eq!(Conflict::default(), Conflict::Reject);
        assert_eq!(Reuse::default(), Reuse::Allow);
        assert_eq!(Reuse::FailedOnly.to_string(), "failed_only");
        assert_eq!("until_reset".parse::<Reuse>(), Ok(Reuse::UntilReset));
        assert_eq!("queue".parse::<Conflict>(), Ok(Conflict::Queue));
        let replace: &'static str = Conflict::Replace.into();
        assert_eq!(replace, "replace");
        assert_eq!(
            serde_json::to_string(&Position::Front).unwrap(),
            "\"front\""
        );
    }
}
