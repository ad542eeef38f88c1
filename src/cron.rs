//! Cron schedules: five fields (minute, hour, day of month, month, day of
//! week) read in a time zone, for task and process `schedule`s.
//!
//! A thin core wrapper around `croner`: it refuses the six- and seven-field
//! forms (seconds, years) that a schedule over Kafka batches cannot honour,
//! and answers "the next time after this instant" in a zone, without a clock
//! and without panics. Daylight saving follows croner's rules: a wall time
//! that a spring-forward skips fires at the first instant after the gap, and a
//! fixed wall time that a fall-back repeats fires once, at its first instance
//! (interval schedules such as `*/15 * * * *` fire in both).

use std::fmt;

use jiff::tz::TimeZone;
use jiff::Timestamp;

/// Why a cron schedule was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Not five whitespace-separated fields.
    #[error(
        "a cron schedule has five fields (minute hour day-of-month month day-of-week), \
         e.g. \"0 3 * * *\"; this one has {count}{}",
        match count {
            6 | 7 => ": seconds and years are not supported",
            1 => ": write nicknames such as @daily as five fields",
            _ => "",
        }
    )]
    Fields {
        /// How many fields were written.
        count: usize,
    },
    /// Five fields that do not form a schedule.
    #[error("{0}")]
    Invalid(String),
    /// A schedule that names no time at all, e.g. `0 0 30 2 *` (February 30th).
    #[error("the schedule never fires")]
    Never,
}

impl Error {
    /// A schedule is fixed by the configuration: retrying never helps.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// A parsed five-field cron schedule.
#[derive(Clone)]
pub struct Cron {
    text: String,
    schedule: croner::Cron,
}

impl Cron {
    /// Parses a five-field schedule, e.g. `"0 3 * * *"` or `"*/15 9-17 * * MON-FRI"`.
    pub fn parse(text: &str) -> Result<Cron, Error> {
        let count = text.split_whitespace().count();
        if count != 5 {
            return Err(Error::Fields { count });
        }
        let schedule = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Disallowed)
            .year(croner::parser::Year::Disallowed)
            .build()
            .parse(text)
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let cron = Cron {
            text: text.to_string(),
            schedule,
        };
        // Any date that exists comes back within a few decades, so a
        // schedule with no time after the epoch has none at all.
        match cron.next_after(Timestamp::UNIX_EPOCH, &TimeZone::UTC) {
            Some(_) => Ok(cron),
            None => Err(Error::Never),
        }
    }

    /// The schedule as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The first instant strictly after `after` that the schedule names in
    /// zone `tz`; `None` when there is none within the years a timestamp
    /// can hold (e.g. `0 0 30 2 *`, February 30th).
    pub fn next_after(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let zoned = after.to_zoned(tz.clone());
        // croner works in whole wall-clock seconds and, exclusive, starts at
        // the second after `after`'s; every answer is a whole minute, so it
        // is strictly later than `after` even when `after` has a fraction.
        self.schedule
            .find_next_occurrence(&zoned, false)
            .ok()
            .map(|next| next.timestamp())
    }
}

impl PartialEq for Cron {
    fn eq(&self, other: &Self) -> bool {
        self.schedule == other.schedule
    }
}

impl Eq for Cron {}

impl fmt::Debug for Cron {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Cron").field(&self.text).finish()
    }
}

impl fmt::Display for Cron {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn zone(name: &str) -> TimeZone {
        TimeZone::get(name).unwrap()
    }

    /// The next `n` instants after `from`, each strictly after the one before.
    fn next_n(cron: &str, from: &str, tz: &str, n: usize) -> Vec<String> {
        let cron = Cron::parse(cron).unwrap();
        let tz = zone(tz);
        let mut at = ts(from);
        let mut out = Vec::new();
        for _ in 0..n {
            let next = cron.next_after(at, &tz).unwrap();
            assert!(next > at, "{next} after {at}");
            out.push(next.to_string());
            at = next;
        }
        out
    }

