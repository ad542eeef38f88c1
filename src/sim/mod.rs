//! `reactor simulate`: the engine driven offline by timed JSON-lines inputs,
//! with a manual clock. It is the golden-scenario runner of the test suite
//! and a user's what-if tool. It also plays the workers: a `complete` input
//! answers the current run of a task with that run's id and pass.

use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;

use crate::action::Action;
use crate::changelog::ChangelogRecord;
use crate::codec::{validate, DecodeError};
use crate::config::Config;
use crate::ctl::ParamName;
use crate::engine::{Command, Engine, Input, RunResult, StageReply, TaskView, TimerChange, Update};
use crate::offer;
use crate::router::Router;
use crate::shell::driver::{Driver, Refused, Sink};

/// Why the simulation stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input line is not valid JSON of the input format.
    #[error("input line {line}: {message}")]
    BadInput {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// An input is earlier than the one before it.
    #[error("input line {line}: `at` {at} is before the previous input's {now}; inputs must be in time order")]
    BackInTime {
        /// 1-based line number.
        line: usize,
        /// The input's time.
        at: Timestamp,
        /// The clock.
        now: Timestamp,
    },
    /// The changelog could not be restored.
    #[error("restore: {0}")]
    Restore(#[source] crate::engine::Error),
    /// An input (or a timer) broke an invariant of the engine: a bug.
    #[error("input line {line}: the engine broke an invariant: {error}")]
    Engine {
        /// 1-based line number (0 for a timer or the start).
        line: usize,
        /// What broke.
        error: crate::engine::Error,
    },
}

mod lines;

pub use lines::*;

/// What the simulated workers and a restore need from the outputs so far.
#[derive(Default)]
struct Book {
    /// Changelog records emitted so far: what a restore reads.
    log: Vec<ChangelogRecord>,
    /// `(task, attempt)` → `(run id, pass)` of every run command seen.
    attempts: HashMap<(String, u32), (String, u64)>,
    /// Task → `(run id, pass)` of its latest run command.
    current: HashMap<String, (String, u64)>,
    /// `(stage, offer, attempt)` → `(run id, pass, version)` of every stage run command seen.
    stage_attempts: HashMap<(String, String, u32), (String, u64, u64)>,
    /// `(process, key, attempt)` → `(run id, pass)` of the step run commands
    /// of each key's latest step.
    step_attempts: HashMap<(String, String, u32), (String, u64)>,
}

impl Book {
    fn record(
        &mut self,
        at: Timestamp,
        actions: impl IntoIterator<Item = Action>,
        out: &mut Vec<Output>,
    ) {
        for action in actions {
            match &action {
                Action::Run(run) => {
                    let ids = (run.run_id.as_str().to_owned(), run.pass);
                    self.attempts
                        .insert((run.task().to_string(), run.attempt), ids.clone());
                    self.current.insert(run.task().to_string(), ids);
                }
                Action::Changelog(record) => self.log.push(record.clone()),
                Action::StageRun(run) => {
                    self.stage_attempts.insert(
                        (run.stage.clone(), run.offer.clone(), run.attempt),
                        (run.run_id.as_str().to_owned(), run.pass, run.version),
                    );
                }
                Action::StepRun(run) => {
                    if run.attempt == 1 {
                        // A new step: the attempts of the one before are gone.
                        self.step_attempts
                            .retain(|(p, k, _), _| !(*p == run.process && *k == run.key));
                    }
                    self.step_attempts.insert(
                        (run.process.clone(), run.key.clone(), run.attempt),
                        (run.run_id.as_str().to_owned(), run.pass),
                    );
                }
                Action::Event(_) | Action::OfferState(_) => {}
            }
            out.push(Output { at, action });
        }
    }
}

/// The simulator's sink: every action becomes an output line and is booked.
struct Recording<'a> {
    book: &'a mut Book,
    out: &'a mut Vec<Output>,
}

