//! The continuous-firing lint.
//!
//! Last-seen values are recorded on success, so only `delta`/`chunk_delta`
//! become false again after a run. A way to fire without one of them stays
//! open after each success, and the task would re-run in a loop.

use std::fmt;

use super::Trigger;

/// A warning about a trigger that will re-run its task continuously.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lint {
    /// What is wrong and how to fix it.
    pub message: String,
}

impl fmt::Display for Lint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<P> Trigger<P> {
    /// Whether every way this trigger can fire needs a `delta`/`chunk_delta` to be true.
    pub fn is_guarded(&self) -> bool {
        self.unguarded().is_none()
    }

    /// A sub-trigger that can fire without any delta, if there is one.
    fn unguarded(&self) -> Option<&Trigger<P>> {
        match self {
            Trigger::Leaf(leaf) => (!leaf.is_delta()).then_some(self),
            Trigger::All(children) => {
                // One guarded child is enough to guard the conjunction.
                children
                    .iter()
                    .all(|c| c.unguarded().is_some())
                    .then_some(self)
            }
            Trigger::Any(children) => children.iter().find_map(Trigger::unguarded),
        }
    }
}

impl<P: fmt::Display> Trigger<P> {
    /// A warning when the trigger can fire without any `delta`/`chunk_delta`.
    pub fn lint(&self) -> Option<Lint> {
        let path = self.unguarded()?;
        Some(Lint {
            message: format!(
                "`{path}` can fire without a delta or chunk_delta trigger, so the task will re-run as soon as each run succeeds; add a delta/chunk_delta to every way the trigger can fire"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse;

    fn lint(src: &str) -> Option<String> {
        parse(src).unwrap().lint().map(|l| l.to_string())
    }

    #[test]
    fn single_delay_warns() {
        let message = lint("delay(a/b, 2h)").unwrap();
        assert!(
            message.starts_with("`delay(a/b, 2h)` can fire without a delta"),
            "{message}"
        );
        assert!(lint("ref_delay(a/b, c/d, 2h)").is_some());
        assert!(lint("chunk_delay(a/b, day)").is_some());
        assert!(lint("chunk_ref_delay(a/b, c/d, day)").is_some());
    }

    #[test]
    fn deltas_are_fine() {
        assert_eq!(lint("delta(a/b, 2h)"), None);
        assert_eq!(lint("chunk_delta(a/b, day)"), None);
        assert_eq!(lint("all(delay(a/b, 2h), delta(a/b, 1h))"), None);
        assert_eq!(
            lint("any(all(delta(a/b, 1h), delay(a/b, 2h)), chunk_delta(a/b, day))"),
            None
        );
    }

    #[test]
    fn names_the_unguarded_path() {
        let message = lint("any(delta(a/b, 1h), delay(a/b, 2h))").unwrap();
        assert!(message.starts_with("`delay(a/b, 2h)`"), "{message}");
        let message = lint("all(delay(a/b, 2h), chunk_delay(c/d, day))").unwrap();
        assert!(
            message.starts_with("`all(delay(a/b, 2h), chunk_delay(c/d, day))`"),
            "{message}"
        );
        let message =
            lint("any(chunk_delta(a/b, day), all(delay(a/b, 2h), chunk_delay(c/d, day)))").unwrap();
        assert!(
            message.starts_with("`all(delay(a/b, 2h), chunk_delay(c/d, day))`"),
            "{message}"
        );
        let guarded = "all(delay(a/b, 2h), any(delta(c/d, 1h), chunk_delta(c/d, hour)))";
        assert_eq!(lint(guarded), None);
    }
}
