//! The Kafka runtime: one logical thread driving every shard this instance
//! owns. Each loop polls the group inputs (offer changes, results, commands)
//! and the global
//! CTL table, applies them to the owning shard's engine, fires due timers,
//! answers admin queries and, every commit interval, commits everything the
//! shards decided together with the input offsets in one Kafka transaction.
//!
//! Failure handling is deliberately blunt: any failed commit aborts the
//! transaction and returns a retryable error; the supervisor builds a fresh
//! runtime, which rejoins the group, restores shards from the changelog and
//! resumes from the committed offsets. Nothing uncommitted is ever visible,
//! and ids derived from state make the redone work identical.

mod commit;
mod context;
mod inputs;
pub mod output;
mod shards;
pub mod supervisor;

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::{Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc;

use crate::admin::Query;
use crate::clock::Clock;
use crate::config::Config;
use crate::ctl::CtlTable;
use crate::engine::{Engine, OfferCounters, StageStats, Stats};
use crate::kafka::{partition_for, Clients, Error, ReaderContext};

use context::{DeliveryContext, GroupContext};
use output::OutRecord;

/// Most inputs handled between two checks of timers, CTL and admin queries.
const MAX_POLL_BATCH: usize = 500;
/// Most CTL dead letters kept per shard this instance does not own (yet).
const MAX_DEFERRED_DEAD: usize = 1000;
/// Timeout of transactional calls and flushes.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How often engine counters and task gauges are exported.
const METRICS_INTERVAL: Duration = Duration::from_secs(5);
/// Longest a shard restore may take.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(300);

/// What a runtime needs from outside.
#[derive(Clone)]
pub struct Options {
    /// The configuration (tasks and `[kafka]`).
    pub config: Arc<Config>,
    /// Bootstrap servers and librdkafka pass-through.
    pub clients: Clients,
    /// This instance's name (part of the transactional id).
    pub instance_id: String,
    /// Shard count: partitions of the co-partitioned topics.
    pub partitions: i32,
    /// Time source.
    pub clock: Arc<dyn Clock>,
    /// Readiness flag served on `/readyz`.
    pub ready: Arc<AtomicBool>,
    /// Admin queries to answer between batches.
    pub queries: Arc<Mutex<mpsc::Receiver<Query>>>,
    /// Set to stop after a last commit.
    pub shutdown: Arc<AtomicBool>,
    /// Set to stop at once without committing, as a killed process would
    /// (tests of crash recovery).
    pub crash: Arc<AtomicBool>,
}

/// One owned partition: its engine and what it decided since the last commit.
struct Shard {
    engine: Engine,
    pending: Vec<OutRecord>,
    /// Engine counters already exported.
    stats: Stats,
    /// Offer counters already exported.
    offer_stats: OfferCounters,
}

/// The runtime of one instance (see the module docs).
pub struct Runtime {
    options: Options,
    group: BaseConsumer<GroupContext>,
    ctl: BaseConsumer<ReaderContext>,
    producer: ThreadedProducer<DeliveryContext>,
    shards: BTreeMap<i32, Shard>,
    /// The global CTL table: latest value per parameter.
    table: CtlTable,
    /// Which partition owns a task, an offer, a key, a result, a command.
    router: crate::router::Router,
    /// Next offset to commit per group input partition.
    offsets: BTreeMap<(String, i32), i64>,
    /// Last metrics export.
    metrics_at: Instant,
    /// Dead letters of CTL records, by the shard that reports them, waiting
    /// until this instance owns that shard (bounded).
    deferred_dead: BTreeMap<i32, Vec<OutRecord>>,
}

impl Runtime {
    /// Connects the clients, reads the whole CTL table and joins the group.
    pub fn start(options: Options) -> Result<Runtime, Error> {
        let k = &options.config.kafka;
        let clients = &options.clients;
        let mut group_config = clients.base();
        group_config
            .set("group.id", &k.group_id)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("isolation.level", "read_committed")
            // Range gives a consumer the same partition numbers of every
            // co-partitioned topic: one shard sees results and commands of its keys.
            .set("partition.assignment.strategy", "range");
        for (key, value) in &k.librdkafka {
            group_config.set(key, value);
        }
        let group: BaseConsumer<GroupContext> = group_config
            .create_with_context(GroupContext::new(&k.topics.results))
            .map_err(|e| Error::client("creating the group consumer", e))?;
        let ctl: BaseConsumer<ReaderContext> = clients
            .reader()
            .set("group.id", format!("{}-ctl-reader", k.group_id))
            .create_with_context(ReaderContext)
            .map_err(|e| Error::client("creating the CTL reader", e))?;
        let transactional_id = k
            .exactly_once
            .then(|| format!("{}-{}", k.group_id, options.instance_id));
        let producer: ThreadedProducer<DeliveryContext> = clients
            .producer(transactional_id.as_deref())
            .create_with_context(DeliveryContext::default())
            .map_err(|e| Error::client("creating the producer", e))?;
        if k.exactly_once {
            producer
                .init_transactions(CALL_TIMEOUT)
                .map_err(|e| Error::client("initialising transactions", e))?;
        }
        let router = crate::router::Router::new(&options.config, options.partitions);
        let mut runtime = Runtime {
            options,
            group,
            ctl,
            producer,
            shards: BTreeMap::new(),
            table: CtlTable::default(),
            router,
            offsets: BTreeMap::new(),
            metrics_at: Instant::now(),
            deferred_dead: BTreeMap::new(),
        };
        runtime.catch_up_ctl()?;
        let t = &runtime.options.config.kafka.topics;
        runtime
            .group
            .subscribe(&[t.results.as_str(), t.commands.as_str(), t.offers.as_str()])
            .map_err(|e| Error::client("subscribing to the input topics", e))?;
        Ok(runtime)
    }

    /// Runs until shutdown (Ok) or a failure (the caller retries the
    /// retryable ones with a fresh runtime).
    pub fn run(mut self) -> Result<(), Error> {
        let interval = self.options.config.kafka.commit_interval.to_std();
        let poll_timeout =
            (interval / 4).clamp(Duration::from_millis(1), Duration::from_millis(50));
        let mut batch_started = Instant::now();
        let mut busy = false;
        let result = loop {
            if self.options.crash.load(Ordering::Relaxed) {
                // As a killed process: nothing more is sent, nothing committed.
                return Err(Error::Crashed);
            }
            if self.options.shutdown.load(Ordering::Relaxed) {
                break self.commit();
            }
            // Wait for group inputs only when the last pass found nothing to do.
            let wait = if busy { Duration::ZERO } else { poll_timeout };
            match self.step(wait) {
                Ok(worked) => busy = worked,
                Err(e) => break Err(e),
            }
            if batch_started.elapsed() >= interval {
                if let Err(e) = self.commit() {
                    break Err(e);
                }
                batch_started = Instant::now();
            }
        };
        crate::metrics::set_ready(&self.options.ready, false);
        if result.is_err() && self.options.config.kafka.exactly_once {
            // Whatever was in flight must not become visible.
            let _ = self.producer.abort_transaction(CALL_TIMEOUT);
        }
        self.group.unsubscribe();
        result
    }

    /// One pass: group inputs, ownership changes, CTL, timers, admin.
    /// Returns whether any input came.
    fn step(&mut self, poll_timeout: Duration) -> Result<bool, Error> {
        let inputs = self.poll_group(poll_timeout)?;
        self.handle_ownership()?;
        let changes = self.poll_ctl()?;
        self.tick()?;
        self.answer_queries();
        Ok(inputs + changes > 0)
    }

    fn now(&self) -> Timestamp {
        self.options.clock.now()
    }

    /// Reads `ctl.changes` from the beginning to its current end, so the
    /// table is complete before any shard is served.
    fn catch_up_ctl(&mut self) -> Result<(), Error> {
        let topic = self.options.config.kafka.topics.ctl.clone();
        let metadata = self
            .ctl
            .fetch_metadata(Some(&topic), CALL_TIMEOUT)
            .map_err(|e| Error::client(format!("fetching metadata of {topic}"), e))?;
        let partitions = metadata
            .topics()
            .first()
            .map_or(0, |t| t.partitions().len() as i32);
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition_offset(&topic, p, Offset::Beginning)
                .map_err(|e| Error::client(format!("assigning {topic}[{p}]"), e))?;
        }
        self.ctl
            .assign(&tpl)
            .map_err(|e| Error::client(format!("assigning {topic}"), e))?;
        let mut at_end: HashSet<i32> = HashSet::new();
        let deadline = Instant::now() + RESTORE_TIMEOUT;
        let started = Instant::now();
        let mut records = 0u64;
        while (at_end.len() as i32) < partitions {
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: format!("reading {topic} to its end"),
                    brokers: self.options.clients.brokers.clone(),
                    seconds: RESTORE_TIMEOUT.as_secs(),
                });
            }
            let message = match self.ctl.poll(Duration::from_millis(100)) {
                None => continue,
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    at_end.insert(p);
                    continue;
                }
                Some(Err(e)) => {
                    crate::metrics::BrokerUnavailable { error: &e }.emit();
                    continue;
                }
                Some(Ok(m)) => m.detach(),
            };
            records += 1;
            self.on_ctl(&message)?;
        }
        tracing::info!(
            topic,
            partitions,
            records,
            parameters = self.table.len(),
            seconds = started.elapsed().as_secs_f64(),
            "CTL table loaded"
        );
        Ok(())
    }

    fn tick(&mut self) -> Result<(), Error> {
        let now = self.now();
        let settings = &self.options.config.kafka;
        let mut failed = Vec::new();
        for (&p, shard) in &mut self.shards {
            if shard.engine.next_deadline().is_some_and(|d| d <= now) {
                match shard.engine.tick(now) {
                    Ok(actions) => {
                        crate::metrics::record_actions(p, &actions);
                        output::encode(&actions, p, settings, now, &mut shard.pending);
                    }
                    Err(e) => failed.push((p, e)),
                }
            }
        }
        for (p, e) in failed {
            crate::metrics::EngineFailed {
                partition: p,
                topic: "timers",
                offset: -1,
                error: &e,
            }
            .emit();
            self.rebuild_shard(p)?;
        }
        Ok(())
    }

    /// Every configured stage's queue depths and running counts, summed
    /// over the shards this instance owns (zero when it owns none).
    fn stage_totals(&self) -> Vec<StageStats> {
        let mut totals: Vec<StageStats> = self
            .options
            .config
            .stages
            .iter()
            .map(|s| StageStats {
                stage: s.name.clone(),
                live: 0,
                rescan: 0,
                running: 0,
                share: 0,
            })
            .collect();
        for shard in self.shards.values() {
            for stats in shard.engine.stage_stats() {
                if let Some(total) = totals.iter_mut().find(|t| t.stage == stats.stage) {
                    total.live += stats.live;
                    total.rescan += stats.rescan;
                    total.running += stats.running;
                    total.share += stats.share;
                }
            }
        }
        totals
    }

    fn answer_queries(&mut self) {
        let queries = Arc::clone(&self.options.queries);
        let Ok(mut queries) = queries.try_lock() else {
            return;
        };
        let now = self.now();
        while let Ok(query) = queries.try_recv() {
            match query {
                Query::Tasks { reply } => {
                    let mut all: Vec<_> = self
                        .shards
                        .values()
                        .flat_map(|s| s.engine.task_summaries())
                        .collect();
                    all.sort_by(|a, b| a.id.cmp(&b.id));
                    let _ = reply.send(all);
                }
                Query::Task { id, reply } => {
                    let view = self
                        .shards
                        .values()
                        .find_map(|s| s.engine.task_view(&id, now));
                    let _ = reply.send(view);
                }
                Query::Offer { id, reply } => {
                    // Only the owning shard can have it; no need to ask the others.
                    let owner = partition_for(id.as_bytes(), self.options.partitions);
                    let view = self
                        .shards
                        .get(&owner)
                        .and_then(|s| s.engine.offer_view(&id));
                    let _ = reply.send(view);
                }
                Query::Stages { reply } => {
                    let _ = reply.send(self.stage_totals());
                }
            }
        }
    }
}
