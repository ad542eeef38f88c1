//! Operations (seed 002, DESIGN §8): search and mass recovery by criteria
//! over the runs of one shard — tasks, stage slots and process keys. This
//! module holds what they are made of: the criteria and how an item is
//! matched, the recovery modes, the rows a search answers with and the
//! durable record of a recovery in progress. The engine walks its halves
//! with them (`engine::ops`).

pub mod command;
pub mod glob;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

pub use command::{Recover, Search};

/// What kind of run target an item is.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Kind {
    /// A task (name: the task id; key: its pool).
    Task,
    /// A stage on one offer (name: the stage; key: the offer id).
    Stage,
    /// A process key: its active instance, else its last one (name: the
    /// process or a submitted job; key: the business key).
    Process,
}

/// The states an item can be searched by: a run phase (tasks, stage slots,
/// the current step of an active instance) or how a finished instance ended.
pub const STATES: [&str; 11] = [
    "idle",
    "queued",
    "running",
    "backoff",
    "parked",
    "dead",
    "paused",
    "succeeded",
    "failed",
    "cancelled",
    "timed_out",
];

/// Which items an operation is about; every criterion given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Criteria {
    /// Only this kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
    /// Glob over the name (task id, stage, process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Glob over the key (pool, offer id, business key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// One of [`STATES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// A substring of the last error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The item entered its state (or failed, or finished) at or after this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
    /// ... and before this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
    /// Glob over the job of the current (or failed) step: processes only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

/// One item as the criteria see it, borrowed from the shard's state.
#[derive(Debug, Clone, Copy)]
pub struct Item<'a> {
    /// Its kind.
    pub kind: Kind,
    /// Task id, stage or process.
    pub name: &'a str,
    /// Pool, offer id or business key.
    pub key: &'a str,
    /// A phase or a finished instance's status.
    pub state: &'a str,
    /// The last error, if any.
    pub error: Option<&'a str>,
    /// When it entered its state, failed or finished, when known.
    pub at: Option<Timestamp>,
    /// The job of the current (or failed) step.
    pub step: Option<&'a str>,
    /// The instance number `N` of `PROCESS/KEY#N`.
    pub instance: Option<u64>,
    /// The index of the current (or failed) step in its chain.
    pub step_index: Option<u32>,
    /// The number of its latest run (0: it never ran).
    pub run_seq: u64,
    /// The attempt of its latest run.
    pub attempt: Option<u32>,
    /// Whether a recovery in the mode asked for can restart it.
    pub recoverable: bool,
}

impl Item<'_> {
    /// The instance id, `PROCESS/KEY#N`.
    pub fn instance_id(&self) -> Option<String> {
        self.instance
            .map(|n| crate::process::instance_id(self.name, self.key, n))
    }

    /// The id of its latest run, if it ran: `TASK#SEQ`, `STAGE/OFFER#SEQ`,
    /// `PROCESS/KEY#N.STEP#SEQ`.
    pub fn run_id(&self) -> Option<String> {
        if self.run_seq == 0 {
            return None;
        }
        let target = match self.kind {
            Kind::Task => self.name.to_string(),
            Kind::Stage => crate::run::concat(&[self.name, "/", self.key]),
            Kind::Process => crate::process::step_target(&self.instance_id()?, self.step_index?),
        };
        Some(crate::run::run_id(&target, self.run_seq).into())
    }
}

impl Criteria {
    /// Whether `item` is one of those the criteria name.
    pub fn matches(&self, item: &Item<'_>) -> bool {
        self.kind.is_none_or(|k| k == item.kind)
            && self
                .name
                .as_deref()
                .is_none_or(|g| glob::matches(g, item.name))
            && self
                .key
                .as_deref()
                .is_none_or(|g| glob::matches(g, item.key))
            && self.state.as_deref().is_none_or(|s| s == item.state)
            && self
                .error
                .as_deref()
                .is_none_or(|e| item.error.is_some_and(|x| x.contains(e)))
            && self.since.is_none_or(|s| item.at.is_some_and(|at| at >= s))
            && self.until.is_none_or(|u| item.at.is_some_and(|at| at < u))
            && self
                .step
                .as_deref()
                .is_none_or(|g| item.step.is_some_and(|s| glob::matches(g, s)))
    }

