//! One Reactor instance as a service: metrics, the admin API, topic checks,
//! and the supervised runtime, until a shutdown signal.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::admin::{self, AdminState};
use crate::clock::Clock;
use crate::config::Config;
use crate::kafka::{self, Clients};
use crate::runtime::{supervisor, Options};

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
    /// Time source.
    pub clock: Arc<dyn Clock>,
}

/// Runs an instance until `shutdown` completes (or a fatal error).
pub async fn serve(settings: Settings, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
    let handle = crate::metrics::install()?;
    let ready = Arc::new(AtomicBool::new(false));
    let (queries_tx, queries_rx) = mpsc::channel(64);
    let (stop_admin, admin_stopped) = watch::channel(false);
    let listener = tokio::net::TcpListener::bind(settings.admin)
        .await
        .map_err(|source| Error::Admin {
            addr: settings.admin,
            source,
        })?;
    let state = AdminState {
        ready: Arc::clone(&ready),
        metrics: handle,
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
            return Ok(());
        }
    };
    let options = Options {
        config: Arc::clone(&settings.config),
        clients,
        instance_id: settings.instance_id.clone(),
        partitions,
        clock: settings.clock,
        ready,
        queries: Arc::new(Mutex::new(queries_rx)),
        shutdown: Arc::new(AtomicBool::new(false)),
        crash: Arc::new(AtomicBool::new(false)),
    };
    let stop = Arc::clone(&options.shutdown);
    let runtime = supervisor::spawn(options);
    tracing::info!(
        instance = settings.instance_id,
        brokers = settings.brokers,
        partitions,
        exactly_once = settings.config.kafka.exactly_once,
        "reactor started"
    );
    // Wait for the signal, or for the runtime to end on its own (a fatal error).
    let mut watch_runtime = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            _ = watch_runtime.tick() => if runtime.is_finished() { break },
        }
    }
    stop.store(true, Ordering::Relaxed);
    let result = tokio::task::spawn_blocking(move || runtime.join())
        .await
        .unwrap_or(Err(kafka::Error::Crashed));
    let _ = stop_admin.send(true);
    let _ = admin_task.await;
    tracing::info!("reactor stopped");
    Ok(result?)
}

/// Checks and creates topics, retrying while the brokers are unreachable.
async fn ensure_topics(clients: &Clients, config: &Config) -> Result<i32, kafka::Error> {
    let mut backoff = Duration::from_millis(200);
    loop {
        match kafka::topics::ensure(clients, config).await {
            Ok(n) => return Ok(n),
            Err(e) if e.is_retryable() => {
                crate::metrics::BrokerUnavailable { error: &e }.emit();
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(10));
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
