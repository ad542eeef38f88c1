//! The failover workload (DESIGN §3 and §13, failover): three instances in
//! one group under steady load, one stopped without a clean shutdown (no
//! commit, no leaving the group, its transaction left open) and restarted
//! with the same instance id. It needs a broker with static membership and
//! real transactions (kfake, Apache Kafka): librdkafka's mock cluster makes
//! a rejoining instance a new member.
//!
//! Every input is a new offer `o{i}` (no stages), so each change makes
//! exactly one `OfferState` (version 1) on the partition of its shard; a
//! `read_committed` reader sees each one once or the run lost or duplicated
//! it. Measured:
//! - others paused: the longest time the shards of the instances that were
//!   not stopped committed nothing, from the stop until the moved shards
//!   committed again (next to the longest such gap before the stop: the
//!   commit interval's rhythm);
//! - moved shards resumed: from the restart to the first output, for an
//!   input produced after the stop, of a shard the stopped instance owned;
//! - lost and duplicated outputs.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::Message;

use super::cluster::{self, Cluster, Pace};
use super::instance::{self, Instance};
use super::offers;
use super::{join_within, Error, Plan};
use crate::codec;

/// Instances in the group.
const INSTANCES: usize = 3;
/// Steady load before the stop.
const BEFORE: Duration = Duration::from_secs(5);
/// How long the stopped instance stays down (a pod restart).
const DOWN: Duration = Duration::from_secs(2);
/// Steady load after the restart.
const AFTER: Duration = Duration::from_secs(8);

/// What the failover workload measured.
#[derive(Debug, Clone)]
pub struct FailoverMeasurement {
    /// Instances in the group.
    pub instances: usize,
    /// Input rate, changes per second.
    pub rate: f64,
    /// Changes produced.
    pub changes: usize,
    /// The shards the stopped instance owned.
    pub moved: Vec<i32>,
    /// Longest time the other instances' shards committed nothing, from the
    /// stop until the moved shards resumed.
    pub others_paused: Duration,
    /// The same before the stop (the rhythm of commits).
    pub steady_gap: Duration,
    /// Restart → the first output of a moved shard.
    pub resumed: Duration,
    /// Restart → the restarted instance ready.
    pub ready: Duration,
    /// Inputs without an output.
    pub lost: usize,
    /// Outputs seen more than once.
    pub duplicated: usize,
}

impl std::fmt::Display for FailoverMeasurement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "failover: others paused {:.2} s, moved shards resumed {:.1} s after restart, lost {}, duplicated {}",
            self.others_paused.as_secs_f64(),
            self.resumed.as_secs_f64(),
            self.lost,
            self.duplicated
        )
    }
}

/// One output seen: its input, partition and arrival.
struct Arrival {
    index: usize,
    partition: i32,
    at: Instant,
}

