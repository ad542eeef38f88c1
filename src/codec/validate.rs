//! The rules that make a decoded input acceptable, in one place: the Kafka
//! decoders call them after reading the wire format, and `reactor simulate`
//! after reading its JSON lines, so both refuse exactly the same inputs.
//! Each returns the input as the engine takes it (a worker's over-long
//! error text cut to [`MAX_ERROR_BYTES`]), or why it is refused.

use jiff::Timestamp;

use super::ctl::CtlRecord;
use super::error::DecodeError;
use super::limits::{
    check_json, check_name, check_object, truncate_text, MAX_BODY_BYTES, MAX_ERROR_BYTES,
    MAX_STATE_BYTES,
};
use crate::engine::{Command, RunResult, Update};
use crate::offer::{Change, OfferChange};
use crate::ops::{Criteria, Kind, Mode, Recover, Search, MAX_SEARCH_LIMIT, STATES};

/// A CTL change: see [`parameter`].
pub fn ctl_change(
    entity: String,
    param: String,
    value: Timestamp,
) -> Result<CtlRecord, DecodeError> {
    parameter(&entity, &param)?;
    Ok(CtlRecord {
        entity,
        param,
        value,
    })
}

/// A CTL change's entity and parameter: non-empty, short, and together a
/// parameter name the trigger DSL and commands can write.
pub fn parameter(entity: &str, param: &str) -> Result<(), DecodeError> {
    check_present_name("entity", entity)?;
    check_present_name("param", param)?;
    crate::ctl::ParamName::check(entity, param).map_err(|source| DecodeError::ParamName {
        field: "entity, param",
        source,
    })
}

/// An offer change: a non-empty, short offer id; a body or patch within
/// [`MAX_BODY_BYTES`] and the nesting limit.
pub fn offer_change(change: OfferChange) -> Result<OfferChange, DecodeError> {
    let offer_id = name("offer_id", change.offer_id)?;
    match &change.change {
        Change::Body(body) => check_object("body", body, MAX_BODY_BYTES)?,
        Change::Patch(patch) => check_object("patch", patch, MAX_BODY_BYTES)?,
        Change::Deleted => {}
    }
    if let Some(source) = &change.source {
        check_name("source", source)?;
    }
    Ok(OfferChange { offer_id, ..change })
}

/// A worker's result: a non-empty, short run id; a stage's update within
/// [`MAX_BODY_BYTES`] and its state within [`MAX_STATE_BYTES`]. An error
/// text longer than [`MAX_ERROR_BYTES`] is cut, not refused: a failure
/// report is worth having even with a long stack trace.
pub fn run_result(mut result: RunResult) -> Result<RunResult, DecodeError> {
    result.run_id = name("run_id", result.run_id)?;
    if let Some(error) = &mut result.error {
        truncate_text(error, MAX_ERROR_BYTES);
    }
    match &result.stage.update {
        Some(Update::Patch(patch)) => check_object("update", patch, MAX_BODY_BYTES)?,
        Some(Update::Body(body)) => check_object("body", body, MAX_BODY_BYTES)?,
        None => {}
    }
    if let Some(state) = &result.stage.state {
        check_json("state", state, MAX_STATE_BYTES)?;
    }
    // A step's output joins its instance's context, which every later run
    // command of the instance carries: bounded like a stage state.
    if let Some(output) = &result.step.output {
        check_object("output", output, MAX_STATE_BYTES)?;
    }
    if result.step.next.len() > MAX_NEXT_JOBS {
        return Err(DecodeError::InvalidField {
            field: "next",
            reason: format!(
                "{} jobs, over the limit of {MAX_NEXT_JOBS}",
                result.step.next.len()
            ),
        });
    }
    for next in &mut result.step.next {
        next.job = name("next.job", std::mem::take(&mut next.job))?;
        if let Some(params) = &next.params {
            check_object("next.params", params, MAX_STATE_BYTES)?;
        }
    }
    Ok(result)
}

/// Most jobs one step result may add to its chain.
pub const MAX_NEXT_JOBS: usize = 100;

/// Most keys one launch command may name (a longer list is several
/// commands: `reactor launch --keys-file` splits them).
pub const MAX_LAUNCH_KEYS: usize = 10_000;

