//! A power line shared by several mounts: the moment power starts to fail.
//!
//! A real outage stops every disk at one instant. A harness that cuts
//! several mounts one after another (and kills the processes on them) needs
//! that instant to be the same for all of them, including when the outage
//! is chosen as "the Nth sync from now" on any of the mounts. Once the line
//! has tripped, every `fsync`/`fsyncdir` on every mount attached to it is
//! held unanswered: the caller never learns that it returned, so nothing a
//! process does after that sync can be based on it having been durable.
//! The harness then kills the processes and cuts each mount, which answers
//! the held requests with `EIO` (to processes that are already dead).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// "Not armed" for the countdown.
const DISARMED: u64 = u64::MAX;

/// A power line several [`crate::LazyMount`]s share (cheap to clone: the
/// clones are the same line).
#[derive(Clone, Debug)]
pub struct PowerLine {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    tripped: AtomicBool,
    /// Syncs still allowed to complete before the line trips
    /// ([`DISARMED`] when no countdown runs).
    syncs_left: AtomicU64,
    /// Syncs that completed on any mount of the line (for reports).
    syncs: AtomicU64,
}

impl Default for PowerLine {
    fn default() -> Self {
        PowerLine {
            inner: Arc::new(Inner {
                tripped: AtomicBool::new(false),
                syncs_left: AtomicU64::new(DISARMED),
                syncs: AtomicU64::new(0),
            }),
        }
    }
}

impl PowerLine {
    /// A line with power on and no countdown.
    pub fn new() -> PowerLine {
        PowerLine::default()
    }

    /// Power fails at the `n`th sync from now on any mount of the line
    /// (`n` = 1: the very next sync is held). `n` = 0 trips at once.
    pub fn trip_at_sync(&self, n: u64) {
        if n == 0 {
            self.trip();
        } else {
            self.inner.syncs_left.store(n, Ordering::SeqCst);
        }
    }

    /// Power fails now: every later sync on the line is held.
    pub fn trip(&self) {
        self.inner.tripped.store(true, Ordering::SeqCst);
        self.inner.syncs_left.store(DISARMED, Ordering::SeqCst);
    }

    /// True once power has failed (until [`PowerLine::restore`]).
    pub fn tripped(&self) -> bool {
        self.inner.tripped.load(Ordering::SeqCst)
    }

    /// Power is back (after the harness has cut every mount); disarms any
    /// countdown.
    pub fn restore(&self) {
        self.inner.syncs_left.store(DISARMED, Ordering::SeqCst);
        self.inner.tripped.store(false, Ordering::SeqCst);
    }

    /// Syncs that completed on the line since it was made.
    pub fn syncs(&self) -> u64 {
        self.inner.syncs.load(Ordering::SeqCst)
    }

    /// Called by a mount for every sync: false when this sync must be held
    /// (power has failed, or this is the sync the countdown stops at).
    pub(crate) fn sync_may_complete(&self) -> bool {
        if self.tripped() {
            return false;
        }
        let countdown = self.inner.syncs_left.fetch_update(
            Ordering::SeqCst,
            Ordering::SeqCst,
            |left| match left {
                DISARMED => None,
                left => Some(left - 1),
            },
        );
        if countdown == Ok(1) {
            self.trip();
            return false;
        }
        if self.tripped() {
            return false;
        }
        self.inner.syncs.fetch_add(1, Ordering::SeqCst);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_countdown_holds_the_nth_sync_and_every_one_after_it() {
        let line = PowerLine::new();
        line.trip_at_sync(3);
        assert!(line.sync_may_complete());
        assert!(line.sync_may_complete());
        assert!(
            !line.sync_may_complete(),
            "the 3rd sync is where power fails"
        );
        assert!(line.tripped());
        assert!(
            !line.sync_may_complete(),
            "nothing completes after the trip"
        );
        assert_eq!(line.syncs(), 2);
        line.restore();
        assert!(line.sync_may_complete());
        assert!(line.clone().sync_may_complete(), "clones are one line");
        assert_eq!(line.syncs(), 4);
    }

    #[test]
    fn an_unarmed_line_never_trips() {
        let line = PowerLine::new();
        for _ in 0..1000 {
            assert!(line.sync_may_complete());
        }
        line.trip_at_sync(0);
        assert!(line.tripped());
    }
}
