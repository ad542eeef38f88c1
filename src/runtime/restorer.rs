//! Restoring shards on a thread of its own, so that the shards assigned
//! together restore together (one reader, every changelog partition at
//! once) while the shards already owned keep serving, and so that decoding
//! the changelog and rebuilding the engines use cores the runtime thread
//! does not (each shard is rebuilt on a thread of its own, taking what one
//! poll read while the reader polls the next: [`super::rebuild::Builder`]).
//!
//! A restore of shard `p` goes in this order:
//!
//! 1. the committed offsets of `p`'s input partitions are fetched, as
//!    *stable* offsets (`read_committed` makes librdkafka ask for them):
//!    the broker answers only once no transaction holding offsets of them
//!    is open. Every transaction of a shard's owner carries the offsets of
//!    its input partitions, so any transaction of an earlier owner that
//!    wrote `p`'s changelog is committed or aborted by then — and a zombie
//!    cannot open a new one, its offsets being fenced by the group
//!    generation (KIP-447);
//! 2. only then is changelog partition `p` read to its end (`read_committed`),
//!    so it holds everything the inputs' offsets account for;
//! 3. the engine, rebuilt from it as it is read ([`super::rebuild`]), is handed to the
//!    runtime with the offsets its inputs resume from. The runtime loads the
//!    CTL table and starts it.
//!
//! A shard this instance owned before and kept ([`Request::Restore`] with
//! `known`) is not rebuilt when no committed record follows the last one it
//! wrote: the runtime resumes the kept engine. With standbys, the reader
//! keeps tailing the changelog of the shards this instance does not own, so
//! taking one over reads only what was written since.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::{Message, Offset, TopicPartitionList};

use super::backoff::Backoff;
use super::rebuild::{Builder, Closing, Rebuild};
use crate::config::Config;
use crate::engine;
use crate::kafka::{Clients, Error, ReaderContext};
use crate::router::Router;
use crate::shell::driver::Driver;

/// Longest wait of one broker call of the reader.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the reader waits for records while something is being restored.
const BUSY_POLL: Duration = Duration::from_millis(5);
/// How long it waits when it only tails standbys.
const IDLE_POLL: Duration = Duration::from_millis(100);
/// How long it waits for a shard finishing on its thread, with nothing
/// else to do.
const FINISH_POLL: Duration = Duration::from_millis(1);

/// What the runtime asks.
#[derive(Debug)]
pub enum Request {
    /// Restore shard `partition`, newly assigned. `known`: the changelog
    /// position right after the last record of a shard this instance kept
    /// (revoked earlier, its engine still in memory).
    Restore {
        /// The shard.
        partition: i32,
        /// Where the kept shard's changelog ended.
        known: Option<i64>,
    },
    /// Forget shard `partition`: revoked before its restore completed.
    Cancel(i32),
    /// Keep reading the changelog of these shards (the ones this instance
    /// does not own), to restore them fast if they come.
    Standby(BTreeSet<i32>),
}

/// What a restore produced.
pub enum State {
    /// The engine rebuilt from the changelog (CTL table not loaded, not
    /// started) and the shard's CTL dead-letter marks.
    Rebuilt(Box<Driver>, BTreeMap<i32, i64>),
    /// No committed record follows the kept shard's last one: resume it.
    Unchanged,
}

/// A restored shard.
pub struct Restored {
    /// The shard.
    pub partition: i32,
    /// Its state.
    pub state: State,
    /// Where each of its input partitions resumes: `(topic, next offset)`.
    pub offsets: Vec<(String, i64)>,
    /// Changelog records read for this restore (after a standby's: the tail).
    pub records: u64,
    /// From the request to the restored engine.
    pub seconds: f64,
}

/// What the reader answers.
pub enum Reply {
    /// A shard is ready to serve.
    Restored(Restored),
    /// The reader failed for good (a configuration or permission problem):
    /// the runtime starts over.
    Failed(Error),
}

/// The runtime's end of the restorer.
pub struct Restorer {
    requests: Sender<Request>,
    replies: Receiver<Reply>,
    thread: Option<JoinHandle<()>>,
}

