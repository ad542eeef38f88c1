//! The JSON lines of `reactor simulate`: timed inputs, each checked as
//! Kafka's path checks the record it stands for, and the outputs.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::action::Action;
use crate::engine::Command;
use crate::offer::{self, Body, Change, OfferChange};
use crate::run::Status;

use super::Error;

/// One timed input line.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputLine {
    /// When it happens.
    pub at: Timestamp,
    /// A CTL change.
    #[serde(default)]
    pub ctl: Option<CtlInput>,
    /// A worker's result for a task's run.
    #[serde(default)]
    pub complete: Option<Complete>,
    /// An operator command: `{"op": "pause", "task": …}`, or one command
    /// named by its key, as on the wire: `{"reset_key": {"process": …, "key": …}}`.
    #[serde(default, deserialize_with = "command")]
    pub command: Option<Command>,
    /// An offer change from outside.
    #[serde(default)]
    pub offer: Option<OfferInput>,
    /// Launch a process for keys: `{"process": …, "keys": […], "params": {…}, "position": "back"}`.
    #[serde(default)]
    pub launch: Option<LaunchInput>,
    /// Submit a job: `{"job": …, "key": …, "params": {…}, "position": "front"}`.
    #[serde(default)]
    pub submit: Option<SubmitInput>,
    /// A record on a topic a process's `on` names: `{"topic": …, "key": …, "value": {…}}`.
    #[serde(default)]
    pub record: Option<crate::engine::EventRecord>,
}

/// `{"process": …, "keys": […], "params": {…}, "position": "back"|"front"}`
/// (or `"task": …` with string `params` to run a task now).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchInput {
    /// The process.
    #[serde(default)]
    pub process: Option<String>,
    /// A task to run now instead.
    #[serde(default)]
    pub task: Option<String>,
    /// The keys (a process launch).
    #[serde(default)]
    pub keys: Vec<String>,
    /// One key (shorthand for `keys: [key]`).
    #[serde(default)]
    pub key: Option<String>,
    /// Launch parameters.
    #[serde(default)]
    pub params: serde_json::Map<String, serde_json::Value>,
    /// `back` (default) or `front`.
    #[serde(default)]
    pub position: crate::process::Position,
    /// Clear each key's goal first.
    #[serde(default)]
    pub reset: bool,
}

/// `{"job": …, "key": …, "params": {…}, "position": …, "priority": N}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitInput {
    /// The job.
    pub job: String,
    /// The key.
    pub key: String,
    /// Parameters.
    #[serde(default)]
    pub params: Body,
    /// `back` (default) or `front`.
    #[serde(default)]
    pub position: crate::process::Position,
    /// Queue priority.
    #[serde(default)]
    pub priority: Option<i64>,
}

/// A command in either form: tagged by `op`, or one key naming the command.
fn command<'de, D>(d: D) -> Result<Option<Command>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::de::Error as _;
    let value = serde_json::Value::deserialize(d)?;
    let value = match value {
        serde_json::Value::Object(map) if !map.contains_key("op") && map.len() == 1 => {
            let Some((op, inner)) = map.into_iter().next() else {
                return Err(D::Error::custom("an empty command"));
            };
            let serde_json::Value::Object(mut inner) = inner else {
                return Err(D::Error::custom(format!("`{op}` takes an object")));
            };
            inner.insert("op".to_string(), serde_json::Value::String(op));
            serde_json::Value::Object(inner)
        }
        other => other,
    };
    serde_json::from_value(value)
        .map(Some)
        .map_err(D::Error::custom)
}

/// An operation written without an `id` (the CLI always gives one) is
/// named after its input line: `line7`, so its `source` is `op:line7`.
pub(super) fn name_operation(command: Command, line: usize) -> Command {
    let id = || format!("line{line}");
    match command {
        Command::Search(mut s) if s.id.is_empty() => {
            s.id = id();
            Command::Search(s)
        }
        Command::Recover(mut r) if r.id.is_empty() => {
            r.id = id();
            Command::Recover(r)
        }
        Command::CancelOperation { id: op } if op.is_empty() => {
            Command::CancelOperation { id: id() }
        }
        command => command,
    }
}

/// `{"id": …, "body": {…}}`, `{"id": …, "patch": {…}}` or `{"id": …, "deleted": true}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OfferInput {
    /// Offer id.
    pub id: String,
    /// The whole new body.
    #[serde(default)]
    pub body: Option<Body>,
    /// A JSON merge patch (RFC 7396).
    #[serde(default)]
    pub patch: Option<Body>,
    /// Delete the offer.
    #[serde(default)]
    pub deleted: bool,
    /// Who made the change.
    #[serde(default)]
    pub source: Option<String>,
}

