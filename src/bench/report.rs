//! The bench's report: what was measured, the ratios, and the DESIGN §13
//! targets next to them.

use std::fmt;
use std::time::Duration;

use super::stats::Summary;

/// What one system achieved.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// First produce call to the last output received, throughput phase.
    pub elapsed: Duration,
    /// Records per second of the throughput phase.
    pub throughput: f64,
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
    /// First produce call to the last completing offer state, throughput phase.
    pub elapsed: Duration,
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
    /// The minimal consume→produce loop.
    pub baseline: Measurement,
    /// Reactor, exactly-once on (tasks workload).
    pub eos_on: Option<Measurement>,
    /// Reactor, exactly-once off (tasks workload).
    pub eos_off: Option<Measurement>,
    /// Reactor, offers workload (exactly-once on).
    pub offers: Option<OffersMeasurement>,
    /// The whole bench, setup included.
    pub wall: Duration,
}

/// `a / b`, `None` when `b` is zero.
fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

impl Report {
    /// Reactor's throughput with exactly-once on over the baseline's.
    pub fn eos_on_ratio(&self) -> Option<f64> {
        ratio(self.eos_on.as_ref()?.throughput, self.baseline.throughput)
    }

    /// Reactor's throughput with exactly-once off over the baseline's.
    pub fn eos_off_ratio(&self) -> Option<f64> {
        ratio(self.eos_off.as_ref()?.throughput, self.baseline.throughput)
    }

    /// What exactly-once costs: `1 - on / off`.
    pub fn eos_cost(&self) -> Option<f64> {
        let (on, off) = (self.eos_on.as_ref()?, self.eos_off.as_ref()?);
        ratio(on.throughput, off.throughput).map(|r| 1.0 - r)
    }

