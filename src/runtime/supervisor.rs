//! Keeps a runtime going: builds it, runs it on its own thread, and after a
//! retryable failure (broker unavailable, aborted transaction) builds a new
//! one after a backoff, readiness false meanwhile. Nothing is lost: a new
//! runtime resumes from the committed offsets and changelog.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Options, Runtime};
use crate::kafka::Error;

/// Stack of the runtime thread. The engine evaluates CEL expressions,
/// which recurse per level of their tree: within the limits of
/// [`crate::stage::expr`] that takes well under 1 MiB in a release build and
/// a few MiB in a debug one; the rest is margin.
pub const RUNTIME_STACK: usize = 32 * 1024 * 1024;

/// A running instance.
pub struct Handle {
    shutdown: Arc<AtomicBool>,
    crash: Arc<AtomicBool>,
    thread: JoinHandle<Result<(), Error>>,
}

impl Handle {
    /// Asks for a graceful stop (last commit, leave the group) and waits.
    pub fn stop(self) -> Result<(), Error> {
        self.shutdown.store(true, Ordering::Relaxed);
        self.join()
    }

    /// Stops at once without committing, as if the process were killed.
    pub fn crash(self) {
        self.crash.store(true, Ordering::Relaxed);
        let _ = self.join();
    }

    /// Whether the runtime thread has ended.
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Waits for the runtime thread.
    pub fn join(self) -> Result<(), Error> {
        self.thread.join().unwrap_or_else(|_| Err(Error::Crashed))
    }
}

/// Starts the runtime on a thread of its own, restarting it after retryable failures.
pub fn spawn(options: Options) -> Handle {
    let shutdown = Arc::clone(&options.shutdown);
    let crash = Arc::clone(&options.crash);
    let thread = std::thread::Builder::new()
        .name("reactor-runtime".into())
        .stack_size(RUNTIME_STACK)
        .spawn(move || supervise(options))
        .expect("spawning the runtime thread");
    Handle {
        shutdown,
        crash,
        thread,
    }
}

fn supervise(options: Options) -> Result<(), Error> {
    const FIRST: Duration = Duration::from_millis(200);
    const MAX: Duration = Duration::from_secs(10);
    let mut backoff = FIRST;
    loop {
        let started = Instant::now();
        let result = Runtime::start(options.clone()).and_then(Runtime::run);
        options.ready.store(false, Ordering::Relaxed);
        match result {
            Ok(()) => return Ok(()),
            Err(e) if e.is_retryable() && !options.shutdown.load(Ordering::Relaxed) => {
                if started.elapsed() > MAX * 6 {
                    backoff = FIRST;
                }
                crate::metrics::BrokerUnavailable { error: &e }.emit();
                tracing::warn!(error = %e, retry_in = ?backoff, "runtime failed; starting over from the committed state");
                sleep_unless(&options, backoff);
                backoff = (backoff * 2).min(MAX);
            }
            Err(e) => return Err(e),
        }
    }
}

fn sleep_unless(options: &Options, d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if options.shutdown.load(Ordering::Relaxed) || options.crash.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
