//! Keeps a runtime going: builds it, runs it on its own thread, and after a
//! retryable failure (broker unavailable, aborted transaction) builds a new
//! one after a backoff, readiness false meanwhile. Nothing is lost: a new
//! runtime resumes from the committed offsets and changelog. Beside it, a
//! probe thread watches whether the brokers answer ([`super::health`]).

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::backoff::Backoff;
use super::health::{self, Phase};
use super::stop::{Stop, StopKind};
use super::{Options, Runtime};
use crate::kafka::Error;

/// Stack of the runtime thread. The engine evaluates CEL expressions,
/// which recurse per level of their tree: within the limits of
/// [`crate::stage::expr`] that takes well under 1 MiB in a release build and
/// a few MiB in a debug one; the rest is margin.
pub const RUNTIME_STACK: usize = 32 * 1024 * 1024;

/// A run that lasted this long starts the backoff over.
const STABLE: Duration = Duration::from_secs(60);

/// A running instance.
pub struct Handle {
    stop: Stop,
    thread: JoinHandle<Result<(), Error>>,
    probe: Option<JoinHandle<()>>,
}

impl Handle {
    /// Asks for a graceful stop (last commit, leave the group) and waits.
    pub fn stop(self) -> Result<(), Error> {
        self.stop.request(StopKind::Shutdown);
        self.join()
    }

    /// Stops at once without committing, as if the process were killed.
    pub fn crash(self) {
        self.stop.request(StopKind::Crash);
        let _ = self.join();
    }

    /// Whether the runtime thread has ended.
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Waits for the runtime thread (and the probe, which the runtime's end
    /// stops).
    pub fn join(self) -> Result<(), Error> {
        let result = self.thread.join().unwrap_or(Err(Error::Crashed));
        self.stop.request(StopKind::Shutdown);
        if let Some(probe) = self.probe {
            let _ = probe.join();
        }
        result
    }
}

/// Starts the runtime on a thread of its own, restarting it after
/// retryable failures, and the broker probe.
pub fn spawn(options: Options) -> std::io::Result<Handle> {
    let stop = options.stop.clone();
    let probe = health::spawn_probe(
        options.clients.clone(),
        options.config.kafka.topics.results.clone(),
        std::sync::Arc::clone(&options.readiness),
        stop.clone(),
    )?;
    let thread = std::thread::Builder::new()
        .name("reactor-runtime".into())
        .stack_size(RUNTIME_STACK)
        .spawn(move || supervise(options));
    match thread {
        Ok(thread) => Ok(Handle {
            stop,
            thread,
            probe: Some(probe),
        }),
        Err(e) => {
            stop.request(StopKind::Shutdown);
            let _ = probe.join();
            Err(e)
        }
    }
}

fn supervise(options: Options) -> Result<(), Error> {
    let mut backoff = Backoff::default();
    loop {
        let started = Instant::now();
        let result = Runtime::start(options.clone()).and_then(Runtime::run);
        let result = match (result, options.stop.requested()) {
            // A stop asked during start or restore is no failure.
            (Err(Error::Stopped), Some(StopKind::Shutdown)) => Ok(()),
            (result, _) => result,
        };
        match result {
            Ok(()) => {
                options.readiness.set_phase(Phase::Stopped);
                return Ok(());
            }
            Err(e) if e.is_retryable() && !options.stop.is_requested() => {
                options
                    .readiness
                    .set_phase(Phase::Restarting(e.to_string()));
                if started.elapsed() > STABLE {
                    backoff.reset();
                }
                let retry_in = backoff.next_delay();
                crate::metrics::BrokerUnavailable { error: &e }.emit();
                tracing::warn!(error = %e, ?retry_in, "runtime failed; starting over from the committed state");
                options.stop.wait(retry_in);
            }
            Err(e) => {
                options.readiness.set_phase(Phase::Stopped);
                return Err(e);
            }
        }
    }
}
