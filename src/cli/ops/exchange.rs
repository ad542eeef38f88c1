//! The scatter-gather of an operation: one command to every partition of
//! the commands topic, and one answer per partition read back from the
//! events topic, with the partitions that did not answer in time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::{Message, Offset, TopicPartitionList};

use crate::action::Event;
use crate::cli::tools::partition_count;
use crate::codec::{self, validate, Format};
use crate::engine::Command;
use crate::kafka::Clients;
use crate::ops::{Match, Recover, Search};

/// One command to every partition of the commands topic, and the answers
/// read back from the events topic.
pub struct Exchange {
    clients: Clients,
    commands: String,
    format: Format,
    /// Partitions of the commands topic: one answer each is expected.
    partitions: u32,
    /// Reads the events topic from where it ended before the commands went.
    reader: BaseConsumer,
}

impl Exchange {
    /// Looks up the partitions and positions a `read_committed` reader at
    /// the end of every partition of `events` (its high watermarks, read
    /// before anything is sent, so no answer can be missed).
    pub fn new(clients: &Clients, commands: &str, events: &str) -> Result<Exchange, String> {
        let partitions = u32::try_from(partition_count(clients, commands)?).unwrap_or(0);
        let mut config = clients.reader();
        config.set("enable.partition.eof", "false");
        let reader: BaseConsumer = config
            .create()
            .map_err(|e| format!("creating a reader: {e}"))?;
        let mut tpl = TopicPartitionList::new();
        for p in 0..partition_count(clients, events)? {
            let (_, high) = reader
                .fetch_watermarks(events, p, Duration::from_secs(10))
                .map_err(|e| format!("offsets of {events} partition {p}: {e}"))?;
            tpl.add_partition_offset(events, p, Offset::Offset(high))
                .map_err(|e| format!("{e}"))?;
        }
        reader.assign(&tpl).map_err(|e| format!("{e}"))?;
        Ok(Exchange {
            clients: clients.clone(),
            commands: commands.to_string(),
            format: Format::Protobuf,
            partitions,
            reader,
        })
    }

    /// Partitions that answer.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// Sends `command` (validated as Reactor will) to every partition,
    /// keyed by `key`, and waits until each is acknowledged.
    pub fn send(&self, command: &Command, key: &str) -> Result<(), String> {
        let command = validate::command(command.clone()).map_err(|e| e.to_string())?;
        let payload = codec::encode_command(&command, self.format);
        let producer: ThreadedProducer<_> = self
            .clients
            .producer(None)
            .create()
            .map_err(|e| format!("creating a producer: {e}"))?;
        for p in 0..self.partitions {
            let record = BaseRecord::to(&self.commands)
                .partition(p as i32)
                .key(key)
                .payload(&payload);
            producer
                .send(record)
                .map_err(|(e, _)| format!("producing to {}: {e}", self.commands))?;
        }
        producer
            .flush(Duration::from_secs(30))
            .map_err(|e| format!("producing to {}: {e}", self.commands))
    }

