//! The configured tasks: their definitions, and their ids back to back in
//! one string. A configuration may hold millions of tasks: an id costs its
//! bytes and 4 more here, where a `Box<str>` per task took 16 and an
//! allocation of its own.

use std::ops::Deref;

use jiff::tz::TimeZone;

use super::Task;
use crate::name_index::NameIndex;

/// The configured tasks, in file order (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct TaskList {
    defs: Vec<Task>,
    /// Every id, back to back.
    ids: String,
    /// Per task, where its id ends in `ids` (it starts where the previous
    /// one ends).
    ends: Vec<u32>,
    /// Task id → index: the one index by id that the router and every
    /// shard use (and the configuration's check for ids declared twice).
    by_id: NameIndex,
    /// The distinct zones of the tasks, which each task names by index.
    zones: Vec<TimeZone>,
    /// Tasks per pool index: a shard sizes its task list from the pools it
    /// owns before the one pass that fills it.
    per_pool: Vec<u32>,
}

/// The zone of a task in a list built without zones.
static UTC: TimeZone = TimeZone::UTC;

/// The most distinct zones a list holds (a task names its zone in 2 bytes).
pub const MAX_ZONES: usize = u16::MAX as usize + 1;

/// One configured task: its definition (read through `Deref`) and its id,
/// looked up when asked for (the engine reads a task's definition many
/// times per input, its id far fewer).
#[derive(Debug, Clone, Copy)]
pub struct TaskRef<'a> {
    /// The definition.
    pub def: &'a Task,
    list: &'a TaskList,
    index: usize,
}

impl<'a> TaskRef<'a> {
    /// Unique id.
    pub fn id(&self) -> &'a str {
        self.list.id(self.index).unwrap_or_default()
    }

    /// Zone for chunk truncation and for `schedule`.
    pub fn time_zone(&self) -> &'a TimeZone {
        self.list
            .zones
            .get(usize::from(self.def.zone))
            .unwrap_or(&UTC)
    }
}

impl Deref for TaskRef<'_> {
    type Target = Task;

    fn deref(&self) -> &Task {
        self.def
    }
}

impl TaskList {
    /// Adds task `id` defined by `def`.
    ///
    /// An id the list has already is kept but not indexed: [`find`] gives
    /// the first task with an id (the configuration refuses a second one).
    ///
    /// [`find`]: TaskList::find
    pub fn push(&mut self, id: &str, def: Task) {
        // Fewer than 2^32 tasks and 4 GiB of ids: they would not fit in
        // memory first.
        let i = u32::try_from(self.defs.len()).unwrap_or(u32::MAX);
        self.ids.push_str(id);
        self.ends
            .push(u32::try_from(self.ids.len()).unwrap_or(u32::MAX));
        let pool = def.pool();
        if self.per_pool.len() <= pool {
            self.per_pool.resize(pool + 1, 0);
        }
        if let Some(n) = self.per_pool.get_mut(pool) {
            *n = n.saturating_add(1);
        }
        self.defs.push(def);
        let (ids, ends) = (&self.ids, &self.ends);
        self.by_id.insert(id, i, |p| id_in(ids, ends, p as usize));
    }

    /// Reserves room for `more` tasks, their ids as long as the ones so
    /// far on average (rounded up).
    pub fn reserve(&mut self, more: usize) {
        let id_bytes = self.ids.len().checked_div(self.defs.len()).unwrap_or(0);
        self.defs.reserve_exact(more);
        self.ends.reserve_exact(more);
        self.ids.reserve_exact(more.saturating_mul(id_bytes + 1));
        let (ids, ends) = (&self.ids, &self.ends);
        self.by_id.reserve(more, |p| id_in(ids, ends, p as usize));
    }

    /// The index of `zone` among the list's zones, added when new; `None`
    /// past [`MAX_ZONES`].
    pub fn zone_index(&mut self, zone: &TimeZone) -> Option<u16> {
        let at = match self.zones.iter().position(|z| z == zone) {
            Some(at) => at,
            None if self.zones.len() < MAX_ZONES => {
                self.zones.push(zone.clone());
                self.zones.len() - 1
            }
            None => return None,
        };
        u16::try_from(at).ok()
    }

    /// Ends the build: gives back the room left over while the list was
    /// built (its ids were indexed as they came, [`TaskList::push`]).
    pub fn finish(&mut self) {
        self.defs.shrink_to_fit();
        self.ids.shrink_to_fit();
        self.ends.shrink_to_fit();
        let (ids, ends) = (&self.ids, &self.ends);
        self.by_id.shrink_to_fit(|p| id_in(ids, ends, p as usize));
    }

