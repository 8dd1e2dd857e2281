//! Agent-side rules: judged on the agent's journal records.

use crate::{broken, words, Rule, Violation};
use model::agent::{agent_apply, AgentEvent, AgentStage, AgentState, StagingStep};
use model::chunks::ChunkSet;
use model::controller::{ControllerState, Outcome, Resolution};
use model::msg::ReportKind;
use model::recovery::{ErrorClass, Exit, Observed, Position, StageFailure};

/// S8 on the agent: a journal record that acts on a command (accept, switch,
/// abort, restore) never carries a generation lower than one the agent has
/// already accepted. Such a command must be refused and the refusal
/// reported, never applied.
pub fn s8_no_stale_apply(before: &AgentState, event: &AgentEvent) -> Result<(), Violation> {
    let (op, generation, act) = match *event {
        AgentEvent::Accepted { op, generation, .. } => (op, generation, "accepted"),
        AgentEvent::Switched { op, generation } => (op, generation, "switched the route for"),
        AgentEvent::AbortAccepted { op, generation } => (op, generation, "aborted"),
        AgentEvent::AbortedUnseen { op, generation, .. } => {
            (op, generation, "aborted (never received)")
        }
        AgentEvent::Restored { op, generation } => (op, generation, "restored the baseline for"),
        AgentEvent::MigrationStarted { op, generation } => {
            (op, generation, "started the migration of")
        }
        AgentEvent::RollbackNeedsPerson { op, generation } => {
            (op, generation, "refused to roll back")
        }
        AgentEvent::MigrationDeclared { .. } | AgentEvent::MigrationFailed { .. } => return Ok(()),
        AgentEvent::Refused { .. }
        | AgentEvent::Probed { .. }
        | AgentEvent::Restarted { .. }
        | AgentEvent::Closed { .. }
        | AgentEvent::Recovery { .. }
        | AgentEvent::Staged { .. }
        | AgentEvent::StageFailed { .. }
        | AgentEvent::ChunkVerified { .. }
        | AgentEvent::ChunksKept { .. } => return Ok(()),
    };
    if generation < before.accepted {
        return broken(
            Rule::S8,
            format!(
                "the agent {act} {op} under {generation} after it had accepted {}",
                before.accepted
            ),
        );
    }
    // Starting an op at or below one already taken on is a late copy: op
    // ids only grow.
    let starts = matches!(
        event,
        AgentEvent::Accepted { .. } | AgentEvent::AbortedUnseen { .. }
    );
    if let Some(highest) = before.highest_op.filter(|h| starts && op <= *h) {
        return broken(
            Rule::S8,
            format!("the agent {act} {op} after it had already taken on {highest}"),
        );
    }
    Ok(())
}

/// S8 across the wire: a node switches its route for an op only while the
/// controller's record still allows that switch: the op unsettled, or
/// settled as the switch (verified, confirmed new) or abandoned (serving
/// state declared unknown). A switch for an op the controller settled on
/// the baseline (confirmed baseline, rolled back, not applied) is a late
/// command producing a second, conflicting change: the controller would
/// believe one release while the node serves another. Symmetrically, a
/// restore for an op settled on the new release (verified, confirmed new).
///
/// `controller` is the controller's durable state when the agent journals
/// `event`. Only the checker sees both sides at once; the runtime cannot.
pub fn s8_switch_agrees_with_record(
    controller: &ControllerState,
    event: &AgentEvent,
) -> Result<(), Violation> {
    let (op, restores) = match *event {
        AgentEvent::Switched { op, .. } => (op, false),
        AgentEvent::Restored { op, .. } => (op, true),
        _ => return Ok(()),
    };
    // Hot or archived: an archived op keeps its outcome in its summary.
    let Some(o) = controller.op_summary(op) else {
        return Ok(()); // the controller never granted it: S7 says so
    };
    let Some(outcome) = o.outcome else {
        return Ok(());
    };
    // Abandon declares the serving state unknown: nothing to contradict.
    let on_new = matches!(
        outcome,
        Outcome::Verified | Outcome::Resolved(Resolution::ConfirmNew)
    );
    let agrees = outcome == Outcome::Resolved(Resolution::Abandon) || on_new != restores;
    if agrees {
        return Ok(());
    }
    let what = if restores {
        "restored the baseline"
    } else {
        "switched to the new release"
    };
    broken(
        Rule::S8,
        format!(
            "{} {what} for {op} after the controller settled it {}",
            o.node,
            words::outcome(outcome)
        ),
    )
}

