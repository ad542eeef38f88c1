//! Readiness, as `/readyz` serves it. The runtime says how far it got
//! (loading the CTL table, joining the group, restoring shards, serving);
//! a probe thread says whether the brokers answer. An instance is ready
//! when it serves and the brokers answer, so a frozen or unreachable
//! cluster shows within [`PROBE_EVERY`] + [`PROBE_TIMEOUT`], not only when
//! a transaction finally fails.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use serde::Serialize;

use super::stop::Stop;
use crate::kafka::Clients;

/// How often the probe asks the brokers for metadata.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How long the probe waits for an answer before calling the brokers unreachable.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How far the runtime got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Connecting its clients.
    Starting,
    /// Reading `ctl.changes` before serving.
    LoadingCtl,
    /// Waiting for the group to assign partitions.
    Joining,
    /// Processing its shards.
    Serving,
    /// Failed; starting over from the committed state after a backoff.
    Restarting(String),
    /// Stopped on request.
    Stopped,
}

impl Phase {
    fn reason(&self) -> Option<String> {
        Some(match self {
            Phase::Starting => "starting".to_string(),
            Phase::LoadingCtl => "loading the CTL table".to_string(),
            Phase::Joining => "joining the consumer group".to_string(),
            Phase::Serving => return None,
            Phase::Restarting(why) => format!("starting over after: {why}"),
            Phase::Stopped => "stopped".to_string(),
        })
    }
}

/// What `/readyz` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Whether the instance serves.
    pub ready: bool,
    /// Why not (absent when ready).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Shards (partitions) assigned to this instance.
    pub shards: Vec<i32>,
    /// Assigned shards that do not serve: those restoring, or all of them
    /// while the brokers do not answer.
    pub not_ready: Vec<i32>,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    shards: BTreeSet<i32>,
    restoring: BTreeSet<i32>,
    /// Why the brokers look unreachable, if they do.
    brokers: Option<String>,
}

/// Readiness shared by the runtime, the probe and the admin API.
#[derive(Debug)]
pub struct Readiness {
    state: Mutex<State>,
    ready: AtomicBool,
}

impl Default for Readiness {
    fn default() -> Readiness {
        Readiness {
            state: Mutex::new(State {
                phase: Phase::Starting,
                shards: BTreeSet::new(),
                restoring: BTreeSet::new(),
                brokers: None,
            }),
            ready: AtomicBool::new(false),
        }
    }
}

impl Readiness {
    /// Not ready: starting.
    pub fn new() -> Arc<Readiness> {
        Arc::new(Readiness::default())
    }

    /// Whether the instance serves (cheap: one atomic load).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// The whole answer, with the reason and the shards.
    pub fn report(&self) -> Report {
        let state = self.lock();
        let reason = Self::reason(&state);
        let not_ready = if state.brokers.is_some() {
            state.shards.iter().copied().collect()
        } else {
            state.restoring.iter().copied().collect()
        };
        Report {
            ready: reason.is_none(),
            reason,
            shards: state.shards.iter().copied().collect(),
            not_ready,
        }
    }

    /// The runtime reached `phase`.
    pub fn set_phase(&self, phase: Phase) {
        self.update(|s| {
            if matches!(
                phase,
                Phase::Starting | Phase::Restarting(_) | Phase::Stopped
            ) {
                // A new runtime owns nothing until the group assigns it.
                s.shards.clear();
                s.restoring.clear();
            }
            s.phase = phase;
        });
    }

    /// Shard `p` was assigned and is being restored.
    pub fn restoring(&self, p: i32) {
        self.update(|s| {
            s.shards.insert(p);
            s.restoring.insert(p);
        });
    }

    /// Shard `p` is restored and serves.
    pub fn restored(&self, p: i32) {
        self.update(|s| {
            s.restoring.remove(&p);
        });
    }

    /// Shards taken away.
    pub fn revoked(&self, partitions: &[i32]) {
        self.update(|s| {
            for p in partitions {
                s.shards.remove(p);
                s.restoring.remove(p);
            }
        });
    }

    /// What the probe found: `Err(why)` when the brokers do not answer.
    pub fn set_brokers(&self, reachable: Result<(), String>) {
        self.update(|s| s.brokers = reachable.err());
    }

