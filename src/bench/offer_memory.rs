//! Resident memory per offer of the shards alone: the offers workload's own
//! stages, inputs and worker answers ([`super::offers`]) driven through
//! fresh shards by the shard driver, without Kafka, every output encoded as
//! the runtime encodes it; the growth is read against the JSON of a
//! complete offer.
//!
//! The offers workload's own figure would be the bench process's growth
//! during its burst, which holds the in-process brokers' copy of every
//! record and the harness's marks beside the instance (8–9× the JSON where
//! the shards hold ~2.3×), so the bench measures this in a process of its
//! own ([`in_child`]), as an instance would run: `reactor bench --workload
//! offer-memory` does the same alone. Run in this process under callgrind
//! (`--in-process`), it also counts the runtime thread's work per offer.

use jiff::{SignedDuration, Timestamp};

use super::Error;
use crate::action::Action;
use crate::codec;
use crate::config::KafkaSettings;
use crate::engine::Input;
use crate::router::Router;
use crate::runtime::output::{self, OutRecords, OutTopics};
use crate::shell::driver::Driver;

/// What one measurement found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OfferMemory {
    /// Offers that went through every stage.
    pub offers: usize,
    /// Stages per offer.
    pub stages: usize,
    /// Shards the offers were spread over.
    pub partitions: i32,
    /// Resident bytes the shards added per offer.
    pub per_offer: f64,
    /// Mean bytes of the JSON of a complete offer (body and stage states).
    pub raw: f64,
}

/// How the line [`OfferMemory`] prints begins; [`OfferMemory::parse`] reads it back.
const LINE: &str = "memory per offer:";

impl std::fmt::Display for OfferMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{LINE} {:.0} bytes resident in the shards for {:.0} bytes of JSON each ({:.2}×; {} offers through {} stages on {} shards, no Kafka)",
            self.per_offer,
            self.raw,
            self.per_offer / self.raw.max(1.0),
            self.offers,
            self.stages,
            self.partitions
        )
    }
}

impl OfferMemory {
    /// Reads the line this type prints back (the child's answer).
    fn parse(line: &str) -> Option<OfferMemory> {
        let number = |s: &str| s.trim().parse::<f64>().ok();
        let rest = line.trim().strip_prefix(LINE)?;
        let (per_offer, rest) = rest.split_once(" bytes resident in the shards for ")?;
        let (raw, rest) = rest.split_once(" bytes of JSON each (")?;
        let (_, rest) = rest.split_once("; ")?;
        let (offers, rest) = rest.split_once(" offers through ")?;
        let (stages, rest) = rest.split_once(" stages on ")?;
        let (partitions, _) = rest.split_once(" shards")?;
        Some(OfferMemory {
            offers: offers.trim().parse().ok()?,
            stages: stages.trim().parse().ok()?,
            partitions: partitions.trim().parse().ok()?,
            per_offer: number(per_offer)?,
            raw: number(raw)?,
        })
    }
}

/// Measures in a process of its own: this binary run again as `reactor
/// bench --workload offer-memory --in-process`, with mimalloc told to give
/// freed pages back at once (`MIMALLOC_PURGE_DELAY=0`): it gives them back
/// only when next called after its delay, so memory freed before the last
/// reading would count or not by timing alone.
pub fn in_child(offers: usize, stages: usize, partitions: i32) -> Result<OfferMemory, Error> {
    let failed = |message: String| Error::Failed {
        what: "measuring memory per offer in a process of its own".into(),
        message,
    };
    if cfg!(test) {
        // The test binary is not `reactor`: it cannot be run as one.
        return measure(offers, stages, partitions);
    }
    let exe = std::env::current_exe().map_err(|e| failed(format!("this binary: {e}")))?;
    let out = std::process::Command::new(exe)
        .args(["bench", "--workload", "offer-memory", "--in-process"])
        .args(["--memory-offers", &offers.to_string()])
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
        .find_map(OfferMemory::parse)
        .ok_or_else(|| failed(format!("no `{LINE}` line in its output: {stdout}")))
}

/// Measures in this process: `offers` offers through `stages` stages over
/// `partitions` fresh shards.
pub fn measure(offers: usize, stages: usize, partitions: i32) -> Result<OfferMemory, Error> {
    let failed = |message: String| Error::Failed {
        what: "driving offers through the shards".into(),
        message,
    };
    let config = super::offers::config(stages, "bench")?;
    let router = Router::new(&config, partitions);
    let t0: Timestamp = "2026-01-01T00:00:00Z"
        .parse()
        .map_err(|e| failed(format!("{e}")))?;
    let mut shards = (0..router.partitions())
        .map(|p| {
            let mut shard =
                Driver::restore(&config, &router, p, std::iter::empty(), std::iter::empty())?;
            shard.start(t0, &mut Vec::new())?;
            Ok(shard)
        })
        .collect::<Result<Vec<_>, crate::engine::Error>>()
        .map_err(|e| failed(format!("a fresh shard: {e}")))?;
    let before = super::stats::resident_bytes();
    let runs = through(&mut shards, &router, offers, t0).map_err(failed)?;
    if runs != offers * stages {
        return Err(failed(format!(
            "{runs} stage runs for {offers} offers through {stages} stages: each stage must run once on each offer"
        )));
    }
    // Read after the allocator's purge (immediate in the child; a second
    // otherwise) and with the shards still held.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let grown = before
        .zip(super::stats::resident_bytes())
        .map(|(b, a)| a.saturating_sub(b))
        .ok_or_else(|| failed("/proc/self/statm could not be read".into()))?;
    let memory = OfferMemory {
        offers,
        stages,
        partitions,
        per_offer: grown as f64 / offers.max(1) as f64,
        raw: (0..offers)
            .map(|i| super::offers::complete_offer_bytes(i, stages))
            .sum::<usize>() as f64
            / offers.max(1) as f64,
    };
    drop((shards, router, config));
    Ok(memory)
}

/// The measured part: each offer's change decoded as the runtime decodes
/// it, each stage run answered as the bench worker answers it until the
/// offer asks for nothing more, every output encoded. Returns the stage runs.
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
        let m = OfferMemory {
            offers: 1000,
            stages: 5,
            partitions: 4,
            per_offer: 612.0,
            raw: 154.0,
        };
        assert_eq!(OfferMemory::parse(&m.to_string()), Some(m));
        assert_eq!(OfferMemory::parse("memory per task: 1 bytes"), None);
    }

    #[test]
    fn every_stage_runs_once_per_offer_and_memory_is_read() {
        let m = measure(200, 5, 2).unwrap();
        assert_eq!((m.offers, m.stages, m.partitions), (200, 5, 2));
        assert!(m.raw > 50.0, "{m:?}");
    }
}
