//! `Event`: audit and alert events published to `reactor.events`. The wire
//! message is flat: `kind` names the event and only its details are set.

use jiff::Timestamp;

use super::error::{required, DecodeError};
use super::put::{put_bytes, put_str, put_ts};
use super::time::{optional_ts, required_ts, timestamp_to_proto};
use super::wire::{decode, encode_into, Format};
use crate::action::{Event, Subject};
use crate::duration;
use crate::ops::Match;
use crate::proto::v1;
use crate::run::Rejection;

/// The event names on the wire, as `Event::name` gives them; the run
/// lifecycle names (and `command_rejected`) serve every subject alike.
mod kind {
    pub(super) const CTL_MOVED_BACK: &str = "ctl_moved_back";
    pub(super) const RESULT_REJECTED: &str = "result_rejected";
    pub(super) const RUN_TIMED_OUT: &str = "run_timed_out";
    pub(super) const RUN_FAILED: &str = "run_failed";
    pub(super) const PARKED: &str = "parked";
    pub(super) const DEAD: &str = "dead";
    pub(super) const SLA_MISSED: &str = "sla_missed";
    pub(super) const COMMAND_REJECTED: &str = "command_rejected";
    pub(super) const STALE_VERSION: &str = "stale_version";
    pub(super) const PREDICATE_ERROR: &str = "predicate_error";
    pub(super) const PING_PONG: &str = "ping_pong";
    pub(super) const STAGE_STATE: &str = "stage_state";
    pub(super) const RESCAN_PROGRESS: &str = "rescan_progress";
    pub(super) const PROCESS_STARTED: &str = "process_started";
    pub(super) const PROCESS_SUCCEEDED: &str = "process_succeeded";
    pub(super) const PROCESS_FAILED: &str = "process_failed";
    pub(super) const PROCESS_CANCELLED: &str = "process_cancelled";
    pub(super) const PROCESS_TIMED_OUT: &str = "process_timed_out";
    pub(super) const PROCESS_IDLE: &str = "process_idle";
    pub(super) const LAUNCH_REJECTED: &str = "launch_rejected";
    pub(super) const LAUNCH_QUEUED: &str = "launch_queued";
    pub(super) const DEADLINE_EXCEEDED: &str = "deadline_exceeded";
    pub(super) const SEARCH_RESULT: &str = "search_result";
    pub(super) const RECOVERY_COUNTED: &str = "recovery_counted";
    pub(super) const RECOVERY_PROGRESS: &str = "recovery_progress";
    pub(super) const RECOVERED: &str = "recovered";
}

/// The event's name on the wire, as `Event` serializes it (`run_timed_out`).
pub fn event_kind(event: &Event) -> &'static str {
    event.name()
}

/// Sets a subject's fields on the wire message: `task`; `stage` and
/// `offer_id` (always both, even when one is empty: their presence marks a
/// stage event); `process`, `key` and the optional `instance`, `job`.
fn put_subject(m: &mut v1::Event, subject: &Subject) {
    match subject {
        Subject::Task { task } => m.task = task.clone(),
        Subject::Stage { stage, offer } => {
            m.stage = Some(stage.clone());
            m.offer_id = Some(offer.clone());
        }
        Subject::Process {
            process,
            key,
            instance,
            job,
        } => {
            m.process = Some(process.clone());
            m.key = Some(key.clone());
            m.instance = instance.clone();
            m.job = job.clone();
        }
    }
}

/// Encodes an event decided at `at`.
pub fn encode_event(event: &Event, at: Timestamp, format: Format) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_event_into(event, at, format, &mut buf);
    buf
}

/// [`encode_event`], appended to `buf`.
pub fn encode_event_into(event: &Event, at: Timestamp, format: Format, buf: &mut Vec<u8>) {
    if format == Format::Protobuf && put_process_event(event, at, buf) {
        return;
    }
    encode_event_message(event, at, format, buf);
}

/// The protobuf form of the two events every process instance makes
/// (started, succeeded), written straight, byte for byte as prost writes
/// the message (fields by tag; the subject's `optional` strings written
/// when set, even empty): the generated message has some forty fields, and
/// filling and measuring it was most of writing these two. `false`, and
/// nothing written, for any other event.
fn put_process_event(event: &Event, at: Timestamp, buf: &mut Vec<u8>) -> bool {
    let (subject, source) = match event {
        Event::ProcessStarted { subject, source } => (subject, source.as_deref()),
        Event::ProcessSucceeded { subject } => (subject, None),
        _ => return false,
    };
    let Subject::Process {
        process,
        key,
        instance,
        job,
    } = subject
    else {
        return false;
    };
    put_str(1, event_kind(event), buf);
    put_ts(3, at, buf);
    put_bytes(35, process.as_bytes(), buf);
    put_bytes(36, key.as_bytes(), buf);
    for (tag, text) in [
        (37, instance.as_deref()),
        (38, job.as_deref()),
        (39, source),
    ] {
        if let Some(text) = text {
            put_bytes(tag, text.as_bytes(), buf);
        }
    }
    true
}