    #[test]
    fn five_fields_only() {
        for text in [
            "0 3 * * *",
            "*/15 9-17 * * MON-FRI",
            "0 0 1 JAN *",
            "5 4 L * *",
        ] {
            assert!(Cron::parse(text).is_ok(), "{text}");
        }
        let e = Cron::parse("0 0 3 * * *").unwrap_err();
        assert_eq!(e, Error::Fields { count: 6 });
        assert!(e.to_string().contains("five fields"), "{e}");
        assert!(e.to_string().contains("seconds and years"), "{e}");
        assert_eq!(
            Cron::parse("0 0 3 * * * 2030").unwrap_err(),
            Error::Fields { count: 7 }
        );
        assert!(Cron::parse("@daily")
            .unwrap_err()
            .to_string()
            .contains("nicknames"));
        assert_eq!(Cron::parse("").unwrap_err(), Error::Fields { count: 0 });
        assert_eq!(
            Cron::parse("0 3 * *").unwrap_err(),
            Error::Fields { count: 4 }
        );
        for bad in [
            "61 * * * *",
            "0 24 * * *",
            "0 0 32 * *",
            "0 0 * 13 *",
            "x * * * *",
        ] {
            assert!(
                matches!(Cron::parse(bad), Err(Error::Invalid(_))),
                "{bad}: {:?}",
                Cron::parse(bad)
            );
        }
    }

    #[test]
    fn next_is_strictly_after() {
        let cron = Cron::parse("0 3 * * *").unwrap();
        let at = ts("2024-05-01T03:00:00Z");
        assert_eq!(
            cron.next_after(at, &TimeZone::UTC),
            Some(ts("2024-05-02T03:00:00Z"))
        );
        let just_before = ts("2024-05-01T02:59:59.999Z");
        assert_eq!(cron.next_after(just_before, &TimeZone::UTC), Some(at));
        let fraction_after = ts("2024-05-01T03:00:00.5Z");
        assert_eq!(
            cron.next_after(fraction_after, &TimeZone::UTC),
            Some(ts("2024-05-02T03:00:00Z"))
        );
    }

    #[test]
    fn moscow_three_am_is_midnight_utc() {
        assert_eq!(
            next_n("0 3 * * *", "2024-03-30T12:00:00Z", "Europe/Moscow", 3),
            [
                "2024-03-31T00:00:00Z",
                "2024-04-01T00:00:00Z",
                "2024-04-02T00:00:00Z"
            ]
        );
    }

    #[test]
    fn berlin_spring_forward() {
        // 2024-03-31: 02:00 CET jumps to 03:00 CEST (01:00Z); 02:30 does not exist.
        assert_eq!(
            next_n("30 2 * * *", "2024-03-30T12:00:00Z", "Europe/Berlin", 3),
            [
                "2024-03-31T01:00:00Z", // the first instant after the gap, 03:00 CEST
                "2024-04-01T00:30:00Z", // 02:30 CEST
                "2024-04-02T00:30:00Z",
            ]
        );
        // Hourly: 01:00 CET, then 03:00 CEST: one hour of wall time is skipped, no run lost twice.
        assert_eq!(
            next_n("0 * * * *", "2024-03-30T23:30:00Z", "Europe/Berlin", 3),
            [
                "2024-03-31T00:00:00Z", // 01:00 CET
                "2024-03-31T01:00:00Z", // 03:00 CEST
                "2024-03-31T02:00:00Z", // 04:00 CEST
            ]
        );
    }

    #[test]
    fn berlin_fall_back() {
        // 2024-10-27: 03:00 CEST goes back to 02:00 CET (01:00Z); 02:30 happens twice.
        // A fixed wall time fires once, at its first instance.
        assert_eq!(
            next_n("30 2 * * *", "2024-10-26T12:00:00Z", "Europe/Berlin", 2),
            ["2024-10-27T00:30:00Z", "2024-10-28T01:30:00Z"]
        );
        // An interval schedule fires in both halves of the repeated hour.
        assert_eq!(
            next_n("0 * * * *", "2024-10-26T23:30:00Z", "Europe/Berlin", 4),
            [
                "2024-10-27T00:00:00Z", // 02:00 CEST
                "2024-10-27T01:00:00Z", // 02:00 CET
                "2024-10-27T02:00:00Z", // 03:00 CET
                "2024-10-27T03:00:00Z",
            ]
        );
    }

    #[test]
    fn never_matching_schedule_is_refused() {
        assert_eq!(Cron::parse("0 0 30 2 *").unwrap_err(), Error::Never);
        assert_eq!(Cron::parse("0 0 31 4,6 *").unwrap_err(), Error::Never);
        // Leap days exist.
        let leap = Cron::parse("0 0 29 2 *").unwrap();
        assert_eq!(
            leap.next_after(ts("2025-01-01T00:00:00Z"), &TimeZone::UTC),
            Some(ts("2028-02-29T00:00:00Z"))
        );
        let cron = Cron::parse("0 0 * * *").unwrap();
        assert_eq!(cron.next_after(Timestamp::MAX, &TimeZone::UTC), None);
    }
}
