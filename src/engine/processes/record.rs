//! Restoring the process half of a shard: key records are the state;
//! queues, running counts and timers are derived from them.

use jiff::Timestamp;

use super::Processes;
use crate::action::Action;
use crate::changelog::{ChangelogRecord, Store};
use crate::engine::Error;
use crate::process::KeyRecord;

impl Processes {
    /// Loads one `process/<PROCESS>/<KEY>` record (`None`: a tombstone).
    /// Records of processes no longer configured are tombstoned at start.
    pub(in crate::engine) fn restore_key(&mut self, id: &str, record: Option<&KeyRecord>) {
        let Some((name, key)) = id.split_once('/') else {
            self.orphans.push((Store::Process, id.to_string()));
            return;
        };
        let Some(p) = self.proc_index(name) else {
            if record.is_some() {
                self.orphans.push((Store::Process, id.to_string()));
            } else {
                self.orphans
                    .retain(|(store, k)| !(*store == Store::Process && k == id));
            }
            return;
        };
        match record {
            Some(record) => {
                // A chain naming a job no longer configured cannot go on:
                // the instance is dropped with it (its last outcome stays).
                let mut record = record.clone();
                let broken = record.active.as_ref().is_some_and(|i| {
                    i.chain
                        .iter()
                        .any(|s| !self.job_by_name.contains_key(&s.job))
                });
                if broken {
                    record.active = None;
                    self.dirty.insert((p, key.to_string()));
                }
                self.keys.insert(p, key, record);
            }
            None => {
                self.keys.remove(p, key);
            }
        }
    }

    /// Starts the process half at `now`: tombstones orphans, arms the
    /// schedules, starts the next waiting launch of each stalled key and
    /// lets every job queue dispatch.
    pub(in crate::engine) fn start(
        &mut self,
        now: Timestamp,
        out: &mut Vec<Action>,
    ) -> Result<(), Error> {
        self.orphans.sort();
        self.orphans.dedup();
        for (store, key) in std::mem::take(&mut self.orphans) {
            out.push(Action::Changelog(ChangelogRecord {
                store,
                key: key.into(),
                value: None,
            }));
        }
        self.start_schedules(now)?;
        for (p, key) in std::mem::take(&mut self.stalled) {
            self.start_waiting(p, &key, now)?;
        }
        for j in 0..self.jobs.len() {
            self.pending.insert(super::index(j));
        }
        Ok(())
    }
}
