//! Test support: random triggers that respect the nesting rule, and values.

use std::collections::HashMap;

use jiff::Timestamp;
use proptest::prelude::*;

use super::{Leaf, Trigger, Values};
use crate::ctl::{ParamName, Scale};
use crate::duration::Duration;

/// The parameters random triggers draw from.
pub const PARAMS: [&str; 3] = [
    "dwh.orders/max_dt",
    "dwh.users/updated_at",
    "crm:v1/load-id",
];

pub fn name(s: &str) -> ParamName {
    s.parse().unwrap()
}

pub fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// Values keyed by name.
#[derive(Debug, Clone, Default)]
pub struct Vals {
    pub current: HashMap<ParamName, Timestamp>,
    pub last: HashMap<ParamName, Timestamp>,
}

impl Values<ParamName> for Vals {
    fn current(&self, p: &ParamName) -> Option<Timestamp> {
        self.current.get(p).copied()
    }
    fn last(&self, p: &ParamName) -> Option<Timestamp> {
        self.last.get(p).copied()
    }
}

/// The same values, keyed by position in [`PARAMS`].
pub struct ById<'a>(pub &'a Vals);

impl Values<usize> for ById<'_> {
    fn current(&self, p: &usize) -> Option<Timestamp> {
        self.0.current(&name(PARAMS[*p]))
    }
    fn last(&self, p: &usize) -> Option<Timestamp> {
        self.0.last(&name(PARAMS[*p]))
    }
}

/// An instant within 200 days of 2021-04-25, often within hours of a
/// fall-back (New York or Berlin) where wall clocks repeat themselves.
pub fn instant() -> impl Strategy<Value = Timestamp> {
    let around = |center: i64, radius: i64| {
        (-radius..radius, prop_oneof![Just(0i32), 0..1_000_000_000])
            .prop_map(move |(s, ns)| Timestamp::new(center + s, ns).unwrap())
    };
    prop_oneof![
        4 => around(1_619_308_800, 200 * 86_400),
        1 => around(ts("2021-11-07T06:00:00Z").as_second(), 3 * 3600),
        1 => around(ts("2021-10-31T01:00:00Z").as_second(), 3 * 3600),
    ]
}

pub fn zone() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("UTC"),
        Just("Europe/Moscow"),
        Just("America/New_York"),
        Just("Europe/Berlin"),
    ]
}

pub fn values() -> impl Strategy<Value = Vals> {
    let one = || proptest::option::weighted(0.85, instant());
    (
        proptest::collection::vec(one(), 3),
        proptest::collection::vec(one(), 3),
    )
        .prop_map(|(current, last)| {
            let mut v = Vals::default();
            for (i, (c, l)) in current.into_iter().zip(last).enumerate() {
                if let Some(c) = c {
                    v.current.insert(name(PARAMS[i]), c);
                }
                if let Some(l) = l {
                    v.last.insert(name(PARAMS[i]), l);
                }
            }
            v
        })
}

pub fn scale() -> impl Strategy<Value = Scale> {
    prop_oneof![
        Just(Scale::Minute),
        Just(Scale::Hour),
        Just(Scale::Day),
        Just(Scale::Week),
        Just(Scale::Month),
        Just(Scale::Quarter),
        Just(Scale::Year),
        prop_oneof![Just(1800u32), Just(7 * 3600), 1u32..=86_400].prop_map(Scale::Fixed),
    ]
}

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![Just(0i64), 0i64..10 * 86_400].prop_map(Duration::from_secs)
}

fn param() -> impl Strategy<Value = ParamName> {
    (0..PARAMS.len()).prop_map(|i| name(PARAMS[i]))
}

pub fn leaf() -> impl Strategy<Value = Trigger<ParamName>> {
    let n = 0u32..4;
    prop_oneof![
        (param(), duration()).prop_map(|(p, d)| Leaf::Delta { p, d }),
        (param(), duration()).prop_map(|(p, d)| Leaf::Delay { p, d }),
        (param(), param(), duration()).prop_map(|(p, r, d)| Leaf::RefDelay { p, r, d }),
        (param(), scale(), n.clone()).prop_map(|(p, scale, n)| Leaf::ChunkDelta { p, scale, n }),
        (param(), scale(), n.clone()).prop_map(|(p, scale, n)| Leaf::ChunkDelay { p, scale, n }),
        (param(), param(), scale(), n).prop_map(|(p, r, scale, n)| Leaf::ChunkRefDelay {
            p,
            r,
            scale,
            n
        }),
    ]
    .prop_map(Trigger::Leaf)
}

fn combine(all: bool, children: Vec<Trigger<ParamName>>) -> Trigger<ParamName> {
    if all {
        Trigger::All(children.into())
    } else {
        Trigger::Any(children.into())
    }
}

/// A trigger the parser accepts: a leaf, or all/any whose children are
/// leaves or one level of the opposite kind over leaves.
pub fn trigger() -> impl Strategy<Value = Trigger<ParamName>> {
    let root = any::<bool>().prop_flat_map(|all| {
        let nested = proptest::collection::vec(leaf(), 1..4).prop_map(move |c| combine(!all, c));
        let child = prop_oneof![3 => leaf(), 1 => nested];
        proptest::collection::vec(child, 1..5).prop_map(move |c| combine(all, c))
    });
    prop_oneof![1 => leaf(), 3 => root]
}
