//! The bench's report: what was measured, the ratios, and the DESIGN §13
//! targets next to them.

use std::fmt;
use std::time::Duration;

use super::stats::Summary;

/// What one system achieved.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// The steady window of the throughput phase (its first and last 5 %
    /// of outputs left out), over which `throughput` is measured.
    pub window: Duration,
    /// Records in and out per second of the throughput phase's steady
    /// window (tasks and baseline: two per change; offers: every change,
    /// result, stage run and offer state).
    pub throughput: f64,
    /// CPU seconds (user + system, the whole process) per record in or out
    /// in the steady window.
    pub cpu_per_record: Option<f64>,
    /// `cpu_per_record` by thread group (the runtime, the committer, the
    /// librdkafka clients, the harness, the mock brokers …), the largest
    /// first.
    pub cpu_by_thread: Vec<(&'static str, f64)>,
    /// Produce call → output received by a `read_committed` reader, latency phase.
    pub latency: Option<Summary>,
    /// Produce call → the run command's `issued_at` (Reactor only), latency phase.
    pub dispatch: Option<Summary>,
    /// Outputs received more than once (redone work), both phases.
    pub duplicates: usize,
    /// Topic creation, start, group join until ready.
    pub setup: Duration,
}

/// What the offers workload achieved (exactly-once on).
#[derive(Debug, Clone)]
pub struct OffersMeasurement {
    /// Stages every change went through.
    pub stages: usize,
    /// Offer changes of the throughput phase.
    pub changes: usize,
    /// Offer changes of the latency phase.
    pub latency_changes: usize,
    /// Rate of the latency phase (changes per second), if it ran.
    pub latency_rate: Option<f64>,
    /// Whether that rate was derived from the throughput.
    pub latency_rate_auto: bool,
    /// The steady window of the throughput phase.
    pub window: Duration,
    /// Records in and out per second (changes, results, stage runs, offer
    /// states) over the steady window.
    pub records: f64,
    /// CPU seconds (user + system, the whole process) per record in or out.
    pub cpu_per_record: Option<f64>,
    /// `cpu_per_record` by thread group (the runtime, the committer, the
    /// librdkafka clients, the harness, the mock brokers …), the largest
    /// first.
    pub cpu_by_thread: Vec<(&'static str, f64)>,
    /// Resident memory per offer of the shards alone (`--memory-offers`
    /// offers), in a process of their own.
    pub memory: super::memory::Footprint,
    /// Offer changes per second end to end (every stage answered and committed).
    pub throughput: f64,
    /// Change produced → its own `OfferState` (version 1) received, latency phase.
    pub committed: Option<Summary>,
    /// Change produced → its first stage run received by a worker, latency phase.
    pub first_run: Option<Summary>,
    /// Change produced → the `OfferState` holding every stage's result, latency phase.
    pub done: Option<Summary>,
    /// Stage runs the workers answered, both phases.
    pub stage_runs: u64,
    /// The longest time one worker spent answering (not waiting for runs):
    /// small next to the phases, the workers were not the bottleneck.
    pub worker_busy: Duration,
    /// `OfferState` records read, both phases.
    pub offer_states: u64,
    /// Completing offer states received more than once, both phases.
    pub duplicates: usize,
    /// Topic creation, start, group join until ready.
    pub setup: Duration,
}

/// What the jobs workload achieved (exactly-once on).
#[derive(Debug, Clone)]
pub struct JobsMeasurement {
    /// Steps of the chain every launch starts.
    pub steps: usize,
    /// Launches of the throughput phase.
    pub chains: usize,
    /// Launches of the latency phase.
    pub latency_chains: usize,
    /// Rate of the latency phase (launches per second), if it ran.
    pub latency_rate: Option<f64>,
    /// Whether that rate was derived from the throughput.
    pub latency_rate_auto: bool,
    /// The steady window of the throughput phase.
    pub window: Duration,
    /// Records in and out per second (launches, results, step runs,
    /// events) over the steady window.
    pub records: f64,
    /// CPU seconds (user + system, the whole process) per record in or out.
    pub cpu_per_record: Option<f64>,
    /// `cpu_per_record` by thread group (the runtime, the committer, the
    /// librdkafka clients, the harness, the mock brokers …), the largest
    /// first.
    pub cpu_by_thread: Vec<(&'static str, f64)>,
    /// Chains per second end to end (every step answered and committed).
    pub throughput: f64,
    /// Launch produced → its first step run received by a worker, latency phase.
    pub first_run: Option<Summary>,
    /// Launch produced → its `process_succeeded` received, latency phase.
    pub done: Option<Summary>,
    /// Step runs the workers answered, both phases.
    pub step_runs: u64,
    /// The longest time one worker spent answering.
    pub worker_busy: Duration,
    /// Events read, both phases.
    pub events: u64,
    /// Events per chain (counted into the records).
    pub events_per_chain: f64,
    /// `process_succeeded` events received more than once, both phases.
    pub duplicates: usize,
    /// Topic creation, start, group join until ready.
    pub setup: Duration,
}

/// One DESIGN §13 target and how the run compares.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// What is compared.
    pub name: &'static str,
    /// Measured value, as shown.
    pub measured: String,
    /// The target, as shown.
    pub target: String,
    /// Whether the measurement meets it (`None`: not measured).
    pub met: Option<bool>,
}

/// The loop writing Reactor's records (see `shape.rs`): Reactor's I/O
/// without its work.
#[derive(Debug, Clone)]
pub struct RecordsLoop {
    /// What it achieved (records in and out: two per change, as Reactor's).
    pub measured: Measurement,
    /// Bytes (keys and values) per change it wrote: the run command's and
    /// the changelog record's.
    pub bytes: (f64, f64),
}

/// The result of `reactor bench`; `Display` prints it as a table.
#[derive(Debug, Clone)]
pub struct Report {
    /// Where it ran.
    pub cluster: String,
    /// On librdkafka's mock cluster (no transaction markers).
    pub mock: bool,
    /// Partitions of every topic.
    pub partitions: i32,
    /// CTL changes of the throughput phase (baseline and tasks workload).
    pub changes: usize,
    /// CTL changes of the latency phase.
    pub latency_changes: usize,
    /// Rate of the latency phase (records per second), if it ran.
    pub latency_rate: Option<f64>,
    /// Whether that rate was derived from the exactly-once throughput.
    pub latency_rate_auto: bool,
    /// Tasks loaded (0: the tasks workload did not run).
    pub tasks: usize,
    /// Pools they are spread over.
    pub pools: usize,
    /// Reactor's commit interval (the baseline commits as often).
    pub commit_interval: Duration,
    /// The minimal consume→produce loop, measured last, after Reactor's
    /// systems (with its latency phase).
    pub baseline: Measurement,
    /// The same loop measured first, before any of Reactor's systems
    /// (throughput only): with [`Report::baseline`] it brackets them, and
    /// every ratio is over the two's mean, so that a host whose speed
    /// drifts during the run moves both sides of a ratio alike.
    pub baseline_first: Measurement,
    /// Resident memory per task of the configuration and the shards, in a
    /// process of their own (tasks workload).
    pub task_memory: Option<super::memory::Footprint>,
    /// A changelog of tasks read raw and restored (tasks workload).
    pub restore: Option<super::restore::RestoreMeasurement>,
    /// Reactor, exactly-once on (tasks workload).
    pub eos_on: Option<Measurement>,
    /// Reactor, exactly-once off (tasks workload).
    pub eos_off: Option<Measurement>,
    /// The loop writing Reactor's records (tasks workload).
    pub records_loop: Option<RecordsLoop>,
    /// Reactor, offers workload (exactly-once on).
    pub offers: Option<OffersMeasurement>,
    /// Reactor, jobs workload (exactly-once on).
    pub jobs: Option<JobsMeasurement>,
    /// The whole bench, setup included.
    pub wall: Duration,
}

/// `a / b`, `None` when `b` is zero.
pub(super) fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

impl Report {
    /// The tasks workload's systems that ran, in the report's order: each
    /// with its name in the table, its name in the notes, and what it
    /// measured.
    pub(super) fn systems(&self) -> Vec<(&'static str, &'static str, &Measurement)> {
        let mut systems = vec![
            (
                "baseline, measured first",
                "baseline, first",
                &self.baseline_first,
            ),
            (
                "baseline: rdkafka consume→produce",
                "baseline",
                &self.baseline,
            ),
        ];
        if let Some(m) = &self.eos_on {
            systems.push(("Reactor, exactly-once on", "exactly-once on", m));
        }
        if let Some(m) = &self.eos_off {
            systems.push(("Reactor, exactly-once off", "exactly-once off", m));
        }
        if let Some(r) = &self.records_loop {
            systems.push((
                "loop writing Reactor's records",
                "loop writing Reactor's records",
                &r.measured,
            ));
        }
        systems
    }

