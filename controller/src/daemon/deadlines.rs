//! The core's op deadlines as a sans-IO value, in the quinn-proto style:
//! the core arms and cancels, asks [`Deadlines::poll_timeout`] when to wake
//! up, and at that time takes [`Deadlines::expired`]. One timer in the core
//! loop drives them all; no task per deadline.

use model::OpId;
use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

/// Most deadlines armed at once: one per op holding a slot, and S2 allows
/// at most one live op per node.
pub const DEADLINES_MAX: usize = model::plan::NODES_MAX;

/// Most ops handed out by one [`Deadlines::expired`] call: the rest stay
/// due and come out on the next call, so one wake-up is bounded work.
pub const EXPIRED_PER_POLL_MAX: usize = 256;

/// Armed deadlines: at most one per op; re-arming replaces.
#[derive(Debug, Default)]
pub struct Deadlines {
    by_op: HashMap<OpId, Instant>,
    queue: BTreeSet<(Instant, OpId)>,
}

impl Deadlines {
    /// Arm `op`'s deadline at `at`, replacing any armed before.
    pub fn arm(&mut self, op: OpId, at: Instant) {
        if let Some(old) = self.by_op.insert(op, at) {
            self.queue.remove(&(old, op));
        }
        self.queue.insert((at, op));
        // Paired with the length bound: both indexes name the same ops.
        assert_eq!(self.by_op.len(), self.queue.len());
        assert!(
            self.by_op.len() <= DEADLINES_MAX,
            "more deadlines than ops that may hold a slot"
        );
    }

    /// Drop `op`'s deadline (it settled); a no-op if none is armed.
    pub fn cancel(&mut self, op: OpId) {
        if let Some(at) = self.by_op.remove(&op) {
            self.queue.remove(&(at, op));
        }
    }

    /// When the earliest armed deadline is due, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.queue.first().map(|(at, _)| *at)
    }

    /// The ops whose deadline is due at `now` (at most
    /// [`EXPIRED_PER_POLL_MAX`], earliest first), disarmed. Calling it early
    /// or twice is harmless: nothing due, nothing returned.
    pub fn expired(&mut self, now: Instant) -> Vec<OpId> {
        let mut due = Vec::new();
        while due.len() < EXPIRED_PER_POLL_MAX {
            match self.queue.first() {
                Some(&(at, op)) if at <= now => {
                    self.queue.pop_first();
                    self.by_op.remove(&op);
                    due.push(op);
                }
                _ => break,
            }
        }
        due
    }

    /// How many deadlines are armed.
    pub fn len(&self) -> usize {
        self.by_op.len()
    }

    /// Whether none is armed.
    pub fn is_empty(&self) -> bool {
        self.by_op.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rearming_replaces_and_cancel_drops() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut d = Deadlines::default();
        d.arm(OpId(1), t0 + 5 * s);
        d.arm(OpId(2), t0 + 2 * s);
        assert_eq!(d.poll_timeout(), Some(t0 + 2 * s));
        // Re-arming op2 later replaces its first deadline.
        d.arm(OpId(2), t0 + 9 * s);
        assert_eq!(d.len(), 2);
        assert_eq!(d.poll_timeout(), Some(t0 + 5 * s));
        assert!(d.expired(t0 + 4 * s).is_empty(), "early: nothing due");
        assert_eq!(d.expired(t0 + 5 * s), vec![OpId(1)]);
        assert!(d.expired(t0 + 5 * s).is_empty(), "a second call is a no-op");
        d.cancel(OpId(2));
        d.cancel(OpId(2));
        assert!(d.is_empty());
        assert_eq!(d.poll_timeout(), None);
        assert!(d.expired(t0 + 60 * s).is_empty());
    }

    #[test]
    fn one_poll_hands_out_a_bounded_number_earliest_first() {
        let t0 = Instant::now();
        let mut d = Deadlines::default();
        let count = EXPIRED_PER_POLL_MAX + 10;
        for i in 0..count {
            // Armed in reverse order of due time.
            d.arm(
                OpId(i as u32),
                t0 + Duration::from_millis((count - i) as u64),
            );
        }
        let late = t0 + Duration::from_secs(1);
        let first = d.expired(late);
        assert_eq!(first.len(), EXPIRED_PER_POLL_MAX);
        assert_eq!(first[0], OpId((count - 1) as u32), "earliest first");
        assert_eq!(d.expired(late).len(), 10);
        assert!(d.is_empty());
    }
}
