//! One shard rebuilt from its changelog partition as the records are read
//! (the restorer's per-record work, without Kafka): each record taken in
//! offset order, the last of a key replacing the ones before, so that the
//! shard holds what the compacted partition holds, with no copy of the
//! records kept (decoded once, held once). [`Unapplied`] holds the records
//! of one poll until its shard takes them; a [`Builder`] rebuilds a shard on
//! a thread of its own, so that the reader reads on while shards rebuild.

use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::changelog::Store;
use crate::codec::{self, DecodeError};
use crate::config::Config;
use crate::engine::{self, Engine};
use crate::router::Router;
use crate::shell::driver::Driver;
use crate::task::{InPlace, InPlaceValue};

/// A shard being rebuilt.
pub struct Rebuild {
    engine: Engine,
    /// CTL dead-letter marks (the runtime's own records).
    marks: BTreeMap<i32, i64>,
    /// Records the engine refused, by changelog key, until a later record
    /// of the key replaces them (compaction would drop them): a rebuild
    /// that ends with any fails with it.
    refused: BTreeMap<Vec<u8>, engine::Error>,
    /// The parameter values of the task record being taken, read in place
    /// (a list kept for the next record).
    values: Vec<InPlaceValue>,
}

impl Rebuild {
    /// Shard `partition` of `router`, nothing read yet.
    pub fn new(config: &Config, router: &Router, partition: i32) -> Result<Rebuild, engine::Error> {
        Ok(Rebuild {
            engine: Driver::empty_shard(config, router, partition)?,
            marks: BTreeMap::new(),
            refused: BTreeMap::new(),
            values: Vec::new(),
        })
    }

    /// Takes the next changelog record. One this version cannot read is
    /// refused here (the caller skips it, loudly: the rest of the shard is
    /// still worth serving); one the shard refuses fails the rebuild unless
    /// a later record of its key replaces it.
    pub fn take(&mut self, key: &[u8], payload: Option<&[u8]>) -> Result<(), DecodeError> {
        if let Some(mark) = codec::decode_ctl_dead_mark(key, payload) {
            match mark? {
                (q, Some(offset)) => self.marks.insert(q, offset),
                (q, None) => self.marks.remove(&q),
            };
            return Ok(());
        }
        let restored = match codec::read_changelog_key(key)? {
            (Store::Task, id) => match payload {
                Some(bytes) => {
                    let record = codec::read_task_record(bytes, &mut self.values)?;
                    let placed = InPlace {
                        bytes,
                        values: &self.values,
                    };
                    self.engine.restore_task_in_place(id, record, placed)
                }
                None => self.engine.restore_task(id, None),
            },
            // The bytes go along: a shard keeps an idle offer as them.
            _ => self
                .engine
                .restore_record(codec::decode_changelog(key, payload)?, payload),
        };
        match restored {
            Ok(()) => {
                if !self.refused.is_empty() {
                    self.refused.remove(key);
                }
            }
            Err(e) => {
                self.refused.insert(key.to_vec(), e);
            }
        }
        Ok(())
    }

    /// The shard, shard `partition` of `router` (CTL table not loaded, not
    /// started), and its CTL dead-letter marks.
    pub fn finish(
        self,
        router: &Router,
        partition: i32,
    ) -> Result<(Driver, BTreeMap<i32, i64>), engine::Error> {
        if let Some(e) = self.refused.into_values().next() {
            return Err(e);
        }
        let driver = Driver::restored(router, partition, self.engine, std::iter::empty())?;
        Ok((driver, self.marks))
    }
}

/// Records read for a shard and not yet taken into it: the reader copies
/// them out of librdkafka as it polls and hands them to the shard's
/// [`Builder`], so that restoring several shards uses every core.
#[derive(Default)]
pub(super) struct Unapplied {
    /// Each record's key, then its value, back to back.
    bytes: Vec<u8>,
    /// Each record's offset, where its key ends and where its value ends
    /// (none: a tombstone); a key starts where the record before ended.
    records: Vec<(i64, usize, Option<usize>)>,
}

impl Unapplied {
    pub(super) fn push(&mut self, offset: i64, key: &[u8], value: Option<&[u8]>) {
        self.bytes.extend_from_slice(key);
        let key_end = self.bytes.len();
        let value_end = value.map(|v| {
            self.bytes.extend_from_slice(v);
            self.bytes.len()
        });
        self.records.push((offset, key_end, value_end));
    }