    /// Reactor's throughput, exactly-once on and off, over that of the loop
    /// writing its records.
    pub fn over_records_loop(&self) -> Option<(Option<f64>, Option<f64>)> {
        let io = self.records_loop.as_ref()?.measured.throughput;
        let over = |m: &Option<Measurement>| ratio(m.as_ref()?.throughput, io);
        Some((over(&self.eos_on), over(&self.eos_off)))
    }

    /// The loop's throughput: the mean of its two measurements.
    pub fn loop_throughput(&self) -> f64 {
        (self.baseline_first.throughput + self.baseline.throughput) / 2.0
    }

    /// The loop's CPU per record, the mean of its two measurements alike.
    pub fn loop_cpu_per_record(&self) -> Option<f64> {
        Some((self.baseline_first.cpu_per_record? + self.baseline.cpu_per_record?) / 2.0)
    }

    /// Reactor's throughput with exactly-once on over the baseline's.
    pub fn eos_on_ratio(&self) -> Option<f64> {
        ratio(self.eos_on.as_ref()?.throughput, self.loop_throughput())
    }

    /// Reactor's throughput with exactly-once off over the baseline's.
    pub fn eos_off_ratio(&self) -> Option<f64> {
        ratio(self.eos_off.as_ref()?.throughput, self.loop_throughput())
    }