/// An operator command: every name non-empty and short, a state within
/// [`MAX_STATE_BYTES`], and a rescan filter, when given, not blank. (The
/// filter's CEL is compiled, with its own limits, when the command is
/// applied: a bad one is a `command_rejected` event.)
pub fn command(command: Command) -> Result<Command, DecodeError> {
    Ok(match command {
        Command::Pause { task } => Command::Pause {
            task: name("task", task)?,
        },
        Command::Resume { task } => Command::Resume {
            task: name("task", task)?,
        },
        Command::SetLast { task, param, value } => Command::SetLast {
            task: name("task", task)?,
            param,
            value,
        },
        Command::ClearLast { task, param } => Command::ClearLast {
            task: name("task", task)?,
            param,
        },
        Command::SetStageState {
            offer,
            stage,
            state,
            version,
        } => {
            check_json("state", &state, MAX_STATE_BYTES)?;
            Command::SetStageState {
                offer: name("offer_id", offer)?,
                stage: name("stage", stage)?,
                state,
                version,
            }
        }
        Command::Rescan { stage, when } => {
            if when.as_ref().is_some_and(|w| w.trim().is_empty()) {
                return Err(DecodeError::InvalidField {
                    field: "when",
                    reason: "empty; leave it out to rescan without a filter".to_string(),
                });
            }
            Command::Rescan {
                stage: name("stage", stage)?,
                when,
            }
        }
        Command::UnparkOffer { offer } => Command::UnparkOffer {
            offer: name("offer_id", offer)?,
        },
        Command::Launch {
            process,
            keys,
            params,
            position,
            reset,
            source,
        } => {
            if keys.is_empty() {
                return Err(DecodeError::MissingField("keys"));
            }
            if keys.len() > MAX_LAUNCH_KEYS {
                return Err(DecodeError::InvalidField {
                    field: "keys",
                    reason: format!("{} keys, over the limit of {MAX_LAUNCH_KEYS}", keys.len()),
                });
            }
            check_object("params", &params, MAX_STATE_BYTES)?;
            if let Some(source) = &source {
                check_name("source", source)?;
            }
            Command::Launch {
                process: name("process", process)?,
                keys: keys
                    .into_iter()
                    .map(|k| name("keys", k))
                    .collect::<Result<_, _>>()?,
                params,
                position,
                reset,
                source,
            }
        }
        Command::LaunchTask { task, params } => {
            for (k, v) in &params {
                check_name("task_params", k)?;
                check_name("task_params", v)?;
            }
            Command::LaunchTask {
                task: name("task", task)?,
                params,
            }
        }
        Command::Submit {
            job,
            key,
            params,
            position,
            priority,
        } => {
            check_object("params", &params, MAX_STATE_BYTES)?;
            Command::Submit {
                job: name("job", job)?,
                key: name("key", key)?,
                params,
                position,
                priority,
            }
        }
        Command::Cancel { process, key } => Command::Cancel {
            process: name("process", process)?,
            key: name("key", key)?,
        },
        Command::ResetKey { process, key } => Command::ResetKey {
            process: name("process", process)?,
            key: name("key", key)?,
        },
        Command::Search(s) => {
            if s.limit.is_some_and(|l| l == 0 || l > MAX_SEARCH_LIMIT) {
                return Err(DecodeError::InvalidField {
                    field: "limit",
                    reason: format!("must be 1 to {MAX_SEARCH_LIMIT}"),
                });
            }
            Command::Search(Search {
                id: name("id", s.id)?,
                criteria: criteria(s.criteria)?,
                limit: s.limit,
            })
        }
        Command::Recover(r) => {
            let mode = match r.mode {
                Mode::FromStep(step) => {
                    if r.criteria.kind.is_some_and(|k| k != Kind::Process) {
                        return Err(DecodeError::InvalidField {
                            field: "from_step",
                            reason: "only process instances have steps".to_string(),
                        });
                    }
                    Mode::FromStep(name("from_step", step)?)
                }
                mode => mode,
            };
            Command::Recover(Recover {
                id: name("id", r.id)?,
                criteria: criteria(r.criteria)?,
                mode,
                dry_run: r.dry_run,
            })
        }
        Command::CancelOperation { id } => Command::CancelOperation {
            id: name("id", id)?,
        },
    })
}

/// Operation criteria: every text given non-empty and short, a known
/// state, a non-empty time range, and a step only where there are steps.
fn criteria(c: Criteria) -> Result<Criteria, DecodeError> {
    let text = |field, t: Option<String>| t.map(|t| name(field, t)).transpose();
    let state = text("state", c.state)?;
    if let Some(s) = state.as_deref().filter(|s| !STATES.contains(s)) {
        return Err(DecodeError::InvalidField {
            field: "state",
            reason: format!("unknown state `{s}`, expected one of {}", STATES.join(", ")),
        });
    }
    if let (Some(since), Some(until)) = (c.since, c.until) {
        if since >= until {
            return Err(DecodeError::InvalidField {
                field: "until",
                reason: format!("{until} is not after `since` {since}"),
            });
        }
    }
    let step = text("step", c.step)?;
    if step.is_some() && c.kind.is_some_and(|k| k != Kind::Process) {
        return Err(DecodeError::InvalidField {
            field: "step",
            reason: "only process instances have steps".to_string(),
        });
    }
    Ok(Criteria {
        kind: c.kind,
        name: text("name", c.name)?,
        key: text("key", c.key)?,
        state,
        error: text("error", c.error)?,
        since: c.since,
        until: c.until,
        step,
    })
}

