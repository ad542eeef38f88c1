//! `[[job]]`: a type of work done by workers (DESIGN §7.2), run as a step of
//! a process or submitted alone.

pub use crate::process::Position;
use serde::Deserialize;
use toml::Spanned;

use super::run::{self, RetryFile, RunKeys};
use super::{names, Accept, Error, RunPolicy, Source, Stage, Topics};
use crate::duration::Duration;

/// Default `timeout` of a job (per attempt, the seed's workTimeout).
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(60);

/// A `[[job]]` section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct JobFile {
    /// Unique job name: ASCII letters, digits and `_ . : -`.
    name: Spanned<String>,
    /// Topic the run commands go to (default `job.NAME.runs`).
    topic: Option<Spanned<String>>,
    /// No result by then: the attempt times out (default 1m).
    timeout: Option<Spanned<Duration>>,
    /// On timeout, re-dispatch (true, default) or count the attempt as failed.
    restart_after_timeout: Option<bool>,
    /// Which result wins when several attempts answer: "first" (any attempt
    /// of the current run, the default for jobs) or "last" (only the current pass).
    accept: Option<Accept>,
    /// Retry policy after a failure; `requeue` says where a job back from a
    /// tier re-enters its queue (default "front").
    retry: Option<RetryFile>,
    /// Counted from enqueue, queue time included: past it the job fails for good.
    deadline: Option<Spanned<Duration>>,
    /// Past the deadline while running: fail now (true) or at the end of the
    /// current attempt's timeout (false, default).
    force_finish: Option<Spanned<bool>>,
    /// Most running jobs of this type across all partitions; unlimited when absent.
    max_running: Option<Spanned<u32>>,
}

/// A validated `[[job]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Unique name: letters, digits, `_ . : -`; a submitted job runs as an
    /// implicit process of this name.
    pub name: String,
    /// The run topic (default `job.NAME.runs`).
    pub topic: String,
    /// Timeout (default 1m), result acceptance (default `first`) and retries of its runs.
    pub run: RunPolicy,
    /// Where the job re-enters its queue after a tier (`retry.requeue`, default `front`).
    pub requeue: Position,
    /// Longest time from enqueue to result, queue time included; `None`: no deadline.
    pub deadline: Option<Duration>,
    /// Past the deadline while running: fail at once instead of at the end
    /// of the current attempt's timeout.
    pub force_finish: bool,
    /// Most running jobs of this type across all partitions (each partition
    /// gets an even share); `None`: unlimited.
    pub max_running: Option<u32>,
}

