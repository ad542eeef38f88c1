//! `Event`: audit and alert events published to `reactor.events`. The wire
//! message is flat: `kind` names the event and only its details are set.

use jiff::Timestamp;

use super::error::{non_empty, required, DecodeError};
use super::time::{optional_ts, required_ts, timestamp_to_proto};
use super::wire::{decode, encode, Format};
use crate::action::Event;
use crate::duration;
use crate::proto::v1;
use crate::run::Rejection;

/// The event's name on the wire, as `Event` serializes it (`run_timed_out`).
pub fn event_kind(event: &Event) -> &'static str {
    match event {
        Event::CtlMovedBack { .. } => "ctl_moved_back",
        Event::ResultRejected { .. } => "result_rejected",
        Event::RunTimedOut { .. } => "run_timed_out",
        Event::RunFailed { .. } => "run_failed",
        Event::Parked { .. } => "parked",
        Event::Dead { .. } => "dead",
        Event::SlaMissed { .. } => "sla_missed",
        Event::CommandRejected { .. } => "command_rejected",
        _ => todo!("stage event names"),
    }
}

/// Encodes an event decided at `at`.
pub fn encode_event(event: &Event, at: Timestamp, format: Format) -> Vec<u8> {
    let ts = |t: &Timestamp| Some(timestamp_to_proto(*t));
    let mut m = v1::Event {
        kind: event_kind(event).to_string(),
        at: ts(&at),
        ..Default::default()
    };
    #[allow(clippy::match_wildcard_for_single_variants)]
    match event {
        Event::StageResultRejected { .. }
        | Event::StageRunTimedOut { .. }
        | Event::StageRunFailed { .. }
        | Event::StageParked { .. }
        | Event::StageDead { .. }
        | Event::StaleVersion { .. }
        | Event::PredicateError { .. }
        | Event::PingPong { .. }
        | Event::StageState { .. }
        | Event::RescanProgress { .. }
        | Event::StageCommandRejected { .. } => todo!("stage event encoding"),
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
            task,
            run_id,
            pass,
            reason,
        } => {
            m.task = task.clone();
            m.run_id = Some(run_id.clone());
            m.pass = Some(*pass);
            m.reason = Some(reason.as_str().to_string());
        }
        Event::RunTimedOut {
            task,
            run_id,
            attempt,
            restarted,
        } => {
            m.task = task.clone();
            m.run_id = Some(run_id.clone());
            m.attempt = Some(*attempt);
            m.restarted = Some(*restarted);
        }
        Event::RunFailed {
            task,
            run_id,
            attempt,
            error,
            retry_at,
        } => {
            m.task = task.clone();
            m.run_id = Some(run_id.clone());
            m.attempt = Some(*attempt);
            m.error = Some(error.clone());
            m.retry_at = ts(retry_at);
        }
        Event::Parked {
            task,
            tier,
            until,
            error,
        } => {
            m.task = task.clone();
            // Tiers are a short configured list; saturating keeps encoding total.
            m.tier = Some(u32::try_from(*tier).unwrap_or(u32::MAX));
            m.until = ts(until);
            m.error = Some(error.clone());
        }
        Event::Dead {
            task,
            attempts,
            error,
        } => {
            m.task = task.clone();
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
        Event::CommandRejected { task, reason } => {
            m.task = task.clone();
            m.reason = Some(reason.clone());
        }
    }
    encode(&m, format)
}

/// Decodes an event and the time it was decided (protobuf or JSON), for
/// consumers and tests.
pub fn decode_event(bytes: &[u8]) -> Result<(Event, Timestamp), DecodeError> {
    let m: v1::Event = decode(bytes)?;
    let at = required_ts("at", m.at.as_ref())?;
    let task = non_empty("task", m.task)?;
    let event = match m.kind.as_str() {
        "ctl_moved_back" => Event::CtlMovedBack {
            task,
            entity: required("entity", m.entity)?,
            param: required("param", m.param)?,
            previous: required_ts("previous", m.previous.as_ref())?,
            value: required_ts("value", m.value.as_ref())?,
        },
        "result_rejected" => Event::ResultRejected {
            task,
            run_id: required("run_id", m.run_id)?,
            pass: required("pass", m.pass)?,
            reason: rejection(&required("reason", m.reason)?)?,
        },
        "run_timed_out" => Event::RunTimedOut {
            task,
            run_id: required("run_id", m.run_id)?,
            attempt: required("attempt", m.attempt)?,
            restarted: required("restarted", m.restarted)?,
        },
        "run_failed" => Event::RunFailed {
            task,
            run_id: required("run_id", m.run_id)?,
            attempt: required("attempt", m.attempt)?,
            error: required("error", m.error)?,
            retry_at: required_ts("retry_at", m.retry_at.as_ref())?,
        },
        "parked" => Event::Parked {
            task,
            tier: required("tier", m.tier)? as usize,
            until: required_ts("until", m.until.as_ref())?,
            error: required("error", m.error)?,
        },
        "dead" => Event::Dead {
            task,
            attempts: required("attempts", m.attempts)?,
            error: required("error", m.error)?,
        },
        "sla_missed" => Event::SlaMissed {
            task,
            last_success: optional_ts("last_success", m.last_success.as_ref())?,
            expect_every: duration::parse(&required("expect_every", m.expect_every)?).map_err(
                |e| DecodeError::InvalidField {
                    field: "expect_every",
                    reason: e.to_string(),
                },
            )?,
        },
        "command_rejected" => Event::CommandRejected {
            task,
            reason: required("reason", m.reason)?,
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
                task: task(),
                run_id: "orders_daily#3".into(),
                attempt: 1,
                restarted: false,
            },
            Event::RunFailed {
                task: task(),
                run_id: "orders_daily#3".into(),
                attempt: 2,
                error: String::new(),
                retry_at: ts("2021-04-25T00:02:00Z"),
            },
            Event::Parked {
                task: task(),
                tier: 2,
                until: ts("2021-04-26T00:00:00Z"),
                error: "db down".into(),
            },
            Event::Dead {
                task: task(),
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
                task: task(),
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
                task: task(),
                run_id: "orders_daily#3".into(),
                pass: 4,
                reason,
            });
        }
        events
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
