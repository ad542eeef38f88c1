//! Evaluation: the hot path, run for every task a CTL change fans out to.
//!
//! Nothing here allocates, and `all`/`any` stop at the first decisive child.

use jiff::tz::TimeZone;
use jiff::Timestamp;

use super::{Leaf, Trigger, Values};

impl<P> Trigger<P> {
    /// Whether the trigger fires at `now`, counting chunks in `tz`.
    pub fn eval(&self, v: &impl Values<P>, now: Timestamp, tz: &TimeZone) -> bool {
        match self {
            Trigger::Leaf(leaf) => leaf.eval(v, now, tz),
            Trigger::All(children) => children.iter().all(|c| c.eval(v, now, tz)),
            Trigger::Any(children) => children.iter().any(|c| c.eval(v, now, tz)),
        }
    }
}

impl<P> Leaf<P> {
    /// Whether this condition holds at `now`, counting chunks in `tz`.
    ///
    /// A missing current value makes it false; a missing last value makes
    /// `delta`/`chunk_delta` true, since the task never ran on this parameter.
    pub fn eval(&self, v: &impl Values<P>, now: Timestamp, tz: &TimeZone) -> bool {
        match self {
            Leaf::Delta { p, d } => match (v.current(p), v.last(p)) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(cur), Some(last)) => cur.duration_since(last) >= d.get(),
            },
            Leaf::Delay { p, d } => v
                .current(p)
                .is_some_and(|cur| now.duration_since(cur) <= d.get()),
            Leaf::RefDelay { p, r, d } => match (v.current(p), v.current(r)) {
                (Some(cur), Some(reference)) => reference.duration_since(cur) <= d.get(),
                _ => false,
            },
            Leaf::ChunkDelta { p, scale, n } => match (v.current(p), v.last(p)) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(cur), Some(last)) => {
                    scale.index(cur, tz) - scale.index(last, tz) >= i64::from(*n)
                }
            },
            Leaf::ChunkDelay { p, scale, n } => v
                .current(p)
                .is_some_and(|cur| scale.index(now, tz) - scale.index(cur, tz) <= i64::from(*n)),
            Leaf::ChunkRefDelay { p, r, scale, n } => match (v.current(p), v.current(r)) {
                (Some(cur), Some(reference)) => {
                    scale.index(reference, tz) - scale.index(cur, tz) <= i64::from(*n)
                }
                _ => false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testgen::{self, name, ts, Vals};
    use super::super::{parse, Trigger};
    use super::*;
    use proptest::prelude::*;

    fn eval(src: &str, v: &Vals, now: &str) -> bool {
        parse(src).unwrap().eval(v, ts(now), &TimeZone::UTC)
    }

    fn vals(current: &[(&str, &str)], last: &[(&str, &str)]) -> Vals {
        let mut v = Vals::default();
        for (p, t) in current {
            v.current.insert(name(p), ts(t));
        }
        for (p, t) in last {
            v.last.insert(name(p), ts(t));
        }
        v
    }

    const NOW: &str = "2021-04-25T12:00:00Z";

    #[test]
    fn seed_example() {
        let v = vals(
            &[("a/x", "2021-04-25T03:27:33Z")],
            &[("a/x", "2021-04-23T03:51:16Z")],
        );
        assert!(eval("chunk_delta(a/x, day, 2)", &v, NOW));
        assert!(!eval("delta(a/x, 2d)", &v, NOW));
        assert!(!eval("chunk_delta(a/x, day, 3)", &v, NOW));
        assert!(eval("delta(a/x, 1d23h)", &v, NOW));
    }

    #[test]
    fn delta() {
        let v = vals(
            &[("a/x", "2021-04-25T00:00:00Z")],
            &[("a/x", "2021-04-24T22:00:00Z")],
        );
        assert!(eval("delta(a/x, 2h)", &v, NOW));
        assert!(!eval("delta(a/x, 2h1s)", &v, NOW));
        // A value that moved backwards is not an advance.
        let back = vals(
            &[("a/x", "2021-04-24T00:00:00Z")],
            &[("a/x", "2021-04-25T00:00:00Z")],
        );
        assert!(!eval("delta(a/x, 0s)", &back, NOW));
        let first = vals(&[("a/x", "2021-04-25T00:00:00Z")], &[]);
        assert!(eval("delta(a/x, 100d)", &first, NOW));
        let none = vals(&[], &[("a/x", "2021-04-24T00:00:00Z")]);
        assert!(!eval("delta(a/x, 0s)", &none, NOW));
        assert!(!eval("delta(a/x, 0s)", &Vals::default(), NOW));
    }

    #[test]
    fn delay() {
        let v = vals(&[("a/x", "2021-04-25T10:00:00Z")], &[]);
        assert!(eval("delay(a/x, 2h)", &v, NOW));
        assert!(!eval("delay(a/x, 1h59min)", &v, NOW));
        // A value ahead of the wall clock has a negative lag.
        assert!(eval("delay(a/x, 0s)", &v, "2021-04-25T09:00:00Z"));
        assert!(!eval("delay(a/x, 100d)", &Vals::default(), NOW));
    }

    #[test]
    fn ref_delay() {
        let v = vals(
            &[
                ("a/x", "2021-04-25T10:00:00Z"),
                ("b/y", "2021-04-25T11:00:00Z"),
            ],
            &[],
        );
        assert!(eval("ref_delay(a/x, b/y, 1h)", &v, NOW));
        assert!(!eval("ref_delay(a/x, b/y, 59min)", &v, NOW));
        assert!(eval("ref_delay(b/y, a/x, 0s)", &v, NOW));
        let only_p = vals(&[("a/x", "2021-04-25T10:00:00Z")], &[]);
        assert!(!eval("ref_delay(a/x, b/y, 100d)", &only_p, NOW));
        let only_r = vals(&[("b/y", "2021-04-25T10:00:00Z")], &[]);
        assert!(!eval("ref_delay(a/x, b/y, 100d)", &only_r, NOW));
    }

    #[test]
    fn chunk_delta() {
        let v = vals(
            &[("a/x", "2021-04-25T00:00:00Z")],
            &[("a/x", "2021-04-24T23:59:59Z")],
        );
        assert!(eval("chunk_delta(a/x, day)", &v, NOW));
        assert!(!eval("chunk_delta(a/x, day, 2)", &v, NOW));
        assert!(!eval("chunk_delta(a/x, month)", &v, NOW));
        assert!(eval("chunk_delta(a/x, month, 0)", &v, NOW));
        let first = vals(&[("a/x", "2021-04-25T00:00:00Z")], &[]);
        assert!(eval("chunk_delta(a/x, year, 9)", &first, NOW));
        let none = vals(&[], &[("a/x", "2021-04-24T00:00:00Z")]);
        assert!(!eval("chunk_delta(a/x, day, 0)", &none, NOW));
    }

    #[test]
    fn chunk_delay() {
        let v = vals(&[("a/x", "2021-04-24T23:00:00Z")], &[]);
        assert!(!eval("chunk_delay(a/x, day)", &v, NOW));
        assert!(eval("chunk_delay(a/x, day, 1)", &v, NOW));
        assert!(eval("chunk_delay(a/x, week)", &v, NOW));
        // 2021-04-26 is a Monday: a new ISO week.
        assert!(!eval("chunk_delay(a/x, week)", &v, "2021-04-26T00:00:00Z"));
        assert!(eval("chunk_delay(a/x, day)", &v, "2021-04-24T01:00:00Z"));
        assert!(!eval("chunk_delay(a/x, day, 5)", &Vals::default(), NOW));
    }

    #[test]
    fn chunk_ref_delay() {
        let v = vals(
            &[
                ("a/x", "2021-03-31T10:00:00Z"),
                ("b/y", "2021-04-01T00:00:00Z"),
            ],
            &[],
        );
        assert!(!eval("chunk_ref_delay(a/x, b/y, quarter)", &v, NOW));
        assert!(eval("chunk_ref_delay(a/x, b/y, quarter, 1)", &v, NOW));
        assert!(eval("chunk_ref_delay(a/x, b/y, year)", &v, NOW));
        assert!(eval("chunk_ref_delay(b/y, a/x, day)", &v, NOW));
        let only_p = vals(&[("a/x", "2021-04-25T10:00:00Z")], &[]);
        assert!(!eval("chunk_ref_delay(a/x, b/y, year, 9)", &only_p, NOW));
        let only_r = vals(&[("b/y", "2021-04-25T10:00:00Z")], &[]);
        assert!(!eval("chunk_ref_delay(a/x, b/y, year, 9)", &only_r, NOW));
    }

    #[test]
    fn combinators_and_zones() {
        let v = vals(
            &[("a/x", "2021-04-25T00:30:00Z")],
            &[("a/x", "2021-04-24T23:30:00Z")],
        );
        assert!(eval("all(chunk_delta(a/x, day), delay(a/x, 12h))", &v, NOW));
        assert!(!eval(
            "all(chunk_delta(a/x, day), delay(a/x, 11h))",
            &v,
            NOW
        ));
        assert!(eval(
            "any(delta(a/x, 2h), all(delay(a/x, 12h), chunk_delta(a/x, hour)))",
            &v,
            NOW
        ));
        assert!(!eval("any(delta(a/x, 2h), delay(a/x, 1h))", &v, NOW));
        // In Moscow (UTC+3) both values fall on 2021-04-25.
        let t = parse("chunk_delta(a/x, day)").unwrap();
        let moscow = TimeZone::get("Europe/Moscow").unwrap();
        assert!(!t.eval(&v, ts(NOW), &moscow));
        assert!(t.eval(&v, ts(NOW), &TimeZone::UTC));
    }

    proptest! {
        #[test]
        fn time_alone_never_fires_a_trigger(
            t in testgen::trigger(),
            v in testgen::values(),
            now in testgen::instant(),
            advance in prop_oneof![0i64..7200, 0i64..(400 * 86_400)],
            zone in testgen::zone(),
        ) {
            let tz = TimeZone::get(zone).unwrap();
            let later = now.checked_add(jiff::SignedDuration::from_secs(advance)).unwrap();
            if !t.eval(&v, now, &tz) {
                prop_assert!(!t.eval(&v, later, &tz), "{} fired after {}s", t, advance);
            }
        }

        #[test]
        fn eval_does_not_depend_on_names(t in testgen::trigger(), v in testgen::values(), now in testgen::instant()) {
            let ids: Trigger<usize> = t.map(&mut |p| testgen::PARAMS.iter().position(|q| *q == p.to_string()).unwrap());
            let by_id = testgen::ById(&v);
            prop_assert_eq!(t.eval(&v, now, &TimeZone::UTC), ids.eval(&by_id, now, &TimeZone::UTC));
        }
    }
}