impl Restorer {
    /// Starts the reader thread for `config`'s changelog over `router`'s shards.
    pub fn spawn(
        clients: &Clients,
        config: Arc<Config>,
        router: Router,
    ) -> Result<Restorer, Error> {
        let k = &config.kafka;
        let consumer: BaseConsumer<ReaderContext> = clients
            .reader()
            // The group's id lets it fetch the group's committed offsets;
            // it only assigns partitions, it never joins.
            .set("group.id", &k.group_id)
            // The end shows as an empty fetch: do not let the broker hold it.
            .set("fetch.wait.max.ms", "10")
            .create_with_context(ReaderContext)
            .map_err(|e| Error::client("creating the changelog reader", e))?;
        let (requests, inbox) = mpsc::channel();
        let (outbox, replies) = mpsc::channel();
        let reader = Reader {
            consumer,
            config,
            router,
            inbox,
            outbox,
            parts: BTreeMap::new(),
            standbys: BTreeSet::new(),
            assigned: BTreeSet::new(),
            waiting: Vec::new(),
            finishing: Vec::new(),
        };
        let thread = std::thread::Builder::new()
            .name("reactor-restore".into())
            .stack_size(super::supervisor::RUNTIME_STACK)
            .spawn(move || reader.run())
            .map_err(|e| Error::Topic {
                topic: String::new(),
                message: format!("cannot start the restore thread: {e}"),
            })?;
        Ok(Restorer {
            requests,
            replies,
            thread: Some(thread),
        })
    }

    /// Asks the reader; a reader gone (it failed) answers with its failure
    /// on [`Restorer::try_reply`].
    pub fn ask(&self, request: Request) {
        let _ = self.requests.send(request);
    }

    /// The next answer, if one is waiting.
    pub fn try_reply(&self) -> Option<Reply> {
        match self.replies.try_recv() {
            Ok(reply) => Some(reply),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(Reply::Failed(Error::Topic {
                topic: String::new(),
                message: "the restore thread ended".into(),
            })),
        }
    }
}

