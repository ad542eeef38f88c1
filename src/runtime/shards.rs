//! Partition ownership. The group assigns partitions of `topics.results`
//! (cooperative-sticky, static membership); partition `p` is shard `p`,
//! and the shard's other inputs (commands, offer changes) follow it by
//! hand, so co-partitioning holds whatever the assignor does with them.
//!
//! - Assigned: the shard is restored ([`super::restorer`]: stable input
//!   offsets, then the changelog, then the engine), then its inputs are
//!   assigned at those offsets. Shards assigned together restore together;
//!   the shards already owned keep serving.
//! - Revoked: what every shard decided is committed first (as Kafka Streams
//!   does), then the revoked shards' inputs are unassigned; their engines,
//!   now equal to their committed state, are kept, and a shard given back
//!   resumes without a restore when nobody wrote its changelog meanwhile.
//! - Lost (this instance's session expired; another member may own the
//!   partitions already): the runtime starts over from the committed state.

use std::collections::BTreeSet;
use std::time::Instant;

use rdkafka::consumer::Consumer;
use rdkafka::producer::Producer;
use rdkafka::{Message, TopicPartitionList};

use super::context::Ownership;
use super::health::Phase;
use super::intake::Shard;
use super::restorer::{Reply, Request, State};
use super::{Error, Runtime, RESTORE_TIMEOUT};
use crate::codec;
use crate::kafka::restore;
use crate::metrics;
use crate::shell::driver::Driver;

