//! The one run lifecycle (DESIGN §7.1) that tasks, stages and process steps
//! share: run ids, pass tokens, result matching, the retry policy, and the
//! [`RunSlot`] with its transitions (dispatch, fencing, timeout, failure →
//! backoff → tier → dead, wake).
//!
//! Ids are functions of shard state (a target's run and pass counters), so a
//! batch redone after a crash reproduces exactly the same ids.

mod slot;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::action::{Event, Subject};
use crate::config::{Accept, RetryPolicy};

pub use slot::{Alarms, Due, Failure, Phase, RunSlot, SlotParts};

/// A run id, `TARGET#SEQ`: a [`crate::name_map::Name`], kept inline up to
/// 24 bytes (most ids), so that issuing a run and copying its id into the
/// run command and its events allocate nothing. Every running task, stage
/// slot and process step holds one; as a heap string each cost an
/// allocation that lived as long as the run and two more per run command
/// (the copy and its free).
pub type RunId = crate::name_map::Name;

/// A dispatched run of one target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    /// `TARGET#SEQ`: stable across re-dispatches after a timeout.
    pub run_id: RunId,
    /// Try number since the target's last success, from 1.
    pub attempt: u32,
    /// The pass token a result must echo; new on every dispatch.
    pub pass: u64,
    /// When this pass was dispatched.
    pub dispatched_at: Timestamp,
    /// When this pass times out.
    pub deadline: Timestamp,
}

/// Builds the run id of a target's `seq`-th run.
pub fn run_id(target: &str, seq: u64) -> RunId {
    crate::name_map::concat(&[target, "#", itoa::Buffer::new().format(seq)])
}

/// The parts one after another, in a string sized once. Ids (run targets,
/// instance ids, changelog keys; run ids by [`crate::name_map::concat`],
/// inline when short) are built for every run and step on the hot path,
/// where `format!` took ~750 instructions for what this does in a fraction.
pub fn concat(parts: &[&str]) -> String {
    let mut id = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        match part.as_bytes() {
            // A one-byte part is ASCII (a separator, a digit): pushed as a
            // byte, not copied through a `memcpy` call.
            &[b] => id.push(char::from(b)),
            _ => id.push_str(part),
        }
    }
    id
}

/// Splits a run id into target and sequence number.
pub fn parse_run_id(run_id: &str) -> Option<(&str, u64)> {
    let (target, seq) = run_id.rsplit_once('#')?;
    Some((target, seq.parse().ok()?))
}

/// A worker's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The run did its work.
    Succeeded,
    /// The run failed; the retry policy decides what comes next.
    Failed,
}

/// Why a result was not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Rejection {
    /// The run id names no known target.
    UnknownTarget,
    /// The run id is malformed.
    BadRunId,
    /// The run is not the target's current run (finished or superseded).
    NotCurrent,
    /// The pass is not the current one (an earlier, timed-out attempt).
    StalePass,
}

impl Rejection {
    /// Metric label and log field.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Decides whether a result for `run_id`/`pass` belongs to `current`.
pub fn accepts(
    current: Option<&Run>,
    run_id: &str,
    pass: u64,
    accept: Accept,
) -> Result<(), Rejection> {
    let run = current
        .filter(|r| r.run_id == run_id)
        .ok_or(Rejection::NotCurrent)?;
    if run.pass == pass || accept == Accept::First {
        Ok(())
    } else {
        Err(Rejection::StalePass)
    }
}

/// What follows the `failures`-th consecutive failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// Try again at this time.
    Backoff(Timestamp),
    /// Parked in archive tier `tier` (1-based) until this time, then one more attempt.
    Park {
        /// 1-based tier number.
        tier: usize,
        /// End of the park.
        until: Timestamp,
    },
    /// The attempt after the last tier failed: an operator must act.
    Dead,
}

