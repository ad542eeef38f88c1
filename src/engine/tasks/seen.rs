//! A task's parameter values by id (its last-seen values, a run's snapshot).

use std::ops::Deref;

use crate::ctl::ParamId;
use crate::stamp::Stamp;

/// Values by parameter id, in a list sized to its length: 16 bytes in the
/// task where a `Vec` takes 24, and no room held for values that never come
/// (a shard holds millions of tasks; a list grown by pushes holds four).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Seen(Box<[(ParamId, Stamp)]>);

impl Seen {
    /// Sets the value of `p`, adding it when it has none.
    pub(super) fn set(&mut self, p: ParamId, value: Stamp) {
        match self.0.iter_mut().find(|(q, _)| *q == p) {
            Some(slot) => slot.1 = value,
            None => {
                let mut all = std::mem::take(&mut self.0).into_vec();
                all.push((p, value));
                self.0 = all.into_boxed_slice();
            }
        }
    }

    /// Keeps only the values `keep` accepts.
    pub(super) fn retain(&mut self, keep: impl FnMut(&(ParamId, Stamp)) -> bool) {
        let mut all = std::mem::take(&mut self.0).into_vec();
        all.retain(keep);
        self.0 = all.into_boxed_slice();
    }
}

impl Deref for Seen {
    type Target = [(ParamId, Stamp)];

    fn deref(&self) -> &[(ParamId, Stamp)] {
        &self.0
    }
}

impl From<Vec<(ParamId, Stamp)>> for Seen {
    fn from(all: Vec<(ParamId, Stamp)>) -> Seen {
        Seen(all.into_boxed_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_replaces_or_adds_and_retain_keeps() {
        let t = |s| Stamp::from(jiff::Timestamp::from_second(s).unwrap());
        let mut seen = Seen::default();
        seen.set(ParamId(3), t(1));
        seen.set(ParamId(5), t(2));
        seen.set(ParamId(3), t(4));
        assert_eq!(&*seen, &[(ParamId(3), t(4)), (ParamId(5), t(2))]);
        seen.retain(|(p, _)| *p != ParamId(3));
        assert_eq!(&*seen, &[(ParamId(5), t(2))]);
    }
}
