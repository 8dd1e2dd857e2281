//! Mutants: named one-line deviations of the real rules. Each wraps the real
//! `model` code (it never copies it) and must be caught by the checker with
//! the rule it names. A checker that cannot fail proves nothing.

use crate::durable_log::{DurableLog, Snapshot};
use crate::leads_to::Liveness;
use invariants::Rule;
use invariants::Violation;
use model::agent::{
    agent_step, AgentEffect, AgentEvent, AgentInput, AgentOutput, AgentStage, AgentState,
    StagingStep,
};
use model::chunks::ChunkSet;
use model::controller::{
    apply, effects, progress, step, ControllerState, Effect, Event, Input, OpPhase, Outcome,
    Refusal, RolloutStatus, Timers,
};
use model::recovery::{ChunkReading, Observed, StageFailure};
use model::{Generation, NodeId, OpId, ProbeVerdict, ToAgent, ToController};
use proof::{Fresh, NodeProof};
use std::sync::Arc;

/// A named deviation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mutant {
    ReleaseOnTimeout,
    GrantWhilePaused,
    RedecideOnRetry,
    ReplyBeforePersist,
    SkipGenerationCheck,
    RestoreWithoutProbe,
    RecoveryAutoApproves,
    CanaryTrustsProcess,
    FollowerBeforeCanary,
    TrustRestoreClaim,
    ConfirmBaselineDespiteCommit,
    AgentForgetsClosedOps,
    UnknownFreesSlot,
    GrantOverLiveOp,
    RollbackProvenBeforeCommitLands,
    ProofTrustsRecordedEvidence,
    RolloutNeverEnds,
    ResumeWithoutReverify,
    RetryPermanentError,
    TimeoutUnknowsSettledOp,
    AgentClosesOnAnyAck,
    ProbeFailurePausesAgain,
    ApproveWithoutGate,
    WaveBeforeSettled,
    BudgetIgnored,
    RetireHoldingOp,
    UnfencedAppend,
    LoadUnverifiedSnapshot,
    ArchivePastSnapshot,
    ResumeTrustsUnverifiedChunk,
    ResumeGrantsNothing,
    StagingRetryNeverReissued,
    PauseFreezesAccounting,
    SettleKeepsDeadline,
    RearmSkipsDecided,
    IgnoreIdentityConflict,
    StartIgnoresArch,
    RetryInterruptedMigration,
    StartIgnoresConfig,
    ConfigReadFromDocument,
    ViewerMayApprove,
}

/// What a mutant must be caught breaking: a safety rule, or (issue #27
/// item 2) a liveness property under weak fairness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Breaks {
    Rule(Rule),
    Liveness(Liveness),
}

impl Breaks {
    /// The code a report names it by (`S5`, `LV1`).
    pub fn code(self) -> &'static str {
        match self {
            Breaks::Rule(rule) => rule.code(),
            Breaks::Liveness(property) => property.code(),
        }
    }
}

impl std::fmt::Display for Breaks {
    /// `"S5 pause stops grants, not accounting"`, `"LV1 every rollout comes to rest"`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Breaks::Rule(rule) => write!(f, "{rule}"),
            Breaks::Liveness(property) => write!(f, "{}", property.name()),
        }
    }
}

