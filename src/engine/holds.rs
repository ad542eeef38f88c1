//! The bounded queue hold (seed 000): while a running task produces a
//! parameter that an idle task waits on, one slot of the waiting task's pool
//! stays free for it, so lower-priority tasks cannot take the last slot just
//! before the data it waits for arrives. A hold never outlives `hold_max`.

use jiff::Timestamp;

use super::{Engine, TimerKind};
use crate::run::add;
use crate::task::{Hold, TaskState};

impl Engine {
    /// A producer was dispatched: hold a slot for every idle task waiting on
    /// what it produces.
    pub(super) fn start_holds(&mut self, producer: u32, now: Timestamp) {
        for k in 0..self.defs[producer as usize].produces.len() {
            let p = self.defs[producer as usize].produces[k];
            let n = self.index.get(p.0 as usize).map_or(0, Vec::len);
            for j in 0..n {
                let h = self.index[p.0 as usize][j];
                let pool = self.defs[h as usize].pool;
                if h == producer
                    || self.rt[h as usize].state != TaskState::Idle
                    || self.pools[pool].max_running.is_none()
                {
                    continue;
                }
                match &mut self.rt[h as usize].hold {
                    Some(hold) => hold.awaiting_data = false,
                    None => {
                        let until = add(now, self.pools[pool].hold_max.get());
                        self.rt[h as usize].hold = Some(Hold {
                            until,
                            awaiting_data: false,
                        });
                        self.timers.arm(until, (TimerKind::Hold, h));
                        self.pools[pool].holds.push(h);
                    }
                }
                self.mark(h);
            }
        }
    }

    /// A producer finished. Holds it was keeping end on failure; on success
    /// they wait for the waiting task's next evaluation (the data lands on
    /// `ctl.changes`, which is not ordered with the result).
    pub(super) fn producer_finished(&mut self, producer: u32, success: bool, _now: Timestamp) {
        for k in 0..self.defs[producer as usize].produces.len() {
            let p = self.defs[producer as usize].produces[k];
            let n = self.index.get(p.0 as usize).map_or(0, Vec::len);
            for j in 0..n {
                let h = self.index[p.0 as usize][j];
                if self.rt[h as usize].hold.is_none() || self.other_producer_running(h, producer) {
                    continue;
                }
                if success {
                    if let Some(hold) = &mut self.rt[h as usize].hold {
                        hold.awaiting_data = true;
                    }
                    self.mark(h);
                } else {
                    self.release_hold(h);
                }
            }
        }
    }

    fn other_producer_running(&self, waiter: u32, except: u32) -> bool {
        self.defs[waiter as usize].refs.iter().any(|p| {
            self.producers.get(p.0 as usize).is_some_and(|ps| {
                ps.iter()
                    .any(|&q| q != except && self.rt[q as usize].state == TaskState::Running)
            })
        })
    }

    /// After a waiting task was evaluated on new data: if it stayed idle and
    /// no producer is running any more, the data it was held for has come.
    pub(super) fn settle_hold(&mut self, h: u32, _now: Timestamp) {
        if self.rt[h as usize]
            .hold
            .is_some_and(|hold| hold.awaiting_data)
        {
            self.release_hold(h);
        }
    }

    /// Ends a task's hold, if it has one, and lets its pool dispatch.
    pub(super) fn release_hold(&mut self, h: u32) {
        let Some(hold) = self.rt[h as usize].hold.take() else {
            return;
        };
        self.timers.cancel(hold.until, (TimerKind::Hold, h));
        let pool = self.defs[h as usize].pool;
        self.pools[pool].holds.retain(|&x| x != h);
        self.mark(h);
        self.pending(pool);
    }
}