/// [`encode_event_into`] through the generated message.
fn encode_event_message(event: &Event, at: Timestamp, format: Format, buf: &mut Vec<u8>) {
    let ts = |t: &Timestamp| Some(timestamp_to_proto(*t));
    let mut m = v1::Event {
        kind: event_kind(event).to_string(),
        at: ts(&at),
        ..Default::default()
    };
    if let Some(subject) = event.subject() {
        put_subject(&mut m, subject);
    }
    let on = |m: &mut v1::Event, stage: &str, offer: &str| {
        m.stage = Some(stage.to_string());
        m.offer_id = Some(offer.to_string());
    };
    match event {
        Event::CtlMovedBack {
            task,
            entity,
            param,
            previous,
            value,
        } => {
            m.task = task.clone();
            m.entity = Some(entity.clone());
            m.param = Some(param.clone());
            m.previous = ts(previous);
            m.value = ts(value);
        }
        Event::ResultRejected {
            run_id,
            pass,
            reason,
            ..
        } => {
            m.run_id = Some(run_id.as_str().to_owned());
            m.pass = Some(*pass);
            m.reason = Some(reason.as_str().to_string());
        }
        Event::RunTimedOut {
            run_id,
            attempt,
            restarted,
            ..
        } => {
            m.run_id = Some(run_id.as_str().to_owned());
            m.attempt = Some(*attempt);
            m.restarted = Some(*restarted);
        }
        Event::RunFailed {
            run_id,
            attempt,
            error,
            retry_at,
            ..
        } => {
            m.run_id = Some(run_id.as_str().to_owned());
            m.attempt = Some(*attempt);
            m.error = Some(error.clone());
            m.retry_at = ts(retry_at);
        }
        Event::Parked {
            tier, until, error, ..
        } => {
            m.tier = Some(tier_to_proto(*tier));
            m.until = ts(until);
            m.error = Some(error.clone());
        }
        Event::Dead {
            attempts, error, ..
        } => {
            m.attempts = Some(*attempts);
            m.error = Some(error.clone());
        }
        Event::SlaMissed {
            task,
            last_success,
            expect_every,
        } => {
            m.task = task.clone();
            m.last_success = last_success.as_ref().and_then(ts);
            m.expect_every = Some(expect_every.to_string());
        }
        Event::CommandRejected { reason, .. } => {
            m.reason = Some(reason.clone());
        }
        Event::ProcessStarted { source, .. } => m.source = source.clone(),
        Event::ProcessSucceeded { .. }
        | Event::ProcessTimedOut { .. }
        | Event::LaunchQueued { .. } => {}
        Event::ProcessFailed { reason, error, .. } => {
            m.reason = Some(reason.clone());
            m.error = Some(error.clone());
        }
        Event::ProcessCancelled { reason, .. } => m.reason = Some(reason.clone()),
        Event::ProcessIdle { idle_for, .. } => m.idle_for = Some(idle_for.to_string()),
        Event::LaunchRejected { reason, error, .. } => {
            m.reason = Some(reason.clone());
            m.error = error.clone();
        }
        Event::DeadlineExceeded { deadline, .. } => m.deadline = ts(deadline),
        Event::StaleVersion {
            stage,
            offer,
            run_id,
            computed_from,
            current,
        } => {
            on(&mut m, stage, offer);
            m.run_id = Some(run_id.as_str().to_owned());
            m.computed_from = Some(*computed_from);
            m.current = Some(*current);
        }
        Event::PredicateError {
            stage,
            offer,
            field,
            error,
        } => {
            on(&mut m, stage, offer);
            m.field = Some(field.clone());
            m.error = Some(error.clone());
        }
        Event::PingPong {
            offer,
            stage,
            runs,
            window,
            until,
        } => {
            on(&mut m, stage, offer);
            m.runs = Some(*runs);
            m.window = Some(window.to_string());
            m.until = ts(until);
        }
        Event::StageState {
            stage,
            offer,
            expected,
            version,
            applied,
        } => {
            on(&mut m, stage, offer);
            m.expected = Some(*expected);
            m.version = Some(*version);
            m.applied = Some(*applied);
        }
        Event::RescanProgress {
            stage,
            checked,
            queued,
            total,
            errors,
            done,
        } => {
            // About a stage over a partition, not one offer.
            m.stage = Some(stage.clone());
            m.checked = Some(*checked);
            m.queued = Some(*queued);
            m.total = Some(*total);
            m.errors = Some(*errors);
            m.done = Some(*done);
        }
        Event::SearchResult {
            op,
            partition,
            total,
            matches,
        } => {
            m.op = Some(op.clone());
            m.partition = Some(*partition);
            m.total = Some(*total);
            m.matches = matches.iter().map(match_to_proto).collect();
        }
        Event::RecoveryCounted {
            op,
            partition,
            total,
        } => {
            m.op = Some(op.clone());
            m.partition = Some(*partition);
            m.total = Some(*total);
        }
        Event::RecoveryProgress {
            op,
            partition,
            done,
            total,
            finished,
            cancelled,
        } => {
            m.op = Some(op.clone());
            m.partition = Some(*partition);
            m.recovered = Some(*done);
            m.total = Some(*total);
            m.finished = Some(*finished);
            m.cancelled = Some(*cancelled);
        }
        Event::Recovered { source, mode, .. } => {
            m.source = Some(source.clone());
            m.mode = Some(mode.clone());
        }
    }
    encode_into(&m, format, buf);
}

