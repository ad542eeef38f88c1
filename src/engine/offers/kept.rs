//! How a shard keeps its offers: in full while anything works on one, and
//! as the bytes of its changelog record once nothing does.
//!
//! In full, an offer with a small body and five stage states took ~3.7 KB
//! (a `serde_json` map per body and state, a 96-byte slot per stage, the
//! offer's own fields); its record takes ~300 bytes: the body and states as
//! JSON text, the slots as a few varints. A shard holds every offer it owns
//! for as long as the offer lives, and most are idle at any time. The
//! record is the one the step writes to the changelog anyway, so keeping it
//! costs no second encoding; the next step that touches the offer (a
//! change, a result, a command, a timer, a rescan that queues it, a
//! recovery) reads it back first ([`Offers::thaw`]). Readers of every offer
//! (a rescan's predicates, search, the views, a snapshot) read a kept one
//! without thawing it.

use std::borrow::Cow;
use std::ops::Bound;

use super::{OfferRt, Offers};
use crate::changelog::Value;
use crate::engine::{bug, Error};
use crate::keyed_map::KeyedMap;
use crate::stage::{OfferRecord, Phase};

/// An offer as the shard keeps it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Kept {
    /// A step works on it, a stage is queued or runs on it, or it is a
    /// grave: in full.
    Hot(Box<OfferRt>),
    /// Nothing works on it: its changelog record's bytes.
    Cold(Box<[u8]>),
}

/// The shard's offers by id: steps read and change the ones in full
/// (`get`, `get_mut`); whoever reads every offer sees both kinds.
#[derive(Debug, Clone, Default)]
pub(super) struct OfferMap {
    kept: KeyedMap<Kept>,
}

impl OfferMap {
    /// Offer `id` if it is kept in full.
    pub(super) fn get(&self, id: &str) -> Option<&OfferRt> {
        match self.kept.get(id)? {
            Kept::Hot(rt) => Some(rt),
            Kept::Cold(_) => None,
        }
    }

    /// Offer `id` if it is kept in full, to change.
    pub(super) fn get_mut(&mut self, id: &str) -> Option<&mut OfferRt> {
        match self.kept.get_mut(id)? {
            Kept::Hot(rt) => Some(rt),
            Kept::Cold(_) => None,
        }
    }

    /// Offer `id` however it is kept.
    pub(super) fn kept(&self, id: &str) -> Option<&Kept> {
        self.kept.get(id)
    }

    /// Offer `id` in full, made by `make` if there was none; a kept record
    /// here is a step that did not thaw what it touches.
    pub(super) fn get_or_insert_with(
        &mut self,
        id: &str,
        make: impl FnOnce() -> OfferRt,
    ) -> Result<&mut OfferRt, Error> {
        match self
            .kept
            .get_or_insert_with(id, || Kept::Hot(Box::new(make())))
        {
            Kept::Hot(rt) => Ok(rt),
            Kept::Cold(_) => Err(bug(format!(
                "offer `{id}` changed while kept as its record"
            ))),
        }
    }

    /// Keeps `id` as `kept`; returns how it was kept before.
    pub(super) fn insert(&mut self, id: &str, kept: Kept) -> Option<Kept> {
        self.kept.insert(id, kept)
    }

    /// Forgets `id`.
    pub(super) fn remove(&mut self, id: &str) {
        self.kept.remove(id);
    }

    /// Every offer, in no particular order.
    pub(super) fn values(&self) -> impl Iterator<Item = &Kept> + '_ {
        self.kept.values()
    }

    /// Every offer in id order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &Kept)> + '_ {
        self.kept.iter()
    }

    /// The offers from `from` on, in id order.
    pub(super) fn range<'a>(
        &'a self,
        from: Bound<&str>,
    ) -> impl Iterator<Item = (&'a str, &'a Kept)> + 'a {
        self.kept.range(from)
    }
}