impl Drop for Restorer {
    fn drop(&mut self) {
        // Closing the request channel ends the reader.
        let (closed, _) = mpsc::channel();
        self.requests = closed;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One changelog partition the reader follows.
struct Part {
    /// Being restored for the runtime (else only tailed as a standby).
    restore: Option<Pending>,
    /// What was read so far (none while a kept shard is only checked for
    /// records after its last one: most often it is resumed as it was).
    shard: Option<Builder>,
    /// Records read since the restore was asked.
    records: u64,
    /// The next offset to read, as far as the reader knows.
    next: i64,
    /// The reader reached the partition's end since the restore was asked.
    eof: bool,
}

/// A restore in progress.
struct Pending {
    asked: Instant,
    /// The kept shard's position, while it is still unchanged.
    known: Option<i64>,
    /// Where the inputs resume (fetched before the changelog is read).
    offsets: Vec<(String, i64)>,
    /// The changelog's end when the offsets were stable: done at or past it.
    end: i64,
}

impl Pending {
    /// The answer to this restore of shard `partition`, ending in `state`
    /// after `records` changelog records.
    fn answer(self, partition: i32, state: State, records: u64) -> Restored {
        Restored {
            partition,
            state,
            offsets: self.offsets,
            records,
            seconds: self.asked.elapsed().as_secs_f64(),
        }
    }
}

struct Reader {
    consumer: BaseConsumer<ReaderContext>,
    config: Arc<Config>,
    router: Router,
    inbox: Receiver<Request>,
    outbox: Sender<Reply>,
    parts: BTreeMap<i32, Part>,
    standbys: BTreeSet<i32>,
    /// Changelog partitions assigned to the consumer.
    assigned: BTreeSet<i32>,
    /// Restores asked but not begun (their offsets could not be fetched
    /// yet): a standby among them is kept, not dropped with the standby set.
    waiting: Vec<(i32, Option<i64>)>,
    /// Restores read to their end whose shards finish on their threads.
    finishing: Vec<Finishing>,
}

/// A restore read to its end, its shard finishing on its thread.
struct Finishing {
    partition: i32,
    shard: Closing,
    pending: Pending,
    records: u64,
}

impl Reader {
    fn run(mut self) {
        let mut backoff = Backoff::default();
        let mut retry_at = Instant::now();
        loop {
            let wait = if self.restoring() {
                Duration::ZERO
            } else if !self.finishing.is_empty() {
                FINISH_POLL
            } else if !self.waiting.is_empty() {
                retry_at.saturating_duration_since(Instant::now())
            } else if self.parts.is_empty() {
                Duration::MAX
            } else {
                IDLE_POLL
            };
            let mut next = match self.inbox.recv_timeout(wait) {
                Ok(r) => Some(r),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            while let Some(request) = next {
                match request {
                    Request::Restore { partition, known } => {
                        self.waiting.push((partition, known));
                    }
                    Request::Cancel(p) => {
                        self.waiting.retain(|(q, _)| *q != p);
                        self.cancel(p);
                    }
                    Request::Standby(set) => self.standby(set),
                }
                next = self.inbox.try_recv().ok();
            }
            if !self.waiting.is_empty() && Instant::now() >= retry_at {
                let waiting = std::mem::take(&mut self.waiting);
                match self.begin(&waiting) {
                    Ok(()) => {
                        backoff.reset();
                    }
                    Err(e) if e.is_retryable() => {
                        tracing::warn!(error = %e, "starting a restore failed; retrying");
                        self.waiting = waiting;
                        retry_at = Instant::now() + backoff.next_delay();
                    }
                    Err(e) => {
                        let _ = self.outbox.send(Reply::Failed(e));
                        return;
                    }
                }
            }
            if !self.assigned.is_empty() {
                self.read();
                self.finish_done();
            }
            if let Err(e) = self.hand_finished() {
                let _ = self.outbox.send(Reply::Failed(e));
                return;
            }
        }
    }

    /// Whether a restore is being read.
    fn restoring(&self) -> bool {
        self.parts.values().any(|p| p.restore.is_some())
    }

    /// The co-partitioned input topics (shard partition `p` of each).
    fn inputs(&self) -> [&str; 3] {
        let t = &self.config.kafka.topics;
        [&t.results, &t.commands, &t.offers]
    }

    /// Starts the restores of `asked`: stable input offsets first, then the
    /// changelog's end, then reading (see the module docs).
    fn begin(&mut self, asked: &[(i32, Option<i64>)]) -> Result<(), Error> {
        let changelog = self.config.kafka.topics.changelog.clone();
        let mut tpl = TopicPartitionList::new();
        for (p, _) in asked {
            for topic in self.inputs() {
                tpl.add_partition_offset(topic, *p, Offset::Beginning)
                    .map_err(|e| record_error(topic, *p, e))?;
            }
        }
        // Where an input partition with nothing committed starts, as a
        // number, so that every transaction can carry it: one ListOffsets
        // for all (-2 asks for the earliest). Asked first: after the
        // committed offsets, librdkafka waited ~50 ms for these.
        let earliest = self
            .consumer
            .offsets_for_times(tpl.clone(), CALL_TIMEOUT)
            .map_err(|e| Error::client("fetching the earliest offsets of assigned shards", e))?;
        let committed = self
            .consumer
            .committed_offsets(tpl, CALL_TIMEOUT)
            .map_err(|e| Error::client("fetching the committed offsets of assigned shards", e))?;
        let mut resume: BTreeMap<i32, Vec<(String, i64)>> = BTreeMap::new();
        for e in committed.elements() {
            let (topic, p) = (e.topic(), e.partition());
            let next = match e.offset() {
                Offset::Offset(n) => n,
                _ => match earliest.find_partition(topic, p).map(|e| e.offset()) {
                    Some(Offset::Offset(n)) => n,
                    other => {
                        return Err(Error::Topic {
                            topic: topic.to_string(),
                            message: format!(
                            "partition {p}: nothing committed and no earliest offset ({other:?})"
                        ),
                        })
                    }
                },
            };
            resume.entry(p).or_default().push((topic.to_string(), next));
        }
        drop(earliest);
        // Every broker call first, so that a failure leaves nothing half begun.
        let mut bounds = Vec::with_capacity(asked.len());
        for (p, known) in asked {
            let (low, end) = self
                .consumer
                .fetch_watermarks(&changelog, *p, CALL_TIMEOUT)
                .map_err(|e| record_error(&changelog, *p, e))?;
            bounds.push((*p, *known, low, end));
        }
        let mut add = TopicPartitionList::new();
        for (p, known, low, end) in bounds {
            let mut pending = Pending {
                asked: Instant::now(),
                known: known.filter(|k| *k >= low),
                offsets: resume.remove(&p).unwrap_or_default(),
                end,
            };
            match self.parts.get_mut(&p) {
                // A standby: its log so far counts; reading goes on from there.
                Some(part) => {
                    pending.known = None;
                    part.records = 0;
                    part.eof = false;
                    part.restore = Some(pending);
                }
                None => {
                    // A kept shard is checked from where it ended; any other
                    // is read from the beginning.
                    let from = pending.known.unwrap_or(low);
                    let shard = match pending.known {
                        Some(_) => None,
                        None => Some(Builder::start(&self.config, &self.router, &changelog, p)),
                    };
                    self.parts.insert(
                        p,
                        Part {
                            restore: Some(pending),
                            shard,
                            records: 0,
                            next: from,
                            eof: false,
                        },
                    );
                    if self.assigned.insert(p) {
                        add.add_partition_offset(&changelog, p, Offset::Offset(from))
                            .map_err(|e| record_error(&changelog, p, e))?;
                    }
                }
            }
        }
        if add.count() > 0 {
            self.consumer
                .incremental_assign(&add)
                .map_err(|e| Error::client("assigning changelog partitions to restore", e))?;
        }
        Ok(())
    }

    fn cancel(&mut self, p: i32) {
        // A shard still finishing is let go: its thread ends on its own.
        self.finishing.retain(|f| f.partition != p);
        let standby = self.standbys.contains(&p);
        if let Some(part) = self.parts.get_mut(&p) {
            part.restore = None;
        }
        if !standby {
            self.drop_part(p);
        }
    }

    fn standby(&mut self, set: BTreeSet<i32>) {
        let changelog = self.config.kafka.topics.changelog.clone();
        let gone: Vec<i32> = self.standbys.difference(&set).copied().collect();
        for p in gone {
            // The owner asks for a shard's restore, then for the standby set
            // without it: the tailed shard is what that restore goes on from.
            let asked = self.waiting.iter().any(|(q, _)| *q == p);
            if !asked
                && self
                    .parts
                    .get(&p)
                    .is_some_and(|part| part.restore.is_none())
            {
                self.drop_part(p);
            }
        }
        let mut add = TopicPartitionList::new();
        for &p in set.difference(&self.standbys) {
            if self.parts.contains_key(&p) {
                continue;
            }
            let shard = Builder::start(&self.config, &self.router, &changelog, p);
            self.parts.insert(
                p,
                Part {
                    restore: None,
                    shard: Some(shard),
                    records: 0,
                    next: 0,
                    eof: false,
                },
            );
            if self.assigned.insert(p) {
                let _ = add.add_partition_offset(&changelog, p, Offset::Beginning);
            }
        }
        if add.count() > 0 {
            if let Err(e) = self.consumer.incremental_assign(&add) {
                tracing::warn!(error = %e, "assigning standby changelog partitions");
            }
        }
        self.standbys = set;
    }

    fn drop_part(&mut self, p: i32) {
        self.parts.remove(&p);
        if self.assigned.remove(&p) {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition(&self.config.kafka.topics.changelog, p);
            if let Err(e) = self.consumer.incremental_unassign(&tpl) {
                tracing::warn!(partition = p, error = %e, "unassigning a changelog partition");
            }
        }
    }

    /// Reads what is there (a batch at most) and hands it to the shards,
    /// which take it on their threads while the reader reads on.
    fn read(&mut self) {
        self.poll_batch();
        for part in self.parts.values_mut() {
            if let Some(shard) = &mut part.shard {
                shard.hand_over();
            }
        }
    }

    /// Polls what is there (a batch at most).
    fn poll_batch(&mut self) {
        let busy = self.restoring() || !self.finishing.is_empty();
        let mut wait = if busy { BUSY_POLL } else { IDLE_POLL };
        for _ in 0..10_000 {
            match self.consumer.poll(wait) {
                None => return,
                Some(Ok(m)) => take(
                    &mut self.parts,
                    &self.consumer,
                    &self.config,
                    &self.router,
                    &m,
                ),
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    if let Some(part) = self.parts.get_mut(&p) {
                        // Every record before the end was read.
                        part.eof = true;
                    }
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "reading the changelog; retrying");
                    return;
                }
            }
            wait = Duration::ZERO;
        }
    }

    /// Closes every restore that reached its end: a kept shard found
    /// unchanged is answered at once, a rebuilt one once its thread has
    /// finished it ([`Reader::hand_finished`]).
    fn finish_done(&mut self) {
        let done: Vec<i32> = self
            .parts
            .iter()
            .filter(|(p, part)| {
                part.restore.as_ref().is_some_and(|pending| {
                    // Transaction markers are never delivered: the position
                    // passes them when no record reaches the end.
                    part.eof
                        || self.position(**p).unwrap_or(part.next).max(part.next) >= pending.end
                })
            })
            .map(|(p, _)| *p)
            .collect();
        for p in done {
            // A shard handed over is no longer tailed: its owner writes it.
            // Should it become a standby again, it is read anew.
            self.standbys.remove(&p);
            let Some(part) = self.parts.remove(&p) else {
                continue;
            };
            self.drop_part(p);
            let Some(pending) = part.restore else {
                continue;
            };
            let shard = match (pending.known, part.shard) {
                (Some(_), _) => None,
                (None, Some(shard)) => Some(shard.close()),
                // Nothing was read for it (not expected: a shard read from
                // its beginning has a builder).
                (None, None) => Some(Closing::Done(Box::new(
                    Rebuild::new(&self.config, &self.router, p)
                        .and_then(|shard| shard.finish(&self.router, p)),
                ))),
            };
            match shard {
                Some(shard) => self.finishing.push(Finishing {
                    partition: p,
                    shard,
                    pending,
                    records: part.records,
                }),
                None => {
                    let restored = pending.answer(p, State::Unchanged, part.records);
                    let _ = self.outbox.send(Reply::Restored(restored));
                }
            }
        }
    }

    /// Answers every restore whose shard has finished.
    fn hand_finished(&mut self) -> Result<(), Error> {
        if !self.finishing.iter().any(|f| f.shard.is_done()) {
            return Ok(());
        }
        let (done, finishing): (Vec<_>, Vec<_>) = std::mem::take(&mut self.finishing)
            .into_iter()
            .partition(|f| f.shard.is_done());
        self.finishing = finishing;
        for f in done {
            let p = f.partition;
            let (driver, marks) = f
                .shard
                .wait(p)
                .map_err(|e| shard_error(&self.config, p, &e))?;
            let restored = f
                .pending
                .answer(p, State::Rebuilt(Box::new(driver), marks), f.records);
            if self.outbox.send(Reply::Restored(restored)).is_err() {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The consumer's position in changelog partition `p`.
    fn position(&self, p: i32) -> Option<i64> {
        let changelog = &self.config.kafka.topics.changelog;
        let positions = self.consumer.position().ok()?;
        let at = positions
            .find_partition(changelog, p)
            .and_then(|e| match e.offset() {
                Offset::Offset(n) => Some(n),
                _ => None,
            });
        // Dropped before the consumer (brokers.md §5).
        drop(positions);
        at
    }
}

/// Takes one changelog record into its partition's log.
fn take(
    parts: &mut BTreeMap<i32, Part>,
    consumer: &BaseConsumer<ReaderContext>,
    config: &Arc<Config>,
    router: &Router,
    m: &BorrowedMessage<'_>,
) {
    let changelog = &config.kafka.topics.changelog;
    let p = m.partition();
    let Some(part) = parts.get_mut(&p) else {
        return;
    };
    part.next = m.offset() + 1;
    part.records += 1;
    part.eof = false;
    if let Some(pending) = &mut part.restore {
        if pending.known.take().is_some() {
            // A record after the kept shard's last one: someone else
            // owned it meanwhile. Read it all again (nothing of it was
            // kept to take: a kept shard is only checked).
            part.shard = Some(Builder::start(config, router, changelog, p));
            part.next = 0;
            part.records = 0;
            let seek = consumer.seek(changelog, p, Offset::Beginning, CALL_TIMEOUT);
            if let Err(e) = seek {
                tracing::warn!(partition = p, error = %e, "rewinding a changelog partition");
            }
            return;
        }
    }
    if let Some(shard) = &mut part.shard {
        shard.push(m.offset(), m.key().unwrap_or_default(), m.payload());
    }
}

/// Shard `partition` could not be rebuilt from its changelog.
fn shard_error(config: &Config, partition: i32, e: &engine::Error) -> Error {
    Error::Topic {
        topic: config.kafka.topics.changelog.clone(),
        message: format!("partition {partition}: {e}"),
    }
}

fn record_error(topic: &str, partition: i32, source: KafkaError) -> Error {
    Error::Record {
        topic: topic.to_string(),
        partition,
        offset: -1,
        source,
    }
}
