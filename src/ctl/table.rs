//! Interned CTL parameter names with dense ids (the configuration's table;
//! a shard's values are kept in [`super::CtlTable`]).
//!
//! Names are kept back to back in one string, each id pointing at its span:
//! a lookup touches the hash group, the id's span and the text, where a
//! `Vec<ParamName>` cost a further cache miss per string (and two heap
//! allocations per parameter). With a million parameters the lookup was the
//! largest single cost of the CTL hot path; [`ParamNames::prefetch`] lets a
//! batch of lookups wait for those three misses together.

use std::fmt;

use crate::group_table::GroupTable;

/// Interned parameter id: dense, assigned in first-seen order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ParamId(pub u32);

impl ParamId {
    /// The id as an index into dense per-parameter tables.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A parameter name as the table holds it (borrowed parts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParamRef<'a> {
    /// The entity (`dwh.orders`).
    pub entity: &'a str,
    /// The parameter of the entity (`max_dt`).
    pub param: &'a str,
}

impl ParamRef<'_> {
    /// `entity/param` in one string: what `Display` writes, without the
    /// formatter (records and run commands name every parameter this way).
    pub fn joined(&self) -> crate::name_map::Name {
        crate::name_map::concat(&[self.entity, "/", self.param])
    }
}

impl fmt::Display for ParamRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.entity, self.param)
    }
}

/// Where a name lies in [`ParamNames::text`]: its start and the length of
/// its entity. Its parameter follows the entity directly and ends where the
/// next name starts (or the text ends): 8 bytes per name, not 12.
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    start: u32,
    entity: u32,
}

/// Interned parameter names with dense ids (the configuration's table,
/// which the router and the shards read).
#[derive(Debug, Default, Clone)]
pub struct ParamNames {
    // Ids hashed by `(entity, param)`: a lookup by two `&str` allocates
    // nothing and touches one line before the name.
    ids: GroupTable,
    /// Every name, entity then parameter, back to back.
    text: String,
    /// Per id, where its name lies in `text`.
    spans: Vec<Span>,
}

/// The hash of `entity/param` in a [`ParamNames`] (fixed seeds: the same in
/// every run and every table).
fn param_hash(entity: &[u8], param: &[u8]) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = foldhash::fast::FixedState::with_seed(0x5245_4143_544f_5221).build_hasher();
    h.write(entity);
    // A separator no name holds, so that `ab/c` and `a/bc` differ.
    h.write_u8(0xff);
    h.write(param);
    h.finish()
}

/// The hash of the name `id` has in `text` (what a rehash needs).
fn stored_hash(text: &str, spans: &[Span], id: u32) -> u64 {
    let name = parts(text, spans, ParamId(id));
    param_hash(name.entity.as_bytes(), name.param.as_bytes())
}

/// Both parts of the name `id` has in `text` (empty for an id not issued).
fn parts<'a>(text: &'a str, spans: &[Span], id: ParamId) -> ParamRef<'a> {
    let i = id.index();
    let Some(span) = spans.get(i) else {
        return ParamRef::default();
    };
    let start = span.start as usize;
    let middle = start + span.entity as usize;
    let end = spans
        .get(i.saturating_add(1))
        .map_or(text.len(), |next| next.start as usize);
    ParamRef {
        entity: text.get(start..middle).unwrap_or_default(),
        param: text.get(middle..end).unwrap_or_default(),
    }
}

impl ParamNames {
    /// No names.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of `name`, assigning the next one if it is new. `name` is a
    /// valid parameter name (the parts of a [`super::ParamName`]):
    /// [`ParamNames::raw_id`] relies on it.
    pub fn intern(&mut self, name: ParamRef<'_>) -> ParamId {
        let ParamRef { entity, param } = name;
        if let Some(id) = self.id(entity, param) {
            return id;
        }
        // 2^32 interned names, or 4 GiB of them, would not fit in memory first.
        let id = ParamId(u32::try_from(self.spans.len()).unwrap_or(u32::MAX));
        let span = Span {
            start: u32::try_from(self.text.len()).unwrap_or(u32::MAX),
            entity: u32::try_from(entity.len()).unwrap_or(u32::MAX),
        };
        self.text.push_str(entity);
        self.text.push_str(param);
        self.spans.push(span);
        let (text, spans) = (&self.text, &self.spans);
        self.ids.insert(
            param_hash(entity.as_bytes(), param.as_bytes()),
            id.0,
            |id| stored_hash(text, spans, id),
        );
        id
    }

    /// Reserves room for `more` names of `bytes` in all.
    pub fn reserve(&mut self, more: usize, bytes: usize) {
        let (text, spans) = (&self.text, &self.spans);
        self.ids.reserve(more, |id| stored_hash(text, spans, id));
        self.spans.reserve_exact(more);
        self.text.reserve_exact(bytes);
    }

