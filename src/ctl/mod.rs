//! CTL parameters, chunk scales and the table of current values.
//!
//! # Counting chunks
//!
//! Every scale counts on the local wall clock of a time zone (the civil
//! date-time), because that is how warehouses name their partitions: the
//! `2021-04-25` partition of a table loaded in Moscow starts at local
//! midnight. [`Scale::index`] numbers the chunk holding an instant, and the
//! number of chunks between two instants is the difference of their indexes.
//! With `days` the civil days since 1970-01-01 and `sod` the seconds since
//! local midnight:
//!
//! - `minute`: `days * 1440 + sod / 60`; `hour`: `days * 24 + sod / 3600`;
//! - `day`: `days`;
//! - `week`: ISO weeks starting on Monday, numbered by their Monday;
//! - `month`: `year * 12 + month - 1`; `quarter`: `year * 4 + (month - 1) / 3`;
//!   `year`: `year` (calendar units: 2021-01-31 → 2021-02-01 is one month);
//! - a fixed size `s` (e.g. `30min`): aligned to local midnight, so chunks
//!   restart every day even when `s` does not divide 24 h:
//!   `days * ceil(86400 / s) + sod / s` (`01:42:13` lies in the `01:30:00`
//!   chunk of `30min`).
//!
//! One exception keeps time moving forward: when clocks fall back (by up to
//! 3 hours, which covers every DST rule in use), the repeated wall-clock
//! interval still belongs to the last chunk before the change: with `minute`
//! in New York on 2021-11-07, the repeated hour 01:00-02:00 EST counts as
//! 01:59 EDT. Counting it again on the wall clock would make indexes go
//! backwards, and then the mere passage of time could turn a `chunk_delay`
//! true again, which the scheduler (it only re-evaluates on changes) relies on
//! never happening.

use std::fmt;
use std::str::FromStr;

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, Zoned};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::duration::{self, Duration};

mod local;
mod postings;
mod table;

pub use local::CtlTable;
pub use postings::Postings;
pub use table::{ParamId, ParamNames, ParamRef};

/// Parameter name (`entity/param`) → value: what a run command and a task
/// record carry of the parameters a run saw.
pub type ParamValues = crate::name_map::NameMap<jiff::Timestamp>;

/// Why a parameter name or a scale could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Not of the form `entity/param` with allowed characters.
    #[error("invalid parameter `{0}`; write `entity/param` (e.g. dwh.orders/max_dt) using letters, digits and `_ . : -`, with exactly one `/`")]
    ParamName(String),
    /// Neither a calendar scale nor a fixed size.
    #[error("invalid scale `{0}`; write minute, hour, day, week, month, quarter, year, or a fixed size of whole seconds up to 24h such as 30min, 4h or 90s")]
    Scale(String),
}

/// A CTL parameter name: `entity/param` (the entity may contain dots, e.g. `dwh.orders/max_dt`).
///
/// Kept as the one string `entity/param`: a task holds its trigger's names
/// for the life of the process, and two strings per name were twice the heap
/// blocks and twice the inline size. Neither part may hold a `/` (see
/// [`is_name_char`]), so the first one splits them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ParamName {
    /// `entity/param`.
    text: Box<str>,
}

impl ParamName {
    /// A name from its two parts, taken as given (use `parse` to validate
    /// text; an entity holding a `/` would be read back as ending there).
    pub fn new(entity: impl AsRef<str>, param: impl AsRef<str>) -> Self {
        let (entity, param) = (entity.as_ref(), param.as_ref());
        let mut text = String::with_capacity(entity.len() + 1 + param.len());
        text.push_str(entity);
        text.push('/');
        text.push_str(param);
        ParamName {
            text: text.into_boxed_str(),
        }
    }

    /// Where the `/` is (the end of a name without one).
    fn split(&self) -> usize {
        self.text.find('/').unwrap_or(self.text.len())
    }

    /// The entity (`dwh.orders`).
    pub fn entity(&self) -> &str {
        self.parts().entity
    }

    /// The parameter of the entity (`max_dt`).
    pub fn param(&self) -> &str {
        self.parts().param
    }

