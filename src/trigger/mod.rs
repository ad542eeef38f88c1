//! CTL triggers: the DSL, evaluation, `explain` and the continuous-firing lint.
//!
//! A trigger is a tree over CTL parameters (see DESIGN §4):
//! `all(chunk_delta(dwh.orders/max_dt, day), delay(dwh.users/updated_at, 2h))`.
//! It is generic over how parameters are named: [`parse`] yields
//! `Trigger<ParamName>`, and the configuration interns it into
//! `Trigger<ParamId>` (ids into its one table of names) with
//! [`Trigger::map`], so that evaluation never touches strings.
//!
//! - [`parse`] reads the DSL and enforces the nesting rule.
//! - [`Trigger::eval`] decides whether a task should run (hot path).
//! - [`Trigger::explain`] says why, node by node.
//! - [`Trigger::lint`] warns about triggers that would re-run continuously.

use std::fmt;

use jiff::Timestamp;

use crate::ctl::Scale;
use crate::duration::Duration;

mod eval;
mod explain;
mod lint;
mod parse;
#[cfg(test)]
#[path = "prop.rs"]
mod testgen;

pub use explain::Explain;
pub use lint::Lint;
pub use parse::{parse, ParseError};

/// A CTL trigger over parameters of type `P` (`ParamName` after parsing, `ParamId` once compiled by the engine).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger<P> {
    /// A single condition on one or two parameters.
    Leaf(Leaf<P>),
    /// True when every child is true.
    All(Box<[Trigger<P>]>),
    /// True when at least one child is true.
    Any(Box<[Trigger<P>]>),
}

/// A condition on one parameter `p` (and a reference parameter `r`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leaf<P> {
    /// `current(p) - last(p) >= d`.
    Delta {
        /// The watched parameter.
        p: P,
        /// The minimal advance.
        d: Duration,
    },
    /// `now - current(p) <= d`.
    Delay {
        /// The watched parameter.
        p: P,
        /// The maximal lag behind the wall clock.
        d: Duration,
    },
    /// `current(r) - current(p) <= d`.
    RefDelay {
        /// The watched parameter.
        p: P,
        /// The reference it must keep up with.
        r: P,
        /// The maximal lag behind the reference.
        d: Duration,
    },
    /// `index(current(p)) - index(last(p)) >= n`.
    ChunkDelta {
        /// The watched parameter.
        p: P,
        /// The chunk size.
        scale: Scale,
        /// The minimal number of new chunks (1 when not written).
        n: u32,
    },
    /// `index(now) - index(current(p)) <= n`.
    ChunkDelay {
        /// The watched parameter.
        p: P,
        /// The chunk size.
        scale: Scale,
        /// The maximal lag in chunks (0 when not written).
        n: u32,
    },
    /// `index(current(r)) - index(current(p)) <= n`.
    ChunkRefDelay {
        /// The watched parameter.
        p: P,
        /// The reference it must keep up with.
        r: P,
        /// The chunk size.
        scale: Scale,
        /// The maximal lag in chunks (0 when not written).
        n: u32,
    },
}

/// Default `n` of `chunk_delta`: a new chunk.
pub const CHUNK_DELTA_DEFAULT: u32 = 1;
/// Default `n` of `chunk_delay` and `chunk_ref_delay`: the same chunk.
pub const CHUNK_DELAY_DEFAULT: u32 = 0;

/// What evaluation reads: current values (global CTL table) and the task's
/// last-seen values (recorded on its last success).
pub trait Values<P> {
    /// The latest value of `p`, if any was ever received.
    fn current(&self, p: &P) -> Option<Timestamp>;
    /// The value of `p` recorded at the task's last success, if any.
    fn last(&self, p: &P) -> Option<Timestamp>;
}