fn match_to_proto(x: &Match) -> v1::SearchMatch {
    v1::SearchMatch {
        kind: x.kind.to_string(),
        name: x.name.clone(),
        key: x.key.clone(),
        state: x.state.clone(),
        error: x.error.clone(),
        at: x.at.map(timestamp_to_proto),
        step: x.step.clone(),
        instance: x.instance.clone(),
        run_id: x.run_id.clone(),
        attempt: x.attempt,
    }
}

fn match_from_proto(m: v1::SearchMatch) -> Result<Match, DecodeError> {
    Ok(Match {
        kind: m.kind.parse().map_err(|_| DecodeError::InvalidField {
            field: "matches.kind",
            reason: format!("unknown kind `{}`", m.kind),
        })?,
        name: m.name,
        key: m.key,
        state: m.state,
        error: m.error,
        at: optional_ts("matches.at", m.at.as_ref())?,
        step: m.step,
        instance: m.instance,
        run_id: m.run_id,
        attempt: m.attempt,
    })
}

fn tier_to_proto(tier: usize) -> u32 {
    u32::try_from(tier).unwrap_or(u32::MAX)
}

/// Decodes an event and the time it was decided (protobuf or JSON), for
/// consumers and tests. An event with `stage` or `offer_id` set is a stage
/// event and must leave `task` empty; the run lifecycle kinds and
/// `command_rejected` are read as their stage variants then.
pub fn decode_event(bytes: &[u8]) -> Result<(Event, Timestamp), DecodeError> {
    let m: v1::Event = decode(bytes)?;
    let at = required_ts("at", m.at.as_ref())?;
    let subject = decode_subject(&m)?;
    let task = || match &subject {
        Subject::Task { task } => Ok(task.clone()),
        _ => Err(DecodeError::MissingField("task")),
    };
    let event = match m.kind.as_str() {
        kind::CTL_MOVED_BACK => Event::CtlMovedBack {
            task: task()?,
            entity: required("entity", m.entity)?,
            param: required("param", m.param)?,
            previous: required_ts("previous", m.previous.as_ref())?,
            value: required_ts("value", m.value.as_ref())?,
        },
        kind::RESULT_REJECTED => Event::ResultRejected {
            subject,
            run_id: required("run_id", m.run_id)?.into(),
            pass: required("pass", m.pass)?,
            reason: rejection(&required("reason", m.reason)?)?,
        },
        kind::RUN_TIMED_OUT => Event::RunTimedOut {
            subject,
            run_id: required("run_id", m.run_id)?.into(),
            attempt: required("attempt", m.attempt)?,
            restarted: required("restarted", m.restarted)?,
        },
        kind::RUN_FAILED => Event::RunFailed {
            subject,
            run_id: required("run_id", m.run_id)?.into(),
            attempt: required("attempt", m.attempt)?,
            error: required("error", m.error)?,
            retry_at: required_ts("retry_at", m.retry_at.as_ref())?,
        },
        kind::PARKED => Event::Parked {
            subject,
            tier: required("tier", m.tier)? as usize,
            until: required_ts("until", m.until.as_ref())?,
            error: required("error", m.error)?,
        },
        kind::DEAD => Event::Dead {
            subject,
            attempts: required("attempts", m.attempts)?,
            error: required("error", m.error)?,
        },
        kind::SLA_MISSED => Event::SlaMissed {
            task: task()?,
            last_success: optional_ts("last_success", m.last_success.as_ref())?,
            expect_every: duration_field("expect_every", m.expect_every)?,
        },
        kind::COMMAND_REJECTED => Event::CommandRejected {
            subject,
            reason: required("reason", m.reason)?,
        },
        kind::PROCESS_STARTED => Event::ProcessStarted {
            subject: process(subject)?,
            source: m.source,
        },
        kind::PROCESS_SUCCEEDED => Event::ProcessSucceeded {
            subject: process(subject)?,
        },
        kind::PROCESS_FAILED => Event::ProcessFailed {
            subject: process(subject)?,
            reason: required("reason", m.reason)?,
            error: required("error", m.error)?,
        },
        kind::PROCESS_CANCELLED => Event::ProcessCancelled {
            subject: process(subject)?,
            reason: required("reason", m.reason)?,
        },
        kind::PROCESS_TIMED_OUT => Event::ProcessTimedOut {
            subject: process(subject)?,
        },
        kind::PROCESS_IDLE => Event::ProcessIdle {
            subject: process(subject)?,
            idle_for: duration_field("idle_for", m.idle_for)?,
        },
        kind::LAUNCH_REJECTED => Event::LaunchRejected {
            subject,
            reason: required("reason", m.reason)?,
            error: m.error,
        },
        kind::LAUNCH_QUEUED => Event::LaunchQueued {
            subject: process(subject)?,
        },
        kind::DEADLINE_EXCEEDED => Event::DeadlineExceeded {
            subject: process(subject)?,
            deadline: required_ts("deadline", m.deadline.as_ref())?,
        },
        kind::STALE_VERSION => {
            let (stage, offer) = stage_offer(m.stage, m.offer_id)?;
            Event::StaleVersion {
                stage,
                offer,
                run_id: required("run_id", m.run_id)?.into(),
                computed_from: required("computed_from", m.computed_from)?,
                current: required("current", m.current)?,
            }
        }
        kind::PREDICATE_ERROR => {
            let (stage, offer) = stage_offer(m.stage, m.offer_id)?;
            Event::PredicateError {
                stage,
                offer,
                field: required("field", m.field)?,
                error: required("error", m.error)?,
            }
        }
        kind::PING_PONG => {
            let (stage, offer) = stage_offer(m.stage, m.offer_id)?;
            Event::PingPong {
                offer,
                stage,
                runs: required("runs", m.runs)?,
                window: duration_field("window", m.window)?,
                until: required_ts("until", m.until.as_ref())?,
            }
        }
        kind::STAGE_STATE => {
            let (stage, offer) = stage_offer(m.stage, m.offer_id)?;
            Event::StageState {
                stage,
                offer,
                expected: required("expected", m.expected)?,
                version: required("version", m.version)?,
                applied: required("applied", m.applied)?,
            }
        }
        kind::RESCAN_PROGRESS => Event::RescanProgress {
            stage: required("stage", m.stage)?,
            checked: required("checked", m.checked)?,
            queued: required("queued", m.queued)?,
            total: required("total", m.total)?,
            errors: required("errors", m.errors)?,
            done: required("done", m.done)?,
        },
        kind::SEARCH_RESULT => Event::SearchResult {
            op: required("op", m.op)?,
            partition: required("partition", m.partition)?,
            total: required("total", m.total)?,
            matches: m
                .matches
                .into_iter()
                .map(match_from_proto)
                .collect::<Result<_, _>>()?,
        },
        kind::RECOVERY_COUNTED => Event::RecoveryCounted {
            op: required("op", m.op)?,
            partition: required("partition", m.partition)?,
            total: required("total", m.total)?,
        },
        kind::RECOVERY_PROGRESS => Event::RecoveryProgress {
            op: required("op", m.op)?,
            partition: required("partition", m.partition)?,
            done: required("recovered", m.recovered)?,
            total: required("total", m.total)?,
            finished: required("finished", m.finished)?,
            cancelled: m.cancelled.unwrap_or(false),
        },
        kind::RECOVERED => Event::Recovered {
            subject,
            source: required("source", m.source)?,
            mode: required("mode", m.mode)?,
        },
        "" => return Err(DecodeError::MissingField("kind")),
        other => {
            return Err(DecodeError::InvalidField {
                field: "kind",
                reason: format!("unknown event `{other}`"),
            })
        }
    };
    Ok((event, at))
}

