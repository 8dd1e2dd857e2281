//! Messages between the controller and agents. The transport adds the sender's
//! node id from its certificate; no message carries a claim of who sent it.

use crate::evidence::RouteObservation;
use crate::ids::{Digest, Generation, OpId};
use serde::{Deserialize, Serialize};

/// The controller's answer to a commit request. Stored durably before it is
/// sent, and replayed unchanged on every retry (S6, S7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Decision {
    /// Switch the public route to the staged release.
    Commit,
    /// Do not switch: the op's generation was superseded before it committed.
    Abort,
}

/// Commands from the controller to one agent. Each carries a generation so a
/// late command can be recognised and refused (S8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ToAgent {
    /// Fetch, verify and stage `release`, then ask for a commit decision.
    Apply {
        op: OpId,
        generation: Generation,
        release: Digest,
    },
    /// The (stored) decision for `op`.
    CommitReply {
        op: OpId,
        generation: Generation,
        decision: Decision,
    },
    /// Put the baseline back on the public route and probe it.
    Restore { op: OpId, generation: Generation },
    /// The op's report is recorded and the op settled: stop re-sending it.
    /// Changes nothing on the route, so it is not fenced by generation.
    Settled { op: OpId, generation: Generation },
}

impl ToAgent {
    /// The generation the command was issued under.
    pub fn generation(&self) -> Generation {
        match self {
            ToAgent::Apply { generation, .. }
            | ToAgent::CommitReply { generation, .. }
            | ToAgent::Restore { generation, .. }
            | ToAgent::Settled { generation, .. } => *generation,
        }
    }

    /// The op the command is about.
    pub fn op(&self) -> OpId {
        match self {
            ToAgent::Apply { op, .. }
            | ToAgent::CommitReply { op, .. }
            | ToAgent::Restore { op, .. }
            | ToAgent::Settled { op, .. } => *op,
        }
    }
}

/// What an agent's report is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ReportKind {
    /// The route was switched to the new release, then probed.
    Switched,
    /// The baseline was put back, then probed.
    Restored,
    /// The op was aborted before switching; the route was probed as it is.
    NotApplied,
}

/// Messages from an agent to the controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ToController {
    /// Sent on every (re)connection: what the agent observes serving now and
    /// the highest generation it accepted. A claim, not settling evidence.
    Hello {
        serving: Option<Digest>,
        generation: Generation,
    },
    /// The release is staged and verified; may the route switch?
    CommitRequest { op: OpId },
    /// A probe of the public route after a switch, restore or abort.
    Report {
        op: OpId,
        kind: ReportKind,
        observation: RouteObservation,
    },
    /// A command was refused because its generation is older than one the
    /// agent already accepted.
    Rejected {
        op: OpId,
        generation: Generation,
        accepted: Generation,
    },
}
