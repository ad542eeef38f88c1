//! The options of `reactor bench` and what they plan: the workloads, the
//! counts of every phase, checked before anything runs.

use std::time::Duration;

use super::jobs::JobsPlan;
use super::offers::OffersPlan;
use super::Error;

/// What `reactor bench` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// The tasks, offers and jobs workloads.
    All,
    /// CTL changes firing tasks, exactly-once on and off.
    Tasks,
    /// Offer changes through stages answered by a worker, exactly-once on.
    Offers,
    /// Process chains of three jobs launched by command and answered by a
    /// worker, exactly-once on.
    Jobs,
    /// Live-lane latency while a mass recovery of failed process
    /// instances runs (not part of `all`).
    Recovery,
    /// Three instances under steady load, one stopped without a clean
    /// shutdown and restarted with the same instance id (needs `--brokers`
    /// of a broker with static membership: kfake, Apache Kafka).
    Failover,
    /// Resident memory per task of the configuration and the shards alone,
    /// without Kafka (`--tasks` tasks on `--partitions` shards), in a process
    /// of its own; the tasks workload reports it too (not part of `all`).
    TaskMemory,
    /// Resident memory per offer of the shards alone, without Kafka (`--memory-offers`
    /// offers through `--stages` stages on `--partitions` shards), in a
    /// process of its own; the offers workload reports it too (not part of `all`).
    OfferMemory,
    /// A changelog of `--restore-tasks` tasks read raw and restored into
    /// every shard (the tasks workload measures it too; not part of `all`).
    Restore,
}

impl Workload {
    /// Whether the tasks workload runs.
    pub fn tasks(self) -> bool {
        matches!(self, Workload::All | Workload::Tasks)
    }

    /// Whether the offers workload runs.
    pub fn offers(self) -> bool {
        matches!(self, Workload::All | Workload::Offers)
    }

    /// Whether the jobs workload runs.
    pub fn jobs(self) -> bool {
        matches!(self, Workload::All | Workload::Jobs)
    }
}

/// Options of `reactor bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// What to measure (the baseline always runs).
    #[arg(long, value_enum, default_value_t = Workload::All)]
    pub workload: Workload,
    /// Brokers to run against; default: an in-process mock cluster.
    #[arg(long, env = "REACTOR_BROKERS")]
    pub brokers: Option<String>,
    /// Tasks to load; default and minimum: one per CTL change of both phases
    /// (each change fires its own task); more adds tasks no change fires.
    #[arg(long)]
    pub tasks: Option<usize>,
    /// CTL changes to produce in the throughput phase (each system's steady
    /// window should last 5 s or more: 160,000–330,000 changes per second
    /// of window on the mock cluster, by machine).
    #[arg(long, default_value_t = 2_400_000)]
    pub changes: usize,
    /// CTL changes to produce at a steady rate in the latency phase (0: skip it).
    #[arg(long, default_value_t = 2000)]
    pub latency_changes: usize,
    /// CTL changes the baseline relays in its throughput phase, at least
    /// `--changes`: the loop runs 3–4× faster than Reactor, so it needs
    /// that many more records for a steady window of 5 s (500,000–750,000
    /// changes per second of window on the mock cluster, by machine).
    #[arg(long, default_value_t = 5_000_000)]
    pub baseline_changes: usize,
    /// Rate of the latency phase, records per second; default: half of
    /// Reactor's exactly-once throughput, at most 2000.
    #[arg(long)]
    pub latency_rate: Option<f64>,
    /// Partitions of the co-partitioned topics (and of the input and output topics).
    #[arg(long, default_value_t = 4)]
    pub partitions: i32,
    /// Reactor's commit interval, also the baseline's offset commit interval.
    #[arg(long, default_value = "100ms")]
    pub commit_interval: crate::duration::Duration,
    /// Longest wait of any one step (start, join, draining a phase) before the
    /// bench gives up with an error.
    #[arg(long, default_value = "60s")]
    pub timeout: crate::duration::Duration,
    /// Offer changes to produce in the offers workload's throughput phase
    /// (15,000–25,000 changes per second of window on the mock cluster, by
    /// machine; each completes after six commit rounds).
    #[arg(long, default_value_t = 150_000)]
    pub offer_changes: usize,
    /// Offer changes to produce at a steady rate in the offers workload's
    /// latency phase (0: skip it).
    #[arg(long, default_value_t = 500)]
    pub offer_latency_changes: usize,
    /// Rate of the offers latency phase, changes per second; default: half
    /// of the offers throughput, at most 2000.
    #[arg(long)]
    pub offer_latency_rate: Option<f64>,
    /// Offers the memory per offer is measured with (the offers workload
    /// and `offer-memory`): fewer would measure the allocator's first
    /// segments and the tables' first sizes more than the offers.
    #[arg(long, default_value_t = 100_000)]
    pub memory_offers: usize,
    /// Stages every offer change goes through in the offers workload.
    #[arg(long, default_value_t = 5)]
    pub stages: usize,
    /// Chains the jobs workload launches in its throughput phase
    /// (30,000–55,000 chains per second of window on the mock cluster, by
    /// machine).
    #[arg(long, default_value_t = 400_000)]
    pub chains: usize,
    /// Chains launched at a steady rate in the jobs workload's latency
    /// phase (0: skip it).
    #[arg(long, default_value_t = 500)]
    pub chain_latency_launches: usize,
    /// Rate of the jobs latency phase, launches per second; default: half
    /// of the jobs throughput, at most 2000.
    #[arg(long)]
    pub chain_latency_rate: Option<f64>,
    /// Tasks whose changelog (one record each, every task fired once) the
    /// tasks workload reads raw and restores (0: skip it); default 25,000
    /// per partition (the mock cluster keeps about 5 MB of each partition,
    /// some 40,000 task records, and the bench's pools do not spread evenly).
    #[arg(long)]
    pub restore_tasks: Option<usize>,
    /// A smoke run: at most 2000 changes and 300 latency changes (offers
    /// and jobs: 1000 and 100; recovery: 20,000 instances).
    #[arg(long)]
    pub quick: bool,
    /// Measure `task-memory` or `offer-memory` in this process rather than
    /// in a child (the child's own flag; under callgrind `offer-memory`
    /// counts the work per offer).
    #[arg(long, hide = true)]
    pub in_process: bool,
    /// Failed process instances the recovery workload seeds and recovers.
    #[arg(long, default_value_t = 1_000_000)]
    pub recovery_instances: usize,
    /// Partitions of the recovery workload.
    #[arg(long, default_value_t = 6)]
    pub recovery_partitions: i32,
    /// Live launches per second during the recovery workload.
    #[arg(long, default_value_t = 200.0)]
    pub recovery_live_rate: f64,
    /// Input rate of the failover workload, offer changes per second.
    #[arg(long, default_value_t = 1000.0)]
    pub failover_rate: f64,
}

