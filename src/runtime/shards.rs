//! Partition ownership: a shard is restored from its changelog partition
//! before its inputs are processed, and dropped (with its uncommitted work)
//! when the partition is revoked.

use std::time::Instant;

use rdkafka::consumer::Consumer;
use rdkafka::Message;

use super::context::Ownership;
use super::{output, Error, Runtime, Shard, RESTORE_TIMEOUT};
use crate::codec;
use crate::engine::Engine;
use crate::kafka::{partition_for, restore};
use crate::metrics;

impl Runtime {
    pub(super) fn handle_ownership(&mut self) -> Result<(), Error> {
        for change in self.group.context().take() {
            match change {
                Ownership::Revoked(partitions) => {
                    for &p in &partitions {
                        // Uncommitted work of a revoked partition is the next owner's to redo.
                        self.shards.remove(&p);
                        self.offsets.retain(|(_, q), _| *q != p);
                    }
                    metrics::Rebalance {
                        kind: metrics::RebalanceKind::Revoked,
                        partitions: &partitions,
                        owned: self.shards.len(),
                    }
                    .emit();
                }
                Ownership::Assigned(partitions) => {
                    for &p in &partitions {
                        if !self.shards.contains_key(&p) {
                            self.restore_shard(p)?;
                        }
                        if let (Some(shard), Some(dead)) =
                            (self.shards.get_mut(&p), self.deferred_dead.remove(&p))
                        {
                            shard.pending.extend(dead);
                        }
                    }
                    // Ready: in the group, with every owned shard restored.
                    metrics::set_ready(&self.options.ready, true);
                    metrics::Rebalance {
                        kind: metrics::RebalanceKind::Assigned,
                        partitions: &partitions,
                        owned: self.shards.len(),
                    }
                    .emit();
                }
            }
        }
        Ok(())
    }

    /// Rebuilds shard `p` from `reactor.changelog` partition `p`, feeds it
    /// the CTL table and starts it (which fires whatever is due).
    fn restore_shard(&mut self, p: i32) -> Result<(), Error> {
        self.restore_shard_with(p, Vec::new(), Vec::new())
    }

    /// Rebuilds shard `p` as it stands in this batch: the committed
    /// changelog and the changelog records the batch has not committed yet
    /// (after a step broke an invariant, its half-done state is dropped this
    /// way). The batch's other pending records are kept.
    pub(super) fn rebuild_shard(&mut self, p: i32) -> Result<(), Error> {
        let Some(shard) = self.shards.remove(&p) else {
            return Ok(());
        };
        let changelog = &self.options.config.kafka.topics.changelog;
        let batch: Vec<_> = shard
            .pending
            .iter()
            .filter(|r| r.topic == *changelog)
            .filter_map(|r| codec::decode_changelog(&r.key, r.payload.as_deref()).ok())
            .collect();
        self.restore_shard_with(p, batch, shard.pending)
    }

    fn restore_shard_with(
        &mut self,
        p: i32,
        batch: Vec<crate::changelog::ChangelogRecord>,
        mut pending: Vec<output::OutRecord>,
    ) -> Result<(), Error> {
        let started = Instant::now();
        let settings = &self.options.config.kafka;
        let topic = settings.topics.changelog.clone();
        let mut records = Vec::new();
        let n = restore::read_to_end(&self.options.clients, &topic, p, RESTORE_TIMEOUT, |m| {
            match codec::decode_changelog(m.key().unwrap_or_default(), m.payload()) {
                Ok(record) => records.push(record),
                // A record this version cannot read is skipped, loudly: the
                // rest of the shard is still worth serving.
                Err(e) => {
                    tracing::error!(topic, partition = p, offset = m.offset(), error = %e, "skipping an unreadable changelog record")
                }
            }
            Ok(())
        })?;
        records.extend(batch);
        let partitions = self.options.partitions;
        let mut engine = Engine::restore(
            &self.options.config,
            |pool| partition_for(pool.as_bytes(), partitions) == p,
            records,
        )
        .map_err(|e| Error::Topic {
            topic: topic.clone(),
            message: format!("partition {p}: {e}"),
        })?;
        // Each stage's limits are split over the partitions: set before
        // `start`, which dispatches.
        engine.set_partition(p as u32, partitions as u32);
        for (_, name, value) in self.table.iter() {
            if let Some(value) = value {
                engine.load_ctl(name, value);
            }
        }
        let now = self.now();
        let actions = engine.start(now).map_err(|e| Error::Topic {
            topic: topic.clone(),
            message: format!("partition {p}: starting the restored shard: {e}"),
        })?;
        metrics::record_actions(p, &actions);
        output::encode(&actions, p, settings, now, &mut pending);
        let stats = engine.stats();
        let offer_stats = engine.offer_counters();
        self.shards.insert(
            p,
            Shard {
                engine,
                pending,
                stats,
                offer_stats,
            },
        );
        metrics::ShardRestored {
            partition: p,
            records: n,
            seconds: started.elapsed().as_secs_f64(),
        }
        .emit();
        Ok(())
    }
}