/// A record on a process's `on` topic: a short UTF-8 key, a value within
/// [`MAX_BODY_BYTES`] and the nesting limit (expressions walk it).
pub fn event_record(
    record: crate::engine::EventRecord,
) -> Result<crate::engine::EventRecord, DecodeError> {
    check_name("key", &record.key)?;
    check_json("value", &record.value, MAX_BODY_BYTES)?;
    for (k, v) in &record.headers {
        check_name("headers", k)?;
        check_name("headers", v)?;
    }
    Ok(record)
}

/// A name or id: non-empty and at most [`super::limits::MAX_NAME_BYTES`].
pub fn name(field: &'static str, text: String) -> Result<String, DecodeError> {
    check_present_name(field, &text)?;
    Ok(text)
}

/// [`name`] of a borrowed text.
fn check_present_name(field: &'static str, text: &str) -> Result<(), DecodeError> {
    if text.is_empty() {
        return Err(DecodeError::MissingField(field));
    }
    check_name(field, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::limits::{MAX_JSON_DEPTH, MAX_NAME_BYTES};
    use crate::run::Status;
    use serde_json::json;

    fn ts() -> Timestamp {
        "2024-06-01T00:00:00Z".parse().unwrap()
    }

    fn reason<T: std::fmt::Debug>(r: Result<T, DecodeError>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn ctl_names() {
        assert_eq!(
            reason(ctl_change(String::new(), "p".into(), ts())),
            "missing field `entity`"
        );
        assert!(reason(ctl_change("a b".into(), "p".into(), ts()))
            .starts_with("field `entity, param`: invalid parameter"));
        assert_eq!(
            reason(ctl_change("e".repeat(MAX_NAME_BYTES + 1), "p".into(), ts())),
            "field `entity`: 513 bytes, over the limit of 512"
        );
        assert!(ctl_change("dwh.orders".into(), "max_dt".into(), ts()).is_ok());
    }

    #[test]
    fn offer_limits() {
        let body = |v: serde_json::Value| v.as_object().unwrap().clone();
        let change = |id: &str, change| OfferChange {
            offer_id: id.into(),
            change,
            source: None,
        };
        assert_eq!(
            reason(offer_change(change("", Change::Deleted))),
            "missing field `offer_id`"
        );
        let big = Change::Body(body(json!({"x": "y".repeat(MAX_BODY_BYTES)})));
        assert!(reason(offer_change(change("o", big))).starts_with("field `body`: "));
        let mut deep = json!(1);
        for _ in 0..MAX_JSON_DEPTH {
            deep = serde_json::Value::Array(vec![deep]);
        }
        let deep = Change::Patch(body(json!({ "a": deep })));
        assert_eq!(
            reason(offer_change(change("o", deep))),
            "field `patch`: nested 33 levels deep, over the limit of 32"
        );
        assert!(offer_change(change("o", Change::Patch(body(json!({"a": 1}))))).is_ok());
    }

    #[test]
    fn results_keep_a_cut_error() {
        let mut r = RunResult::new("t#1", 1, Status::Failed);
        r.error = Some("e".repeat(MAX_ERROR_BYTES * 2));
        let r = run_result(r).unwrap();
        assert!(r.error.unwrap().len() <= MAX_ERROR_BYTES);
        let mut r = RunResult::new("p/o#1", 1, Status::Succeeded);
        r.stage.state = Some(json!("s".repeat(MAX_STATE_BYTES)));
        assert!(reason(run_result(r)).starts_with("field `state`: "));
        assert_eq!(
            reason(run_result(RunResult::new("", 1, Status::Succeeded))),
            "missing field `run_id`"
        );
    }

    #[test]
    fn command_names() {
        assert_eq!(
            reason(command(Command::Pause {
                task: String::new()
            })),
            "missing field `task`"
        );
        assert_eq!(
            reason(command(Command::Rescan {
                stage: "p".into(),
                when: Some(" ".into())
            })),
            "field `when`: empty; leave it out to rescan without a filter"
        );
        assert_eq!(
            reason(command(Command::UnparkOffer {
                offer: String::new()
            })),
            "missing field `offer_id`"
        );
    }
}
