//! The records Reactor writes for a bench change, as the loop can write
//! them: a run command (keyed by the task id) and a changelog record per
//! change. The loop that writes them ([`super::baseline`] with a shape)
//! does Reactor's I/O and nothing else, which tells how much of the
//! distance between Reactor and the plain loop is the records the design
//! asks for (§3: a run command per run, a changelog record per mutation)
//! and how much is Reactor's own work.
//!
//! The records are Reactor's own: one bench task of each id length is fired
//! by the engine and its outputs encoded as the runtime encodes them, under
//! the topic names the instance measured ran with (a run command names its
//! reply topic). A change of task `t<i>` is then written as the records of
//! the task with an id as long: the same bytes, with `t<i>` as the keys'
//! task id, which is all that differs between them but a byte here and
//! there (the pool's name).

use jiff::{SignedDuration, Timestamp};

use crate::config::{KafkaSettings, Topics};
use crate::engine::{Engine, Input};
use crate::runtime::output::{self, OutRecords, OutTopics};

use super::{entity, Error, POOLS};

/// One record as written: its value, and its key around the task id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Key bytes before the task id.
    pub key_before: Vec<u8>,
    /// Key bytes after it.
    pub key_after: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// Written to a partition named, not picked by key (Reactor names its
    /// shard's; the loop the input's, spread over the partitions alike).
    pub own_partition: bool,
}

impl Written {
    /// Key and value bytes for a task id of the sample's length.
    pub fn bytes(&self, id_len: usize) -> usize {
        self.key_before.len() + id_len + self.key_after.len() + self.value.len()
    }

    /// The key for task `id`, written into `key` (cleared first).
    pub fn key_into(&self, id: &[u8], key: &mut Vec<u8>) {
        key.clear();
        key.extend_from_slice(&self.key_before);
        key.extend_from_slice(id);
        key.extend_from_slice(&self.key_after);
    }
}

/// What Reactor writes for a change of a task whose id has some length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The run command, to the runs topic.
    pub run: Written,
    /// The changelog record, to the changelog.
    pub changelog: Written,
}

/// Reactor's records per change, by the length of the task id.
#[derive(Debug, Clone)]
pub struct RecordShape {
    /// Index `d - 2`: ids `t` + `d - 1` digits.
    by_id_len: Vec<Change>,
}

impl RecordShape {
    /// The records Reactor writes under `topics` for changes of tasks
    /// `t0` to `t<last>`, one sample task per id length.
    pub fn of_reactor(topics: &Topics, last: usize) -> Result<RecordShape, Error> {
        let digits = last.max(1).ilog10() as usize + 1;
        let by_id_len = (1..=digits)
            .map(|d| fire(topics, sample(d)))
            .collect::<Result<_, _>>()?;
        Ok(RecordShape { by_id_len })
    }

    /// The records for task id `id` (`t<i>`), if its length was sampled.
    pub fn for_id(&self, id: &[u8]) -> Option<&Change> {
        self.by_id_len.get(id.len().checked_sub(2)?)
    }

    /// Bytes (keys and values) per change, run command and changelog
    /// record, averaged over the ids of the sampled lengths as `t0..=last`
    /// has them.
    pub fn mean_bytes(&self, last: usize) -> (f64, f64) {
        let (mut run, mut log, mut n) = (0usize, 0usize, 0usize);
        for (i, c) in self.by_id_len.iter().enumerate() {
            let digits = i + 1;
            let low = if digits == 1 {
                0
            } else {
                10usize.pow(i as u32)
            };
            let high = (10usize.pow(digits as u32) - 1).min(last);
            if high < low {
                continue;
            }
            let count = high - low + 1;
            run += count * c.run.bytes(digits + 1);
            log += count * c.changelog.bytes(digits + 1);
            n += count;
        }
        let n = n.max(1) as f64;
        (run as f64 / n, log as f64 / n)
    }
}

/// A task with a `digits`-digit number whose pool's name is two characters
/// long, as 10 of the 16 pools' are.
fn sample(digits: usize) -> usize {
    let low = if digits <= 1 {
        0
    } else {
        10usize.pow(digits as u32 - 1)
    };
    (low..).find(|i| i % POOLS < 10).unwrap_or(low)
}

