//! The example worker for examples/dev.toml, on the reactor-worker crate:
//! the same targets as examples/workers/worker.py.
//!
//! Tasks: `load_orders` "loads" the raw hour it was given and, as a loader
//! does, publishes the warehouse parameter it produces (`dwh.orders/max_dt`)
//! to the CTL topic; `orders_report` and `dashboard` just log. Stages:
//! `expire` takes an offer down; `price` predicts a price and keeps the model
//! version and the price it saw in its state (a negative price fails the
//! run, to show retries).
//!
//! ```text
//! cargo run -p reactor-worker --example worker -- --brokers localhost:9092
//!   [--group reactor-example-worker] [--ctl-topic ctl.changes] [--topic T]…
//! ```

use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use reactor_worker::proto::CtlChange;
use reactor_worker::{shutdown_signal, HandlerError, StageResult, Worker};
use serde_json::{json, Value};

/// The model version the price stage predicts with.
const MODEL: i64 = 3;

struct Args {
    brokers: String,
    group: String,
    ctl_topic: String,
    topics: Vec<String>,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        brokers: std::env::var("REACTOR_BROKERS").unwrap_or_else(|_| "localhost:9092".into()),
        group: "reactor-example-worker".into(),
        ctl_topic: "ctl.changes".into(),
        topics: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--brokers" => a.brokers = value,
            "--group" => a.group = value,
            "--ctl-topic" => a.ctl_topic = value,
            "--topic" => a.topics.push(value),
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    Ok(a)
}

/// The price factor of a category.
fn factor(category: Option<&str>) -> f64 {
    match category {
        Some("sport") => 0.95,
        Some("home") => 1.08,
        Some("electronics") => 0.9,
        _ => 1.0,
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = args()?;
    let ctl: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &args.brokers)
        .set("partitioner", "murmur2_random")
        .set("enable.idempotence", "true")
        .create()?;
    let ctl = Arc::new((ctl, args.ctl_topic.clone()));

    let mut worker = Worker::new(&args.brokers, &args.group)
        .task("load_orders", move |run| {
            let ctl = Arc::clone(&ctl);
            async move {
                let loaded = run
                    .snapshot
                    .get("raw.orders/max_dt")
                    .copied()
                    .ok_or("no raw.orders/max_dt in the snapshot")?;
                tracing::info!(run_id = run.run.run_id, %loaded, "loading raw orders");
                let change = CtlChange {
                    entity: "dwh.orders".into(),
                    param: "max_dt".into(),
                    value: Some(pbjson_types::Timestamp {
                        seconds: loaded.as_second(),
                        nanos: loaded.subsec_nanosecond(),
                    }),
                    source: "example-worker".into(),
                    ..Default::default()
                };
                let (producer, topic) = &*ctl;
                let payload = change.encode_to_vec();
                let record = FutureRecord::to(topic)
                    .key("dwh.orders/max_dt")
                    .payload(&payload);
                // Not published: the run fails and is retried.
                producer
                    .send(record, Duration::from_secs(10))
                    .await
                    .map_err(|(e, _)| -> HandlerError {
                        format!("publishing dwh.orders/max_dt: {e}").into()
                    })?;
                Ok(())
            }
        })
        .task("orders_report", |run| async move {
            tracing::info!(run_id = run.run.run_id, snapshot = ?run.snapshot, "report");
            Ok(())
        })
        .task("dashboard", |run| async move {
            tracing::info!(run_id = run.run.run_id, "dashboard refreshed");
            Ok(())
        })
        .stage("expire", |run| async move {
            tracing::info!(run_id = run.run.run_id, offer = run.offer_id, "expires");
            Ok(StageResult {
                update: json!({"status": "expired"}).as_object().cloned(),
                ..Default::default()
            })
        })
        .stage("price", |run| async move {
            let price = run
                .offer
                .get("price")
                .and_then(Value::as_f64)
                .ok_or("the offer has no numeric price")?;
            if price < 0.0 {
                return Err(format!("negative price {price}").into());
            }
            let category = run.offer.get("category").and_then(Value::as_str);
            let predicted = (price * factor(category) * 1.1).round();
            tracing::info!(run_id = run.run.run_id, price, predicted, "priced");
            Ok(StageResult {
                update: json!({"price_predicted": predicted}).as_object().cloned(),
                state: Some(json!({"model": MODEL, "price": run.offer["price"]})),
                ..Default::default()
            })
        });
    if !args.topics.is_empty() {
        worker = worker.topics(args.topics);
    }
    worker.run(shutdown_signal()).await?;
    Ok(())
}
