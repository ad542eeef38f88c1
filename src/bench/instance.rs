//! Reactor under measurement: one instance on fresh topics and a fresh
//! group, started as `reactor run` starts it (`supervisor::spawn`).

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::cluster::{Cluster, Inputs};
use super::report::Measurement;
use super::stats::Summary;
use super::{burst_then_steady, index_in, join_within, prefix, Error, Phases, Plan, Readers};
use crate::clock::SystemClock;
use crate::codec;
use crate::config::{Config, Topics};
use crate::{admin, metrics};

use crate::runtime::health::Readiness;
use crate::runtime::stop::Stop;
use crate::runtime::{supervisor, Options};

/// A running instance; crashed when dropped unless stopped.
pub(super) struct Instance {
    handle: Option<supervisor::Handle>,
    readiness: Arc<Readiness>,
}

impl Instance {
    /// Its readiness.
    pub(super) fn readiness(&self) -> &Readiness {
        &self.readiness
    }

    /// Stops it at once without committing, as a killed process would.
    pub(super) fn crash(mut self) {
        if let Some(handle) = self.handle.take() {
            handle.crash();
        }
    }

    pub(super) fn wait_ready(&mut self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        while !self.readiness.is_ready() {
            if self.handle.as_ref().is_some_and(|h| h.is_finished()) {
                let result = self.handle.take().map(|h| h.join());
                return Err(match result {
                    Some(Err(source)) => Error::Runtime {
                        what: "starting Reactor".into(),
                        source: Box::new(source),
                    },
                    _ => Error::Failed {
                        what: "starting Reactor".into(),
                        message: "the runtime ended before it was ready".into(),
                    },
                });
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: "waiting for Reactor to join its group and restore its shards".into(),
                    seconds: timeout.as_secs_f64(),
                    detail: "not ready".into(),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// Stops the instance (a last commit), waiting at most `timeout`.
    pub(super) fn stop(mut self, timeout: Duration) -> Result<(), Error> {
        let Some(handle) = self.handle.take() else {
            return Ok(());
        };
        let stopping = std::thread::spawn(move || {
            handle.stop().map_err(|source| Error::Runtime {
                what: "stopping Reactor".into(),
                source: Box::new(source),
            })
        });
        join_within(stopping, timeout, "stopping Reactor")
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            handle.crash();
        }
    }
}

/// A Reactor instance started for one system of the bench, ready.
pub(super) struct Launched {
    /// The instance; stop it at the end.
    pub instance: Instance,
    /// Its topics (fresh names).
    pub topics: Topics,
    /// When the setup started (topic creation, start, group join).
    pub setup_started: Instant,
}

/// Gives `config` a `[kafka]` section of fresh topics and group for
/// `system` (the stages' run topics are the configuration's, already
/// unique) and creates its topics.
pub(super) fn prepare(
    cluster: &Cluster,
    mut config: Config,
    plan: &Plan,
    exactly_once: bool,
    system: &str,
) -> Result<Config, Error> {
    let p = prefix(system);
    {
        let k = &mut config.kafka;
        k.brokers = Some(cluster.clients.brokers.clone());
        k.group_id = format!("{p}-group");
        k.instance_id = Some("bench".into());
        k.exactly_once = exactly_once;
        k.commit_interval = crate::duration::Duration::from_millis(
            i64::try_from(plan.commit_interval.as_millis()).unwrap_or(i64::MAX),
        );
        // The shortest every broker accepts: a dead instance's shards move soonest.
        k.session_timeout = crate::duration::Duration::from_secs(6);
        k.partitions = plan.partitions;
        let t = &mut k.topics;
        t.ctl = format!("{p}.ctl");
        t.results = format!("{p}.results");
        t.commands = format!("{p}.commands");
        t.runs = format!("{p}.runs");
        t.events = format!("{p}.events");
        t.dead = format!("{p}.dead");
        t.changelog = format!("{p}.changelog");
        t.offers = format!("{p}.offers");
        t.offer_state = format!("{p}.offer-state");
    }
    let t = &config.kafka.topics;
    let n = plan.partitions;
    let mut topics = vec![
        (t.ctl.clone(), n, true),
        (t.results.clone(), n, false),
        (t.commands.clone(), n, false),
        (t.offers.clone(), n, false),
        (t.runs.clone(), n, false),
        (t.events.clone(), n, false),
        (t.dead.clone(), n, false),
        (t.offer_state.clone(), n, false),
        (t.changelog.clone(), n, true),
    ];
    topics.extend(
        config
            .stage_topics()
            .into_iter()
            .chain(config.job_topics())
            .map(|s| (s.to_string(), n, false)),
    );
    cluster.create_topics(&topics)?;
    Ok(config)
}

/// Installs the Prometheus recorder and runs its upkeep every
/// [`admin::UPKEEP_EVERY`] on a thread of its own, as `reactor run` has them
/// (its admin server runs the upkeep): the instances the bench starts
/// record their metrics as one in production does, where without a
/// recorder every counter and histogram was a no-op.
fn record_metrics() -> Result<(), Error> {
    static UPKEEP: OnceLock<Result<(), String>> = OnceLock::new();
    let failed = |message: String| Error::Failed {
        what: "installing the metrics recorder".into(),
        message,
    };
    let handle = metrics::install().map_err(|e| failed(e.to_string()))?;
    UPKEEP
        .get_or_init(|| {
            std::thread::Builder::new()
                .name("reactor-upkeep".into())
                .spawn(move || loop {
                    std::thread::sleep(admin::UPKEEP_EVERY);
                    handle.run_upkeep();
                })
                .map(drop)
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(failed)
}

/// Starts instance `instance_id` of `config` (not waiting until it is ready).
pub(super) fn start(
    cluster: &Cluster,
    config: &Arc<Config>,
    instance_id: &str,
    partitions: i32,
) -> Result<Instance, Error> {
    record_metrics()?;
    let (_queries, rx) = tokio::sync::mpsc::channel(1);
    let readiness = Readiness::new();
    let options = Options {
        config: Arc::clone(config),
        clients: cluster.clients.clone(),
        instance_id: instance_id.into(),
        partitions,
        clock: Arc::new(SystemClock),
        readiness: Arc::clone(&readiness),
        task_ages: metrics::TaskAges::new(metrics::DEFAULT_SERIES),
        queries: Arc::new(Mutex::new(rx)),
        stop: Stop::new(),
    };
    let handle = supervisor::spawn(options).map_err(|e| Error::Failed {
        what: "starting Reactor".into(),
        message: e.to_string(),
    })?;
    Ok(Instance {
        handle: Some(handle),
        readiness,
    })
}

/// Starts Reactor on `config` (its tasks and stages) with a `[kafka]`
/// section of fresh topics and group for `system`, creates the topics and
/// waits until the instance is ready.
pub(super) fn launch(
    cluster: &Cluster,
    config: Config,
    plan: &Plan,
    exactly_once: bool,
    system: &str,
) -> Result<Launched, Error> {
    let setup_started = Instant::now();
    let config = prepare(cluster, config, plan, exactly_once, system)?;
    let t = config.kafka.topics.clone();
    tracing::info!(
        system,
        tasks = config.tasks.len(),
        stages = config.stages.len(),
        "starting Reactor"
    );
    let mut instance = start(cluster, &Arc::new(config), "bench", plan.partitions)?;
    instance.wait_ready(plan.timeout)?;
    Ok(Launched {
        instance,
        topics: t,
        setup_started,
    })
}

/// Measures Reactor with exactly-once `on` or off; `latency_rate` `None`
/// derives the latency phase's rate from this run's throughput. Returns
/// the topics it ran on too.
pub(super) fn measure(
    cluster: &Cluster,
    tasks: Config,
    plan: &Plan,
    inputs: &Arc<Inputs>,
    exactly_once: bool,
    latency_rate: Option<f64>,
) -> Result<(Measurement, Topics), Error> {
    let system = if exactly_once { "eos-on" } else { "eos-off" };
    let Launched {
        instance,
        topics: t,
        setup_started,
        ..
    } = launch(cluster, tasks, plan, exactly_once, system)?;
    let producer = Arc::new(cluster.producer()?);
    let reader = cluster.reader(&t.runs)?;
    let setup = setup_started.elapsed();
    tracing::info!(
        system,
        seconds = setup.as_secs_f64(),
        "Reactor ready; throughput phase"
    );

    // A run's change is found by its key, the task id.
    let index = |m: &rdkafka::message::BorrowedMessage<'_>| {
        use rdkafka::Message;
        let task = std::str::from_utf8(m.key().unwrap_or_default()).unwrap_or_default();
        index_in(task).ok_or_else(|| format!("run of an unknown task {task:?}"))
    };
    let burst = |m: &rdkafka::message::BorrowedMessage<'_>| Ok(Some((index(m)?, None)));
    let paced = |m: &rdkafka::message::BorrowedMessage<'_>| {
        use rdkafka::Message;
        Ok(Some((
            index(m)?,
            issued_at(m.payload().unwrap_or_default())?,
        )))
    };
    let Phases {
        burst,
        throughput,
        steady,
        ..
    } = burst_then_steady(
        system,
        &producer,
        inputs,
        &t.ctl,
        &reader,
        plan,
        latency_rate,
        Readers {
            burst: &burst,
            paced: &paced,
        },
    )?;
    drop(reader);
    drop(producer);
    instance.stop(plan.timeout)?;

    // A change is one record in and one out.
    let records = 2.0 * burst.window_outputs as f64;
    let (cpu_per_record, cpu_by_thread) = burst.cpu_per_record(records);
    let measured = Measurement {
        window: burst.window,
        throughput: 2.0 * throughput,
        cpu_per_record,
        cpu_by_thread,
        latency: steady
            .as_ref()
            .and_then(|s| Summary::of(s.latencies.clone())),
        dispatch: steady
            .as_ref()
            .and_then(|s| Summary::of(s.dispatch.clone())),
        duplicates: burst.duplicates + steady.as_ref().map_or(0, |s| s.duplicates),
        setup,
    };
    Ok((measured, t))
}

/// Only a run command's `issued_at` (field 11 of `RunCommand` in
/// schemas/reactor.proto): the reader finds a run's change by its key, the
/// task id, and skips the rest of the command unread, as the baseline's
/// reader reads only the key. Decoding every command whole (strings, maps)
/// was harness work counted against Reactor's CPU per record.
#[derive(Clone, PartialEq, prost::Message)]
struct IssuedAt {
    #[prost(message, optional, tag = "11")]
    issued_at: Option<pbjson_types::Timestamp>,
}

/// The `issued_at` of the run command `payload`.
fn issued_at(payload: &[u8]) -> Result<Option<jiff::Timestamp>, String> {
    use prost::Message;
    let read = IssuedAt::decode(payload).map_err(|e| format!("not a run command: {e}"))?;
    Ok(read
        .issued_at
        .as_ref()
        .and_then(|t| codec::timestamp_from_proto(t).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_at_is_read_from_a_run_command() {
        let at: jiff::Timestamp = "2026-11-26T10:00:00.123456789Z".parse().unwrap();
        let run = crate::action::RunCommand {
            run_id: "t7#1".into(),
            attempt: 1,
            pass: 3,
            snapshot: Default::default(),
            params: Default::default(),
            deadline: at,
            source: None,
            key: "default".into(),
            topic: None,
        };
        let bytes = codec::encode_run_command(
            &run,
            "reactor.results",
            "default",
            at,
            codec::Format::Protobuf,
        );
        assert_eq!(issued_at(&bytes).unwrap(), Some(at));
        assert!(issued_at(b"\x0a\xff").is_err());
    }
}
