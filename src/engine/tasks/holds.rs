//! The bounded queue hold (seed 000): while a running task produces a
//! parameter that an idle task waits on, one slot of the waiting task's pool
//! stays free for it, so lower-priority tasks cannot take the last slot just
//! before the data it waits for arrives. A hold never outlives `hold_max`.

use jiff::Timestamp;

use super::{Tasks, TimerKind};
use crate::ctl::ParamId;
use crate::engine::Error;
use crate::run::add;
use crate::task::{Hold, TaskState};

impl Tasks {
    /// This table's ids of what task `i` produces (few tasks produce: the
    /// ids are looked up here rather than kept in every task).
    fn produced_by(&self, i: u32) -> Result<Vec<ParamId>, Error> {
        Ok(self
            .task(i)?
            .def
            .extra()
            .produces
            .iter()
            .filter_map(|&global| self.table.of_global(global))
            .collect())
    }

    /// The tasks whose trigger references `p`.
    fn waiting_on(&self, p: ParamId) -> Vec<u32> {
        self.index.of(p).to_vec()
    }

    /// A producer was dispatched: hold a slot for every idle task waiting on
    /// what it produces.
    pub(super) fn start_holds(&mut self, producer: u32, now: Timestamp) -> Result<(), Error> {
        for p in self.produced_by(producer)? {
            for h in self.waiting_on(p) {
                let pool = self.task(h)?.def.pool();
                let (max_running, hold_max) = {
                    let pool = self.pool(pool)?;
                    (pool.max_running, pool.hold_max)
                };
                if h == producer
                    || self.task(h)?.rt.slot.phase != TaskState::Idle
                    || max_running.is_none()
                {
                    continue;
                }
                let rare = self.task_mut(h)?.rt.rare_mut();
                match &mut rare.hold {
                    Some(hold) => hold.awaiting_data = false,
                    None => {
                        let until = add(now, hold_max.get());
                        rare.hold = Some(Hold {
                            until,
                            awaiting_data: false,
                        });
                        self.timers.arm(until, (TimerKind::Hold, h));
                        self.pool_mut(pool)?.holds.push(h);
                    }
                }
                self.mark(h)?;
            }
        }
        Ok(())
    }

    /// A producer finished. Holds it was keeping end on failure; on success
    /// they wait for the waiting task's next evaluation (the data lands on
    /// `ctl.changes`, which is not ordered with the result).
    pub(super) fn producer_finished(&mut self, producer: u32, success: bool) -> Result<(), Error> {
        for p in self.produced_by(producer)? {
            for h in self.waiting_on(p) {
                if self.task(h)?.rt.rare().hold.is_none()
                    || self.other_producer_running(h, producer)?
                {
                    continue;
                }
                if success {
                    if let Some(hold) = self
                        .task_mut(h)?
                        .rt
                        .rare_set()
                        .and_then(|rare| rare.hold.as_mut())
                    {
                        hold.awaiting_data = true;
                    }
                    self.mark(h)?;
                } else {
                    self.release_hold(h)?;
                }
            }
        }
        Ok(())
    }

    fn other_producer_running(&self, waiter: u32, except: u32) -> Result<bool, Error> {
        let trigger = &self.task(waiter)?.def.trigger;
        for p in trigger
            .params()
            .into_iter()
            .filter_map(|&g| self.table.of_global(g))
        {
            for &q in self.producers.of(p) {
                if q != except && self.task(q)?.rt.slot.phase == TaskState::Running {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// After a waiting task was evaluated on new data: if it stayed idle and
    /// no producer is running any more, the data it was held for has come.
    pub(super) fn settle_hold(&mut self, h: u32, _now: Timestamp) -> Result<(), Error> {
        if self
            .task(h)?
            .rt
            .rare()
            .hold
            .is_some_and(|hold| hold.awaiting_data)
        {
            self.release_hold(h)?;
        }
        Ok(())
    }

    /// Ends a task's hold, if it has one, and lets its pool dispatch.
    pub(super) fn release_hold(&mut self, h: u32) -> Result<(), Error> {
        let task = self.task_mut(h)?;
        let Some(hold) = task.rt.rare_set().and_then(|rare| rare.hold.take()) else {
            return Ok(());
        };
        let pool = task.def.pool();
        self.timers.cancel(hold.until, (TimerKind::Hold, h));
        self.pool_mut(pool)?.holds.retain(|&x| x != h);
        self.mark(h)?;
        self.pending(pool)
    }
}
