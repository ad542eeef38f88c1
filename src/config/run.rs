//! The run policy every run target shares (DESIGN §7.1): `timeout`,
//! `restart_after_timeout`, `accept` and `retry`, read and validated in one
//! place for tasks, stages and jobs.

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::{Error, Position, Section};
use crate::duration::Duration;

/// Result acceptance when a run was re-dispatched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Accept {
    /// Only a result carrying the current pass is accepted.
    #[default]
    Last,
    /// The first result of any attempt of the current run is accepted.
    First,
}

/// The retry policy of DESIGN §7.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RetryPolicy {
    /// Failed attempts before parking.
    pub attempts: u32,
    /// Backoff after the first failure; doubles each time.
    pub backoff: Duration,
    /// Park times, each followed by one more attempt.
    pub tiers: Vec<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            backoff: Duration::from_secs(60),
            tiers: vec![Duration::from_secs(1800), Duration::from_secs(86_400)],
        }
    }
}

/// How the runs of a task, stage or job are supervised: the part of the run
/// lifecycle (DESIGN §7) they share.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunPolicy {
    /// No result by then: the pass times out.
    pub timeout: Duration,
    /// Re-dispatch at once after a timeout while attempts remain (else the
    /// timeout goes through the retry policy).
    pub restart_after_timeout: bool,
    /// Which pass's result is accepted.
    pub accept: Accept,
    /// Retries after failures.
    pub retry: RetryPolicy,
}

impl RunPolicy {
    /// Whether a pass that timed out after `failures` failed attempts is
    /// re-dispatched at once. A timeout is a failed attempt: the last one
    /// (or any, with `restart_after_timeout = false`) goes through the
    /// retry policy instead.
    pub fn restarts_on_timeout(&self, failures: u32) -> bool {
        self.restart_after_timeout && failures + 1 < self.retry.attempts
    }

    /// The error recorded for a timed-out attempt.
    pub fn timeout_error(&self) -> String {
        format!("timed out after {}", self.timeout)
    }
}

/// `retry = { attempts = 3, backoff = "1m", tiers = ["30m", "1d"], requeue = "front" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RetryFile {
    /// Failed attempts before the first tier (default 3).
    attempts: Option<Spanned<u32>>,
    /// First backoff; doubles after every further failure (default 1m).
    backoff: Option<Spanned<Duration>>,
    /// Park times after the attempts are used up, one more attempt after each (default 30m, 1d).
    tiers: Option<Vec<Spanned<Duration>>>,
    /// Jobs only: where a job coming back from a tier re-enters its queue (default "front").
    requeue: Option<Spanned<Position>>,
}

/// The run policy keys of one section, as written.
pub(super) struct RunKeys<'a> {
    /// `timeout`: no result by then, the pass times out.
    pub timeout: Option<&'a Spanned<Duration>>,
    /// `restart_after_timeout` (default true).
    pub restart_after_timeout: Option<bool>,
    /// `accept`.
    pub accept: Option<Accept>,
    /// `retry`.
    pub retry: Option<&'a RetryFile>,
}

/// What a kind of target assumes when a key is left out.
pub(super) struct Defaults {
    /// `timeout`.
    pub timeout: Duration,
    /// `accept`.
    pub accept: Accept,
    /// `retry.requeue`, for the kinds that have a queue to re-enter (jobs);
    /// `None`: the key is refused.
    pub requeue: Option<Position>,
}

/// Validates the run policy keys of `section`, filling in `defaults`; also
/// returns `retry.requeue` (`None` unless `defaults` has one).
pub(super) fn policy(
    section: &Section<'_>,
    keys: RunKeys<'_>,
    defaults: Defaults,
) -> Result<(RunPolicy, Option<Position>), Error> {
    let timeout = match keys.timeout {
        Some(timeout) => section.positive(timeout, "timeout")?,
        None => defaults.timeout,
    };
    let mut retry = RetryPolicy::default();
    let mut requeue = defaults.requeue;
    if let Some(r) = keys.retry {
        if let Some(attempts) = &r.attempts {
            retry.attempts = section.at_least_one(attempts, "retry.attempts", "")?;
        }
        if let Some(backoff) = &r.backoff {
            retry.backoff = section.positive(backoff, "retry.backoff")?;
        }
        if let Some(tiers) = &r.tiers {
            retry.tiers = Vec::with_capacity(tiers.len());
            for tier in tiers {
                if tier.get_ref().is_zero() {
                    return Err(section.invalid(
                        tier,
                        "retry.tiers",
                        "every tier must be positive",
                    ));
                }
                retry.tiers.push(*tier.get_ref());
            }
        }
        if let Some(position) = &r.requeue {
            if requeue.is_none() {
                return Err(section.invalid(
                    position,
                    "retry.requeue",
                    "only jobs have a queue to re-enter; leave it out here",
                ));
            }
            requeue = Some(*position.get_ref());
        }
    }
    let policy = RunPolicy {
        timeout,
        restart_after_timeout: keys.restart_after_timeout.unwrap_or(true),
        accept: keys.accept.unwrap_or(defaults.accept),
        retry,
    };
    Ok((policy, requeue))
}
