//! Read-only views of offers and stages for the admin API, the simulator
//! and metrics.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Serialize;

use super::Offers;
use crate::offer::SharedBody;
use crate::stage::{Lane, Phase};

/// An offer with every stage's slot on it (`/offers/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OfferView {
    /// Offer id.
    pub id: String,
    /// Current version: the `version` a stage state compare-and-set expects.
    pub version: u64,
    /// Current body.
    pub body: SharedBody,
    /// When the current version was committed.
    pub updated_at: Timestamp,
    /// Stage runs are parked by the ping-pong guard until then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parked_until: Option<Timestamp>,
    /// Stage name → slot, for every configured stage.
    pub stages: BTreeMap<String, SlotView>,
}

/// A stage's slot on one offer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlotView {
    /// Phase.
    pub phase: Phase,
    /// The stage's state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<crate::stage::State>,
    /// The stage's timer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timer: Option<Timestamp>,
    /// The lane, while queued.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lane: Option<Lane>,
    /// The run in flight, or the last one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The version the run in flight works on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_version: Option<u64>,
    /// Pass of the run in flight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<u64>,
    /// Attempt of the run in flight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// Consecutive failures.
    pub failures: u32,
    /// End of a backoff or park.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_at: Option<Timestamp>,
    /// Last error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// Live figures of one stage on one shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageStats {
    /// Stage name.
    pub stage: String,
    /// Ready entries in the live lane.
    pub live: usize,
    /// Ready entries in the rescan lane.
    pub rescan: usize,
    /// Runs in flight.
    pub running: u32,
    /// This partition's share of `max_parallelism`.
    pub share: u32,
}

impl Offers {
    pub(in crate::engine) fn view(&self, id: &str) -> Option<OfferView> {
        let kept = self.map.kept(id).filter(|k| !k.deleted())?;
        // A kept record reads back (see `kept.rs`).
        let rt = self.full(id, kept).ok()?;
        let stages = self
            .stage_ids()
            .zip(&self.stages)
            .map(|(s, st)| {
                let def = &st.def;
                let slot = rt.slot(s).cloned().unwrap_or_default();
                let run = slot.slot.current();
                let view = SlotView {
                    phase: slot.slot.phase,
                    state: slot.state.clone(),
                    timer: slot.timer(),
                    lane: (slot.slot.phase == Phase::Queued).then_some(slot.lane),
                    run_id: run.map(|r| r.run_id.as_str().to_owned()),
                    run_version: run.map(|_| slot.run_version),
                    pass: run.map(|r| r.pass),
                    attempt: run.map(|r| r.attempt),
                    failures: slot.slot.failures,
                    wake_at: slot.slot.wake_at(),
                    last_error: slot.slot.last_error().map(str::to_string),
                };
                (def.name.clone(), view)
            })
            .collect();
        Some(OfferView {
            id: id.to_string(),
            version: rt.version,
            body: rt.body.clone(),
            updated_at: rt.updated_at,
            parked_until: rt.guard.parked_until,
            stages,
        })
    }

    /// The run in flight of `stage` on `offer`: `(run id, pass, version)`.
    pub(in crate::engine) fn current_run(
        &self,
        stage: &str,
        offer: &str,
    ) -> Option<(String, u64, u64)> {
        let s = *self.by_name.get(stage)?;
        // An offer kept as its record has no run in flight.
        let slot = self.live(offer)?.slot(s)?;
        let run = slot.slot.current()?;
        Some((run.run_id.as_str().to_owned(), run.pass, slot.run_version))
    }

    pub(in crate::engine) fn stage_stats(&self) -> Vec<StageStats> {
        self.stages
            .iter()
            .map(|st| {
                let (live, rescan) = st.queue.depth();
                StageStats {
                    stage: st.def.name.clone(),
                    live,
                    rescan,
                    running: st.running,
                    share: st.share,
                }
            })
            .collect()
    }
}

impl crate::engine::processes::schedule::OfferSource for Offers {
    fn scan(
        &self,
        after: Option<&str>,
        n: usize,
        now: Timestamp,
        f: &mut dyn FnMut(&str, &crate::stage::expr::Scope<'_>),
    ) -> (Option<String>, bool) {
        use std::ops::Bound;
        let from = match after {
            Some(id) => Bound::Excluded(id),
            None => Bound::Unbounded,
        };
        let mut last = None;
        let mut seen = 0;
        for (id, kept) in self.map.range(from).take(n) {
            seen += 1;
            last = Some(id.to_string());
            if kept.deleted() {
                continue;
            }
            // A kept record reads back (see `kept.rs`).
            let Ok(rt) = self.full(id, kept) else {
                continue;
            };
            let scope =
                crate::stage::expr::Scope::new(id, rt.version, rt.updated_at, &rt.body, now);
            f(id, &scope);
        }
        (last, seen < n)
    }
}
