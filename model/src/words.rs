//! The one wording of every model enum an operator reads (issue #22 item
//! 4): the API's DTOs and filters, the CLI, the dashboard, `/metrics`,
//! `fleetweft log show`, the event text (`Event`'s `Display`), the
//! invariants' violation messages and the proofs all take their words from
//! here and from [`crate::controller::words`] (the words of the
//! controller's own enums, kept beside them so that this module depends on
//! nothing of the controller's: the controller's event text uses these), so
//! "rolled-back" is never also "rolled back" or "RolledBack".
//!
//! Every function matches its enum without a wildcard: a new variant does
//! not compile until it has its words here. Words are kebab-case (what the
//! API filters on and the JSON carries, pinned by the OpenAPI document); a
//! sentence, where a surface needs one, is built from the words next to
//! them (`paused (operator)`, `settled (rolled-back)`). Pure: no IO, no
//! dependencies beyond the model's types.

use crate::{Decision, Digest, ProbeVerdict, ReportKind};

pub fn decision(decision: Decision) -> &'static str {
    match decision {
        Decision::Commit => "commit",
        Decision::Abort => "abort",
    }
}

pub const NO_DECISION: &str = "none";

pub fn stored_decision(decision: Option<Decision>) -> &'static str {
    decision.map_or(NO_DECISION, self::decision)
}

pub fn verdict(verdict: ProbeVerdict) -> &'static str {
    match verdict {
        ProbeVerdict::Pass => "pass",
        ProbeVerdict::WrongAnswer => "wrong-answer",
        ProbeVerdict::Unreachable => "unreachable",
    }
}

pub const VERDICTS: [ProbeVerdict; 3] = [
    ProbeVerdict::Pass,
    ProbeVerdict::WrongAnswer,
    ProbeVerdict::Unreachable,
];

pub fn parse_verdict(word: &str) -> Option<ProbeVerdict> {
    VERDICTS.into_iter().find(|v| verdict(*v) == word)
}

pub fn report_kind(kind: ReportKind) -> &'static str {
    match kind {
        ReportKind::Switched => "switched",
        ReportKind::Restored => "restored",
        // The same word as `Outcome::NotApplied`'s (a test in
        // `controller::words` holds them together).
        ReportKind::NotApplied => "not-applied",
        ReportKind::Refused(_) => "refused",
    }
}

pub const NO_RELEASE: &str = "nothing";

pub fn release(release: Option<Digest>) -> String {
    release.map_or_else(|| NO_RELEASE.to_string(), |d| d.to_string())
}