    /// Whether items of `kind` can match at all (a kind, or a step that
    /// only process items have, rules the others out).
    pub fn admits(&self, kind: Kind) -> bool {
        self.kind.is_none_or(|k| k == kind) && (self.step.is_none() || kind == Kind::Process)
    }

    /// The one name the criteria allow, when the name has no wildcard.
    pub fn exact_name(&self) -> Option<&str> {
        self.name.as_deref().filter(|n| glob::is_literal(n))
    }
}

/// How a recovery restarts what it finds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Mode {
    /// From scratch: a new process instance under the launch rules; a task
    /// or stage slot runs again with its failure count reset.
    FromStart,
    /// A process instance's chain again from the first step running this
    /// job (a new run id, attempts counted afresh for that step).
    FromStep(String),
    /// The current (or failed) step, task or stage slot once more, with a
    /// new run id; attempts keep counting.
    Retry,
}

impl Mode {
    /// The name on the wire and in events.
    pub fn as_str(&self) -> &'static str {
        self.into()
    }
}

/// The `source` of a pass Reactor re-dispatched on its own (a timeout's
/// restart, an idle process's step).
pub const AUTO: &str = "auto";

/// The `source` of what an operation causes.
pub fn source(op: &str) -> String {
    format!("op:{op}")
}

/// Most matches one search answer carries per partition.
pub const MAX_SEARCH_LIMIT: u32 = 200;
/// Matches per partition when a search names no limit.
pub const DEFAULT_SEARCH_LIMIT: u32 = 50;
/// Longest error text a match carries (cut on a character boundary).
pub const MATCH_ERROR_BYTES: usize = 200;

/// One row of a search answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Match {
    /// Its kind.
    pub kind: Kind,
    /// Task id, stage or process.
    pub name: String,
    /// Pool, offer id or business key.
    pub key: String,
    /// Phase or finished status.
    pub state: String,
    /// The last error, cut to [`MATCH_ERROR_BYTES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When it entered its state, failed or finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Timestamp>,
    /// The job of the current (or failed) step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The process instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The latest run id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The latest run's attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
}

impl From<&Item<'_>> for Match {
    fn from(item: &Item<'_>) -> Match {
        Match {
            kind: item.kind,
            name: item.name.to_string(),
            key: item.key.to_string(),
            state: item.state.to_string(),
            error: item.error.map(|e| cut(e, MATCH_ERROR_BYTES)),
            at: item.at,
            step: item.step.map(str::to_string),
            instance: item.instance_id(),
            run_id: item.run_id(),
            attempt: item.attempt,
        }
    }
}

/// `text` cut to at most `max` bytes on a character boundary.
fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default().to_string()
}

/// Where a recovery's walk over a shard stands: after this item. Items are
/// walked tasks first (declaration order), then stage slots (offer id, then
/// stage order), then process keys (process order, then key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Position {
    /// After this task.
    Task(String),
    /// After this stage's slot on this offer: `(offer, stage)`.
    Stage(String, String),
    /// After this process key: `(process, key)`.
    Key(String, String),
}

