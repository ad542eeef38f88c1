//! The router: which partition (shard) owns a key — a task's pool, an
//! offer, a process key — by Java-compatible murmur2 partitioning, the
//! partition a key lands on when produced by a Java client or by librdkafka
//! with `partitioner=murmur2_random`. Pure, so the engine, the simulator and
//! the runtime route alike without asking the broker.

use std::collections::HashSet;
use std::sync::Arc;

use crate::config::Config;
use crate::ctl::{ParamId, ParamNames, Postings};
use crate::engine::{Command, Input, Target};

/// Kafka's murmur2 hash of `data` (seed 0x9747b28c), as `Utils.murmur2`.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut bytes = [0u8; 4];
        bytes.copy_from_slice(chunk);
        let mut k = u32::from_le_bytes(bytes);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if let Some(&b) = rest.get(2) {
        h ^= u32::from(b) << 16;
    }
    if let Some(&b) = rest.get(1) {
        h ^= u32::from(b) << 8;
    }
    if let Some(&b) = rest.first() {
        h ^= u32::from(b);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of `key` among `partitions`, as Java's default partitioner
/// (`toPositive(murmur2(key)) % partitions`); a topic has at least one
/// partition, so fewer counts as one.
pub fn partition_for(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

/// Whether partition `index` of `count` owns `key`.
pub fn owns(key: &str, index: u32, count: u32) -> bool {
    let count = i32::try_from(count).unwrap_or(i32::MAX);
    i64::from(partition_for(key.as_bytes(), count)) == i64::from(index)
}

/// Where an input goes: the shard that owns it, or (a launch for keys of
/// several partitions) one command per owning shard, keys in list order.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// The shard of this partition.
    To(i32),
    /// Each part to its shard.
    Split(Vec<(i32, Command)>),
}

/// Which partition owns a task (by its pool), an offer, a process key, a
/// result (by what its run id names) or a command — the one router of the
/// runtime, the simulator and the tests.
#[derive(Debug, Clone)]
pub struct Router {
    partitions: i32,
    /// What clones share (each instance holds a router per thread).
    tables: Arc<Tables>,
}

#[derive(Debug)]
struct Tables {
    /// The configured tasks (shared with the configuration), found by id
    /// through their own index.
    tasks: Arc<crate::config::TaskList>,
    /// Per pool, its partition.
    pools: Vec<i32>,
    /// Process names (jobs' implicit processes included).
    processes: HashSet<String, foldhash::fast::FixedState>,
    /// Every CTL parameter a task names (trigger or `produces`): the
    /// configuration's table, whose ids the router hands to the shards.
    params: Arc<ParamNames>,
    /// Per parameter id of `params`, the partitions of the tasks naming it.
    ctl: Postings<i32>,
}

impl Router {
    /// The router of `config` over `partitions` partitions.
    pub fn new(config: &Config, partitions: i32) -> Router {
        let pools: Vec<i32> = config
            .pools
            .iter()
            .map(|p| partition_for(p.name.as_bytes(), partitions))
            .collect();
        let processes = config
            .processes
            .iter()
            .map(|p| p.name.clone())
            .chain(config.jobs.iter().map(|j| j.name.clone()))
            .collect();
        // Sized once: a million tasks name a million parameters or more.
        let mut ctl = Vec::with_capacity(
            config
                .tasks
                .iter()
                .map(|t| t.trigger.params().len() + t.extra().produces.len())
                .sum(),
        );
        for t in config.tasks.iter() {
            let Some(&p) = pools.get(t.pool()) else {
                continue;
            };
            for &id in t.trigger.params().into_iter().chain(&t.extra().produces) {
                ctl.push((id, p));
            }
        }
        // A parameter's partitions once each, in order.
        ctl.sort_unstable_by_key(|&(id, p)| (id, p));
        ctl.dedup();
        Router {
            partitions,
            tables: Arc::new(Tables {
                tasks: Arc::clone(&config.tasks),
                pools,
                processes,
                params: Arc::clone(&config.params),
                ctl: Postings::build(ctl),
            }),
        }
    }

    /// How many parameters tasks name.
    pub fn ctl_len(&self) -> usize {
        self.tables.params.len()
    }

    /// The id (dense, from 0 to [`Router::ctl_len`]) of `entity/param` and the
    /// partitions whose tasks name it; `None` when no task does.
    pub fn ctl(&self, entity: &str, param: &str) -> Option<(ParamId, &[i32])> {
        let id = self.ctl_id(entity.as_bytes(), param.as_bytes())?;
        Some((id, self.ctl_routes(id)))
    }

    /// The partitions whose tasks name parameter `id` (a [`Router::ctl`] id).
    pub fn ctl_routes(&self, id: ParamId) -> &[i32] {
        self.tables.ctl.of(id)
    }

    /// Fetches what [`Router::ctl_routes`] reads first for `id` into the
    /// cache.
    pub fn prefetch_routes(&self, id: ParamId) {
        self.tables.ctl.prefetch(id);
    }

    /// The [`Router::ctl`] id of a name as a record's raw bytes: a name the
    /// router knows is valid, so a change naming one needs no further check
    /// of it ([`crate::codec::read_known_ctl_change`]).
    pub fn ctl_id(&self, entity: &[u8], param: &[u8]) -> Option<ParamId> {
        self.tables.params.raw_id(entity, param)
    }

    /// Starts fetching what [`Router::ctl_id`] will read for each of
    /// `names` ([`ParamNames::prefetch`]).
    pub fn prefetch_ctl(&self, names: &[(&[u8], &[u8])]) {
        self.tables.params.prefetch(names);
    }

    /// Whether this router was built from `config` (it shares its task list
    /// and parameter table): the ids it hands out are `config`'s only then.
    pub fn is_of(&self, config: &Config) -> bool {
        Arc::ptr_eq(&self.tables.tasks, &config.tasks)
            && Arc::ptr_eq(&self.tables.params, &config.params)
    }

    /// The shard count.
    pub fn partitions(&self) -> i32 {
        self.partitions
    }

    /// The partition of `key` (an offer id or a business key).
    pub fn key(&self, key: &str) -> i32 {
        partition_for(key.as_bytes(), self.partitions)
    }

    /// The partition of pool `name`: its tasks' shard (a pool's limit is
    /// exact because one shard owns all its tasks).
    pub fn pool(&self, name: &str) -> i32 {
        partition_for(name.as_bytes(), self.partitions)
    }

    /// The partition of task `id`; `None` for a task not configured.
    pub fn task(&self, id: &str) -> Option<i32> {
        let tables = &*self.tables;
        let task = tables.tasks.get(tables.tasks.find(id)?)?;
        tables.pools.get(task.pool()).copied()
    }

    /// Where `input`, which arrived on partition `arrived`, goes. What names
    /// nothing known (an unknown task, a malformed run id) stays where it
    /// arrived, whose shard rejects it; a shard-wide command (a rescan, one
    /// per partition) stays too.
    pub fn route(&self, input: &Input, arrived: i32) -> Route {
        let task = |id: &str| Route::To(self.task(id).unwrap_or(arrived));
        match input {
            Input::Offer(change) => Route::To(self.key(&change.offer_id)),
            Input::Result(r) => {
                if let Some(id) = crate::process::parse_step_run_id(&r.run_id)
                    .filter(|id| self.tables.processes.contains(id.process))
                {
                    Route::To(self.key(id.key))
                } else if let Some((_, offer)) = crate::engine::parse_stage_run_id(&r.run_id) {
                    Route::To(self.key(offer))
                } else if crate::engine::is_stage_run_id(&r.run_id) {
                    Route::To(arrived)
                } else {
                    crate::run::parse_run_id(&r.run_id).map_or(Route::To(arrived), |(t, _)| task(t))
                }
            }
            Input::Command(c) => match c.target() {
                Target::Task(t) => task(t),
                Target::Offer(id) | Target::Key(id) => Route::To(self.key(id)),
                Target::Shard => Route::To(arrived),
                Target::Keys(keys) => self.split(c, keys, arrived),
            },
            Input::Ctl { .. } | Input::Record(_) => Route::To(arrived),
        }
    }

    /// A launch for several keys: one launch per owning partition, each
    /// with its keys in list order.
    fn split(&self, command: &Command, keys: &[String], arrived: i32) -> Route {
        let mut parts: Vec<(i32, Vec<String>)> = Vec::new();
        for key in keys {
            let p = self.key(key);
            match parts.iter_mut().find(|(q, _)| *q == p) {
                Some((_, keys)) => keys.push(key.clone()),
                None => parts.push((p, vec![key.clone()])),
            }
        }
        match parts.as_slice() {
            [] => Route::To(arrived),
            [(p, _)] => Route::To(*p),
            _ => Route::Split(
                parts
                    .into_iter()
                    .map(|(p, keys)| {
                        let mut part = command.clone();
                        if let Command::Launch { keys: k, .. } = &mut part {
                            *k = keys;
                        }
                        (p, part)
                    })
                    .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_kafka_utils_test_vectors() {
        // From Apache Kafka's UtilsTest.testMurmur2.
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (key, want) in cases {
            assert_eq!(murmur2(key), want, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn partitions_are_in_range() {
        for n in 1..20 {
            for key in ["", "a", "reports", "default", "pool-17"] {
                let p = partition_for(key.as_bytes(), n);
                assert!((0..n).contains(&p));
            }
        }
    }
}
