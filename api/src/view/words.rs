//! The one wording of every model enum an operator reads: the API's DTOs,
//! the CLI, the dashboard, `/metrics`, the proofs and `fleetweft log show`
//! all take their words from here, so "silence" is never also "Silence".
//!
//! Every function matches its enum without a wildcard: a new variant does
//! not compile until it has its words here. Words are kebab-case (what the
//! API filters on and the JSON carries); a sentence, where a surface needs
//! one, is next to its word. Who made an observation is worded by
//! `proof::Origin` (the proof crate's own enum), which the DTOs use.

use model::controller::{
    Event, OpPhase, Outcome, PauseReason, Resolution, RolloutStatus, UnknownReason,
};
use model::{Decision, ProbeVerdict};
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
        (OpPhase::Decided, Some(d)) => format!("decided ({})", self::decision(d)),
        // A decided op always has its decision; say commit as the core does.
        (OpPhase::Decided, None) => "decided (commit)".to_string(),
        (p, _) => op_phase(p).to_string(),
    }
}

/// How an op settled: `verified`, `rolled-back`, `not-applied`, or
/// `resolved (confirm-new)` and so on for an operator's resolution.
pub fn outcome(outcome: Outcome) -> Cow<'static, str> {
    match outcome {
        Outcome::Verified => Cow::Borrowed("verified"),
        Outcome::RolledBack => Cow::Borrowed("rolled-back"),
        Outcome::NotApplied => Cow::Borrowed("not-applied"),
        Outcome::Resolved(r) => Cow::Owned(format!("resolved ({})", resolution(r))),
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
pub fn decision(decision: Decision) -> &'static str {
    match decision {
        Decision::Commit => "commit",
        Decision::Abort => "abort",
    }
}

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
pub fn unknown_reason_sentence(reason: UnknownReason) -> &'static str {
    match reason {
        UnknownReason::Silence => "silence: no answer within the deadline",
        UnknownReason::RestoreUnproven => {
            "restore-unproven: restore reported but not proven by a serving probe"
        }
        UnknownReason::Contradictory => "contradictory: a report contradicts the op's phase",
    }
}

/// A rollout's recorded status: `active`, `superseded`, `completed`,
/// `ended`. Operators read [`super::rollout_status_word`], which also says
/// `paused` and `waiting-approval`.
pub fn rollout_status(status: RolloutStatus) -> &'static str {
    match status {
        RolloutStatus::Active => "active",
        RolloutStatus::Superseded => "superseded",
        RolloutStatus::Completed => "completed",
        RolloutStatus::Ended => "ended",
    }
}

/// Why a rollout is paused: `operator`, `probe of op3 failed`, ...
pub fn pause_reason(reason: PauseReason) -> String {
    match reason {
        PauseReason::Operator => "operator".to_string(),
        PauseReason::ProbeFailed { op } => format!("probe of {op} failed"),
        PauseReason::FailureBudget { op } => format!("{op} failed over the failure budget"),
        PauseReason::UnknownBudget => "unknown budget reached".to_string(),
    }
}

/// A probe verdict: `pass`, `wrong-answer`, `unreachable` (the words an
/// operator's observation takes).
pub fn verdict(verdict: ProbeVerdict) -> &'static str {
    match verdict {
        ProbeVerdict::Pass => "pass",
        ProbeVerdict::WrongAnswer => "wrong-answer",
        ProbeVerdict::Unreachable => "unreachable",
    }
}

/// Every verdict, in the order the words are listed.
pub const VERDICTS: [ProbeVerdict; 3] = [
    ProbeVerdict::Pass,
    ProbeVerdict::WrongAnswer,
    ProbeVerdict::Unreachable,
];

/// The verdict named by `word`, if any.
pub fn parse_verdict(word: &str) -> Option<ProbeVerdict> {
    VERDICTS.into_iter().find(|v| verdict(*v) == word)
}

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
    }
}

