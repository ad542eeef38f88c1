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

#[cfg(test)]
mod tests {
    use super::*;

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
