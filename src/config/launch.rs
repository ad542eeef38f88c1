//! How processes launch by themselves (DESIGN §7.2, seed 003): `on` a
//! record of a topic, or on a cron `schedule` for a key list or the offers a
//! CEL selects.

use serde::Deserialize;
use toml::Spanned;

use super::process::Context;
use super::{names, Error, Section};
use crate::cron::Cron;
use crate::stage::expr::Expr;

/// What `on.key`, `on.params` and `on.when` see: the record's JSON value
/// `record`, its `headers` (a map of strings) and `now`.
pub const ON_VARIABLES: &[&str] = &["record", "headers", "now"];
/// What `schedule.select` sees: one of the shard's offers (`offer`, its body;
/// `meta`: id, version, updated_at) and `now`.
pub const SELECT_VARIABLES: &[&str] = &["offer", "meta", "now"];

/// `on = { topic, key, params, when, reset }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OnFile {
    /// The topic whose records launch the process.
    topic: Spanned<String>,
    /// CEL over `record`, `headers`, `now`: the business key (a string).
    key: Spanned<String>,
    /// CEL over `record`, `headers`, `now`: the launch parameters (a map); none when absent.
    params: Option<Spanned<String>>,
    /// CEL over `record`, `headers`, `now`: launch only when true; always when absent.
    when: Option<Spanned<String>>,
    /// Launch with `reset = true`: clear the key's goal first (default false).
    #[serde(default)]
    reset: bool,
}

/// `schedule = { cron, select }` or `schedule = { cron, keys }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ScheduleFile {
    /// Five fields: minute hour day-of-month month day-of-week, in the process's zone.
    cron: Spanned<String>,
    /// CEL over `offer`, `meta`, `now`: launch for every offer of the shard it selects.
    select: Option<Spanned<String>>,
    /// Launch for these keys.
    keys: Option<Spanned<Vec<Spanned<String>>>>,
}

/// `on`: every record of `topic` that passes `when` launches an instance.
#[derive(Debug, Clone)]
pub struct OnEvent {
    /// The topic to consume.
    pub topic: String,
    /// CEL over [`ON_VARIABLES`] giving the business key (a string).
    pub key: Expr,
    /// CEL over [`ON_VARIABLES`] giving the launch parameters (a map); `None`: no params.
    pub params: Option<Expr>,
    /// CEL over [`ON_VARIABLES`] giving a bool; `None`: every record launches.
    pub when: Option<Expr>,
    /// Launch with `reset = true` (clears the key's goal first).
    pub reset: bool,
}

/// `schedule`: at every time of `cron` (in the process's zone), launch for `targets`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// When.
    pub cron: Cron,
    /// For which keys.
    pub targets: ScheduleTargets,
}

/// The keys a scheduled launch is for.
#[derive(Debug, Clone)]
pub enum ScheduleTargets {
    /// These keys, in this order.
    Keys(Vec<String>),
    /// Every offer of the shard this CEL (over [`SELECT_VARIABLES`]) selects; the key is the offer id.
    Select(Expr),
}

impl PartialEq for ScheduleTargets {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ScheduleTargets::Keys(a), ScheduleTargets::Keys(b)) => a == b,
            (ScheduleTargets::Select(a), ScheduleTargets::Select(b)) => a.text() == b.text(),
            _ => false,
        }
    }
}

impl Eq for ScheduleTargets {}

/// `on`: a topic that is none of Reactor's, and CEL over the record.
pub(super) fn on_event(
    section: &Section<'_>,
    on: &OnFile,
    cx: &Context<'_>,
) -> Result<OnEvent, Error> {
    let topic = on.topic.get_ref();
    names::kafka_topic(section, &on.topic, "on.topic")?;
    let reactors = cx
        .topics
        .all()
        .into_iter()
        .find(|(_, own)| own == topic)
        .map(|(field, _)| format!("Reactor's own topic (kafka.{field})"))
        .or_else(|| {
            let stage = cx.stages.iter().find(|s| s.topic == *topic);
            let job = cx.jobs.iter().find(|j| j.topic == *topic);
            let task = cx
                .tasks
                .iter()
                .find(|t| t.extra().topic.as_ref() == Some(topic));
            stage
                .map(|s| format!("the run topic of stage `{}`", s.name))
                .or_else(|| job.map(|j| format!("the run topic of job `{}`", j.name)))
                .or_else(|| task.map(|t| format!("the run topic of task `{}`", t.id())))
        });
    if let Some(what) = reactors {
        return Err(section.invalid(
            &on.topic,
            "on.topic",
            format!("`{topic}` is {what}; launch on a topic Reactor neither reads nor writes"),
        ));
    }
    Ok(OnEvent {
        topic: topic.clone(),
        key: section.expr(&on.key, ON_VARIABLES, "on.key")?,
        params: match &on.params {
            Some(text) => Some(section.expr(text, ON_VARIABLES, "on.params")?),
            None => None,
        },
        when: match &on.when {
            Some(text) => Some(section.expr(text, ON_VARIABLES, "on.when")?),
            None => None,
        },
        reset: on.reset,
    })
}

