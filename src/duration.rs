//! Human-written durations: `45s`, `30min`, `1m`, `2h`, `2d`, `1h30min`.
//!
//! One parser serves the trigger DSL and the configuration, so a duration
//! means the same thing wherever a user writes it. A day is always 24 hours:
//! durations measure elapsed time, calendar arithmetic belongs to scales.

use std::fmt;
use std::str::FromStr;

use jiff::SignedDuration;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a duration could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Nothing was written.
    #[error("empty duration; write e.g. 45s, 30min, 2h or 2d")]
    Empty,
    /// A number without a unit, a unit without a number, or an unknown unit.
    #[error("invalid duration `{0}`; write a whole number and a unit: ms, s, m or min, h, d, w (e.g. 45s, 30min, 2h, 2d, 1h30min)")]
    Invalid(String),
    /// The value does not fit.
    #[error("duration `{0}` is too large")]
    Overflow(String),
}

/// A non-negative span of elapsed time, written as in `45s`, `30min`, `2h`, `2d`.
///
/// Kept in whole milliseconds, the smallest unit written (8 bytes where a
/// `SignedDuration` takes 16: triggers of millions of tasks hold them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(i64);

impl Duration {
    /// The zero duration.
    pub const ZERO: Duration = Duration(0);

    /// A duration of whole seconds (saturating at the largest duration).
    pub const fn from_secs(secs: i64) -> Self {
        Duration(secs.saturating_mul(1000))
    }

    /// A duration of whole milliseconds.
    pub const fn from_millis(millis: i64) -> Self {
        Duration(millis)
    }

    /// The span as a std duration (negative never occurs: durations parse non-negative).
    pub fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_millis(u64::try_from(self.0).unwrap_or_default())
    }

    /// The span as a signed jiff duration, for timestamp arithmetic.
    pub const fn get(self) -> SignedDuration {
        SignedDuration::from_millis(self.0)
    }

    /// Whether this is zero.
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// This duration times `factor`, saturating at the largest duration.
    pub fn saturating_mul(self, factor: u32) -> Self {
        Duration(self.0.saturating_mul(i64::from(factor)))
    }
}

impl From<Duration> for SignedDuration {
    fn from(d: Duration) -> Self {
        d.get()
    }
}

const UNITS: &[(&str, i64)] = &[
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("min", 60_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
    ("w", 604_800_000_000_000),
];

/// Parses a duration: one or more `<whole number><unit>` parts, units
/// `ms`, `s`, `m`/`min`, `h`, `d` (24 h) and `w` (7 d).
pub fn parse(text: &str) -> Result<Duration, Error> {
    let s = text.trim();
    if s.is_empty() {
        return Err(Error::Empty);
    }
    let invalid = || Error::Invalid(text.to_string());
    let overflow = || Error::Overflow(text.to_string());
    let mut rest = s;
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(invalid());
        }
        let number: i128 = rest[..digits].parse().map_err(|_| overflow())?;
        rest = &rest[digits..];
        let letters = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..letters];
        let (_, nanos) = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .ok_or_else(invalid)?;
        total = number
            .checked_mul(i128::from(*nanos))
            .and_then(|n| total.checked_add(n))
            .ok_or_else(overflow)?;
        rest = &rest[letters..];
    }
    // Every unit is a whole number of milliseconds.
    let millis = i64::try_from(total / 1_000_000).map_err(|_| overflow())?;
    Ok(Duration(millis))
}

impl FromStr for Duration {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        parse(s)
    }
}

impl fmt::Display for Duration {
    /// Writes the shortest exact form in the largest fitting units, e.g. `1h30min`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut nanos = i128::from(self.0) * 1_000_000;
        if nanos == 0 {
            return f.write_str("0s");
        }
        for (name, size) in [
            ("d", 86_400_000_000_000i128),
            ("h", 3_600_000_000_000),
            ("min", 60_000_000_000),
            ("s", 1_000_000_000),
            ("ms", 1_000_000),
        ] {
            if nanos >= size {
                write!(f, "{}{name}", nanos / size)?;
                nanos %= size;
            }
        }
        if nanos > 0 {
            write!(f, "{nanos}ns")?;
        }
        Ok(())
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn units() {
        assert_eq!(parse("45s").unwrap(), Duration::from_secs(45));
        assert_eq!(parse("30min").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse("2d").unwrap(), Duration::from_secs(172_800));
        assert_eq!(parse("1h30min").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("1w").unwrap(), Duration::from_secs(604_800));
    }

    #[test]
    fn rejects() {
        for bad in ["", "5", "h", "2x", "-1h", "1.5h", "2 h"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn milliseconds_are_kept_and_the_largest_is_bounded() {
        let d = parse("1s500ms").unwrap();
        assert_eq!(d, Duration::from_millis(1500));
        assert_eq!(d.to_string(), "1s500ms");
        assert_eq!(d.get(), SignedDuration::from_millis(1500));
        assert_eq!(d.to_std(), std::time::Duration::from_millis(1500));
        // i64 milliseconds: about 292 million years.
        assert!(parse(&format!("{}ms", i64::MAX)).is_ok());
        assert!(matches!(
            parse(&format!("{}s", i64::MAX / 1000 + 1)),
            Err(Error::Overflow(_))
        ));
        assert_eq!(
            Duration::from_secs(i64::MAX).saturating_mul(2),
            Duration::from_millis(i64::MAX)
        );
    }

    proptest! {
        #[test]
        fn display_round_trips(millis in 0i64..10_000_000_000_000) {
            let d = Duration::from_millis(millis);
            prop_assert_eq!(parse(&d.to_string()).unwrap(), d);
        }
    }
}