impl Sink for Recording<'_> {
    fn take(&mut self, at: Timestamp, actions: &mut Vec<Action>) {
        self.book.record(at, actions.drain(..), self.out);
    }
}

/// The shard driven by [`Driver`] (as the runtime drives each of its
/// shards), its clock, its durable log and the simulated workers.
pub struct Simulator {
    config: Config,
    /// One partition: the simulated shard owns every key, pool and offer.
    router: Router,
    driver: Driver,
    book: Book,
    /// Latest CTL value per parameter: the global table a restore re-feeds.
    ctl: BTreeMap<ParamName, Timestamp>,
    now: Option<Timestamp>,
    started: bool,
}

impl Simulator {
    /// A simulator over a fresh shard owning every task.
    pub fn new(config: Config) -> Simulator {
        let router = Router::new(&config, 1);
        let driver = Driver::new(0, Engine::new(&config));
        Simulator {
            config,
            router,
            driver,
            book: Book::default(),
            ctl: BTreeMap::new(),
            now: None,
            started: false,
        }
    }

    /// Runs one input: fires the timers due before it, then applies it.
    pub fn step(&mut self, input: InputLine, line: usize) -> Result<Vec<Output>, Error> {
        if let Some(now) = self.now.filter(|now| input.at < *now) {
            return Err(Error::BackInTime {
                line,
                at: input.at,
                now,
            });
        }
        let mut out = Vec::new();
        let at = input.at;
        let engine_error = |error| Error::Engine { line, error };
        if !self.started {
            self.started = true;
            let mut sink = Recording {
                book: &mut self.book,
                out: &mut out,
            };
            self.driver.start(at, &mut sink).map_err(engine_error)?;
        }
        // The rules Kafka inputs pass: a line Kafka would refuse stops the
        // simulation.
        let invalid = |e: DecodeError| Error::BadInput {
            line,
            message: e.to_string(),
        };
        let engine_input = if let Some(c) = input.ctl {
            let c = validate::ctl_change(c.entity, c.param, c.value).map_err(invalid)?;
            self.ctl
                .insert(ParamName::new(c.entity.clone(), c.param.clone()), c.value);
            let mut sink = Recording {
                book: &mut self.book,
                out: &mut out,
            };
            // As in the runtime: a parameter no task names decides nothing
            // (the timers due by now still fire).
            match self.router.ctl(&c.entity, &c.param) {
                Some((named, _)) => self.driver.apply_ctl(c.value, named, at, None, &mut sink),
                None => self.driver.advance(at, &mut sink),
            }
            .map_err(engine_error)?;
            self.now = Some(at);
            return Ok(out);
        } else if let Some(c) = input.complete {
            // Timers due before the result fire first: the current run may change.
            let mut sink = Recording {
                book: &mut self.book,
                out: &mut out,
            };
            self.driver.advance(at, &mut sink).map_err(engine_error)?;
            Input::Result(validate::run_result(self.result(c, line)?).map_err(invalid)?)
        } else if let Some(o) = input.offer {
            Input::Offer(validate::offer_change(o.into_change(line)?).map_err(invalid)?)
        } else if let Some(l) = input.launch {
            Input::Command(validate::command(l.into_command(line)?).map_err(invalid)?)
        } else if let Some(s) = input.submit {
            Input::Command(
                validate::command(Command::Submit {
                    job: s.job,
                    key: s.key,
                    params: s.params,
                    position: s.position,
                    priority: s.priority,
                })
                .map_err(invalid)?,
            )
        } else if let Some(r) = input.record {
            Input::Record(validate::event_record(r).map_err(invalid)?)
        } else if let Some(c) = input.command {
            Input::Command(validate::command(name_operation(c, line)).map_err(invalid)?)
        } else {
            return Err(Error::BadInput {
                line,
                message: "no input".to_string(),
            });
        };
        let mut sink = Recording {
            book: &mut self.book,
            out: &mut out,
        };
        self.driver
            .apply(engine_input, at, None, &mut sink)
            .map_err(|refused| match refused {
                Refused::Invalid(e) => invalid(e),
                Refused::Broke(error) => Error::Engine { line, error },
            })?;
        self.now = Some(at);
        Ok(out)
    }
    /// The worker's reply a `complete` input stands for.
    fn result(&self, c: Complete, line: usize) -> Result<RunResult, Error> {
        let bad = |message: &str| Error::BadInput {
            line,
            message: message.to_string(),
        };
        let name = |field, text| {
            validate::name(field, text).map_err(|e| Error::BadInput {
                line,
                message: e.to_string(),
            })
        };
        match (c.task, c.stage, c.offer) {
            (Some(task), None, None) => {
                let task = name("task", task)?;
                if c.update.is_some() || c.body.is_some() || c.state.is_some() || c.timer.is_some()
                {
                    return Err(bad(
                        "`update`, `body`, `state` and `timer` are for stage results",
                    ));
                }
                let known = match c.attempt {
                    Some(n) => self.book.attempts.get(&(task.clone(), n)),
                    None => self.book.current.get(&task),
                };
                // A task that never ran gets a run id that cannot match, so the
                // engine's rejection path is what the scenario sees.
                let (run_id, pass) = known
                    .cloned()
                    .unwrap_or_else(|| (crate::run::run_id(&task, 0).into(), 0));
                let mut result = RunResult::new(run_id, pass, c.status);
                result.error = c.error;
                Ok(result)
            }
            (None, Some(stage), Some(offer)) => {
                let (stage, offer) = (name("stage", stage)?, name("offer", offer)?);
                let known = match c.attempt {
                    Some(n) => self
                        .book
                        .stage_attempts
                        .get(&(stage.clone(), offer.clone(), n))
                        .cloned(),
                    None => self.driver.engine().stage_run(&stage, &offer),
                };
                let (run_id, pass, version) = known.unwrap_or_else(|| {
                    (
                        crate::run::run_id(&format!("{stage}/{offer}"), 0).into(),
                        0,
                        0,
                    )
                });
                let update = match (c.update, c.body) {
                    (None, None) => None,
                    (Some(mut patch), None) => {
                        offer::normalize_body(&mut patch);
                        Some(Update::Patch(patch))
                    }
                    (None, Some(mut body)) => {
                        offer::normalize_body(&mut body);
                        Some(Update::Body(body))
                    }
                    (Some(_), Some(_)) => return Err(bad("give `update` or `body`, not both")),
                };
                let mut result = RunResult::new(run_id, pass, c.status);
                result.error = c.error;
                result.stage = StageReply {
                    version: Some(c.version.unwrap_or(version)),
                    update,
                    state: c.state.map(|mut s| {
                        offer::normalize(&mut s);
                        s
                    }),
                    timer: c
                        .timer
                        .map(|t| t.map_or(TimerChange::Clear, TimerChange::Set)),
                };
                Ok(result)
            }
            (None, None, None) if c.process.is_some() && c.key.is_some() => {
                let (process, key) = (c.process.unwrap_or_default(), c.key.unwrap_or_default());
                let known = match c.attempt {
                    Some(n) => self
                        .book
                        .step_attempts
                        .get(&(process.clone(), key.clone(), n))
                        .cloned(),
                    None => self.driver.engine().step_run(&process, &key),
                };
                let (run_id, pass) = known.unwrap_or_else(|| {
                    (
                        crate::run::run_id(&format!("{process}/{key}#0.0"), 0).into(),
                        0,
                    )
                });
                let mut result = RunResult::new(run_id, pass, c.status);
                result.error = c.error;
                result.step = crate::engine::StepReply {
                    output: c.output.map(|mut o| {
                        offer::normalize_body(&mut o);
                        o
                    }),
                    next: c.next,
                    goal_reached: c.goal_reached,
                };
                Ok(result)
            }
            _ => Err(bad(
                "a `complete` names a `task`, a `stage` and an `offer`, or a `process` and a `key`",
            )),
        }
    }