/// A recovery in progress on one shard: changelog `recovery/<op>`. The
/// cursor moves in the same step as the restarts it covers, so a shard
/// restored after a crash goes on after the last item it restarted and
/// never restarts one twice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryRecord {
    /// Which items.
    pub criteria: Criteria,
    /// How they restart.
    pub mode: Mode,
    /// The last item walked; `None` before the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Position>,
    /// Items restarted so far.
    pub done: u64,
    /// Items that could be restarted when it started.
    pub total: u64,
    /// When it started.
    pub started_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_modes_name_is_its_name_on_the_wire() {
        for mode in [Mode::FromStart, Mode::FromStep("send".into()), Mode::Retry] {
            let wire = serde_json::to_value(&mode).unwrap();
            let name = match &wire {
                serde_json::Value::String(name) => name.clone(),
                serde_json::Value::Object(tagged) => tagged.keys().next().unwrap().clone(),
                other => panic!("{other}"),
            };
            assert_eq!(mode.as_str(), name);
        }
    }

    fn item() -> Item<'static> {
        Item {
            kind: Kind::Process,
            name: "payout",
            key: "u17",
            state: "failed",
            error: Some("node down: timeout"),
            at: Some("2024-06-01T10:00:00Z".parse().unwrap()),
            step: Some("send_tx"),
            instance: Some(3),
            step_index: Some(1),
            run_seq: 5,
            attempt: Some(5),
            recoverable: true,
        }
    }

    #[test]
    fn ids_of_a_match() {
        let m = Match::from(&item());
        assert_eq!(m.instance.as_deref(), Some("payout/u17#3"));
        assert_eq!(m.run_id.as_deref(), Some("payout/u17#3.1#5"));
        let task = Item {
            kind: Kind::Task,
            name: "orders",
            key: "reports",
            instance: None,
            step_index: None,
            ..item()
        };
        assert_eq!(task.run_id().as_deref(), Some("orders#5"));
        let stage = Item {
            kind: Kind::Stage,
            name: "price",
            key: "o1",
            run_seq: 0,
            ..task
        };
        assert_eq!(stage.run_id(), None);
        assert_eq!(
            Item {
                run_seq: 2,
                ..stage
            }
            .run_id()
            .as_deref(),
            Some("price/o1#2")
        );
    }

    #[test]
    fn every_criterion_must_hold() {
        let t = |s: &str| Some(s.parse().unwrap());
        let c = Criteria {
            kind: Some(Kind::Process),
            name: Some("pay*".into()),
            key: Some("u1?".into()),
            state: Some("failed".into()),
            error: Some("node down".into()),
            since: t("2024-06-01T10:00:00Z"),
            until: t("2024-06-01T11:00:00Z"),
            step: Some("send_*".into()),
        };
        assert!(c.matches(&item()));
        assert!(Criteria::default().matches(&item()));
        let miss = [
            Criteria {
                kind: Some(Kind::Task),
                ..c.clone()
            },
            Criteria {
                key: Some("u2?".into()),
                ..c.clone()
            },
            Criteria {
                state: Some("dead".into()),
                ..c.clone()
            },
            Criteria {
                error: Some("disk".into()),
                ..c.clone()
            },
            Criteria {
                since: t("2024-06-01T10:00:01Z"),
                ..c.clone()
            },
            Criteria {
                until: t("2024-06-01T10:00:00Z"),
                ..c.clone()
            },
            Criteria {
                step: Some("notify".into()),
                ..c.clone()
            },
        ];
        for m in miss {
            assert!(!m.matches(&item()), "{m:?}");
        }
        let timeless = Item {
            at: None,
            error: None,
            step: None,
            ..item()
        };
        for c in [
            Criteria {
                since: t("2000-01-01T00:00:00Z"),
                ..Criteria::default()
            },
            Criteria {
                error: Some(String::new()),
                ..Criteria::default()
            },
            Criteria {
                step: Some("*".into()),
                ..Criteria::default()
            },
        ] {
            assert!(!c.matches(&timeless), "{c:?}");
        }
        assert!(!Criteria {
            step: Some("x".into()),
            ..Criteria::default()
        }
        .admits(Kind::Task));
        assert!(Criteria::default().admits(Kind::Stage));
    }

    #[test]
    fn a_match_cuts_long_errors_on_a_character_boundary() {
        let long = "é".repeat(MATCH_ERROR_BYTES);
        let item = Item {
            error: Some(&long),
            ..item()
        };
        let m = Match::from(&item);
        let e = m.error.unwrap();
        assert!(e.len() <= MATCH_ERROR_BYTES && e.len() >= MATCH_ERROR_BYTES - 1);
        assert!(e.chars().all(|c| c == 'é'));
    }
}
