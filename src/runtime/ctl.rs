//! The global CTL table: every instance reads all of `ctl.changes` (not
//! through the group) and applies each change to the shards it owns. At
//! start it reads up to the end offsets the topic has when the read starts,
//! then serves and keeps applying what comes: a busy topic cannot hold the
//! start back.
//!
//! A CTL record that cannot be decoded is reported once, by the shard
//! `partition % shards`, with a durable mark ([`Shard::report_ctl_dead`]);
//! until this instance owns that shard the dead letter waits here
//! (bounded), and a restart never reports it again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Headers};
use rdkafka::{Message, Offset, TopicPartitionList};

use super::health::Phase;
use super::intake::{self, Context, KnownCtl, Received};
use super::{Error, Runtime, CALL_TIMEOUT, MAX_POLL_BATCH, RESTORE_TIMEOUT};
use crate::codec;
use crate::codec::trace::{self, Trace};
use crate::metrics;

/// Most bytes of CTL dead letters kept for shards this instance does not own.
const MAX_DEFERRED_BYTES: usize = 16 * 1024 * 1024;
/// How often the initial read compares positions with the end offsets.
const POSITION_EVERY: Duration = Duration::from_millis(100);

/// CTL records polled, then read and looked up, together.
const LOOKUP_CHUNK: usize = 32;

/// What a CTL record asks of this instance.
enum ReadCtl {
    /// Nothing: a tombstone, or a parameter no task names.
    Nothing,
    /// A new value of the parameter with this id in the router.
    Change(crate::ctl::ParamId, jiff::Timestamp),
    /// Undecodable, for this reason: dead-lettered.
    Bad(String),
}

/// A CTL dead letter waiting for its shard.
#[derive(Debug)]
pub(super) struct Deferred {
    topic: String,
    partition: i32,
    offset: i64,
    key: Option<Vec<u8>>,
    payload: Option<Vec<u8>>,
    reason: String,
}

impl Deferred {
    fn size(&self) -> usize {
        self.key.as_ref().map_or(0, Vec::len) + self.payload.as_ref().map_or(0, Vec::len)
    }
}

/// CTL dead letters waiting, by shard.
#[derive(Debug, Default)]
pub(super) struct Waiting {
    by_shard: BTreeMap<i32, Vec<Deferred>>,
    bytes: usize,
    /// Dead letters dropped for want of room.
    dropped: u64,
}

