//! Injected time: the runtime asks a [`Clock`]; tests drive a [`ManualClock`].

use std::sync::{Arc, Mutex};

use jiff::Timestamp;

/// A source of `now`.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<Timestamp>>);

impl ManualClock {
    /// A clock showing `at`.
    pub fn new(at: Timestamp) -> Self {
        ManualClock(Arc::new(Mutex::new(at)))
    }

    /// Moves the clock to `at`.
    pub fn set(&self, at: Timestamp) {
        *self.0.lock().expect("clock lock") = at;
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: jiff::SignedDuration) {
        let mut t = self.0.lock().expect("clock lock");
        *t = crate::run::add(*t, d);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().expect("clock lock")
    }
}