/// `schedule`: a cron and exactly one of `keys` and `select`.
pub(super) fn schedule(
    section: &Section<'_>,
    schedule: &Spanned<ScheduleFile>,
) -> Result<Schedule, Error> {
    let s = schedule.get_ref();
    let cron = section.cron(&s.cron, "schedule.cron")?;
    let targets = match (&s.keys, &s.select) {
        (Some(keys), None) => {
            if keys.get_ref().is_empty() {
                return Err(section.invalid(keys, "schedule.keys", "list at least one key"));
            }
            let mut list: Vec<String> = Vec::with_capacity(keys.get_ref().len());
            for key in keys.get_ref() {
                if key.get_ref().is_empty() {
                    return Err(section.invalid(key, "schedule.keys", "keys must not be empty"));
                }
                if list.contains(key.get_ref()) {
                    return Err(section.invalid(
                        key,
                        "schedule.keys",
                        format!("`{}` is listed twice", key.get_ref()),
                    ));
                }
                list.push(key.get_ref().clone());
            }
            ScheduleTargets::Keys(list)
        }
        (None, Some(select)) => {
            ScheduleTargets::Select(section.expr(select, SELECT_VARIABLES, "schedule.select")?)
        }
        (Some(_), Some(_)) | (None, None) => {
            return Err(section.invalid(
                schedule,
                "schedule",
                "set exactly one of `keys` (a list of keys) and `select` \
                 (CEL choosing offers)",
            ));
        }
    };
    Ok(Schedule { cron, targets })
}

#[cfg(test)]
mod tests {
    use super::super::process::tests::{process_error, JOBS};
    use super::super::{error, parse};

    #[test]
    fn launch_field_errors_name_their_line() {
        let cases = [
            (
                "on = { topic = \"a b\", key = \"record.id\" }",
                "on.topic",
                "is not a Kafka topic name",
            ),
            (
                "on = { topic = \"reactor.runs\", key = \"record.id\" }",
                "on.topic",
                "`reactor.runs` is Reactor's own topic (kafka.topics.runs)",
            ),
            (
                "on = { topic = \"offer.changes\", key = \"record.id\" }",
                "on.topic",
                "(kafka.topics.offers)",
            ),
            (
                "on = { topic = \"job.notify.runs\", key = \"record.id\" }",
                "on.topic",
                "the run topic of job `notify`",
            ),
            (
                "on = { topic = \"t\", key = \"offer.id\" }",
                "on.key",
                "unknown variable `offer`; expressions here see record, headers, now",
            ),
            (
                "on = { topic = \"t\", key = \"record.id\", params = \"key\" }",
                "on.params",
                "unknown variable `key`",
            ),
            (
                "on = { topic = \"t\", key = \"record.id\", when = \"record.a >\" }",
                "on.when",
                "column",
            ),
            (
                "schedule = { cron = \"0 3 * * * *\", keys = [\"a\"] }",
                "schedule.cron",
                "five fields",
            ),
            (
                "schedule = { cron = \"0 0 30 2 *\", keys = [\"a\"] }",
                "schedule.cron",
                "never fires",
            ),
            (
                "schedule = { cron = \"0 3 * * *\" }",
                "schedule",
                "exactly one of `keys`",
            ),
            (
                "schedule = { cron = \"0 3 * * *\", keys = [\"a\"], select = \"true\" }",
                "schedule",
                "exactly one of `keys`",
            ),
            (
                "schedule = { cron = \"0 3 * * *\", keys = [] }",
                "schedule.keys",
                "list at least one key",
            ),
            (
                "schedule = { cron = \"0 3 * * *\", keys = [\"a\", \"\"] }",
                "schedule.keys",
                "must not be empty",
            ),
            (
                "schedule = { cron = \"0 3 * * *\", keys = [\"a\", \"a\"] }",
                "schedule.keys",
                "`a` is listed twice",
            ),
            (
                "schedule = { cron = \"0 3 * * *\", select = \"state == null\" }",
                "schedule.select",
                "unknown variable `state`; expressions here see offer, meta, now",
            ),
        ];
        for (line, field, message) in cases {
            let e = process_error(&format!("\n{line}\n"));
            assert!(
                e.starts_with(&format!("t.toml:11: process `p`, field `{field}`: ")),
                "{line}: {e}"
            );
            assert!(e.contains(message), "{line}: {e}");
        }
    }

    #[test]
    fn schedule_keys_on_their_own_lines() {
        let e = process_error(
            "[process.schedule]\ncron = \"0 3 * * *\"\nkeys = [\n  \"a\",\n  \"a\",\n]\n",
        );
        assert!(
            e.starts_with("t.toml:14: process `p`, field `schedule.keys`: `a` is listed twice"),
            "{e}"
        );
    }

    #[test]
    fn on_topic_is_none_of_reactors() {
        let on = |topic: &str| format!("on = {{ topic = \"{topic}\", key = \"record.id\" }}\n");
        let stage = "[[stage]]\nname = \"s\"\n";
        let e = error(&format!(
            "{stage}{JOBS}[[process]]\nname = \"p\"\nsteps = [\"notify\"]\n{}",
            on("stage.s.runs")
        ));
        assert!(
            e.contains("field `on.topic`: `stage.s.runs` is the run topic of stage `s`"),
            "{e}"
        );
        let task = "[[task]]\nid = \"t\"\ntrigger = \"delta(a/b, 1h)\"\ntopic = \"etl.runs\"\n";
        let e = error(&format!(
            "{task}{JOBS}[[process]]\nname = \"p\"\nsteps = [\"notify\"]\n{}",
            on("etl.runs")
        ));
        assert!(e.contains("`etl.runs` is the run topic of task `t`"), "{e}");
        let renamed = "[kafka.topics]\ncommands = \"ops.in\"\n";
        let e = error(&format!(
            "{JOBS}[[process]]\nname = \"p\"\nsteps = [\"notify\"]\n{}{renamed}",
            on("ops.in")
        ));
        assert!(e.contains("(kafka.topics.commands)"), "{e}");
        // The default name of a renamed topic is free again.
        let ok = format!(
            "{JOBS}[[process]]\nname = \"p\"\nsteps = [\"notify\"]\n{}{renamed}",
            on("reactor.commands")
        );
        assert!(parse(&ok, "t.toml").is_ok());
    }
}
