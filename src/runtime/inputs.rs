//! Inputs: offer changes, worker results and operator commands from the
//! group, CTL changes from the global table. Undecodable records become dead
//! letters; records that reached the wrong partition (a producer without the
//! murmur2 partitioner) are forwarded to the owning one in the same
//! transaction.

use std::time::Duration;

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::OwnedMessage;
use rdkafka::Message;

use super::output::{self, OutRecord};
use super::{Error, Runtime, MAX_DEFERRED_DEAD, MAX_POLL_BATCH};
use crate::codec;
use crate::engine::{is_stage_run_id, parse_stage_run_id, Input, Target};
use crate::kafka::partition_for;
use crate::metrics;

impl Runtime {
    /// Handles up to a batch of group inputs; returns how many came.
    pub(super) fn poll_group(&mut self, timeout: Duration) -> Result<usize, Error> {
        let mut wait = timeout;
        let mut n = 0;
        for _ in 0..MAX_POLL_BATCH {
            let message = match self.group.poll(wait) {
                None => break,
                Some(Ok(m)) => m.detach(),
                Some(Err(KafkaError::PartitionEOF(_))) => continue,
                Some(Err(e)) => {
                    metrics::BrokerUnavailable { error: &e }.emit();
                    break;
                }
            };
            wait = Duration::ZERO;
            n += 1;
            self.on_input(&message)?;
        }
        Ok(n)
    }

    fn on_input(&mut self, m: &OwnedMessage) -> Result<(), Error> {
        // A rebalance seen inside the poll must be handled before its partitions' records.
        if self.group.context().pending() {
            self.handle_ownership()?;
        }
        let p = m.partition();
        if !self.shards.contains_key(&p) {
            return Ok(());
        }
        let topic = m.topic().to_string();
        self.offsets.insert((topic.clone(), p), m.offset() + 1);
        metrics::record_consumed(&topic, 1);
        let topics = &self.options.config.kafka.topics;
        let decoded = if topic == topics.offers {
            codec::decode_offer_change(m.key(), m.payload()).map(Input::Offer)
        } else {
            let payload = m.payload().unwrap_or_default();
            if topic == topics.results {
                codec::decode_run_result(payload).map(Input::Result)
            } else {
                codec::decode_command(payload).map(Input::Command)
            }
        };
        let input = match decoded {
            Ok(input) => input,
            Err(e) => {
                let reason = e.to_string();
                metrics::DeadLetter {
                    topic: &topic,
                    partition: p,
                    offset: m.offset(),
                    reason: &reason,
                }
                .emit();
                let dead = output::dead_letter(
                    &self.options.config.kafka,
                    (&topic, p, m.offset()),
                    m.key(),
                    m.payload(),
                    &reason,
                );
                self.shards
                    .get_mut(&p)
                    .expect("checked above")
                    .pending
                    .push(dead);
                return Ok(());
            }
        };
        let owner = self.owner(&input, p);
        if owner != p {
            let forward = OutRecord {
                topic: topic.clone(),
                partition: Some(owner),
                key: m.key().unwrap_or_default().to_vec(),
                payload: m.payload().map(<[u8]>::to_vec),
                headers: Vec::new(),
            };
            tracing::debug!(
                topic,
                from = p,
                to = owner,
                "forwarding a record to the partition that owns its key"
            );
            self.shards
                .get_mut(&p)
                .expect("checked above")
                .pending
                .push(forward);
            return Ok(());
        }
        let now = self.now();
        let settings = &self.options.config.kafka;
        let shard = self.shards.get_mut(&p).expect("checked above");
        let success = match &input {
            Input::Result(r) if r.status == crate::run::Status::Succeeded => {
                Some((shard.engine.run_kind(&r.run_id), r.run_id.clone(), r.pass))
            }
            _ => None,
        };
        let actions = match shard.engine.apply(input, now) {
            Ok(actions) => actions,
            Err(e) => return self.engine_failed(p, m, &e),
        };
        metrics::record_actions(p, &actions);
        if let Some((kind, run_id, pass)) = success {
            metrics::record_success(kind, &run_id, pass, &actions);
        }
        if let Some(at) = input_time(m) {
            metrics::record_dispatch_latency(&actions, at, now);
        }
        output::encode(&actions, p, settings, now, &mut shard.pending);
        Ok(())
    }

    /// The shard that owns `input`, which arrived on partition `arrived`:
    /// offers (and their stage results and commands) by the offer id's
    /// murmur2 partition, tasks by their pool's, and a shard-wide command
    /// (a rescan, sent to every partition) by where it arrived. A result or
    /// command naming an unknown task stays where it arrived: its shard
    /// rejects it.
    fn owner(&self, input: &Input, arrived: i32) -> i32 {
        let partitions = self.options.partitions;
        let offer = |id: &str| partition_for(id.as_bytes(), partitions);
        let task = |id: &str| self.owners.get(id).copied().unwrap_or(arrived);
        match input {
            Input::Offer(change) => offer(&change.offer_id),
            Input::Result(r) => {
                if let Some((_, id)) = parse_stage_run_id(&r.run_id) {
                    offer(id)
                } else if is_stage_run_id(&r.run_id) {
                    arrived
                } else {
                    crate::run::parse_run_id(&r.run_id).map_or(arrived, |(t, _)| task(t))
                }
            }
            Input::Command(c) => match c.target() {
                Target::Task(t) => task(t),
                Target::Offer(id) => offer(id),
                Target::Shard => arrived,
            },
            Input::Ctl { .. } => arrived,
        }
    }