    /// The index of the task with id `id`.
    pub fn find(&self, id: &str) -> Option<usize> {
        let i = self.by_id.get(id, |i| self.id(i as usize))?;
        Some(i as usize)
    }

    /// Fetches task `i`'s definition and where its id ends into the cache.
    pub fn prefetch(&self, i: usize) {
        prefetch_index::prefetch_index(&self.defs, i);
        prefetch_index::prefetch_index(&self.ends, i);
    }

    /// Task `i`.
    pub fn get(&self, i: usize) -> Option<TaskRef<'_>> {
        Some(TaskRef {
            def: self.defs.get(i)?,
            list: self,
            index: i,
        })
    }

    /// The id of task `i`.
    pub fn id(&self, i: usize) -> Option<&str> {
        id_in(&self.ids, &self.ends, i)
    }

    /// Every task's id, in file order.
    pub fn ids(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.id(i).unwrap_or_default())
    }

    /// The tasks, in file order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = TaskRef<'_>> + '_ {
        (0..self.defs.len()).filter_map(|i| self.get(i))
    }

    /// Number of tasks in the pool of index `pool`.
    pub fn in_pool(&self, pool: usize) -> usize {
        self.per_pool.get(pool).map_or(0, |&n| n as usize)
    }

    /// Number of tasks.
    pub fn len(&self) -> usize {
        self.defs.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }
}

/// Id `i` of `ids`, each ending where `ends` says.
fn id_in<'a>(ids: &'a str, ends: &[u32], i: usize) -> Option<&'a str> {
    let start = match i.checked_sub(1) {
        Some(previous) => *ends.get(previous)? as usize,
        None => 0,
    };
    let end = *ends.get(i)? as usize;
    ids.get(start..end)
}

#[cfg(test)]
mod tests {
    use super::super::parse;

    #[test]
    fn ids_read_back_in_file_order() {
        let text = "[[task]]\nid = \"a\"\ntrigger = \"delta(x.a/max_dt, 1h)\"\n\n\
                    [[task]]\nid = \"bb.c-1\"\ntrigger = \"delta(x.b/max_dt, 1h)\"\n\n\
                    [[task]]\nid = \"d\"\ntrigger = \"delta(x.a/max_dt, 2h)\"\n";
        let tasks = parse(text, "t.toml").unwrap().config.tasks;
        assert_eq!(tasks.len(), 3);
        assert_eq!(tasks.ids().collect::<Vec<_>>(), ["a", "bb.c-1", "d"]);
        let ids: Vec<&str> = tasks.iter().map(|t| t.id()).collect();
        assert_eq!(ids, ["a", "bb.c-1", "d"]);
        assert_eq!(tasks.iter().next_back().map(|t| t.id()), Some("d"));
        assert_ne!(tasks.get(0).unwrap().trigger, tasks.get(2).unwrap().trigger);
        assert!(tasks.get(3).is_none() && tasks.id(3).is_none());
        assert_eq!(tasks.find("bb.c-1"), Some(1));
        assert_eq!(tasks.find("d"), Some(2));
        assert_eq!(tasks.find("bb"), None);
    }

    #[test]
    fn tasks_share_their_zones() {
        let text = "time_zone = \"Europe/Moscow\"\n\
                    [[task]]\nid = \"a\"\ntrigger = \"delta(x.a/max_dt, 1h)\"\n\
                    [[task]]\nid = \"b\"\ntrigger = \"delta(x.b/max_dt, 1h)\"\ntime_zone = \"Asia/Tokyo\"\n\
                    [[task]]\nid = \"c\"\ntrigger = \"delta(x.c/max_dt, 1h)\"\ntime_zone = \"Asia/Tokyo\"\n\
                    [[task]]\nid = \"d\"\ntrigger = \"delta(x.d/max_dt, 1h)\"\ntime_zone = \"Europe/Moscow\"\n";
        let tasks = parse(text, "t.toml").unwrap().config.tasks;
        let zones: Vec<_> = tasks
            .iter()
            .map(|t| t.time_zone().iana_name().unwrap_or_default())
            .collect();
        assert_eq!(
            zones,
            ["Europe/Moscow", "Asia/Tokyo", "Asia/Tokyo", "Europe/Moscow"]
        );
        assert_eq!(tasks.zones.len(), 2);
        assert_eq!(tasks.find("c"), Some(2));
    }
}
