//! Operations over the shard's tasks: each task is one item (name: its
//! id, key: its pool), walked in declaration order; a recovery queues a
//! dead or waiting task in its pool's low-priority lane.

use jiff::Timestamp;

use super::runs::enter;
use super::{Task, Tasks};
use crate::action::{Action, Event, Subject};
use crate::engine::ops::{Flow, Visit};
use crate::engine::Error;
use crate::ops::{Criteria, Item, Kind, Mode};
use crate::stamp;
use crate::task::TaskState;

/// A task a recovery can restart: one whose run failed and that waits (a
/// backoff, a tier, or for an operator).
fn waiting(state: TaskState) -> bool {
    matches!(
        state,
        TaskState::Dead | TaskState::Backoff | TaskState::Parked
    )
}

impl Tasks {
    /// Calls `f` with every task after `after` (a task id) in declaration
    /// order, until it says stop; returns whether it did.
    pub(in crate::engine) fn op_walk(
        &self,
        criteria: &Criteria,
        mode: Option<&Mode>,
        after: Option<&str>,
        f: &mut Visit<'_>,
    ) -> bool {
        if !criteria.admits(Kind::Task) {
            return false;
        }
        let start = after
            .and_then(|id| self.find(id))
            .map_or(0, |i| i as usize + 1);
        for Task { def, rt } in self.iter().skip(start) {
            let slot = &rt.slot;
            let item = Item {
                kind: Kind::Task,
                name: def.id(),
                key: self.pools.get(def.pool()).map_or("", |p| &*p.name),
                state: slot.phase.as_str(),
                error: slot.last_error(),
                at: stamp::get(rt.since),
                step: None,
                instance: None,
                step_index: None,
                run_seq: slot.run_seq,
                attempt: slot
                    .run()
                    .map(|r| r.attempt)
                    .or((slot.failures > 0).then_some(slot.failures)),
                recoverable: waiting(slot.phase)
                    && mode.is_some_and(|m| !matches!(m, Mode::FromStep(_))),
            };
            if f(&item) == Flow::Stop {
                return true;
            }
        }
        false
    }

    /// Restarts task `id` for a recovery: queued now in its pool's low lane
    /// (its trigger is checked again at dispatch, as always), with a new run
    /// id; `from_start` resets its failure count, `retry` keeps it.
    pub(in crate::engine) fn recover(
        &mut self,
        id: &str,
        mode: &Mode,
        source: &str,
        now: Timestamp,
    ) -> Result<bool, Error> {
        let Some(i) = self.find(id) else {
            return Ok(false);
        };
        let (task, mut alarms) = self.slot_mut(i)?;
        if !waiting(task.rt.slot.phase) || matches!(mode, Mode::FromStep(_)) {
            return Ok(false);
        }
        task.rt.slot.set_wake(None, &mut alarms);
        if *mode == Mode::FromStart {
            task.rt.slot.failures = 0;
        }
        task.rt.rare_mut().source = Some(source.to_string());
        let subject = Subject::task(task.def.id());
        self.out.push(Action::Event(Event::Recovered {
            subject,
            source: source.to_string(),
            mode: mode.as_str().to_string(),
        }));
        enter(self, i, TaskState::Idle, now)?;
        self.queue(i, now)?;
        Ok(true)
    }
}
