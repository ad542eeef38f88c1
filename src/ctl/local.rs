//! A shard's CTL table: the parameters its tasks name, under dense ids of
//! its own, with each one's current value.
//!
//! The names stay in the configuration's table ([`ParamNames`], shared by
//! the router and every shard): per local id a shard keeps the global id,
//! not a copy of the text (with a million parameters the copies were ~38
//! bytes per parameter in every shard). The parameters its tasks name get
//! local ids in the order of their global ids, so the local id of one is
//! its rank among them: a bit per global id and a count per 64 of them
//! find it (a quarter of a byte per parameter of the configuration, where
//! a local id per global id took 4 in every shard). A name the
//! configuration does not hold (a `set_last` command's, one read back from
//! a record written under an older configuration) is interned in the
//! shard's own small table, and a global one none of its tasks names gets
//! the next local id in a small map.

use std::collections::HashMap;

use std::sync::Arc;

use jiff::Timestamp;

use super::{ParamId, ParamNames, ParamRef};
use crate::stamp::{self, Stamp};

/// In [`CtlTable::origin`]: the rest is an id of [`CtlTable::own`].
const OWN: u32 = 1 << 31;

/// Beyond every local id.
const NONE: u32 = u32::MAX;

/// Which of the configuration's parameters a shard's tasks name (a bit per
/// global id), with the count of those before each 64: the rank of one is
/// its local id.
#[derive(Debug, Clone, Default)]
struct Ranks(Vec<(u64, u32)>);

impl Ranks {
    /// Over the ascending, distinct global ids `ids`.
    fn new(ids: &[ParamId]) -> Ranks {
        let words = ids.last().map_or(0, |last| last.index() / 64 + 1);
        let mut bits = vec![(0u64, 0u32); words];
        for id in ids {
            if let Some((word, _)) = bits.get_mut(id.index() / 64) {
                *word |= 1 << (id.0 % 64);
            }
        }
        let mut before = 0u32;
        for (word, count) in &mut bits {
            *count = before;
            before += word.count_ones();
        }
        Ranks(bits)
    }

    /// Fetches the word [`Ranks::of`] reads for `global` into the cache.
    fn prefetch(&self, global: ParamId) {
        prefetch_index::prefetch_index(&self.0, global.index() / 64);
    }

    /// The rank of `global` among the ids, if it is one of them.
    fn of(&self, global: ParamId) -> Option<u32> {
        let &(word, before) = self.0.get(global.index() / 64)?;
        let bit = global.0 % 64;
        (word >> bit & 1 == 1).then(|| before + (word & ((1u64 << bit) - 1)).count_ones())
    }
}

/// A shard's parameters and their current values (see the module docs).
#[derive(Debug, Clone)]
pub struct CtlTable {
    /// The configuration's names.
    global: Arc<ParamNames>,
    /// Per local id, the global id of its name, or [`OWN`] plus its id in
    /// `own`.
    origin: Vec<u32>,
    /// The local ids of the global names the shard's tasks name: their
    /// ranks (the router's lookup of a change serves the shard too).
    ranks: Ranks,
    /// The local ids of global names interned later.
    late: HashMap<u32, u32, foldhash::fast::FixedState>,
    /// Names the configuration does not hold.
    own: ParamNames,
    /// Per id of `own`, the local id.
    own_local: Vec<u32>,
    /// Per local id, its current value (12 bytes each, where
    /// `Option<Timestamp>` takes 24).
    values: Vec<Option<Stamp>>,
}

impl CtlTable {
    /// An empty table over the configuration's names `global`.
    pub fn new(global: Arc<ParamNames>) -> Self {
        Self::with_globals(global, std::iter::empty())
    }

    /// A table over the configuration's names `global` holding its
    /// parameters `named` (the ones a shard's tasks name; in any order,
    /// repeated or not), without values.
    pub fn with_globals(global: Arc<ParamNames>, named: impl IntoIterator<Item = ParamId>) -> Self {
        let mut ids: Vec<ParamId> = named
            .into_iter()
            .filter(|id| id.index() < global.len())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        CtlTable {
            ranks: Ranks::new(&ids),
            late: HashMap::default(),
            values: vec![None; ids.len()],
            origin: ids.into_iter().map(|id| id.0).collect(),
            global,
            own: ParamNames::new(),
            own_local: Vec::new(),
        }
    }

    /// The local id of the configuration's parameter `global`, assigning
    /// the next one (without a value) if it is new here.
    pub fn intern_global(&mut self, global: ParamId) -> ParamId {
        if let Some(id) = self.of_global(global) {
            return id;
        }
        let id = self.next_id();
        self.late.insert(global.0, id.0);
        self.origin.push(global.0);
        self.values.push(None);
        id
    }

