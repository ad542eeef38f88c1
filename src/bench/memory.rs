//! Resident memory per task and per offer of the shards alone, each in a
//! process of its own, without Kafka, against the raw definition (a task's
//! TOML) or payload (an offer's JSON):
//! - tasks: the tasks workload's configuration, written to a file and read
//!   as `reactor run -c` reads one, the router, and the shards a ready
//!   instance restores;
//! - offers: the offers workload's own stages, inputs and worker answers
//!   ([`super::offers`]) driven through fresh shards by the shard driver,
//!   every output encoded as the runtime encodes it, against the JSON of
//!   the complete offer.
//!
//! The bench process's own growth would count what the rest of the run
//! left behind or freed: the in-process brokers' copy of every record
//! (8–9× an offer's JSON where the shards hold ~2.4×), and the pages the
//! loop measured before freed and a new configuration reuses (a growth of
//! nothing per task). So the bench measures both in a child ([`in_child`]);
//! `reactor bench --workload task-memory` / `offer-memory` do the same
//! alone. Run in this process under callgrind (`--in-process`), the offers
//! one also counts the runtime thread's work per offer.

use jiff::{SignedDuration, Timestamp};

use super::Error;
use crate::action::Action;
use crate::codec;
use crate::config::{Config, KafkaSettings};
use crate::engine::Input;
use crate::router::Router;
use crate::runtime::output::{self, OutRecords, OutTopics};
use crate::shell::driver::Driver;

/// What is measured per item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "lowercase")]
pub enum Item {
    /// An idle task, against its TOML.
    Task,
    /// An offer through every stage, against its JSON (body and stage states).
    Offer,
}

impl Item {
    /// The raw form it is compared with.
    fn raw_form(self) -> &'static str {
        match self {
            Item::Task => "TOML",
            Item::Offer => "JSON",
        }
    }

    /// The workload that measures it alone.
    fn workload(self) -> &'static str {
        match self {
            Item::Task => "task-memory",
            Item::Offer => "offer-memory",
        }
    }
}

/// What one measurement found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Footprint {
    /// Tasks or offers.
    pub item: Item,
    /// How many were held.
    pub items: usize,
    /// Shards they were spread over.
    pub partitions: i32,
    /// Resident bytes the shards (and, for tasks, the configuration and
    /// the router) added per item.
    pub per_item: f64,
    /// Mean bytes of an item's raw form.
    pub raw: f64,
}

/// How the line [`Footprint`] prints begins; [`Footprint::parse`] reads it back.
const LINE: &str = "memory per";

impl std::fmt::Display for Footprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let item: &str = self.item.into();
        write!(
            f,
            "{LINE} {item}: {:.0} bytes resident for {:.0} bytes of {} each ({:.2}×; {} {item}s on {} shards, no Kafka)",
            self.per_item,
            self.raw,
            self.item.raw_form(),
            self.per_item / self.raw.max(1.0),
            self.items,
            self.partitions
        )
    }
}

impl Footprint {
    /// Reads the line this type prints back (the child's answer).
    fn parse(line: &str) -> Option<Footprint> {
        let rest = line.trim().strip_prefix(LINE)?;
        let (item, rest) = rest.split_once(": ")?;
        let item: Item = item.trim().parse().ok()?;
        let (per_item, rest) = rest.split_once(" bytes resident for ")?;
        let (raw, rest) = rest.split_once(" bytes of ")?;
        let (_, rest) = rest.split_once("; ")?;
        let (items, rest) = rest.split_once(' ')?;
        let (_, rest) = rest.split_once(" on ")?;
        let (partitions, _) = rest.split_once(" shards")?;
        Some(Footprint {
            item,
            items: items.parse().ok()?,
            partitions: partitions.parse().ok()?,
            per_item: per_item.trim().parse().ok()?,
            raw: raw.trim().parse().ok()?,
        })
    }
}