    /// Advances the clock to `until`, firing every timer due on the way at
    /// its own deadline.
    pub fn advance(&mut self, until: Timestamp, out: &mut Vec<Output>) -> Result<(), Error> {
        let mut sink = Recording {
            book: &mut self.book,
            out,
        };
        self.driver
            .advance(until, &mut sink)
            .map_err(|error| Error::Engine { line: 0, error })?;
        self.now = Some(self.now.map_or(until, |now| now.max(until)));
        Ok(())
    }

    /// Drops the engine and rebuilds it from the changelog records emitted
    /// so far and the CTL table, as a new partition owner would.
    pub fn crash_and_restore(&mut self) -> Result<Vec<Output>, Error> {
        self.driver = Driver::restore(
            &self.config,
            &self.router,
            0,
            self.book.log.iter().cloned(),
            self.ctl.iter().filter_map(|(name, value)| {
                let name = name.parts();
                let (named, _) = self.router.ctl(name.entity, name.param)?;
                Some((named, *value))
            }),
        )
        .map_err(Error::Restore)?;
        let mut out = Vec::new();
        if let Some(now) = self.now {
            let mut sink = Recording {
                book: &mut self.book,
                out: &mut out,
            };
            self.driver
                .start(now, &mut sink)
                .map_err(|error| Error::Engine { line: 0, error })?;
        }
        Ok(out)
    }