/// Validates the `[[job]]` sections; a job may not share a name with a stage
/// (its implicit process's run ids `NAME/KEY#N` would mix with the stage's
/// `NAME/OFFER#SEQ`), nor use one of Reactor's own `topics`.
pub(super) fn jobs(
    source: &Source<'_>,
    files: &[JobFile],
    stages: &[Stage],
    topics: &Topics,
) -> Result<Vec<Job>, Error> {
    let mut jobs: Vec<Job> = Vec::with_capacity(files.len());
    for j in files {
        let section = names::named(source, "job", &j.name, "JOB/KEY#N")?;
        let name = j.name.get_ref();
        if jobs.iter().any(|b| b.name == *name) {
            return Err(section.invalid(&j.name, "name", "declared twice"));
        }
        if stages.iter().any(|s| s.name == *name) {
            return Err(section.invalid(
                &j.name,
                "name",
                format!(
                    "stage `{name}` has this name; run ids `{name}/…` must name one target, \
                     rename one of them"
                ),
            ));
        }
        let topic = names::run_topic(
            &section,
            j.topic.as_ref(),
            format!("job.{name}.runs"),
            &j.name,
            "job",
            topics,
        )?;
        let (run, requeue) = run::policy(
            &section,
            RunKeys {
                timeout: j.timeout.as_ref(),
                restart_after_timeout: j.restart_after_timeout,
                accept: j.accept,
                retry: j.retry.as_ref(),
            },
            run::Defaults {
                timeout: DEFAULT_JOB_TIMEOUT,
                accept: Accept::First,
                requeue: Some(Position::Front),
            },
        )?;
        let deadline = match &j.deadline {
            Some(deadline) => Some(section.positive(deadline, "deadline")?),
            None => None,
        };
        let force_finish = match &j.force_finish {
            Some(force) if *force.get_ref() && deadline.is_none() => {
                return Err(section.invalid(
                    force,
                    "force_finish",
                    "applies when the job passes its `deadline`; set a `deadline` or leave it out",
                ));
            }
            Some(force) => *force.get_ref(),
            None => false,
        };
        let max_running = match &j.max_running {
            Some(n) => {
                Some(section.at_least_one(n, "max_running", " (leave it out for no limit)")?)
            }
            None => None,
        };
        jobs.push(Job {
            name: name.clone(),
            topic,
            run,
            requeue: requeue.unwrap_or(Position::Front),
            deadline,
            force_finish,
            max_running,
        });
    }
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::super::{error, parse, RetryPolicy};
    use super::*;

    const DESIGN: &str = r#"
[[job]]
name = "send_tx"
topic = "job.send_tx.runs"     # default job.NAME.runs
timeout = "1m"                 # per attempt (the seed's workTimeout; default 1m)
accept = "first"               # default for jobs
deadline = "6h"                # optional, from enqueue; force_finish = false
max_running = 20               # per job type, split across partitions like stages
retry = { attempts = 5, backoff = "10s", tiers = ["30m", "1d"], requeue = "front" }
"#;

    #[test]
    fn design_job_sample_loads() {
        let config = parse(DESIGN, "t.toml").unwrap().config;
        assert_eq!(
            config.jobs,
            [Job {
                name: "send_tx".into(),
                topic: "job.send_tx.runs".into(),
                run: RunPolicy {
                    timeout: Duration::from_secs(60),
                    restart_after_timeout: true,
                    accept: Accept::First,
                    retry: RetryPolicy {
                        attempts: 5,
                        backoff: Duration::from_secs(10),
                        tiers: vec![Duration::from_secs(1800), Duration::from_secs(86_400)],
                    },
                },
                requeue: Position::Front,
                deadline: Some(Duration::from_secs(6 * 3600)),
                force_finish: false,
                max_running: Some(20),
            }]
        );
        assert_eq!(config.job_topics(), ["job.send_tx.runs"]);
    }

    #[test]
    fn job_defaults() {
        let config = parse(
            "[[job]]\nname = \"notify\"\n[[job]]\nname = \"x\"\naccept = \"last\"\n\
             restart_after_timeout = false\nretry = { requeue = \"back\" }\n\
             deadline = \"1h\"\nforce_finish = true\ntopic = \"job.notify.runs\"\n",
            "t.toml",
        )
        .unwrap()
        .config;
        let [notify, x] = &config.jobs[..] else {
            panic!("{:?}", config.jobs)
        };
        assert_eq!(notify.topic, "job.notify.runs");
        assert_eq!(notify.run.timeout, DEFAULT_JOB_TIMEOUT);
        assert_eq!(notify.run.accept, Accept::First);
        assert!(notify.run.restart_after_timeout);
        assert_eq!(notify.run.retry, RetryPolicy::default());
        assert_eq!(notify.requeue, Position::Front);
        assert_eq!(notify.deadline, None);
        assert!(!notify.force_finish);
        assert_eq!(notify.max_running, None);
        assert_eq!(x.run.accept, Accept::Last);
        assert!(!x.run.restart_after_timeout);
        assert_eq!(x.requeue, Position::Back);
        assert!(x.force_finish);
        assert_eq!(
            config.job_topics(),
            ["job.notify.runs"],
            "shared topics once"
        );
    }

    fn job_error(lines: &str) -> String {
        error(&format!("[[job]]\nname = \"j\"\n{lines}"))
    }

    #[test]
    fn job_field_errors_name_their_line() {
        let cases = [
            ("timeout = \"0s\"\n", "timeout", "must be positive"),
            ("deadline = \"0s\"\n", "deadline", "must be positive"),
            ("force_finish = true\n", "force_finish", "set a `deadline`"),
            (
                "max_running = 0\n",
                "max_running",
                "must be at least 1 (leave it out for no limit)",
            ),
            (
                "retry = { attempts = 0 }\n",
                "retry.attempts",
                "must be at least 1",
            ),
            (
                "retry = { tiers = [\"0s\"] }\n",
                "retry.tiers",
                "every tier must be positive",
            ),
            ("topic = \"a:b\"\n", "topic", "is not a Kafka topic name"),
            (
                "topic = \"reactor.events\"\n",
                "topic",
                "`reactor.events` is Reactor's own topic (kafka.topics.events); \
                 give the job a run topic of its own",
            ),
        ];
        for (line, field, message) in cases {
            let e = job_error(&format!("\n{line}"));
            assert!(
                e.starts_with(&format!("t.toml:4: job `j`, field `{field}`: ")),
                "{line}: {e}"
            );
            assert!(e.contains(message), "{line}: {e}");
        }
        let e = job_error("retry = { requeue = \"middle\" }\n");
        assert!(e.contains("line 3") && e.contains("middle"), "{e}");
        let e = job_error("retries = 2\n");
        assert!(e.contains("line 3") && e.contains("retries"), "{e}");
    }

    #[test]
    fn job_names() {
        let e = error("[[job]]\nname = \"\"\n");
        assert!(
            e.starts_with("t.toml:2: job, field `name`: must not be empty"),
            "{e}"
        );
        for bad in ["send/tx", "send#2", "send tx"] {
            let e = error(&format!("[[job]]\nname = \"{bad}\"\n"));
            assert!(
                e.starts_with(&format!(
                    "t.toml:2: job `{bad}`, field `name`: job names use"
                )),
                "{e}"
            );
        }
        let e = error("[[job]]\nname = \"a\"\n[[job]]\nname = \"a\"\n");
        assert!(
            e.starts_with("t.toml:4: job `a`, field `name`: declared twice"),
            "{e}"
        );
        let e = error("[[stage]]\nname = \"a\"\n[[job]]\nname = \"a\"\n");
        assert!(
            e.starts_with("t.toml:4: job `a`, field `name`: stage `a` has this name"),
            "{e}"
        );
        let e = error("[[job]]\nname = \"eu:send\"\n");
        assert!(
            e.starts_with("t.toml:2: job `eu:send`, field `topic`: the default run topic"),
            "{e}"
        );
        assert!(parse(
            "[[job]]\nname = \"eu:send\"\ntopic = \"eu.send\"\n",
            "t.toml"
        )
        .is_ok());
    }

    #[test]
    fn positions_read_and_print_in_snake_case() {
        assert_eq!(Position::default(), Position::Back);
        assert_eq!(Position::Front.to_string(), "front");
        assert_eq!("back".parse::<Position>(), Ok(Position::Back));
        assert!("Front".parse::<Position>().is_err());
        let name: &'static str = Position::Front.into();
        assert_eq!(name, "front");
    }
}
