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
use crate::engine::Input;
use crate::metrics;
use crate::router::Route;

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
        match self.router.route(&input, p) {
            Route::To(owner) if owner == p => {}
            Route::To(owner) => {
                self.forward(p, owner, &topic, m.key(), m.payload().map(<[u8]>::to_vec));
                return Ok(());
            }
            Route::Split(parts) => {
                // A launch for keys of several partitions: each part goes to
                // its owner (this shard's own part is applied here), all in
                // this shard's transaction.
                let format = crate::codec::Format::Protobuf;
                let mut local = None;
                for (owner, command) in parts {
                    if owner == p {
                        local = Some(command);
                    } else {
                        let payload = codec::encode_command(&command, format);
                        self.forward(p, owner, &topic, m.key(), Some(payload));
                    }
                }
                match local {
                    Some(command) => return self.apply(p, m, Input::Command(command)),
                    None => return Ok(()),
                }
            }
        }
        self.apply(p, m, input)
    }

    /// Forwards a record that arrived on partition `from` to the partition
    /// `to` that owns its key, in `from`'s transaction.
    fn forward(
        &mut self,
        from: i32,
        to: i32,
        topic: &str,
        key: Option<&[u8]>,
        payload: Option<Vec<u8>>,
    ) {
        tracing::debug!(
            topic,
            from,
            to,
            "forwarding a record to the partition that owns its key"
        );
        if let Some(shard) = self.shards.get_mut(&from) {
            shard.pending.push(OutRecord {
                topic: topic.to_string(),
                partition: Some(to),
                key: key.unwrap_or_default().to_vec(),
                payload,
                headers: Vec::new(),
            });
        }
    }

    /// Applies `input` (from record `m`) to shard `p`, which owns it.
    fn apply(&mut self, p: i32, m: &OwnedMessage, input: Input) -> Result<(), Error> {
        let now = self.now();
        let settings = &self.options.config.kafka;
        let Some(shard) = self.shards.get_mut(&p) else {
            return Ok(());
        };
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