impl Mutant {
    /// Every mutant, in `--list-mutants` order.
    pub const ALL: [Mutant; 41] = [
        Mutant::ReleaseOnTimeout,
        Mutant::GrantWhilePaused,
        Mutant::RedecideOnRetry,
        Mutant::ReplyBeforePersist,
        Mutant::SkipGenerationCheck,
        Mutant::RestoreWithoutProbe,
        Mutant::RecoveryAutoApproves,
        Mutant::CanaryTrustsProcess,
        Mutant::FollowerBeforeCanary,
        Mutant::TrustRestoreClaim,
        Mutant::ConfirmBaselineDespiteCommit,
        Mutant::AgentForgetsClosedOps,
        Mutant::UnknownFreesSlot,
        Mutant::GrantOverLiveOp,
        Mutant::RollbackProvenBeforeCommitLands,
        Mutant::ProofTrustsRecordedEvidence,
        Mutant::RolloutNeverEnds,
        Mutant::ResumeWithoutReverify,
        Mutant::RetryPermanentError,
        Mutant::TimeoutUnknowsSettledOp,
        Mutant::AgentClosesOnAnyAck,
        Mutant::ProbeFailurePausesAgain,
        Mutant::ApproveWithoutGate,
        Mutant::WaveBeforeSettled,
        Mutant::BudgetIgnored,
        Mutant::RetireHoldingOp,
        Mutant::UnfencedAppend,
        Mutant::LoadUnverifiedSnapshot,
        Mutant::ArchivePastSnapshot,
        Mutant::ResumeTrustsUnverifiedChunk,
        Mutant::ResumeGrantsNothing,
        Mutant::StagingRetryNeverReissued,
        Mutant::PauseFreezesAccounting,
        Mutant::SettleKeepsDeadline,
        Mutant::RearmSkipsDecided,
        Mutant::IgnoreIdentityConflict,
        Mutant::StartIgnoresArch,
        Mutant::RetryInterruptedMigration,
        Mutant::StartIgnoresConfig,
        Mutant::ConfigReadFromDocument,
        Mutant::ViewerMayApprove,
    ];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Mutant::ReleaseOnTimeout => "release-on-timeout",
            Mutant::GrantWhilePaused => "grant-while-paused",
            Mutant::RedecideOnRetry => "redecide-on-retry",
            Mutant::ReplyBeforePersist => "reply-before-persist",
            Mutant::SkipGenerationCheck => "skip-generation-check",
            Mutant::RestoreWithoutProbe => "restore-without-probe",
            Mutant::RecoveryAutoApproves => "recovery-auto-approves",
            Mutant::CanaryTrustsProcess => "canary-trusts-process",
            Mutant::FollowerBeforeCanary => "follower-before-canary",
            Mutant::TrustRestoreClaim => "trust-restore-claim",
            Mutant::ConfirmBaselineDespiteCommit => "confirm-baseline-despite-commit",
            Mutant::AgentForgetsClosedOps => "agent-forgets-closed-ops",
            Mutant::UnknownFreesSlot => "unknown-frees-slot",
            Mutant::GrantOverLiveOp => "grant-over-live-op",
            Mutant::RollbackProvenBeforeCommitLands => "rollback-proven-before-commit-lands",
            Mutant::ProofTrustsRecordedEvidence => "proof-trusts-recorded-evidence",
            Mutant::RolloutNeverEnds => "rollout-never-ends",
            Mutant::ResumeWithoutReverify => "resume-without-reverify",
            Mutant::RetryPermanentError => "retry-permanent-error",
            Mutant::TimeoutUnknowsSettledOp => "timeout-unknows-settled-op",
            Mutant::AgentClosesOnAnyAck => "agent-closes-on-any-ack",
            Mutant::ProbeFailurePausesAgain => "probe-failure-pauses-again",
            Mutant::ApproveWithoutGate => "approve-without-gate",
            Mutant::WaveBeforeSettled => "wave-before-settled",
            Mutant::BudgetIgnored => "budget-ignored",
            Mutant::RetireHoldingOp => "retire-holding-op",
            Mutant::UnfencedAppend => "unfenced-append",
            Mutant::LoadUnverifiedSnapshot => "load-unverified-snapshot",
            Mutant::ArchivePastSnapshot => "archive-past-snapshot",
            Mutant::ResumeTrustsUnverifiedChunk => "resume-trusts-unverified-chunk",
            Mutant::ResumeGrantsNothing => "resume-grants-nothing",
            Mutant::StagingRetryNeverReissued => "staging-retry-never-reissued",
            Mutant::PauseFreezesAccounting => "pause-freezes-accounting",
            Mutant::SettleKeepsDeadline => "settle-keeps-deadline",
            Mutant::RearmSkipsDecided => "rearm-skips-decided",
            Mutant::IgnoreIdentityConflict => "ignore-identity-conflict",
            Mutant::StartIgnoresArch => "start-ignores-arch",
            Mutant::RetryInterruptedMigration => "retry-interrupted-migration",
            Mutant::StartIgnoresConfig => "start-ignores-config",
            Mutant::ConfigReadFromDocument => "config-read-from-document",
            Mutant::ViewerMayApprove => "viewer-may-approve",
        }
    }

    /// Parse a CLI name.
    pub fn parse(name: &str) -> Option<Mutant> {
        Mutant::ALL.into_iter().find(|m| m.name() == name)
    }

    /// What the checker must report broken.
    pub fn breaks(self) -> Breaks {
        match self {
            Mutant::ResumeGrantsNothing => Breaks::Liveness(Liveness::RolloutComesToRest),
            Mutant::StagingRetryNeverReissued => Breaks::Liveness(Liveness::UnknownOpSettles),
            Mutant::PauseFreezesAccounting => Breaks::Liveness(Liveness::NoSlotHeldForever),
            safety => Breaks::Rule(safety.breaks_rule()),
        }
    }

    /// The safety rule a safety mutant breaks.
    fn breaks_rule(self) -> Rule {
        match self {
            Mutant::ReleaseOnTimeout => Rule::S3,
            Mutant::GrantWhilePaused => Rule::S5,
            Mutant::RedecideOnRetry => Rule::S6,
            Mutant::ReplyBeforePersist => Rule::S7,
            Mutant::SkipGenerationCheck => Rule::S8,
            Mutant::RestoreWithoutProbe => Rule::S9,
            Mutant::RecoveryAutoApproves => Rule::S10,
            Mutant::CanaryTrustsProcess => Rule::S11,
            Mutant::FollowerBeforeCanary => Rule::S4,
            Mutant::TrustRestoreClaim => Rule::S9,
            Mutant::ConfirmBaselineDespiteCommit => Rule::S8,
            Mutant::AgentForgetsClosedOps => Rule::S8,
            Mutant::UnknownFreesSlot => Rule::S1,
            Mutant::GrantOverLiveOp => Rule::S2,
            Mutant::RollbackProvenBeforeCommitLands => Rule::S8,
            Mutant::ProofTrustsRecordedEvidence => Rule::ProofIsReadback,
            Mutant::RolloutNeverEnds => Rule::EndsWhenNothingLeft,
            Mutant::ResumeWithoutReverify
            | Mutant::RetryPermanentError
            | Mutant::ResumeTrustsUnverifiedChunk
            | Mutant::RetryInterruptedMigration => Rule::S14,
            Mutant::TimeoutUnknowsSettledOp => Rule::S8,
            Mutant::AgentClosesOnAnyAck => Rule::S8,
            Mutant::ProbeFailurePausesAgain => Rule::S5,
            Mutant::ApproveWithoutGate => Rule::S4,
            Mutant::WaveBeforeSettled => Rule::S4,
            Mutant::BudgetIgnored => Rule::FailureBudget,
            Mutant::RetireHoldingOp => Rule::RosterHolds,
            Mutant::UnfencedAppend => Rule::S6,
            Mutant::LoadUnverifiedSnapshot | Mutant::ArchivePastSnapshot => {
                Rule::RestartRebuildsTheFold
            }
            Mutant::SettleKeepsDeadline | Mutant::RearmSkipsDecided => Rule::DeadlineForEveryWait,
            Mutant::IgnoreIdentityConflict => Rule::QuarantineSilences,
            Mutant::StartIgnoresArch => Rule::ArchHasATree,
            Mutant::StartIgnoresConfig => Rule::DeploysRecordedConfig,
            Mutant::ConfigReadFromDocument => Rule::ProofIsReadback,
            Mutant::ViewerMayApprove => Rule::OperatorHasTheRole,
            Mutant::ResumeGrantsNothing
            | Mutant::StagingRetryNeverReissued
            | Mutant::PauseFreezesAccounting => {
                unreachable!("{}: a liveness mutant breaks no safety rule", self.name())
            }
        }
    }

    /// Rules the mutant may break besides [`Mutant::breaks`] in the same
    /// exploration (stateright's breadth-first search checks a block of
    /// states before it stops, so a small space can show two stories).
    /// Empty for all but one: a deposed leader's unfenced append also
    /// records a late report or decision on an op the new leader settled.
    pub fn also_breaks(self) -> &'static [Breaks] {
        match self {
            Mutant::UnfencedAppend => &[Breaks::Rule(Rule::S8)],
            // A stuck UNKNOWN op keeps its unpaused rollout from resting.
            Mutant::StagingRetryNeverReissued => &[Breaks::Liveness(Liveness::RolloutComesToRest)],
            // The ground truth counts an approval only when an operator
            // entitled to it gave it, so S10 sees the viewer's gate
            // passed with no (entitled) operator's approval too.
            Mutant::ViewerMayApprove => &[Breaks::Rule(Rule::S10)],
            _ => &[],
        }
    }

    /// The tempting shortcut, in one line.
    // why: a flat table, one sentence per mutant, read and extended as a
    // whole; rustfmt puts most arms on three lines. Splitting it would
    // scatter the list without making any arm simpler.
    #[allow(clippy::too_many_lines)]
    pub fn description(self) -> &'static str {
        match self {
            Mutant::ReleaseOnTimeout => {
                "on a deadline, assume the node never applied the op and free its slot"
            }
            Mutant::GrantWhilePaused => "pause only blocks new rollouts; grants go on",
            Mutant::RedecideOnRetry => "answer a retried commit request by deciding again",
            Mutant::ReplyBeforePersist => "send effects first, flush the log afterwards",
            Mutant::SkipGenerationCheck => "the agent applies every command it receives",
            Mutant::RestoreWithoutProbe => "count a rollback as done once the restore is requested",
            Mutant::RecoveryAutoApproves => {
                "after a controller restart, treat a waiting approval gate as approved"
            }
            Mutant::CanaryTrustsProcess => {
                "judge the canary by its process health instead of its answer"
            }
            Mutant::FollowerBeforeCanary => "grant followers without waiting for the canary",
            Mutant::TrustRestoreClaim => {
                "accept the agent's 'restored' report as a rollback whatever its probe saw"
            }
            Mutant::ConfirmBaselineDespiteCommit => {
                "let an operator confirm the baseline they see although a Commit is stored"
            }
            Mutant::AgentForgetsClosedOps => {
                "the agent starts any op it does not hold right now, even one it closed"
            }
            Mutant::UnknownFreesSlot => {
                "an UNKNOWN op no longer counts against the slots, so the next follower goes"
            }
            Mutant::GrantOverLiveOp => {
                "a new rollout grants a node that still holds an op of the superseded one"
            }
            Mutant::RollbackProvenBeforeCommitLands => {
                "settle an ordered roll back on any probe of the baseline, though the stored Commit may not have reached the node yet"
            }
            Mutant::ProofTrustsRecordedEvidence => {
                "answer a live proof from the evidence recorded at settlement, ignoring the fresh readback"
            }
            Mutant::RolloutNeverEnds => {
                "only a fully verified rollout finishes; one whose canary was abandoned stays active with nothing to do"
            }
            Mutant::ResumeWithoutReverify => {
                "after a crash, resume on the staged files found on disk without recomputing their digest and re-running the check"
            }
            Mutant::RetryPermanentError => {
                "treat every staging error as transient and retry it while budget lasts"
            }
            Mutant::TimeoutUnknowsSettledOp => {
                "a deadline marks its op UNKNOWN even after the op settled (its timer was never cancelled)"
            }
            Mutant::AgentClosesOnAnyAck => {
                "the agent closes the op it is reporting on any settled acknowledgement, even one for another op"
            }
            Mutant::ProbeFailurePausesAgain => {
                "a failed probe pauses its rollout whether or not it is active and unpaused"
            }
            Mutant::WaveBeforeSettled => {
                "open the next wave while ops of the earlier one still hold slots"
            }
            Mutant::BudgetIgnored => {
                "let an operator resume a rollout whose failure budget is spent, so it grants again"
            }
            Mutant::RetireHoldingOp => {
                "retire a node whatever it holds: its op will time out anyway"
            }
            Mutant::UnfencedAppend => {
                "append without comparing the leader key: a deposed leader's write still lands"
            }
            Mutant::ApproveWithoutGate => {
                "accept an operator's approval of any active rollout: before the canary passed, without a gate, twice"
            }
            Mutant::LoadUnverifiedSnapshot => {
                "at a start, load the newest snapshot without checking that it verifies"
            }
            Mutant::ArchivePastSnapshot => {
                "archive up to the newest snapshot written, without checking that it verifies"
            }
            Mutant::ResumeTrustsUnverifiedChunk => {
                "on restart, keep every chunk present on disk as verified without recomputing its digest, and fetch only the absent ones"
            }
            Mutant::ResumeGrantsNothing => {
                "grant the next node only in a step that frees a slot (or starts the rollout): a resume finds the slot free and grants nothing"
            }
            Mutant::StagingRetryNeverReissued => {
                "the retry timer no longer re-reads the disk or re-issues the staging attempt (`(changed && !waits) || timer` → `&&`, issue 27 item 5); only a reconnection resumes staging"
            }
            Mutant::PauseFreezesAccounting => {
                "a pause freezes its rollout's ops too: their agents' reports and the controller's probes are ignored until an operator resumes"
            }
            Mutant::SettleKeepsDeadline => {
                "keep a settled op's deadline armed: a late timeout is harmless anyway"
            }
            Mutant::RearmSkipsDecided => {
                "after a restart, re-arm only granted ops: a decided op's agent will report anyway"
            }
            Mutant::IgnoreIdentityConflict => {
                "ignore an identity conflict: the node's agent will win its connection back"
            }
            Mutant::StartIgnoresArch => {
                "record the release's architectures but start and grant without checking the plan's nodes against them"
            }
            Mutant::RetryInterruptedMigration => {
                "after a crash in the middle of a migration, run it again: the migrate command is surely idempotent"
            }
            Mutant::StartIgnoresConfig => {
                "start a configuration rollout without checking that its revision is the one the log recorded"
            }
            Mutant::ConfigReadFromDocument => {
                "read a node's configuration fingerprint back from the deployment document it installed, not from the environment of the process serving the route"
            }
            Mutant::ViewerMayApprove => {
                "let any recorded operator approve a gate: approving is only reading the canary's evidence, so a viewer may"
            }
        }
    }
}

