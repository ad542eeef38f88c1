//! Statistics of a measurement: nearest-rank percentiles and throughput.

use std::time::Duration;

/// The `q` quantile (0 < q ≤ 1) of ascending `sorted` values by the
/// nearest-rank method: the smallest value with at least `q × n` values at
/// or below it. `None` for no values.
pub fn percentile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let rank = (q.clamp(0.0, 1.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

/// A latency distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Number of samples.
    pub samples: usize,
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest sample.
    pub max: Duration,
}

impl Summary {
    /// Summarizes `samples` (any order); `None` when there are none.
    pub fn of(mut samples: Vec<Duration>) -> Option<Summary> {
        samples.sort_unstable();
        Some(Summary {
            samples: samples.len(),
            p50: percentile(&samples, 0.50)?,
            p99: percentile(&samples, 0.99)?,
            max: *samples.last()?,
        })
    }
}

/// Records per second; zero when no time passed.
pub fn per_second(records: usize, elapsed: Duration) -> f64 {
    let seconds = elapsed.as_secs_f64();
    if seconds > 0.0 {
        records as f64 / seconds
    } else {
        0.0
    }
}

/// CPU seconds (user + system) this process used so far, from
/// `/proc/self/stat`; `None` where that is not readable (not Linux).
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces): state is the
    // first, utime the 12th and stime the 13th.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // The kernel's USER_HZ, 100 on every Linux Reactor runs on.
    Some((utime + stime) / 100.0)
}

/// Resident memory of this process in bytes, from `/proc/self/statm`.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// One sample of the CPU this process used so far: in all, and by thread.
#[derive(Debug, Clone)]
pub struct CpuSample {
    /// When it was taken.
    pub at: std::time::Instant,
    /// CPU seconds of the whole process.
    pub total: f64,
    /// CPU seconds of each thread.
    pub threads: Vec<super::threads::ThreadCpu>,
}

/// CPU seconds of this process sampled over time, to read the CPU spent in
/// a window known only afterwards.
pub struct CpuSamples {
    samples: std::sync::Arc<std::sync::Mutex<Vec<CpuSample>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CpuSamples {
    /// Samples every 50 ms until [`CpuSamples::finish`] (a sample reads
    /// a file per thread: some fifty while a system runs).
    pub fn start() -> CpuSamples {
        use std::sync::atomic::Ordering;
        let samples = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let (samples, stop) = (
                std::sync::Arc::clone(&samples),
                std::sync::Arc::clone(&stop),
            );
            std::thread::Builder::new()
                .name("bench-cpu".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(total) = cpu_seconds() {
                            let sample = CpuSample {
                                at: std::time::Instant::now(),
                                total,
                                threads: super::threads::sample(),
                            };
                            samples
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(sample);
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                })
        };
        CpuSamples {
            samples,
            stop,
            // Without the thread (it could not start), no window has CPU.
            thread: thread.ok(),
        }
    }

    /// Stops sampling; the samples, in time order.
    pub fn finish(mut self) -> Vec<CpuSample> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        std::mem::take(&mut *self.samples.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The CPU a window took, scaled to the window from the span of the
/// samples nearest inside it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowCpu {
    /// CPU seconds of the whole process.
    pub total: f64,
    /// CPU seconds by thread group, the largest first.
    pub by_thread: Vec<(&'static str, f64)>,
}

/// CPU between `from` and `to` by the samples nearest inside.
pub fn cpu_between(
    samples: &[CpuSample],
    from: std::time::Instant,
    to: std::time::Instant,
) -> Option<WindowCpu> {
    let first = samples.iter().find(|s| s.at >= from)?;
    let last = samples.iter().rev().find(|s| s.at <= to)?;
    if last.at <= first.at {
        return None;
    }
    let scale = to.saturating_duration_since(from).as_secs_f64()
        / last.at.duration_since(first.at).as_secs_f64().max(1e-9);
    Some(WindowCpu {
        total: (last.total - first.total) * scale,
        by_thread: super::threads::between(&first.threads, &last.threads)
            .into_iter()
            .map(|(group, seconds)| (group, seconds * scale))
            .collect(),
    })
}

/// The steady part of a phase: from the arrival of the `skip` share of
/// outputs to that of the `1 - skip` share (ramp-up and the tail left out).
/// Returns `(from, to, outputs inside)`.
pub fn steady_window(
    arrivals: &mut [std::time::Instant],
    skip: f64,
) -> Option<(std::time::Instant, std::time::Instant, usize)> {
    arrivals.sort_unstable();
    let n = arrivals.len();
    let lo = ((n as f64) * skip).floor() as usize;
    let hi = n.checked_sub(1 + lo)?;
    let (from, to) = (*arrivals.get(lo)?, *arrivals.get(hi)?);
    (hi > lo).then_some((from, to, hi - lo))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steady_window_leaves_the_edges_out() {
        let t0 = std::time::Instant::now();
        let mut at: Vec<_> = (0..100u64).map(|i| t0 + Duration::from_millis(i)).collect();
        let (from, to, n) = steady_window(&mut at, 0.05).unwrap();
        assert_eq!(
            (from - t0, to - t0, n),
            (Duration::from_millis(5), Duration::from_millis(94), 89)
        );
        assert!(steady_window(&mut [t0], 0.05).is_none());
        assert!(cpu_seconds().is_some_and(|c| c >= 0.0));
        assert!(resident_bytes().is_some_and(|b| b > 0));
    }

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&values, 0.50), Some(50));
        assert_eq!(percentile(&values, 0.99), Some(99));
        assert_eq!(percentile(&values, 0.999), Some(100));
        assert_eq!(percentile(&values, 1.0), Some(100));
        assert_eq!(percentile(&values, 0.0), Some(1));
        assert_eq!(percentile(&values, 0.001), Some(1));

        // Small samples: p99 of fewer than 100 values is the maximum.
        let few = [10, 20, 30];
        assert_eq!(percentile(&few, 0.50), Some(20));
        assert_eq!(percentile(&few, 0.99), Some(30));
        assert_eq!(percentile(&[7], 0.5), Some(7));
        assert_eq!(percentile(&[1, 2], 0.5), Some(1));
        assert_eq!(percentile::<u32>(&[], 0.5), None);
    }

    #[test]
    fn summary_sorts_its_samples() {
        let ms = Duration::from_millis;
        let samples: Vec<Duration> = (1..=200).rev().map(ms).collect();
        let s = Summary::of(samples).unwrap();
        assert_eq!(s.samples, 200);
        assert_eq!(s.p50, ms(100));
        assert_eq!(s.p99, ms(198));
        assert_eq!(s.max, ms(200));
        assert_eq!(Summary::of(Vec::new()), None);
    }

    #[test]
    fn throughput() {
        assert_eq!(per_second(500, Duration::from_millis(250)), 2000.0);
        assert_eq!(per_second(5, Duration::ZERO), 0.0);
    }
}
