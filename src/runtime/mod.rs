//! The Kafka runtime: one logical thread driving every shard this instance
//! owns. Each loop polls the group inputs (offer changes, results, commands)
//! and the global CTL table, applies them to the owning shard's engine, fires due timers,
//! answers admin queries and, every commit interval, hands everything the
//! shards decided, with the input offsets, to the [`committer`] thread,
//! which commits it in one Kafka transaction while the next batch is
//! decided (one batch in flight; a shard is given up, rebuilt or the
//! instance stopped only once it is committed).
//!
//! Ownership ([`shards`]): the group assigns partitions of one
//! co-partitioned topic (`topics.results`) with the `cooperative-sticky`
//! assignor and static membership (`group.instance.id` = the instance id),
//! so a restarted instance takes its shards back without a rebalance, and a
//! rebalance revokes only the shards that move. The other co-partitioned
//! inputs (commands, offer changes) of a shard are assigned to the same
//! consumer by hand, partition for partition, once the shard is restored
//! ([`restorer`], on a thread of its own, several shards at once, each
//! rebuilt as its changelog is read: [`rebuild`]).
//!
//! Failure handling is deliberately blunt: any failed commit aborts the
//! transaction and returns a retryable error; the supervisor builds a fresh
//! runtime, which rejoins the group, restores shards from the changelog and
//! resumes from the committed offsets. Nothing uncommitted is ever visible,
//! and ids derived from state make the redone work identical.
//!
//! Bad input is never such a failure: a record is either applied or
//! dead-lettered ([`intake`]), and no output may exceed what the producer
//! accepts, so that no record can stop, stall or crash-loop a shard.

pub mod backoff;
mod commit;
mod committer;
mod context;
mod ctl;
pub mod dead;
mod events;
pub mod failpoint;
pub mod health;
mod inputs;
pub mod intake;
pub mod output;
mod positions;
pub mod rebuild;
pub mod restorer;
mod shards;
pub mod stop;
pub mod supervisor;
mod task_health;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{Producer, ThreadedProducer};
use tokio::sync::mpsc;

use crate::admin::Query;
use crate::clock::Clock;
use crate::config::Config;
use crate::engine::StageStats;
use crate::kafka::{partition_for, Clients, Error, ReaderContext};

use context::{DeliveryContext, GroupContext};
use health::{Phase, Readiness};
use intake::{Context, Router, Shard};
use restorer::Restorer;
use stop::{Stop, StopKind};

/// Most inputs handled between two checks of timers, CTL and admin queries.
const MAX_POLL_BATCH: usize = 500;
/// Timeout of transactional calls and flushes.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How often engine counters and task gauges are exported.
const METRICS_INTERVAL: Duration = Duration::from_secs(5);
/// Longest a shard restore may take.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(300);
/// Records (inputs taken) after which a batch is committed before its interval.
const MAX_BATCH_RECORDS: usize = 50_000;
/// Heartbeats per session timeout.
const HEARTBEATS_PER_SESSION: u32 = 5;

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
    /// Readiness served on `/readyz`.
    pub readiness: Arc<Readiness>,
    /// The stalest tasks' ages, published by each health pass and served
    /// on `/metrics`.
    pub task_ages: Arc<crate::metrics::TaskAges>,
    /// Admin queries to answer between batches.
    pub queries: Arc<Mutex<mpsc::Receiver<Query>>>,
    /// Set to stop: after a last commit, or at once as a killed process
    /// would (tests of crash recovery).
    pub stop: Stop,
}