impl<P> Leaf<P> {
    /// The DSL function name of this leaf.
    pub fn function(&self) -> &'static str {
        match self {
            Leaf::Delta { .. } => "delta",
            Leaf::Delay { .. } => "delay",
            Leaf::RefDelay { .. } => "ref_delay",
            Leaf::ChunkDelta { .. } => "chunk_delta",
            Leaf::ChunkDelay { .. } => "chunk_delay",
            Leaf::ChunkRefDelay { .. } => "chunk_ref_delay",
        }
    }

    /// The watched parameter.
    pub fn p(&self) -> &P {
        match self {
            Leaf::Delta { p, .. }
            | Leaf::Delay { p, .. }
            | Leaf::RefDelay { p, .. }
            | Leaf::ChunkDelta { p, .. }
            | Leaf::ChunkDelay { p, .. }
            | Leaf::ChunkRefDelay { p, .. } => p,
        }
    }

    /// The reference parameter, for the `ref` variants.
    pub fn r(&self) -> Option<&P> {
        match self {
            Leaf::RefDelay { r, .. } | Leaf::ChunkRefDelay { r, .. } => Some(r),
            _ => None,
        }
    }

    /// Whether this leaf only fires after the parameter moved since the last success.
    pub fn is_delta(&self) -> bool {
        matches!(self, Leaf::Delta { .. } | Leaf::ChunkDelta { .. })
    }

    /// The same leaf over other parameter names.
    pub fn map<Q>(&self, f: &mut impl FnMut(&P) -> Q) -> Leaf<Q> {
        match self {
            Leaf::Delta { p, d } => Leaf::Delta { p: f(p), d: *d },
            Leaf::Delay { p, d } => Leaf::Delay { p: f(p), d: *d },
            Leaf::RefDelay { p, r, d } => Leaf::RefDelay {
                p: f(p),
                r: f(r),
                d: *d,
            },
            Leaf::ChunkDelta { p, scale, n } => Leaf::ChunkDelta {
                p: f(p),
                scale: *scale,
                n: *n,
            },
            Leaf::ChunkDelay { p, scale, n } => Leaf::ChunkDelay {
                p: f(p),
                scale: *scale,
                n: *n,
            },
            Leaf::ChunkRefDelay { p, r, scale, n } => Leaf::ChunkRefDelay {
                p: f(p),
                r: f(r),
                scale: *scale,
                n: *n,
            },
        }
    }
}

impl<P> Trigger<P> {
    /// The same trigger over other parameter names (e.g. `ParamName` -> `ParamId`).
    pub fn map<Q>(&self, f: &mut impl FnMut(&P) -> Q) -> Trigger<Q> {
        match self {
            Trigger::Leaf(leaf) => Trigger::Leaf(leaf.map(f)),
            Trigger::All(children) => Trigger::All(children.iter().map(|c| c.map(f)).collect()),
            Trigger::Any(children) => Trigger::Any(children.iter().map(|c| c.map(f)).collect()),
        }
    }

    /// Every referenced parameter (`p` and `r`), each once, in first-appearance order.
    pub fn params(&self) -> Vec<&P>
    where
        P: PartialEq,
    {
        let mut out = Vec::new();
        self.for_each_param(&mut |q| {
            if !out.contains(&q) {
                out.push(q);
            }
        });
        out
    }

    /// Calls `f` with each parameter every leaf names, in order (a name
    /// more than one leaf holds comes more than once): [`Trigger::params`]
    /// without the list.
    pub fn for_each_param<'a>(&'a self, f: &mut impl FnMut(&'a P)) {
        self.for_each_leaf(&mut |leaf| {
            f(leaf.p());
            if let Some(r) = leaf.r() {
                f(r);
            }
        });
    }

    fn for_each_leaf<'a>(&'a self, f: &mut impl FnMut(&'a Leaf<P>)) {
        match self {
            Trigger::Leaf(leaf) => f(leaf),
            Trigger::All(children) | Trigger::Any(children) => {
                children.iter().for_each(|c| c.for_each_leaf(f))
            }
        }
    }

    /// The DSL text of this trigger, writing parameters with `name`.
    pub fn to_dsl(&self, name: &impl Fn(&P) -> String) -> String {
        Dsl(self, &|p: &P, f: &mut fmt::Formatter<'_>| {
            f.write_str(&name(p))
        })
        .to_string()
    }
}

/// Writes a trigger as DSL text, parameters written by `F`.
struct Dsl<'a, P, F>(&'a Trigger<P>, &'a F);