    /// The name's two parts, borrowed (one search for the `/`: callers
    /// needing both take them here rather than from `entity` and `param`).
    pub fn parts(&self) -> ParamRef<'_> {
        let split = self.split();
        ParamRef {
            entity: self.text.get(..split).unwrap_or_default(),
            param: self.text.get(split + 1..).unwrap_or_default(),
        }
    }

    /// The parts of `entity/param`, checked as [`str::parse`] checks a
    /// name, without building one.
    pub fn parse_parts(s: &str) -> Result<ParamRef<'_>, Error> {
        let (entity, param) = s
            .split_once('/')
            .ok_or_else(|| Error::ParamName(s.to_string()))?;
        ParamName::check(entity, param)?;
        Ok(ParamRef { entity, param })
    }

    /// Checks that `entity` and `param` make a valid name (`entity/param`)
    /// without building it: the rule `parse` applies.
    pub fn check(entity: &str, param: &str) -> Result<(), Error> {
        // By byte: every allowed character is ASCII, so a byte of a longer
        // one fails as the character would (and no character is decoded).
        let part_ok = |p: &str| !p.is_empty() && p.bytes().all(|b| is_name_char(char::from(b)));
        if part_ok(entity) && part_ok(param) {
            Ok(())
        } else {
            Err(Error::ParamName(format!("{entity}/{param}")))
        }
    }
}

/// Whether `c` may appear in an entity or parameter part.
pub fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')
}

impl FromStr for ParamName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let name = ParamName::parse_parts(s)?;
        Ok(ParamName::new(name.entity, name.param))
    }
}

impl fmt::Display for ParamName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.parts().fmt(f)
    }
}

/// By entity, then parameter (not by the joined text, where `a.b/x` would
/// come before `a/y`).
impl Ord for ParamName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let (a, b) = (self.parts(), other.parts());
        (a.entity, a.param).cmp(&(b.entity, b.param))
    }
}

impl PartialOrd for ParamName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Serialize for ParamName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ParamName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A chunk size for chunk triggers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scale {
    /// Wall-clock minutes.
    Minute,
    /// Wall-clock hours.
    Hour,
    /// Calendar days.
    Day,
    /// ISO weeks, starting on Monday.
    Week,
    /// Calendar months.
    Month,
    /// Calendar quarters (January, April, July, October).
    Quarter,
    /// Calendar years.
    Year,
    /// A fixed size in whole seconds (1 s to 24 h), aligned to local
    /// midnight (seconds, not a `Duration`: a trigger leaf is 8 bytes smaller).
    Fixed(u32),
}

const DAY_SECS: i64 = 86_400;

const NAMED: &[(&str, Scale)] = &[
    ("minute", Scale::Minute),
    ("hour", Scale::Hour),
    ("day", Scale::Day),
    ("week", Scale::Week),
    ("month", Scale::Month),
    ("quarter", Scale::Quarter),
    ("year", Scale::Year),
];

impl FromStr for Scale {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        if let Some((_, scale)) = NAMED.iter().find(|(name, _)| *name == s) {
            return Ok(*scale);
        }
        let bad = || Error::Scale(s.to_string());
        // Duration parsing trims; a scale token must not carry spaces.
        if s.trim() != s {
            return Err(bad());
        }
        let d = duration::parse(s).map_err(|_| bad())?;
        let sd = d.get();
        if sd.subsec_nanos() != 0 || sd.as_secs() <= 0 || sd.as_secs() > DAY_SECS {
            return Err(bad());
        }
        u32::try_from(sd.as_secs())
            .map(Scale::Fixed)
            .map_err(|_| bad())
    }
}

impl fmt::Display for Scale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scale::Fixed(secs) => Duration::from_secs(i64::from(*secs)).fmt(f),
            named => match NAMED.iter().find(|(_, s)| s == named) {
                Some((name, _)) => f.write_str(name),
                None => write!(f, "{named:?}"),
            },
        }
    }
}

impl Scale {
    /// Index of the chunk holding `t` in zone `tz`; the number of chunks
    /// between two instants is the difference of their indexes.
    pub fn index(self, t: Timestamp, tz: &TimeZone) -> i64 {
        self.index_local(local_seconds(self, t, tz))
    }