/// The runtime of one instance (see the module docs).
pub struct Runtime {
    options: Options,
    group: Arc<BaseConsumer<GroupContext>>,
    ctl: Arc<BaseConsumer<ReaderContext>>,
    producer: committer::SharedProducer,
    /// Makes each batch durable while the next one is decided.
    committer: committer::Committer,
    /// The batch the committer has.
    in_flight: commit::InFlight,
    /// Emptied record lists of committed batches, to fill again.
    spare: Vec<output::OutRecords>,
    shards: BTreeMap<i32, Shard>,
    /// Shards the group assigned that are being restored.
    restoring: BTreeSet<i32>,
    /// Shards revoked after a commit, kept in memory with where their
    /// changelog partition ended: given back, one resumes at once when
    /// nobody wrote its changelog meanwhile.
    kept: BTreeMap<i32, (Shard, i64)>,
    /// Restores shards on a thread of its own.
    restorer: Restorer,
    /// Input partitions assigned to the group consumer.
    assigned: BTreeSet<(String, i32)>,
    /// Who owns what.
    router: Router,
    /// The producer's `message.max.bytes`.
    /// The names of the topics written, shared by their records.
    out_topics: output::OutTopics,
    max_record_bytes: usize,
    /// The global CTL table: the latest value of each parameter a task
    /// names, by the router's parameter id (12 bytes each, where
    /// `Option<Timestamp>` takes 24: one per parameter of the configuration).
    table: Vec<Option<crate::stamp::Stamp>>,
    /// Next offset of every owned input partition, sent with every
    /// transaction (so that every transaction is fenced by the group
    /// generation: see [`restorer`]).
    offsets: positions::Positions,
    /// Inputs were consumed since the last commit.
    consumed: bool,
    /// When the batch must be committed: an interval after its oldest
    /// input was produced.
    batch_due: Option<Timestamp>,
    /// Inputs taken into the batch.
    batch_records: usize,
    /// How long a commit takes lately (a moving average of the committer's
    /// times, at most half an interval): a batch is due that much before an
    /// interval has passed since its oldest input, so that its outputs are
    /// committed about an interval after that input, not an interval plus
    /// the commit.
    commit_lead: Duration,
    /// Last metrics export.
    metrics_at: Instant,
    /// Task health, exported a part per commit round.
    task_health: task_health::HealthPasses,
    /// CTL dead letters waiting until this instance owns their shard.
    waiting: ctl::Waiting,
    /// The topics processes launch on (`on`), consumed through the group.
    event_topics: Vec<String>,
    /// What their records decided since the last commit.
    inbox: events::Inbox,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Before the group consumer closes, which waits for its partitions
        // to be given up.
        self.group.context().close();
        // A rebalance this runtime took but did not complete (it failed
        // meanwhile, e.g. its session was lost during a commit) waits for
        // an assignment call, and so would closing: give everything up.
        if let Ok(assignment) = self.group.assignment() {
            let _ = self.group.incremental_unassign(&assignment);
        }
        tracing::info!("closing the runtime's clients");
    }
}

impl Runtime {
    /// Connects the clients, reads the whole CTL table and joins the group.
    pub fn start(options: Options) -> Result<Runtime, Error> {
        options.readiness.set_phase(Phase::Starting);
        let k = &options.config.kafka;
        let clients = &options.clients;
        let max_record_bytes = clients.max_record_bytes();
        crate::codec::limits::check_outputs_fit(options.config.stages.len(), max_record_bytes)
            .map_err(Error::Limits)?;
        let session = k.session_timeout.to_std();
        let mut group_config = clients.base();
        group_config
            .set("group.id", &k.group_id)
            // Static membership: a restarted instance is the same member, so
            // its shards wait for it (within the session timeout) instead of
            // moving, and no ghost member holds them.
            .set("group.instance.id", &options.instance_id)
            .set("session.timeout.ms", session.as_millis().to_string())
            .set(
                "heartbeat.interval.ms",
                (session / HEARTBEATS_PER_SESSION).as_millis().to_string(),
            )
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("isolation.level", "read_committed")
            // Partitions assigned by hand join the next fetch request: do
            // not let a long poll of the others hold it back.
            .set("fetch.wait.max.ms", "50")
            // Incremental: a rebalance revokes only what moves. The group
            // assigns one co-partitioned topic; the others follow by hand.
            .set("partition.assignment.strategy", "cooperative-sticky");
        for (key, value) in &k.librdkafka {
            group_config.set(key, value);
        }
        let group: BaseConsumer<GroupContext> = group_config
            .create_with_context(GroupContext::default())
            .map_err(|e| Error::client("creating the group consumer", e))?;
        let ctl: BaseConsumer<ReaderContext> = clients
            .reader()
            .set("group.id", format!("{}-ctl-reader", k.group_id))
            .create_with_context(ReaderContext)
            .map_err(|e| Error::client("creating the CTL reader", e))?;
        let transactional_id = k
            .exactly_once
            .then(|| format!("{}-{}", k.group_id, options.instance_id));
        let mut producer_config = clients.runtime_producer(transactional_id.as_deref());
        if producer_config.get("transaction.timeout.ms").is_none() {
            // A transaction left open by a killed instance blocks
            // read_committed readers of what it wrote until it is aborted:
            // by then its shards have moved (or it restarted and fenced it).
            producer_config.set("transaction.timeout.ms", session.as_millis().to_string());
        }
        let producer: ThreadedProducer<DeliveryContext> = producer_config
            .create_with_context(DeliveryContext::default())
            .map_err(|e| Error::client("creating the producer", e))?;
        if k.exactly_once {
            // Fences this instance's previous incarnation and aborts the
            // transaction it left open, before any shard is restored.
            producer
                .init_transactions(CALL_TIMEOUT)
                .map_err(|e| Error::client("initialising transactions", e))?;
        }
        let producer = Arc::new(producer);
        let committer = committer::Committer::spawn(
            Arc::clone(&producer),
            k.exactly_once,
            options.stop.clone(),
        )?;
        let router = Router::new(&options.config, options.partitions);
        let restorer = Restorer::spawn(clients, Arc::clone(&options.config), router.clone())?;
        let table = vec![None; router.ctl_len()];
        let options_event_topics: Vec<String> = options
            .config
            .event_topics()
            .into_iter()
            .map(str::to_string)
            .collect();
        let out_topics = output::OutTopics::new(&options.config.kafka.topics);
        let task_health = task_health::HealthPasses::new(Arc::clone(&options.task_ages));
        let mut runtime = Runtime {
            options,
            group: Arc::new(group),
            ctl: Arc::new(ctl),
            producer,
            committer,
            in_flight: commit::InFlight::default(),
            spare: Vec::new(),
            shards: BTreeMap::new(),
            restoring: BTreeSet::new(),
            kept: BTreeMap::new(),
            restorer,
            assigned: BTreeSet::new(),
            router,
            out_topics,
            max_record_bytes,
            table,
            offsets: positions::Positions::default(),
            consumed: false,
            batch_due: None,
            commit_lead: Duration::ZERO,
            batch_records: 0,
            metrics_at: Instant::now(),
            task_health,
            waiting: ctl::Waiting::default(),
            event_topics: options_event_topics,
            inbox: events::Inbox::default(),
        };
        // Joining goes on in the background while the CTL table loads; the
        // assignment is taken once the table is complete.
        let t = &runtime.options.config.kafka.topics;
        let mut topics = vec![t.results.as_str()];
        topics.extend(runtime.event_topics.iter().map(String::as_str));
        runtime
            .group
            .subscribe(&topics)
            .map_err(|e| Error::client("subscribing to the input topics", e))?;
        runtime.catch_up_ctl()?;
        runtime.options.readiness.set_phase(Phase::Joining);
        Ok(runtime)
    }