/// What the journal holds for the recovery table of `op`: where it stopped
/// and the error class of its latest failure (`None` inside: missing).
/// `None` when the journal holds no decision for the table to make.
fn journaled_axes(before: &AgentState, op: model::OpId) -> Option<(Position, Option<ErrorClass>)> {
    let o = before.op.filter(|o| o.id == op)?;
    match o.stage {
        AgentStage::Staging(StagingStep::Observing { position, last }) => Some((
            position,
            last.map_or(Some(ErrorClass::Transient), StageFailure::class),
        )),
        AgentStage::Probing(ReportKind::Refused(_))
        | AgentStage::Reporting(ReportKind::Refused(_), _) => {
            Some((Position::WaitingForPerson, None))
        }
        // A migration journaled as started, its end not journaled: a
        // crash cut it short (a crash is transient).
        AgentStage::Migrating => Some((Position::Migrating, Some(ErrorClass::Transient))),
        _ => None,
    }
}

/// S14 (SPEC §10, seed 002) on the agent's journal: a recovery-table exit
/// judged against what the journal held before it and what the driver
/// observed. Resume only on an artifact re-verified from disk; retry only
/// a transient error with attempt budget left and nothing of the effect
/// on disk; a person's wait or missing evidence on any axis means stop;
/// a stop spends no budget and a retry exactly one.
///
/// Written apart from `model::recovery`: it reads the journal's own axes,
/// not the reading the deciding code recorded.
pub fn s14_recovery_follows_the_table(
    before: &AgentState,
    event: &AgentEvent,
) -> Result<(), Violation> {
    let AgentEvent::Recovery { op, reading, exit } = *event else {
        return Ok(());
    };
    let Some((position, error)) = journaled_axes(before, op) else {
        return broken(
            Rule::S14,
            format!("the agent read the recovery table for {op}, which has nothing to recover"),
        );
    };
    let budget = before.op.map_or(0, |o| o.budget_left);
    let observed = reading.observed;
    let goes_on = exit != Exit::Stop;
    let problem = if goes_on && position == Position::WaitingForPerson {
        Some("although it waits for a person".to_string())
    } else if goes_on && position == Position::Migrating {
        Some(
            "although its migration was interrupted (its effect on the data is unknown)"
                .to_string(),
        )
    } else if goes_on && (error.is_none() || observed.is_none()) {
        Some("with evidence missing on an axis".to_string())
    } else if goes_on && error == Some(ErrorClass::Permanent) {
        Some("after a permanent error".to_string())
    } else if exit == Exit::Resume && observed != Some(Observed::ReVerified) {
        Some(format!(
            "on an artifact that was not re-verified (observed {})",
            observed.map_or("nothing".to_string(), |o| format!("{o:?}"))
        ))
    } else if exit == Exit::Retry
        && !matches!(observed, Some(Observed::Absent | Observed::PartlyVerified))
    {
        Some(format!(
            "although the artifact's effect is there ({})",
            observed.map_or("unobserved".to_string(), |o| format!("{o:?}"))
        ))
    } else if exit == Exit::Retry && budget == 0 {
        Some("with no attempt budget left".to_string())
    } else {
        None
    };
    if let Some(problem) = problem {
        let verb = match exit {
            Exit::Retry => "retried",
            Exit::Resume => "resumed",
            Exit::Stop => "stopped",
        };
        return broken(Rule::S14, format!("the agent {verb} {op} {problem}"));
    }
    // Only a retry spends budget, exactly one unit.
    let mut after = *before;
    agent_apply(&mut after, event);
    let left = after.op.map_or(0, |o| o.budget_left);
    let spent = budget.saturating_sub(left);
    let expected = u8::from(exit == Exit::Retry);
    if spent != expected || left > budget {
        return broken(
            Rule::S14,
            format!(
                "the agent's {exit:?} for {op} took the attempt budget from {budget} to {left}"
            ),
        );
    }
    Ok(())
}