impl Default for BenchArgs {
    fn default() -> Self {
        BenchArgs {
            workload: Workload::All,
            brokers: None,
            tasks: None,
            changes: 2_400_000,
            latency_changes: 2000,
            latency_rate: None,
            partitions: 4,
            commit_interval: crate::duration::Duration::from_millis(100),
            timeout: crate::duration::Duration::from_secs(60),
            offer_changes: 150_000,
            memory_offers: 100_000,
            offer_latency_changes: 500,
            offer_latency_rate: None,
            stages: 5,
            chains: 400_000,
            chain_latency_launches: 500,
            chain_latency_rate: None,
            restore_tasks: None,
            baseline_changes: 5_000_000,
            quick: false,
            in_process: false,
            recovery_instances: 1_000_000,
            recovery_partitions: 6,
            recovery_live_rate: 200.0,
            failover_rate: 1000.0,
        }
    }
}

/// Default tasks of the restore measurement per partition.
const RESTORE_TASKS_PER_PARTITION: usize = 25_000;

/// The bench as planned from the options.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) workload: Workload,
    pub(super) changes: usize,
    pub(super) latency_changes: usize,
    /// Changes of the baseline's throughput phase (at least `changes`).
    pub(super) baseline_changes: usize,
    pub(super) tasks: usize,
    pub(super) partitions: i32,
    pub(super) commit_interval: Duration,
    pub(super) timeout: Duration,
    pub(super) latency_rate: Option<f64>,
    /// The offers workload, when it runs.
    pub(super) offers: Option<OffersPlan>,
    /// The jobs workload, when it runs.
    pub(super) jobs: Option<JobsPlan>,
    /// Tasks of the restore measurement (0: none).
    pub(super) restore_tasks: usize,
}