impl LaunchInput {
    pub(super) fn into_command(self, line: usize) -> Result<Command, Error> {
        let bad = |message: &str| Error::BadInput {
            line,
            message: message.to_string(),
        };
        match (self.process, self.task) {
            (Some(process), None) => {
                let mut keys = self.keys;
                keys.extend(self.key);
                if keys.is_empty() || keys.iter().any(String::is_empty) {
                    return Err(bad("a `launch` needs `keys` (or `key`), none empty"));
                }
                Ok(Command::Launch {
                    process,
                    keys,
                    params: self.params,
                    position: self.position,
                    reset: self.reset,
                    source: None,
                })
            }
            (None, Some(task)) => {
                let params = self
                    .params
                    .into_iter()
                    .map(|(k, v)| match v {
                        serde_json::Value::String(s) => Ok((k, s)),
                        other => Ok((k, other.to_string())),
                    })
                    .collect::<Result<_, Error>>()?;
                Ok(Command::LaunchTask { task, params })
            }
            _ => Err(bad("a `launch` names a `process` or a `task`")),
        }
    }
}

impl OfferInput {
    pub(super) fn into_change(self, line: usize) -> Result<OfferChange, Error> {
        let change = match (self.body, self.patch, self.deleted) {
            (Some(mut body), None, false) => {
                offer::normalize_body(&mut body);
                Change::Body(body)
            }
            (None, Some(mut patch), false) => {
                offer::normalize_body(&mut patch);
                Change::Patch(patch)
            }
            (None, None, true) => Change::Deleted,
            _ => {
                return Err(Error::BadInput {
                    line,
                    message: "an `offer` needs exactly one of `body`, `patch`, `deleted: true`"
                        .to_string(),
                })
            }
        };
        Ok(OfferChange {
            offer_id: self.id,
            change,
            source: self.source,
        })
    }
}

/// `{"entity": …, "param": …, "value": …}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CtlInput {
    /// Entity.
    pub entity: String,
    /// Parameter.
    pub param: String,
    /// New value.
    pub value: Timestamp,
}

/// `{"task": …, "status": "succeeded"|"failed", "error": …, "attempt": N}`,
/// for a stage `{"stage": …, "offer": …, "status": …, "update": {…},
/// "state": …, "timer": …}`, for a process step `{"process": …, "key": …,
/// "status": …, "output": {…}, "next": [{"job": …, "position": …}],
/// "goal_reached": true}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Complete {
    /// The task.
    #[serde(default)]
    pub task: Option<String>,
    /// The stage (with `offer`).
    #[serde(default)]
    pub stage: Option<String>,
    /// The offer (with `stage`).
    #[serde(default)]
    pub offer: Option<String>,
    /// A JSON merge patch for the offer body.
    #[serde(default)]
    pub update: Option<Body>,
    /// A whole new offer body.
    #[serde(default)]
    pub body: Option<Body>,
    /// The stage's new state; `null` clears it.
    #[serde(default, deserialize_with = "present")]
    pub state: Option<serde_json::Value>,
    /// The stage's new timer; `null` clears it.
    #[serde(default, deserialize_with = "present")]
    pub timer: Option<Option<Timestamp>>,
    /// The version the result claims to be computed from (default: the run's).
    #[serde(default)]
    pub version: Option<u64>,
    /// Verdict.
    pub status: Status,
    /// Error text of a failure.
    #[serde(default)]
    pub error: Option<String>,
    /// Answer with the run id and pass of this earlier attempt instead of the current one.
    #[serde(default)]
    pub attempt: Option<u32>,
    /// The process (a submitted job's: the job), with `key`.
    #[serde(default)]
    pub process: Option<String>,
    /// The business key, with `process`.
    #[serde(default)]
    pub key: Option<String>,
    /// A step's output, merged into its instance's context.
    #[serde(default)]
    pub output: Option<Body>,
    /// Jobs the step adds to its chain.
    #[serde(default)]
    pub next: Vec<crate::process::NextJob>,
    /// The key's goal is reached.
    #[serde(default)]
    pub goal_reached: bool,
}

/// Tells a field given as `null` (`Some(null)`) from a missing one (`None`).
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// One output line: an action and when it happened.
#[derive(Debug, Clone, Serialize)]
pub struct Output {
    /// Clock time of the decision.
    pub at: Timestamp,
    /// The decision.
    #[serde(flatten)]
    pub action: Action,
}

/// Parses one input line.
pub fn parse_line(text: &str, line: usize) -> Result<InputLine, Error> {
    let input: InputLine = serde_json::from_str(text).map_err(|e| Error::BadInput {
        line,
        message: e.to_string(),
    })?;
    let given = [
        input.ctl.is_some(),
        input.complete.is_some(),
        input.command.is_some(),
        input.offer.is_some(),
        input.launch.is_some(),
        input.submit.is_some(),
        input.record.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    if given != 1 {
        return Err(Error::BadInput {
            line,
            message: "give exactly one of `ctl`, `complete`, `command`, `offer`, `launch`, \
                      `submit`, `record`"
                .to_string(),
        });
    }
    Ok(input)
}