    /// Offer changes per second end to end over the baseline's records per second.
    pub fn offers_ratio(&self) -> Option<f64> {
        ratio(self.offers.as_ref()?.throughput, self.baseline.throughput)
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
        if let Some(offers) = &self.offers {
            targets.extend([
                Target {
                    name: "offers: changes/s, exactly-once on ÷ baseline",
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
        targets
    }
}

/// Milliseconds with one decimal.
fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn seconds(d: Duration) -> String {
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
                match o.latency_rate {
                    Some(rate) => format!(
                        "{} further changes at {rate:.0}/s{}",
                        o.latency_changes,
                        if o.latency_rate_auto {
                            " (half the offers throughput, at most 2000/s)"
                        } else {
                            ""
                        }
                    ),
                    None => "skipped".into(),
                }
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
                ratio(throughput, self.baseline.throughput)
                    .map_or("n/a".into(), |r| format!("{r:.2}×")),
                latency(|l| l.p50),
                latency(|l| l.p99),
                latency(|l| l.max),
                seconds(setup),
            )
        };
        let mut rows = vec![("baseline: rdkafka consume→produce", &self.baseline)];
        if let Some(m) = &self.eos_on {
            rows.push(("Reactor, exactly-once on", m));
        }
        if let Some(m) = &self.eos_off {
            rows.push(("Reactor, exactly-once off", m));
        }
        for (name, m) in &rows {
            summary_row(f, name, m.throughput, m.latency.as_ref(), m.setup)?;
        }
        if let Some(o) = &self.offers {
            summary_row(
                f,
                &format!("offers, {} stages, exactly-once on", o.stages),
                o.throughput,
                o.done.as_ref(),
                o.setup,
            )?;
        }
        for (name, m) in &rows[1..] {
            if let Some(d) = &m.dispatch {
                writeln!(
                    f,
                    "  {name}: change produced → run issued p50 {}, p99 {} (the rest is waiting for the commit)",
                    ms(d.p50),
                    ms(d.p99)
                )?;
            }
        }
        if let Some(o) = &self.offers {
            let both = |s: &Option<Summary>| match s {
                Some(s) => format!("p50 {}, p99 {}", ms(s.p50), ms(s.p99)),
                None => "n/a".into(),
            };
            writeln!(
                f,
                "  offers: records/s above = offer changes/s with every stage answered and committed; \
                 latency columns: change produced → the OfferState holding all {} stage results",
                o.stages
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
        writeln!(f, "  how:")?;
        if self.eos_on.is_some() {
            writeln!(
                f,
                "  - tasks: every CTL change moves a parameter of its own, watched by exactly one task \
                 (t<i>: delta(bench.t<i>/max_dt, 1min)), so each change fires exactly one run \
                 command; no worker answers (a running task is not re-evaluated, so answering and \
                 re-firing would coalesce changes)"
            )?;
        }
        if let Some(o) = &self.offers {
            writeln!(
                f,
                "  - offers: every change creates an offer; {n} stages (s0..s{last}: watch [\"n\"], \
                 when \"state == null\") each run once on it, one at a time per offer; a bench worker \
                 per stage topic answers each run at once with an update and a state, so one change \
                 makes {n} stage runs, {n} results and {states} OfferStates, and completes with the \
                 OfferState holding all {n} stage states",
                n = o.stages,
                last = o.stages.saturating_sub(1),
                states = o.stages + 1
            )?;
            writeln!(
                f,
                "  - offers: each change needs {} commit rounds (its own, then one per stage \
                 result), so the throughput window includes that latency once: a small \
                 --offer-changes understates the rate Reactor sustains",
                o.stages + 1
            )?;
        }
        writeln!(
            f,
            "  - throughput: records from the first produce call to the last output received by a \
             read_committed reader (Reactor: run commands{}; baseline: relayed records)",
            if self.offers.is_some() {
                "; offers: completing OfferStates"
            } else {
                ""
            }
        )?;
        writeln!(
            f,
            "  - latency: per record, its produce call → the reader receiving its output \
             (one process, monotonic clock)"
        )?;
        writeln!(
            f,
            "  - baseline: one group consumer relays each record (the same CTL payloads) with a \
             producer configured as Reactor's; every commit interval it flushes, then commits \
             offsets (at-least-once)"
        )?;
        writeln!(
            f,
            "  - each system on fresh topics and a fresh consumer group, one after the other"
        )?;
        if self.mock {
            writeln!(
                f,
                "  - exactly-once calls made; the mock cluster does not implement transaction \
                 markers (read_committed sees everything), so the exactly-once cost is the \
                 cost of the calls only"
            )?;
            writeln!(
                f,
                "  - fetch.wait.max.ms=10 on every client: the mock answers an empty fetch only \
                 after that wait, even when records arrive meanwhile"
            )?;
        }
        let mut windows = vec![("baseline", self.baseline.elapsed, "--changes")];
        if let Some(m) = &self.eos_on {
            windows.push(("exactly-once on", m.elapsed, "--changes"));
        }
        if let Some(m) = &self.eos_off {
            windows.push(("exactly-once off", m.elapsed, "--changes"));
        }
        if let Some(o) = &self.offers {
            windows.push(("offers", o.elapsed, "--offer-changes"));
        }
        for (name, elapsed, flag) in windows {
            if elapsed < Duration::from_secs(1) {
                writeln!(
                    f,
                    "  - {name}: the throughput window was only {}, so that figure is noisy; \
                     raise {flag} for a steadier one",
                    ms(elapsed)
                )?;
            }
        }
        let duplicates = [
            ("baseline", Some(self.baseline.duplicates)),
            (
                "exactly-once on",
                self.eos_on.as_ref().map(|m| m.duplicates),
            ),
            (
                "exactly-once off",
                self.eos_off.as_ref().map(|m| m.duplicates),
            ),
            ("offers", self.offers.as_ref().map(|o| o.duplicates)),
        ];
        if duplicates.iter().any(|(_, d)| d.unwrap_or(0) > 0) {
            let list: Vec<String> = duplicates
                .iter()
                .filter_map(|(name, d)| d.map(|d| format!("{name} {d}")))
                .collect();
            writeln!(f, "  - duplicates received: {}", list.join(", "))?;
        }
        write!(f, "  wall time {}", seconds(self.wall))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measurement(throughput: f64, p99_ms: u64) -> Measurement {
        let d = Duration::from_millis(p99_ms);
        Measurement {
            elapsed: Duration::from_secs(1),
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
            eos_on: Some(measurement(600.0, 130)),
            eos_off: Some(measurement(800.0, 120)),
            offers: None,
            wall: Duration::from_secs(10),
        };
        let met: Vec<_> = report.targets().iter().map(|t| t.met).collect();
        // 0.6 ≥ 0.5; 0.8 ≥ 0.7; cost 25 % > 15 %; 130 > 125 ms; 120 ≤ 125 ms.
        assert_eq!(
            met,
            [Some(true), Some(true), Some(false), Some(false), Some(true)]
        );
        let text = report.to_string();
        assert!(text.contains("25.0 %"), "{text}");
        assert!(text.contains("MISS"), "{text}");
        assert!(
            text.contains("does not implement transaction markers"),
            "{text}"
        );
        assert!(!text.contains("offers"), "{text}");

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
                elapsed: Duration::from_secs(2),
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
        // 50 / 1000 = 0.05 < 0.5; 110 ≤ 125 ms.
        assert_eq!(met, [Some(false), Some(true)], "{targets:?}");
        assert_eq!(targets[0].measured, "0.05×");
        let text = report.to_string();
        assert!(text.contains("offers, 5 stages, exactly-once on"), "{text}");
        assert!(
            text.contains("its own OfferState (v1) p50 60.0 ms, p99 110.0 ms"),
            "{text}"
        );
        assert!(!text.contains("Reactor, exactly-once on "), "{text}");
        assert!(!text.contains("tasks in"), "{text}");
    }
}
