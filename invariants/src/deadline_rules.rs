//! T1 a deadline for every wait: an op that waits on its agent (it holds
//! its slot and silence has not yet made it UNKNOWN) always has a deadline
//! armed, so silence ends in UNKNOWN and never in a slot held forever; a
//! settled op has none, so no timeout is ever an input about it. Which ops
//! wait is the model's [`waits_on_deadline`]; the deadlines are the model's
//! [`model::controller::Timers`], driven by the effects of each batch.

use crate::{broken, Rule, Violation};
use model::controller::{waits_on_deadline, ControllerState, Effect, Event};
use model::OpId;
use std::collections::{BTreeMap, BTreeSet};

/// T1 on a batch folded from `before` into `after`: `events` the batch's
/// events, `effects` the timer effects they produced, in order. By
/// induction an op that waited before the batch had a deadline; the batch's
/// arm and cancel effects say what changed (a timeout that fired made its
/// op UNKNOWN, so it no longer waits). Costs O(ops the batch names).
pub fn t1_batch_deadlines(
    before: &ControllerState,
    after: &ControllerState,
    events: &[Event],
    effects: &[Effect],
) -> Result<(), Violation> {
    let mut changed: BTreeMap<OpId, bool> = BTreeMap::new();
    for effect in effects {
        match effect {
            Effect::ArmTimeout { op } => changed.insert(*op, true),
            Effect::CancelTimeout { op } => changed.insert(*op, false),
            Effect::Send { .. } => None,
        };
    }
    let mut ops: BTreeSet<OpId> = changed.keys().copied().collect();
    for event in events {
        ops.extend(crate::Touched::of(after, event).ops);
    }
    for op in ops {
        let waited = before.op(op).is_some_and(waits_on_deadline);
        let armed = changed.get(&op).copied().unwrap_or(waited);
        let held = before.op(op).is_some_and(|o| o.occupies_slot());
        t1_op(after, op, armed, held)?;
    }
    Ok(())
}

/// T1 on the ops `ops` of `state` against the deadlines a driver holds
/// (`is_armed`): what the controller checks on every op a batch touched,
/// and on every op after a restart re-armed them.
pub fn t1_deadlines_armed(
    state: &ControllerState,
    ops: impl IntoIterator<Item = OpId>,
    is_armed: impl Fn(OpId) -> bool,
) -> Result<(), Violation> {
    for op in ops {
        t1_op(state, op, is_armed(op), true)?;
    }
    Ok(())
}

/// `held`: whether the op held its slot before (a settled op that was
/// already settled may have lost its deadline long ago).
fn t1_op(state: &ControllerState, op: OpId, armed: bool, held: bool) -> Result<(), Violation> {
    match state.op(op) {
        Some(o) if waits_on_deadline(o) && !armed => broken(
            Rule::DeadlineForEveryWait,
            format!("{op} waits on its node with no deadline armed: its silence would never make it UNKNOWN"),
        ),
        o if held && armed && !o.is_some_and(|o| o.occupies_slot()) => broken(
            Rule::DeadlineForEveryWait,
            format!("{op} no longer holds a slot but its deadline stays armed: a late timeout would be an input about a settled op"),
        ),
        _ => Ok(()),
    }
}
