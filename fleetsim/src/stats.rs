//! What the simulated agents count, for the live progress line and the
//! report: atomics on the hot path, one lock for the latency samples.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Latency samples kept (a 100,000-node run fits; beyond, new samples are
/// dropped and counted).
pub const LATENCY_SAMPLES_MAX: usize = 1_000_000;

/// Counters shared by every simulated agent.
#[derive(Debug, Default)]
pub struct Stats {
    /// Agents with a live session now.
    pub connected: AtomicUsize,
    /// Handshakes that failed.
    pub connect_failures: AtomicUsize,
    /// `Apply` commands received (granted ops as the agents saw them).
    pub applies: AtomicUsize,
    /// `Restore` commands received (failed ops).
    pub restores: AtomicUsize,
    /// Bundles fetched over QUIC.
    pub fetches: AtomicUsize,
    /// Route switches done.
    pub switches: AtomicUsize,
    /// Ops the controller settled (the agent closed them).
    pub closed: AtomicUsize,
    /// Nodes that went silent.
    pub silences: AtomicUsize,
    /// Nodes that crashed.
    pub crashes: AtomicUsize,
    /// Commit request to commit reply, in microseconds.
    commit_us: Mutex<Vec<u64>>,
    /// Handshake durations, in microseconds.
    handshake_us: Mutex<Vec<u64>>,
}

/// Percentiles of a set of durations, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Percentiles {
    /// Samples.
    pub count: usize,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

impl Stats {
    /// Record one commit request → commit reply time.
    pub fn commit_latency(&self, took: Duration) {
        push(&self.commit_us, took);
    }

    /// Record one handshake time.
    pub fn handshake(&self, took: Duration) {
        push(&self.handshake_us, took);
    }

    /// Commit latency percentiles so far.
    pub fn commit_percentiles(&self) -> Percentiles {
        percentiles(&self.commit_us)
    }

    /// Handshake percentiles so far.
    pub fn handshake_percentiles(&self) -> Percentiles {
        percentiles(&self.handshake_us)
    }

    /// A counter's value.
    pub fn get(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::Relaxed)
    }
}

fn push(samples: &Mutex<Vec<u64>>, took: Duration) {
    // A poisoned lock only means another agent task panicked mid-push.
    let mut samples = samples.lock().unwrap_or_else(|e| e.into_inner());
    if samples.len() < LATENCY_SAMPLES_MAX {
        samples.push(took.as_micros() as u64);
    }
}

fn percentiles(samples: &Mutex<Vec<u64>>) -> Percentiles {
    let mut sorted = samples.lock().unwrap_or_else(|e| e.into_inner()).clone();
    sorted.sort_unstable();
    percentiles_of(&sorted)
}

/// Nearest-rank percentiles of sorted microsecond samples.
pub fn percentiles_of(sorted: &[u64]) -> Percentiles {
    if sorted.is_empty() {
        return Percentiles::default();
    }
    assert!(sorted.windows(2).all(|w| w[0] <= w[1]), "samples unsorted");
    let rank = |p: f64| {
        let index = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
        sorted[index] as f64 / 1000.0
    };
    Percentiles {
        count: sorted.len(),
        p50_ms: rank(0.50),
        p99_ms: rank(0.99),
        max_ms: sorted[sorted.len() - 1] as f64 / 1000.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<u64> = (1..=100).map(|ms| ms * 1000).collect();
        let p = percentiles_of(&samples);
        assert_eq!(
            (p.count, p.p50_ms, p.p99_ms, p.max_ms),
            (100, 50.0, 99.0, 100.0)
        );
        assert_eq!(percentiles_of(&[]), Percentiles::default());
        assert_eq!(percentiles_of(&[7000]).p99_ms, 7.0);
    }
}