/// A process event's subject must name a process and key.
fn process(subject: Subject) -> Result<Subject, DecodeError> {
    match subject {
        Subject::Process { .. } => Ok(subject),
        _ => Err(DecodeError::MissingField("process")),
    }
}

/// What the wire message is about: a process (`process` + `key`), a stage
/// (`stage` and/or `offer_id` — a rejected stage command may name only one),
/// or a task. At most one kind of subject may be named.
fn decode_subject(m: &v1::Event) -> Result<Subject, DecodeError> {
    let about_stage = m.stage.is_some() || m.offer_id.is_some();
    let about_process = m.process.is_some() || m.key.is_some();
    let named =
        usize::from(about_stage) + usize::from(about_process) + usize::from(!m.task.is_empty());
    if named > 1 {
        return Err(DecodeError::AtMostOne(
            "`task`, `stage`/`offer_id` and `process`/`key`",
        ));
    }
    Ok(if about_process {
        Subject::Process {
            process: required("process", m.process.clone())?,
            key: required("key", m.key.clone())?,
            instance: m.instance.clone(),
            job: m.job.clone(),
        }
    } else if about_stage {
        Subject::Stage {
            stage: m.stage.clone().unwrap_or_default(),
            offer: m.offer_id.clone().unwrap_or_default(),
        }
    } else {
        Subject::Task {
            task: m.task.clone(),
        }
    })
}