impl Runtime {
    /// Reads `ctl.changes` from the beginning up to the end offsets it has
    /// when the read starts, so the table is complete before any shard is
    /// served. Honours a stop at any moment.
    pub(super) fn catch_up_ctl(&mut self) -> Result<(), Error> {
        self.options.readiness.set_phase(Phase::LoadingCtl);
        let topic = self.options.config.kafka.topics.ctl.clone();
        let metadata = self
            .ctl
            .fetch_metadata(Some(&topic), CALL_TIMEOUT)
            .map_err(|e| Error::client(format!("fetching metadata of {topic}"), e))?;
        let partitions = metadata
            .topics()
            .first()
            .map_or(0, |t| t.partitions().len() as i32);
        // Where to stop: the end (for a read_committed reader, the last
        // stable offset) each partition has now. Asked before the partitions
        // are assigned: once a fetch is in flight, a broker may answer the
        // next request on that connection only after the fetch's wait.
        let mut ends: BTreeMap<i32, i64> = BTreeMap::new();
        for p in 0..partitions {
            self.stop_requested()?;
            let (low, high) = self
                .ctl
                .fetch_watermarks(&topic, p, CALL_TIMEOUT)
                .map_err(|e| {
                    Error::client(format!("reading the end offsets of {topic}[{p}]"), e)
                })?;
            if high > low {
                ends.insert(p, high);
            }
        }
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition_offset(&topic, p, Offset::Beginning)
                .map_err(|e| Error::client(format!("assigning {topic}[{p}]"), e))?;
        }
        self.ctl
            .assign(&tpl)
            .map_err(|e| Error::client(format!("assigning {topic}"), e))?;
        let deadline = Instant::now() + RESTORE_TIMEOUT;
        let started = Instant::now();
        let mut positions_at = Instant::now();
        let mut records = 0u64;
        // Polled through a handle of its own, so that each record is read
        // where it lies (no copy) while the shards take it.
        let ctl = Arc::clone(&self.ctl);
        while !ends.is_empty() {
            self.stop_requested()?;
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: format!("reading {topic} to its end"),
                    brokers: self.options.clients.brokers.clone(),
                    seconds: RESTORE_TIMEOUT.as_secs(),
                });
            }
            match ctl.poll(POSITION_EVERY) {
                None => {}
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    ends.remove(&p);
                }
                Some(Err(e)) => metrics::BrokerUnavailable { error: &e }.emit(),
                Some(Ok(m)) => {
                    records += 1;
                    if ends
                        .get(&m.partition())
                        .is_some_and(|&end| m.offset() + 1 >= end)
                    {
                        ends.remove(&m.partition());
                    }
                    let now = self.now();
                    self.on_ctl(&m, now);
                }
            }
            // Control records (transaction markers) are never delivered: the
            // position passes them even when no record reaches the end.
            if positions_at.elapsed() >= POSITION_EVERY {
                positions_at = Instant::now();
                self.drop_reached(&mut ends);
            }
        }
        metrics::record_consumed(&topic, records);
        tracing::info!(
            topic,
            partitions,
            records,
            parameters = self.table.iter().filter(|v| v.is_some()).count(),
            seconds = started.elapsed().as_secs_f64(),
            "CTL table loaded"
        );
        Ok(())
    }

    /// Removes from `ends` the partitions whose position reached their end.
    fn drop_reached(&self, ends: &mut BTreeMap<i32, i64>) {
        let Ok(positions) = self.ctl.position() else {
            return;
        };
        for e in positions.elements() {
            if let Offset::Offset(at) = e.offset() {
                if ends.get(&e.partition()).is_some_and(|&end| at >= end) {
                    ends.remove(&e.partition());
                }
            }
        }
    }

    /// Applies up to a batch of CTL changes; returns how many came.
    pub(super) fn poll_ctl(&mut self) -> Result<usize, Error> {
        let ctl = Arc::clone(&self.ctl);
        // One reading of the clock for the batch: it is taken in well under
        // a millisecond, and the clock is read per record otherwise.
        let now = self.now();
        let (mut n, mut more) = (0, true);
        let (mut chunk, mut read, mut routed) = (Vec::new(), Vec::new(), Vec::new());
        while more && n < MAX_POLL_BATCH {
            while chunk.len() < LOOKUP_CHUNK {
                match ctl.poll(Duration::ZERO) {
                    None => {
                        more = false;
                        break;
                    }
                    Some(Ok(m)) => chunk.push(m),
                    Some(Err(KafkaError::PartitionEOF(_))) => {}
                    Some(Err(e)) => {
                        metrics::BrokerUnavailable { error: &e }.emit();
                        more = false;
                        break;
                    }
                }
            }
            n += chunk.len();
            // The chunk's records read and looked up first, then applied:
            // the router's table holds every parameter a task names (up to
            // millions), so nearly every lookup misses the cache. What the
            // lookups will read is fetched first, a stage for the whole
            // chunk at a time (their misses overlap; one after another,
            // each waited alone), then looked up.
            let plain: Vec<_> = chunk
                .iter()
                .map(|m| m.payload().and_then(codec::plain_ctl))
                .collect();
            let names: Vec<(&[u8], &[u8])> = plain.iter().flatten().map(|p| p.names()).collect();
            self.router.prefetch_ctl(&names);
            read.extend(
                chunk
                    .iter()
                    .zip(plain)
                    .map(|(m, plain)| self.read_ctl(m, plain)),
            );
            self.prefetch_shards(&read, &mut routed);
            for (m, r) in chunk.drain(..).zip(read.drain(..)) {
                self.apply_read_ctl(&m, r, now);
            }
        }
        if n > 0 {
            metrics::record_consumed(&self.options.config.kafka.topics.ctl, n as u64);
        }
        Ok(n)
    }

    /// Has every owned shard fetch ahead what applying its changes among
    /// `read` will read (`routed`: a list to reuse), a stage for the whole
    /// chunk at a time, as the router's lookups were.
    fn prefetch_shards(&self, read: &[ReadCtl], routed: &mut Vec<crate::ctl::ParamId>) {
        for r in read {
            if let ReadCtl::Change(id, _) = r {
                self.router.prefetch_routes(*id);
                prefetch_index::prefetch_index(&self.table, id.index());
            }
        }
        for (&p, shard) in &self.shards {
            routed.clear();
            routed.extend(read.iter().filter_map(|r| match r {
                ReadCtl::Change(id, _) if self.router.ctl_routes(*id).contains(&p) => Some(*id),
                _ => None,
            }));
            if !routed.is_empty() {
                shard.driver.engine().prefetch_named_ctl(routed);
            }
        }
    }

    /// Applies one CTL change at `now` to the table and to the owned shards
    /// whose tasks name its parameter (the others would ignore it).
    pub(super) fn on_ctl(&mut self, m: &BorrowedMessage<'_>, now: jiff::Timestamp) {
        let read = self.read_ctl(m, m.payload().and_then(codec::plain_ctl));
        self.apply_read_ctl(m, read, now);
    }

    /// What CTL record `m` asks of this instance (`plain`: its payload as
    /// [`codec::plain_ctl`] read it).
    fn read_ctl<'a>(
        &self,
        m: &'a BorrowedMessage<'_>,
        plain: Option<codec::PlainCtl<'a>>,
    ) -> ReadCtl {
        if m.payload().is_none() {
            // A tombstone removes nothing: a parameter's value never disappears.
            return ReadCtl::Nothing;
        }
        match intake::decode_plain_ctl(&self.router, m.key(), m.payload(), plain) {
            Ok(Some(KnownCtl { id, value })) => ReadCtl::Change(id, value),
            // A parameter no task names decides nothing, here or after a restore.
            Ok(None) => ReadCtl::Nothing,
            Err(e) => ReadCtl::Bad(e.to_string()),
        }
    }

    /// Applies what [`Runtime::read_ctl`] made of `m`.
    fn apply_read_ctl(&mut self, m: &BorrowedMessage<'_>, read: ReadCtl, now: jiff::Timestamp) {
        let (id, value) = match read {
            ReadCtl::Nothing => return,
            ReadCtl::Bad(reason) => return self.ctl_dead(&received(m), reason),
            ReadCtl::Change(id, value) => (id, value),
        };
        // Read only now: a change of a parameter no task names (often most
        // of them) is dropped before its headers are read, which allocates.
        let record = received(m);
        if let Some(slot) = self.table.get_mut(id.index()) {
            *slot = crate::stamp::some(value);
        }
        let ctx = Context {
            settings: &self.options.config.kafka,
            topics: &self.out_topics,
            max_record_bytes: self.max_record_bytes,
            router: &self.router,
        };
        let mut applied = false;
        for p in self.router.ctl_routes(id) {
            if let Some(shard) = self.shards.get_mut(p) {
                intake::apply_ctl(shard, &ctx, value, id, &record, now);
                applied = true;
            }
        }
        if applied {
            self.note_input(record.produced_at, now);
        }
    }

    /// Reports an undecodable CTL record: the owner of shard
    /// `partition % shards` does, now or when this instance gets it.
    fn ctl_dead(&mut self, record: &Received<'_>, reason: String) {
        let owner = record.partition % self.router.partitions();
        let (ctx, shards, waiting) = self.parts();
        if let Some(shard) = shards.get_mut(&owner) {
            shard.report_ctl_dead(&ctx, record, reason);
            return;
        }
        let deferred = Deferred {
            topic: record.topic.to_string(),
            partition: record.partition,
            offset: record.offset,
            key: record.key.map(<[u8]>::to_vec),
            payload: record.payload.map(<[u8]>::to_vec),
            reason,
        };
        if waiting.bytes + deferred.size() > MAX_DEFERRED_BYTES {
            metrics::CtlDeadLetterDropped {
                partition: record.partition,
                offset: record.offset,
                reason: &deferred.reason,
                first: waiting.dropped == 0,
            }
            .emit();
            waiting.dropped += 1;
            return;
        }
        waiting.bytes += deferred.size();
        waiting.by_shard.entry(owner).or_default().push(deferred);
    }

    /// Reports the CTL dead letters that waited for shard `p`, now owned
    /// (those it reported before, by its marks, are not reported again).
    pub(super) fn report_waiting(&mut self, p: i32) {
        let (ctx, shards, waiting) = self.parts();
        let (Some(shard), Some(letters)) = (shards.get_mut(&p), waiting.by_shard.remove(&p)) else {
            return;
        };
        for d in letters {
            waiting.bytes -= d.size();
            let record = Received {
                topic: &d.topic,
                partition: d.partition,
                offset: d.offset,
                key: d.key.as_deref(),
                payload: d.payload.as_deref(),
                produced_at: None,
                trace: Trace::new(),
            };
            shard.report_ctl_dead(&ctx, &record, d.reason);
        }
    }
}

/// A consumed message as the intake sees it.
pub(super) fn received<'a>(m: &'a BorrowedMessage<'_>) -> Received<'a> {
    received_on(m, m.topic())
}

/// [`received`] with the message's topic already read (reading it checks
/// the name's UTF-8 again).
pub(super) fn received_on<'a>(m: &'a BorrowedMessage<'_>, topic: &'a str) -> Received<'a> {
    Received {
        topic,
        partition: m.partition(),
        offset: m.offset(),
        key: m.key(),
        payload: m.payload(),
        produced_at: m
            .timestamp()
            .to_millis()
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok()),
        trace: m
            .headers()
            .map(|h| trace::extract(h.iter().map(|h| (h.key, h.value.unwrap_or_default()))))
            .unwrap_or_default(),
    }
}