/// The controller core as the checked system runs it: the real `step`, or
/// the real `step` bent by one mutant.
pub fn controller_step(
    mutant: Option<Mutant>,
    state: &ControllerState,
    input: &Input,
) -> Result<Vec<Event>, Refusal> {
    match (mutant, input) {
        (
            Some(Mutant::RedecideOnRetry),
            Input::FromAgent {
                msg: ToController::CommitRequest { op },
                ..
            },
        ) => {
            // Forget the stored decision and decide again.
            let mut forgetful = state.clone();
            if let Some(o) = forgetful.ops.get_mut(op) {
                o.decision = None;
            }
            step(&forgetful, input)
        }
        (
            Some(Mutant::CanaryTrustsProcess),
            Input::FromAgent {
                node,
                msg:
                    ToController::Report {
                        op,
                        kind,
                        observation,
                    },
            },
        ) => {
            // A healthy process counts as a passing canary.
            let mut trusted = *observation;
            let is_canary = state.op(*op).is_some_and(|o| o.is_canary);
            if is_canary && observation.process_healthy {
                trusted.verdict = ProbeVerdict::Pass;
            }
            step(
                state,
                &Input::FromAgent {
                    node: *node,
                    msg: ToController::Report {
                        op: *op,
                        kind: *kind,
                        observation: trusted,
                    },
                },
            )
        }
        (
            Some(Mutant::TrustRestoreClaim),
            Input::FromAgent {
                msg:
                    ToController::Report {
                        op,
                        kind: model::ReportKind::Restored,
                        ..
                    },
                ..
            },
        ) => {
            let mut events = step(state, input)?;
            let restoring = state.op(*op).is_some_and(|o| o.phase == OpPhase::Restoring);
            if restoring && !events.iter().any(|e| matches!(e, Event::OpSettled { .. })) {
                events.retain(|e| !matches!(e, Event::OpUnknown { .. }));
                events.push(Event::OpSettled {
                    op: *op,
                    outcome: Outcome::RolledBack,
                });
            }
            Ok(events)
        }
        _ => controller_step_settles(mutant, state, input),
    }
}