    /// Runs until shutdown (Ok) or a failure (the caller retries the
    /// retryable ones with a fresh runtime).
    pub fn run(mut self) -> Result<(), Error> {
        let interval = self.options.config.kafka.commit_interval.to_std();
        // CTL changes come on another consumer, read between polls of the
        // group: a long wait here would hold them back.
        let poll_timeout =
            (interval / 20).clamp(Duration::from_millis(1), Duration::from_millis(5));
        let mut batch_started = Instant::now();
        let mut busy = false;
        let result = loop {
            match self.options.stop.requested() {
                // As a killed process: nothing more is sent, nothing committed.
                Some(StopKind::Crash) => return Err(Error::Crashed),
                Some(StopKind::Shutdown) => break self.commit_and_settle(),
                None => {}
            }
            // Wait for group inputs only when the last pass found nothing to do.
            let wait = if busy { Duration::ZERO } else { poll_timeout };
            match self.step(wait) {
                Ok(worked) => busy = worked,
                Err(e) => break Err(e),
            }
            // A batch is committed when the interval passed since the last
            // commit, when its oldest input was produced an interval ago
            // (so that an input waits about one interval whenever in the
            // cycle it came, not one interval plus its delivery), or when it
            // grew large.
            // Never twice within half an interval: under a backlog every
            // input is old, and committing at each would be all overhead.
            //
            // While the batch before is still being committed, this one
            // keeps growing instead of waiting for it (up to its bound):
            // under load the commits then take batches as large as the
            // brokers' round trips call for, and this thread never idles
            // behind the committer; with the committer free, nothing waits.
            let age = batch_started.elapsed();
            let due = age >= interval / 2 && self.batch_due.is_some_and(|due| self.now() >= due);
            let full = self.batch_records >= MAX_BATCH_RECORDS;
            if (due || age >= interval || full) && (full || !self.committer.is_busy()) {
                if let Err(e) = self.commit() {
                    break Err(e);
                }
                batch_started = Instant::now();
            }
        };
        if let Err(e) = &result {
            // From here on this runtime serves nothing: readiness says so
            // at once, not only once its clients are closed (closing the
            // group consumer waits for the group).
            if e.is_retryable() {
                self.options
                    .readiness
                    .set_phase(Phase::Restarting(e.to_string()));
            }
            if self.options.config.kafka.exactly_once {
                // Whatever was in flight must not become visible: the
                // committer's transaction ends first (it aborts a failed one).
                tracing::info!(error = %e, "the runtime failed; aborting its open transaction");
                let _ = self.committer.wait();
                let _ = self.producer.abort_transaction(CALL_TIMEOUT);
            }
        }
        // No leaving the group, even on a clean stop: as a static member
        // this instance keeps its shards for the session timeout, so one
        // that restarts (a deploy, a new runtime after a failure) takes
        // them back without a rebalance. One that does not return has them
        // moved when its session expires.
        result
    }

