//! The words of violation details. The `Debug` names of model types read
//! like code; violations are read by operators and design reviewers, in the
//! same words as the API, the CLI and the event text: every word comes from
//! [`model::words`] (issue #22 item 4), and this module only picks the form
//! a violation message takes (a settled phase says its outcome, a pause its
//! reason). Public so the API's test can hold the surfaces together.

use model::controller::words as controller_words;
use model::controller::{OpPhase, Outcome, PauseReason, RolloutStatus};
use model::words;
use model::{Decision, Digest};
use std::borrow::Cow;

/// How an op settled: `rolled-back`, `resolved (abandon)`, ...
pub fn outcome(o: Outcome) -> Cow<'static, str> {
    controller_words::outcome(o)
}

/// An op's phase, with its outcome when settled: `settled (verified)`.
pub fn phase(p: OpPhase) -> String {
    controller_words::op_phase_with_outcome(p)
}

/// A commit decision: `commit`, `abort`.
pub fn decision(d: Decision) -> &'static str {
    words::decision(d)
}

/// A stored decision, if any: `commit`, `abort`, `none`.
pub fn stored_decision(d: Option<Decision>) -> &'static str {
    words::stored_decision(d)
}

/// A rollout's recorded status: `active`, `superseded`, ...
pub fn status(s: RolloutStatus) -> &'static str {
    controller_words::rollout_status(s)
}

/// A pause with its reason: `paused (operator)`, ...
pub fn pause(p: PauseReason) -> String {
    controller_words::paused(p)
}

/// A release, if any: its digest, or `nothing`.
pub fn release(r: Option<Digest>) -> String {
    words::release(r)
}