/// `viewer-may-approve`: an operator's approval, whatever its role.
fn viewer_may_approve(
    mutant: Option<Mutant>,
    state: &ControllerState,
    input: &Input,
) -> Option<Result<Vec<Event>, Refusal>> {
    let (
        Some(Mutant::ViewerMayApprove),
        Input::Acting {
            actor,
            input: inner,
        },
    ) = (mutant, input)
    else {
        return None;
    };
    let (model::controller::Actor::Operator { name, .. }, Input::Approve { .. }) =
        (actor, inner.as_ref())
    else {
        return None;
    };
    // Who acts is recorded, but the role is not checked.
    let mut anyone = state.clone();
    anyone.operators = Default::default();
    let by = model::controller::ActedBy::Operator(name.clone());
    Some(step(&anyone, inner).map(|mut events| {
        events.insert(0, Event::Acted { by });
        events
    }))
}

/// [`controller_step`], continued in the same order (the first arm that
/// matches wins): the mutants that settle an op on too little.
fn controller_step_settles(
    mutant: Option<Mutant>,
    state: &ControllerState,
    input: &Input,
) -> Result<Vec<Event>, Refusal> {
    match (mutant, input) {
        (Some(Mutant::ReleaseOnTimeout), Input::Timeout { .. }) => {
            let mut events: Vec<Event> = step(state, input)?
                .into_iter()
                .map(|e| match e {
                    Event::OpUnknown { op, .. } => Event::OpSettled {
                        op,
                        outcome: Outcome::NotApplied,
                    },
                    other => other,
                })
                .collect();
            // Then whatever the real rules do next on the bent state (a
            // grant, or ending the rollout), as a real step would.
            let mut after = state.clone();
            events.iter().for_each(|e| apply(&mut after, e));
            events.extend(progress(&after));
            Ok(events)
        }
        (Some(Mutant::RestoreWithoutProbe), _) => {
            let mut events = Vec::new();
            for e in step(state, input)? {
                let restore = match e {
                    Event::RestoreRequested { op } => Some(op),
                    _ => None,
                };
                events.push(e);
                if let Some(op) = restore {
                    events.push(Event::OpSettled {
                        op,
                        outcome: Outcome::RolledBack,
                    });
                }
            }
            Ok(events)
        }
        _ => controller_step_grants(mutant, state, input),
    }
}