    /// One pass: group inputs, ownership changes, CTL, timers, admin.
    /// Returns whether any input came.
    fn step(&mut self, poll_timeout: Duration) -> Result<bool, Error> {
        let inputs = self.poll_group(poll_timeout)?;
        self.handle_ownership()?;
        let restored = self.install_restored()?;
        let changes = self.poll_ctl()?;
        self.tick();
        // A shard that broke an invariant is rebuilt before it sees more.
        self.rebuild_broken()?;
        self.answer_queries();
        Ok(inputs + changes + restored > 0)
    }

    fn now(&self) -> Timestamp {
        self.options.clock.now()
    }

    /// The global CTL table: every parameter a task names, with its value.
    fn ctl_values(&self) -> impl Iterator<Item = (crate::ctl::ParamId, Timestamp)> + '_ {
        (0u32..)
            .zip(&self.table)
            .filter_map(|(i, v)| Some((crate::ctl::ParamId(i), crate::stamp::get(*v)?)))
    }

    /// Notes an input taken into the batch, produced at `produced_at`: the
    /// batch is due an interval after its oldest input was produced, less
    /// what committing it takes (never later than that from now, whatever
    /// the producer's clock says).
    fn note_input(&mut self, produced_at: Option<Timestamp>, now: Timestamp) {
        self.batch_records += 1;
        let interval = self.options.config.kafka.commit_interval.to_std();
        let wait = interval.saturating_sub(self.commit_lead);
        let Ok(interval) = jiff::SignedDuration::try_from(wait) else {
            return;
        };
        let due = crate::run::add(produced_at.unwrap_or(now).min(now), interval);
        self.batch_due = Some(self.batch_due.map_or(due, |d| d.min(due)));
    }

    /// Fails with the stop asked for, if any: for the waits of start and
    /// restore, which must not hold a stop back.
    fn stop_requested(&self) -> Result<(), Error> {
        match self.options.stop.requested() {
            None => Ok(()),
            Some(StopKind::Shutdown) => Err(Error::Stopped),
            Some(StopKind::Crash) => Err(Error::Crashed),
        }
    }

    /// The shards' shared context, the shards and the waiting CTL dead
    /// letters, borrowed apart.
    fn parts(&mut self) -> (Context<'_>, &mut BTreeMap<i32, Shard>, &mut ctl::Waiting) {
        let ctx = Context {
            settings: &self.options.config.kafka,
            topics: &self.out_topics,
            max_record_bytes: self.max_record_bytes,
            router: &self.router,
        };
        (ctx, &mut self.shards, &mut self.waiting)
    }

    fn tick(&mut self) {
        let now = self.now();
        let (ctx, shards, _) = self.parts();
        for shard in shards.values_mut() {
            intake::tick(shard, &ctx, now);
        }
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
            for stats in shard.engine().stage_stats() {
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
                Query::Tasks {
                    filter,
                    limit,
                    reply,
                } => {
                    let pages = self
                        .shards
                        .values()
                        .map(|s| s.engine().task_page(&filter, limit));
                    let _ = reply.send(crate::engine::TaskPage::merge(pages, limit));
                }
                Query::Task { id, reply } => {
                    let view = self
                        .shards
                        .values()
                        .find_map(|s| s.engine().task_view(&id, now));
                    let _ = reply.send(view);
                }
                Query::Offer { id, reply } => {
                    // Only the owning shard can have it; no need to ask the others.
                    let owner = partition_for(id.as_bytes(), self.options.partitions);
                    let view = self
                        .shards
                        .get(&owner)
                        .and_then(|s| s.engine().offer_view(&id));
                    let _ = reply.send(view);
                }
                Query::Stages { reply } => {
                    let _ = reply.send(self.stage_totals());
                }
                Query::Process {
                    process,
                    key,
                    reply,
                } => {
                    // Only the shard owning the key can have it.
                    let view = self
                        .shards
                        .get(&self.router.key(&key))
                        .and_then(|s| s.engine().process_view(&process, &key));
                    let _ = reply.send(view);
                }
                Query::Runs {
                    criteria,
                    limit,
                    reply,
                } => {
                    let mut runs = crate::admin::Runs::default();
                    for (&p, shard) in &self.shards {
                        let (total, matches) = shard.engine().find(&criteria, limit);
                        let partition = u32::try_from(p).unwrap_or(0);
                        runs.total += total;
                        runs.partitions.push(partition);
                        runs.matches.extend(
                            matches
                                .into_iter()
                                .map(|item| crate::admin::RunMatch { partition, item }),
                        );
                    }
                    let _ = reply.send(runs);
                }
                Query::Jobs { reply } => {
                    let shards: Vec<_> = self
                        .shards
                        .values()
                        .map(|s| s.engine().job_stats())
                        .collect();
                    let _ = reply.send(crate::metrics::sum_jobs(&shards));
                }
            }
        }
    }
}