/// Longest wait for the end of a revoked shard's changelog partition: past
/// it the shard is not kept (a later restore reads it in full).
const WATERMARK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl Runtime {
    pub(super) fn handle_ownership(&mut self) -> Result<(), Error> {
        for change in self.group.context().take() {
            match change {
                Ownership::Assigned(partitions) => self.assigned(partitions)?,
                Ownership::Revoked { partitions, lost } => {
                    if lost {
                        // Whatever this batch decided for them may be
                        // decided again by their new owner: start over.
                        return Err(Error::client(
                            "the group session was lost (partitions may have moved)",
                            rdkafka::error::KafkaError::Rebalance(
                                rdkafka::types::RDKafkaErrorCode::UnknownMemberId,
                            ),
                        ));
                    }
                    self.revoked(partitions)?;
                }
                Ownership::Failed(why) => {
                    return Err(Error::Topic {
                        topic: self.options.config.kafka.topics.results.clone(),
                        message: format!("rebalance failed: {why}"),
                    })
                }
            }
        }
        Ok(())
    }

    /// Whether `topic` is the one the group assigns shards by.
    fn is_shard_topic(&self, topic: &str) -> bool {
        topic == self.options.config.kafka.topics.results
    }

    fn assigned(&mut self, partitions: Vec<(String, i32)>) -> Result<(), Error> {
        let mut now = TopicPartitionList::new();
        let mut shards = Vec::new();
        for (topic, p) in partitions {
            if self.is_shard_topic(&topic) {
                shards.push(p);
            } else {
                // An event topic: consumed from its committed offsets at once.
                now.add_partition(&topic, p);
                self.assigned.insert((topic, p));
            }
        }
        // The call that completes the rebalance, even with nothing in it.
        self.group
            .incremental_assign(&now)
            .map_err(|e| Error::client("assigning partitions", e))?;
        for &p in &shards {
            self.options.readiness.restoring(p);
            self.restoring.insert(p);
            let known = self.kept.get(&p).map(|(_, end)| *end);
            self.restorer.ask(Request::Restore {
                partition: p,
                known,
            });
        }
        // In the group: ready once the assigned shards are restored.
        self.options.readiness.set_phase(Phase::Serving);
        metrics::Rebalance {
            kind: metrics::RebalanceKind::Assigned,
            partitions: &shards,
            owned: self.shards.len() + self.restoring.len(),
        }
        .emit();
        self.update_standbys();
        Ok(())
    }

    fn revoked(&mut self, partitions: Vec<(String, i32)>) -> Result<(), Error> {
        // What every shard decided so far is committed before anything is
        // given up: a kept engine is then its committed state, and the next
        // owner starts where this one stopped.
        self.commit_and_settle()?;
        let mut give_up = TopicPartitionList::new();
        let mut shards = Vec::new();
        for (topic, p) in partitions {
            if self.is_shard_topic(&topic) {
                shards.push(p);
            } else {
                self.offsets.remove(&topic, p);
                if self.assigned.remove(&(topic.clone(), p)) {
                    give_up.add_partition(&topic, p);
                }
            }
        }
        for &p in &shards {
            if self.restoring.remove(&p) {
                self.restorer.ask(Request::Cancel(p));
            }
            // With standbys the changelog is tailed anyway.
            if let Some(shard) = self.shards.remove(&p) {
                if self.options.config.kafka.standbys == 0 {
                    if let Some(end) = self.changelog_end(p) {
                        self.kept.insert(p, (shard, end));
                    }
                }
            }
            let topics = self.inputs().map(str::to_string);
            for topic in topics {
                let key = (topic, p);
                self.offsets.remove(&key.0, p);
                if self.assigned.remove(&key) {
                    give_up.add_partition(&key.0, p);
                }
            }
        }
        self.group
            .incremental_unassign(&give_up)
            .map_err(|e| Error::client("unassigning revoked partitions", e))?;
        self.options.readiness.revoked(&shards);
        metrics::Rebalance {
            kind: metrics::RebalanceKind::Revoked,
            partitions: &shards,
            owned: self.shards.len() + self.restoring.len(),
        }
        .emit();
        self.update_standbys();
        Ok(())
    }

    /// Where changelog partition `p` ends: asked right after a commit and
    /// before `p` is given up, the offset after this instance's last record
    /// there (nobody else writes it meanwhile). `None` when the brokers do
    /// not answer: the shard is then not kept, and restored in full if it
    /// comes back.
    fn changelog_end(&self, p: i32) -> Option<i64> {
        let changelog = &self.options.config.kafka.topics.changelog;
        match self
            .producer
            .client()
            .fetch_watermarks(changelog, p, WATERMARK_TIMEOUT)
        {
            Ok((_, end)) => Some(end),
            Err(e) => {
                tracing::warn!(partition = p, error = %e, "reading where a revoked shard's changelog ends");
                None
            }
        }
    }

    /// The co-partitioned inputs of a shard.
    fn inputs(&self) -> [&str; 3] {
        let t = &self.options.config.kafka.topics;
        [&t.results, &t.commands, &t.offers]
    }

    /// With standbys, the restorer tails every shard this instance does not own.
    fn update_standbys(&self) {
        if self.options.config.kafka.standbys == 0 {
            return;
        }
        let others: BTreeSet<i32> = (0..self.options.partitions)
            .filter(|p| !self.shards.contains_key(p) && !self.restoring.contains(p))
            .collect();
        self.restorer.ask(Request::Standby(others));
    }

    /// Installs the shards the restorer finished: CTL table, start, then
    /// their inputs from the offsets fetched before the changelog was read.
    /// Returns how many.
    pub(super) fn install_restored(&mut self) -> Result<usize, Error> {
        let mut n = 0;
        while let Some(reply) = self.restorer.try_reply() {
            let r = match reply {
                Reply::Failed(e) => return Err(e),
                Reply::Restored(r) => r,
            };
            let p = r.partition;
            if !self.restoring.remove(&p) {
                // Revoked meanwhile.
                continue;
            }
            let resumed = matches!(r.state, State::Unchanged);
            let mut shard = match r.state {
                State::Unchanged => match self.kept.remove(&p) {
                    Some((shard, _)) => shard,
                    None => {
                        // Kept no longer: read it all.
                        self.restoring.insert(p);
                        self.restorer.ask(Request::Restore {
                            partition: p,
                            known: None,
                        });
                        continue;
                    }
                },
                State::Rebuilt(driver, marks) => {
                    self.kept.remove(&p);
                    Shard::new(*driver, marks)
                }
            };
            shard.load_ctl(self.ctl_values());
            let now = self.now();
            let (ctx, shards, _) = self.parts();
            shard.start(&ctx, now).map_err(|e| Error::Topic {
                topic: ctx.settings.topics.changelog.clone(),
                message: format!("partition {p}: starting the restored shard: {e}"),
            })?;
            shards.insert(p, shard);
            let mut inputs = TopicPartitionList::new();
            for (topic, next) in r.offsets {
                super::positions::add(&mut inputs, &topic, p, next)?;
                self.offsets.set(&topic, p, next);
                self.assigned.insert((topic, p));
            }
            self.group
                .incremental_assign(&inputs)
                .map_err(|e| Error::client(format!("assigning the inputs of shard {p}"), e))?;
            self.options.readiness.restored(p);
            self.report_waiting(p);
            metrics::ShardRestored {
                partition: p,
                records: r.records,
                seconds: r.seconds,
                resumed,
            }
            .emit();
            n += 1;
        }
        Ok(n)
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
        self.rebuild_from_changelog(p, old)
    }

    /// Reads shard `p`'s changelog here and now (a rare path: a bug broke
    /// the shard), carrying over the replaced shard's uncommitted records
    /// (its changelog records are restored too).
    fn rebuild_from_changelog(&mut self, p: i32, old: Shard) -> Result<(), Error> {
        // The batch the committer has holds earlier changelog records of
        // this shard: read once they are committed.
        self.settle()?;
        let started = Instant::now();
        let topic = self.options.config.kafka.topics.changelog.clone();
        let mut records = Vec::new();
        let stop = self.options.stop.clone();
        let n = restore::read_to_end(
            &self.options.clients,
            &topic,
            p,
            RESTORE_TIMEOUT,
            &|| stop.is_requested(),
            |m| {
                let key = m.key().unwrap_or_default();
                // The old shard's CTL dead-letter marks carry over.
                let decoded = match codec::decode_ctl_dead_mark(key, m.payload()) {
                    Some(mark) => mark.map(drop),
                    None => codec::decode_changelog(key, m.payload()).map(|r| records.push(r)),
                };
                if let Err(e) = decoded {
                    crate::metrics::ChangelogRecordSkipped {
                        topic: &topic,
                        partition: p,
                        offset: m.offset(),
                        error: &e,
                    }
                    .emit();
                }
                Ok(())
            },
        )
        .map_err(|e| match (e, self.options.stop.requested()) {
            (Error::Stopped, Some(super::StopKind::Crash)) => Error::Crashed,
            (e, _) => e,
        })?;
        let changelog = &self.options.config.kafka.topics.changelog;
        for r in old.pending().iter().filter(|r| *r.topic == **changelog) {
            if codec::decode_ctl_dead_mark(r.key, r.payload).is_none() {
                if let Ok(record) = codec::decode_changelog(r.key, r.payload) {
                    records.push(record);
                }
            }
        }
        let driver = Driver::restore(
            &self.options.config,
            &self.router,
            p,
            records,
            self.ctl_values(),
        )
        .map_err(|e| Error::Topic {
            topic: topic.clone(),
            message: format!("partition {p}: {e}"),
        })?;
        let now = self.now();
        let mut shard = old.rebuilt(driver);
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
            resumed: false,
        }
        .emit();
        Ok(())
    }
}