/// [`controller_step`], continued in the same order (the first arm that
/// matches wins): the mutants that grant where the real rules would not.
fn controller_step_grants(
    mutant: Option<Mutant>,
    state: &ControllerState,
    input: &Input,
) -> Result<Vec<Event>, Refusal> {
    match (mutant, input) {
        (Some(Mutant::GrantWhilePaused), _) => extra_grants(state, input, usize::MAX, |after| {
            after
                .rollouts
                .iter_mut()
                .for_each(|r| Arc::make_mut(r).paused = None);
        }),
        // One extra grant per step is enough to show each shortcut below.
        (Some(Mutant::FollowerBeforeCanary), _) => extra_grants(state, input, 1, |after| {
            // Pretend every canary already passed and every gate is open.
            for r in after.rollouts.iter_mut() {
                Arc::make_mut(r).approved = true;
            }
            for_ops_where(
                after,
                |o| o.is_canary,
                |o| {
                    o.phase = OpPhase::Settled(Outcome::Verified);
                },
            );
        }),
        (Some(Mutant::UnknownFreesSlot), _) => extra_grants(state, input, 1, |after| {
            // Count UNKNOWN ops as if they had settled (not applied).
            // The slot counts are indexes kept by `apply`: free them too.
            for (rollout, op) in unknown_ops(after) {
                if let Some(o) = after.ops.get_mut(&op) {
                    o.phase = OpPhase::Settled(Outcome::NotApplied);
                }
                if let Some(r) = after.rollouts.get_mut(rollout.0 as usize) {
                    Arc::make_mut(r).occupied -= 1;
                }
            }
        }),
        (Some(Mutant::GrantOverLiveOp), _) => extra_grants(state, input, 1, |after| {
            // Forget which node holds a live op.
            let nodes: Vec<_> = after.nodes.keys().copied().collect();
            for node in nodes {
                if let Some(record) = after.nodes.get_mut(&node) {
                    record.live_op = None;
                }
            }
        }),
        _ => controller_step_operator(mutant, state, input),
    }
}

/// [`controller_step`], continued in the same order (the first arm that
/// matches wins): operator inputs, deadlines and probe failures bent.
fn controller_step_operator(
    mutant: Option<Mutant>,
    state: &ControllerState,
    input: &Input,
) -> Result<Vec<Event>, Refusal> {
    match (mutant, input) {
        (
            Some(Mutant::ConfirmBaselineDespiteCommit),
            Input::Resolve {
                op,
                resolution: model::controller::Resolution::ConfirmBaseline,
                ..
            },
        ) => {
            // Hide the stored Commit from the refusal; every other check
            // (and the events) stay the real step's.
            let mut forgetful = state.clone();
            if let Some(o) = forgetful.ops.get_mut(op) {
                o.decision = None;
            }
            step(&forgetful, input)
        }
        (Some(Mutant::TimeoutUnknowsSettledOp), Input::Timeout { op }) => {
            // `occupies_slot() || unknown.is_none()`: the slot check no
            // longer stops a settled op.
            let settled = state.op(*op).is_some_and(|o| !o.occupies_slot());
            let known = state.op(*op).is_some_and(|o| o.unknown.is_none());
            if settled && known {
                return Ok(vec![Event::OpUnknown {
                    op: *op,
                    reason: model::controller::UnknownReason::Silence,
                }]);
            }
            step(state, input)
        }
        (Some(Mutant::ProbeFailurePausesAgain), _) => {
            // Wherever a failed probe asks for a restore, pause its rollout
            // as `restore_and_pause` would with `Active || paused.is_none()`.
            let mut events = step(state, input)?;
            let restores: Vec<_> = events
                .iter()
                .filter_map(|e| match e {
                    Event::RestoreRequested { op } => Some(*op),
                    _ => None,
                })
                .collect();
            for op in restores {
                let Some(rollout) = state.op(op).map(|o| o.rollout) else {
                    continue;
                };
                let pauses = |e: &Event| matches!(e, Event::RolloutPaused { rollout: r, .. } if *r == rollout);
                if !events.iter().any(pauses) && !matches!(input, Input::RollBack { .. }) {
                    events.push(Event::RolloutPaused {
                        rollout,
                        reason: model::controller::PauseReason::ProbeFailed { op },
                    });
                }
            }
            Ok(events)
        }
        (Some(Mutant::WaveBeforeSettled), _) => extra_grants(state, input, 1, |after| {
            // Forget the waves: one wave, as a plan alone.
            for i in 0..after.rollouts.len() {
                if let Some(r) = after.rollouts.get_mut(i) {
                    Arc::make_mut(&mut Arc::make_mut(r).policy)
                        .wave_ends
                        .clear();
                }
            }
        }),
        _ => controller_step_rest(mutant, state, input),
    }
}