    /// Bytes of all the names.
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// Gives back the room grown for names never interned: a table built
    /// once (the router's, a shard's) is kept for the life of the process.
    pub fn shrink_to_fit(&mut self) {
        let (text, spans) = (&self.text, &self.spans);
        self.ids.shrink_to_fit(|id| stored_hash(text, spans, id));
        self.text.shrink_to_fit();
        self.spans.shrink_to_fit();
    }

    /// The id of `entity/param`, if it was interned.
    pub fn id(&self, entity: &str, param: &str) -> Option<ParamId> {
        self.raw_id(entity.as_bytes(), param.as_bytes())
    }

    /// [`ParamNames::id`] of a name as raw bytes (a record's, not yet read
    /// as UTF-8): only valid names are interned (each from a
    /// [`super::ParamName`]), so bytes equal to one are that valid name.
    pub fn raw_id(&self, entity: &[u8], param: &[u8]) -> Option<ParamId> {
        self.ids
            .find(param_hash(entity, param), |id| {
                let name = parts(&self.text, &self.spans, ParamId(id));
                name.entity.as_bytes() == entity && name.param.as_bytes() == param
            })
            .map(ParamId)
    }

    /// Starts fetching what looking each of `names` (raw `(entity, param)`
    /// bytes) up will read: all their groups, then the spans of the ids
    /// found there, then those names' text. Each stage's misses overlap
    /// (where lookups made one after another waited for each in turn), and
    /// the lookups that follow find their lines in cache. Only a hint:
    /// what a lookup answers does not depend on it.
    pub fn prefetch(&self, names: &[(&[u8], &[u8])]) {
        const AHEAD: usize = 32;
        let mut hashes = [0u64; AHEAD];
        let mut found = [None; AHEAD];
        for names in names.chunks(AHEAD) {
            for (h, (entity, param)) in hashes.iter_mut().zip(names) {
                *h = param_hash(entity, param);
                self.ids.prefetch(*h);
            }
            for (f, &h) in found.iter_mut().zip(&hashes).take(names.len()) {
                *f = self.ids.candidate(h);
                if let Some(id) = *f {
                    prefetch_index::prefetch_index(&self.spans, id as usize);
                }
            }
            for id in found.iter().take(names.len()).flatten() {
                if let Some(span) = self.spans.get(*id as usize) {
                    prefetch_index::prefetch_index(self.text.as_bytes(), span.start as usize);
                }
            }
        }
    }

    /// The name behind `id` (an empty name if `id` was not issued here).
    pub fn name(&self, id: ParamId) -> ParamRef<'_> {
        parts(&self.text, &self.spans, id)
    }

    /// Number of interned parameters.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether no parameter was interned.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctl::ParamName;
    use proptest::prelude::*;

    #[test]
    fn names_intern_and_read_back() {
        let mut table = ParamNames::new();
        assert!(table.is_empty());
        let a = table.intern(ParamRef {
            entity: "dwh.orders",
            param: "max_dt",
        });
        let b = table.intern(ParamRef {
            entity: "dwh.users",
            param: "updated_at",
        });
        assert_eq!((a, b), (ParamId(0), ParamId(1)));
        assert_eq!(
            table.intern(ParamName::new("dwh.orders", "max_dt").parts()),
            a
        );
        assert_eq!(table.id("dwh.users", "updated_at"), Some(b));
        assert_eq!(table.id("dwh.users", "nope"), None);
        assert_eq!(table.name(b).to_string(), "dwh.users/updated_at");
        assert_eq!(table.name(b).joined(), "dwh.users/updated_at");
        assert_eq!(table.name(ParamId(7)).joined(), "/");
        assert_eq!(table.len(), 2);
        assert_eq!(table.name(a).joined(), "dwh.orders/max_dt");
    }

    proptest! {
        /// Names that share their text when put together (`ab` + `c` and
        /// `a` + `bc`) stay apart, and every name gets its own id back.
        #[test]
        fn names_round_trip(names in proptest::collection::vec(("[ab.]{1,3}", "[bc_]{1,3}"), 1..40)) {
            let mut table = ParamNames::new();
            let ids: Vec<ParamId> = names
                .iter()
                .map(|(e, p)| table.intern(ParamRef { entity: e, param: p }))
                .collect();
            for ((e, p), id) in names.iter().zip(&ids) {
                prop_assert_eq!(table.id(e, p), Some(*id));
                prop_assert_eq!(table.name(*id), ParamRef { entity: e, param: p });
            }
            let distinct: std::collections::BTreeSet<_> = names.iter().collect();
            prop_assert_eq!(table.len(), distinct.len());
        }
    }
}
