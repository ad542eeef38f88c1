//! Launch by schedule (seed 003's "by timer, by selection"): a process's
//! cron fires in its time zone and launches it for a static key list or for
//! the shard's offers a `select` predicate picks — in chunks, in the job
//! queues' low-priority lane, resumable after a crash (changelog
//! `schedule/<process>`). A firing missed while no shard ran is served once
//! at start.

use jiff::Timestamp;

use super::{ProcTimer, Processes};
use crate::config::ScheduleTargets;
use crate::engine::Error;
use crate::process::{Cursor, Lane, Launch, Position, ScheduleRecord};
use crate::stage::expr::Scope;

/// Keys (or offers) launched per schedule step; the rest waits for the next
/// tick, so a schedule over a large partition never stalls the shard.
pub const SCHEDULE_CHUNK: usize = 1000;

/// The shard's offers, as a schedule's `select` sees them.
pub(in crate::engine) trait OfferSource {
    /// Calls `f` with the id and CEL scope of up to `n` live offers after
    /// `after`, in id order; returns the last id seen and whether the scan
    /// reached the end.
    fn scan(
        &self,
        after: Option<&str>,
        n: usize,
        now: Timestamp,
        f: &mut dyn FnMut(&str, &Scope<'_>),
    ) -> (Option<String>, bool);
}

impl Processes {
    /// Arms every schedule at start: a run in progress continues now; the
    /// next firing is the first cron instant after the last one served (in
    /// the past if one was missed: it fires at once), or after `now`.
    pub(in crate::engine) fn start_schedules(&mut self, now: Timestamp) -> Result<(), Error> {
        for p in 0..self.procs.len() {
            let p = super::index(p);
            let Some(schedule) = self.def(p)?.schedule.clone() else {
                continue;
            };
            let tz = self.def(p)?.time_zone.clone();
            let record = self.schedules.get(p as usize).cloned().flatten();
            if record.as_ref().is_some_and(|r| r.cursor.is_some()) {
                self.timers.arm(now, ProcTimer::Chunk(p));
            }
            let from = record.and_then(|r| r.last_fire).unwrap_or(now);
            if let Some(next) = schedule.cron.next_after(from, &tz) {
                self.timers.arm(next, ProcTimer::Cron(p));
            }
        }
        Ok(())
    }

    /// The cron fired at `at`: a new run starts (unless the last one is
    /// still going: it goes on, and this firing counts as served).
    pub(super) fn on_cron(
        &mut self,
        p: u16,
        at: Timestamp,
        now: Timestamp,
        offers: &dyn OfferSource,
    ) -> Result<(), Error> {
        let Some(schedule) = self.def(p)?.schedule.clone() else {
            return Ok(());
        };
        let tz = self.def(p)?.time_zone.clone();
        let Some(slot) = self.schedules.get_mut(p as usize) else {
            return Ok(());
        };
        let record = slot.get_or_insert_with(ScheduleRecord::default);
        record.last_fire = Some(at);
        let idle = record.cursor.is_none();
        if idle {
            record.launched = 0;
            record.cursor = Some(match schedule.targets {
                ScheduleTargets::Keys(_) => Cursor::Key(0),
                ScheduleTargets::Select(_) => Cursor::Offer(None),
            });
        }
        self.dirty_schedules.insert(p);
        // Firings missed while no shard ran collapse into this one.
        if let Some(next) = schedule.cron.next_after(at.max(now), &tz) {
            self.timers.arm(next, ProcTimer::Cron(p));
        }
        if idle {
            self.schedule_chunk(p, now, offers)?;
        }
        Ok(())
    }

    /// Launches the next chunk of a schedule run.
    pub(super) fn schedule_chunk(
        &mut self,
        p: u16,
        now: Timestamp,
        offers: &dyn OfferSource,
    ) -> Result<(), Error> {
        let Some(schedule) = self.def(p)?.schedule.clone() else {
            return Ok(());
        };
        let Some(cursor) = self
            .schedules
            .get(p as usize)
            .and_then(|r| r.as_ref())
            .and_then(|r| r.cursor.clone())
        else {
            return Ok(());
        };
        let (keys, next) = match (&schedule.targets, cursor) {
            (ScheduleTargets::Keys(all), Cursor::Key(from)) => {
                let from = usize::try_from(from).unwrap_or(usize::MAX);
                let chunk: Vec<String> = all
                    .iter()
                    .skip(from)
                    .take(SCHEDULE_CHUNK)
                    .filter(|k| self.owns_key(k))
                    .cloned()
                    .collect();
                let to = from.saturating_add(SCHEDULE_CHUNK);
                let next =
                    (to < all.len()).then(|| Cursor::Key(u64::try_from(to).unwrap_or(u64::MAX)));
                (chunk, next)
            }
            (ScheduleTargets::Select(select), Cursor::Offer(after)) => {
                let mut chunk = Vec::new();
                let (last, done) =
                    offers.scan(after.as_deref(), SCHEDULE_CHUNK, now, &mut |id, scope| {
                        // A failing `select` counts as false: a schedule never
                        // widens on an error.
                        if select.eval_bool(scope, None).unwrap_or(false) {
                            chunk.push(id.to_string());
                        }
                    });
                let next = (!done).then(|| Cursor::Offer(last.or(after)));
                (chunk, next)
            }
            // A schedule whose targets changed kind: start the run over.
            (ScheduleTargets::Keys(_), Cursor::Offer(_)) => (Vec::new(), Some(Cursor::Key(0))),
            (ScheduleTargets::Select(_), Cursor::Key(_)) => (Vec::new(), Some(Cursor::Offer(None))),
        };
        let name = self.def(p)?.name.clone();
        let launch = Launch {
            position: Position::Back,
            lane: Lane::Low,
            source: Some("schedule".to_string()),
            at: now,
            ..Launch::default()
        };
        let n = keys.len() as u64;
        self.launch(&name, &keys, &launch, now)?;
        if let Some(record) = self.schedules.get_mut(p as usize).and_then(Option::as_mut) {
            record.launched += n;
            record.cursor = next.clone();
        }
        self.dirty_schedules.insert(p);
        if next.is_some() {
            self.timers.arm(now, ProcTimer::Chunk(p));
        }
        Ok(())
    }

    /// Restores a `schedule/<process>` record (`None`: a tombstone).
    pub(in crate::engine) fn restore_schedule(
        &mut self,
        name: &str,
        record: Option<&ScheduleRecord>,
    ) {
        match self.proc_index(name) {
            Some(p) => {
                if let Some(slot) = self.schedules.get_mut(p as usize) {
                    *slot = record.cloned();
                }
            }
            None => {
                if record.is_some() {
                    self.orphans
                        .push((crate::changelog::Store::Schedule, name.to_string()));
                }
            }
        }
    }
}
