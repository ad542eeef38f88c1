//! A shard's CTL table: the parameters its tasks name, under dense ids of
//! its own, with each one's current value.
//!
//! The names stay in the configuration's table ([`ParamNames`], shared by
//! the router and every shard): per local id a shard keeps the global id,
//! and per global id the local one, not a copy of the text (with a million
//! parameters the copies were ~38 bytes per parameter in every shard). A
//! name the configuration does not hold (a `set_last` command's, one read
//! back from a record written under an older configuration) is interned in
//! the shard's own small table.

use std::sync::Arc;

use jiff::Timestamp;

use super::{ParamId, ParamNames, ParamRef};
use crate::stamp::{self, Stamp};

/// In [`CtlTable::origin`]: the rest is an id of [`CtlTable::own`].
const OWN: u32 = 1 << 31;

/// In [`CtlTable::local`]: not interned here.
const NONE: u32 = u32::MAX;

/// A shard's parameters and their current values (see the module docs).
#[derive(Debug, Clone)]
pub struct CtlTable {
    /// The configuration's names.
    global: Arc<ParamNames>,
    /// Per local id, the global id of its name, or [`OWN`] plus its id in
    /// `own`.
    origin: Vec<u32>,
    /// Per global id, the local id ([`NONE`] where no task of the shard
    /// names it): the router's lookup of a change serves the shard too.
    local: Vec<u32>,
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
        CtlTable {
            local: vec![NONE; global.len()],
            global,
            origin: Vec::new(),
            own: ParamNames::new(),
            own_local: Vec::new(),
            values: Vec::new(),
        }
    }

    /// The local id of the configuration's parameter `global`, assigning
    /// the next one (without a value) if it is new here.
    pub fn intern_global(&mut self, global: ParamId) -> ParamId {
        if let Some(id) = self.of_global(global) {
            return id;
        }
        let id = self.next_id();
        if let Some(slot) = self.local.get_mut(global.index()) {
            *slot = id.0;
        }
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
        self.local
            .get(global.index())
            .filter(|&&id| id != NONE)
            .map(|&id| ParamId(id))
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
