//! A timestamp kept in 12 bytes, and `Option` of it in the same 12.
//!
//! A shard holds a few timestamps per task and one per CTL parameter, for up
//! to millions of each. `jiff::Timestamp` takes 16 bytes and has no niche, so
//! `Option<Timestamp>` takes 24; [`Stamp`] keeps the same instant exactly
//! (seconds and nanoseconds) in three 4-byte words, the nanoseconds stored
//! shifted into a `NonZeroU32` whose zero `Option` uses for `None`.

use std::fmt;
use std::num::NonZeroU32;

use jiff::Timestamp;

/// What the stored nanoseconds are shifted by: jiff's nanoseconds range over
/// `-999_999_999..=999_999_999`, stored as `1..=1_999_999_999`.
const SHIFT: i32 = 1_000_000_000;

/// An instant as jiff holds it, in 12 bytes aligned to 4.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp {
    /// The high half of the seconds since the epoch.
    high: i32,
    /// The low half of the seconds since the epoch.
    low: u32,
    /// The nanoseconds plus [`SHIFT`] (never zero).
    nanos: NonZeroU32,
}

impl Stamp {
    /// The instant back as a `Timestamp`.
    pub fn get(self) -> Timestamp {
        let seconds = (i64::from(self.high) << 32) | i64::from(self.low);
        let nanos = i32::try_from(self.nanos.get()).unwrap_or(SHIFT) - SHIFT;
        // Always `Ok`: every stamp was made from a valid `Timestamp`.
        Timestamp::new(seconds, nanos).unwrap_or(Timestamp::UNIX_EPOCH)
    }
}

impl From<Timestamp> for Stamp {
    fn from(t: Timestamp) -> Stamp {
        let seconds = t.as_second();
        // In range: jiff's seconds fit in 40 bits, its nanoseconds shifted
        // are positive and below 2^31.
        let nanos = u32::try_from(t.subsec_nanosecond() + SHIFT).unwrap_or(1);
        Stamp {
            high: (seconds >> 32) as i32,
            low: seconds as u32,
            nanos: NonZeroU32::new(nanos).unwrap_or(NonZeroU32::MIN),
        }
    }
}

impl From<Stamp> for Timestamp {
    fn from(s: Stamp) -> Timestamp {
        s.get()
    }
}

impl fmt::Debug for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.get(), f)
    }
}

/// `Some(t)` as a stamp (what optional fields are set to).
pub fn some(t: Timestamp) -> Option<Stamp> {
    Some(Stamp::from(t))
}

/// An optional stamp back as an optional `Timestamp`.
pub fn get(s: Option<Stamp>) -> Option<Timestamp> {
    s.map(Stamp::get)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn twelve_bytes_with_or_without_a_value() {
        assert_eq!(std::mem::size_of::<Stamp>(), 12);
        assert_eq!(std::mem::size_of::<Option<Stamp>>(), 12);
        assert_eq!(std::mem::size_of::<(u32, Stamp)>(), 16);
    }

    #[test]
    fn the_ends_of_jiffs_range_round_trip() {
        for t in [
            Timestamp::MIN,
            Timestamp::MAX,
            Timestamp::UNIX_EPOCH,
            Timestamp::new(-1, -1).unwrap(),
            Timestamp::new(-1, -999_999_999).unwrap(),
            Timestamp::new(0, 999_999_999).unwrap(),
        ] {
            assert_eq!(Stamp::from(t).get(), t, "{t}");
        }
    }

    proptest! {
        /// Every instant jiff holds comes back exactly, and stamps compare
        /// equal exactly when their instants do.
        #[test]
        fn every_instant_round_trips(
            secs in Timestamp::MIN.as_second()..=Timestamp::MAX.as_second(),
            nanos in -999_999_999i32..=999_999_999,
            other in Timestamp::MIN.as_second()..=Timestamp::MAX.as_second(),
        ) {
            let Ok(t) = Timestamp::new(secs, nanos) else { return Ok(()) };
            let s = Stamp::from(t);
            prop_assert_eq!(s.get(), t);
            prop_assert_eq!(get(some(t)), Some(t));
            let u = Timestamp::from_second(other).unwrap();
            prop_assert_eq!(Stamp::from(u) == s, u == t);
        }
    }
}