/// S14 on a fetch in chunks (SPEC §11 S15, issue #23): an agent never
/// keeps, stages or asks to commit as verified a chunk it has not
/// verified, and a resume fetches again only chunks that were not
/// verified. On the journal alone:
/// - after a re-verification, the chunks kept are among those whose digest
///   matched (a present chunk is not a verified one);
/// - a chunk is fetched (journaled verified) only by a running attempt,
///   only if it is one of the release's, and never when it is already
///   verified: so after a restart at most the chunks that did not
///   re-verify are fetched again;
/// - a chunked op is staged, or resumed to its commit request, only with
///   every chunk verified.
///
/// A one-chunk release (a format-1 bundle) is verified whole by the
/// attempt that stages it and by the re-verification of S14: nothing here
/// applies to it.
pub fn s14_chunks_verified_before_use(
    before: &AgentState,
    event: &AgentEvent,
) -> Result<(), Violation> {
    let all = ChunkSet::all(before.chunk_count());
    let verified = |op| {
        before
            .op
            .filter(|o| o.id == op)
            .map_or(ChunkSet::NONE, |o| o.verified)
    };
    let problem = match *event {
        AgentEvent::ChunksKept { op, reading, kept } => {
            let unverified = kept.without(reading.verified.intersect(all));
            (!unverified.is_empty()).then(|| {
                format!(
                    "the agent kept chunks {unverified} of {op} that did not re-verify ({reading})"
                )
            })
        }
        AgentEvent::ChunkVerified { op, chunk } => {
            let running = before.op.is_some_and(|o| {
                o.id == op && o.stage == AgentStage::Staging(StagingStep::Running)
            });
            if !running {
                Some(format!(
                    "the agent fetched chunk {chunk} of {op} with no attempt running"
                ))
            } else if !all.has(chunk) {
                Some(format!(
                    "the agent fetched chunk {chunk} of {op}, which has {} chunks",
                    all.len()
                ))
            } else if verified(op).has(chunk) {
                Some(format!(
                    "the agent fetched chunk {chunk} of {op} again although it was verified"
                ))
            } else {
                None
            }
        }
        AgentEvent::Staged { op }
        | AgentEvent::Recovery {
            op,
            exit: Exit::Resume,
            ..
        } if before.chunked() => {
            let missing = all.without(verified(op));
            let verb = if matches!(event, AgentEvent::Staged { .. }) {
                "staged"
            } else {
                "resumed to the commit request of"
            };
            (!missing.is_empty())
                .then(|| format!("the agent {verb} {op} with chunks {missing} not verified"))
        }
        _ => None,
    };
    match problem {
        Some(problem) => broken(Rule::S14, problem),
        None => Ok(()),
    }
}

/// S14 on a migration (issue #24 item 2, seed 002): an interrupted
/// external effect of unknown outcome means stop, not retry. On the
/// journal alone: a migration starts only from an op staged with a
/// declared migration and awaiting its decision, which is once per op
/// (the start moves it on, and nothing moves it back); so a migration the
/// journal shows started is never started again, whatever a restart
/// finds. The route switches for such an op only after its migration
/// (from `Migrating`), never straight from the decision.
pub fn s14_migration_runs_once(before: &AgentState, event: &AgentEvent) -> Result<(), Violation> {
    let (op, starts) = match *event {
        AgentEvent::MigrationStarted { op, .. } => (op, true),
        AgentEvent::Switched { op, .. } => (op, false),
        _ => return Ok(()),
    };
    let Some(o) = before.op.filter(|o| o.id == op) else {
        return Ok(());
    };
    let problem = match (starts, o.stage, o.migration) {
        (true, AgentStage::Migrating, _) => Some(format!(
            "the agent started the migration of {op} again after it was interrupted"
        )),
        (true, AgentStage::AwaitingDecision, Some(_)) => None,
        (true, stage, migration) => Some(format!(
            "the agent started the migration of {op} from {stage:?} (declared {migration:?})"
        )),
        (false, AgentStage::AwaitingDecision, Some(_)) => Some(format!(
            "the agent switched the route for {op} without running its declared migration"
        )),
        (false, _, _) => None,
    };
    match problem {
        Some(problem) => broken(Rule::S14, problem),
        None => Ok(()),
    }
}

