//! The words of the controller's enums (op phases, outcomes, resolutions,
//! UNKNOWN reasons, rollout statuses, pause reasons, observation sources,
//! event kinds): the second half of the one wording, [`crate::words`]
//! (issue #22 item 4). Here, not there, so that the words of the model's
//! shared types depend on nothing of the controller's.

use super::operators::Role;
use super::{
    Event, ObservationSource, OpPhase, Outcome, PauseReason, Resolution, RolloutStatus,
    UnknownReason,
};
use crate::words::decision;
use crate::Decision;
use std::borrow::Cow;
/// The phase word of a settled op (an archived op has no `OpPhase`).
pub const SETTLED: &str = "settled";

/// An op's phase: `granted`, `decided`, `restoring`, `settled`.
pub fn op_phase(phase: OpPhase) -> &'static str {
    match phase {
        OpPhase::Granted => "granted",
        OpPhase::Decided => "decided",
        OpPhase::Restoring => "restoring",
        OpPhase::Settled(_) => SETTLED,
    }
}

/// An op's phase with its stored decision when decided, as the handover
/// report says it: `decided (commit)`, `decided (abort)`.
pub fn op_phase_with_decision(phase: OpPhase, decision: Option<Decision>) -> String {
    match (phase, decision) {
        (OpPhase::Decided, Some(d)) => format!("{} ({})", op_phase(phase), self::decision(d)),
        // A decided op always has its decision; say commit as the core does.
        (OpPhase::Decided, None) => op_phase_with_decision(phase, Some(Decision::Commit)),
        (p, _) => op_phase(p).to_string(),
    }
}

/// An op's phase with its outcome when settled, as the invariants'
/// messages say it: `granted`, `settled (rolled-back)`.
pub fn op_phase_with_outcome(phase: OpPhase) -> String {
    match phase {
        OpPhase::Settled(o) => format!("{SETTLED} ({})", outcome(o)),
        p => op_phase(p).to_string(),
    }
}

/// The word of a resolved outcome without its resolution (the API's op
/// state `resolved`).
pub const RESOLVED: &str = "resolved";

/// How an op settled, without the resolution: `verified`, `rolled-back`,
/// `not-applied`, `resolved`.
pub fn outcome_kind(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Verified => "verified",
        Outcome::RolledBack => "rolled-back",
        Outcome::NotApplied => "not-applied",
        Outcome::Resolved(_) => RESOLVED,
    }
}

/// How an op settled: `verified`, `rolled-back`, `not-applied`, or
/// `resolved (confirm-new)` and so on for an operator's resolution.
pub fn outcome(outcome: Outcome) -> Cow<'static, str> {
    match outcome {
        Outcome::Resolved(r) => Cow::Owned(format!("{RESOLVED} ({})", resolution(r))),
        o => Cow::Borrowed(outcome_kind(o)),
    }
}

/// An operator's resolution: `confirm-new`, `confirm-baseline`, `abandon`
/// (the words `POST /api/ops/{op}/resolve` takes).
pub fn resolution(resolution: Resolution) -> &'static str {
    match resolution {
        Resolution::ConfirmNew => "confirm-new",
        Resolution::ConfirmBaseline => "confirm-baseline",
        Resolution::Abandon => "abandon",
    }
}

/// Every resolution, in the order the words are listed.
pub const RESOLUTIONS: [Resolution; 3] = [
    Resolution::ConfirmNew,
    Resolution::ConfirmBaseline,
    Resolution::Abandon,
];

/// The resolution named by `word`, if any.
pub fn parse_resolution(word: &str) -> Option<Resolution> {
    RESOLUTIONS.into_iter().find(|r| resolution(*r) == word)
}

/// A stored commit decision: `commit`, `abort`.
/// What a missing stored decision reads as.
/// A stored decision, if any: `commit`, `abort`, `none`.
/// Why an op is UNKNOWN: `silence`, `restore-unproven`, `contradictory`.
pub fn unknown_reason(reason: UnknownReason) -> &'static str {
    match reason {
        UnknownReason::Silence => "silence",
        UnknownReason::RestoreUnproven => "restore-unproven",
        UnknownReason::Contradictory => "contradictory",
    }
}

/// Why an op is UNKNOWN, as a sentence that starts with its word (`log
/// show`, the CLI).
pub fn unknown_reason_sentence(reason: UnknownReason) -> String {
    let why = match reason {
        UnknownReason::Silence => "no answer within the deadline",
        UnknownReason::RestoreUnproven => "restore reported but not proven by a serving probe",
        UnknownReason::Contradictory => "a report contradicts the op's phase",
    };
    format!("{}: {why}", unknown_reason(reason))
}

/// A rollout's recorded status: `active`, `superseded`, `completed`,
/// `ended`. Operators also read [`PAUSED`] and [`WAITING_APPROVAL`] for an
/// active rollout that waits for them.
pub fn rollout_status(status: RolloutStatus) -> &'static str {
    match status {
        RolloutStatus::Active => "active",
        RolloutStatus::Superseded => "superseded",
        RolloutStatus::Completed => "completed",
        RolloutStatus::Ended => "ended",
    }
}

/// The status word of an active rollout that is paused.
pub const PAUSED: &str = "paused";

/// The status word of an active rollout that waits at its approval gate.
pub const WAITING_APPROVAL: &str = "waiting-approval";

/// Why a rollout is paused: `operator`, `probe of op3 failed`, ...
pub fn pause_reason(reason: PauseReason) -> String {
    match reason {
        PauseReason::Operator => "operator".to_string(),
        PauseReason::ProbeFailed { op } => format!("probe of {op} failed"),
        PauseReason::FailureBudget { op } => format!("{op} failed over the failure budget"),
        PauseReason::UnknownBudget => "unknown budget reached".to_string(),
    }
}