    /// The next event on the events topic, waiting at most `wait`.
    /// Records that are not events are skipped.
    pub fn next_event(&self, wait: Duration) -> Option<Event> {
        let until = Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.reader.poll(left.min(Duration::from_millis(200))) {
                Some(Ok(m)) => {
                    if let Some(Ok((event, _))) = m.payload().map(codec::decode_event) {
                        return Some(event);
                    }
                }
                Some(Err(e)) => tracing::debug!(error = %e, "reading events"),
                None => {}
            }
            if Instant::now() >= until {
                return None;
            }
        }
    }

    /// Gathers one answer per partition picked by `answer` (its partition
    /// and value) until all came or `timeout` passed; `seen` is called with
    /// the count after each.
    pub fn gather<T>(
        &self,
        timeout: Duration,
        mut answer: impl FnMut(Event) -> Option<(u32, T)>,
        seen: &mut dyn FnMut(usize, u32),
    ) -> Gathered<T> {
        let until = Instant::now() + timeout;
        let mut answers = BTreeMap::new();
        while (answers.len() as u32) < self.partitions {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let Some(event) = self.next_event(left) else {
                continue;
            };
            if let Some((p, value)) = answer(event) {
                if p < self.partitions && !answers.contains_key(&p) {
                    answers.insert(p, value);
                    seen(answers.len(), self.partitions);
                }
            }
        }
        let missing = (0..self.partitions)
            .filter(|p| !answers.contains_key(p))
            .collect();
        Gathered { answers, missing }
    }

    /// Runs a search: one `search_result` per partition.
    pub fn search(
        &self,
        search: Search,
        timeout: Duration,
        seen: &mut dyn FnMut(usize, u32),
    ) -> Result<Gathered<(u64, Vec<Match>)>, String> {
        let op = search.id.clone();
        self.send(&Command::Search(search), &op)?;
        Ok(self.gather(
            timeout,
            |e| match e {
                Event::SearchResult {
                    op: o,
                    partition,
                    total,
                    matches,
                } if o == op => Some((partition, (total, matches))),
                _ => None,
            },
            seen,
        ))
    }

    /// Runs a dry-run recovery: one `recovery_counted` per partition.
    pub fn count(
        &self,
        recover: Recover,
        timeout: Duration,
        seen: &mut dyn FnMut(usize, u32),
    ) -> Result<Gathered<u64>, String> {
        let op = recover.id.clone();
        self.send(
            &Command::Recover(Recover {
                dry_run: true,
                ..recover
            }),
            &op,
        )?;
        Ok(self.gather(
            timeout,
            |e| match e {
                Event::RecoveryCounted {
                    op: o,
                    partition,
                    total,
                } if o == op => Some((partition, total)),
                _ => None,
            },
            seen,
        ))
    }

    /// Follows a recovery's `recovery_progress` until every partition
    /// finished, or none reported for `quiet`; `seen` gets the latest of
    /// each partition after every report.
    pub fn follow(
        &self,
        op: &str,
        quiet: Duration,
        seen: &mut dyn FnMut(&BTreeMap<u32, Progress>),
    ) -> Gathered<Progress> {
        let mut latest: BTreeMap<u32, Progress> = BTreeMap::new();
        let mut last = Instant::now();
        let finished = |latest: &BTreeMap<u32, Progress>| {
            latest.values().filter(|p| p.finished).count() as u32
        };
        while finished(&latest) < self.partitions && last.elapsed() < quiet {
            let left = quiet.saturating_sub(last.elapsed());
            let Some(Event::RecoveryProgress {
                op: o,
                partition,
                done,
                total,
                finished,
                cancelled,
            }) = self.next_event(left)
            else {
                continue;
            };
            if o != op || partition >= self.partitions {
                continue;
            }
            last = Instant::now();
            let p = latest.entry(partition).or_default();
            // Reports of one partition come in order; a redelivered older
            // one must not take progress back.
            if done >= p.done || finished {
                *p = Progress {
                    done,
                    total,
                    finished: finished || p.finished,
                    cancelled: cancelled || p.cancelled,
                };
            }
            seen(&latest);
        }
        let missing = (0..self.partitions)
            .filter(|p| !latest.get(p).is_some_and(|x| x.finished))
            .collect();
        Gathered {
            answers: latest,
            missing,
        }
    }
}

/// What the partitions answered, and which did not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gathered<T> {
    /// Partition → its answer.
    pub answers: BTreeMap<u32, T>,
    /// Partitions without an answer in time (for `follow`: not finished).
    pub missing: Vec<u32>,
}

/// A recovery's progress on one partition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Items restarted so far.
    pub done: u64,
    /// Items it expected.
    pub total: u64,
    /// No more reports come.
    pub finished: bool,
    /// Stopped by an operator.
    pub cancelled: bool,
}