/// All agent rules: [`s8_no_stale_apply`],
/// [`s14_recovery_follows_the_table`],
/// [`s14_chunks_verified_before_use`] and [`s14_migration_runs_once`].
pub fn check_agent_event(before: &AgentState, event: &AgentEvent) -> Result<(), Violation> {
    s8_no_stale_apply(before, event)?;
    s14_recovery_follows_the_table(before, event)?;
    s14_chunks_verified_before_use(before, event)?;
    s14_migration_runs_once(before, event)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;
    use model::agent::{agent_apply, agent_step, AgentInput};
    use model::{Generation, OpId, ToAgent};

    fn journal_at(accepted: u64) -> AgentState {
        AgentState {
            accepted: Generation(accepted),
            serving: Some(V1),
            op: None,
            highest_op: None,
            release_chunks: 0,
        }
    }

    #[test]
    fn s8_an_op_id_at_or_below_one_taken_on_is_a_late_copy() {
        let mut before = journal_at(1);
        before.highest_op = Some(OpId(4));
        let newer = AgentEvent::Accepted {
            op: OpId(5),
            generation: Generation(1),
            release: V2,
        };
        holds(s8_no_stale_apply(&before, &newer));
        let again = AgentEvent::Accepted {
            op: OpId(4),
            generation: Generation(1),
            release: V2,
        };
        let v = rejected(s8_no_stale_apply(&before, &again), Rule::S8);
        assert_eq!(
            v.detail,
            "the agent accepted op4 after it had already taken on op4"
        );
        let unseen = AgentEvent::AbortedUnseen {
            op: OpId(2),
            generation: Generation(1),
            release: V2,
        };
        rejected(s8_no_stale_apply(&before, &unseen), Rule::S8);
        // The core itself ignores such a late copy: a duplicated Apply of
        // an op the agent closed starts nothing.
        let out = agent_step(
            &before,
            AgentInput::Command(ToAgent::Apply {
                op: OpId(4),
                generation: Generation(1),
                release: V2,
            }),
        );
        assert!(out.events.is_empty(), "{:?}", out.events);
        let out = agent_step(
            &before,
            AgentInput::Command(ToAgent::CommitReply {
                op: OpId(3),
                generation: Generation(1),
                release: V2,
                decision: model::Decision::Abort,
            }),
        );
        assert!(out.events.is_empty(), "{:?}", out.events);
    }

    #[test]
    fn s8_a_switch_must_agree_with_the_controllers_record() {
        use model::controller::Resolution;
        let switched = AgentEvent::Switched {
            op: OpId(0),
            generation: Generation(1),
        };
        let mut w = World::new();
        w.start(plan(1, false));
        // Unsettled (granted, then decided): the switch is expected.
        holds(s8_switch_agrees_with_record(&w.state, &switched));
        w.ask_commit(0);
        holds(s8_switch_agrees_with_record(&w.state, &switched));
        // Settled as the switch: fine.
        let mut verified = w.clone();
        verified.report(0, model::ReportKind::Switched, pass(V2));
        holds(s8_switch_agrees_with_record(&verified.state, &switched));
        // Settled on the baseline: a switch now contradicts the record.
        // The real rules refuse this resolution under a stored Commit, so
        // build the state by hand.
        let mut baseline = w.clone();
        baseline.event(model::controller::Event::OpSettled {
            op: OpId(0),
            outcome: Outcome::Resolved(Resolution::ConfirmBaseline),
        });
        let v = rejected(
            s8_switch_agrees_with_record(&baseline.state, &switched),
            Rule::S8,
        );
        assert_eq!(
            v.detail,
            "node-a switched to the new release for op0 after the controller settled it resolved (confirm-baseline)"
        );
        // Abandoned: the operator declared the serving state unknown.
        let mut abandoned = w.clone();
        abandoned.resolve(0, pass(V1), Resolution::Abandon);
        holds(s8_switch_agrees_with_record(&abandoned.state, &switched));
        // A restore for an op settled on the new release contradicts it;
        // one for an op settled on the baseline agrees.
        let restored = AgentEvent::Restored {
            op: OpId(0),
            generation: Generation(1),
        };
        let v = rejected(
            s8_switch_agrees_with_record(&verified.state, &restored),
            Rule::S8,
        );
        assert_eq!(
            v.detail,
            "node-a restored the baseline for op0 after the controller settled it verified"
        );
        holds(s8_switch_agrees_with_record(&baseline.state, &restored));
        holds(s8_switch_agrees_with_record(&abandoned.state, &restored));
        // Archived (its rollout finished): the summary still holds the
        // outcome the restore contradicts.
        let mut archived = verified.clone();
        archive(&mut archived.state, OpId(0));
        rejected(
            s8_switch_agrees_with_record(&archived.state, &restored),
            Rule::S8,
        );
    }

    /// Moves `op` from the hot ops to the archive, as `apply` does once its
    /// rollout finished and its node moved on.
    fn archive(state: &mut ControllerState, op: OpId) {
        let summary = state.op_summary(op).expect("op was granted");
        state.ops.remove(&op);
        state.archive.insert(op, summary);
    }

    #[test]
    fn s8_no_stale_apply_passes_on_current_and_newer_commands() {
        let before = journal_at(2);
        let same = AgentEvent::Accepted {
            op: OpId(3),
            generation: Generation(2),
            release: V2,
        };
        holds(s8_no_stale_apply(&before, &same));
        let newer = AgentEvent::Restored {
            op: OpId(3),
            generation: Generation(5),
        };
        holds(s8_no_stale_apply(&before, &newer));
        // Records that act on no command carry no generation to judge.
        holds(s8_no_stale_apply(
            &before,
            &AgentEvent::Refused {
                op: OpId(0),
                reason: model::StageRefusal::BundleRejected,
            },
        ));
        holds(s8_no_stale_apply(
            &before,
            &AgentEvent::Probed {
                op: OpId(0),
                observation: pass(V1),
            },
        ));
        holds(s8_no_stale_apply(
            &before,
            &AgentEvent::Restarted { serving: None },
        ));
    }

    #[test]
    fn s8_stale_apply_is_rejected() {
        let before = journal_at(2);
        let stale = [
            AgentEvent::Accepted {
                op: OpId(0),
                generation: Generation(1),
                release: V2,
            },
            AgentEvent::Switched {
                op: OpId(0),
                generation: Generation(1),
            },
            AgentEvent::AbortAccepted {
                op: OpId(0),
                generation: Generation(1),
            },
            AgentEvent::Restored {
                op: OpId(0),
                generation: Generation(1),
            },
        ];
        for event in stale {
            rejected(s8_no_stale_apply(&before, &event), Rule::S8);
        }
        let v = rejected(s8_no_stale_apply(&before, &stale[0]), Rule::S8);
        assert_eq!(
            v.detail,
            "the agent accepted op0 under gen 1 after it had accepted gen 2"
        );
    }

    #[test]
    fn check_agent_event_passes_on_a_real_agent_refusing_a_stale_command() {
        let mut journal = journal_at(0);
        let inputs = [
            AgentInput::Command(ToAgent::Apply {
                op: OpId(1),
                generation: Generation(2),
                release: V3,
            }),
            // A late, duplicated apply of gen 1: refused, nothing journaled.
            AgentInput::Command(ToAgent::Apply {
                op: OpId(0),
                generation: Generation(1),
                release: V2,
            }),
            // Staging: nothing on disk, one attempt, staged.
            AgentInput::StageObserved(Observed::Absent),
            AgentInput::Staged,
            AgentInput::Command(ToAgent::CommitReply {
                op: OpId(1),
                generation: Generation(2),
                release: V3,
                decision: model::Decision::Commit,
            }),
        ];
        for input in inputs {
            let out = agent_step(&journal, input);
            for event in &out.events {
                holds(check_agent_event(&journal, event));
                agent_apply(&mut journal, event);
            }
        }
        assert_eq!(journal.serving, Some(V3));
    }

    #[test]
    fn check_agent_event_rejects_a_stale_switch() {
        let before = journal_at(3);
        let stale = AgentEvent::Switched {
            op: OpId(0),
            generation: Generation(2),
        };
        rejected(check_agent_event(&before, &stale), Rule::S8);
    }

    /// A journal at the table's decision after the first attempt of op0
    /// failed with `last`, with `budget_left` units left.
    fn observing(last: Option<StageFailure>, budget_left: u8) -> AgentState {
        use model::agent::{AgentOp, AgentStage, StagingStep};
        AgentState {
            op: Some(AgentOp {
                id: OpId(0),
                generation: Generation(1),
                release: V2,
                baseline: Some(V1),
                stage: AgentStage::Staging(StagingStep::Observing {
                    position: Position::BeforeStage,
                    last,
                }),
                budget_left,
                verified: Default::default(),
                migration: None,
            }),
            highest_op: Some(OpId(0)),
            ..journal_at(1)
        }
    }

    fn recovery(
        error: Option<ErrorClass>,
        observed: Observed,
        budget: u8,
        exit: Exit,
    ) -> AgentEvent {
        AgentEvent::Recovery {
            op: OpId(0),
            reading: model::recovery::Reading {
                position: Position::BeforeStage,
                error,
                observed: Some(observed),
                budget_left: budget,
            },
            exit,
        }
    }

    #[test]
    fn s14_the_real_table_passes_on_every_row_it_takes() {
        use model::recovery::Row;
        let lasts = [
            None,
            Some(StageFailure::Transient {
                bundle_missing: true,
            }),
            Some(StageFailure::Permanent),
            Some(StageFailure::MissingEvidence),
        ];
        let mut taken = std::collections::BTreeSet::new();
        for last in lasts {
            for budget in [0, 2] {
                for observed in [
                    Observed::Absent,
                    Observed::ReVerified,
                    Observed::Unknown,
                    Observed::PartlyVerified,
                ] {
                    let before = observing(last, budget);
                    let out = agent_step(&before, AgentInput::StageObserved(observed));
                    let mut state = before;
                    for event in &out.events {
                        holds(check_agent_event(&state, event));
                        if let AgentEvent::Recovery { reading, .. } = event {
                            taken.insert(reading.row());
                        }
                        agent_apply(&mut state, event);
                    }
                }
            }
        }
        // Every row but a person's wait and an interrupted migration,
        // which a restart reaches.
        assert_eq!(taken.len(), Row::ALL.len() - 2, "{taken:?}");
        assert!(!taken.contains(&Row::MigrationInterrupted));
    }

    /// A journal of a release of `count` chunks at the table's decision
    /// after a restart, or (`running`) with an attempt running, with
    /// `verified` journaled.
    fn chunked(count: u8, running: bool, verified: ChunkSet) -> AgentState {
        let mut state = observing(None, 2);
        state.release_chunks = count;
        if let Some(o) = state.op.as_mut() {
            o.verified = verified;
            if running {
                o.stage = AgentStage::Staging(StagingStep::Running);
            }
        }
        state
    }

    #[test]
    fn s14_a_chunk_is_kept_only_if_it_re_verified() {
        use model::recovery::ChunkReading;
        let before = chunked(2, false, ChunkSet::NONE);
        // Chunk 0 re-verified, chunk 1 is there but torn.
        let reading = ChunkReading {
            verified: ChunkSet::NONE.with(0),
            unverified: ChunkSet::NONE.with(1),
            tree: Observed::Absent,
        };
        let honest = AgentEvent::ChunksKept {
            op: OpId(0),
            reading,
            kept: reading.verified,
        };
        holds(check_agent_event(&before, &honest));
        // The real step keeps exactly what re-verified.
        let out = agent_step(&before, AgentInput::ChunksObserved(reading));
        assert_eq!(out.events.first(), Some(&honest));
        let trusting = AgentEvent::ChunksKept {
            op: OpId(0),
            reading,
            kept: ChunkSet::all(2),
        };
        let v = rejected(check_agent_event(&before, &trusting), Rule::S14);
        assert_eq!(
            v.detail,
            "the agent kept chunks {1} of op0 that did not re-verify \
             (verified {0}, unverified {1}, tree Absent)"
        );
    }

    #[test]
    fn s14_a_verified_chunk_is_never_fetched_again_and_all_are_verified_before_staging() {
        let first = ChunkSet::NONE.with(0);
        let running = chunked(2, true, first);
        let again = AgentEvent::ChunkVerified {
            op: OpId(0),
            chunk: 0,
        };
        let v = rejected(check_agent_event(&running, &again), Rule::S14);
        assert_eq!(
            v.detail,
            "the agent fetched chunk 0 of op0 again although it was verified"
        );
        let next = AgentEvent::ChunkVerified {
            op: OpId(0),
            chunk: 1,
        };
        holds(check_agent_event(&running, &next));
        // The real step never reports a verified chunk twice.
        assert!(agent_step(&running, AgentInput::ChunkFetched(0))
            .events
            .is_empty());
        let staged = AgentEvent::Staged { op: OpId(0) };
        let v = rejected(check_agent_event(&running, &staged), Rule::S14);
        assert_eq!(
            v.detail,
            "the agent staged op0 with chunks {1} not verified"
        );
        holds(check_agent_event(
            &chunked(2, true, ChunkSet::all(2)),
            &staged,
        ));
        // A resume to the commit request needs every chunk too.
        let resume = recovery(
            Some(ErrorClass::Transient),
            Observed::ReVerified,
            2,
            Exit::Resume,
        );
        rejected(
            check_agent_event(&chunked(2, false, first), &resume),
            Rule::S14,
        );
        holds(check_agent_event(
            &chunked(2, false, ChunkSet::all(2)),
            &resume,
        ));
        // A one-chunk release is verified whole: nothing to judge here.
        holds(check_agent_event(&observing(None, 2), &resume));
    }

    #[test]
    fn s14_a_retry_after_a_permanent_error_is_rejected() {
        let before = observing(Some(StageFailure::Permanent), 2);
        // The deciding code was told "transient": the journal says otherwise.
        let event = recovery(
            Some(ErrorClass::Transient),
            Observed::Absent,
            2,
            Exit::Retry,
        );
        let v = rejected(s14_recovery_follows_the_table(&before, &event), Rule::S14);
        assert_eq!(v.detail, "the agent retried op0 after a permanent error");
        let stop = recovery(Some(ErrorClass::Permanent), Observed::Absent, 2, Exit::Stop);
        holds(s14_recovery_follows_the_table(&before, &stop));
    }

    #[test]
    fn s14_resume_needs_a_reverified_artifact_and_retry_needs_budget() {
        let before = observing(None, 2);
        let v = rejected(
            s14_recovery_follows_the_table(
                &before,
                &recovery(
                    Some(ErrorClass::Transient),
                    Observed::Unknown,
                    2,
                    Exit::Resume,
                ),
            ),
            Rule::S14,
        );
        assert_eq!(
            v.detail,
            "the agent resumed op0 on an artifact that was not re-verified (observed Unknown)"
        );
        holds(s14_recovery_follows_the_table(
            &before,
            &recovery(
                Some(ErrorClass::Transient),
                Observed::ReVerified,
                2,
                Exit::Resume,
            ),
        ));
        let spent = observing(None, 0);
        let v = rejected(
            s14_recovery_follows_the_table(
                &spent,
                &recovery(
                    Some(ErrorClass::Transient),
                    Observed::Absent,
                    0,
                    Exit::Retry,
                ),
            ),
            Rule::S14,
        );
        assert_eq!(
            v.detail,
            "the agent retried op0 with no attempt budget left"
        );
        // Missing evidence on the error axis: only a stop.
        let unclassified = observing(Some(StageFailure::MissingEvidence), 2);
        rejected(
            s14_recovery_follows_the_table(
                &unclassified,
                &recovery(None, Observed::Absent, 2, Exit::Retry),
            ),
            Rule::S14,
        );
        // A table read for an op with nothing to recover is no decision.
        rejected(
            s14_recovery_follows_the_table(
                &journal_at(1),
                &recovery(None, Observed::Absent, 2, Exit::Stop),
            ),
            Rule::S14,
        );
    }

    /// Seed 002 on the journal (issue #24 item 2): the real agent's
    /// migration passes; starting it again after a crash, retrying the
    /// table's stop, or switching without it breaks S14.
    #[test]
    fn s14_an_interrupted_migration_is_never_run_again() {
        use model::agent::{AgentStage, MigrationKind};
        let mut journal = journal_at(0);
        let commit = AgentInput::Command(ToAgent::CommitReply {
            op: OpId(0),
            generation: Generation(1),
            release: V2,
            decision: model::Decision::Commit,
        });
        let inputs = [
            AgentInput::Command(ToAgent::Apply {
                op: OpId(0),
                generation: Generation(1),
                release: V2,
            }),
            AgentInput::StageObserved(Observed::Absent),
            AgentInput::MigrationDeclared(MigrationKind::Reversible),
            AgentInput::Staged,
        ];
        for input in inputs {
            for event in &agent_step(&journal, input).events {
                holds(check_agent_event(&journal, event));
                agent_apply(&mut journal, event);
            }
        }
        // Switching straight from the decision skips the migration.
        let skip = AgentEvent::Switched {
            op: OpId(0),
            generation: Generation(1),
        };
        rejected(check_agent_event(&journal, &skip), Rule::S14);
        for event in &agent_step(&journal, commit).events {
            holds(check_agent_event(&journal, event));
            agent_apply(&mut journal, event);
        }
        assert_eq!(journal.op.map(|o| o.stage), Some(AgentStage::Migrating));
        let restarted = AgentEvent::Restarted { serving: Some(V1) };
        agent_apply(&mut journal, &restarted);
        let again = AgentEvent::MigrationStarted {
            op: OpId(0),
            generation: Generation(1),
        };
        let v = rejected(check_agent_event(&journal, &again), Rule::S14);
        assert!(v.detail.contains("again after it was interrupted"), "{v}");
        // The table's reading of the interruption may only stop.
        let reading = model::recovery::Reading {
            position: Position::Migrating,
            error: Some(ErrorClass::Transient),
            observed: Some(Observed::Unknown),
            budget_left: 2,
        };
        for exit in [Exit::Retry, Exit::Resume] {
            let event = AgentEvent::Recovery {
                op: OpId(0),
                reading,
                exit,
            };
            let v = rejected(s14_recovery_follows_the_table(&journal, &event), Rule::S14);
            assert!(v.detail.contains("interrupted"), "{v}");
        }
        // The real restart stops, and every record of it holds.
        let mut real = journal;
        for event in &agent_step(&journal, AgentInput::Restarted { serving: Some(V1) }).events {
            holds(check_agent_event(&real, event));
            agent_apply(&mut real, event);
        }
        assert!(matches!(
            real.op.map(|o| o.stage),
            Some(AgentStage::Probing(ReportKind::Refused(
                model::StageRefusal::MigrationInterrupted
            )))
        ));
    }
}
