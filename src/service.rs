//! One Reactor instance as a service: metrics, the admin API, topic checks,
//! and the supervised runtime, until a shutdown signal.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::admin::{self, AdminState};
use crate::clock::Clock;
use crate::config::Config;
use crate::kafka::{self, Clients};
use crate::metrics::TaskAges;
use crate::runtime::backoff::Backoff;
use crate::runtime::health::Readiness;
use crate::runtime::stop::{Stop, StopKind};
use crate::runtime::{supervisor, Options};

/// How long a shutdown waits for the runtime's last commit. A graceful
/// stop takes milliseconds; a runtime stuck in a call to an unreachable
/// broker is not waited for: the process ends as a killed one would, which
/// loses nothing (the open transaction is aborted, its inputs redone).
pub const SHUTDOWN_GRACE: Duration = Duration::from_millis(1500);

/// Why the service stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Kafka refused something that retrying will not fix.
    #[error("{0}")]
    Kafka(#[from] kafka::Error),
    /// The admin API could not listen.
    #[error("admin API on {addr}: {source}")]
    Admin {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The metrics recorder could not be installed.
    #[error("metrics: {0}")]
    Metrics(#[from] crate::metrics::Error),
    /// The runtime's threads could not be started.
    #[error("starting the runtime: {0}")]
    Spawn(std::io::Error),
}

/// What an instance needs.
pub struct Settings {
    /// Tasks and `[kafka]`.
    pub config: Arc<Config>,
    /// Bootstrap servers.
    pub brokers: String,
    /// Admin API address.
    pub admin: SocketAddr,
    /// This instance's stable name.
    pub instance_id: String,
    /// Most tasks exported in `reactor_task_seconds_since_success`.
    pub task_age_series: usize,
    /// Time source.
    pub clock: Arc<dyn Clock>,
}

/// Runs an instance until `shutdown` completes (or a fatal error). A
/// shutdown is honoured within [`SHUTDOWN_GRACE`] at any moment: while
/// topics are checked, the CTL table loads, shards restore, or a broker
/// call hangs.
pub async fn serve(settings: Settings, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
    let handle = crate::metrics::install()?;
    let readiness = Readiness::new();
    let task_ages = TaskAges::new(settings.task_age_series);
    let (queries_tx, queries_rx) = mpsc::channel(64);
    let (stop_admin, admin_stopped) = watch::channel(false);
    let listener = tokio::net::TcpListener::bind(settings.admin)
        .await
        .map_err(|source| Error::Admin {
            addr: settings.admin,
            source,
        })?;
    let state = AdminState {
        readiness: Arc::clone(&readiness),
        metrics: handle,
        task_ages: Arc::clone(&task_ages),
        queries: queries_tx,
    };
    let admin_task = tokio::spawn(admin::serve(listener, state, async move {
        let mut stopped = admin_stopped;
        let _ = stopped.wait_for(|s| *s).await;
    }));
    let clients = Clients {
        brokers: settings.brokers.clone(),
        librdkafka: settings.config.kafka.librdkafka.clone(),
    };
    tokio::pin!(shutdown);
    let partitions = tokio::select! {
        p = ensure_topics(&clients, &settings.config) => p?,
        () = &mut shutdown => {
            let _ = stop_admin.send(true);
            let _ = admin_task.await;
            return Ok(());
        }
    };
    let stop = Stop::new();
    let options = Options {
        config: Arc::clone(&settings.config),
        clients,
        instance_id: settings.instance_id.clone(),
        partitions,
        clock: settings.clock,
        readiness,
        task_ages,
        queries: Arc::new(Mutex::new(queries_rx)),
        stop: stop.clone(),
    };
    let runtime = supervisor::spawn(options).map_err(Error::Spawn)?;
    tracing::info!(
        instance = settings.instance_id,
        brokers = settings.brokers,
        partitions,
        exactly_once = settings.config.kafka.exactly_once,
        "reactor started"
    );
    // Wait for the signal, or for the runtime to end on its own (a fatal error).
    let mut watch_runtime = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            _ = watch_runtime.tick() => if runtime.is_finished() { break },
        }
    }
    stop.request(StopKind::Shutdown);
    let until = Instant::now() + SHUTDOWN_GRACE;
    while !runtime.is_finished() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let result = if runtime.is_finished() {
        runtime.join()
    } else {
        tracing::warn!(
            grace = ?SHUTDOWN_GRACE,
            "the runtime did not stop in time (a broker call hangs); exiting without its last commit"
        );
        // Dropping the handle leaves its threads to the process's end.
        Ok(())
    };
    let _ = stop_admin.send(true);
    let _ = admin_task.await;
    tracing::info!("reactor stopped");
    Ok(result?)
}

/// Checks and creates topics, retrying while the brokers are unreachable.
/// The checks block on broker calls (metadata, up to seconds when a broker
/// hangs), so they run on a thread of their own: a shutdown does not wait
/// for them.
async fn ensure_topics(clients: &Clients, config: &Arc<Config>) -> Result<i32, kafka::Error> {
    let mut backoff = Backoff::default();
    loop {
        let (done, result) = tokio::sync::oneshot::channel();
        let (clients, config) = (clients.clone(), Arc::clone(config));
        std::thread::Builder::new()
            .name("reactor-topics".into())
            .spawn(move || {
                let checked = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| kafka::Error::Topic {
                        topic: String::new(),
                        message: format!("cannot start a runtime to check topics: {e}"),
                    })
                    .and_then(|rt| rt.block_on(kafka::topics::ensure(&clients, &config)));
                let _ = done.send(checked);
            })
            .map_err(|e| kafka::Error::Topic {
                topic: String::new(),
                message: format!("cannot start a thread to check topics: {e}"),
            })?;
        let checked = result.await.unwrap_or(Err(kafka::Error::Crashed));
        match checked {
            Ok(n) => return Ok(n),
            Err(e) if e.is_retryable() => {
                crate::metrics::BrokerUnavailable { error: &e }.emit();
                tokio::time::sleep(backoff.next_delay()).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Completes on SIGINT or SIGTERM.
pub async fn signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
    tracing::info!("shutdown requested");
}
