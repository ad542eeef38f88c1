//! Operations on one shard (DESIGN §8): `search` answers at once from the
//! shard's state; `recover` counts (a dry run) or restarts what it finds in
//! chunks, one chunk per tick, so live inputs always get through between
//! two chunks; what it restarts waits in the low-priority lanes (job
//! queues' low lane, stage rescan lanes, the pools' low lane), which live
//! work always passes. A recovery in progress is the changelog record
//! `recovery/<op>`; its cursor moves in the same step as the restarts it
//! covers, so a restored shard goes on after the last item it restarted.

#[cfg(test)]
mod tests;

use super::marks::Marks;
use std::collections::BTreeMap;

use jiff::Timestamp;

use super::{Engine, Error};
use crate::action::{Action, Event};
use crate::changelog::{ChangelogRecord, Store, Value};
use crate::ops::{
    source, Criteria, Item, Kind, Match, Mode, Position, Recover, RecoveryRecord, Search,
    DEFAULT_SEARCH_LIMIT,
};

/// Items a recovery restarts per chunk.
pub const RECOVERY_CHUNK: usize = 1000;
/// Items a chunk walks at most (most may not match): bounds a chunk's time
/// when matches are sparse.
const WALK_PER_CHUNK: usize = 16 * RECOVERY_CHUNK;

/// What a walk's visitor says after an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::engine) enum Flow {
    /// Go on.
    Go,
    /// Stop after this item.
    Stop,
}

/// A walk's visitor: called with every item of the kinds (and the name)
/// the criteria admit; it checks the rest of the criteria itself, so a
/// chunk can count what it walked past.
pub(in crate::engine) type Visit<'a> = dyn FnMut(&Item<'_>) -> Flow + 'a;

/// The operations of one shard: its recoveries in progress.
#[derive(Debug, Clone)]
pub(super) struct Ops {
    /// This shard's partition (what its answers say).
    partition: u32,
    recoveries: BTreeMap<String, RecoveryRecord>,
    /// Recoveries with a chunk due, and when.
    due: BTreeMap<String, Timestamp>,
    /// Recoveries changed in this step.
    dirty: Marks<String>,
    /// Events decided in this step.
    out: Vec<Action>,
    /// Items per chunk ([`RECOVERY_CHUNK`]; smaller in tests).
    chunk: usize,
}

impl Ops {
    pub(super) fn new() -> Ops {
        Ops {
            partition: 0,
            recoveries: BTreeMap::new(),
            due: BTreeMap::new(),
            dirty: Marks::default(),
            out: Vec::new(),
            chunk: RECOVERY_CHUNK,
        }
    }

    pub(super) fn set_partition(&mut self, index: u32) {
        self.partition = index;
    }

    /// Restores a `recovery/<op>` record (`None`: a tombstone).
    pub(super) fn restore(&mut self, op: &str, record: Option<&RecoveryRecord>) {
        match record {
            Some(r) => {
                self.recoveries.insert(op.to_string(), r.clone());
            }
            None => {
                self.recoveries.remove(op);
            }
        }
    }

    /// Every recovery in progress goes on at `now`.
    pub(super) fn start(&mut self, now: Timestamp) {
        self.due = self.recoveries.keys().map(|op| (op.clone(), now)).collect();
    }

    pub(super) fn next_deadline(&self) -> Option<Timestamp> {
        self.due.values().min().copied()
    }

    /// Ends a step: its events, then the records of the recoveries it changed.
    pub(super) fn finish(&mut self, out: &mut Vec<Action>) {
        out.append(&mut self.out);
        while let Some(op) = self.dirty.pop_first() {
            out.push(Action::Changelog(ChangelogRecord {
                store: Store::Recovery,
                value: self
                    .recoveries
                    .get(&op)
                    .map(|r| Value::Recovery(Box::new(r.clone()))),
                key: op.into(),
            }));
        }
    }