/// [`controller_step`], continued in the same order (the first arm that
/// matches wins): the remaining mutants, and the real `step` for the rest.
fn controller_step_rest(
    mutant: Option<Mutant>,
    state: &ControllerState,
    input: &Input,
) -> Result<Vec<Event>, Refusal> {
    if let Some(bent) = start_mutant(mutant, state, input) {
        return bent;
    }
    // No other mutant bends an `Input::Acting`: its place is free.
    if let Some(bent) = viewer_may_approve(mutant, state, input) {
        return bent;
    }
    match (mutant, input) {
        (Some(Mutant::IgnoreIdentityConflict), Input::IdentityConflict { .. }) => Ok(Vec::new()),
        (Some(Mutant::BudgetIgnored), Input::Resume { .. }) => {
            // Forget the budget the rollout spent; the real step refuses.
            let mut forgetful = state.clone();
            for i in 0..forgetful.rollouts.len() {
                if let Some(r) = forgetful.rollouts.get_mut(i) {
                    Arc::make_mut(&mut Arc::make_mut(r).policy).max_failed = None;
                }
            }
            step(&forgetful, input)
        }
        (Some(Mutant::RetireHoldingOp), Input::RetireNode { name }) => {
            // Only "enrolled and not retired" is checked, not the live op.
            match state.roster.active_id(name) {
                Some(node) => Ok(vec![Event::NodeRetired { node }]),
                None => step(state, input),
            }
        }
        (Some(Mutant::ApproveWithoutGate), Input::Approve { rollout }) => {
            // Only the rollout's being active is checked.
            match state.rollout(*rollout) {
                Some(r) if r.status == RolloutStatus::Active => {
                    Ok(vec![Event::RolloutApproved { rollout: *rollout }])
                }
                _ => step(state, input),
            }
        }
        (
            Some(Mutant::RollbackProvenBeforeCommitLands),
            Input::RouteProbed { .. } | Input::Resolve { .. },
        ) => {
            // Take a restoring op's node as past its Commit, whatever the
            // evidence says; every other check stays the real step's.
            let mut trusting = state.clone();
            for_ops_where(
                &mut trusting,
                |o| o.phase == OpPhase::Restoring,
                |o| o.commit_acted_on = true,
            );
            step(&trusting, input)
        }
        (Some(Mutant::ResumeGrantsNothing), _) => {
            // Grants only where a slot frees or the rollout starts.
            let mut events = step(state, input)?;
            let frees = events
                .iter()
                .any(|e| matches!(e, Event::OpSettled { .. } | Event::RolloutStarted { .. }));
            if !frees {
                events.retain(|e| !matches!(e, Event::OpGranted { .. }));
            }
            Ok(events)
        }
        (Some(Mutant::PauseFreezesAccounting), _) if frozen(state, input) => Ok(Vec::new()),
        (Some(Mutant::RolloutNeverEnds), _) => {
            let mut events = step(state, input)?;
            events.retain(|e| !matches!(e, Event::RolloutEnded { .. }));
            Ok(events)
        }
        _ => step(state, input),
    }
}

/// `pause-freezes-accounting`: whether `input` is evidence (an agent's
/// report, the controller's probe) about an op of a paused rollout.
fn frozen(state: &ControllerState, input: &Input) -> bool {
    let op = match input {
        Input::FromAgent {
            msg: ToController::Report { op, .. },
            ..
        } => Some(*op),
        Input::RouteProbed { node, .. } => state.nodes.get(node).and_then(|n| n.live_op),
        _ => None,
    };
    op.and_then(|op| state.op(op))
        .and_then(|o| state.rollout(o.rollout))
        .is_some_and(|r| r.paused.is_some())
}

/// The real `step`, then up to `limit` grants the real rules would not make:
/// those `progress` makes on the state after the step bent by `bend`.
fn extra_grants(
    state: &ControllerState,
    input: &Input,
    limit: usize,
    bend: impl FnOnce(&mut ControllerState),
) -> Result<Vec<Event>, Refusal> {
    let mut events = step(state, input)?;
    let mut after = state.clone();
    events.iter().for_each(|e| apply(&mut after, e));
    bend(&mut after);
    events.extend(
        progress(&after)
            .into_iter()
            .filter(|e| matches!(e, Event::OpGranted { .. }))
            .take(limit),
    );
    Ok(events)
}

/// What the controller does on its own when it restarts. The real rules:
/// nothing at all (S10).
pub fn recovery_events(mutant: Option<Mutant>, state: &ControllerState) -> Vec<Event> {
    if mutant != Some(Mutant::RecoveryAutoApproves) {
        return Vec::new();
    }
    let mut events: Vec<Event> = state
        .rollouts
        .iter()
        .filter(|r| {
            r.status == RolloutStatus::Active && r.plan.approval_after_canary && !r.approved
        })
        .filter(|r| {
            state
                .rollout_op_for(r.id, r.plan.canary)
                .is_some_and(|o| o.passed())
        })
        .map(|r| Event::RolloutApproved { rollout: r.id })
        .collect();
    let mut after = state.clone();
    events.iter().for_each(|e| apply(&mut after, e));
    events.extend(progress(&after));
    events
}

