//! The bench's report: what was measured, the ratios, and the DESIGN §13
//! targets next to them.

use std::fmt;
use std::time::Duration;

use super::stats::Summary;

/// What one system achieved.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// Records of the throughput phase.
    pub records: usize,
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
    /// CTL changes of the throughput phase.
    pub changes: usize,
    /// CTL changes of the latency phase.
    pub latency_changes: usize,
    /// Rate of the latency phase (records per second), if it ran.
    pub latency_rate: Option<f64>,
    /// Whether that rate was derived from the exactly-once throughput.
    pub latency_rate_auto: bool,
    /// Tasks loaded.
    pub tasks: usize,
    /// Pools they are spread over.
    pub pools: usize,
    /// Reactor's commit interval (the baseline commits as often).
    pub commit_interval: Duration,
    /// The minimal consume→produce loop.
    pub baseline: Measurement,
    /// Reactor, exactly-once on.
    pub eos_on: Measurement,
    /// Reactor, exactly-once off.
    pub eos_off: Measurement,
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
        ratio(self.eos_on.throughput, self.baseline.throughput)
    }

    /// Reactor's throughput with exactly-once off over the baseline's.
    pub fn eos_off_ratio(&self) -> Option<f64> {
        ratio(self.eos_off.throughput, self.baseline.throughput)
    }

    /// What exactly-once costs: `1 - on / off`.
    pub fn eos_cost(&self) -> Option<f64> {
        ratio(self.eos_on.throughput, self.eos_off.throughput).map(|r| 1.0 - r)
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
        let p99 = |m: &Measurement| {
            let p99 = m.latency.map(|l| l.p99);
            Target {
                name: "",
                measured: p99.map_or("n/a".into(), ms),
                target: format!("≤ {}", ms(bound)),
                met: p99.map(|p| p <= bound),
            }
        };
        vec![
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
                ..p99(&self.eos_on)
            },
            Target {
                name: "p99 latency, exactly-once off",
                ..p99(&self.eos_off)
            },
        ]
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
        writeln!(
            f,
            "  {} partitions, commit interval {}, {} tasks in {} pools",
            self.partitions,
            ms(self.commit_interval),
            self.tasks,
            self.pools
        )?;
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
                if self.latency_rate_auto {
                    " (half the exactly-once throughput, at most 2000/s)"
                } else {
                    ""
                }
            )?,
            None => writeln!(f, "  latency phase: skipped")?,
        }
        writeln!(f)?;
        writeln!(
            f,
            "  {:<34} {:>12} {:>10} {:>10} {:>10} {:>10} {:>8}",
            "system", "records/s", "× baseline", "p50", "p99", "max", "setup"
        )?;
        let rows = [
            ("baseline: rdkafka consume→produce", &self.baseline),
            ("Reactor, exactly-once on", &self.eos_on),
            ("Reactor, exactly-once off", &self.eos_off),
        ];
        for (name, m) in rows {
            let latency = |pick: fn(&Summary) -> Duration| {
                m.latency.as_ref().map_or("n/a".into(), |l| ms(pick(l)))
            };
            writeln!(
                f,
                "  {:<34} {:>12.0} {:>10} {:>10} {:>10} {:>10} {:>8}",
                name,
                m.throughput,
                ratio(m.throughput, self.baseline.throughput)
                    .map_or("n/a".into(), |r| format!("{r:.2}×")),
                latency(|l| l.p50),
                latency(|l| l.p99),
                latency(|l| l.max),
                seconds(m.setup),
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
        writeln!(f)?;
        writeln!(
            f,
            "  {:<42} {:>12} {:>12}  result",
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
                "  {:<42} {:>12} {:>12}  {result}",
                t.name, t.measured, t.target
            )?;
        }
        writeln!(f)?;
        writeln!(f, "  how:")?;
        writeln!(
            f,
            "  - every CTL change moves a parameter of its own, watched by exactly one task \
             (t<i>: delta(bench.t<i>/max_dt, 1min)), so each change fires exactly one run \
             command; no worker answers (a running task is not re-evaluated, so answering and \
             re-firing would coalesce changes)"
        )?;
        writeln!(
            f,
            "  - throughput: records from the first produce call to the last output received by a \
             read_committed reader (Reactor: run commands; baseline: relayed records)"
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
        for (name, m) in [
            ("baseline", &self.baseline),
            ("exactly-once on", &self.eos_on),
            ("exactly-once off", &self.eos_off),
        ] {
            if m.elapsed < Duration::from_secs(1) {
                writeln!(
                    f,
                    "  - {name}: the throughput window was only {}, so that figure is noisy; \
                     raise --changes for a steadier one",
                    ms(m.elapsed)
                )?;
            }
        }
        let duplicates =
            self.baseline.duplicates + self.eos_on.duplicates + self.eos_off.duplicates;
        if duplicates > 0 {
            writeln!(
                f,
                "  - duplicates received: baseline {}, exactly-once on {}, off {}",
                self.baseline.duplicates, self.eos_on.duplicates, self.eos_off.duplicates
            )?;
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
            records: 100,
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
            eos_on: measurement(600.0, 130),
            eos_off: measurement(800.0, 120),
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
    }
}
