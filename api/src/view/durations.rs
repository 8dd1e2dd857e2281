//! How long ops take from grant to settlement, per rollout (issue #28
//! item 5: the histogram on a rollout's page). Runtime-only, like
//! [`super::snapshot::Snapshot::unknown_since`]: the model has no clock,
//! and the log does not date its entries, so durations are measured by
//! this process's monotonic clock for the ops it saw granted. An op
//! granted before this process started (or before a standby caught up
//! from a snapshot) settles *undated*: counted apart, never given a
//! made-up duration.
//!
//! Bounded: the ops measured are the ops holding a slot (the rollouts'
//! slots bound them), and histograms are kept for the rollouts the state
//! remembers ([`OpDurations::forget_rollouts`]), each a fixed array.

use model::controller::ControllerState;
use model::{OpId, RolloutId};
use std::time::{Duration, Instant};

/// Upper bounds of the histogram's buckets, in milliseconds: a bucket
/// holds the durations up to its bound (and above the one before); one
/// more bucket holds what is above the last. Roughly ×2.5 steps from a
/// fast switch (100 ms) to an op that waited an hour for its agent.
pub const OP_DURATION_BOUNDS_MS: [u64; 12] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000, 900_000, 3_600_000,
];
/// Buckets of one histogram: one per bound and one above the last.
pub const OP_DURATION_BUCKETS: usize = OP_DURATION_BOUNDS_MS.len() + 1;

/// One rollout's settled ops by duration, grant to settlement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DurationHistogram {
    /// Ops per bucket ([`OP_DURATION_BOUNDS_MS`]).
    pub counts: [u32; OP_DURATION_BUCKETS],
    /// Ops that settled without a grant time: granted before this process
    /// started (or before a standby caught up from a snapshot).
    pub undated: u32,
}

impl DurationHistogram {
    /// The bucket a duration falls in.
    pub fn bucket(duration: Duration) -> usize {
        let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        OP_DURATION_BOUNDS_MS
            .iter()
            .position(|bound| ms <= *bound)
            .unwrap_or(OP_DURATION_BOUNDS_MS.len())
    }

    /// Settled ops with a duration.
    pub fn dated(&self) -> u32 {
        self.counts.iter().sum()
    }

    /// Bucket `i`'s label in the operator's words, like `≤ 2.5 s` or
    /// `> 1 h` (the last bucket).
    pub fn label(i: usize) -> String {
        match OP_DURATION_BOUNDS_MS.get(i) {
            Some(ms) => format!("≤ {}", duration_text(*ms)),
            None => format!("> {}", duration_text(OP_DURATION_BOUNDS_MS[i - 1])),
        }
    }
}

/// A bound in the largest unit that keeps it short: `250 ms`, `2.5 s`,
/// `5 min`, `1 h`.
fn duration_text(ms: u64) -> String {
    const MINUTE_MS: u64 = 60_000;
    const HOUR_MS: u64 = 60 * MINUTE_MS;
    match ms {
        ms if ms >= HOUR_MS && ms % HOUR_MS == 0 => format!("{} h", ms / HOUR_MS),
        ms if ms >= MINUTE_MS && ms % MINUTE_MS == 0 => format!("{} min", ms / MINUTE_MS),
        ms if ms >= 1_000 && ms % 1_000 == 0 => format!("{} s", ms / 1_000),
        ms if ms >= 1_000 => format!("{}.{} s", ms / 1_000, (ms % 1_000) / 100),
        ms => format!("{ms} ms"),
    }
}

/// When each op holding a slot was granted, and each rollout's histogram.
#[derive(Clone, Debug, Default)]
pub struct OpDurations {
    /// Ops holding a slot that this process saw granted, with the time.
    granted_at: imbl::OrdMap<OpId, Instant>,
    /// Ops holding a slot whose grant this process did not see.
    undated: imbl::OrdSet<OpId>,
    histograms: imbl::OrdMap<RolloutId, DurationHistogram>,
}

impl OpDurations {
    /// Every op holding a slot in `state` is undated: this process did not
    /// see it granted (a start, or a standby catching up from a snapshot).
    pub fn undate_all(&mut self, state: &ControllerState) {
        for op in state.ops.values().filter(|op| op.occupies_slot()) {
            self.granted_at.remove(&op.id);
            self.undated.insert(op.id);
        }
    }

