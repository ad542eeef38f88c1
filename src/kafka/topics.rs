//! Topic checks at start: create what is missing (the changelog and CTL compacted),
//! and refuse to run when co-partitioned topics disagree on partition count.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;

use super::{Clients, Error};
use crate::config::Config;

const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// Partition counts of every topic the cluster knows.
pub fn partition_counts(
    admin: &AdminClient<DefaultClientContext>,
    brokers: &str,
) -> Result<BTreeMap<String, i32>, Error> {
    let metadata = admin
        .inner()
        .fetch_metadata(None, METADATA_TIMEOUT)
        .map_err(|e| match e.rdkafka_error_code() {
            Some(RDKafkaErrorCode::OperationTimedOut) => Error::Timeout {
                what: "fetching cluster metadata".into(),
                brokers: brokers.to_string(),
                seconds: METADATA_TIMEOUT.as_secs(),
            },
            _ => Error::client("fetching cluster metadata", e),
        })?;
    Ok(metadata
        .topics()
        .iter()
        .filter(|t| t.error().is_none() && !t.partitions().is_empty())
        .map(|t| (t.name().to_string(), t.partitions().len() as i32))
        .collect())
}

/// Makes sure every topic Reactor uses exists (its own, the run topics of
/// tasks and stages, the offer topics) and that the co-partitioned ones
/// (results, commands, changelog, offer changes) have the same partition
/// count, which it returns: the number of shards.
pub async fn ensure(clients: &Clients, config: &Config) -> Result<i32, Error> {
    let admin: AdminClient<DefaultClientContext> = clients
        .base()
        .create()
        .map_err(|e| Error::client("creating the admin client", e))?;
    let k = &config.kafka;
    let t = &k.topics;
    let co = t.co_partitioned();
    let counts = partition_counts(&admin, &clients.brokers)?;
    let existing: BTreeSet<i32> = co.iter().filter_map(|n| counts.get(*n).copied()).collect();
    check_co_partitioned(&co, &counts)?;
    let shards = existing.first().copied().unwrap_or(k.partitions);

    let mut wanted: Vec<(String, i32, bool)> = vec![
        (t.results.clone(), shards, false),
        (t.commands.clone(), shards, false),
        (t.changelog.clone(), shards, true),
        (t.offers.clone(), shards, false),
        (t.ctl.clone(), k.partitions, true),
        (t.runs.clone(), k.partitions, false),
        (t.events.clone(), k.partitions, false),
        (t.dead.clone(), k.partitions, false),
        (t.offer_state.clone(), k.partitions, false),
    ];
    for task in config.tasks.iter() {
        if let Some(topic) = &task.extra().topic {
            wanted.push((topic.clone(), k.partitions, false));
        }
    }
    for topic in config
        .stage_topics()
        .into_iter()
        .chain(config.job_topics())
        .chain(config.event_topics())
    {
        wanted.push((topic.to_string(), k.partitions, false));
    }
    // One entry per name (a task or stage may reuse a standard topic as its
    // run topic); the first entry of a name wins, so a co-partitioned topic
    // keeps the shard count.
    let missing: Vec<(String, i32, bool)> = wanted
        .into_iter()
        .filter(|(name, _, _)| !counts.contains_key(name))
        .rev()
        .map(|(name, n, compact)| (name, (n, compact)))
        .collect::<BTreeMap<_, _>>()
        .into_iter()
        .map(|(name, (n, compact))| (name, n, compact))
        .collect();
    if !missing.is_empty() {
        let topics: Vec<NewTopic<'_>> = missing
            .iter()
            .map(|(name, n, compact)| {
                let topic = NewTopic::new(name, *n, TopicReplication::Fixed(k.replication_factor));
                if *compact {
                    topic.set("cleanup.policy", "compact")
                } else {
                    topic
                }
            })
            .collect();
        let results = admin
            .create_topics(topics.iter(), &AdminOptions::new())
            .await
            .map_err(|e| Error::client("creating missing topics", e))?;
        for result in results {
            if let Err((topic, code)) = result {
                if code != RDKafkaErrorCode::TopicAlreadyExists {
                    return Err(Error::Topic {
                        topic,
                        message: format!("missing, and creating it failed: {code}"),
                    });
                }
            }
            // Else: created, or another instance created it first.
        }
        tracing::info!(topics = ?missing.iter().map(|m| &m.0).collect::<Vec<_>>(), "created missing topics");
    }
    // Topic creation propagates asynchronously; wait until metadata shows it.
    for _ in 0..50 {
        let counts = partition_counts(&admin, &clients.brokers)?;
        if co.iter().all(|n| counts.contains_key(*n)) {
            check_co_partitioned(&co, &counts)?;
            return Ok(counts[t.results.as_str()]);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(Error::Topic {
        topic: t.results.clone(),
        message: "not visible in cluster metadata after creation".into(),
    })
}

fn check_co_partitioned(co: &[&str], counts: &BTreeMap<String, i32>) -> Result<(), Error> {
    let present: Vec<(&str, i32)> = co
        .iter()
        .filter_map(|n| counts.get(*n).map(|c| (*n, *c)))
        .collect();
    let distinct: BTreeSet<i32> = present.iter().map(|(_, c)| *c).collect();
    if distinct.len() > 1 {
        return Err(Error::CoPartition {
            counts: present
                .iter()
                .map(|(n, c)| format!("{n}={c}"))
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(())
}
