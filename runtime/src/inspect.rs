//! Read-only inspection of a controller log: `fleetweft log verify` and
//! `fleetweft log show` are thin formatting around these functions.
//!
//! Both go through [`verify_with`], so they open the log without creating
//! it, check every entry and the hash chain, and decode every payload as a
//! [`model::controller::Event`]. Verification also replays the history
//! through `invariants::check_history`.

use std::path::Path;

use model::controller::{ControllerState, Event, OpPhase, RolloutStatus, UnknownReason};
use serde::Serialize;

use crate::log::{decode_payload, verify_with, VerifyError, VerifyReport};

/// Why a controller log did not verify.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// The directory is missing or holds no Fleetweft log.
    #[error("{0}")]
    NotALog(VerifyError),
    /// The log is damaged (checksum, gap, broken chain, undecodable event,
    /// storage failure). The message names the first bad sequence if known.
    #[error("{0}")]
    Damaged(VerifyError),
    /// The log is intact but an event breaks one of the rules.
    #[error("sequence {sequence}: rule {violation}")]
    RuleViolated {
        /// Sequence of the offending event.
        sequence: u64,
        /// The broken rule and what broke it.
        violation: invariants::Violation,
    },
}

impl InspectError {
    /// The first bad sequence, where there is one.
    pub fn sequence(&self) -> Option<u64> {
        match self {
            InspectError::NotALog(_) => None,
            InspectError::Damaged(err) => err.sequence(),
            InspectError::RuleViolated { sequence, .. } => Some(*sequence),
        }
    }

    /// The broken rule's code (`"S3"`), for a rule violation.
    pub fn rule(&self) -> Option<&'static str> {
        match self {
            InspectError::RuleViolated { violation, .. } => Some(violation.rule.code()),
            _ => None,
        }
    }

    fn from_verify(err: VerifyError) -> Self {
        match err {
            VerifyError::NotALog { .. } => InspectError::NotALog(err),
            other => InspectError::Damaged(other),
        }
    }
}

/// One rollout as `log verify` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RolloutSummary {
    /// `r0`, `r1`, …
    pub id: String,
    /// `active`, `paused`, `waiting for approval`, `superseded`, `completed`.
    pub status: String,
    /// The release, as the model prints it.
    pub release: String,
}

/// One unsettled op as `log verify` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpenOp {
    /// `op0`, `op1`, …
    pub op: String,
    /// The node it moves.
    pub node: String,
    /// `granted`, `decided`, `restoring`.
    pub phase: String,
    /// Why the outcome is UNKNOWN, if it is.
    pub unknown: Option<String>,
}

/// What a sound log holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogSummary {
    /// Number of entries.
    pub entries: u64,
    /// Sequence of the last entry, `None` if empty.
    pub last_sequence: Option<u64>,
    /// Hex of the chain's head hash, comparable between copies.
    pub head_hash: String,
    /// Every rollout.
    pub rollouts: Vec<RolloutSummary>,
    /// Ops holding a slot (not settled), UNKNOWN ones included.
    pub open_ops: Vec<OpenOp>,
}

/// Verifies the controller log in `dir`: entries, chain, decoding, and the
/// rules over the whole history. Never creates or repairs anything.
pub fn verify_controller_log(dir: impl AsRef<Path>) -> Result<LogSummary, InspectError> {
    let mut events: Vec<(u64, Event)> = Vec::new();
    let report = verify_with(dir, |sequence, payload| {
        let event = decode_payload::<Event>(payload)
            .map_err(|err| format!("undecodable controller event: {err}"))?;
        events.push((sequence, event));
        Ok(())
    })
    .map_err(InspectError::from_verify)?;
    let state =
        invariants::check_history(events.iter().map(|(_, event)| event)).map_err(|err| {
            InspectError::RuleViolated {
                sequence: events
                    .get(err.index)
                    .map_or(err.index as u64, |(sequence, _)| *sequence),
                violation: err.violation,
            }
        })?;
    Ok(summarize(&report, &state))
}

/// Calls `visit` with every event from sequence `from` on, in order, while
/// verifying the log; stops at the first damaged entry with its error.
pub fn visit_events(
    dir: impl AsRef<Path>,
    from: u64,
    mut visit: impl FnMut(u64, &Event),
) -> Result<VerifyReport, InspectError> {
    verify_with(dir, |sequence, payload| {
        let event = decode_payload::<Event>(payload)
            .map_err(|err| format!("undecodable controller event: {err}"))?;
        if sequence >= from {
            visit(sequence, &event);
        }
        Ok(())
    })
    .map_err(InspectError::from_verify)
}

fn summarize(report: &VerifyReport, state: &ControllerState) -> LogSummary {
    let rollouts = state
        .rollouts
        .iter()
        .map(|rollout| {
            let status = match (rollout.status, rollout.paused) {
                (RolloutStatus::Completed, _) => "completed".to_string(),
                (RolloutStatus::Superseded, _) => "superseded".to_string(),
                (RolloutStatus::Active, Some(reason)) => format!("paused ({reason:?})"),
                (RolloutStatus::Active, None) => {
                    if waiting_for_approval(state, rollout) {
                        "waiting for approval".to_string()
                    } else {
                        "active".to_string()
                    }
                }
            };
            RolloutSummary {
                id: rollout.id.to_string(),
                status,
                release: rollout.plan.release.to_string(),
            }
        })
        .collect();
    let open_ops = state
        .ops
        .iter()
        .filter(|op| op.occupies_slot())
        .map(|op| OpenOp {
            op: op.id.to_string(),
            node: op.node.to_string(),
            phase: match op.phase {
                OpPhase::Granted => "granted",
                OpPhase::Decided => "decided",
                OpPhase::Restoring => "restoring",
                // Filtered out above; kept total rather than panicking.
                OpPhase::Settled(_) => "settled",
            }
            .to_string(),
            unknown: op.unknown.map(unknown_words),
        })
        .collect();
    LogSummary {
        entries: report.entries,
        last_sequence: report.last_sequence,
        head_hash: report
            .head_hash
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
        rollouts,
        open_ops,
    }
}

/// A gated rollout whose canary passed and which no operator approved yet:
/// the human wait of S10, worth showing an operator.
fn waiting_for_approval(state: &ControllerState, rollout: &model::controller::Rollout) -> bool {
    state.awaiting_approval(rollout.id)
}

fn unknown_words(reason: UnknownReason) -> String {
    match reason {
        UnknownReason::Silence => "silence: no answer within the deadline",
        UnknownReason::RestoreUnproven => "restore reported but not proven by a serving probe",
        UnknownReason::Contradictory => "a report contradicts the op's phase",
    }
    .to_string()
}
