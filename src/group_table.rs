//! A hash index of dense ids, a cache line per group of slots (CTL
//! parameter names, task ids).
//!
//! With millions of names nearly every lookup misses the cache, and a miss
//! waited for alone costs more than everything else a lookup does. Here a
//! lookup reads one line (its group: tags and ids together) before the
//! name it compares, and that line can be fetched ahead
//! ([`GroupTable::prefetch`]): a batch of lookups then waits for its misses
//! together. (`hashbrown` keeps tags and ids apart and hides where they are.)

/// Slots per group: twelve tags and twelve ids fill one 64-byte line.
const SLOTS: usize = 12;
/// Most slots used, as a fraction: past it the table grows. A group is then
/// rarely full, so a name not held is known absent after one line.
const LOAD: (usize, usize) = (4, 5);

#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
struct Group {
    /// Per slot: 0 when empty, else 8 bits of its id's hash (never 0).
    tags: [u8; SLOTS],
    ids: [u32; SLOTS],
}

/// Ids by hash; the caller keeps what they name and compares it.
#[derive(Clone, Default)]
pub(crate) struct GroupTable {
    groups: Vec<Group>,
    len: usize,
}

/// The count only: where the ids lie depends on how the table grew, not on
/// what it holds (two tables of the same names compare alike).
impl std::fmt::Debug for GroupTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupTable")
            .field("len", &self.len)
            .finish()
    }
}

/// The slot tag of `hash` (bits the group's position does not use).
fn tag(hash: u64) -> u8 {
    (hash as u8).max(1)
}

impl GroupTable {
    /// The group a probe for `hash` starts at (its high bits, scaled).
    fn home(&self, hash: u64) -> usize {
        ((u128::from(hash) * self.groups.len() as u128) >> 64) as usize
    }

    /// The group after `g`.
    fn next(&self, g: usize) -> usize {
        if g + 1 >= self.groups.len() {
            0
        } else {
            g + 1
        }
    }

    /// The id of hash `hash` that `eq` accepts.
    pub(crate) fn find(&self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        let t = tag(hash);
        let mut g = self.home(hash);
        for _ in 0..self.groups.len() {
            let group = self.groups.get(g)?;
            for (&slot, &id) in group.tags.iter().zip(&group.ids) {
                if slot == t && eq(id) {
                    return Some(id);
                }
            }
            if group.tags.contains(&0) {
                return None;
            }
            g = self.next(g);
        }
        None
    }

    /// The first id in `hash`'s group whose tag matches (what [`Self::find`]
    /// will most likely compare first), for fetching its name ahead.
    pub(crate) fn candidate(&self, hash: u64) -> Option<u32> {
        let t = tag(hash);
        let group = self.groups.get(self.home(hash))?;
        let k = group.tags.iter().position(|&slot| slot == t)?;
        group.ids.get(k).copied()
    }

    /// Starts fetching the line a lookup of `hash` reads first.
    pub(crate) fn prefetch(&self, hash: u64) {
        prefetch_index::prefetch_index(&self.groups, self.home(hash));
    }

    /// Adds `id` (not held yet) under `hash`; `rehash` gives the hash of a
    /// held id when the table grows.
    pub(crate) fn insert(&mut self, hash: u64, id: u32, rehash: impl Fn(u32) -> u64) {
        if !self.fits(self.len + 1) {
            self.resize((self.len + 1).saturating_mul(2), &rehash);
        }
        self.place(hash, id);
        self.len += 1;
    }

    /// Makes room for `more` ids besides those held.
    pub(crate) fn reserve(&mut self, more: usize, rehash: impl Fn(u32) -> u64) {
        let want = self.len.saturating_add(more);
        if !self.fits(want) {
            self.resize(want, &rehash);
        }
    }

    /// Gives back the room beyond what the held ids need.
    pub(crate) fn shrink_to_fit(&mut self, rehash: impl Fn(u32) -> u64) {
        if Self::groups_for(self.len) < self.groups.len() {
            self.resize(self.len, &rehash);
        }
    }

    fn fits(&self, ids: usize) -> bool {
        ids.saturating_mul(LOAD.1) <= self.groups.len().saturating_mul(SLOTS * LOAD.0)
    }

    fn groups_for(ids: usize) -> usize {
        ids.saturating_mul(LOAD.1).div_ceil(SLOTS * LOAD.0).max(1)
    }

    /// Rebuilds the table with room for `ids` ids.
    fn resize(&mut self, ids: usize, rehash: &impl Fn(u32) -> u64) {
        let groups = Self::groups_for(ids.max(self.len));
        let old = std::mem::replace(&mut self.groups, vec![Group::default(); groups]);
        for group in &old {
            for (&slot, &id) in group.tags.iter().zip(&group.ids) {
                if slot != 0 {
                    self.place(rehash(id), id);
                }
            }
        }
    }

    /// Puts `id` in the first free slot from `hash`'s group on (there is
    /// one: the load stays under the bound).
    fn place(&mut self, hash: u64, id: u32) {
        let t = tag(hash);
        let mut g = self.home(hash);
        for _ in 0..self.groups.len() {
            let next = self.next(g);
            if let Some(group) = self.groups.get_mut(g) {
                let free = group.tags.iter().position(|&slot| slot == 0);
                if let Some((slot, cell)) =
                    free.and_then(|k| Some((group.tags.get_mut(k)?, group.ids.get_mut(k)?)))
                {
                    *slot = t;
                    *cell = id;
                    return;
                }
            }
            g = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spread(id: u32) -> u64 {
        u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    #[test]
    fn a_line_per_group() {
        assert_eq!(std::mem::size_of::<Group>(), 64);
    }

    proptest! {
        /// Every id inserted is found by its hash and no other; the table
        /// stays under its load bound through growth and shrinking.
        #[test]
        fn ids_are_found_by_their_hash(n in 0u32..3000, bits in 0u32..4) {
            // Few distinct hashes (down to one) make long runs of full groups.
            let hash = |id: u32| if bits == 0 { spread(id) } else { spread(id % (1 << bits)) ^ u64::from(id) << 56 };
            let mut t = GroupTable::default();
            for id in 0..n {
                t.insert(hash(id), id, hash);
            }
            t.shrink_to_fit(hash);
            prop_assert!(t.fits(n as usize));
            for id in 0..n {
                prop_assert_eq!(t.find(hash(id), |x| x == id), Some(id));
            }
            prop_assert_eq!(t.find(hash(n), |x| x == n), None);
            if let Some(c) = t.candidate(hash(0)) {
                prop_assert!(c < n);
            }
        }
    }
}