impl Plan {
    pub(super) fn new(args: &BenchArgs) -> Result<Plan, Error> {
        let (mut changes, mut latency_changes) = (args.changes, args.latency_changes);
        let mut baseline_changes = args.baseline_changes;
        if args.quick {
            changes = changes.min(2000);
            latency_changes = latency_changes.min(300);
            baseline_changes = baseline_changes.min(2000);
        }
        let baseline_changes = baseline_changes.max(changes);
        if changes == 0 {
            return Err(Error::Args("--changes must be at least 1".into()));
        }
        if args.partitions < 1 {
            return Err(Error::Args("--partitions must be at least 1".into()));
        }
        if let Some(rate) = args.latency_rate {
            positive_rate("--latency-rate", "of records per second", rate)?;
        }
        let needed = changes + latency_changes;
        let tasks = args.tasks.unwrap_or(needed);
        if tasks < needed {
            return Err(Error::Args(format!(
                "--tasks {tasks} is fewer than the {needed} CTL changes of both phases: \
                 each change fires a task of its own (leave --tasks out for one per change)"
            )));
        }
        let commit_interval = args.commit_interval.to_std();
        if commit_interval.is_zero() {
            return Err(Error::Args("--commit-interval must be positive".into()));
        }
        let timeout = args.timeout.to_std();
        if timeout.is_zero() {
            return Err(Error::Args("--timeout must be positive".into()));
        }
        let offers = if args.workload.offers() {
            Some(Self::offers(args)?)
        } else {
            None
        };
        let jobs = if args.workload.jobs() {
            Some(Self::jobs(args)?)
        } else {
            None
        };
        Ok(Plan {
            workload: args.workload,
            offers,
            jobs,
            changes,
            latency_changes,
            baseline_changes,
            tasks,
            partitions: args.partitions,
            commit_interval,
            timeout,
            latency_rate: args.latency_rate,
            restore_tasks: {
                let n = args.restore_tasks.unwrap_or(
                    RESTORE_TASKS_PER_PARTITION * usize::try_from(args.partitions).unwrap_or(1),
                );
                if args.quick {
                    n.min(2000)
                } else {
                    n
                }
            },
        })
    }

    fn offers(args: &BenchArgs) -> Result<OffersPlan, Error> {
        let (mut changes, mut latency_changes) = (args.offer_changes, args.offer_latency_changes);
        if args.quick {
            changes = changes.min(1000);
            latency_changes = latency_changes.min(100);
        }
        if changes == 0 {
            return Err(Error::Args("--offer-changes must be at least 1".into()));
        }
        if args.stages == 0 {
            return Err(Error::Args("--stages must be at least 1".into()));
        }
        if let Some(rate) = args.offer_latency_rate {
            positive_rate("--offer-latency-rate", "of changes per second", rate)?;
        }
        if args.memory_offers == 0 {
            return Err(Error::Args("--memory-offers must be at least 1".into()));
        }
        Ok(OffersPlan {
            memory_offers: args.memory_offers,
            changes,
            latency_changes,
            latency_rate: args.offer_latency_rate,
            stages: args.stages,
        })
    }

    fn jobs(args: &BenchArgs) -> Result<JobsPlan, Error> {
        let (mut chains, mut latency_chains) = (args.chains, args.chain_latency_launches);
        if args.quick {
            chains = chains.min(1000);
            latency_chains = latency_chains.min(100);
        }
        if chains == 0 {
            return Err(Error::Args("--chains must be at least 1".into()));
        }
        if let Some(rate) = args.chain_latency_rate {
            positive_rate("--chain-latency-rate", "of launches per second", rate)?;
        }
        Ok(JobsPlan {
            chains,
            latency_chains,
            latency_rate: args.chain_latency_rate,
        })
    }

    /// The plan of the jobs workload's phases: its launches in place of the
    /// CTL changes.
    pub(super) fn for_jobs(&self, jobs: &JobsPlan) -> Plan {
        Plan {
            changes: jobs.chains,
            latency_changes: jobs.latency_chains,
            latency_rate: jobs.latency_rate,
            ..self.clone()
        }
    }

    /// The plan of the offers workload's phases: its changes in place of
    /// the CTL changes.
    pub(super) fn for_offers(&self, offers: &OffersPlan) -> Plan {
        Plan {
            changes: offers.changes,
            latency_changes: offers.latency_changes,
            latency_rate: offers.latency_rate,
            ..self.clone()
        }
    }

    /// The plan of the baseline: more changes, for a window as long as
    /// Reactor's.
    pub(super) fn for_baseline(&self) -> Plan {
        Plan {
            changes: self.baseline_changes,
            ..self.clone()
        }
    }

    /// Indices of the throughput phase.
    pub(super) fn throughput_range(&self) -> std::ops::Range<usize> {
        0..self.changes
    }

    /// Indices of the latency phase.
    pub(super) fn latency_range(&self) -> std::ops::Range<usize> {
        self.changes..self.changes + self.latency_changes
    }
}

/// Checks that the rate `flag` gave is a positive number: the message
/// says what it counts (`per`, e.g. "of changes per second").
pub(super) fn positive_rate(flag: &str, per: &str, rate: f64) -> Result<(), Error> {
    if rate.is_finite() && rate > 0.0 {
        return Ok(());
    }
    Err(Error::Args(format!(
        "{flag} must be a positive number {per}, got {rate}"
    )))
}