/// Measures `items` of `item` in a process of its own: this binary run
/// again as `reactor bench --workload task-memory|offer-memory
/// --in-process`, with mimalloc told to give freed pages back at once
/// (`MIMALLOC_PURGE_DELAY=0`): it gives them back only when next called
/// after its delay, so memory freed before the last reading (the
/// configuration's text and its parser's) would count or not by timing
/// alone. `stages` is the offers' stages.
pub fn in_child(
    item: Item,
    items: usize,
    stages: usize,
    partitions: i32,
) -> Result<Footprint, Error> {
    let failed = |message: String| Error::Failed {
        what: format!(
            "measuring memory per {} in a process of its own",
            <&str>::from(item)
        ),
        message,
    };
    if cfg!(test) {
        // The test binary is not `reactor`: it cannot be run as one.
        return measure(item, items, stages, partitions);
    }
    let count = match item {
        Item::Task => "--tasks",
        Item::Offer => "--memory-offers",
    };
    let exe = std::env::current_exe().map_err(|e| failed(format!("this binary: {e}")))?;
    let out = std::process::Command::new(exe)
        .args(["bench", "--workload", item.workload(), "--in-process"])
        .args([count, &items.to_string()])
        .args(["--stages", &stages.to_string()])
        .args(["--partitions", &partitions.to_string()])
        .env("MIMALLOC_PURGE_DELAY", "0")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| failed(format!("starting it: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(failed(format!("it exited with {}: {stdout}", out.status)));
    }
    stdout
        .lines()
        .find_map(Footprint::parse)
        .ok_or_else(|| failed(format!("no `{LINE} …` line in its output: {stdout}")))
}

/// Measures `items` of `item` in this process, over `partitions` shards.
pub fn measure(
    item: Item,
    items: usize,
    stages: usize,
    partitions: i32,
) -> Result<Footprint, Error> {
    let failed = |message: String| Error::Failed {
        what: format!("holding {items} {}s in the shards", <&str>::from(item)),
        message,
    };
    let t0: Timestamp = "2026-01-01T00:00:00Z"
        .parse()
        .map_err(|e| failed(format!("{e}")))?;
    let shards = |config: &Config, router: &Router| {
        (0..router.partitions())
            .map(|p| {
                let mut shard =
                    Driver::restore(config, router, p, std::iter::empty(), std::iter::empty())?;
                shard.start(t0, &mut Vec::new())?;
                Ok(shard)
            })
            .collect::<Result<Vec<_>, crate::engine::Error>>()
            .map_err(|e| failed(format!("a fresh shard: {e}")))
    };
    let (before, held, raw) = match item {
        Item::Task => {
            // What a ready instance holds: the configuration as read from
            // its file, the router and the restored shards.
            let before = super::stats::resident_bytes();
            let (config, bytes) = super::tasks_config(items)?;
            let router = Router::new(&config, partitions);
            let shards = shards(&config, &router)?;
            let held = Box::new((config, router, shards)) as Box<dyn std::any::Any>;
            (before, held, bytes as f64)
        }
        Item::Offer => {
            // What the offers add, not the five stages' configuration.
            let config = super::offers::config(stages, "bench")?;
            let router = Router::new(&config, partitions);
            let mut shards = shards(&config, &router)?;
            let before = super::stats::resident_bytes();
            let runs = through(&mut shards, &router, items, t0).map_err(failed)?;
            if runs != items * stages {
                return Err(failed(format!(
                    "{runs} stage runs for {items} offers through {stages} stages: each stage must run once on each offer"
                )));
            }
            let raw = (0..items)
                .map(|i| super::offers::complete_offer_bytes(i, stages))
                .sum::<usize>();
            let held = Box::new((config, router, shards)) as Box<dyn std::any::Any>;
            (before, held, raw as f64)
        }
    };
    // Read after the allocator's purge (immediate in the child; a second
    // otherwise) and with everything measured still held.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let grown = before
        .zip(super::stats::resident_bytes())
        .map(|(b, a)| a.saturating_sub(b))
        .ok_or_else(|| failed("/proc/self/statm could not be read".into()))?;
    let per = |n: f64| n / items.max(1) as f64;
    let footprint = Footprint {
        item,
        items,
        partitions,
        per_item: per(grown as f64),
        raw: per(raw),
    };
    drop(held);
    Ok(footprint)
}

/// The offers' measured part: each offer's change decoded as the runtime
/// decodes it, each stage run answered as the bench worker answers it until
/// the offer asks for nothing more, every output encoded. Returns the stage
/// runs.
#[inline(never)]
fn through(
    shards: &mut [Driver],
    router: &Router,
    offers: usize,
    t0: Timestamp,
) -> Result<usize, String> {
    let settings = KafkaSettings::default();
    let names = OutTopics::new(&settings.topics);
    let mut encoded = OutRecords::default();
    let mut out: Vec<(Timestamp, Action)> = Vec::new();
    let mut runs = 0;
    for i in 0..offers {
        let now = t0 + SignedDuration::from_millis(i64::try_from(i).unwrap_or(i64::MAX));
        let (key, value) = super::offers::input(i);
        let change = codec::decode_offer_change(Some(key.as_bytes()), Some(&value))
            .map_err(|e| format!("offer {key}: {e}"))?;
        let partition = router.key(&key);
        let shard = usize::try_from(partition)
            .ok()
            .and_then(|p| shards.get_mut(p))
            .ok_or_else(|| format!("no shard {partition}"))?;
        shard
            .apply(Input::Offer(change), now, None, &mut out)
            .map_err(|e| format!("offer {key}: {e}"))?;
        loop {
            let run = out.iter().find_map(|(_, action)| match action {
                Action::StageRun(run) => Some(super::offers::answer(run)),
                _ => None,
            });
            output::encode(
                out.drain(..).map(|(_, a)| a),
                partition,
                &settings,
                &names,
                now,
                &mut encoded,
            );
            encoded.clear();
            let Some(result) = run else { break };
            runs += 1;
            shard
                .apply(Input::Result(result), now, None, &mut out)
                .map_err(|e| format!("a result for offer {key}: {e}"))?;
        }
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_reads_back() {
        for item in [Item::Task, Item::Offer] {
            let m = Footprint {
                item,
                items: 1000,
                partitions: 4,
                per_item: 612.0,
                raw: 154.0,
            };
            assert_eq!(Footprint::parse(&m.to_string()), Some(m), "{m}");
        }
        assert_eq!(Footprint::parse("memory per job: 1 bytes"), None);
    }

    #[test]
    fn tasks_and_offers_are_held_and_measured() {
        let m = measure(Item::Offer, 200, 5, 2).unwrap();
        assert_eq!((m.item, m.items, m.partitions), (Item::Offer, 200, 2));
        assert!(m.raw > 50.0, "{m:?}");
        let m = measure(Item::Task, 300, 5, 2).unwrap();
        assert_eq!((m.item, m.items), (Item::Task, 300));
        assert!(m.raw > 50.0, "{m:?}");
    }
}