impl Kept {
    /// Whether it is a grave (kept in full until buried).
    pub(super) fn deleted(&self) -> bool {
        matches!(self, Kept::Hot(rt) if rt.deleted)
    }
}

impl OfferRt {
    /// Whether it can be kept as its record: no stage is queued on it or
    /// runs on it, and it is not a grave.
    pub(super) fn idle(&self) -> bool {
        !self.deleted
            && !self
                .slots
                .iter()
                .any(|(_, x)| matches!(x.slot.phase, Phase::Queued | Phase::Running))
    }
}

impl Offers {
    /// Reads offer `id` back in full if it is kept as its record: every
    /// step that changes an offer does this first.
    pub(super) fn thaw(&mut self, id: &str) -> Result<(), Error> {
        let Some(Kept::Cold(bytes)) = self.map.kept(id) else {
            return Ok(());
        };
        let rt = self.read_back(id, bytes)?;
        if let Some(Kept::Cold(bytes)) = self.map.insert(id, Kept::Hot(Box::new(rt))) {
            self.thawed.push((id.to_string(), bytes));
        }
        Ok(())
    }

    /// Keeps the offers thawed in this step that it did not change as the
    /// records they were (a step that thaws an offer to find nothing to do
    /// leaves it as it was).
    pub(super) fn refreeze(&mut self) {
        for (id, bytes) in std::mem::take(&mut self.thawed) {
            if !self.dirty.contains(&id) && self.map.get(&id).is_some_and(OfferRt::idle) {
                self.map.insert(&id, Kept::Cold(bytes));
            }
        }
    }

    /// `kept` in full: itself, or its record read back (for readers of
    /// every offer, which leave it kept as it is).
    pub(super) fn full<'a>(&self, id: &str, kept: &'a Kept) -> Result<Cow<'a, OfferRt>, Error> {
        match kept {
            Kept::Hot(rt) => Ok(Cow::Borrowed(rt)),
            Kept::Cold(bytes) => Ok(Cow::Owned(self.read_back(id, bytes)?)),
        }
    }

    fn read_back(&self, id: &str, bytes: &[u8]) -> Result<OfferRt, Error> {
        let record = crate::codec::decode_offer_record(bytes).map_err(|e| {
            bug(format!(
                "offer `{id}` kept as a record that does not read back: {e}"
            ))
        })?;
        Ok(self.in_full(record))
    }

    /// An offer in full from its record; slots of stages no longer
    /// configured are dropped.
    pub(super) fn in_full(&self, record: OfferRecord) -> OfferRt {
        let slots = record
            .stages
            .into_iter()
            .filter_map(|(name, slot)| Some((*self.by_name.get(name.as_str())?, slot)))
            .collect();
        OfferRt {
            version: record.version,
            body: record.body,
            updated_at: record.updated_at,
            slots,
            guard: record.guard,
            deleted: record.deleted,
        }
    }

    /// The changelog record of offer `id`, changed in this step; an offer
    /// nothing works on any more is kept as that record from now on.
    pub(super) fn write_record(&mut self, id: &str) -> crate::changelog::ChangelogRecord {
        let record = self.offer_record(id);
        if self.map.get(id).is_some_and(OfferRt::idle) {
            if let Some(Value::OfferEncoded(bytes)) = &record.value {
                self.map.insert(id, Kept::Cold(Box::from(bytes.as_slice())));
            }
        }
        record
    }

    /// Keeps a restored offer: as its record (`bytes`, or written now)
    /// when nothing works on it, else in full.
    pub(super) fn keep_restored(&mut self, id: &str, rt: OfferRt, bytes: Option<Vec<u8>>) {
        let kept = if rt.idle() {
            let bytes = bytes.unwrap_or_else(|| self.encoded(&rt));
            Kept::Cold(bytes.into_boxed_slice())
        } else {
            Kept::Hot(Box::new(rt))
        };
        self.map.insert(id, kept);
    }
}
