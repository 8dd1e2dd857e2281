//! Messages between the controller and agents. The transport adds the sender's
//! node id from its certificate; no message carries a claim of who sent it.

use crate::evidence::RouteObservation;
use crate::ids::{Digest, Generation, OpId};
use crate::platform::Platform;
use serde::{Deserialize, Serialize};
use std::fmt;

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
    /// The (stored) decision for `op`. It names the op's release so that an
    /// agent that never received the `Apply` (offline when the op was
    /// granted, then superseded) can still account for the op: it journals
    /// the abort and reports what serves, without fetching anything.
    CommitReply {
        op: OpId,
        generation: Generation,
        release: Digest,
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
    /// The agent refused to stage the op's release (and so never asked to
    /// commit); the route was probed as it is. Settles like `NotApplied`;
    /// the reason reaches the controller's log instead of staying in the
    /// agent's journal. Appended last so older encodings still decode.
    Refused(StageRefusal),
}

impl fmt::Display for ReportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = crate::words::report_kind(*self);
        match self {
            ReportKind::Refused(reason) => write!(f, "{word}: {reason}"),
            _ => f.write_str(word),
        }
    }
}

impl ReportKind {
    /// Whether the route was left as it was (aborted or refused).
    pub fn left_route_alone(self) -> bool {
        match self {
            // A roll back refused after an irreversible migration: the
            // route still serves the new release.
            ReportKind::Refused(StageRefusal::MigrationIrreversible) => false,
            ReportKind::NotApplied | ReportKind::Refused(_) => true,
            ReportKind::Switched | ReportKind::Restored => false,
        }
    }
}

/// Why an agent refused to stage a release (SPEC §5 recovery, §8 bundles).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum StageRefusal {
    /// The bundle failed verification: signature, digest, or format.
    BundleRejected,
    /// The attempt budget was spent while the controller kept answering
    /// that it has no bundle with this digest (for example because its
    /// stored copy no longer hashes to it).
    BundleUnavailable,
    /// The attempt budget was spent without a verified bundle, for some
    /// other transient reason (timeouts, broken streams).
    AttemptBudgetSpent,
    /// After a crash, recovery found a stage's effect it could not show good
    /// or absent, so it stopped rather than risk applying twice.
    EffectUnknown,
    /// (issue #24 item 2) The agent crashed while the release's migration
    /// ran: its effect on the app's data is unknown, so recovery stopped
    /// rather than run it again. The data's snapshot is kept; the route
    /// was never switched. A person decides (roll back restores the
    /// snapshot). Appended last so older encodings still decode.
    MigrationInterrupted,
    /// (issue #24 item 2) The release's migration failed (non-zero exit,
    /// timeout, or the data over its snapshot bound): the agent put the
    /// data's snapshot back and left the route on the baseline.
    MigrationFailed,
    /// (issue #24 item 2) A roll back was asked after an irreversible
    /// migration ran: the agent does not restore the data on its own, and
    /// the op waits for a person.
    MigrationIrreversible,
}

impl fmt::Display for StageRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StageRefusal::BundleRejected => "bundle rejected (signature, digest or format)",
            StageRefusal::BundleUnavailable => {
                "the controller has no such bundle (attempt budget spent)"
            }
            StageRefusal::AttemptBudgetSpent => "attempt budget spent",
            StageRefusal::EffectUnknown => "a stage's effect could not be verified after a crash",
            StageRefusal::MigrationInterrupted => {
                "the migration was interrupted by a crash; its effect on the data is unknown"
            }
            StageRefusal::MigrationFailed => {
                "the migration failed; the data's snapshot was put back"
            }
            StageRefusal::MigrationIrreversible => {
                "the migration is irreversible: a roll back needs a person"
            }
        })
    }
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
    /// Sent right after every `Hello` (issue #24 item 5): the architecture
    /// and operating system the agent runs on (or was told to declare).
    /// Its own message, not a field of `Hello`, so `Hello`'s encoding and
    /// an older agent's messages stay as they were. Appended last.
    Platform { platform: Platform },
}
