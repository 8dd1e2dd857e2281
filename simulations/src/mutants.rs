//! Mutants: named one-line deviations of the real rules. Each wraps the real
//! `model` code (it never copies it) and must be caught by the checker with
//! the rule it names. A checker that cannot fail proves nothing.

use crate::config::{CheckConfig, Fault, Faults};
use crate::durable_log::{DurableLog, Snapshot};
use invariants::Rule;
use model::agent::{
    agent_step, AgentEvent, AgentInput, AgentOutput, AgentStage, AgentState, StagingStep,
};
use model::chunks::{ChunkReading, ChunkSet};
use model::controller::{
    apply, progress, step, ControllerState, Event, Input, OpPhase, Outcome, Refusal, RolloutStatus,
};
use model::recovery::{Observed, StageFailure};
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
}

impl Mutant {
    /// Every mutant, in `--list-mutants` order.
    pub const ALL: [Mutant; 30] = [
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
        }
    }

    /// Parse a CLI name.
    pub fn parse(name: &str) -> Option<Mutant> {
        Mutant::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The rule the checker must report broken.
    pub fn breaks(self) -> Rule {
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
            | Mutant::ResumeTrustsUnverifiedChunk => Rule::S14,
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
        }
    }

    /// Rules the mutant may break besides [`Mutant::breaks`] in the same
    /// exploration (stateright's breadth-first search checks a block of
    /// states before it stops, so a small space can show two stories).
    /// Empty for all but one: a deposed leader's unfenced append also
    /// records a late report or decision on an op the new leader settled.
    pub fn also_breaks(self) -> &'static [Rule] {
        match self {
            Mutant::UnfencedAppend => &[Rule::S8],
            _ => &[],
        }
    }

    /// The tempting shortcut, in one line.
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
        }
    }

    /// Adjust a configuration so the mutant's deviation can matter: the
    /// smallest configuration where the rule can break.
    pub fn tune(self, cfg: &mut CheckConfig) {
        match self {
            // Deadlines, retries and sends happen on every path: nothing to add.
            Mutant::ReleaseOnTimeout | Mutant::RedecideOnRetry | Mutant::ReplyBeforePersist => {}
            Mutant::SkipGenerationCheck => {
                cfg.supersede = true;
                cfg.faults = cfg.faults.with(Fault::Dup);
            }
            Mutant::GrantWhilePaused => cfg.operator = true,
            Mutant::RestoreWithoutProbe | Mutant::CanaryTrustsProcess => {
                cfg.faults = cfg.faults.with(Fault::WrongAnswer);
            }
            Mutant::TrustRestoreClaim => {
                cfg.faults = cfg.faults.with(Fault::WrongAnswer).with(Fault::AppCrash);
                cfg.max_faults = cfg.max_faults.max(2);
            }
            Mutant::RecoveryAutoApproves => {
                cfg.approval = true;
                cfg.faults = cfg.faults.with(Fault::ControllerCrash);
            }
            Mutant::FollowerBeforeCanary => cfg.slots = cfg.slots.max(2),
            Mutant::ConfirmBaselineDespiteCommit => cfg.operator = true,
            Mutant::UnknownFreesSlot => {
                cfg.faults = cfg.faults.with(Fault::Partition);
            }
            Mutant::GrantOverLiveOp => cfg.supersede = true,
            Mutant::RollbackProvenBeforeCommitLands => {
                cfg.operator = true;
                cfg.rollback = true;
            }
            Mutant::AgentForgetsClosedOps => {
                cfg.operator = true;
                cfg.faults = cfg.faults.with(Fault::Dup);
            }
            // A release swapped out from under a settled node, and an
            // operator asking for proof.
            Mutant::ProofTrustsRecordedEvidence => {
                cfg.proofs = true;
                cfg.faults = cfg.faults.with(Fault::SwapOld);
            }
            // The operator abandons an op (the default configuration's
            // operator does).
            Mutant::RolloutNeverEnds => cfg.operator = true,
            // A crash while staging is in the default fault set.
            Mutant::ResumeWithoutReverify => {}
            Mutant::RetryPermanentError => cfg.faults = cfg.faults.with(Fault::StageError),
            // Late deadlines fire in every configuration.
            Mutant::TimeoutUnknowsSettledOp => {}
            // A late acknowledgement for an op the node closed reaches it
            // while it reports the op of a superseding rollout.
            Mutant::AgentClosesOnAnyAck => cfg.supersede = true,
            // The operator pauses, then the canary answers wrongly.
            Mutant::ProbeFailurePausesAgain => {
                cfg.operator = true;
                cfg.faults = cfg.faults.with(Fault::WrongAnswer);
            }
            // Approve is offered in every state, gated plan or not.
            Mutant::ApproveWithoutGate => {}
            // Two waves, and room in the slots for the second one.
            Mutant::WaveBeforeSettled => {
                cfg.waves = true;
                cfg.slots = cfg.slots.max(2);
            }
            // A follower fails once (a budget of 0), then the operator
            // resumes.
            Mutant::BudgetIgnored => {
                cfg.waves = true;
                cfg.operator = true;
                cfg.faults = cfg.faults.with(Fault::WrongAnswer);
            }
            // A standby takes over while the old leader still hears from
            // the agents. The deposed leader's stale view breaks S8 in most
            // stories (it logs a follower's op it never granted as foreign,
            // or commits an op an operator resolved after the takeover):
            // `an_unfenced_deposed_leader_is_caught_by_s6` checks
            // that. Without an operator, and a duplicated commit request
            // reaching both leaders, the shortest story is the double
            // decision the fence is for: S6 (and S8, `also_breaks`).
            Mutant::UnfencedAppend => {
                cfg.operator = false;
                cfg.faults = Faults::none()
                    .with(Fault::ControllerFailover)
                    .with(Fault::Dup);
                cfg.max_faults = cfg.max_faults.max(2);
            }
            // Enrolled nodes, and an operator who may retire one.
            Mutant::RetireHoldingOp => {
                cfg.roster = true;
                cfg.operator = true;
            }
            // A snapshot write torn by a crash; the log alone, as the
            // snapshot configuration in the tests has it (the shortest
            // stories need no other fault).
            Mutant::LoadUnverifiedSnapshot | Mutant::ArchivePastSnapshot => {
                cfg.followers = 0;
                cfg.operator = false;
                cfg.faults = Faults::none().with(Fault::Snapshot);
            }
            // A release of two chunks; a crash mid-fetch (in the default
            // set) leaves the second one torn.
            Mutant::ResumeTrustsUnverifiedChunk => {
                cfg.chunks = cfg.chunks.max(2);
                cfg.faults = cfg.faults.with(Fault::AgentCrash);
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
        (Some(Mutant::RolloutNeverEnds), _) => {
            let mut events = step(state, input)?;
            events.retain(|e| !matches!(e, Event::RolloutEnded { .. }));
            Ok(events)
        }
        _ => step(state, input),
    }
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
