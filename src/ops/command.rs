//! The operation commands as the engine takes them — `search`, `recover`,
//! `cancel_operation` — and their flat JSON form: the criteria side by side
//! with the command's own fields, a kind and name given either as `kind` +
//! `name` or in one (`"process": "payout"`), exactly one of `from_start`,
//! `from_step`, `retry` for a recovery. `reactor simulate` reads this form;
//! Kafka carries the protobuf `Command` (codec), checked by the same
//! `validate::command`.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::{Criteria, Kind, Mode};

/// Find items by criteria; each shard answers with one `search_result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Form", into = "Form")]
pub struct Search {
    /// The operation id the answers carry.
    pub id: String,
    /// Which items.
    pub criteria: Criteria,
    /// Most matches per shard (the total counts them all).
    pub limit: Option<u32>,
}

/// Restart items by criteria, or only count them (`dry_run`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Form", into = "Form")]
pub struct Recover {
    /// The operation id: `source = "op:<id>"` on what it causes.
    pub id: String,
    /// Which items.
    pub criteria: Criteria,
    /// How they restart.
    pub mode: Mode,
    /// Only count (`recovery_counted`).
    pub dry_run: bool,
}

/// The flat form of both.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Form {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<Kind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    task: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stage: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    process: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    since: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    until: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    step: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    limit: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    from_start: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from_step: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    retry: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    dry_run: bool,
}

impl Form {
    /// The criteria, with `task`/`stage`/`process` read as a kind and name.
    fn criteria(&mut self) -> Result<Criteria, String> {
        let named = [
            (Kind::Task, self.task.take()),
            (Kind::Stage, self.stage.take()),
            (Kind::Process, self.process.take()),
        ];
        let mut kind = self.kind;
        let mut name = self.name.take();
        for (k, n) in named {
            let Some(n) = n else { continue };
            if name.is_some() || kind.is_some_and(|x| x != k) {
                return Err(
                    "give the kind and name once: `kind` + `name`, or one of `task`, `stage`, `process`"
                        .to_string(),
                );
            }
            kind = Some(k);
            name = Some(n);
        }
        Ok(Criteria {
            kind,
            name,
            key: self.key.take(),
            state: self.state.take(),
            error: self.error.take(),
            since: self.since,
            until: self.until,
            step: self.step.take(),
        })
    }

    fn from_criteria(id: String, c: Criteria) -> Form {
        Form {
            id,
            kind: c.kind,
            name: c.name,
            key: c.key,
            state: c.state,
            error: c.error,
            since: c.since,
            until: c.until,
            step: c.step,
            ..Form::default()
        }
    }
}

impl TryFrom<Form> for Search {
    type Error = String;

    fn try_from(mut f: Form) -> Result<Search, String> {
        if f.from_start || f.from_step.is_some() || f.retry || f.dry_run {
            return Err(
                "`from_start`, `from_step`, `retry` and `dry_run` belong to `recover`".to_string(),
            );
        }
        Ok(Search {
            criteria: f.criteria()?,
            id: f.id,
            limit: f.limit,
        })
    }
}

impl From<Search> for Form {
    fn from(s: Search) -> Form {
        Form {
            limit: s.limit,
            ..Form::from_criteria(s.id, s.criteria)
        }
    }
}

impl TryFrom<Form> for Recover {
    type Error = String;

    fn try_from(mut f: Form) -> Result<Recover, String> {
        if f.limit.is_some() {
            return Err("`limit` belongs to `search`".to_string());
        }
        let mode = match (f.from_start, f.from_step.take(), f.retry) {
            (true, None, false) => Mode::FromStart,
            (false, Some(step), false) => Mode::FromStep(step),
            (false, None, true) => Mode::Retry,
            _ => return Err("give exactly one of `from_start`, `from_step`, `retry`".to_string()),
        };
        Ok(Recover {
            criteria: f.criteria()?,
            id: f.id,
            mode,
            dry_run: f.dry_run,
        })
    }
}

impl From<Recover> for Form {
    fn from(r: Recover) -> Form {
        let (from_start, from_step, retry) = match r.mode {
            Mode::FromStart => (true, None, false),
            Mode::FromStep(step) => (false, Some(step), false),
            Mode::Retry => (false, None, true),
        };
        Form {
            from_start,
            from_step,
            retry,
            dry_run: r.dry_run,
            ..Form::from_criteria(r.id, r.criteria)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_design_example_reads() {
        let r: Recover = serde_json::from_str(
            r#"{"process": "payout", "state": "failed", "from_step": "send_tx", "dry_run": false}"#,
        )
        .unwrap();
        assert_eq!(
            r,
            Recover {
                id: String::new(),
                criteria: Criteria {
                    kind: Some(Kind::Process),
                    name: Some("payout".into()),
                    state: Some("failed".into()),
                    ..Criteria::default()
                },
                mode: Mode::FromStep("send_tx".into()),
                dry_run: false,
            }
        );
        let back: Recover = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        let s: Search =
            serde_json::from_str(r#"{"id": "x", "kind": "task", "name": "t*", "limit": 3}"#)
                .unwrap();
        assert_eq!(s.limit, Some(3));
        assert_eq!(s.criteria.kind, Some(Kind::Task));
    }

    #[test]
    fn mistakes_are_named() {
        let err = |json: &str| {
            serde_json::from_str::<Recover>(json)
                .unwrap_err()
                .to_string()
        };
        assert!(err(r#"{"process": "p"}"#).contains("exactly one of"));
        assert!(
            err(r#"{"process": "p", "retry": true, "from_start": true}"#)
                .contains("exactly one of")
        );
        assert!(err(r#"{"process": "p", "task": "t", "retry": true}"#).contains("once"));
        assert!(err(r#"{"kind": "task", "process": "p", "retry": true}"#).contains("once"));
        assert!(err(r#"{"retry": true, "limit": 3}"#).contains("`limit`"));
        assert!(err(r#"{"retry": true, "color": 3}"#).contains("unknown field"));
        let err = |json: &str| {
            serde_json::from_str::<Search>(json)
                .unwrap_err()
                .to_string()
        };
        assert!(err(r#"{"retry": true}"#).contains("belong to `recover`"));
    }
}