impl<P, F> fmt::Display for Dsl<'_, P, F>
where
    F: Fn(&P, &mut fmt::Formatter<'_>) -> fmt::Result,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Dsl(trigger, name) = *self;
        let (function, children) = match trigger {
            Trigger::Leaf(leaf) => return LeafDsl(leaf, name).fmt(f),
            Trigger::All(children) => ("all", children),
            Trigger::Any(children) => ("any", children),
        };
        write!(f, "{function}(")?;
        for (i, child) in children.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            Dsl(child, name).fmt(f)?;
        }
        f.write_str(")")
    }
}

/// Writes a leaf as DSL text, leaving out default chunk counts.
struct LeafDsl<'a, P, F>(&'a Leaf<P>, &'a F);

impl<P, F> fmt::Display for LeafDsl<'_, P, F>
where
    F: Fn(&P, &mut fmt::Formatter<'_>) -> fmt::Result,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let LeafDsl(leaf, name) = *self;
        write!(f, "{}(", leaf.function())?;
        name(leaf.p(), f)?;
        if let Some(r) = leaf.r() {
            f.write_str(", ")?;
            name(r, f)?;
        }
        match leaf {
            Leaf::Delta { d, .. } | Leaf::Delay { d, .. } | Leaf::RefDelay { d, .. } => {
                write!(f, ", {d}")?
            }
            Leaf::ChunkDelta { scale, n, .. } => {
                write!(f, ", {scale}")?;
                if *n != CHUNK_DELTA_DEFAULT {
                    write!(f, ", {n}")?;
                }
            }
            Leaf::ChunkDelay { scale, n, .. } | Leaf::ChunkRefDelay { scale, n, .. } => {
                write!(f, ", {scale}")?;
                if *n != CHUNK_DELAY_DEFAULT {
                    write!(f, ", {n}")?;
                }
            }
        }
        f.write_str(")")
    }
}

/// Prints DSL text that [`parse`] reads back to an equal trigger.
impl<P: fmt::Display> fmt::Display for Trigger<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Dsl(self, &|p: &P, f: &mut fmt::Formatter<'_>| p.fmt(f)).fmt(f)
    }
}

/// Prints the leaf as DSL text.
impl<P: fmt::Display> fmt::Display for Leaf<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        LeafDsl(self, &|p: &P, f: &mut fmt::Formatter<'_>| p.fmt(f)).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctl::ParamName;

    #[test]
    fn params_are_listed_once_in_order() {
        let t = parse("any(all(ref_delay(a/x, b/y, 1h), delta(c/z, 1s)), delay(b/y, 2h), chunk_delta(a/x, day))").unwrap();
        let names: Vec<String> = t.params().iter().map(|p| p.to_string()).collect();
        assert_eq!(names, ["a/x", "b/y", "c/z"]);
    }

    #[test]
    fn map_interns() {
        let t = parse("all(delta(a/x, 1h), chunk_ref_delay(b/y, a/x, day, 2))").unwrap();
        let mut seen: Vec<ParamName> = Vec::new();
        let ids = t.map(
            &mut |p: &ParamName| match seen.iter().position(|q| q == p) {
                Some(i) => i,
                None => {
                    seen.push(p.clone());
                    seen.len() - 1
                }
            },
        );
        assert_eq!(ids.params(), [&0, &1]);
        let back = ids.map(&mut |i: &usize| seen[*i].clone());
        assert_eq!(back, t);
    }

    #[test]
    fn display_leaves_out_defaults() {
        for src in [
            "chunk_delta(a/x, day)",
            "chunk_delta(a/x, day, 2)",
            "chunk_delay(a/x, 30min)",
            "chunk_delay(a/x, week, 1)",
            "chunk_ref_delay(a/x, b/y, month)",
            "all(delta(a/x, 1h30min), any(delay(a/x, 2d), ref_delay(a/x, b/y, 45s)))",
        ] {
            assert_eq!(parse(src).unwrap().to_string(), src);
        }
        assert_eq!(
            parse("chunk_delta(a/x, day, 1)").unwrap().to_string(),
            "chunk_delta(a/x, day)"
        );
        let t = parse("delay(a/x, 2h)").unwrap();
        assert_eq!(t.to_dsl(&|p| p.param().to_uppercase()), "delay(X, 2h)");
    }
}
