//! Effects derived from applied events: what the controller sends and which
//! deadlines it arms and cancels ([`super::timers::Timers`] performs those). The runtime performs them only after the event that
//! produced them is durable (S7), in the raft-rs `Ready` style.

use super::event::Event;
use super::state::{ControllerState, OpPhase};
use crate::ids::{NodeId, OpId};
use crate::msg::ToAgent;
use serde::{Deserialize, Serialize};

/// Something the runtime must do once the event behind it is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Effect {
    /// Send a command to a node's agent.
    Send { to: NodeId, msg: ToAgent },
    /// Arm (or re-arm) the deadline after which `op` counts as silent and an
    /// [`super::Input::Timeout`] is fed back.
    ArmTimeout { op: OpId },
    /// Drop `op`'s deadline: it settled, so silence can no longer make it
    /// UNKNOWN and a timeout would be a spurious input.
    CancelTimeout { op: OpId },
}

/// The effects of `event`, computed on the state *after* applying it.
/// Nothing is ever sent to a quarantined node (Q1): two agents hold its
/// identity and a command could reach either.
pub fn effects(state: &ControllerState, event: &Event) -> Vec<Effect> {
    let mut out = unfiltered_effects(state, event);
    out.retain(|e| !matches!(e, Effect::Send { to, .. } if state.is_quarantined(*to)));
    out
}

fn unfiltered_effects(state: &ControllerState, event: &Event) -> Vec<Effect> {
    match event {
        Event::OpGranted { op, .. } | Event::RestoreRequested { op } => {
            let mut out = current_command(state, *op).into_iter().collect::<Vec<_>>();
            out.push(Effect::ArmTimeout { op: *op });
            out
        }
        // A settled op waits on no deadline any more.
        Event::OpSettled { op, .. } => vec![Effect::CancelTimeout { op: *op }],
        // Every answer to a commit request carries the stored decision,
        // whatever phase the op has reached since (S6).
        Event::CommitDecided { op, decision } | Event::CommitReplayed { op, decision } => state
            .op_summary(*op)
            .map(|o| Effect::Send {
                to: o.node,
                msg: ToAgent::CommitReply {
                    op: *op,
                    generation: o.generation,
                    release: o.release,
                    decision: *decision,
                },
            })
            .into_iter()
            .collect(),
        // A report for a settled op is answered with an acknowledgement so
        // the agent stops re-sending it. (Settling itself sends nothing: the
        // agent's next retry is acknowledged, which keeps one message kind
        // out of every interleaving the checker explores.)
        Event::LateReportIgnored { node, op } => state
            .op_summary(*op)
            .filter(|o| o.outcome.is_some() && o.node == *node)
            .map(|o| Effect::Send {
                to: o.node,
                msg: ToAgent::Settled {
                    op: *op,
                    generation: o.generation,
                },
            })
            .into_iter()
            .collect(),
        // The state forgot the op's owner and generation; the message's
        // sender is told to stop re-sending it (an agent acts on `Settled`
        // only for its own op in the same id, and no generation fences it).
        Event::ForgottenOpIgnored { node, op } => vec![Effect::Send {
            to: *node,
            msg: ToAgent::Settled {
                op: *op,
                generation: state.generation,
            },
        }],
        // A (re)connected agent gets the command for its live op again: the
        // command reveals nothing that is not already durable.
        // A released node gets the command for its live op again, as on
        // a reconnect.
        Event::NodeHello { node, .. } | Event::NodeReleased { node } => state
            .nodes
            .get(node)
            .and_then(|n| n.live_op)
            .and_then(|op| current_command(state, op))
            .into_iter()
            .collect(),
        _ => vec![],
    }
}

/// The command that moves `op` forward from its current phase, if any.
pub fn current_command(state: &ControllerState, op: OpId) -> Option<Effect> {
    let o = state.op(op)?;
    let msg = match o.phase {
        OpPhase::Granted => ToAgent::Apply {
            op,
            generation: o.generation,
            release: o.release,
        },
        OpPhase::Decided => ToAgent::CommitReply {
            op,
            generation: o.generation,
            release: o.release,
            decision: o.decision?,
        },
        // A restore carries the current generation: it is the newest intent.
        OpPhase::Restoring => ToAgent::Restore {
            op,
            generation: state.generation,
        },
        OpPhase::Settled(_) => return None,
    };
    Some(Effect::Send { to: o.node, msg })
}