    /// Start of the chunk holding `t` (for explain output).
    pub fn trunc(self, t: Timestamp, tz: &TimeZone) -> Zoned {
        let local = local_seconds(self, t, tz);
        let days = local.div_euclid(DAY_SECS);
        let sod = local.rem_euclid(DAY_SECS);
        let (start_days, start_sod) = match self {
            Scale::Minute => (days, sod - sod % 60),
            Scale::Hour => (days, sod - sod % 3600),
            Scale::Day => (days, 0),
            Scale::Week => (days - (days + 3).rem_euclid(7), 0),
            Scale::Month | Scale::Quarter | Scale::Year => {
                let (y, m, _) = civil_from_days(days);
                let m = match self {
                    Scale::Month => m,
                    Scale::Quarter => m - (m - 1) % 3,
                    _ => 1,
                };
                (days_from_civil(y, m, 1), 0)
            }
            Scale::Fixed(d) => {
                let s = fixed_secs(d);
                (days, sod - sod % s)
            }
        };
        let (y, m, d) = civil_from_days(start_days);
        let start = i8::try_from(m)
            .ok()
            .zip(i8::try_from(d).ok())
            .and_then(|(m, d)| {
                let y = i16::try_from(y).ok()?;
                DateTime::new(
                    y,
                    m,
                    d,
                    (start_sod / 3600) as i8,
                    (start_sod / 60 % 60) as i8,
                    (start_sod % 60) as i8,
                    0,
                )
                .ok()
            });
        // A start inside a gap resolves after it, one inside a fold to its
        // first occurrence (the chunk began then); both are what `compatible` does.
        start
            .and_then(|dt| tz.to_ambiguous_zoned(dt).compatible().ok())
            .unwrap_or_else(|| t.to_zoned(tz.clone()))
    }

    /// Seconds from local time `local` to the start of the next chunk, or
    /// less for calendar scales (the next midnight, which may or may not start one).
    fn until_boundary(self, local: i64) -> i64 {
        let sod = local.rem_euclid(DAY_SECS);
        let size = match self {
            Scale::Minute => 60,
            Scale::Hour => 3600,
            Scale::Fixed(d) => fixed_secs(d),
            _ => DAY_SECS,
        };
        (size - sod % size).min(DAY_SECS - sod)
    }

    fn index_local(self, local: i64) -> i64 {
        let days = local.div_euclid(DAY_SECS);
        match self {
            Scale::Minute => local.div_euclid(60),
            Scale::Hour => local.div_euclid(3600),
            Scale::Day => days,
            // 1970-01-01 was a Thursday: shifting by 3 makes Mondays multiples of 7.
            Scale::Week => (days + 3).div_euclid(7),
            Scale::Month => {
                let (y, m, _) = civil_from_days(days);
                y * 12 + m - 1
            }
            Scale::Quarter => {
                let (y, m, _) = civil_from_days(days);
                y * 4 + (m - 1) / 3
            }
            Scale::Year => civil_from_days(days).0,
            Scale::Fixed(d) => {
                let s = fixed_secs(d);
                let per_day = (DAY_SECS + s - 1) / s;
                days * per_day + local.rem_euclid(DAY_SECS) / s
            }
        }
    }
}

/// Seconds of a fixed scale, clamped so that a hand-built `Fixed` never divides by zero.
fn fixed_secs(secs: u32) -> i64 {
    i64::from(secs).clamp(1, DAY_SECS)
}

/// The longest fall-back the clamp handles. Every DST change in use is 1 or
/// 2 hours; only historical offset changes were longer, and those are
/// counted on the plain wall clock.
const MAX_FOLD: i64 = 3 * 3600;

/// Seconds since 1970-01-01T00:00:00 on the local wall clock of `tz`,
/// floored, with the fall-back clamp described in the module doc.
fn local_seconds(scale: Scale, t: Timestamp, tz: &TimeZone) -> i64 {
    let mut secs = t.as_second();
    if t.subsec_nanosecond() < 0 {
        secs -= 1;
    }
    // Not `to_fixed_offset`: its error for named zones allocates, and
    // `to_offset` is already a plain field read for UTC and fixed offsets.
    let offset = i64::from(tz.to_offset(t).seconds());
    let local = secs + offset;
    // The clamp moves the wall clock forward by less than a fold, so it can
    // only change the chunk near the end of one; elsewhere, skip the lookups.
    if scale.until_boundary(local) >= MAX_FOLD {
        return local;
    }
    // If the offset a fold ago is not larger, no fall-back is repeating the wall clock now.
    let earlier = t
        .checked_sub(SignedDuration::from_secs(MAX_FOLD))
        .map(|a| i64::from(tz.to_offset(a).seconds()));
    if earlier.is_ok_and(|before| before > offset) {
        if let Some(clamped) = fold_clamp(t, secs, offset, tz) {
            return clamped;
        }
    }
    local
}