    pub(super) fn abandon(&mut self) {
        self.out.clear();
        self.dirty.clear();
    }

    pub(super) fn snapshot(&self) -> Vec<ChangelogRecord> {
        self.recoveries
            .iter()
            .map(|(op, r)| ChangelogRecord {
                store: Store::Recovery,
                key: op.as_str().into(),
                value: Some(Value::Recovery(Box::new(r.clone()))),
            })
            .collect()
    }

    fn emit(&mut self, event: Event) {
        self.out.push(Action::Event(event));
    }

    fn progress(&mut self, op: &str, r: &RecoveryRecord, finished: bool, cancelled: bool) {
        self.emit(Event::RecoveryProgress {
            op: op.to_string(),
            partition: self.partition,
            done: r.done,
            total: r.total,
            finished,
            cancelled,
        });
    }

    /// Sets the items per chunk (tests walk small shards in several chunks).
    #[cfg(test)]
    pub(super) fn set_chunk(&mut self, n: usize) {
        self.chunk = n.max(1);
    }
}

impl Engine {
    /// Walks the shard's items after `after` (tasks, stage slots, process
    /// keys), calling `f` with each one matching `criteria` until it says
    /// stop; returns whether it did.
    fn walk(
        &self,
        criteria: &Criteria,
        mode: Option<&Mode>,
        after: Option<&Position>,
        f: &mut Visit<'_>,
    ) -> bool {
        let tasks_after = match after {
            None => None,
            Some(Position::Task(id)) => Some(id.as_str()),
            Some(_) => {
                return self.walk_offers(criteria, mode, after, f);
            }
        };
        self.tasks.op_walk(criteria, mode, tasks_after, f)
            || self.walk_offers(criteria, mode, None, f)
    }

    fn walk_offers(
        &self,
        criteria: &Criteria,
        mode: Option<&Mode>,
        after: Option<&Position>,
        f: &mut Visit<'_>,
    ) -> bool {
        let offers_after = match after {
            None => None,
            Some(Position::Stage(offer, stage)) => Some((offer.as_str(), stage.as_str())),
            Some(Position::Key(process, key)) => {
                return self.processes.op_walk(
                    criteria,
                    mode,
                    Some((process.as_str(), key.as_str())),
                    f,
                )
            }
            Some(Position::Task(_)) => None,
        };
        self.offers.op_walk(criteria, mode, offers_after, f)
            || self.processes.op_walk(criteria, mode, None, f)
    }

    /// The shard's items matching `criteria`: how many, and the first
    /// `limit` of them in walk order (tasks, stage slots, process keys).
    pub fn find(&self, criteria: &Criteria, limit: usize) -> (u64, Vec<Match>) {
        let mut total = 0u64;
        let mut matches = Vec::new();
        self.walk(criteria, None, None, &mut |item| {
            if criteria.matches(item) {
                total += 1;
                if matches.len() < limit {
                    matches.push(Match::from(item));
                }
            }
            Flow::Go
        });
        (total, matches)
    }

    /// Answers a search: the shard's matches (up to the limit) and their count.
    pub(super) fn search(&mut self, s: Search) {
        let limit = s.limit.unwrap_or(DEFAULT_SEARCH_LIMIT) as usize;
        let (total, matches) = self.find(&s.criteria, limit);
        let partition = self.ops.partition;
        self.ops.emit(Event::SearchResult {
            op: s.id,
            partition,
            total,
            matches,
        });
    }

    /// How many items `criteria` finds that `mode` can restart.
    fn count(&self, criteria: &Criteria, mode: &Mode) -> u64 {
        let mut n = 0u64;
        self.walk(criteria, Some(mode), None, &mut |item| {
            if item.recoverable && criteria.matches(item) {
                n += 1;
            }
            Flow::Go
        });
        n
    }