    /// The view of a task at the simulator's clock.
    pub fn explain(&self, task: &str) -> Option<(Timestamp, TaskView)> {
        let now = self.now?;
        Some((now, self.driver.engine().task_view(task, now)?))
    }

    /// The shard.
    pub fn engine(&self) -> &Engine {
        self.driver.engine()
    }
}

/// Feeds input lines through `sim`, handing each step's outputs to `sink`
/// as they happen: the one loop behind `reactor simulate` and the golden
/// scenarios. With `crash_after = Some(n)` the engine is dropped after the
/// n-th input and restored from its changelog; with `until` the clock is
/// advanced to that time at the end.
pub fn drive<E: From<Error>>(
    sim: &mut Simulator,
    lines: impl IntoIterator<Item = Result<String, E>>,
    crash_after: Option<usize>,
    until: Option<Timestamp>,
    mut sink: impl FnMut(Vec<Output>) -> Result<(), E>,
) -> Result<(), E> {
    let mut n = 0;
    for (k, text) in lines.into_iter().enumerate() {
        let text = text?;
        // Blank lines and `#` comments let scenario files explain themselves.
        if text.trim().is_empty() || text.trim_start().starts_with('#') {
            continue;
        }
        let line = parse_line(&text, k + 1)?;
        sink(sim.step(line, k + 1)?)?;
        n += 1;
        if crash_after == Some(n) {
            sink(sim.crash_and_restore()?)?;
        }
    }
    if let Some(until) = until {
        let mut out = Vec::new();
        sim.advance(until, &mut out)?;
        sink(out)?;
    }
    Ok(())
}

/// Runs a whole input text (see [`drive`]); changelog records are left out
/// of the result unless `changelog` is set.
pub fn run(
    config: Config,
    input: &str,
    until: Option<Timestamp>,
    crash_after: Option<usize>,
    changelog: bool,
) -> Result<(Simulator, Vec<Output>), Error> {
    let mut sim = Simulator::new(config);
    let mut out = Vec::new();
    drive(
        &mut sim,
        input.lines().map(|l| Ok(l.to_string())),
        crash_after,
        until,
        |step: Vec<Output>| {
            out.extend(
                step.into_iter()
                    .filter(|o| changelog || !matches!(o.action, Action::Changelog(_))),
            );
            Ok::<_, Error>(())
        },
    )?;
    Ok((sim, out))
}

