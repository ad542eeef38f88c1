//! `reactor dev`: Reactor on its embedded default. librdkafka's mock cluster
//! runs in-process, a demo producer moves CTL parameters, another publishes
//! offer changes, demo workers answer task runs (and publish the data their
//! task produces) and stage runs, and every decision is printed as it is
//! committed: run commands, events and offer states. The admin API serves as
//! usual.

mod demo;
mod offers;
mod payouts;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::mocking::MockCluster;

use crate::clock::SystemClock;
use crate::config::{self, Config};
use crate::service::{self, Settings};

/// The embedded demo configuration (`examples/dev.toml`).
pub const DEV_CONFIG: &str = include_str!("../../examples/dev.toml");

/// Why `reactor dev` stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The mock cluster could not start.
    #[error("mock cluster: {0}")]
    Mock(rdkafka::error::KafkaError),
    /// The configuration is invalid.
    #[error("{0}")]
    Config(#[from] config::Error),
    /// The service failed.
    #[error("{0}")]
    Service(#[from] service::Error),
}

/// Options of `reactor dev`.
pub struct DevOptions {
    /// Configuration text and its origin (default: the embedded demo).
    pub config: Option<(String, String)>,
    /// Admin API address.
    pub admin: std::net::SocketAddr,
    /// Stop after this long (default: until Ctrl-C).
    pub duration: Option<Duration>,
}

/// Runs the demo until Ctrl-C (or `duration`).
pub fn run(options: DevOptions) -> Result<(), Error> {
    let (text, origin) = options.config.unwrap_or_else(|| {
        (
            DEV_CONFIG.to_string(),
            "examples/dev.toml (embedded)".into(),
        )
    });
    let loaded = config::parse(&text, &origin)?;
    for w in &loaded.warnings {
        eprintln!("{w}");
    }
    let mut config = loaded.config;
    let mock = MockCluster::new(1).map_err(Error::Mock)?;
    let brokers = mock.bootstrap_servers();
    config.kafka.brokers = Some(brokers.clone());
    create_topics(&mock, &config)?;
    println!(
        "reactor dev: mock Kafka cluster at {brokers}; admin API on http://{}",
        options.admin
    );
    println!(
        "  try: curl -s http://{}/tasks | python3 -m json.tool",
        options.admin
    );
    println!(
        "       curl -s http://{}/tasks/orders_report",
        options.admin
    );
    if !config.stages.is_empty() {
        println!("       curl -s http://{}/stages", options.admin);
        println!("       curl -s http://{}/offers/o-1001", options.admin);
    }
    if !config.processes.is_empty() {
        println!("       curl -s http://{}/jobs", options.admin);
        println!(
            "       curl -s http://{}/processes/payout/u-1",
            options.admin
        );
    }
    let config = Arc::new(config);
    let stop = Arc::new(AtomicBool::new(false));
    let demo = demo::start(&brokers, &config, Arc::clone(&stop));

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let settings = Settings {
        config: Arc::clone(&config),
        brokers,
        admin: options.admin,
        instance_id: "dev".into(),
        task_age_series: crate::metrics::DEFAULT_SERIES,
        clock: Arc::new(SystemClock),
    };
    let duration = options.duration;
    let result = runtime.block_on(service::serve(settings, async move {
        match duration {
            Some(d) => tokio::select! {
                () = tokio::time::sleep(d) => {}
                () = service::signal() => {}
            },
            None => service::signal().await,
        }
    }));
    stop.store(true, Ordering::Relaxed);
    demo.join();
    drop(mock);
    Ok(result?)
}

fn create_topics(
    mock: &MockCluster<'static, rdkafka::producer::DefaultProducerContext>,
    config: &Config,
) -> Result<(), Error> {
    let k = &config.kafka;
    let t = &k.topics;
    // The co-partitioned inputs (one shard per partition) and the CTL table.
    let mut partitioned = t.co_partitioned().to_vec();
    partitioned.push(&t.ctl);
    for topic in &partitioned {
        mock.create_topic(topic, k.partitions, 1)
            .map_err(Error::Mock)?;
    }
    // Everything else (outputs, run topics) with one partition.
    let mut others: Vec<&str> = t
        .all()
        .into_iter()
        .map(|(_, name)| name)
        .filter(|name| !partitioned.contains(name))
        .collect();
    others.extend(
        config
            .tasks
            .iter()
            .filter_map(|t| t.def.extra().topic.as_deref()),
    );
    others.extend(config.stage_topics());
    others.extend(config.job_topics());
    others.sort_unstable();
    others.dedup();
    for topic in others {
        mock.create_topic(topic, 1, 1).map_err(Error::Mock)?;
    }
    Ok(())
}
