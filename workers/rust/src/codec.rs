//! Run commands in, run results out: protobuf (Reactor's default) or the
//! proto3 JSON mapping (a value whose first non-blank byte is `{`).

use prost::Message;

use crate::json;
use crate::proto;
use crate::runs::{JobResult, Run, RunInfo, StageResult, StageRun, StepRun, TaskRun};

/// A record on a run topic that is not a usable `RunCommand`. Not
/// retryable: the record stays what it is.
#[derive(Debug, thiserror::Error)]
#[error("not a usable RunCommand: {0}")]
pub struct BadCommand(String);

/// Whether a record value is proto3 JSON rather than protobuf.
pub fn is_json(value: &[u8]) -> bool {
    value.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// Decodes a run command record; `headers` are the record's, in order.
pub fn decode(value: &[u8], headers: Vec<(String, Vec<u8>)>) -> Result<Run, BadCommand> {
    if value.is_empty() {
        return Err(BadCommand("empty record".into()));
    }
    let c: proto::RunCommand = if is_json(value) {
        serde_json::from_slice(value).map_err(|e| BadCommand(format!("JSON: {e}")))?
    } else {
        proto::RunCommand::decode(value).map_err(|e| BadCommand(format!("protobuf: {e}")))?
    };
    if c.run_id.is_empty() || c.reply_topic.is_empty() || c.reply_key.is_empty() {
        return Err(BadCommand(format!(
            "run {:?}: run_id, reply_topic and reply_key are required",
            c.run_id
        )));
    }
    let bad = |e: String| BadCommand(format!("run {}: {e}", c.run_id));
    let time = |t: &Option<pbjson_types::Timestamp>| {
        t.as_ref()
            .map(json::from_timestamp)
            .transpose()
            .map_err(bad)
    };
    let run = RunInfo {
        run_id: c.run_id.clone(),
        attempt: c.attempt,
        pass: c.pass,
        deadline: time(&c.deadline)?,
        issued_at: time(&c.issued_at)?,
        reply_topic: c.reply_topic.clone(),
        reply_key: c.reply_key.clone(),
        source: c.source.clone(),
        headers,
    };
    let object = |s: Option<pbjson_types::Struct>| {
        s.map(json::from_struct)
            .transpose()
            .map(Option::unwrap_or_default)
            .map_err(bad)
    };
    Ok(match c.kind.as_str() {
        "task" => Run::Task(TaskRun {
            run,
            task: c.task,
            params: c.params,
            snapshot: c
                .snapshot
                .iter()
                .map(|(k, t)| Ok((k.clone(), json::from_timestamp(t)?)))
                .collect::<Result<_, String>>()
                .map_err(bad)?,
        }),
        "stage" => Run::Stage(StageRun {
            run,
            stage: c.stage,
            offer_id: c.offer_id,
            version: c.version,
            offer: object(c.offer)?,
            state: c.state.map(json::from_value).transpose().map_err(bad)?,
        }),
        "step" => Run::Step(StepRun {
            run,
            process: c.process,
            key: c.key,
            instance: c.instance,
            step: c.step,
            job: c.job,
            args: object(c.args)?,
            context: object(c.context)?,
        }),
        other => return Err(bad(format!("unknown kind {other:?}"))),
    })
}

/// What a handler returned.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// A task's success.
    Task,
    /// A stage's success.
    Stage(StageResult),
    /// A step's success.
    Job(JobResult),
    /// A failure, with its text.
    Failed(String),
}

/// The `RunResult` for `run`: echoes `run_id`, `pass`, `reply_key` (and a
/// stage's `version`); a stage result that breaks the schema's rules fails
/// the run instead.
pub(crate) fn result(run: &Run, outcome: Outcome) -> proto::RunResult {
    let info = run.info();
    let mut r = proto::RunResult {
        run_id: info.run_id.clone(),
        pass: info.pass,
        reply_key: info.reply_key.clone(),
        status: proto::RunStatus::Succeeded as i32,
        ..Default::default()
    };
    if let Run::Stage(s) = run {
        r.version = s.version;
    }
    match outcome {
        Outcome::Task => {}
        Outcome::Stage(s) => {
            if let Err(e) = s.check() {
                return result(run, Outcome::Failed(e));
            }
            r.update = s.update.as_ref().map(json::to_struct);
            r.body = s.body.as_ref().map(json::to_struct);
            r.state = s.state.as_ref().map(json::to_value);
            r.clear_state = s.clear_state;
            r.timer = s.timer.map(json::to_timestamp);
            r.clear_timer = s.clear_timer;
        }
        Outcome::Job(j) => {
            r.output = j.output.as_ref().map(json::to_struct);
            r.next = j
                .next
                .iter()
                .map(|n| proto::NextJob {
                    job: n.job.clone(),
                    params: n.params.as_ref().map(json::to_struct),
                    position: n.position.as_str().to_string(),
                })
                .collect();
            r.goal_reached = j.goal_reached;
        }
        Outcome::Failed(error) => {
            r.status = proto::RunStatus::Failed as i32;
            r.error = error;
        }
    }
    r
}

/// A result as protobuf, or as compact proto3 JSON with the schema's field
/// names.
pub(crate) fn encode(result: &proto::RunResult, as_json: bool) -> Result<Vec<u8>, String> {
    if as_json {
        serde_json::to_vec(result).map_err(|e| format!("encoding the result as JSON: {e}"))
    } else {
        Ok(result.encode_to_vec())
    }
}
