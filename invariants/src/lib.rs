//! # Fleetweft's rules S1–S11 as plain functions
//!
//! The rules of SPEC §2 are *decided* in `model` and *checked* here, by code
//! that shares nothing with the deciding code but the state and event types.
//! Every check is a pure function returning `Ok(())` or the [`Violation`] it
//! found, in domain words. Three kinds:
//!
//! - **state rules** hold in every reachable controller state:
//!   [`s1_slot_bound`], [`s2_one_live_op_per_node`], [`s4_canary_first`],
//!   [`s11_wrong_answer_stops`]; all of them: [`check_state`].
//! - **transition rules** judge an event against the state just before it
//!   is applied: [`s1_grant_within_slots`], [`s3_evidence_releases_slot`],
//!   [`s4_grant_order`], [`s5_pause_stops_grants`], [`s6_stable_decisions`],
//!   [`s8_late_report_changes_nothing`], [`s9_restore_needs_proof`], on
//!   inputs that may come at any moment [`s4_approval_after_canary`],
//!   [`s5_pause_events_change_state`], [`s8_settled_op_stays_settled`], and
//!   [`w1_names_what_exists`]; all of them: [`check_event`]. On the agent
//!   side: [`s8_no_stale_apply`], [`s14_recovery_follows_the_table`] and [`s14_chunks_verified_before_use`]
//!   (both: [`check_agent_event`]) and, with the controller's record beside
//!   it, [`s8_close_only_settled`].
//! - **rules about the runtime around the core**, which need facts the state
//!   does not hold (what was sent, what is durable, what an operator did):
//!   [`s7_persist_before_reply`], [`s6_answers_agree`],
//!   [`s10_human_waits_survive`].
//!
//! - **Q1** (identity conflicts, issue #12): [`q1_quarantine_silences`]
//!   judges an event (no grant to a quarantined node, no command in its
//!   effects), [`q1_no_command_to_quarantined`] judges effects a runtime
//!   is about to perform; `check_event` runs the first.
//! - **R1** (the roster, issue #11): [`r1_roster_holds`] judges an event:
//!   enrollment takes the next id and a fresh name, nothing is granted to
//!   a retired node, a node with a live op is not retired; `check_event`
//!   runs it.
//!
//! [`check_history`] folds a whole event log and runs all controller checks;
//! it backs `fleetweft log verify` and the runtime's tests.
//!
//! [`Rule`] also names SPEC §10's "proof is a readback" (`P1`), which no
//! function here checks: a proof is not a log event, so the model checker
//! checks it against its ground truth.
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod agent_rules;
mod arch_rules;
mod config_rules;
mod deadline_rules;
mod event_rules;
mod history;
mod input_rules;
mod operator_rules;
mod quarantine_rules;
mod roster_rules;
mod runtime_rules;
mod scoped;
mod state_rules;
pub mod words;

#[cfg(test)]
mod testkit;

pub use agent_rules::{
    check_agent_event, s14_chunks_verified_before_use, s14_migration_runs_once,
    s14_recovery_follows_the_table, s8_no_stale_apply, s8_switch_agrees_with_record,
};
pub use arch_rules::a1_grant_has_a_tree;
pub use config_rules::c1_deploys_recorded_config;
pub use deadline_rules::{t1_batch_deadlines, t1_deadlines_armed};
pub use event_rules::{
    check_event, s1_grant_within_slots, s3_evidence_releases_slot, s4_grant_order,
    s5_pause_stops_grants, s6_stable_decisions, s8_late_report_changes_nothing,
    s9_restore_needs_proof, w1_names_what_exists,
};
pub use history::{check_history, HistoryCheck, HistoryViolation};
pub use input_rules::{
    check_input_event, s4_approval_after_canary, s5_pause_events_change_state,
    s8_close_only_settled, s8_settled_op_stays_settled,
};
pub use operator_rules::OperatorActs;
pub use quarantine_rules::{q1_no_command_to_quarantined, q1_quarantine_silences};
pub use roster_rules::r1_roster_holds;
pub use runtime_rules::{
    d1_restart_rebuilds_the_fold, s10_human_waits_survive, s6_answers_agree,
    s7_persist_before_reply,
};
pub use scoped::{check_state_touched, Touched};
pub use state_rules::{
    check_state, l1_nothing_left_ends, s11_wrong_answer_stops, s1_slot_bound,
    s2_one_live_op_per_node, s4_canary_first,
};

use serde::{Deserialize, Serialize};
use std::fmt;