/// Fires task `t<i>` (as the bench configures it) once and splits what
/// Reactor writes for it.
fn fire(topics: &Topics, i: usize) -> Result<Change, Error> {
    let failed = |message: String| Error::Failed {
        what: format!("finding the records Reactor writes for a change of t{i}"),
        message,
    };
    let mut text = String::new();
    for p in 0..POOLS {
        text.push_str(&format!("[[pool]]\nname = \"p{p}\"\n\n"));
    }
    text.push_str(&format!(
        "[[task]]\nid = \"t{i}\"\npool = \"p{}\"\ntrigger = \"delta({}/max_dt, 1min)\"\ntimeout = \"1h\"\n",
        i % POOLS,
        entity(i)
    ));
    let config = crate::config::parse(&text, "bench-shape.toml")
        .map_err(|e| failed(e.to_string()))?
        .config;
    let t0: Timestamp = "2026-01-01T00:00:00Z"
        .parse()
        .map_err(|e| failed(format!("{e}")))?;
    // A clock's reading has nanoseconds, as the runtime's `now` has.
    let now = t0 + SignedDuration::new(3_600, 456_789_123);
    let mut engine = Engine::new(&config);
    engine.start(t0).map_err(|e| failed(e.to_string()))?;
    let actions = engine
        .apply(
            Input::Ctl {
                entity: entity(i),
                param: "max_dt".into(),
                value: t0 + SignedDuration::from_secs(60),
            },
            now,
        )
        .map_err(|e| failed(e.to_string()))?;
    let settings = KafkaSettings {
        topics: topics.clone(),
        ..KafkaSettings::default()
    };
    let mut out = OutRecords::default();
    output::encode(
        actions,
        0,
        &settings,
        &OutTopics::new(topics),
        now,
        &mut out,
    );
    let id = format!("t{i}");
    let split = |topic: &str| -> Result<Written, Error> {
        let mut found = out.iter().filter(|r| r.topic == topic);
        let (Some(r), None) = (found.next(), found.next()) else {
            return Err(failed(format!("not one record to {topic}")));
        };
        let at = r
            .key
            .windows(id.len())
            .position(|w| w == id.as_bytes())
            .ok_or_else(|| failed(format!("the key of its record to {topic} names no {id}")))?;
        let (before, after) = r.key.split_at(at);
        Ok(Written {
            key_before: before.to_vec(),
            key_after: after.get(id.len()..).unwrap_or_default().to_vec(),
            value: r.payload.unwrap_or_default().to_vec(),
            own_partition: r.partition.is_some(),
        })
    };
    let change = Change {
        run: split(&topics.runs)?,
        changelog: split(&topics.changelog)?,
    };
    if out.len() != 2 {
        return Err(failed(format!("{} records, not 2", out.len())));
    }
    Ok(change)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_id_length_has_reactors_own_records() {
        let topics = KafkaSettings::default().topics;
        let shape = RecordShape::of_reactor(&topics, 123).unwrap();
        assert_eq!(shape.by_id_len.len(), 3);
        for (id, digits) in [("t7", 1), ("t42", 2), ("t123", 3)] {
            let c = shape.for_id(id.as_bytes()).unwrap();
            // The run command is keyed by the task id alone; the changelog
            // record names the task in its key.
            assert!(c.run.key_before.is_empty() && c.run.key_after.is_empty());
            assert!(!c.changelog.key_before.is_empty());
            // Each value is a record of its own kind, of the sample's id.
            let sample = format!("t{}", sample(digits));
            let run =
                <crate::proto::v1::RunCommand as prost::Message>::decode(c.run.value.as_slice())
                    .unwrap();
            assert_eq!(run.run_id, format!("{sample}#1"));
            assert_eq!(run.reply_topic, topics.results);
            assert!(c.changelog.own_partition);
        }
        assert!(shape.for_id(b"t1234").is_none());
        let (run, log) = shape.mean_bytes(123);
        assert!(run > 80.0 && log > 80.0, "{run} {log}");
    }

    #[test]
    fn samples_have_two_character_pools_and_their_digits() {
        for d in 1..=7 {
            let i = sample(d);
            assert!(i % POOLS < 10);
            assert_eq!(i.max(1).ilog10() as usize + 1, d);
        }
    }
}