/// If `t` lies in the repeated part of a fall-back, the last local second before it.
fn fold_clamp(t: Timestamp, secs: i64, offset: i64, tz: &TimeZone) -> Option<i64> {
    let next = t.checked_add(SignedDuration::from_nanos(1)).ok()?;
    let transition = tz.preceding(next).next()?;
    let at = transition.timestamp();
    let before = at
        .checked_sub(SignedDuration::from_nanos(1))
        .ok()
        .map(|b| i64::from(tz.to_offset(b).seconds()))?;
    let fold = before - offset;
    let start = at.as_second();
    (fold > 0 && secs < start + fold).then(|| start + before - 1)
}

/// Civil (year, month, day) of a count of days since 1970-01-01 (proleptic Gregorian).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    // Howard Hinnant's algorithm: eras of 400 years starting on March 1st.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Days since 1970-01-01 of a civil date; inverse of [`civil_from_days`].
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn utc() -> TimeZone {
        TimeZone::UTC
    }

    fn chunks(scale: &str, from: &str, to: &str, tz: &TimeZone) -> i64 {
        let scale: Scale = scale.parse().unwrap();
        scale.index(ts(to), tz) - scale.index(ts(from), tz)
    }

    #[test]
    fn param_names() {
        let p: ParamName = "dwh.orders/max_dt".parse().unwrap();
        assert_eq!(p, ParamName::new("dwh.orders", "max_dt"));
        assert_eq!(p.to_string(), "dwh.orders/max_dt");
        assert!("a:b-c_d/x.y".parse::<ParamName>().is_ok());
        for bad in ["", "a", "/b", "a/", "a/b/c", "a b/c", "a/b!", "é/x"] {
            let err = bad.parse::<ParamName>().unwrap_err();
            assert!(err.to_string().contains(&format!("`{bad}`")), "{err}");
        }
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, "\"dwh.orders/max_dt\"");
        assert_eq!(serde_json::from_str::<ParamName>(&json).unwrap(), p);
        assert!(serde_json::from_str::<ParamName>("\"nope\"").is_err());
    }

    #[test]
    fn scales_parse_and_print() {
        for s in [
            "minute", "hour", "day", "week", "month", "quarter", "year", "30min", "4h", "45s", "1d",
        ] {
            assert_eq!(s.parse::<Scale>().unwrap().to_string(), s);
        }
        assert_eq!("30min".parse::<Scale>().unwrap(), Scale::Fixed(1800));
        for bad in [
            "", "days", "0s", "25h", "1500ms", "2x", " day", "30 min", "-1h",
        ] {
            let err = bad.parse::<Scale>().unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains(&format!("`{bad}`")) && text.contains("30min"),
                "{text}"
            );
        }
    }

    #[test]
    fn seed_example_days() {
        assert_eq!(
            chunks(
                "day",
                "2021-04-23T03:51:16Z",
                "2021-04-25T03:27:33Z",
                &utc()
            ),
            2
        );
    }

    #[test]
    fn calendar_scales_count_units() {
        let tz = utc();
        assert_eq!(
            chunks("month", "2021-01-31T23:00:00Z", "2021-02-01T00:00:00Z", &tz),
            1
        );
        assert_eq!(
            chunks("month", "2020-12-15T00:00:00Z", "2021-02-01T00:00:00Z", &tz),
            2
        );
        assert_eq!(
            chunks(
                "quarter",
                "2021-03-31T12:00:00Z",
                "2021-04-01T00:00:00Z",
                &tz
            ),
            1
        );
        assert_eq!(
            chunks(
                "quarter",
                "2021-01-01T00:00:00Z",
                "2021-03-31T23:59:59Z",
                &tz
            ),
            0
        );
        assert_eq!(
            chunks("year", "2021-12-31T23:59:59Z", "2022-01-01T00:00:00Z", &tz),
            1
        );
        // 2021-04-25 is a Sunday, 2021-04-26 a Monday.
        assert_eq!(
            chunks("week", "2021-04-25T23:00:00Z", "2021-04-26T01:00:00Z", &tz),
            1
        );
        assert_eq!(
            chunks("week", "2021-04-19T00:00:00Z", "2021-04-25T23:59:59Z", &tz),
            0
        );
        assert_eq!(
            chunks("hour", "2021-04-25T03:59:59Z", "2021-04-25T04:00:00Z", &tz),
            1
        );
        assert_eq!(
            chunks(
                "minute",
                "2021-04-25T03:59:59Z",
                "2021-04-25T04:01:00Z",
                &tz
            ),
            2
        );
    }

    #[test]
    fn truncation() {
        let tz = utc();
        let t = ts("2021-04-25T01:42:13Z");
        let trunc = |s: &str| s.parse::<Scale>().unwrap().trunc(t, &tz).to_string();
        assert_eq!(trunc("30min"), "2021-04-25T01:30:00+00:00[UTC]");
        assert_eq!(trunc("minute"), "2021-04-25T01:42:00+00:00[UTC]");
        assert_eq!(trunc("hour"), "2021-04-25T01:00:00+00:00[UTC]");
        assert_eq!(trunc("day"), "2021-04-25T00:00:00+00:00[UTC]");
        assert_eq!(trunc("week"), "2021-04-19T00:00:00+00:00[UTC]");
        assert_eq!(trunc("month"), "2021-04-01T00:00:00+00:00[UTC]");
        assert_eq!(trunc("quarter"), "2021-04-01T00:00:00+00:00[UTC]");
        assert_eq!(trunc("year"), "2021-01-01T00:00:00+00:00[UTC]");
        assert_eq!(trunc("7h"), "2021-04-25T00:00:00+00:00[UTC]");
    }

    #[test]
    fn fixed_scales_restart_at_midnight() {
        let tz = utc();
        assert_eq!(
            chunks("30min", "2021-04-25T01:30:00Z", "2021-04-25T01:42:13Z", &tz),
            0
        );
        assert_eq!(
            chunks("30min", "2021-04-25T01:29:59Z", "2021-04-25T01:30:00Z", &tz),
            1
        );
        // 7h chunks start at 00, 07, 14 and 21 each day: 21:00-24:00 is a short chunk.
        assert_eq!(
            chunks("7h", "2021-04-25T21:00:00Z", "2021-04-25T23:59:59Z", &tz),
            0
        );
        assert_eq!(
            chunks("7h", "2021-04-25T23:59:59Z", "2021-04-26T00:00:00Z", &tz),
            1
        );
        assert_eq!(
            chunks("7h", "2021-04-25T00:00:00Z", "2021-04-26T00:00:00Z", &tz),
            4
        );
        let at = "7h"
            .parse::<Scale>()
            .unwrap()
            .trunc(ts("2021-04-26T06:59:00Z"), &tz);
        assert_eq!(at.to_string(), "2021-04-26T00:00:00+00:00[UTC]");
    }

    #[test]
    fn bundled_zones() {
        assert!(TimeZone::get("Europe/Moscow").is_ok());
        assert!(TimeZone::get("Mars/Olympus_Mons").is_err());
    }

    #[test]
    fn days_across_dst_count_calendar_days() {
        let ny = TimeZone::get("America/New_York").unwrap();
        // Spring forward on 2021-03-14 (a 23 h day), fall back on 2021-11-07 (25 h).
        assert_eq!(
            chunks("day", "2021-03-13T05:00:00Z", "2021-03-14T05:00:00Z", &ny),
            1
        );
        assert_eq!(
            chunks("day", "2021-03-14T05:00:00Z", "2021-03-15T04:00:00Z", &ny),
            1
        );
        assert_eq!(
            chunks("day", "2021-03-15T03:59:59Z", "2021-03-15T04:00:00Z", &ny),
            1
        );
        assert_eq!(
            chunks("day", "2021-11-07T04:00:00Z", "2021-11-08T04:59:59Z", &ny),
            0
        );
        assert_eq!(
            chunks("day", "2021-11-07T04:00:00Z", "2021-11-08T05:00:00Z", &ny),
            1
        );
        assert_eq!(
            chunks("hour", "2021-03-14T06:59:59Z", "2021-03-14T07:00:00Z", &ny),
            2
        );
        let day = Scale::Day.trunc(ts("2021-11-07T20:00:00Z"), &ny);
        assert_eq!(
            day.to_string(),
            "2021-11-07T00:00:00-04:00[America/New_York]"
        );
        let moscow = TimeZone::get("Europe/Moscow").unwrap();
        assert_eq!(
            chunks(
                "day",
                "2021-04-24T20:59:59Z",
                "2021-04-24T21:00:00Z",
                &moscow
            ),
            1
        );
    }

    #[test]
    fn fall_back_never_counts_backwards() {
        let ny = TimeZone::get("America/New_York").unwrap();
        // 05:00Z is 01:00 EST, the second 01:00 of 2021-11-07.
        let scale: Scale = "minute".parse().unwrap();
        let before = scale.index(ts("2021-11-07T05:59:59Z"), &ny);
        let repeated = scale.index(ts("2021-11-07T06:00:00Z"), &ny);
        assert_eq!(repeated, before);
        let after = scale.index(ts("2021-11-07T07:00:00Z"), &ny);
        // The wall clock then resumes at 02:00: one minute after 01:59.
        assert_eq!(after - before, 1);
        let start = scale.trunc(ts("2021-11-07T06:30:00Z"), &ny);
        assert_eq!(
            start.to_string(),
            "2021-11-07T01:59:00-04:00[America/New_York]"
        );
        let mut t = ts("2021-11-07T04:00:00Z");
        for s in ["minute", "hour", "30min", "7h", "day"] {
            let scale: Scale = s.parse().unwrap();
            let mut last = scale.index(t, &ny);
            for _ in 0..(4 * 3600 / 7) {
                t = t.checked_add(SignedDuration::from_secs(7)).unwrap();
                let i = scale.index(t, &ny);
                assert!(i >= last, "{s} went back at {t}");
                last = i;
            }
        }
    }

    fn any_scale() -> impl Strategy<Value = Scale> {
        prop_oneof![
            Just(Scale::Minute),
            Just(Scale::Hour),
            Just(Scale::Day),
            Just(Scale::Week),
            Just(Scale::Month),
            Just(Scale::Quarter),
            Just(Scale::Year),
            (1u32..=DAY_SECS as u32).prop_map(Scale::Fixed),
        ]
    }

    proptest! {
        #[test]
        fn civil_days_round_trip(days in -1_000_000i64..1_000_000) {
            let (y, m, d) = civil_from_days(days);
            prop_assert_eq!(days_from_civil(y, m, d), days);
            let date = jiff::civil::Date::new(y as i16, m as i8, d as i8).unwrap();
            let epoch = jiff::civil::date(1970, 1, 1);
            prop_assert_eq!(i64::from(epoch.until(date).unwrap().get_days()), days);
        }

        #[test]
        fn index_is_monotonic_and_trunc_agrees(
            scale in any_scale(),
            secs in -2_000_000_000i64..4_000_000_000,
            step in 0i64..10_000_000,
            zone in prop_oneof![Just("UTC"), Just("America/New_York"), Just("Europe/Moscow"), Just("Australia/Lord_Howe")],
        ) {
            let tz = TimeZone::get(zone).unwrap();
            let t = Timestamp::from_second(secs).unwrap();
            let later = Timestamp::from_second(secs + step).unwrap();
            prop_assert!(scale.index(later, &tz) >= scale.index(t, &tz));
            let start = scale.trunc(t, &tz).timestamp();
            prop_assert!(start <= t);
            prop_assert_eq!(scale.index(start, &tz), scale.index(t, &tz));
        }

        #[test]
        fn scale_display_round_trips(scale in any_scale()) {
            prop_assert_eq!(scale.to_string().parse::<Scale>().unwrap(), scale);
        }

        #[test]
        fn joined_is_what_display_writes(entity in "[a-z._:-]{1,12}", param in "[a-z_]{1,8}") {
            let name = ParamName::new(entity, param);
            prop_assert_eq!(name.parts().joined(), name.to_string());
            prop_assert_eq!(name.parts().joined().parse::<ParamName>().unwrap(), name);
        }
    }
}
