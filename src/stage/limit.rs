//! Per-partition limits of a stage. `max_parallelism` and `rate_limit` are
//! written as global figures and split evenly across partitions: with `P`
//! partitions, partition `p` gets `max / P` runs, plus one if
//! `p < max % P`, and never less than one (so with fewer runs than
//! partitions the global figure is exceeded rather than some offers never
//! running); the rate is `rate / P` per partition.

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::Deserialize;

/// Why a rate limit does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}`: {reason}; write e.g. \"50/s\", \"300/min\" or \"1000/h\"")]
pub struct Error {
    text: String,
    reason: &'static str,
}

impl Error {
    /// Configuration must change: never retryable.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// A global dispatch rate, e.g. `50/s`.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimit {
    /// Dispatches per second.
    pub per_second: f64,
    text: String,
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for RateLimit {
    type Err = Error;

    fn from_str(text: &str) -> Result<RateLimit, Error> {
        let bad = |reason| Error {
            text: text.to_string(),
            reason,
        };
        let (count, unit) = text.trim().split_once('/').ok_or_else(|| bad("no unit"))?;
        let count: f64 = count
            .trim()
            .parse()
            .map_err(|_| bad("the count is not a number"))?;
        let seconds = match unit.trim() {
            "s" | "sec" | "second" => 1.0,
            "min" | "m" | "minute" => 60.0,
            "h" | "hour" => 3600.0,
            "d" | "day" => 86_400.0,
            _ => return Err(bad("unknown unit")),
        };
        if !(count.is_finite() && count > 0.0) {
            return Err(bad("the count must be positive"));
        }
        Ok(RateLimit {
            per_second: count / seconds,
            text: text.trim().to_string(),
        })
    }
}

impl<'de> Deserialize<'de> for RateLimit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RateLimit, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Partition `partition`'s share of a global `max` over `partitions`.
pub fn share(max: u32, partition: u32, partitions: u32) -> u32 {
    let partitions = partitions.max(1);
    let base = max / partitions + u32::from(partition % partitions < max % partitions);
    base.max(1)
}

/// A token bucket holding at most one second's worth (and at least one token).
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    rate: f64,
    capacity: f64,
    tokens: f64,
    at: Option<Timestamp>,
}

impl Bucket {
    /// A full bucket refilling at `per_second`.
    pub fn new(per_second: f64) -> Bucket {
        let capacity = per_second.max(1.0);
        Bucket {
            rate: per_second,
            capacity,
            tokens: capacity,
            at: None,
        }
    }

    fn refill(&mut self, now: Timestamp) {
        if let Some(at) = self.at {
            let elapsed = now.duration_since(at).as_secs_f64().max(0.0);
            self.tokens = (self.tokens + elapsed * self.rate).min(self.capacity);
        }
        self.at = Some(now);
    }

    /// Takes a token if one is there.
    pub fn try_take(&mut self, now: Timestamp) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// When the next token is there (after a failed [`Bucket::try_take`]).
    pub fn next_token(&self, now: Timestamp) -> Timestamp {
        let missing = (1.0 - self.tokens).max(0.0);
        let wait = std::time::Duration::from_secs_f64(missing / self.rate)
            + std::time::Duration::from_millis(1);
        now.checked_add(wait).unwrap_or(Timestamp::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_sum_to_the_global_figure_and_never_drop_to_zero() {
        for max in 1..40u32 {
            for n in 1..12u32 {
                let shares: Vec<u32> = (0..n).map(|p| share(max, p, n)).collect();
                assert!(shares.iter().all(|s| *s >= 1));
                if max >= n {
                    assert_eq!(shares.iter().sum::<u32>(), max, "{max} over {n}");
                    assert!(shares.iter().max().unwrap() - shares.iter().min().unwrap() <= 1);
                }
            }
        }
    }

    #[test]
    fn rate_limits_read_with_units() {
        assert_eq!("50/s".parse::<RateLimit>().unwrap().per_second, 50.0);
        assert_eq!("120/min".parse::<RateLimit>().unwrap().per_second, 2.0);
        assert!("50".parse::<RateLimit>().is_err());
        assert!("0/s".parse::<RateLimit>().is_err());
        assert!("5/fortnight".parse::<RateLimit>().is_err());
    }

    #[test]
    fn a_bucket_refills_at_its_rate() {
        let t0: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        let mut b = Bucket::new(2.0);
        assert!(b.try_take(t0));
        assert!(b.try_take(t0));
        assert!(!b.try_take(t0));
        let next = b.next_token(t0);
        assert!(next > t0 && next <= t0 + jiff::SignedDuration::from_millis(501));
        assert!(b.try_take(next));
    }
}