/// Number of input lines (not blank, not comments) in `input`.
pub fn count_inputs(input: &str) -> usize {
    input
        .lines()
        .filter(|t| !t.trim().is_empty() && !t.trim_start().starts_with('#'))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec;

    const CONFIG: &str = r#"
[[task]]
id = "t"
trigger = "delta(dwh.orders/max_dt, 1h)"

[[stage]]
name = "price"
"#;

    fn refusal(line: &str) -> String {
        let config = crate::config::parse(CONFIG, "test.toml").unwrap().config;
        match run(config, line, None, None, false) {
            Err(Error::BadInput { line: 1, message }) => message,
            other => panic!("{line}: {:?}", other.map(|(_, out)| out)),
        }
    }

    fn deep(levels: usize) -> String {
        format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
    }

    /// `reactor simulate` refuses exactly what the Kafka decoders refuse,
    /// with the same reason.
    #[test]
    fn simulate_refuses_what_kafka_refuses() {
        let at = r#""at":"2024-06-01T00:00:00Z""#;
        let value = r#""value":"2024-06-01T00:00:00Z""#;
        let long = "x".repeat(codec::limits::MAX_NAME_BYTES + 1);
        let cases: Vec<(String, Result<(), codec::DecodeError>)> = vec![
            (
                format!(r#"{{{at},"ctl":{{"entity":"","param":"max_dt",{value}}}}}"#),
                codec::decode_ctl_change(
                    format!(r#"{{"entity":"","param":"max_dt",{value}}}"#).as_bytes(),
                )
                .map(drop),
            ),
            (
                format!(r#"{{{at},"ctl":{{"entity":"{long}","param":"max_dt",{value}}}}}"#),
                codec::decode_ctl_change(
                    format!(r#"{{"entity":"{long}","param":"max_dt",{value}}}"#).as_bytes(),
                )
                .map(drop),
            ),
            (
                format!(r#"{{{at},"offer":{{"id":"","body":{{"a":1}}}}}}"#),
                codec::decode_offer_change(None, Some(br#"{"offer_id":"","body":{"a":1}}"#))
                    .map(drop),
            ),
            (
                format!(r#"{{{at},"offer":{{"id":"o","patch":{{"a":{}}}}}}}"#, deep(40)),
                codec::decode_offer_change(
                    None,
                    Some(format!(r#"{{"offer_id":"o","patch":{{"a":{}}}}}"#, deep(40)).as_bytes()),
                )
                .map(drop),
            ),
            (
                format!(r#"{{{at},"command":{{"op":"pause","task":""}}}}"#),
                codec::decode_command(br#"{"pause":{"task":""}}"#).map(drop),
            ),
            (
                format!(r#"{{{at},"command":{{"op":"rescan","stage":"price","when":" "}}}}"#),
                codec::decode_command(br#"{"rescan":{"stage":"price","when":" "}}"#).map(drop),
            ),
            (
                format!(
                    r#"{{{at},"command":{{"op":"set_stage_state","offer":"o","stage":"price","state":{},"version":1}}}}"#,
                    deep(40)
                ),
                codec::decode_command(
                    format!(
                        r#"{{"set_stage_state":{{"offer_id":"o","stage":"price","state":{},"version":1}}}}"#,
                        deep(40)
                    )
                    .as_bytes(),
                )
                .map(drop),
            ),
        ];
        for (line, kafka) in cases {
            let kafka = kafka.expect_err(&line).to_string();
            assert_eq!(refusal(&line), kafka, "{line}");
        }
        // A stage result names its stage and offer.
        assert_eq!(
            refusal(&format!(
                r#"{{{at},"complete":{{"stage":"price","offer":"","status":"succeeded"}}}}"#
            )),
            "missing field `offer`"
        );
    }
}