    /// Whether nothing waits.
    pub(super) fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.bytes.clear();
        self.records.clear();
    }

    /// Each record as pushed: offset, key, value.
    pub(super) fn iter(&self) -> impl Iterator<Item = (i64, &[u8], Option<&[u8]>)> + '_ {
        let mut start = 0;
        self.records
            .iter()
            .map(move |&(offset, key_end, value_end)| {
                let key = self.bytes.get(start..key_end).unwrap_or_default();
                let value = value_end.map(|end| self.bytes.get(key_end..end).unwrap_or_default());
                start = value_end.unwrap_or(key_end);
                (offset, key, value)
            })
    }

    /// Takes every record into `shard`, in the order read.
    pub(super) fn apply(&mut self, shard: &mut Rebuild, topic: &str, partition: i32) {
        for (offset, key, value) in self.iter() {
            if let Err(e) = shard.take(key, value) {
                crate::metrics::ChangelogRecordSkipped {
                    topic,
                    partition,
                    offset,
                    error: &e,
                }
                .emit();
            }
        }
        self.clear();
    }
}

/// A shard rebuilt on a thread of its own from the records the reader
/// hands it, a poll's worth at a time: the reader polls the next records
/// while the shards take the last ones (its empty engine is built there
/// too). With no thread to spare, it rebuilds on the reader's thread.
pub(super) struct Builder {
    /// Records read since the last hand-over.
    read: Unapplied,
    at: Place,
    /// The changelog topic and the shard's partition (for its logs).
    topic: String,
    partition: i32,
}

enum Place {
    /// On a thread of its own; `spare` gives back emptied buffers.
    Thread {
        batches: SyncSender<Unapplied>,
        spare: Receiver<Unapplied>,
        thread: JoinHandle<Result<Finished, engine::Error>>,
    },
    /// On the reader's thread.
    Here(Box<Result<Rebuild, engine::Error>>, Router),
}

/// A rebuilt shard's driver and its CTL dead-letter marks.
pub(super) type Finished = (Driver, BTreeMap<i32, i64>);

impl Builder {
    /// Starts rebuilding shard `partition` of changelog `topic`.
    pub(super) fn start(
        config: &Arc<Config>,
        router: &Router,
        topic: &str,
        partition: i32,
    ) -> Builder {
        // One batch waiting beside the one being taken: the reader runs at
        // most that far ahead of a shard.
        let (batches, inbox) = mpsc::sync_channel::<Unapplied>(1);
        let (give_back, spare) = mpsc::channel();
        let (config_, router_, topic_) = (Arc::clone(config), router.clone(), topic.to_string());
        let spawned = std::thread::Builder::new()
            .name("reactor-rebuild".into())
            .stack_size(super::supervisor::RUNTIME_STACK)
            .spawn(move || {
                let mut shard = Rebuild::new(&config_, &router_, partition)?;
                for mut batch in inbox {
                    batch.apply(&mut shard, &topic_, partition);
                    let _ = give_back.send(batch);
                }
                // Finished here too: the shards restored together finish together.
                shard.finish(&router_, partition)
            });
        let at = match spawned {
            Ok(thread) => Place::Thread {
                batches,
                spare,
                thread,
            },
            Err(e) => {
                tracing::warn!(partition, error = %e, "rebuilding a shard on the reader's thread");
                Place::Here(
                    Box::new(Rebuild::new(config, router, partition)),
                    router.clone(),
                )
            }
        };
        Builder {
            read: Unapplied::default(),
            at,
            topic: topic.to_string(),
            partition,
        }
    }

    /// Keeps one record read, until [`Builder::hand_over`].
    pub(super) fn push(&mut self, offset: i64, key: &[u8], value: Option<&[u8]>) {
        self.read.push(offset, key, value);
    }

    /// Hands the records read so far to the shard.
    pub(super) fn hand_over(&mut self) {
        if self.read.is_empty() {
            return;
        }
        match &mut self.at {
            Place::Thread { batches, spare, .. } => {
                let next = spare.try_recv().unwrap_or_default();
                let batch = std::mem::replace(&mut self.read, next);
                if let Err(mpsc::SendError(mut batch)) = batches.send(batch) {
                    // The thread is gone (it failed): `finish` says why.
                    batch.clear();
                    self.read = batch;
                }
            }
            Place::Here(shard, _) => match shard.as_mut() {
                Ok(shard) => self.read.apply(shard, &self.topic, self.partition),
                Err(_) => self.read.clear(),
            },
        }
    }