/// A paused rollout's status with its reason, as every surface says it:
/// `paused (operator)`, `paused (probe of op3 failed)`, ...
pub fn paused(reason: PauseReason) -> String {
    format!("{PAUSED} ({})", pause_reason(reason))
}

/// A probe verdict: `pass`, `wrong-answer`, `unreachable` (the words an
/// operator's observation takes).
/// Every verdict, in the order the words are listed.
/// The verdict named by `word`, if any.
/// What an agent's report is about: `switched`, `restored`, `not-applied`,
/// `refused` (its `Display` adds the refusal's reason).
/// Who observed a node outside of any op: `readback`, `controller-probe`,
/// `operator`.
pub fn observation_source(source: ObservationSource) -> &'static str {
    match source {
        ObservationSource::ReadBack => "readback",
        ObservationSource::ControllerProbe => "controller-probe",
        ObservationSource::Operator => "operator",
    }
}

/// What a release slot holds when it holds none.
/// A release, if any: its digest, or `nothing`.
/// An event's kind: the kebab-case of its variant (`rollout-completed`,
/// `op-granted`, ...). The SSE stream's `event:` field and the words a
/// webhook's `events` filter takes.
pub fn event_kind(event: &Event) -> &'static str {
    match event {
        Event::RolloutStarted { .. } => "rollout-started",
        Event::RolloutSuperseded { .. } => "rollout-superseded",
        Event::RolloutPaused { .. } => "rollout-paused",
        Event::RolloutResumed { .. } => "rollout-resumed",
        Event::RolloutApproved { .. } => "rollout-approved",
        Event::RolloutCompleted { .. } => "rollout-completed",
        Event::OpGranted { .. } => "op-granted",
        Event::CommitDecided { .. } => "commit-decided",
        Event::CommitReplayed { .. } => "commit-replayed",
        Event::ReportRecorded { .. } => "report-recorded",
        Event::ProbeRecorded { .. } => "probe-recorded",
        Event::RestoreRequested { .. } => "restore-requested",
        Event::OpUnknown { .. } => "op-unknown",
        Event::OpSettled { .. } => "op-settled",
        Event::OperatorObserved { .. } => "operator-observed",
        Event::OpClaimed { .. } => "op-claimed",
        Event::NodeHello { .. } => "node-hello",
        Event::LateReportIgnored { .. } => "late-report-ignored",
        Event::StaleCommandRejected { .. } => "stale-command-rejected",
        Event::ForeignMessageIgnored { .. } => "foreign-message-ignored",
        Event::RollBackOrdered { .. } => "roll-back-ordered",
        Event::NodeObserved { .. } => "node-observed",
        Event::RolloutEnded { .. } => "rollout-ended",
        Event::NodeQuarantined { .. } => "node-quarantined",
        Event::NodeReleased { .. } => "node-released",
        Event::CertRevoked { .. } => "cert-revoked",
        Event::NodeEnrolled { .. } => "node-enrolled",
        Event::NodeLabeled { .. } => "node-labeled",
        Event::NodeRetired { .. } => "node-retired",
        Event::RolloutPolicySet { .. } => "rollout-policy-set",
        Event::RolloutFollowersAdded { .. } => "rollout-followers-added",
        Event::ForgottenOpIgnored { .. } => "forgotten-op-ignored",
        Event::NodePlatform { .. } => "node-platform",
        Event::RolloutArchesSet { .. } => "rollout-arches-set",
        Event::ConfigSet { .. } => "config-set",
        Event::RolloutConfigured { .. } => "rollout-configured",
        Event::Acted { .. } => "acted",
        Event::OperatorAdded { .. } => "operator-added",
        Event::CredentialRotated { .. } => "credential-rotated",
        Event::OperatorRevoked { .. } => "operator-revoked",
    }
}

/// Every event kind word, in the model's variant order (what a webhook's
/// `events` list may name).
pub const EVENT_KINDS: [&str; 40] = [
    "rollout-started",
    "rollout-superseded",
    "rollout-paused",
    "rollout-resumed",
    "rollout-approved",
    "rollout-completed",
    "op-granted",
    "commit-decided",
    "commit-replayed",
    "report-recorded",
    "probe-recorded",
    "restore-requested",
    "op-unknown",
    "op-settled",
    "operator-observed",
    "op-claimed",
    "node-hello",
    "late-report-ignored",
    "stale-command-rejected",
    "foreign-message-ignored",
    "roll-back-ordered",
    "node-observed",
    "rollout-ended",
    "node-quarantined",
    "node-released",
    "cert-revoked",
    "node-enrolled",
    "node-labeled",
    "node-retired",
    "rollout-policy-set",
    "rollout-followers-added",
    "forgotten-op-ignored",
    "node-platform",
    "rollout-arches-set",
    "config-set",
    "rollout-configured",
    "acted",
    "operator-added",
    "credential-rotated",
    "operator-revoked",
];

/// An operator's role: `viewer`, `deployer`, `approver`, `admin`.
pub fn role(role: Role) -> &'static str {
    match role {
        Role::Viewer => "viewer",
        Role::Deployer => "deployer",
        Role::Approver => "approver",
        Role::Admin => "admin",
    }
}

/// The role a word names, if any (the API's and the CLI's `--role`).
pub fn parse_role(word: &str) -> Option<Role> {
    Role::ALL.into_iter().find(|r| self::role(*r) == word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_of_not_applied_and_the_outcome_share_their_word() {
        assert_eq!(
            crate::words::report_kind(crate::ReportKind::NotApplied),
            outcome_kind(Outcome::NotApplied)
        );
    }
}
