//! Domain words for violation details. The `Debug` names of model types read
//! like code; violations are read by operators and design reviewers.

use model::controller::{OpPhase, Outcome, PauseReason, Resolution, RolloutStatus};
use model::{Decision, Digest};

pub(crate) fn outcome(o: Outcome) -> &'static str {
    match o {
        Outcome::Verified => "verified",
        Outcome::RolledBack => "rolled back",
        Outcome::NotApplied => "not applied",
        Outcome::Resolved(Resolution::ConfirmNew) => "resolved by an operator (new release)",
        Outcome::Resolved(Resolution::ConfirmBaseline) => "resolved by an operator (baseline)",
        Outcome::Resolved(Resolution::Abandon) => "abandoned by an operator",
    }
}

pub(crate) fn phase(p: OpPhase) -> String {
    match p {
        OpPhase::Granted => "granted".to_string(),
        OpPhase::Decided => "decided".to_string(),
        OpPhase::Restoring => "restoring".to_string(),
        OpPhase::Settled(o) => format!("settled {}", outcome(o)),
    }
}

pub(crate) fn decision(d: Decision) -> &'static str {
    match d {
        Decision::Commit => "commit",
        Decision::Abort => "abort",
    }
}

pub(crate) fn stored_decision(d: Option<Decision>) -> &'static str {
    d.map_or("none", decision)
}

pub(crate) fn status(s: RolloutStatus) -> &'static str {
    match s {
        RolloutStatus::Active => "active",
        RolloutStatus::Superseded => "superseded",
        RolloutStatus::Completed => "completed",
        RolloutStatus::Ended => "ended",
    }
}

pub(crate) fn pause(p: PauseReason) -> String {
    match p {
        PauseReason::Operator => "paused by an operator".to_string(),
        PauseReason::ProbeFailed { op } => format!("paused because the probe of {op} failed"),
        PauseReason::FailureBudget { op } => {
            format!("paused because {op} failed over the failure budget")
        }
        PauseReason::UnknownBudget => "paused because too many ops are UNKNOWN".to_string(),
    }
}

pub(crate) fn release(r: Option<Digest>) -> String {
    r.map_or_else(|| "nothing".to_string(), |d| d.to_string())
}