/// Runs the failover workload (see the module docs).
pub(super) fn measure(
    cluster: &Cluster,
    plan: &Plan,
    rate: f64,
) -> Result<FailoverMeasurement, Error> {
    if cluster.is_mock() {
        return Err(Error::Args(
            "--workload failover needs --brokers HOST:PORT of a broker with static membership \
             and transactions (kfake, Apache Kafka): the mock cluster makes a rejoining \
             instance a new member"
                .into(),
        ));
    }
    let config = offers::config(0, "failover")?;
    let config = Arc::new(instance::prepare(cluster, config, plan, true, "failover")?);
    let ids: Vec<String> = (1..=INSTANCES).map(|i| format!("f{i}")).collect();
    let mut instances: Vec<Option<Instance>> = Vec::new();
    for id in &ids {
        instances.push(Some(instance::start(
            cluster,
            &config,
            id,
            plan.partitions,
        )?));
    }
    wait_spread(&mut instances, plan)?;
    tracing::info!(instances = INSTANCES, "failover: group formed; steady load");

    let total = BEFORE + DOWN + AFTER;
    let n = (rate * total.as_secs_f64()).ceil() as usize;
    let inputs = Arc::new(offers::inputs(n));
    let topics = config.kafka.topics.clone();
    let consumer = cluster.assigned(
        &[&topics.offer_state],
        &format!("{}-failover-reader", topics.offer_state),
    )?;
    let arrivals = Arc::new(Mutex::new(Vec::<Arrival>::with_capacity(n)));
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (arrivals, done) = (Arc::clone(&arrivals), Arc::clone(&done));
        std::thread::spawn(move || -> Result<(), Error> {
            while !done.load(Ordering::Relaxed) {
                let Some(Ok(m)) = consumer.poll(Duration::from_millis(50)) else {
                    continue;
                };
                let (state, _) = codec::decode_offer_state(m.payload().unwrap_or_default())
                    .map_err(|e| Error::Failed {
                        what: "reading the offer states".into(),
                        message: e.to_string(),
                    })?;
                if let Some(index) = offers::offer_index(&state.offer) {
                    let arrival = Arrival {
                        index,
                        partition: m.partition(),
                        at: Instant::now(),
                    };
                    arrivals
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(arrival);
                }
            }
            Ok(())
        })
    };
    let producer = Arc::new(cluster.producer()?);
    let started = Instant::now();
    let produced = cluster::produce(
        producer,
        Arc::clone(&inputs),
        topics.offers.clone(),
        0..n,
        Pace::Rate(rate),
        total + plan.timeout,
        None,
    );

    std::thread::sleep(BEFORE);
    let victim = instances[0].take().ok_or_else(|| Error::Failed {
        what: "failover".into(),
        message: "no instance to stop".into(),
    })?;
    let moved: Vec<i32> = victim.readiness().report().shards;
    let stopped_at = Instant::now();
    victim.crash();
    tracing::info!(
        ?moved,
        "failover: instance f1 stopped without a clean shutdown"
    );
    std::thread::sleep(DOWN.saturating_sub(stopped_at.elapsed()));
    let restarted_at = Instant::now();
    let mut again = instance::start(cluster, &config, &ids[0], plan.partitions)?;
    again.wait_ready(plan.timeout)?;
    let ready = restarted_at.elapsed();
    tracing::info!(
        seconds = ready.as_secs_f64(),
        "failover: f1 restarted and ready"
    );
    instances[0] = Some(again);

    let sent = cluster::join_producer(produced)?;
    // Every output, or the timeout.
    let deadline = Instant::now() + plan.timeout;
    loop {
        let seen: BTreeSet<usize> = arrivals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|a| a.index)
            .collect();
        if seen.len() >= sent.len() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // Late duplicates of redone work would show within a commit or two.
    std::thread::sleep(Duration::from_secs(1));
    done.store(true, Ordering::Relaxed);
    join_within(reader, plan.timeout, "stopping the failover reader")?;
    for instance in instances.into_iter().flatten() {
        instance.stop(plan.timeout)?;
    }

    let arrivals = std::mem::take(&mut *arrivals.lock().unwrap_or_else(|e| e.into_inner()));
    let mut counts: HashMap<usize, usize> = HashMap::with_capacity(arrivals.len());
    for a in &arrivals {
        *counts.entry(a.index).or_default() += 1;
    }
    let lost = (0..sent.len()).filter(|i| !counts.contains_key(i)).count();
    let duplicated = counts.values().map(|c| c - 1).sum();
    let is_moved = |p: i32| moved.contains(&p);
    // Work done after the stop: outputs of inputs produced after it (an
    // output committed just before the stop may be read just after it).
    let after_stop = |i: usize| sent.get(i).is_some_and(|s| s.at > stopped_at);
    let resumed_at = arrivals
        .iter()
        .filter(|a| is_moved(a.partition) && after_stop(a.index))
        .map(|a| a.at)
        .min()
        .unwrap_or(deadline);
    let others: Vec<Instant> = arrivals
        .iter()
        .filter(|a| !is_moved(a.partition))
        .map(|a| a.at)
        .collect();
    let warm = started + Duration::from_secs(1);
    Ok(FailoverMeasurement {
        instances: INSTANCES,
        rate,
        changes: sent.len(),
        others_paused: longest_gap(&others, stopped_at, resumed_at),
        steady_gap: longest_gap(&others, warm, stopped_at),
        resumed: resumed_at.saturating_duration_since(restarted_at),
        ready,
        lost,
        duplicated,
        moved,
    })
}

/// Waits until every instance is ready and the shards are spread over all of them.
fn wait_spread(instances: &mut [Option<Instance>], plan: &Plan) -> Result<(), Error> {
    let deadline = Instant::now() + plan.timeout;
    loop {
        for instance in instances.iter_mut().flatten() {
            instance.wait_ready(plan.timeout)?;
        }
        let reports: Vec<_> = instances
            .iter()
            .flatten()
            .map(|i| i.readiness().report())
            .collect();
        let owned: usize = reports.iter().map(|r| r.shards.len()).sum();
        let all_own = reports.iter().all(|r| !r.shards.is_empty());
        if owned == plan.partitions as usize && all_own && reports.iter().all(|r| r.ready) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: "waiting for the failover group to spread its shards".into(),
                seconds: plan.timeout.as_secs_f64(),
                detail: format!("{owned} of {} shards owned", plan.partitions),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The longest stretch within `[from, to]` with no time in `times`.
fn longest_gap(times: &[Instant], from: Instant, to: Instant) -> Duration {
    let mut inside: Vec<Instant> = times
        .iter()
        .copied()
        .filter(|t| *t > from && *t < to)
        .collect();
    inside.sort_unstable();
    let mut last = from;
    let mut longest = Duration::ZERO;
    for t in inside.into_iter().chain(std::iter::once(to)) {
        longest = longest.max(t.saturating_duration_since(last));
        last = t;
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_gap_counts_the_window_edges() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let times = [at(100), at(150), at(400), at(900)];
        assert_eq!(
            longest_gap(&times, at(0), at(1000)),
            Duration::from_millis(500)
        );
        assert_eq!(
            longest_gap(&times, at(120), at(450)),
            Duration::from_millis(250)
        );
        assert_eq!(longest_gap(&[], at(0), at(300)), Duration::from_millis(300));
    }

    #[test]
    fn the_line_reads_as_the_issue_asks() {
        let m = FailoverMeasurement {
            instances: 3,
            rate: 500.0,
            changes: 7500,
            moved: vec![0, 1],
            others_paused: Duration::from_millis(120),
            steady_gap: Duration::from_millis(110),
            resumed: Duration::from_millis(1800),
            ready: Duration::from_millis(900),
            lost: 0,
            duplicated: 0,
        };
        assert_eq!(
            m.to_string(),
            "failover: others paused 0.12 s, moved shards resumed 1.8 s after restart, lost 0, duplicated 0"
        );
    }
}