fn stage_offer(
    stage: Option<String>,
    offer: Option<String>,
) -> Result<(String, String), DecodeError> {
    Ok((required("stage", stage)?, required("offer_id", offer)?))
}

/// A duration field as written by [`duration::Duration`]'s `Display` (`1d`, `1h30min`).
fn duration_field(
    field: &'static str,
    text: Option<String>,
) -> Result<duration::Duration, DecodeError> {
    duration::parse(&required(field, text)?).map_err(|e| DecodeError::InvalidField {
        field,
        reason: e.to_string(),
    })
}

/// A rejection reason code; parsed through serde so that the names stay
/// those of [`Rejection::as_str`] without a second list to maintain.
fn rejection(code: &str) -> Result<Rejection, DecodeError> {
    serde_json::from_value(serde_json::Value::String(code.to_string())).map_err(|_| {
        DecodeError::InvalidField {
            field: "reason",
            reason: format!("unknown rejection `{code}`"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::Duration;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    pub(crate) fn every_event() -> Vec<Event> {
        let task = || "orders_daily".to_string();
        let mut events = vec![
            Event::CtlMovedBack {
                task: task(),
                entity: "dwh.orders".into(),
                param: "max_dt".into(),
                previous: ts("2021-04-25T00:00:00Z"),
                value: ts("2021-04-24T00:00:00Z"),
            },
            Event::RunTimedOut {
                subject: Subject::task(task()),
                run_id: "orders_daily#3".into(),
                attempt: 1,
                restarted: false,
            },
            Event::RunFailed {
                subject: Subject::task(task()),
                run_id: "orders_daily#3".into(),
                attempt: 2,
                error: String::new(),
                retry_at: ts("2021-04-25T00:02:00Z"),
            },
            Event::Parked {
                subject: Subject::task(task()),
                tier: 2,
                until: ts("2021-04-26T00:00:00Z"),
                error: "db down".into(),
            },
            Event::Dead {
                subject: Subject::task(task()),
                attempts: 5,
                error: "db down".into(),
            },
            Event::SlaMissed {
                task: task(),
                last_success: None,
                expect_every: Duration::from_secs(86_400),
            },
            Event::SlaMissed {
                task: task(),
                last_success: Some(ts("2021-04-20T00:00:00Z")),
                expect_every: Duration::from_secs(5_400),
            },
            Event::CommandRejected {
                subject: Subject::task(task()),
                reason: "unknown task".into(),
            },
        ];
        for reason in [
            Rejection::UnknownTarget,
            Rejection::BadRunId,
            Rejection::NotCurrent,
            Rejection::StalePass,
        ] {
            events.push(Event::ResultRejected {
                subject: Subject::task(task()),
                run_id: "orders_daily#3".into(),
                pass: 4,
                reason,
            });
            events.push(Event::ResultRejected {
                subject: Subject::stage("price", "o1"),
                run_id: "price/o1#3".into(),
                pass: 4,
                reason,
            });
        }
        events.extend(every_stage_event());
        let step = || Subject::Process {
            process: "payout".into(),
            key: "u1".into(),
            instance: Some("payout/u1#1".into()),
            job: Some("send_tx".into()),
        };
        events.push(Event::RunFailed {
            subject: step(),
            run_id: "payout/u1#1.1#2".into(),
            attempt: 2,
            error: "node down".into(),
            retry_at: ts("2024-06-01T00:02:00Z"),
        });
        events.push(Event::CommandRejected {
            subject: Subject::Process {
                process: "payout".into(),
                key: "u1".into(),
                instance: None,
                job: None,
            },
            reason: "unknown process".into(),
        });
        events.push(Event::Dead {
            subject: step(),
            attempts: 5,
            error: "node down".into(),
        });
        let key = || Subject::Process {
            process: "payout".into(),
            key: "u1".into(),
            instance: Some("payout/u1#1".into()),
            job: None,
        };
        events.extend([
            Event::ProcessStarted {
                subject: key(),
                source: Some("op:7".into()),
            },
            Event::ProcessStarted {
                subject: key(),
                source: None,
            },
            Event::ProcessSucceeded { subject: key() },
            Event::ProcessFailed {
                subject: key(),
                reason: "deadline".into(),
                error: "job deadline passed".into(),
            },
            Event::ProcessCancelled {
                subject: key(),
                reason: "operator".into(),
            },
            Event::ProcessTimedOut { subject: key() },
            Event::ProcessIdle {
                subject: step(),
                idle_for: Duration::from_secs(1800),
            },
            Event::LaunchRejected {
                subject: key(),
                reason: "validation".into(),
                error: Some("no such key: amount".into()),
            },
            Event::LaunchRejected {
                subject: Subject::task(task()),
                reason: "active".into(),
                error: None,
            },
            Event::LaunchQueued { subject: key() },
            Event::DeadlineExceeded {
                subject: step(),
                deadline: ts("2024-06-01T06:00:00Z"),
            },
            Event::SearchResult {
                op: "op1".into(),
                partition: 3,
                total: 2,
                matches: vec![
                    Match {
                        kind: crate::ops::Kind::Process,
                        name: "payout".into(),
                        key: "u1".into(),
                        state: "failed".into(),
                        error: Some("node down".into()),
                        at: Some(ts("2024-06-01T00:00:00Z")),
                        step: Some("send_tx".into()),
                        instance: Some("payout/u1#1".into()),
                        run_id: Some("payout/u1#1.1#5".into()),
                        attempt: Some(5),
                    },
                    Match {
                        kind: crate::ops::Kind::Task,
                        name: "orders_daily".into(),
                        key: "reports".into(),
                        state: "idle".into(),
                        error: None,
                        at: None,
                        step: None,
                        instance: None,
                        run_id: None,
                        attempt: None,
                    },
                ],
            },
            Event::SearchResult {
                op: "op1".into(),
                partition: 0,
                total: 0,
                matches: vec![],
            },
            Event::RecoveryCounted {
                op: "op2".into(),
                partition: 0,
                total: 0,
            },
            Event::RecoveryProgress {
                op: "op2".into(),
                partition: 5,
                done: 1000,
                total: 1200,
                finished: false,
                cancelled: false,
            },
            Event::RecoveryProgress {
                op: "op2".into(),
                partition: 5,
                done: 1000,
                total: 1200,
                finished: true,
                cancelled: true,
            },
            Event::Recovered {
                subject: step(),
                source: "op:op2".into(),
                mode: "from_step".into(),
            },
            Event::Recovered {
                subject: Subject::stage(stage_name(), "o1"),
                source: "op:op2".into(),
                mode: "retry".into(),
            },
            Event::Recovered {
                subject: Subject::task(task()),
                source: "op:op2".into(),
                mode: "from_start".into(),
            },
        ]);
        events
    }

    fn stage_name() -> String {
        "price".to_string()
    }

    /// One of each stage event, in their order in `Event`.
    fn every_stage_event() -> Vec<Event> {
        let stage = || "price".to_string();
        let offer = || "o1".to_string();
        vec![
            Event::RunTimedOut {
                subject: Subject::stage(stage(), offer()),
                run_id: "price/o1#3".into(),
                attempt: 1,
                restarted: true,
            },
            Event::RunFailed {
                subject: Subject::stage(stage(), offer()),
                run_id: "price/o1#3".into(),
                attempt: 2,
                error: "model down".into(),
                retry_at: ts("2024-06-01T00:02:00Z"),
            },
            Event::Parked {
                subject: Subject::stage(stage(), offer()),
                tier: 1,
                until: ts("2024-06-01T00:30:00Z"),
                error: "model down".into(),
            },
            Event::Dead {
                subject: Subject::stage(stage(), offer()),
                attempts: 5,
                error: String::new(),
            },
            Event::StaleVersion {
                stage: stage(),
                offer: offer(),
                run_id: "price/o1#3".into(),
                computed_from: 4,
                current: 5,
            },
            Event::PredicateError {
                stage: stage(),
                offer: offer(),
                field: "when".into(),
                error: "no such key: price".into(),
            },
            Event::PingPong {
                offer: offer(),
                stage: stage(),
                runs: 21,
                window: Duration::from_secs(60),
                until: ts("2024-06-01T01:00:00Z"),
            },
            Event::StageState {
                stage: stage(),
                offer: offer(),
                expected: 4,
                version: 5,
                applied: true,
            },
            Event::StageState {
                stage: stage(),
                offer: offer(),
                expected: 3,
                version: 5,
                applied: false,
            },
            Event::RescanProgress {
                stage: stage(),
                checked: 0,
                queued: 0,
                total: 0,
                errors: 0,
                done: false,
            },
            Event::RescanProgress {
                stage: stage(),
                checked: 1000,
                queued: 12,
                total: 1000,
                errors: 1,
                done: true,
            },
            Event::CommandRejected {
                subject: Subject::stage(stage(), offer()),
                reason: "version 3 is not the current 5".into(),
            },
            Event::CommandRejected {
                subject: Subject::stage(stage(), ""),
                reason: "unknown stage `price`".into(),
            },
            Event::CommandRejected {
                subject: Subject::stage("", offer()),
                reason: "offer not parked".into(),
            },
        ]
    }

    /// Process events written straight are the bytes the generated
    /// message encodes to, for every event that has them and every way
    /// their optional parts can be (set, set empty, unset).
    #[test]
    fn process_events_are_written_as_prost_writes_them() {
        let at = ts("2021-04-25T03:27:33.123456789Z");
        let texts = [None, Some(String::new()), Some("payout/u1#3".to_string())];
        let mut events = every_event();
        for instance in &texts {
            for job in &texts {
                for (process, key) in [("payout", "u1"), ("", "")] {
                    let subject = Subject::Process {
                        process: process.into(),
                        key: key.into(),
                        instance: instance.clone(),
                        job: job.clone(),
                    };
                    events.push(Event::ProcessSucceeded {
                        subject: subject.clone(),
                    });
                    for source in &texts {
                        events.push(Event::ProcessStarted {
                            subject: subject.clone(),
                            source: source.clone(),
                        });
                    }
                }
            }
        }
        let mut straight = 0;
        for e in &events {
            let mut ours = Vec::new();
            if put_process_event(e, at, &mut ours) {
                straight += 1;
                let mut theirs = Vec::new();
                encode_event_message(e, at, Format::Protobuf, &mut theirs);
                assert_eq!(ours, theirs, "{e:?}");
            } else {
                assert!(ours.is_empty(), "{e:?}");
            }
        }
        assert!(straight >= 72, "{straight}");
    }

    #[test]
    fn round_trips_in_both_formats() {
        let at = ts("2021-04-25T03:27:33.123Z");
        for format in [Format::Protobuf, Format::Json] {
            for e in every_event() {
                let bytes = encode_event(&e, at, format);
                assert_eq!(decode_event(&bytes).unwrap(), (e, at), "{format:?}");
            }
        }
    }

    #[test]
    fn kinds_match_the_core_serialization() {
        for e in every_event() {
            let json = serde_json::to_value(&e).unwrap();
            assert_eq!(json["event"], event_kind(&e));
        }
    }

    #[test]
    fn json_shows_only_the_event_details() {
        let e = Event::SlaMissed {
            task: "orders_daily".into(),
            last_success: None,
            expect_every: Duration::from_secs(86_400),
        };
        let bytes = encode_event(&e, ts("2021-04-25T00:00:00Z"), Format::Json);
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "kind": "sla_missed",
                "task": "orders_daily",
                "at": "2021-04-25T00:00:00+00:00",
                "expect_every": "1d",
            })
        );
        // A set optional keeps its zero value: `restarted: false` is shown.
        let e = &every_event()[1];
        let json: serde_json::Value =
            serde_json::from_slice(&encode_event(e, ts("2021-04-25T00:00:00Z"), Format::Json))
                .unwrap();
        assert_eq!(json["restarted"], false);
    }

    #[test]
    fn stage_events_json() {
        let json = |e: &Event| -> serde_json::Value {
            serde_json::from_slice(&encode_event(e, ts("2024-06-01T00:00:00Z"), Format::Json))
                .unwrap()
        };
        let all = every_stage_event();
        // A stage lifecycle event has the task's kind, with stage and offer.
        assert_eq!(
            json(&all[2]),
            serde_json::json!({
                "kind": "parked",
                "at": "2024-06-01T00:00:00+00:00",
                "stage": "price",
                "offer_id": "o1",
                "tier": 1,
                "until": "2024-06-01T00:30:00+00:00",
                "error": "model down",
            })
        );
        assert_eq!(
            json(&all[4]),
            serde_json::json!({
                "kind": "stale_version",
                "at": "2024-06-01T00:00:00+00:00",
                "stage": "price",
                "offer_id": "o1",
                "run_id": "price/o1#3",
                "computed_from": "4",
                "current": "5",
            })
        );
        assert_eq!(json(&all[6])["window"], "1min");
        // A rescan is about a stage, not an offer; zero counts are shown.
        assert_eq!(
            json(&all[9]),
            serde_json::json!({
                "kind": "rescan_progress",
                "at": "2024-06-01T00:00:00+00:00",
                "stage": "price",
                "checked": "0",
                "queued": "0",
                "total": "0",
                "errors": "0",
                "done": false,
            })
        );
        // A rejected command about a stage only still marks the offer.
        assert_eq!(json(&all[12])["offer_id"], "");
    }

    #[test]
    fn stage_and_task_are_told_apart() {
        let at = r#""at":"2024-06-01T00:00:00Z""#;
        let decode = |json: String| decode_event(json.as_bytes()).map(|(e, _)| e);
        let dead = |who: &str| {
            decode(format!(
                r#"{{"kind":"dead",{at},{who},"attempts":3,"error":"x"}}"#
            ))
        };
        assert!(matches!(dead(r#""task":"t""#).unwrap(), Event::Dead { .. }));
        assert!(matches!(
            dead(r#""stage":"price","offer_id":"o1""#).unwrap(),
            Event::Dead {
                subject: Subject::Stage { .. },
                ..
            }
        ));
        assert!(matches!(
            dead(r#""process":"payout","key":"u1","job":"send_tx""#).unwrap(),
            Event::Dead {
                subject: Subject::Process { .. },
                ..
            }
        ));
        assert_eq!(
            dead(r#""process":"payout""#).unwrap_err().to_string(),
            "missing field `key`"
        );
        assert_eq!(
            dead(r#""task":"t","stage":"price","offer_id":"o1""#)
                .unwrap_err()
                .to_string(),
            "at most one of `task`, `stage`/`offer_id` and `process`/`key` may be set"
        );
        let rejected = decode(format!(
            r#"{{"kind":"command_rejected",{at},"offer_id":"o1","reason":"r"}}"#
        ))
        .unwrap();
        assert_eq!(
            rejected,
            Event::CommandRejected {
                subject: Subject::stage("", "o1"),
                reason: "r".into(),
            }
        );
        // Stage-only kinds need a stage, not a task.
        assert_eq!(
            decode(format!(
                r#"{{"kind":"stale_version",{at},"task":"t","run_id":"r","computed_from":1,"current":2}}"#
            ))
            .unwrap_err()
            .to_string(),
            "missing field `stage`"
        );
        assert!(decode(format!(
            r#"{{"kind":"ping_pong",{at},"stage":"p","offer_id":"o","runs":3,"window":"often","until":"2024-06-01T01:00:00Z"}}"#
        ))
        .unwrap_err()
        .to_string()
        .starts_with("field `window`: invalid duration"));
    }

    #[test]
    fn invalid_events() {
        let reason = |json: &str| decode_event(json.as_bytes()).unwrap_err().to_string();
        let at = r#""task":"t","at":"2021-04-25T00:00:00Z""#;
        assert_eq!(reason(&format!(r#"{{{at}}}"#)), "missing field `kind`");
        assert_eq!(
            reason(&format!(r#"{{"kind":"fired",{at}}}"#)),
            "field `kind`: unknown event `fired`"
        );
        assert_eq!(
            reason(&format!(r#"{{"kind":"dead",{at},"error":"x"}}"#)),
            "missing field `attempts`"
        );
        assert_eq!(
            reason(&format!(
                r#"{{"kind":"result_rejected",{at},"run_id":"t#1","pass":1,"reason":"late"}}"#
            )),
            "field `reason`: unknown rejection `late`"
        );
        assert!(reason(&format!(
            r#"{{"kind":"sla_missed",{at},"expect_every":"soon"}}"#
        ))
        .starts_with("field `expect_every`: invalid duration"));
        assert_eq!(
            reason(r#"{"kind":"dead","task":"t"}"#),
            "missing field `at`"
        );
    }
}