    /// What exactly-once costs: `1 - on / off`.
    pub fn eos_cost(&self) -> Option<f64> {
        let (on, off) = (self.eos_on.as_ref()?, self.eos_off.as_ref()?);
        ratio(on.throughput, off.throughput).map(|r| 1.0 - r)
    }

    /// The offers workload's records in and out per second over the baseline's.
    pub fn offers_ratio(&self) -> Option<f64> {
        ratio(self.offers.as_ref()?.records, self.loop_throughput())
    }

    /// The jobs workload's records in and out per second over the baseline's.
    pub fn jobs_ratio(&self) -> Option<f64> {
        ratio(self.jobs.as_ref()?.records, self.loop_throughput())
    }

    /// CPU per record, exactly-once on, over the baseline's.
    pub fn cpu_ratio(&self) -> Option<f64> {
        ratio(
            self.eos_on.as_ref()?.cpu_per_record?,
            self.loop_cpu_per_record()?,
        )
    }

    /// The p99 latency bound: commit interval + 25 ms.
    pub fn latency_bound(&self) -> Duration {
        self.commit_interval + Duration::from_millis(25)
    }

    /// The DESIGN §13 end-to-end targets with this run's values.
    pub fn targets(&self) -> Vec<Target> {
        let times = |r: Option<f64>| r.map_or("n/a".into(), |r| format!("{r:.2}×"));
        let at_least = |r: Option<f64>, min: f64| r.map(|r| r >= min);
        let bound = self.latency_bound();
        let p99_of = |s: Option<Summary>| {
            let p99 = s.map(|l| l.p99);
            Target {
                name: "",
                measured: p99.map_or("n/a".into(), ms),
                target: format!("≤ {}", ms(bound)),
                met: p99.map(|p| p <= bound),
            }
        };
        let p99 = |m: Option<&Measurement>| p99_of(m.and_then(|m| m.latency));
        let mut targets = Vec::new();
        if self.eos_on.is_some() || self.eos_off.is_some() {
            targets.extend([
                Target {
                    name: "throughput, exactly-once on ÷ baseline",
                    measured: times(self.eos_on_ratio()),
                    target: "≥ 0.50×".into(),
                    met: at_least(self.eos_on_ratio(), 0.5),
                },
                Target {
                    name: "throughput, exactly-once off ÷ baseline",
                    measured: times(self.eos_off_ratio()),
                    target: "≥ 0.70×".into(),
                    met: at_least(self.eos_off_ratio(), 0.7),
                },
                Target {
                    name: "exactly-once cost (1 − on ÷ off)",
                    measured: self
                        .eos_cost()
                        .map_or("n/a".into(), |c| format!("{:.1} %", c * 100.0)),
                    target: "≤ 15 %".into(),
                    met: self.eos_cost().map(|c| c <= 0.15),
                },
                Target {
                    name: "p99 latency, exactly-once on",
                    ..p99(self.eos_on.as_ref())
                },
                Target {
                    name: "p99 latency, exactly-once off",
                    ..p99(self.eos_off.as_ref())
                },
            ]);
        }
        if self.eos_on.is_some() {
            let cpu = self.cpu_ratio();
            targets.push(Target {
                name: "CPU per record, exactly-once on ÷ baseline",
                measured: times(cpu),
                target: "≤ 2.00×".into(),
                met: cpu.map(|r| r <= 2.0),
            });
            let restore = self.restore.map(|r| r.ratio());
            targets.push(Target {
                name: "restore ÷ raw read of its changelog",
                measured: times(restore),
                target: "≥ 0.50×".into(),
                met: at_least(restore, 0.5),
            });
            let memory = self.task_memory.and_then(|m| ratio(m.per_item, m.raw));
            targets.push(Target {
                name: "memory per task ÷ its raw definition",
                measured: times(memory),
                target: "≤ 2.50×".into(),
                met: memory.map(|r| r <= 2.5),
            });
        }
        if let Some(offers) = &self.offers {
            let memory = ratio(offers.memory.per_item, offers.memory.raw);
            targets.push(Target {
                name: "memory per offer ÷ its raw payload",
                measured: times(memory),
                target: "≤ 2.50×".into(),
                met: memory.map(|r| r <= 2.5),
            });
            targets.extend([
                Target {
                    name: "offers: records/s, exactly-once on ÷ baseline",
                    measured: times(self.offers_ratio()),
                    target: "≥ 0.50×".into(),
                    met: at_least(self.offers_ratio(), 0.5),
                },
                Target {
                    name: "offers: p99 latency, change → its OfferState",
                    ..p99_of(offers.committed)
                },
            ]);
        }
        if let Some(jobs) = &self.jobs {
            targets.extend([
                Target {
                    name: "jobs: records/s, exactly-once on ÷ baseline",
                    measured: times(self.jobs_ratio()),
                    target: "≥ 0.50×".into(),
                    met: at_least(self.jobs_ratio(), 0.5),
                },
                Target {
                    name: "jobs: p99 latency, launch → first step run",
                    ..p99_of(jobs.first_run)
                },
            ]);
        }
        targets
    }
}

/// A workload's paced phase: `n` further `inputs` at `rate` (derived from
/// the `workload`'s throughput when `auto`), or skipped.
fn paced(rate: Option<f64>, n: usize, auto: bool, inputs: &str, workload: &str) -> String {
    match rate {
        Some(rate) if auto => format!(
            "{n} further {inputs} at {rate:.0}/s (half the {workload} throughput, at most 2000/s)"
        ),
        Some(rate) => format!("{n} further {inputs} at {rate:.0}/s"),
        None => "skipped".into(),
    }
}

/// Milliseconds with one decimal.
fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

pub(super) fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "reactor bench (DESIGN §13), one run on {}", self.cluster)?;
        write!(
            f,
            "  {} partitions, commit interval {}",
            self.partitions,
            ms(self.commit_interval),
        )?;
        if self.tasks > 0 {
            write!(f, ", {} tasks in {} pools", self.tasks, self.pools)?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "  throughput phase: {} CTL changes produced as fast as the producer takes them",
            self.changes
        )?;
        match self.latency_rate {
            Some(rate) => writeln!(
                f,
                "  latency phase: {} further changes at {rate:.0}/s{}",
                self.latency_changes,
                match (self.latency_rate_auto, self.eos_on.is_some()) {
                    (false, _) => "",
                    (true, true) => " (half the exactly-once throughput, at most 2000/s)",
                    (true, false) => " (the tasks workload did not run to derive a rate)",
                }
            )?,
            None => writeln!(f, "  latency phase: skipped")?,
        }
        if let Some(o) = &self.offers {
            writeln!(
                f,
                "  offers workload: {} offer changes as fast as the producer takes them, {} stages \
                 each; latency phase: {}",
                o.changes,
                o.stages,
                paced(o.latency_rate, o.latency_changes, o.latency_rate_auto, "changes", "offers"),
            )?;
        }
        if let Some(j) = &self.jobs {
            writeln!(
                f,
                "  jobs workload: {} launches of a {}-step chain as fast as the producer takes them; \
                 latency phase: {}",
                j.chains,
                j.steps,
                paced(j.latency_rate, j.latency_chains, j.latency_rate_auto, "launches", "jobs"),
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "  {:<34} {:>12} {:>10} {:>10} {:>10} {:>10} {:>8}",
            "system", "records/s", "× baseline", "p50", "p99", "max", "setup"
        )?;
        let summary_row = |f: &mut fmt::Formatter<'_>,
                           name: &str,
                           throughput: f64,
                           latency: Option<&Summary>,
                           setup: Duration| {
            let latency =
                |pick: fn(&Summary) -> Duration| latency.map_or("n/a".into(), |l| ms(pick(l)));
            writeln!(
                f,
                "  {:<34} {:>12.0} {:>10} {:>10} {:>10} {:>10} {:>8}",
                name,
                throughput,
                ratio(throughput, self.loop_throughput())
                    .map_or("n/a".into(), |r| format!("{r:.2}×")),
                latency(|l| l.p50),
                latency(|l| l.p99),
                latency(|l| l.max),
                seconds(setup),
            )
        };
        for (name, _, m) in self.systems() {
            summary_row(f, name, m.throughput, m.latency.as_ref(), m.setup)?;
        }
        if let Some(o) = &self.offers {
            summary_row(
                f,
                &format!("offers, {} stages, exactly-once on", o.stages),
                o.records,
                o.done.as_ref(),
                o.setup,
            )?;
        }
        if let Some(j) = &self.jobs {
            summary_row(
                f,
                &format!("jobs, {}-step chains, exactly-once on", j.steps),
                j.records,
                j.done.as_ref(),
                j.setup,
            )?;
        }
        for (name, _, m) in self.systems().into_iter().skip(1) {
            if let Some(d) = &m.dispatch {
                writeln!(
                    f,
                    "  {name}: change produced → run issued p50 {}, p99 {} (the rest is waiting for the commit)",
                    ms(d.p50),
                    ms(d.p99)
                )?;
            }
        }
        if let (Some(r), Some((on, off))) = (&self.records_loop, self.over_records_loop()) {
            let times = |r: Option<f64>| r.map_or("n/a".into(), |r| format!("{r:.2}×"));
            writeln!(
                f,
                "  Reactor ÷ the loop writing its records ({:.0} B run command + {:.0} B changelog \
                 record per change, keys and values; that loop {} the baseline): exactly-once on \
                 {}, off {}",
                r.bytes.0,
                r.bytes.1,
                times(ratio(r.measured.throughput, self.loop_throughput())),
                times(on),
                times(off)
            )?;
        }
        if let Some(r) = self.restore {
            writeln!(f, "  {r}")?;
        }
        if let Some(o) = &self.offers {
            let both = |s: &Option<Summary>| match s {
                Some(s) => format!("p50 {}, p99 {}", ms(s.p50), ms(s.p99)),
                None => "n/a".into(),
            };
            writeln!(
                f,
                "  offers: records/s above = offer changes, results, stage runs and offer states per \
                 second ({:.0} offer changes/s with every stage answered and committed); latency \
                 columns: change produced → the OfferState holding all {} stage results",
                o.throughput, o.stages
            )?;
            writeln!(
                f,
                "  offers: change produced → its own OfferState (v1) {}; → its first stage run at a worker {}",
                both(&o.committed),
                both(&o.first_run)
            )?;
            writeln!(
                f,
                "  offers: {} stage runs answered (the busiest worker spent {} answering), {} \
                 OfferState records read",
                o.stage_runs,
                ms(o.worker_busy),
                o.offer_states
            )?;
        }
        if let Some(j) = &self.jobs {
            let both = |s: &Option<Summary>| match s {
                Some(s) => format!("p50 {}, p99 {}", ms(s.p50), ms(s.p99)),
                None => "n/a".into(),
            };
            writeln!(
                f,
                "  jobs: records/s above = launches, results, step runs and events per second \
                 ({:.0} chains/s with every step answered and committed; {:.1} events per chain); \
                 latency columns: launch produced → its process_succeeded",
                j.throughput, j.events_per_chain
            )?;
            writeln!(
                f,
                "  jobs: launch produced → its first step run at a worker {}",
                both(&j.first_run)
            )?;
            writeln!(
                f,
                "  jobs: {} step runs answered (the busiest worker spent {} answering), {} events read",
                j.step_runs,
                ms(j.worker_busy),
                j.events
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "  {:<46} {:>12} {:>12}  result",
            "target (DESIGN §13)", "measured", "target"
        )?;
        for t in self.targets() {
            let result = match t.met {
                Some(true) => "pass",
                Some(false) => "MISS",
                None => "not measured",
            };
            writeln!(
                f,
                "  {:<46} {:>12} {:>12}  {result}",
                t.name, t.measured, t.target
            )?;
        }
        writeln!(f)?;
        super::method::write(self, f)?;
        write!(f, "  wall time {}", seconds(self.wall))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measurement(throughput: f64, p99_ms: u64) -> Measurement {
        let d = Duration::from_millis(p99_ms);
        Measurement {
            window: Duration::from_secs(6),
            cpu_per_record: None,
            cpu_by_thread: Vec::new(),
            throughput,
            latency: Some(Summary {
                samples: 10,
                p50: d / 2,
                p99: d,
                max: d,
            }),
            dispatch: None,
            duplicates: 0,
            setup: Duration::from_secs(3),
        }
    }

    #[test]
    fn targets_compare_ratios_and_latency() {
        let report = Report {
            cluster: "test".into(),
            mock: true,
            partitions: 4,
            changes: 100,
            latency_changes: 10,
            latency_rate: Some(100.0),
            latency_rate_auto: true,
            tasks: 110,
            pools: 16,
            commit_interval: Duration::from_millis(100),
            baseline: measurement(1000.0, 5),
            baseline_first: measurement(1000.0, 5),
            task_memory: None,
            // 10,000 records/s restored against 25,000 read raw: 0.40×.
            restore: Some(super::super::restore::RestoreMeasurement {
                records: 1000,
                raw: 0.04,
                restore: 0.1,
                spread: (0.35, 0.45),
            }),
            eos_on: Some(measurement(600.0, 130)),
            eos_off: Some(measurement(800.0, 120)),
            records_loop: None,
            offers: None,
            jobs: None,
            wall: Duration::from_secs(10),
        };
        let met: Vec<_> = report.targets().iter().map(|t| t.met).collect();
        // 0.6 ≥ 0.5; 0.8 ≥ 0.7; cost 25 % > 15 %; 130 > 125 ms; 120 ≤ 125 ms;
        // CPU not measured; restore 0.4 < 0.5; memory not measured.
        assert_eq!(
            met,
            [
                Some(true),
                Some(true),
                Some(false),
                Some(false),
                Some(true),
                None,
                Some(false),
                None
            ]
        );
        let text = report.to_string();
        assert!(
            text.contains("restore ÷ raw read of its changelog"),
            "{text}"
        );
        assert!(text.contains("0.40×"), "{text}");
        assert!(
            text.contains("1000 task records read raw in 0.040 s"),
            "{text}"
        );
        assert!(
            text.contains("mean of 5 alternate rounds: 0.40× the raw read (rounds 0.35–0.45×"),
            "{text}"
        );
        assert!(text.contains("25.0 %"), "{text}");
        assert!(text.contains("MISS"), "{text}");
        assert!(
            text.contains("does not implement transaction markers"),
            "{text}"
        );
        assert!(!text.contains("offers"), "{text}");

        // The loop measured twice: ratios over the mean (1000 and 1400 → 1200).
        let mut first = measurement(1400.0, 5);
        first.cpu_per_record = Some(3.0);
        let mut last = measurement(1000.0, 5);
        last.cpu_per_record = Some(1.0);
        let mut on = measurement(600.0, 100);
        on.cpu_per_record = Some(4.0);
        let twice = Report {
            baseline: last,
            baseline_first: first,
            eos_on: Some(on),
            ..report.clone()
        };
        assert_eq!(twice.eos_on_ratio(), Some(0.5));
        assert_eq!(twice.cpu_ratio(), Some(2.0));
        let text = twice.to_string();
        assert!(text.contains("baseline, measured first"), "{text}");
        assert!(
            text.contains("1400 and 1000 records/s, 28.6 % apart"),
            "{text}"
        );
        assert!(!text.contains("loop writing"), "{text}");

        // The loop writing Reactor's records: a row, and Reactor over it.
        let io = Report {
            records_loop: Some(RecordsLoop {
                measured: measurement(800.0, 5),
                bytes: (148.4, 111.0),
            }),
            ..twice.clone()
        };
        assert_eq!(io.over_records_loop(), Some((Some(0.75), Some(1.0))));
        let text = io.to_string();
        assert!(text.contains("  loop writing Reactor's records"), "{text}");
        assert!(
            text.contains(
                "Reactor ÷ the loop writing its records (148 B run command + 111 B changelog \
                 record per change, keys and values; that loop 0.67× the baseline): \
                 exactly-once on 0.75×, off 1.00×"
            ),
            "{text}"
        );
        assert!(text.contains("Reactor's I/O without its work"), "{text}");

        // The offers workload alone: its two targets, next to the baseline.
        let ms = Duration::from_millis;
        let summary = |p50, p99| Summary {
            samples: 10,
            p50: ms(p50),
            p99: ms(p99),
            max: ms(p99),
        };
        let report = Report {
            eos_on: None,
            eos_off: None,
            tasks: 0,
            offers: Some(OffersMeasurement {
                stages: 5,
                changes: 100,
                latency_changes: 10,
                latency_rate: Some(50.0),
                latency_rate_auto: true,
                window: Duration::from_secs(6),
                records: 850.0,
                cpu_per_record: None,
                cpu_by_thread: Vec::new(),
                memory: crate::bench::memory::Footprint {
                    item: crate::bench::memory::Item::Offer,
                    items: 100,
                    partitions: 4,
                    per_item: 400.0,
                    raw: 154.0,
                },
                throughput: 50.0,
                committed: Some(summary(60, 110)),
                first_run: Some(summary(70, 130)),
                done: Some(summary(600, 900)),
                stage_runs: 550,
                worker_busy: Duration::from_millis(20),
                offer_states: 660,
                duplicates: 0,
                setup: Duration::from_secs(3),
            }),
            ..report
        };
        let targets = report.targets();
        let met: Vec<_> = targets.iter().map(|t| t.met).collect();
        // Memory 400 / 154 = 2.6 > 2.5; records 850 / 1000 = 0.85 ≥ 0.5; 110 ≤ 125 ms.
        assert_eq!(met, [Some(false), Some(true), Some(true)], "{targets:?}");
        assert_eq!(targets[1].measured, "0.85×");
        let text = report.to_string();
        assert!(text.contains("offers, 5 stages, exactly-once on"), "{text}");
        assert!(
            text.contains("its own OfferState (v1) p50 60.0 ms, p99 110.0 ms"),
            "{text}"
        );
        assert!(!text.contains("Reactor, exactly-once on "), "{text}");
        assert!(!text.contains("tasks in"), "{text}");

        // The jobs workload alone: its ratio and its dispatch latency.
        let report = Report {
            offers: None,
            jobs: Some(JobsMeasurement {
                steps: 3,
                chains: 100,
                latency_chains: 10,
                latency_rate: Some(50.0),
                latency_rate_auto: false,
                window: Duration::from_secs(6),
                records: 600.0,
                cpu_per_record: None,
                cpu_by_thread: Vec::new(),
                throughput: 50.0,
                first_run: Some(summary(80, 140)),
                done: Some(summary(400, 700)),
                step_runs: 330,
                worker_busy: Duration::from_millis(20),
                events: 220,
                events_per_chain: 2.0,
                duplicates: 0,
                setup: Duration::from_secs(3),
            }),
            ..report
        };
        let targets = report.targets();
        let met: Vec<_> = targets.iter().map(|t| t.met).collect();
        // 600 / 1000 = 0.6 ≥ 0.5; 140 > 125 ms.
        assert_eq!(met, [Some(true), Some(false)], "{targets:?}");
        assert_eq!(targets[0].measured, "0.60×");
        let text = report.to_string();
        assert!(
            text.contains("jobs, 3-step chains, exactly-once on"),
            "{text}"
        );
        assert!(
            text.contains("first step run at a worker p50 80.0 ms, p99 140.0 ms"),
            "{text}"
        );
        assert!(!text.contains("OfferState"), "{text}");
    }
}