    fn reason(state: &State) -> Option<String> {
        if let Some(why) = &state.brokers {
            return Some(format!("brokers unreachable: {why}"));
        }
        if let Some(why) = state.phase.reason() {
            return Some(why);
        }
        if !state.restoring.is_empty() {
            return Some("restoring shards".to_string());
        }
        None
    }

    fn update(&self, change: impl FnOnce(&mut State)) {
        let mut state = self.lock();
        change(&mut state);
        let reason = Self::reason(&state);
        let ready = reason.is_none();
        if self.ready.swap(ready, Ordering::SeqCst) != ready {
            crate::metrics::ReadinessChanged {
                ready,
                reason: reason.as_deref(),
            }
            .emit();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Starts the probe: every [`PROBE_EVERY`] it asks the brokers for the
/// metadata of `topic` and records whether they answered within
/// [`PROBE_TIMEOUT`], until `stop` is set.
pub fn spawn_probe(
    clients: Clients,
    topic: String,
    readiness: Arc<Readiness>,
    stop: Stop,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("reactor-probe".into())
        .spawn(move || probe(&clients, &topic, &readiness, &stop))
}

fn probe(clients: &Clients, topic: &str, readiness: &Arc<Readiness>, stop: &Stop) {
    let mut consumer: Option<BaseConsumer<ProbeContext>> = None;
    loop {
        if consumer.is_none() {
            match clients
                .reader()
                .create_with_context(ProbeContext(Arc::clone(readiness)))
            {
                Ok(c) => consumer = Some(c),
                Err(e) => readiness.set_brokers(Err(format!("cannot create a client: {e}"))),
            }
        }
        if let Some(c) = &consumer {
            // Serves the client's error callbacks (all brokers down …).
            let _ = c.poll(Duration::ZERO);
            match c.fetch_metadata(Some(topic), PROBE_TIMEOUT) {
                Ok(_) => readiness.set_brokers(Ok(())),
                Err(e) => {
                    crate::metrics::BrokerUnavailable { error: &e }.emit();
                    readiness.set_brokers(Err(e.to_string()));
                }
            }
        }
        if stop.wait(PROBE_EVERY).is_some() {
            return;
        }
    }
}

/// The probe client's context: librdkafka saying that every broker is
/// down makes the instance not ready at once.
struct ProbeContext(Arc<Readiness>);

impl ClientContext for ProbeContext {
    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::AllBrokersDown) {
            self.0.set_brokers(Err(reason.to_string()));
        }
    }
}

impl ConsumerContext for ProbeContext {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_serving_with_brokers_up() {
        let r = Readiness::new();
        assert!(!r.is_ready());
        assert_eq!(r.report().reason.as_deref(), Some("starting"));
        r.set_phase(Phase::LoadingCtl);
        r.set_phase(Phase::Joining);
        r.restoring(0);
        r.restoring(2);
        r.set_phase(Phase::Serving);
        let report = r.report();
        assert_eq!(
            (report.ready, report.reason.as_deref(), report.not_ready),
            (false, Some("restoring shards"), vec![0, 2])
        );
        r.restored(0);
        r.restored(2);
        assert!(r.is_ready());
        assert_eq!(
            r.report(),
            Report {
                ready: true,
                reason: None,
                shards: vec![0, 2],
                not_ready: vec![],
            }
        );

        r.set_brokers(Err("metadata timed out".into()));
        assert!(!r.is_ready());
        let report = r.report();
        assert_eq!(
            report.reason.as_deref(),
            Some("brokers unreachable: metadata timed out")
        );
        assert_eq!(report.not_ready, vec![0, 2]);
        r.set_brokers(Ok(()));
        assert!(r.is_ready());

        r.revoked(&[2]);
        assert_eq!(r.report().shards, vec![0]);
        r.set_phase(Phase::Restarting("commit failed".into()));
        let report = r.report();
        assert!(!report.ready);
        assert_eq!(
            report.reason.as_deref(),
            Some("starting over after: commit failed")
        );
        assert!(report.shards.is_empty());
    }
}