impl RetryPolicy {
    /// Next step after `failures` (>= 1) consecutive failed attempts, at `now`.
    ///
    /// Backoff doubles from `backoff` until `attempts` attempts have failed;
    /// then each tier parks the target and allows one more attempt.
    pub fn after_failure(&self, failures: u32, now: Timestamp) -> AfterFailure {
        if failures < self.attempts {
            let doubling = 1u32 << (failures - 1).min(30);
            let wait = self.backoff.saturating_mul(doubling);
            return AfterFailure::Backoff(add(now, wait.get()));
        }
        let tier = (failures - self.attempts) as usize;
        match self.tiers.get(tier) {
            Some(park) => AfterFailure::Park {
                tier: tier + 1,
                until: add(now, park.get()),
            },
            None => AfterFailure::Dead,
        }
    }
}

impl Failure {
    /// The event that reports this failure of `subject`'s run `run_id`,
    /// the `failures`-th in a row, with `error`.
    pub fn event(self, subject: Subject, run_id: RunId, failures: u32, error: String) -> Event {
        match self {
            Failure::Backoff { retry_at } => Event::RunFailed {
                subject,
                run_id,
                attempt: failures,
                error,
                retry_at,
            },
            Failure::Parked { tier, until } => Event::Parked {
                subject,
                tier,
                until,
                error,
            },
            Failure::Dead => Event::Dead {
                subject,
                attempts: failures,
                error,
            },
        }
    }
}

/// `t + d`, saturating at the largest timestamp instead of failing.
pub fn add(t: Timestamp, d: jiff::SignedDuration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::Duration;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn run_ids_round_trip() {
        assert_eq!(run_id("orders#daily", 7), "orders#daily#7");
        for seq in [0, 9, 10, 99, 100, 12_345, u64::MAX] {
            assert_eq!(run_id("t", seq), format!("t#{seq}"));
        }
        assert_eq!(parse_run_id("orders#daily#7"), Some(("orders#daily", 7)));
        assert_eq!(parse_run_id("orders"), None);
        assert_eq!(parse_run_id("orders#x"), None);
        assert_eq!(concat(&["price", "/", "o1"]), "price/o1");
        assert_eq!(concat(&[]), "");
    }

    #[test]
    fn design_retry_sequence() {
        let p = RetryPolicy::default();
        let now = t("2024-01-01T00:00:00Z");
        assert_eq!(
            p.after_failure(1, now),
            AfterFailure::Backoff(t("2024-01-01T00:01:00Z"))
        );
        assert_eq!(
            p.after_failure(2, now),
            AfterFailure::Backoff(t("2024-01-01T00:02:00Z"))
        );
        assert_eq!(
            p.after_failure(3, now),
            AfterFailure::Park {
                tier: 1,
                until: t("2024-01-01T00:30:00Z")
            }
        );
        assert_eq!(
            p.after_failure(4, now),
            AfterFailure::Park {
                tier: 2,
                until: t("2024-01-02T00:00:00Z")
            }
        );
        assert_eq!(p.after_failure(5, now), AfterFailure::Dead);
    }

    #[test]
    fn backoff_saturates() {
        let p = RetryPolicy {
            attempts: 100,
            backoff: Duration::from_secs(1),
            tiers: vec![],
        };
        let now = t("2024-01-01T00:00:00Z");
        assert!(matches!(p.after_failure(99, now), AfterFailure::Backoff(_)));
        assert_eq!(p.after_failure(100, now), AfterFailure::Dead);
    }

    #[test]
    fn matching() {
        let run = Run {
            run_id: "a#1".into(),
            attempt: 2,
            pass: 5,
            dispatched_at: t("2024-01-01T00:00:00Z"),
            deadline: t("2024-01-01T01:00:00Z"),
        };
        assert_eq!(accepts(Some(&run), "a#1", 5, Accept::Last), Ok(()));
        assert_eq!(
            accepts(Some(&run), "a#1", 4, Accept::Last),
            Err(Rejection::StalePass)
        );
        assert_eq!(accepts(Some(&run), "a#1", 4, Accept::First), Ok(()));
        assert_eq!(
            accepts(Some(&run), "a#0", 5, Accept::First),
            Err(Rejection::NotCurrent)
        );
        assert_eq!(
            accepts(None, "a#1", 5, Accept::Last),
            Err(Rejection::NotCurrent)
        );
    }
}
