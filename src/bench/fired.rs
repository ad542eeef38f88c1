//! The bench's tasks each fired once, and the changelog record each then
//! holds, by the shard that owns it: what the restore measurement writes
//! to the changelog. It depends on nothing else in the binary, so that the
//! probe `examples/restore_path.rs` includes this very file and rebuilds
//! the records the bench restores.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use reactor::changelog::{ChangelogRecord, Store};
use reactor::config::Config;
use reactor::engine::{Engine, Input};
use reactor::router::Router;

/// Name of the parameter bench input `i` moves (`…/max_dt`), and of its task.
pub fn entity(i: usize) -> String {
    format!("bench.t{i}")
}

/// Fires task `t{i}` of `config` (one watching `bench.t{i}/max_dt`, as the
/// bench configures them) by a change of its parameter, in one engine of
/// them all started at `t0` and applied an hour later (with a fraction of
/// a second, as a clock reads), and returns each task's record by the
/// partition of `router` that owns the task.
pub fn records(
    config: &Config,
    router: &Router,
    t0: Timestamp,
) -> Result<BTreeMap<i32, Vec<ChangelogRecord>>, String> {
    let now = t0 + SignedDuration::new(3_600, 456_789_123);
    let mut engine = Engine::new(config);
    engine
        .start(t0)
        .map_err(|e| format!("starting the engine: {e}"))?;
    for i in 0..config.tasks.len() {
        let input = Input::Ctl {
            entity: entity(i),
            param: "max_dt".into(),
            value: t0 + SignedDuration::from_secs(i as i64),
        };
        engine
            .apply(input, now)
            .map_err(|e| format!("firing task t{i}: {e}"))?;
    }
    let mut by_partition: BTreeMap<i32, Vec<ChangelogRecord>> = BTreeMap::new();
    for record in engine.snapshot() {
        let p = match record.store {
            Store::Task => router.task(&record.key),
            _ => None,
        }
        .ok_or_else(|| {
            format!(
                "a record of no task's shard: {:?} {}",
                record.store, record.key
            )
        })?;
        by_partition.entry(p).or_default().push(record);
    }
    Ok(by_partition)
}
