//! A lock-free latency histogram with fixed buckets, exported by the API as Prometheus metrics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets, in seconds.
pub const LATENCY_BUCKETS_SECS: [f64; 14] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Counts of observations per bucket (cumulative on export), their sum and count.
#[derive(Debug, Default)]
pub struct LatencyHistogram {
    buckets: [AtomicU64; 15],
    sum_micros: AtomicU64,
    count: AtomicU64,
}

/// A point-in-time copy of a histogram.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// (upper bound in seconds, cumulative count); the last bound is +Inf.
    pub buckets: Vec<(f64, u64)>,
    /// Sum of observations, seconds.
    pub sum_secs: f64,
    /// Number of observations.
    pub count: u64,
}

impl LatencyHistogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = LATENCY_BUCKETS_SECS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(LATENCY_BUCKETS_SECS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add(d.as_micros() as u64, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Cumulative buckets, as Prometheus wants them.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut acc = 0;
        let mut buckets = Vec::with_capacity(15);
        for (i, b) in self.buckets.iter().enumerate() {
            acc += b.load(Ordering::Relaxed);
            buckets.push((
                LATENCY_BUCKETS_SECS
                    .get(i)
                    .copied()
                    .unwrap_or(f64::INFINITY),
                acc,
            ));
        }
        HistogramSnapshot {
            buckets,
            sum_secs: self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6,
            count: self.count.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative() {
        let h = LatencyHistogram::default();
        h.observe(Duration::from_micros(300));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60));
        let s = h.snapshot();
        assert_eq!(s.count, 3);
        assert_eq!(s.buckets[0], (0.0005, 1));
        assert_eq!(s.buckets[3], (0.005, 2));
        assert_eq!(s.buckets.last().unwrap(), &(f64::INFINITY, 3));
        assert!((s.sum_secs - 60.0033).abs() < 1e-6);
    }
}
