//! The core's op deadlines, in the quinn-proto style: the driver hands in
//! its monotonic clock as `now_ms` and never decides anything about a
//! deadline itself.
//!
//! - [`Timers::handle_effects`] arms on [`Effect::ArmTimeout`] and drops on
//!   [`Effect::CancelTimeout`] (both decided by [`super::effects`]);
//! - [`Timers::rearm`] is what a restart or a takeover does after replaying
//!   the log: the deadlines are not in the log (they are times of this
//!   process), so every op that still waits on one gets a whole timeout
//!   from now;
//! - [`Timers::poll_timeout`] says when the driver's one timer should fire;
//! - [`Timers::handle_timeout`] turns what is due into
//!   [`Input::Timeout`]s. Calling it early or twice is harmless: nothing
//!   due, nothing returned.
//!
//! Pure: times are plain milliseconds on the driver's monotonic clock.

use super::effects::Effect;
use super::input::Input;
use super::state::{ControllerState, Op};
use crate::ids::OpId;
use std::collections::{BTreeSet, HashMap};

/// Most deadlines armed at once: one per op holding a slot, and S2 allows
/// at most one live op per node.
pub const TIMERS_MAX: usize = crate::plan::NODES_MAX;

/// Most ops handed out by one [`Timers::handle_timeout`] call: the rest
/// stay due and come out on the next call, so one wake-up is bounded work.
pub const EXPIRED_PER_POLL_MAX: usize = 256;

/// Armed op deadlines: at most one per op; re-arming replaces.
#[derive(Clone, Debug)]
pub struct Timers {
    /// How long an op may stay silent before it counts as UNKNOWN.
    op_timeout_ms: u64,
    by_op: HashMap<OpId, u64>,
    queue: BTreeSet<(u64, OpId)>,
}

/// Whether `op` waits on a deadline after a replay: it holds its slot and
/// silence has not yet made it UNKNOWN (a second timeout changes nothing,
/// so an UNKNOWN op waits on evidence, not on a clock).
pub fn waits_on_deadline(op: &Op) -> bool {
    op.occupies_slot() && !op.is_unknown()
}

impl Timers {
    /// No deadline armed; each armed one is `op_timeout_ms` after its arming.
    pub fn new(op_timeout_ms: u64) -> Self {
        Self {
            op_timeout_ms,
            by_op: HashMap::new(),
            queue: BTreeSet::new(),
        }
    }

    /// Perform the timer effects of a durable batch at `now_ms`; every
    /// other effect is the driver's.
    pub fn handle_effects<'a>(
        &mut self,
        now_ms: u64,
        effects: impl IntoIterator<Item = &'a Effect>,
    ) {
        for effect in effects {
            match effect {
                Effect::ArmTimeout { op } => self.arm(*op, now_ms),
                Effect::CancelTimeout { op } => self.cancel(*op),
                Effect::Send { .. } => {}
            }
        }
    }

    /// After a replay (a restart, a takeover): forget every deadline and
    /// arm one for each op that [`waits_on_deadline`], a whole timeout from
    /// `now_ms`. O(ops in the hot state), once per start.
    pub fn rearm(&mut self, state: &ControllerState, now_ms: u64) {
        self.by_op.clear();
        self.queue.clear();
        for op in state.ops.values().filter(|op| waits_on_deadline(op)) {
            self.arm(op.id, now_ms);
        }
    }

    /// When the earliest armed deadline is due, if any.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.queue.first().map(|(at, _)| *at)
    }

    /// The inputs due at `now_ms`: one [`Input::Timeout`] per op whose
    /// deadline passed (at most [`EXPIRED_PER_POLL_MAX`], earliest first),
    /// each disarmed.
    pub fn handle_timeout(&mut self, now_ms: u64) -> Vec<Input> {
        let mut due = Vec::new();
        while due.len() < EXPIRED_PER_POLL_MAX {
            match self.queue.first() {
                Some(&(at, op)) if at <= now_ms => {
                    self.queue.pop_first();
                    self.by_op.remove(&op);
                    due.push(Input::Timeout { op });
                }
                _ => break,
            }
        }
        due
    }

    /// Whether `op` has a deadline armed.
    pub fn is_armed(&self, op: OpId) -> bool {
        self.by_op.contains_key(&op)
    }

    /// How many deadlines are armed.
    pub fn len(&self) -> usize {
        self.by_op.len()
    }

    /// Whether none is armed.
    pub fn is_empty(&self) -> bool {
        self.by_op.is_empty()
    }

    fn arm(&mut self, op: OpId, now_ms: u64) {
        let at = now_ms.saturating_add(self.op_timeout_ms);
        if let Some(old) = self.by_op.insert(op, at) {
            self.queue.remove(&(old, op));
        }
        self.queue.insert((at, op));
        // Paired with the length bound: both indexes name the same ops.
        assert_eq!(self.by_op.len(), self.queue.len());
        assert!(
            self.by_op.len() <= TIMERS_MAX,
            "more deadlines than ops that may hold a slot"
        );
    }

    fn cancel(&mut self, op: OpId) {
        if let Some(at) = self.by_op.remove(&op) {
            self.queue.remove(&(at, op));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arm(t: &mut Timers, now_ms: u64, op: u32) {
        t.handle_effects(now_ms, &[Effect::ArmTimeout { op: OpId(op) }]);
    }

    fn ops(inputs: Vec<Input>) -> Vec<OpId> {
        inputs
            .into_iter()
            .map(|i| match i {
                Input::Timeout { op } => op,
                other => panic!("not a timeout: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn rearming_replaces_and_cancel_drops() {
        let mut t = Timers::new(1_000);
        arm(&mut t, 4_000, 1);
        arm(&mut t, 1_000, 2);
        assert_eq!(t.poll_timeout(), Some(2_000));
        // Re-arming op2 later replaces its first deadline.
        arm(&mut t, 8_000, 2);
        assert_eq!(t.len(), 2);
        assert_eq!(t.poll_timeout(), Some(5_000));
        assert!(t.handle_timeout(4_999).is_empty(), "early: nothing due");
        assert_eq!(ops(t.handle_timeout(5_000)), vec![OpId(1)]);
        assert!(
            t.handle_timeout(5_000).is_empty(),
            "a second call is a no-op"
        );
        let cancel = [Effect::CancelTimeout { op: OpId(2) }];
        t.handle_effects(6_000, &cancel);
        t.handle_effects(6_000, &cancel);
        assert!(t.is_empty());
        assert_eq!(t.poll_timeout(), None);
        assert!(t.handle_timeout(60_000).is_empty());
    }

    #[test]
    fn one_poll_hands_out_a_bounded_number_earliest_first() {
        let mut t = Timers::new(0);
        let count = EXPIRED_PER_POLL_MAX + 10;
        for i in 0..count {
            // Armed in reverse order of due time.
            arm(&mut t, (count - i) as u64, i as u32);
        }
        let first = ops(t.handle_timeout(1_000));
        assert_eq!(first.len(), EXPIRED_PER_POLL_MAX);
        assert_eq!(first[0], OpId((count - 1) as u32), "earliest first");
        assert_eq!(t.handle_timeout(1_000).len(), 10);
        assert!(t.is_empty());
    }
}