    /// A recovery command: a dry run counts; a real one starts (its first
    /// chunk runs at the next tick, at `now`).
    pub(super) fn recover(&mut self, r: Recover, now: Timestamp) {
        let total = self.count(&r.criteria, &r.mode);
        if r.dry_run {
            let partition = self.ops.partition;
            self.ops.emit(Event::RecoveryCounted {
                op: r.id,
                partition,
                total,
            });
            return;
        }
        if self.ops.recoveries.contains_key(&r.id) {
            // The same operation again (a command sent twice): it goes on.
            return;
        }
        let record = RecoveryRecord {
            criteria: r.criteria,
            mode: r.mode,
            cursor: None,
            done: 0,
            total,
            started_at: now,
        };
        self.ops.progress(&r.id, &record, false, false);
        self.ops.recoveries.insert(r.id.clone(), record);
        self.ops.dirty.insert(r.id.clone());
        self.ops.due.insert(r.id, now);
    }

    /// Stops a recovery in progress; what it restarted so far goes on.
    pub(super) fn cancel_operation(&mut self, id: &str) {
        let Some(record) = self.ops.recoveries.remove(id) else {
            return;
        };
        self.ops.due.remove(id);
        self.ops.dirty.insert(id.to_string());
        self.ops.progress(id, &record, true, true);
    }

    /// Runs the chunk of the first recovery due at `now`, if any: one per
    /// tick, so inputs that wait get their turn between two chunks.
    pub(super) fn recovery_tick(&mut self, now: Timestamp) -> Result<(), Error> {
        let Some(op) = self
            .ops
            .due
            .iter()
            .filter(|(_, at)| **at <= now)
            .min_by_key(|(op, at)| (**at, (*op).clone()))
            .map(|(op, _)| op.clone())
        else {
            return Ok(());
        };
        self.ops.due.remove(&op);
        self.recovery_chunk(&op, now)
    }

    fn recovery_chunk(&mut self, op: &str, now: Timestamp) -> Result<(), Error> {
        let Some(record) = self.ops.recoveries.get(op).cloned() else {
            return Ok(());
        };
        let chunk = self.ops.chunk;
        let mut picked: Vec<Position> = Vec::new();
        let mut walked = 0usize;
        let mut cursor: Option<Position> = None;
        let criteria = &record.criteria;
        let stopped = self.walk(
            criteria,
            Some(&record.mode),
            record.cursor.as_ref(),
            &mut |item| {
                walked += 1;
                if item.recoverable && criteria.matches(item) {
                    picked.push(position(item));
                }
                if picked.len() >= chunk || walked >= WALK_PER_CHUNK {
                    cursor = Some(position(item));
                    Flow::Stop
                } else {
                    Flow::Go
                }
            },
        );
        let source = source(op);
        let mut done = 0u64;
        for p in &picked {
            let restarted = match p {
                Position::Task(id) => self.tasks.recover(id, &record.mode, &source, now)?,
                Position::Stage(offer, stage) => {
                    self.offers
                        .recover(offer, stage, &record.mode, &source, now)?
                }
                Position::Key(process, key) => {
                    self.processes
                        .recover(process, key, &record.mode, &source, now)?
                }
            };
            done += u64::from(restarted);
        }
        let mut record = record;
        record.done += done;
        record.total = record.total.max(record.done);
        if stopped {
            record.cursor = cursor;
            self.ops.progress(op, &record, false, false);
            self.ops.recoveries.insert(op.to_string(), record);
            self.ops.due.insert(op.to_string(), now);
        } else {
            self.ops.progress(op, &record, true, false);
            self.ops.recoveries.remove(op);
        }
        self.ops.dirty.insert(op.to_string());
        Ok(())
    }
}

/// Where an item is in the walk.
fn position(item: &Item<'_>) -> Position {
    match item.kind {
        Kind::Task => Position::Task(item.name.to_string()),
        Kind::Stage => Position::Stage(item.key.to_string(), item.name.to_string()),
        Kind::Process => Position::Key(item.name.to_string(), item.key.to_string()),
    }
}
