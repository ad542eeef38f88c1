//! `explain`: why a trigger is true or false, node by node, with the values compared.
//!
//! Unlike `eval`, explain visits every child (an operator wants to see all of
//! them) and allocates freely; it is not on the hot path. Leaf truth values
//! come from `Leaf::eval` itself so the two can never disagree.

use std::fmt;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use super::{Leaf, Trigger, Values};
use crate::ctl::Scale;
use crate::duration::Duration;

/// One node of an explanation tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explain {
    /// DSL text of this node.
    pub expr: String,
    /// Whether this node is true.
    pub value: bool,
    /// The values compared, in words.
    pub detail: String,
    /// Explanations of the children of `all`/`any`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Explain>,
}

impl<P> Trigger<P> {
    /// Explains the evaluation at `now` in `tz`, writing parameters with `name`.
    pub fn explain(
        &self,
        v: &impl Values<P>,
        now: Timestamp,
        tz: &TimeZone,
        name: &impl Fn(&P) -> String,
    ) -> Explain {
        let expr = self.to_dsl(name);
        let (all, children) = match self {
            Trigger::Leaf(leaf) => {
                return Explain {
                    expr,
                    value: leaf.eval(v, now, tz),
                    detail: leaf_detail(leaf, v, now, tz, name),
                    children: Vec::new(),
                }
            }
            Trigger::All(children) => (true, children),
            Trigger::Any(children) => (false, children),
        };
        let children: Vec<Explain> = children
            .iter()
            .map(|c| c.explain(v, now, tz, name))
            .collect();
        let true_count = children.iter().filter(|c| c.value).count();
        let value = if all {
            true_count == children.len()
        } else {
            true_count > 0
        };
        let need = if all { "all" } else { "at least one" };
        let detail = format!("{true_count} of {} true; needs {need}", children.len());
        Explain {
            expr,
            value,
            detail,
            children,
        }
    }
}

fn leaf_detail<P>(
    leaf: &Leaf<P>,
    v: &impl Values<P>,
    now: Timestamp,
    tz: &TimeZone,
    name: &impl Fn(&P) -> String,
) -> String {
    let missing = |q: &P| format!("no current value for {}", name(q));
    let first = |q: &P, cur: Timestamp| {
        format!(
            "current {cur}, no last value for {}: the task never ran on it",
            name(q)
        )
    };
    match leaf {
        Leaf::Delta { p, d } => match (v.current(p), v.last(p)) {
            (None, _) => missing(p),
            (Some(cur), None) => first(p, cur),
            (Some(cur), Some(last)) => {
                let diff = cur.duration_since(last);
                format!(
                    "current {cur} - last {last} = {} {} {d}",
                    span(diff),
                    cmp(diff >= d.get(), ">=", "<")
                )
            }
        },
        Leaf::Delay { p, d } => match v.current(p) {
            None => missing(p),
            Some(cur) => {
                let diff = now.duration_since(cur);
                format!(
                    "now {now} - current {cur} = {} {} {d}",
                    span(diff),
                    cmp(diff <= d.get(), "<=", ">")
                )
            }
        },
        Leaf::RefDelay { p, r, d } => match (v.current(p), v.current(r)) {
            (None, _) => missing(p),
            (_, None) => missing(r),
            (Some(cur), Some(reference)) => ref_delay(name(r), reference, cur, *d),
        },
        Leaf::ChunkDelta { p, scale, n } => match (v.current(p), v.last(p)) {
            (None, _) => missing(p),
            (Some(cur), None) => first(p, cur),
            (Some(cur), Some(last)) => {
                let k = scale.index(cur, tz) - scale.index(last, tz);
                format!(
                    "current {} - last {} = {} {} {n}",
                    chunk(*scale, cur, tz),
                    chunk(*scale, last, tz),
                    chunks(k),
                    cmp(k >= i64::from(*n), ">=", "<")
                )
            }
        },
        Leaf::ChunkDelay { p, scale, n } => match v.current(p) {
            None => missing(p),
            Some(cur) => {
                let k = scale.index(now, tz) - scale.index(cur, tz);
                format!(
                    "now {} - current {} = {} {} {n}",
                    chunk(*scale, now, tz),
                    chunk(*scale, cur, tz),
                    chunks(k),
                    cmp(k <= i64::from(*n), "<=", ">")
                )
            }
        },
        Leaf::ChunkRefDelay { p, r, scale, n } => match (v.current(p), v.current(r)) {
            (None, _) => missing(p),
            (_, None) => missing(r),
            (Some(cur), Some(reference)) => {
                let k = scale.index(reference, tz) - scale.index(cur, tz);
                format!(
                    "{} {} - current {} = {} {} {n}",
                    name(r),
                    chunk(*scale, reference, tz),
                    chunk(*scale, cur, tz),
                    chunks(k),
                    cmp(k <= i64::from(*n), "<=", ">")
                )
            }
        },
    }
}

fn ref_delay(r: String, reference: Timestamp, cur: Timestamp, d: Duration) -> String {
    let diff = reference.duration_since(cur);
    format!(
        "{r} {reference} - current {cur} = {} {} {d}",
        span(diff),
        cmp(diff <= d.get(), "<=", ">")
    )
}

fn cmp(holds: bool, yes: &'static str, no: &'static str) -> &'static str {
    if holds {
        yes
    } else {
        no
    }
}

/// `2021-04-25T03:27:33Z (chunk 2021-04-25T00:00:00+00:00[UTC])`.
fn chunk(scale: Scale, t: Timestamp, tz: &TimeZone) -> String {
    format!("{t} (chunk {})", scale.trunc(t, tz))
}