/// The agent core as the checked system runs it.
pub fn agent_step_as(mutant: Option<Mutant>, state: &AgentState, input: AgentInput) -> AgentOutput {
    if mutant == Some(Mutant::SkipGenerationCheck) {
        // Forget which generation was accepted (and, since op ids are a
        // second fence against late copies, which ops were taken on) before
        // looking at a command.
        let forgetful = AgentState {
            accepted: Generation(0),
            highest_op: None,
            ..*state
        };
        return agent_step(&forgetful, input);
    }
    if mutant == Some(Mutant::ResumeWithoutReverify) {
        // Something is there: take it as good without re-verifying it.
        if let AgentInput::StageObserved(Observed::Unknown) = input {
            return agent_step(state, AgentInput::StageObserved(Observed::ReVerified));
        }
    }
    if mutant == Some(Mutant::ResumeTrustsUnverifiedChunk) {
        if let AgentInput::ChunksObserved(reading) = input {
            return trust_present_chunks(state, reading);
        }
    }
    if mutant == Some(Mutant::RetryPermanentError) {
        // Forget the class of the latest failure: every error is transient.
        let mut forgetful = *state;
        if let Some(o) = forgetful.op.as_mut() {
            if let AgentStage::Staging(StagingStep::Observing {
                last: last @ Some(StageFailure::Permanent),
                ..
            }) = &mut o.stage
            {
                *last = Some(StageFailure::Transient {
                    bundle_missing: false,
                });
            }
        }
        return agent_step(&forgetful, input);
    }
    if mutant == Some(Mutant::AgentClosesOnAnyAck) {
        // `o.id == op || matches!(o.stage, Reporting)`: while the agent
        // reports, a settled acknowledgement for any op is journaled as
        // closing that op.
        if let AgentInput::Command(ToAgent::Settled { op, .. }) = input {
            let reporting = state
                .op
                .is_some_and(|o| o.id != op && matches!(o.stage, AgentStage::Reporting(..)));
            if reporting {
                let mut out = agent_step(state, input);
                out.events.push(AgentEvent::Closed { op });
                return out;
            }
        }
    }
    if mutant == Some(Mutant::StagingRetryNeverReissued) && input == AgentInput::Retry {
        // The timer's part of the staging effect is gone: a retry neither
        // re-reads the disk nor re-issues the attempt.
        let mut out = agent_step(state, input);
        out.effects
            .retain(|e| !matches!(e, AgentEffect::ObserveStaged | AgentEffect::StageArtifact));
        return out;
    }
    if mutant == Some(Mutant::RetryInterruptedMigration) {
        if let Some(out) = rerun_migration(state, input) {
            return out;
        }
    }
    if mutant == Some(Mutant::AgentForgetsClosedOps) {
        // Forget which ops were already taken on.
        let forgetful = AgentState {
            highest_op: None,
            ..*state
        };
        return agent_step(&forgetful, input);
    }
    agent_step(state, input)
}

/// `retry-interrupted-migration`: a restart that finds a migration
/// journaled as started (and not ended) starts it again instead of
/// reading the table, which would stop. `None` for any other input.
fn rerun_migration(state: &AgentState, input: AgentInput) -> Option<AgentOutput> {
    let AgentInput::Restarted { .. } = input else {
        return None;
    };
    let op = state.op.filter(|o| o.stage == AgentStage::Migrating)?;
    let mut out = agent_step(state, input);
    // Keep the restart and its hello; drop the table's stop.
    out.events
        .retain(|e| matches!(e, AgentEvent::Restarted { .. }));
    out.effects.retain(|e| matches!(e, AgentEffect::Send(_)));
    out.events.push(AgentEvent::MigrationStarted {
        op: op.id,
        generation: op.generation,
    });
    out.effects.push(AgentEffect::RunMigration);
    Some(out)
}

/// `resume-trusts-unverified-chunk`: the real step on a reading where
/// every chunk present counts as verified (its digest never recomputed);
/// the journal still records what the driver read.
fn trust_present_chunks(state: &AgentState, reading: ChunkReading) -> AgentOutput {
    let trusting = ChunkReading {
        verified: reading.verified.union(reading.unverified),
        unverified: ChunkSet::NONE,
        ..reading
    };
    let mut out = agent_step(state, AgentInput::ChunksObserved(trusting));
    for event in &mut out.events {
        if let AgentEvent::ChunksKept { reading: read, .. } = event {
            *read = reading;
        }
    }
    out
}

/// A live proof of `node` as the checked system answers it: the proof
/// crate's judgement of the fresh readback, or, for
/// `proof-trusts-recorded-evidence`, of what was recorded.
pub fn node_proof(
    mutant: Option<Mutant>,
    state: &ControllerState,
    node: NodeId,
    fresh: &Fresh,
) -> NodeProof {
    let name = node.to_string();
    if mutant == Some(Mutant::ProofTrustsRecordedEvidence) {
        // The evidence stored at settlement (or the node's latest recorded
        // observation) stands in for a look at what serves now.
        return proof::recorded_node_proof(state, node, &name);
    }
    proof::live_node_proof(state, node, &name, fresh)
}

/// Whether the storage fences a deposed leader's append (the real rule:
/// every append compares the leader key's revision and lease in the same
/// etcd transaction). `unfenced-append` drops the compare.
pub fn append_fenced(mutant: Option<Mutant>) -> bool {
    mutant != Some(Mutant::UnfencedAppend)
}

/// Whether a restart takes `snapshot` (the real start: only one that
/// verifies; its checksum and its link to the chain are checked first).
/// `load-unverified-snapshot` takes any.
pub fn snapshot_trusted(mutant: Option<Mutant>, snapshot: &Snapshot) -> bool {
    snapshot.verified || mutant == Some(Mutant::LoadUnverifiedSnapshot)
}

/// The entries archiving may delete, `0..` the returned count: those the
/// newest snapshot that verifies covers (never newer). `archive-past-snapshot`
/// takes the newest snapshot written, verified or not.
pub fn archive_covers(mutant: Option<Mutant>, log: &DurableLog) -> usize {
    let newest = if mutant == Some(Mutant::ArchivePastSnapshot) {
        log.snapshots.last()
    } else {
        log.newest_verified()
    };
    newest.map_or(0, |s| s.covers)
}