    /// The id of `name`, assigning the next one (without a value) if it is new.
    pub fn intern(&mut self, name: ParamRef<'_>) -> ParamId {
        if let Some(global) = self.global.id(name.entity, name.param) {
            return self.intern_global(global);
        }
        // One lookup: `own` gives the next id to a name it did not hold.
        let own = self.own.intern(name);
        if let Some(&id) = self.own_local.get(own.index()) {
            return ParamId(id);
        }
        let id = self.next_id();
        self.own_local.push(id.0);
        self.origin.push(OWN | own.0);
        self.values.push(None);
        id
    }

    /// The id the next new name gets (2^31 parameters would not fit in
    /// memory first).
    fn next_id(&self) -> ParamId {
        ParamId(u32::try_from(self.origin.len()).unwrap_or(NONE))
    }

    /// Gives back the room grown for names never interned.
    pub fn shrink_to_fit(&mut self) {
        self.origin.shrink_to_fit();
        self.late.shrink_to_fit();
        self.own.shrink_to_fit();
        self.own_local.shrink_to_fit();
        self.values.shrink_to_fit();
    }

    /// The configuration's names.
    pub fn global(&self) -> &ParamNames {
        &self.global
    }

    /// The local id of the configuration's parameter `global`, if interned here.
    pub fn of_global(&self, global: ParamId) -> Option<ParamId> {
        match self.ranks.of(global) {
            Some(id) => Some(ParamId(id)),
            None if self.late.is_empty() => None,
            None => self.late.get(&global.0).map(|&id| ParamId(id)),
        }
    }

    /// Fetches what [`CtlTable::of_global`] reads for `global` into the
    /// cache (the first stage of a batch's lookups, see
    /// [`crate::engine::Engine::prefetch_named_ctl`]).
    pub fn prefetch_global(&self, global: ParamId) {
        self.ranks.prefetch(global);
    }

    /// Fetches the value of `id` into the cache.
    pub fn prefetch_value(&self, id: ParamId) {
        prefetch_index::prefetch_index(&self.values, id.index());
    }

    /// The id of `entity/param`, if it was interned.
    pub fn id(&self, entity: &str, param: &str) -> Option<ParamId> {
        match self.global.id(entity, param) {
            Some(global) => self.of_global(global),
            None => self.own_id(entity, param),
        }
    }

    fn own_id(&self, entity: &str, param: &str) -> Option<ParamId> {
        let own = self.own.id(entity, param)?;
        self.own_local.get(own.index()).map(|&id| ParamId(id))
    }

