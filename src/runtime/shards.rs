//! Partition ownership: a shard is restored from its changelog partition
//! before its inputs are processed, and dropped (with its uncommitted work)
//! when the partition is revoked.

use std::collections::BTreeMap;
use std::time::Instant;

use rdkafka::consumer::Consumer;
use rdkafka::Message;

use super::context::Ownership;
use super::health::Phase;
use super::intake::Shard;
use super::{Error, Runtime, RESTORE_TIMEOUT};
use crate::codec;
use crate::kafka::restore;
use crate::metrics;
use crate::shell::driver::Driver;

impl Runtime {
    pub(super) fn handle_ownership(&mut self) -> Result<(), Error> {
        for change in self.group.context().take() {
            match change {
                Ownership::Revoked(partitions) => {
                    // Eager rebalances revoke everything: what event records
                    // decided is redone by the next owner of their partitions.
                    let events = &self.event_topics;
                    self.offsets.retain(|(t, _), _| !events.contains(t));
                    self.inbox.clear();
                    for &p in &partitions {
                        // Uncommitted work of a revoked partition is the next owner's to redo.
                        self.shards.remove(&p);
                        self.offsets.retain(|(_, q), _| *q != p);
                    }
                    self.options.readiness.revoked(&partitions);
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
                            self.options.readiness.restoring(p);
                            self.restore_shard(p)?;
                            self.options.readiness.restored(p);
                        }
                        self.report_waiting(p);
                    }
                    // Ready: in the group, with every owned shard restored.
                    self.options.readiness.set_phase(Phase::Serving);
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
    /// the CTL table and starts it (which fires whatever is due). The
    /// runtime's own records (CTL dead-letter marks) are taken out before
    /// the engine's are handed to [`Engine::restore`].
    fn restore_shard(&mut self, p: i32) -> Result<(), Error> {
        self.restore_shard_with(p, None)
    }

    /// Rebuilds every shard whose engine broke an invariant in this batch.
    pub(super) fn rebuild_broken(&mut self) -> Result<(), Error> {
        let broken: Vec<i32> = self
            .shards
            .iter()
            .filter(|(_, s)| s.is_broken())
            .map(|(&p, _)| p)
            .collect();
        for p in broken {
            self.rebuild_shard(p)?;
        }
        Ok(())
    }

    /// Rebuilds shard `p` as it stands in this batch — the committed
    /// changelog and the changelog records the batch has not committed yet
    /// — after a step broke an invariant: the half-done step is dropped,
    /// every earlier decision of the batch is kept.
    pub(super) fn rebuild_shard(&mut self, p: i32) -> Result<(), Error> {
        let Some(old) = self.shards.remove(&p) else {
            return Ok(());
        };
        self.restore_shard_with(p, Some(old))
    }

    /// [`Runtime::restore_shard`], carrying over a replaced shard's
    /// uncommitted records (its changelog records are restored too).
    fn restore_shard_with(&mut self, p: i32, old: Option<Shard>) -> Result<(), Error> {
        let started = Instant::now();
        let topic = self.options.config.kafka.topics.changelog.clone();
        let mut records = Vec::new();
        let mut marks = BTreeMap::new();
        let stop = self.options.stop.clone();
        let n = restore::read_to_end(
            &self.options.clients,
            &topic,
            p,
            RESTORE_TIMEOUT,
            &|| stop.is_requested(),
            |m| {
                let key = m.key().unwrap_or_default();
                let decoded = match codec::decode_ctl_dead_mark(key, m.payload()) {
                    Some(mark) => mark.map(|(q, offset)| match offset {
                        Some(offset) => {
                            marks.insert(q, offset);
                        }
                        None => {
                            marks.remove(&q);
                        }
                    }),
                    None => codec::decode_changelog(key, m.payload()).map(|r| records.push(r)),
                };
                // A record this version cannot read is skipped, loudly: the
                // rest of the shard is still worth serving.
                if let Err(e) = decoded {
                    tracing::error!(topic, partition = p, offset = m.offset(), error = %e, "skipping an unreadable changelog record");
                }
                Ok(())
            },
        )
        .map_err(|e| match (e, self.options.stop.requested()) {
            (Error::Stopped, Some(super::StopKind::Crash)) => Error::Crashed,
            (e, _) => e,
        })?;
        if let Some(old) = &old {
            let changelog = &self.options.config.kafka.topics.changelog;
            for r in old.pending().iter().filter(|r| r.topic == *changelog) {
                if codec::decode_ctl_dead_mark(&r.key, r.payload.as_deref()).is_none() {
                    if let Ok(record) = codec::decode_changelog(&r.key, r.payload.as_deref()) {
                        records.push(record);
                    }
                }
            }
        }
        let driver = Driver::restore(
            &self.options.config,
            &self.router,
            p,
            records,
            self.table
                .iter()
                .filter_map(|(_, name, value)| Some((name, value?))),
        )
        .map_err(|e| Error::Topic {
            topic: topic.clone(),
            message: format!("partition {p}: {e}"),
        })?;
        let engine = driver.into_engine();
        let now = self.now();
        let mut shard = match old {
            Some(old) => old.rebuilt(engine),
            None => Shard::new(p, engine, marks),
        };
        let (ctx, shards, _) = self.parts();
        shard.start(&ctx, now).map_err(|e| Error::Topic {
            topic: topic.clone(),
            message: format!("partition {p}: starting the restored shard: {e}"),
        })?;
        shards.insert(p, shard);
        metrics::ShardRestored {
            partition: p,
            records: n,
            seconds: started.elapsed().as_secs_f64(),
        }
        .emit();
        Ok(())
    }
}