fn chunks(k: i64) -> String {
    if k.abs() == 1 {
        format!("{k} chunk")
    } else {
        format!("{k} chunks")
    }
}

/// A signed span in DSL units (`-1h30min`), so it reads like the trigger text.
fn span(d: SignedDuration) -> String {
    let sign = if d.is_negative() { "-" } else { "" };
    let abs = d.unsigned_abs();
    if abs.subsec_nanos() == 0 {
        let secs = i64::try_from(abs.as_secs()).unwrap_or(i64::MAX);
        format!("{sign}{}", Duration::from_secs(secs))
    } else {
        format!("{d:#}")
    }
}

/// An indented tree, one node per line, marked ✓ (true) or ✗ (false).
impl fmt::Display for Explain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, 0)
    }
}

impl Explain {
    fn write(&self, f: &mut fmt::Formatter<'_>, depth: usize) -> fmt::Result {
        let mark = if self.value { '✓' } else { '✗' };
        let indent = depth * 2;
        writeln!(f, "{:indent$}{mark} {}: {}", "", self.expr, self.detail)?;
        self.children.iter().try_for_each(|c| c.write(f, depth + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testgen::{self, name, ts, Vals};
    use super::super::{parse, Trigger};
    use super::*;
    use crate::ctl::ParamName;
    use proptest::prelude::*;

    fn explain(src: &str, v: &Vals, now: &str) -> Explain {
        let show = |p: &ParamName| p.to_string();
        parse(src)
            .unwrap()
            .explain(v, ts(now), &TimeZone::UTC, &show)
    }

    fn seed() -> Vals {
        let mut v = Vals::default();
        v.current.insert(name("a/x"), ts("2021-04-25T03:27:33Z"));
        v.last.insert(name("a/x"), ts("2021-04-23T03:51:16Z"));
        v
    }

    #[test]
    fn seed_example() {
        let e = explain(
            "any(chunk_delta(a/x, day, 2), delta(a/x, 2d))",
            &seed(),
            "2021-04-25T12:00:00Z",
        );
        assert!(e.value);
        assert_eq!(e.detail, "1 of 2 true; needs at least one");
        assert_eq!(e.children[0].expr, "chunk_delta(a/x, day, 2)");
        assert_eq!(
            e.children[0].detail,
            "current 2021-04-25T03:27:33Z (chunk 2021-04-25T00:00:00+00:00[UTC]) - last 2021-04-23T03:51:16Z (chunk 2021-04-23T00:00:00+00:00[UTC]) = 2 chunks >= 2"
        );
        assert!(!e.children[1].value);
        assert_eq!(
            e.children[1].detail,
            "current 2021-04-25T03:27:33Z - last 2021-04-23T03:51:16Z = 1d23h36min17s < 2d"
        );
        let text = e.to_string();
        assert!(
            text.starts_with("✓ any(chunk_delta(a/x, day, 2), delta(a/x, 2d)): 1 of 2 true"),
            "{text}"
        );
        assert!(text.contains("\n  ✗ delta(a/x, 2d): current"), "{text}");
    }

    #[test]
    fn leaf_details() {
        let v = seed();
        let now = "2021-04-25T02:27:33Z";
        let detail = |src: &str| explain(src, &v, now).detail;
        assert_eq!(
            detail("delay(a/x, 1h)"),
            "now 2021-04-25T02:27:33Z - current 2021-04-25T03:27:33Z = -1h <= 1h"
        );
        assert_eq!(detail("delay(b/y, 1h)"), "no current value for b/y");
        assert_eq!(
            detail("ref_delay(a/x, b/y, 1h)"),
            "no current value for b/y"
        );
        assert_eq!(
            detail("ref_delay(a/x, a/x, 0s)"),
            "a/x 2021-04-25T03:27:33Z - current 2021-04-25T03:27:33Z = 0s <= 0s"
        );
        assert!(detail("chunk_delay(a/x, hour)").ends_with("= -1 chunk <= 0"));
        assert!(detail("chunk_ref_delay(a/x, a/x, month, 1)").ends_with("= 0 chunks <= 1"));
        let mut first = v.clone();
        first.last.clear();
        let e = explain("chunk_delta(a/x, year, 5)", &first, now);
        assert!(e.value);
        assert_eq!(
            e.detail,
            "current 2021-04-25T03:27:33Z, no last value for a/x: the task never ran on it"
        );
    }

    #[test]
    fn serializes_without_empty_children() {
        let e = explain("all(delta(a/x, 2d))", &seed(), "2021-04-25T12:00:00Z");
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["value"], false);
        assert_eq!(json["expr"], "all(delta(a/x, 2d))");
        assert!(json["children"][0].get("children").is_none());
    }

    fn agrees(
        t: &Trigger<ParamName>,
        e: &Explain,
        v: &Vals,
        now: Timestamp,
        tz: &TimeZone,
    ) -> Result<(), TestCaseError> {
        prop_assert_eq!(e.value, t.eval(v, now, tz), "{}", e.expr);
        prop_assert_eq!(&e.expr, &t.to_string());
        let children: &[Trigger<ParamName>] = match t {
            Trigger::Leaf(_) => &[],
            Trigger::All(c) | Trigger::Any(c) => c,
        };
        prop_assert_eq!(children.len(), e.children.len());
        for (c, ec) in children.iter().zip(&e.children) {
            agrees(c, ec, v, now, tz)?;
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn explain_agrees_with_eval(
            t in testgen::trigger(),
            v in testgen::values(),
            now in testgen::instant(),
            zone in testgen::zone(),
        ) {
            let tz = TimeZone::get(zone).unwrap();
            let e = t.explain(&v, now, &tz, &|p: &ParamName| p.to_string());
            agrees(&t, &e, &v, now, &tz)?;
        }
    }
}