    /// The name behind `id` (an empty name if `id` was not issued here).
    pub fn name(&self, id: ParamId) -> ParamRef<'_> {
        match self.origin.get(id.index()) {
            Some(&o) if o & OWN != 0 => self.own.name(ParamId(o & !OWN)),
            Some(&global) => self.global.name(ParamId(global)),
            None => ParamRef::default(),
        }
    }

    /// The current value of `id`, if one was ever set.
    pub fn current(&self, id: ParamId) -> Option<Timestamp> {
        stamp::get(self.values.get(id.index()).copied().flatten())
    }

    /// Sets the current value; returns the previous one. An id this table
    /// did not issue is ignored.
    pub fn set(&mut self, id: ParamId, value: Timestamp) -> Option<Timestamp> {
        stamp::get(self.values.get_mut(id.index())?.replace(Stamp::from(value)))
    }

    /// Number of interned parameters.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no parameter was interned.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn name<'a>(entity: &'a str, param: &'a str) -> ParamRef<'a> {
        ParamRef { entity, param }
    }

    fn global(names: &[(&str, &str)]) -> Arc<ParamNames> {
        let mut global = ParamNames::new();
        for (e, p) in names {
            global.intern(name(e, p));
        }
        Arc::new(global)
    }

    #[test]
    fn table_interns_and_stores() {
        let global = global(&[("dwh.x", "a"), ("dwh.orders", "max_dt")]);
        let mut table = CtlTable::new(Arc::clone(&global));
        assert!(table.is_empty());
        let a = table.intern_global(ParamId(1));
        let b = table.intern(name("dwh.users", "updated_at"));
        assert_eq!((a, b), (ParamId(0), ParamId(1)));
        assert_eq!(table.intern(name("dwh.orders", "max_dt")), a);
        assert_eq!(table.intern_global(ParamId(1)), a);
        assert_eq!(table.of_global(ParamId(1)), Some(a));
        assert_eq!(table.of_global(ParamId(0)), None);
        assert_eq!(table.id("dwh.users", "updated_at"), Some(b));
        assert_eq!(table.id("dwh.x", "a"), None);
        assert_eq!(table.id("dwh.users", "nope"), None);
        assert_eq!(table.name(a).joined(), "dwh.orders/max_dt");
        assert_eq!(table.name(b).joined(), "dwh.users/updated_at");
        assert_eq!(table.name(ParamId(7)).joined(), "/");
        assert_eq!(table.current(a), None);
        let t = ts("2021-04-25T03:27:33Z");
        assert_eq!(table.set(a, t), None);
        assert_eq!(table.set(a, t), Some(t));
        assert_eq!(table.current(a), Some(t));
        assert_eq!(table.set(ParamId(7), t), None);
        assert_eq!(table.len(), 2);
        assert_eq!(table.current(b), None);
        // A global name interned later, after one of the shard's own.
        let c = table.intern(name("dwh.x", "a"));
        assert_eq!((c, table.of_global(ParamId(0))), (ParamId(2), Some(c)));
        assert_eq!(table.name(c).joined(), "dwh.x/a");
    }

    #[test]
    fn the_names_a_shard_starts_with_take_local_ids_by_rank() {
        let names: Vec<(String, String)> = (0..200)
            .map(|i| (format!("e{i}"), "p".to_string()))
            .collect();
        let global = global(
            &names
                .iter()
                .map(|(e, p)| (e.as_str(), p.as_str()))
                .collect::<Vec<_>>(),
        );
        // Unordered, repeated, and one id the configuration never issued.
        let named = [130, 3, 64, 63, 130, 199, 0, 500].map(ParamId);
        let mut table = CtlTable::with_globals(Arc::clone(&global), named);
        let expected = [0, 3, 63, 64, 130, 199];
        assert_eq!(table.len(), expected.len());
        for (local, g) in expected.into_iter().enumerate() {
            let local = ParamId(local as u32);
            assert_eq!(table.of_global(ParamId(g)), Some(local));
            assert_eq!(table.name(local).joined(), format!("e{g}/p"));
            assert_eq!(table.id(&format!("e{g}"), "p"), Some(local));
        }
        for g in [1, 62, 65, 129, 131, 198, 500] {
            assert_eq!(table.of_global(ParamId(g)), None);
        }
        // Later: a global name none of its tasks named, and one of its own.
        let late = table.intern(name("e65", "p"));
        let own = table.intern(name("elsewhere", "p"));
        assert_eq!((late, own), (ParamId(6), ParamId(7)));
        assert_eq!(table.of_global(ParamId(65)), Some(late));
        assert_eq!(table.intern_global(ParamId(65)), late);
        assert_eq!(table.intern_global(ParamId(199)), ParamId(5));
        assert_eq!(table.name(own).joined(), "elsewhere/p");
        let t = ts("2021-04-25T03:27:33Z");
        assert_eq!(table.set(late, t), None);
        assert_eq!(table.current(late), Some(t));
        assert_eq!(table.current(ParamId(5)), None);
    }

    proptest! {
        /// Interned in any mix of the configuration's names and others, by
        /// name or by global id, every name gets one local id, which reads
        /// back to the name; names that share their text when put together
        /// (`ab` + `c` and `a` + `bc`) stay apart.
        #[test]
        fn names_round_trip(
            known in proptest::collection::vec(("[ab.]{1,3}", "[bc_]{1,3}"), 0..20),
            names in proptest::collection::vec((("[ab.]{1,3}", "[bc_]{1,3}"), any::<bool>()), 1..40),
        ) {
            let global = global(&known.iter().map(|(e, p)| (e.as_str(), p.as_str())).collect::<Vec<_>>());
            let mut table = CtlTable::new(Arc::clone(&global));
            let ids: Vec<ParamId> = names
                .iter()
                .map(|((e, p), by_global)| match global.id(e, p) {
                    Some(g) if *by_global => table.intern_global(g),
                    _ => table.intern(name(e, p)),
                })
                .collect();
            for (((e, p), _), id) in names.iter().zip(&ids) {
                prop_assert_eq!(table.id(e, p), Some(*id));
                prop_assert_eq!(table.name(*id), name(e, p));
                if let Some(g) = global.id(e, p) {
                    prop_assert_eq!(table.of_global(g), Some(*id));
                }
            }
            let distinct: std::collections::BTreeSet<_> = names.iter().map(|(n, _)| n).collect();
            prop_assert_eq!(table.len(), distinct.len());
        }
    }
}