    /// Applies up to a batch of CTL changes; returns how many came.
    pub(super) fn poll_ctl(&mut self) -> Result<usize, Error> {
        let mut n = 0;
        for _ in 0..MAX_POLL_BATCH {
            match self.ctl.poll(Duration::ZERO) {
                None => break,
                Some(Ok(m)) => {
                    let m = m.detach();
                    n += 1;
                    self.on_ctl(&m)?;
                }
                Some(Err(KafkaError::PartitionEOF(_))) => {}
                Some(Err(e)) => {
                    metrics::BrokerUnavailable { error: &e }.emit();
                    break;
                }
            }
        }
        Ok(n)
    }

    /// Applies one CTL change to the table and to every owned shard.
    pub(super) fn on_ctl(&mut self, m: &OwnedMessage) -> Result<(), Error> {
        let topic = m.topic();
        metrics::record_consumed(topic, 1);
        let Some(payload) = m.payload() else {
            // A tombstone removes nothing: a parameter's value never disappears.
            return Ok(());
        };
        let change = match codec::decode_ctl_change(payload) {
            Ok(change) => change,
            Err(e) => {
                // Every instance reads every CTL record; the owner of the
                // matching shard reports it, so the dead letter is written once
                // (at least once if that shard moves before it is reported).
                let owner = m.partition() % self.options.partitions;
                let reason = e.to_string();
                metrics::DeadLetter {
                    topic,
                    partition: m.partition(),
                    offset: m.offset(),
                    reason: &reason,
                }
                .emit();
                let dead = output::dead_letter(
                    &self.options.config.kafka,
                    (topic, m.partition(), m.offset()),
                    m.key(),
                    m.payload(),
                    &reason,
                );
                match self.shards.get_mut(&owner) {
                    Some(shard) => shard.pending.push(dead),
                    None => {
                        let waiting = self.deferred_dead.entry(owner).or_default();
                        if waiting.len() < MAX_DEFERRED_DEAD {
                            waiting.push(dead);
                        }
                    }
                }
                return Ok(());
            }
        };
        let id = match self.table.id(&change.entity, &change.param) {
            Some(id) => id,
            None => self.table.intern(&crate::ctl::ParamName::new(
                change.entity.clone(),
                change.param.clone(),
            )),
        };
        self.table.set(id, change.value);
        let now = self.now();
        let settings = &self.options.config.kafka;
        let at = input_time(m);
        let mut failed = Vec::new();
        for (&p, shard) in &mut self.shards {
            let actions =
                match shard
                    .engine
                    .apply_ctl(&change.entity, &change.param, change.value, now)
                {
                    Ok(actions) => actions,
                    Err(e) => {
                        failed.push((p, e));
                        continue;
                    }
                };
            if actions.is_empty() {
                continue;
            }
            metrics::record_actions(p, &actions);
            if let Some(at) = at {
                metrics::record_dispatch_latency(&actions, at, now);
            }
            output::encode(&actions, p, settings, now, &mut shard.pending);
        }
        for (p, e) in failed {
            // Triggers are level-based: the rebuilt shard sees this value in
            // the table and its start evaluates what it affects again.
            metrics::EngineFailed {
                partition: p,
                topic,
                offset: m.offset(),
                error: &e,
            }
            .emit();
            self.rebuild_shard(p)?;
        }
        Ok(())
    }

    /// Shard `p` broke an invariant on input `m`: the input is dead-lettered
    /// with the reason, and the shard is rebuilt from its changelog (the
    /// committed records and this batch's), i.e. as it was before the input.
    fn engine_failed(
        &mut self,
        p: i32,
        m: &OwnedMessage,
        e: &crate::engine::Error,
    ) -> Result<(), Error> {
        let reason = e.to_string();
        metrics::EngineFailed {
            partition: p,
            topic: m.topic(),
            offset: m.offset(),
            error: e,
        }
        .emit();
        self.rebuild_shard(p)?;
        let dead = output::dead_letter(
            &self.options.config.kafka,
            (m.topic(), p, m.offset()),
            m.key(),
            m.payload(),
            &reason,
        );
        if let Some(shard) = self.shards.get_mut(&p) {
            shard.pending.push(dead);
        }
        Ok(())
    }
}

/// When the input was produced (its Kafka timestamp), for latency metrics.
fn input_time(m: &OwnedMessage) -> Option<jiff::Timestamp> {
    m.timestamp()
        .to_millis()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
}