    /// Notes what op `id` is now, as of `now`: granted (holding a slot,
    /// seen for the first time) starts its clock; settled ends it into its
    /// rollout's histogram. Idempotent: an op touched again is counted once.
    pub fn touched(&mut self, state: &ControllerState, id: OpId, now: Instant) {
        let Some(op) = state.op(id) else {
            return;
        };
        if op.occupies_slot() {
            if !self.undated.contains(&id) && !self.granted_at.contains_key(&id) {
                self.granted_at.insert(id, now);
            }
            return;
        }
        let bucket = match self.granted_at.remove(&id) {
            Some(at) => Some(DurationHistogram::bucket(now.saturating_duration_since(at))),
            None if self.undated.remove(&id).is_some() => None,
            None => return, // already counted (or settled before it was seen)
        };
        let histogram = self.histograms.entry(op.rollout).or_default();
        match bucket {
            Some(b) => histogram.counts[b] = histogram.counts[b].saturating_add(1),
            None => histogram.undated = histogram.undated.saturating_add(1),
        }
    }

    /// Drops the histograms of rollouts `state` no longer remembers, so
    /// they stay as bounded as the state.
    pub fn forget_rollouts(&mut self, state: &ControllerState) {
        let forgotten: Vec<RolloutId> = self
            .histograms
            .keys()
            .filter(|rollout| state.rollout(**rollout).is_none())
            .copied()
            .collect();
        for rollout in forgotten {
            self.histograms.remove(&rollout);
        }
    }

    /// Rollout `rollout`'s histogram, if any op of it settled while this
    /// process watched.
    pub fn histogram(&self, rollout: RolloutId) -> Option<&DurationHistogram> {
        self.histograms.get(&rollout)
    }

    /// Ops holding a slot whose clock runs (for tests and bounds).
    pub fn measuring(&self) -> usize {
        self.granted_at.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::controller::Input;
    use testkit::accept;
    use testkit::fixtures::{enroll, hello, plan, verify, V1};

    fn state(nodes: u32) -> ControllerState {
        let mut state = ControllerState::default();
        for n in 0..nodes {
            accept(&mut state, enroll(&format!("n{n}"), Default::default()));
            accept(&mut state, hello(model::NodeId(n), Some(V1)));
        }
        accept(
            &mut state,
            Input::StartRollout {
                plan: plan(nodes, 2, false),
            },
        );
        state
    }

    #[test]
    fn every_bucket_has_a_short_label() {
        let labels: Vec<String> = (0..OP_DURATION_BUCKETS)
            .map(DurationHistogram::label)
            .collect();
        assert_eq!(
            labels,
            [
                "≤ 100 ms",
                "≤ 250 ms",
                "≤ 500 ms",
                "≤ 1 s",
                "≤ 2.5 s",
                "≤ 5 s",
                "≤ 10 s",
                "≤ 30 s",
                "≤ 1 min",
                "≤ 5 min",
                "≤ 15 min",
                "≤ 1 h",
                "> 1 h"
            ]
        );
    }

    #[test]
    fn the_buckets_hold_up_to_their_bound() {
        let ms = Duration::from_millis;
        assert_eq!(DurationHistogram::bucket(ms(0)), 0);
        assert_eq!(DurationHistogram::bucket(ms(100)), 0);
        assert_eq!(DurationHistogram::bucket(ms(101)), 1);
        assert_eq!(DurationHistogram::bucket(ms(3_600_000)), 11);
        assert_eq!(DurationHistogram::bucket(ms(3_600_001)), 12);
        assert_eq!(DurationHistogram::bucket(Duration::MAX), 12);
    }

    /// Granted then settled: one dated op in the bucket of its duration,
    /// counted once however often it is touched after.
    #[test]
    fn a_settled_op_is_counted_once_in_its_bucket() {
        let mut state = state(2);
        let mut d = OpDurations::default();
        let t0 = Instant::now();
        d.touched(&state, OpId(0), t0);
        assert_eq!(d.measuring(), 1);
        verify(&mut state, 0);
        let later = t0 + Duration::from_millis(700);
        d.touched(&state, OpId(0), later);
        d.touched(&state, OpId(0), later + Duration::from_secs(60));
        let h = d.histogram(model::RolloutId(0)).expect("a histogram");
        assert_eq!(h.dated(), 1);
        assert_eq!(
            h.counts[DurationHistogram::bucket(Duration::from_millis(700))],
            1
        );
        assert_eq!(h.undated, 0);
        assert_eq!(d.measuring(), 0);
    }

    /// An op holding a slot when the process started settles undated: no
    /// made-up duration from the start.
    #[test]
    fn an_op_granted_before_the_start_settles_undated() {
        let mut state = state(2);
        let mut d = OpDurations::default();
        d.undate_all(&state);
        let t0 = Instant::now();
        d.touched(&state, OpId(0), t0);
        assert_eq!(d.measuring(), 0, "its clock never starts");
        verify(&mut state, 0);
        d.touched(&state, OpId(0), t0 + Duration::from_secs(1));
        let h = d.histogram(model::RolloutId(0)).expect("a histogram");
        assert_eq!((h.dated(), h.undated), (0, 1));
    }
}