/// One of the safety rules of SPEC §2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Rule {
    /// Occupied slots never exceed `slots_max`; UNKNOWN ops count.
    S1,
    /// A node never has two unsettled ops.
    S2,
    /// A slot is freed only by an event that carries evidence.
    S3,
    /// No follower before the canary passed (and, if gated, was approved).
    S4,
    /// No grant while paused; ops authorized before the pause still settle.
    S5,
    /// Every answer to a commit request carries the same, stored decision.
    S6,
    /// Nothing that reveals a decision leaves before it is durable.
    S7,
    /// No stale apply; a late report changes nothing.
    S8,
    /// A rollback is recorded only after a serving probe after the restore.
    S9,
    /// Only an operator passes an approval gate or resolves an op.
    S10,
    /// A wrong answer on the canary restores the baseline and stops followers.
    S11,
    /// SPEC §10 agent recovery (seed 002): resume only on a re-verified
    /// artifact, retry only a transient error with budget left, stop on
    /// missing evidence; stopping consumes no attempt budget.
    S14,
    /// SPEC §10 "proof is a readback": a live proof that says `verified`
    /// means the intended release really serves now. SPEC gives it no
    /// number; its code here is `P1`. A proof is not a log event, so no
    /// function here checks it: the model checker checks it against the
    /// ground truth (`simulations`), as it does the ground-truth halves of
    /// S10 and S11.
    ProofIsReadback,
    /// Every op and rollout an event folds into exists, and a new one takes
    /// the next id (`model::controller::referents_exist`, which `apply`
    /// asserts). Not a SPEC §2 rule but the precondition of replaying a
    /// log: a damaged or forged log that breaks it is refused by name
    /// instead of crashing the fold. Its code here is `W1`.
    NamesWhatExists,
    /// A rollout in which nothing more can happen ends: once its canary's op
    /// settled without passing, or every node of its plan has a settled op,
    /// an unpaused rollout is no longer active (completed or ended); a
    /// paused one waits for its operator. Checked between steps by the model
    /// checker ([`l1_nothing_left_ends`]); not on replay, since a log written
    /// before the rule ends such a rollout at its next input. Code `L1`.
    EndsWhenNothingLeft,
    /// Identity conflicts: nothing is sent to, and nothing is granted to, a
    /// quarantined node until an operator releases it. Code `Q1`.
    /// Appended last.
    QuarantineSilences,
    /// The roster: a node is enrolled once, under a fresh name, taking the
    /// next id (its enrollment order); nothing is granted to a retired
    /// node, and a node holding a live op is not retired. Code `R1`.
    /// Appended last.
    RosterHolds,
    /// Failure budgets (issue #11): no follower is granted while its
    /// rollout is over its budget (more failed ops than `max_failed`, or
    /// `max_unknown` ops UNKNOWN at once), and such a rollout is paused.
    /// Code `B1`.
    FailureBudget,
    /// Snapshots (issue #26): the state a restart rebuilds from the log as
    /// it reads it (the newest snapshot that verifies, then the events
    /// after it; genesis and every event when none does) is the fold of
    /// every durable event, whatever was archived or torn. Checked by the
    /// model checker against its ground truth (the fold it keeps), as
    /// `log verify --deep` compares each snapshot with the fold. Code `D1`.
    /// Appended before the last.
    RestartRebuildsTheFold,
    /// Deadlines (issue #22 item 2): every op that waits on its agent (it
    /// holds its slot and silence has not yet made it UNKNOWN) has a
    /// deadline armed, so silence always ends in UNKNOWN (SPEC §2 S3);
    /// a grant or a restore arms its op's deadline, settling cancels it,
    /// and a restart re-arms every waiting op. Checked by the model
    /// checker on every batch and restart and by the controller on every
    /// op a batch touches. Code `T1`. Appended before the last.
    DeadlineForEveryWait,
    /// Architectures (issue #24 item 5): no op is granted to a node the
    /// rollout's release has no tree for (its recorded architecture is not
    /// in the release's set, or not known while the release is
    /// per-architecture). Checked on every event by `check_event`, so in
    /// the checker, on replay and in the running controller. Code `A1`.
    /// Appended last.
    ArchHasATree,
    /// A rollout deploys the configuration the log recorded (issue #24
    /// item 1): a configuration revision is its app's next, and a rollout
    /// names its app's latest recorded revision with the recorded
    /// fingerprint. Checked on every event. Code `C1`. Appended last.
    DeploysRecordedConfig,
    /// Operators (issue #28 item 2): once operators are recorded, every
    /// event only an operator's input makes follows the `Acted` heading its
    /// batch, naming a recorded, unrevoked operator whose role is at least
    /// the one the event needs. Checked per batch by the model checker and
    /// the running controller, and on replay. Code `O1`. Appended last.
    OperatorHasTheRole,
}

impl Rule {
    /// Every rule, in order.
    pub const ALL: [Rule; 23] = [
        Rule::S1,
        Rule::S2,
        Rule::S3,
        Rule::S4,
        Rule::S5,
        Rule::S6,
        Rule::S7,
        Rule::S8,
        Rule::S9,
        Rule::S10,
        Rule::S11,
        Rule::S14,
        Rule::ProofIsReadback,
        Rule::NamesWhatExists,
        Rule::EndsWhenNothingLeft,
        Rule::QuarantineSilences,
        Rule::RosterHolds,
        Rule::FailureBudget,
        Rule::RestartRebuildsTheFold,
        Rule::DeadlineForEveryWait,
        Rule::ArchHasATree,
        Rule::DeploysRecordedConfig,
        Rule::OperatorHasTheRole,
    ];

