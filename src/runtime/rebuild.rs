//! One shard rebuilt from its changelog partition as the records are read
//! (the restorer's per-record work, without Kafka): each record taken in
//! offset order, the last of a key replacing the ones before, so that the
//! shard holds what the compacted partition holds, with no copy of the
//! records (decoded once, held once).

use std::collections::BTreeMap;

use crate::codec::{self, DecodeError};
use crate::config::Config;
use crate::engine::{self, Engine};
use crate::router::Router;
use crate::shell::driver::Driver;

/// A shard being rebuilt.
pub struct Rebuild {
    engine: Engine,
    /// CTL dead-letter marks (the runtime's own records).
    marks: BTreeMap<i32, i64>,
    /// Records the engine refused, by changelog key, until a later record
    /// of the key replaces them (compaction would drop them): a rebuild
    /// that ends with any fails with it.
    refused: BTreeMap<Vec<u8>, engine::Error>,
}

impl Rebuild {
    /// Shard `partition` of `router`, nothing read yet.
    pub fn new(config: &Config, router: &Router, partition: i32) -> Result<Rebuild, engine::Error> {
        Ok(Rebuild {
            engine: Driver::empty_shard(config, router, partition)?,
            marks: BTreeMap::new(),
            refused: BTreeMap::new(),
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
        let record = codec::decode_changelog(key, payload)?;
        // The bytes go along: a shard keeps an idle offer as them.
        match self.engine.restore_record(record, payload) {
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
