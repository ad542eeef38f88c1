//! How a runtime is told to stop: a latch set once (by a signal handler, a
//! test, the service) and read by the runtime thread, which checks it
//! between polls and sleeps on it, so a stop interrupts a backoff at once.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopKind {
    /// Commit what is decided, leave the group, end.
    Shutdown,
    /// End at once without committing, as a killed process would (tests of
    /// crash recovery).
    Crash,
}

/// The stop latch; clones share it.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    inner: Arc<(Mutex<Option<StopKind>>, Condvar)>,
}

impl Stop {
    /// A latch nobody has set.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Asks for a stop and wakes every waiter. A crash overrides a shutdown
    /// already asked for; a shutdown does not soften a crash.
    pub fn request(&self, kind: StopKind) {
        let (lock, wake) = &*self.inner;
        let mut stop = lock.lock().unwrap_or_else(PoisonError::into_inner);
        if *stop != Some(StopKind::Crash) {
            *stop = Some(kind);
        }
        wake.notify_all();
    }

    /// What was asked, if anything.
    pub fn requested(&self) -> Option<StopKind> {
        *self.inner.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether anything was asked.
    pub fn is_requested(&self) -> bool {
        self.requested().is_some()
    }

    /// Sleeps for `d`, or until a stop is asked; returns what was asked.
    pub fn wait(&self, d: Duration) -> Option<StopKind> {
        let (lock, wake) = &*self.inner;
        let until = Instant::now() + d;
        let mut stop = lock.lock().unwrap_or_else(PoisonError::into_inner);
        while stop.is_none() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            stop = wake
                .wait_timeout(stop, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *stop
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_wakes_a_waiter() {
        let stop = Stop::new();
        assert_eq!(stop.wait(Duration::from_millis(1)), None);
        let waiter = {
            let stop = stop.clone();
            std::thread::spawn(move || stop.wait(Duration::from_secs(600)))
        };
        stop.request(StopKind::Shutdown);
        assert_eq!(waiter.join().unwrap(), Some(StopKind::Shutdown));
        assert!(stop.is_requested());
    }

    #[test]
    fn a_crash_overrides_a_shutdown() {
        let stop = Stop::new();
        stop.request(StopKind::Shutdown);
        stop.request(StopKind::Crash);
        stop.request(StopKind::Shutdown);
        assert_eq!(stop.requested(), Some(StopKind::Crash));
    }
}