    /// The rule's code as SPEC §2 writes it: `"S1"` … `"S11"`; `"P1"` for
    /// SPEC §10's unnumbered "proof is a readback".
    pub fn code(self) -> &'static str {
        match self {
            Rule::S1 => "S1",
            Rule::S2 => "S2",
            Rule::S3 => "S3",
            Rule::S4 => "S4",
            Rule::S5 => "S5",
            Rule::S6 => "S6",
            Rule::S7 => "S7",
            Rule::S8 => "S8",
            Rule::S9 => "S9",
            Rule::S10 => "S10",
            Rule::S11 => "S11",
            Rule::S14 => "S14",
            Rule::ProofIsReadback => "P1",
            Rule::NamesWhatExists => "W1",
            Rule::EndsWhenNothingLeft => "L1",
            Rule::QuarantineSilences => "Q1",
            Rule::RosterHolds => "R1",
            Rule::FailureBudget => "B1",
            Rule::RestartRebuildsTheFold => "D1",
            Rule::DeadlineForEveryWait => "T1",
            Rule::ArchHasATree => "A1",
            Rule::DeploysRecordedConfig => "C1",
            Rule::OperatorHasTheRole => "O1",
        }
    }

    /// The rule's short title as SPEC §2 writes it, e.g. `"slot bound"`.
    pub fn title(self) -> &'static str {
        match self {
            Rule::S1 => "slot bound",
            Rule::S2 => "one live op per node",
            Rule::S3 => "evidence releases a slot",
            Rule::S4 => "canary first",
            Rule::S5 => "pause stops grants, not accounting",
            Rule::S6 => "stable decisions",
            Rule::S7 => "persist before reply",
            Rule::S8 => "no stale apply",
            Rule::S9 => "restore needs proof",
            Rule::S10 => "human waits survive",
            Rule::S11 => "wrong answer stops",
            Rule::S14 => "agent recovery",
            Rule::ProofIsReadback => "proof is a readback",
            Rule::NamesWhatExists => "events name what exists",
            Rule::EndsWhenNothingLeft => "a rollout with nothing left ends",
            Rule::QuarantineSilences => "quarantine silences",
            Rule::RosterHolds => "the roster holds",
            Rule::FailureBudget => "failure budgets",
            Rule::RestartRebuildsTheFold => "a restart rebuilds the fold",
            Rule::DeadlineForEveryWait => "a deadline for every wait",
            Rule::ArchHasATree => "a release runs where it has a tree",
            Rule::DeploysRecordedConfig => "a rollout deploys the configuration the log recorded",
            Rule::OperatorHasTheRole => "an operator acts within its role",
        }
    }
}

impl fmt::Display for Rule {
    /// `"S1 slot bound"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code(), self.title())
    }
}

/// A broken rule and what broke it, in domain words (nodes, ops, releases),
/// e.g. "rollout r0 has 2 unsettled ops with slots_max 1".
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Violation {
    /// The rule that does not hold.
    pub rule: Rule,
    /// What was seen, for an operator or a design reviewer.
    pub detail: String,
}

impl Violation {
    /// A violation of `rule` described by `detail`.
    pub fn new(rule: Rule, detail: impl Into<String>) -> Self {
        Violation {
            rule,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Violation {
    /// `"S1 slot bound: rollout r0 has 2 unsettled ops with slots_max 1"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.rule, self.detail)
    }
}

impl std::error::Error for Violation {}

/// Shorthand for the `Err` every rule returns.
pub(crate) fn broken(rule: Rule, detail: impl Into<String>) -> Result<(), Violation> {
    Err(Violation::new(rule, detail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_print_like_the_spec() {
        assert_eq!(Rule::S1.to_string(), "S1 slot bound");
        assert_eq!(Rule::S10.code(), "S10");
        assert_eq!(
            Rule::S5.to_string(),
            "S5 pause stops grants, not accounting"
        );
        let codes: Vec<&str> = Rule::ALL.iter().map(|r| r.code()).collect();
        assert_eq!(codes.len(), 23);
        assert_eq!(
            Rule::RestartRebuildsTheFold.to_string(),
            "D1 a restart rebuilds the fold"
        );
        assert_eq!(Rule::FailureBudget.to_string(), "B1 failure budgets");
        assert_eq!(codes[10], "S11");
        assert_eq!(Rule::ProofIsReadback.to_string(), "P1 proof is a readback");
        assert_eq!(
            Rule::NamesWhatExists.to_string(),
            "W1 events name what exists"
        );
        let v = Violation::new(Rule::S1, "rollout r0 has 2 unsettled ops with slots_max 1");
        assert_eq!(
            v.to_string(),
            "S1 slot bound: rollout r0 has 2 unsettled ops with slots_max 1"
        );
    }
}