/// Every event kind word, in the model's variant order (what a webhook's
/// `events` list may name).
pub const EVENT_KINDS: [&str; 34] = [
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
];

#[cfg(test)]
mod tests {
    use super::super::{NodeState, OpState};
    use super::*;
    use model::OpId;
    use std::collections::BTreeSet;

    /// Every variant of every enum, rendered through this module: each
    /// word is non-empty, distinct within its enum, and the words the API
    /// parses parse back to their variant. The lists are built by
    /// exhaustive matches, so a new variant fails to compile here too.
    #[test]
    fn every_variant_has_one_distinct_word() {
        fn distinct(words: Vec<String>) {
            let set: BTreeSet<&String> = words.iter().collect();
            assert_eq!(set.len(), words.len(), "{words:?}");
            assert!(words.iter().all(|w| !w.is_empty()), "{words:?}");
        }
        let op = OpId(3);
        let outcomes: Vec<Outcome> = [Outcome::Verified, Outcome::RolledBack, Outcome::NotApplied]
            .into_iter()
            .chain(RESOLUTIONS.map(Outcome::Resolved))
            .collect();
        for o in &outcomes {
            // Exhaustive: a new outcome must be listed above.
            match o {
                Outcome::Verified | Outcome::RolledBack | Outcome::NotApplied => {}
                Outcome::Resolved(_) => {}
            }
        }
        distinct(outcomes.iter().map(|o| outcome(*o).into_owned()).collect());
        let phases: Vec<OpPhase> = [OpPhase::Granted, OpPhase::Decided, OpPhase::Restoring]
            .into_iter()
            .chain([OpPhase::Settled(Outcome::Verified)])
            .collect();
        distinct(phases.iter().map(|p| op_phase(*p).to_string()).collect());
        for d in [Decision::Commit, Decision::Abort] {
            assert_eq!(
                op_phase_with_decision(OpPhase::Decided, Some(d)),
                format!("decided ({})", decision(d))
            );
        }
        distinct(RESOLUTIONS.iter().map(|r| resolution(*r).into()).collect());
        for r in RESOLUTIONS {
            assert_eq!(parse_resolution(resolution(r)), Some(r));
        }
        distinct(VERDICTS.iter().map(|v| verdict(*v).into()).collect());
        for v in VERDICTS {
            assert_eq!(parse_verdict(verdict(v)), Some(v));
        }
        let reasons = [
            UnknownReason::Silence,
            UnknownReason::RestoreUnproven,
            UnknownReason::Contradictory,
        ];
        distinct(reasons.iter().map(|r| unknown_reason(*r).into()).collect());
        for r in reasons {
            assert!(unknown_reason_sentence(r).starts_with(unknown_reason(r)));
        }
        let statuses = [
            RolloutStatus::Active,
            RolloutStatus::Superseded,
            RolloutStatus::Completed,
            RolloutStatus::Ended,
        ];
        distinct(statuses.iter().map(|s| rollout_status(*s).into()).collect());
        let pauses = [
            PauseReason::Operator,
            PauseReason::ProbeFailed { op },
            PauseReason::FailureBudget { op },
            PauseReason::UnknownBudget,
        ];
        distinct(pauses.iter().map(|p| pause_reason(*p)).collect());
        distinct(
            [Decision::Commit, Decision::Abort]
                .iter()
                .map(|d| decision(*d).into())
                .collect(),
        );
        distinct(NodeState::ALL.iter().map(|s| s.as_str().into()).collect());
        for s in NodeState::ALL {
            assert_eq!(NodeState::parse(s.as_str()), Some(s));
        }
        distinct(OpState::ALL.iter().map(|s| s.as_str().into()).collect());
        // The op state of a settled op is its outcome's word (a resolved
        // one reads `resolved`, its resolution is in `outcome`).
        for o in [Outcome::Verified, Outcome::RolledBack, Outcome::NotApplied] {
            assert_eq!(OpState::of_outcome(o).as_str(), outcome(o));
        }
    }
}
