//! A producer and a consumer beside Reactor, as the README's "Producers and
//! consumers" shows them: a CTL change and an offer change in, Reactor's
//! events out (read_committed, protobuf or JSON).
//!
//! ```text
//! cargo run -p reactor-worker --example clients -- produce localhost:9092
//! cargo run -p reactor-worker --example clients -- consume localhost:9092
//! ```

use std::time::Duration;

use prost::Message as _;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message};
use reactor_worker::proto::{CtlChange, Event, OfferChange};
use serde_json::json;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

async fn produce(brokers: &str) -> Result<()> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("partitioner", "murmur2_random") // the partition Reactor expects
        .set("enable.idempotence", "true")
        .create()?;
    let change = CtlChange {
        entity: "dwh.orders".into(),
        param: "max_dt".into(),
        // 2024-05-01T00:00:00Z
        value: Some(pbjson_types::Timestamp {
            seconds: 1_714_521_600,
            nanos: 0,
        }),
        source: "orders-loader".into(),
        ..Default::default()
    };
    let payload = change.encode_to_vec();
    producer
        .send(
            FutureRecord::to("ctl.changes")
                .key("dwh.orders/max_dt")
                .payload(&payload),
            Duration::from_secs(10),
        )
        .await
        .map_err(|(e, _)| e)?;
    let offer = OfferChange {
        offer_id: "o-1".into(),
        // A merge patch: `null` removes a field. Or `body`, or `deleted`.
        patch: serde_json::from_value(json!({"price": 120, "promo": null}))?,
        ..Default::default()
    };
    let payload = offer.encode_to_vec();
    producer
        .send(
            FutureRecord::to("offer.changes")
                .key("o-1")
                .payload(&payload),
            Duration::from_secs(10),
        )
        .await
        .map_err(|(e, _)| e)?;
    println!("produced a CTL change and an offer change");
    Ok(())
}

async fn consume(brokers: &str) -> Result<()> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "reactor-alerts")
        .set("isolation.level", "read_committed") // only what Reactor committed
        .set("auto.offset.reset", "earliest")
        .create()?;
    consumer.subscribe(&["reactor.events"])?;
    loop {
        let m = consumer.recv().await?;
        let value = m.payload().unwrap_or_default();
        let event: Event = if value.first() == Some(&b'{') {
            serde_json::from_slice(value)? // proto3 JSON ([kafka.formats] events = "json")
        } else {
            Event::decode(value)?
        };
        println!("{}", serde_json::to_string(&event)?);
        if event.kind == "dead" {
            eprintln!(
                "dead: {} {}",
                event.task,
                event.error.clone().unwrap_or_default()
            );
        }
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["produce", brokers] => produce(brokers).await,
        ["consume", brokers] => consume(brokers).await,
        _ => Err("usage: clients produce|consume BROKERS".into()),
    }
}