    /// Hands over what is left and lets the shard finish on its thread:
    /// the reader goes on reading the other shards meanwhile (waiting for
    /// one shard's thread held every other shard's restore up behind it).
    pub(super) fn close(mut self) -> Closing {
        self.hand_over();
        let partition = self.partition;
        match self.at {
            Place::Thread {
                batches, thread, ..
            } => {
                // Closing the channel ends the thread once it took the rest.
                drop(batches);
                Closing::Thread(thread)
            }
            Place::Here(shard, router) => Closing::Done(Box::new(
                (*shard).and_then(|shard| shard.finish(&router, partition)),
            )),
        }
    }
}

/// A shard given every record, finishing.
pub(super) enum Closing {
    /// On its thread.
    Thread(JoinHandle<Result<Finished, engine::Error>>),
    /// Finished on the reader's thread.
    Done(Box<Result<Finished, engine::Error>>),
}

impl Closing {
    /// Whether [`Closing::wait`] returns at once.
    pub(super) fn is_done(&self) -> bool {
        match self {
            Closing::Thread(thread) => thread.is_finished(),
            Closing::Done(_) => true,
        }
    }

    /// The finished shard `partition`.
    pub(super) fn wait(self, partition: i32) -> Result<Finished, engine::Error> {
        match self {
            Closing::Thread(thread) => thread.join().unwrap_or_else(|_| {
                Err(engine::Error::Invariant(format!(
                    "the thread rebuilding shard {partition} failed"
                )))
            }),
            Closing::Done(finished) => *finished,
        }
    }
}

#[cfg(test)]
mod tests {
    use jiff::{SignedDuration, Timestamp};

    use super::*;
    use crate::engine::Input;

    /// A record as read: offset, key, value.
    type Read<'a> = (i64, &'a [u8], Option<&'a [u8]>);

    #[test]
    fn records_read_come_back_as_pushed() {
        let mut read = Unapplied::default();
        let records: [Read<'_>; 4] = [
            (7, b"task/a", Some(b"one")),
            (8, b"task/b", None),
            (9, b"", Some(b"")),
            (12, b"task/a", Some(b"two")),
        ];
        for (offset, key, value) in records {
            read.push(offset, key, value);
        }
        assert_eq!(read.iter().collect::<Vec<_>>(), records);
        read.clear();
        assert_eq!(read.iter().count(), 0);
    }

    /// Tasks over eight pools, each firing on its own parameter.
    fn config() -> Config {
        let mut text = String::new();
        for pool in 0..8 {
            text.push_str(&format!("[[pool]]\nname = \"p{pool}\"\n"));
        }
        for i in 0..40 {
            text.push_str(&format!(
                "[[task]]\nid = \"t{i}\"\npool = \"p{}\"\ntrigger = \"delta(e{i}/x, 1min)\"\ntimeout = \"1h\"\n",
                i % 8
            ));
        }
        crate::config::parse(&text, "builder.toml").unwrap().config
    }

    /// A shard rebuilt on its own thread from batches handed over as they
    /// were read holds what the same records taken one by one make.
    #[test]
    fn a_shard_built_on_its_thread_is_the_shard_built_here() {
        let config = Arc::new(config());
        let router = Router::new(&config, 2);
        let t0: Timestamp = "2024-06-01T00:00:00Z".parse().unwrap();
        let mut engine = Engine::new(&config);
        engine.start(t0).unwrap();
        // Each fired, half of them twice: the later record of a key wins.
        for round in 0..2 {
            for i in (0..40).filter(|i| round == 0 || i % 2 == 0) {
                let input = Input::Ctl {
                    entity: format!("e{i}"),
                    param: "x".into(),
                    value: t0 + SignedDuration::from_mins(i + 10 * round),
                };
                engine
                    .apply(input, t0 + SignedDuration::from_hours(1))
                    .unwrap();
            }
        }
        let topic = "changelog";
        for p in 0..2 {
            let records: Vec<_> = engine
                .snapshot()
                .into_iter()
                .filter(|r| router.task(&r.key) == Some(p))
                .map(crate::codec::encode_changelog)
                .collect();
            assert!(records.len() > 5, "{} records in shard {p}", records.len());
            let mut here = Rebuild::new(&config, &router, p).unwrap();
            let mut there = Builder::start(&config, &router, topic, p);
            for (offset, (key, value)) in records.iter().enumerate() {
                here.take(key, value.as_deref()).unwrap();
                there.push(offset as i64, key, value.as_deref());
                if offset % 3 == 0 {
                    there.hand_over();
                }
            }
            let (here, _) = here.finish(&router, p).unwrap();
            let (there, _) = there.close().wait(p).unwrap();
            assert_eq!(there.engine().snapshot(), here.engine().snapshot());
            assert_eq!(
                here.engine().snapshot().len(),
                records.len(),
                "every record of shard {p} taken"
            );
        }
    }
}