/// The start as `start-ignores-arch` or `start-ignores-config` bend it;
/// `None` for every other mutant and input.
fn start_mutant(
    mutant: Option<Mutant>,
    state: &ControllerState,
    input: &Input,
) -> Option<Result<Vec<Event>, Refusal>> {
    match (mutant, input) {
        (
            Some(Mutant::StartIgnoresArch),
            Input::StartStaged {
                plan,
                policy,
                arches: model::platform::ReleaseArches::Only(set),
                ..
            },
        ) => Some(start_ignoring_arches(state, plan, policy, *set)),
        (
            Some(Mutant::StartIgnoresConfig),
            Input::StartStaged {
                plan,
                policy,
                arches,
                deploys: Some(deploys),
            },
        ) => Some(start_ignoring_config(
            state,
            (plan, policy, *arches),
            deploys,
        )),
        _ => None,
    }
}

/// `start-ignores-config`: decide the start as for the code alone (no
/// check of the revision), then record what it deploys right after the
/// rollout's own events, before its grants.
fn start_ignoring_config(
    state: &ControllerState,
    (plan, policy, arches): (
        &model::Plan,
        &model::plan::Policy,
        model::platform::ReleaseArches,
    ),
    deploys: &model::config::Deploys,
) -> Result<Vec<Event>, Refusal> {
    let bare = Input::StartStaged {
        plan: plan.clone(),
        policy: policy.clone(),
        arches,
        deploys: None,
    };
    let mut events = step(state, &bare)?;
    let rollout = events.iter().find_map(|e| match e {
        Event::RolloutStarted { rollout, .. } => Some(*rollout),
        _ => None,
    });
    if let Some(rollout) = rollout {
        let at = events
            .iter()
            .position(|e| matches!(e, Event::OpGranted { .. }))
            .unwrap_or(events.len());
        let deploys = deploys.clone();
        events.insert(at, Event::RolloutConfigured { rollout, deploys });
    }
    Ok(events)
}

/// `start-ignores-arch`: decide the start as for an architecture-independent
/// release (no check, no skipped node), then record the release's
/// architectures right after the rollout's own events, before its grants.
fn start_ignoring_arches(
    state: &ControllerState,
    plan: &model::Plan,
    policy: &model::plan::Policy,
    set: model::platform::ArchSet,
) -> Result<Vec<Event>, Refusal> {
    let any = Input::StartStaged {
        plan: plan.clone(),
        policy: policy.clone(),
        arches: model::platform::ReleaseArches::Any,
        deploys: None,
    };
    let mut events = step(state, &any)?;
    let rollout = events.iter().find_map(|e| match e {
        Event::RolloutStarted { rollout, .. } => Some(*rollout),
        _ => None,
    });
    if let Some(rollout) = rollout {
        let at = events
            .iter()
            .position(|e| matches!(e, Event::OpGranted { .. }))
            .unwrap_or(events.len());
        events.insert(
            at,
            Event::RolloutArchesSet {
                rollout,
                arches: set,
            },
        );
    }
    Ok(events)
}

/// The effects of `event` (the real [`model::controller::effects`]);
/// `settle-keeps-deadline` drops the cancel of a settled op's deadline.
pub fn effects_as(mutant: Option<Mutant>, state: &ControllerState, event: &Event) -> Vec<Effect> {
    let mut out = effects(state, event);
    if mutant == Some(Mutant::SettleKeepsDeadline) {
        out.retain(|e| !matches!(e, Effect::CancelTimeout { .. }));
    }
    out
}

/// T1 on a restart: the deadlines a restarted controller arms from the
/// state it replayed (the real [`Timers::rearm`]) cover every op that
/// waits on its node. `rearm-skips-decided` re-arms granted ops only. The
/// times do not matter here (every deadline is a whole timeout from the
/// restart), only which ops have one.
pub fn check_rearm(mutant: Option<Mutant>, state: &ControllerState) -> Result<(), Violation> {
    let mut timers = Timers::new(0);
    timers.rearm(state, 0);
    if mutant == Some(Mutant::RearmSkipsDecided) {
        let decided: Vec<Effect> = state
            .ops
            .values()
            .filter(|o| o.phase != OpPhase::Granted)
            .map(|o| Effect::CancelTimeout { op: o.id })
            .collect();
        timers.handle_effects(0, &decided);
    }
    invariants::t1_deadlines_armed(state, state.ops.keys().copied(), |op| timers.is_armed(op))
}

/// Whether effects leave before the events behind them are durable.
pub fn reply_before_persist(mutant: Option<Mutant>) -> bool {
    mutant == Some(Mutant::ReplyBeforePersist)
}

/// Apply `change` to every hot op matching `pred` (imbl maps have no
/// `iter_mut`: copy the keys, then update each).
fn for_ops_where(
    state: &mut ControllerState,
    pred: impl Fn(&model::controller::Op) -> bool,
    change: impl Fn(&mut model::controller::Op),
) {
    let ids: Vec<OpId> = state
        .ops
        .values()
        .filter(|o| pred(o))
        .map(|o| o.id)
        .collect();
    for id in ids {
        if let Some(o) = state.ops.get_mut(&id) {
            change(o);
        }
    }
}

/// The UNKNOWN ops that hold a slot, with their rollouts.
fn unknown_ops(state: &ControllerState) -> Vec<(model::RolloutId, OpId)> {
    state
        .ops
        .values()
        .filter(|o| o.unknown.is_some() && o.occupies_slot())
        .map(|o| (o.rollout, o.id))
        .collect()
}
