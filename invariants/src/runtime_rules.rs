//! Rules about the runtime around the core. They need facts the controller
//! state does not hold — what was sent, what is durable, what an operator
//! actually did — so the caller passes them in.

use crate::{broken, words, Rule, Violation};
use model::controller::{ControllerState, OpPhase, OpSummary, Outcome};
use model::{Decision, Digest, Generation, OpId, RolloutId, ToAgent};

/// S7: a command that reveals a decision may leave only if the decision is
/// durable. `durable` is the state rebuilt from what is flushed to the log
/// when `sent` leaves the controller.
///
/// - `CommitReply`: the durable op stores exactly that decision, under the
///   op's generation;
/// - `Apply`: the durable state holds that grant (same release, generation);
/// - `Restore`: the durable op is restoring, or it settled after a restore
///   was requested (a later settle of a restoring op records its evidence
///   with `after_restore`), and the generation it carries is durable.
pub fn s7_persist_before_reply(durable: &ControllerState, sent: &ToAgent) -> Result<(), Violation> {
    let op = sent.op();
    // A forgotten op settled long ago (durably: it left the state only once
    // its rollout was archived); acknowledging it reveals nothing new.
    if matches!(sent, ToAgent::Settled { .. }) && durable.op_forgotten(op) {
        return Ok(());
    }
    let Some(o) = durable.op_summary(op) else {
        return broken(
            Rule::S7,
            format!(
                "{} for {op} sent but {op} is not in the durable log",
                command(sent)
            ),
        );
    };
    match *sent {
        ToAgent::CommitReply {
            generation,
            release,
            decision,
            ..
        } => s7_commit_reply(op, &o, generation, release, decision)?,
        ToAgent::Apply {
            generation,
            release,
            ..
        } => {
            if generation != o.generation || release != o.release {
                return broken(
                    Rule::S7,
                    format!(
                        "apply for {op} sends {release} under {generation} but the durable grant is {} under {}",
                        o.release, o.generation
                    ),
                );
            }
        }
        ToAgent::Settled { .. } => {
            if o.outcome.is_none() {
                return broken(
                    Rule::S7,
                    format!(
                        "settled acknowledgement for {op} sent but the durable op is unsettled"
                    ),
                );
            }
        }
        ToAgent::Restore { generation, .. } => s7_restore(durable, op, &o, generation)?,
    }
    Ok(())
}

/// S7 for a commit reply.
fn s7_commit_reply(
    op: OpId,
    o: &OpSummary,
    generation: Generation,
    release: Digest,
    decision: Decision,
) -> Result<(), Violation> {
    if release != o.release {
        return broken(
            Rule::S7,
            format!(
                "commit reply for {op} names {release} but the durable op moves to {}",
                o.release
            ),
        );
    }
    if o.decision != Some(decision) {
        return broken(
            Rule::S7,
            format!(
                "commit reply for {op} reveals {} but the durable decision is {}",
                words::decision(decision),
                words::stored_decision(o.decision)
            ),
        );
    }
    if generation != o.generation {
        return broken(
            Rule::S7,
            format!(
                "commit reply for {op} carries {generation} but the durable op has {}",
                o.generation
            ),
        );
    }
    Ok(())
}

/// S7 for a restore.
fn s7_restore(
    durable: &ControllerState,
    op: OpId,
    o: &OpSummary,
    generation: Generation,
) -> Result<(), Violation> {
    let requested = match durable.op(op).map(|hot| (hot.phase, hot)) {
        Some((OpPhase::Restoring, _)) => true,
        Some((OpPhase::Settled(_), hot)) => hot.evidence.iter().any(|e| e.after_restore),
        Some((OpPhase::Granted | OpPhase::Decided, _)) => false,
        // Archived (its rollout finished, its node moved on): the
        // summary keeps no evidence, only that it settled.
        None => o.outcome.is_some(),
    };
    if !requested {
        let phase = durable.op(op).map_or_else(
            || "archived".to_string(),
            |hot| words::phase(hot.phase).to_string(),
        );
        return broken(
            Rule::S7,
            format!("restore for {op} sent but no restore request is durable (op is {phase})"),
        );
    }
    if generation > durable.generation {
        return broken(
            Rule::S7,
            format!(
                "restore for {op} carries {generation} but the durable fleet generation is {}",
                durable.generation
            ),
        );
    }
    Ok(())
}

fn command(sent: &ToAgent) -> &'static str {
    match sent {
        ToAgent::Apply { .. } => "apply",
        ToAgent::CommitReply { .. } => "commit reply",
        ToAgent::Restore { .. } => "restore",
        ToAgent::Settled { .. } => "settled acknowledgement",
    }
}

/// S6 across restarts and observers: every answer seen for `op` equals the
/// decision stored in the durable state.
pub fn s6_answers_agree(
    durable: &ControllerState,
    op: OpId,
    answered: Decision,
) -> Result<(), Violation> {
    let stored = durable.op_summary(op).and_then(|o| o.decision);
    if stored != Some(answered) {
        return broken(
            Rule::S6,
            format!(
                "{op} was answered {} but the stored decision is {}",
                words::decision(answered),
                words::stored_decision(stored)
            ),
        );
    }
    Ok(())
}

/// S10: approvals and resolutions exist only where an operator gave them.
/// The caller knows what operators did (an audit trail, a model's ghost
/// state); restart or recovery must never have done it for them.
pub fn s10_human_waits_survive(
    state: &ControllerState,
    approved_by_operator: &dyn Fn(RolloutId) -> bool,
    resolved_by_operator: &dyn Fn(OpId) -> bool,
) -> Result<(), Violation> {
    for r in state.rollouts.iter().filter(|r| r.approved) {
        if !approved_by_operator(r.id) {
            return broken(
                Rule::S10,
                format!(
                    "rollout {} is approved after its canary but no operator approved it",
                    r.id
                ),
            );
        }
    }
    for o in state.ops.values() {
        if let OpPhase::Settled(outcome @ Outcome::Resolved(_)) = o.phase {
            if !resolved_by_operator(o.id) {
                return broken(
                    Rule::S10,
                    format!(
                        "{} is {} but no operator resolved it",
                        o.id,
                        words::outcome(outcome)
                    ),
                );
            }
        }
    }
    Ok(())
}

/// D1: the state a restart rebuilt from the log as it reads it (a snapshot
/// and the events after it, or genesis and every event) is `fold`, the
/// fold of every durable event from genesis. A snapshot is a cache of that
/// fold, never a second source of truth; `rebuilt` and `fold` come from
/// the caller (the model checker keeps the fold as its ground truth; `log
/// verify --deep` folds the log itself). The detail names the first thing
/// that differs, in domain words.
pub fn d1_restart_rebuilds_the_fold(
    rebuilt: &ControllerState,
    fold: &ControllerState,
) -> Result<(), Violation> {
    if rebuilt == fold {
        return Ok(());
    }
    let differs = |what: String| {
        broken(
            Rule::RestartRebuildsTheFold,
            format!("the restarted controller's state differs from the log's fold: {what}"),
        )
    };
    if rebuilt.generation != fold.generation {
        return differs(format!(
            "it is at {}, the fold at {}",
            rebuilt.generation, fold.generation
        ));
    }
    if rebuilt.rollouts.len() != fold.rollouts.len() {
        return differs(format!(
            "it knows {} rollout(s), the fold {}",
            rebuilt.rollouts.len(),
            fold.rollouts.len()
        ));
    }
    if let Some(r) = fold
        .rollouts
        .iter()
        .find(|r| rebuilt.rollout(r.id) != Some(r.as_ref()))
    {
        return differs(format!("rollout {} is not as the fold has it", r.id));
    }
    let ops = |s: &ControllerState| s.ops_granted();
    if ops(rebuilt) != ops(fold) {
        return differs(format!(
            "it knows {} op(s), the fold {}",
            ops(rebuilt),
            ops(fold)
        ));
    }
    if let Some(o) = fold.ops.values().find(|o| rebuilt.op(o.id) != Some(*o)) {
        return differs(format!(
            "{} is {} in the fold, {} after the restart",
            o.id,
            words::phase(o.phase),
            rebuilt
                .op(o.id)
                .map_or("unknown".to_string(), |r| words::phase(r.phase))
        ));
    }
    if let Some((node, _)) = fold
        .nodes
        .iter()
        .find(|(node, record)| rebuilt.nodes.get(*node) != Some(*record))
    {
        return differs(format!("it has another record of {node} than the fold"));
    }
    differs("the archive or an index".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;
    use model::controller::{effects, step, Effect, Input, Resolution};
    use model::{Generation, ReportKind, ToController};

    #[test]
    fn s7_persist_before_reply_passes_on_every_command_sent_after_its_event() {
        // Send exactly what `effects` derives, against the state that
        // includes the event: what the runtime does after flushing.
        let mut w = World::new();
        let mut sent = 0;
        let mut feed = |w: &mut World, input: Input| {
            for event in step(&w.state, &input).unwrap() {
                w.event(event.clone());
                for effect in effects(&w.state, &event) {
                    if let Effect::Send { msg, .. } = effect {
                        holds(s7_persist_before_reply(&w.state, &msg));
                        sent += 1;
                    }
                }
            }
        };
        feed(
            &mut w,
            Input::StartRollout {
                plan: plan(1, false),
            },
        );
        let ask = ToController::CommitRequest { op: OpId(0) };
        feed(&mut w, Input::FromAgent { node: A, msg: ask });
        feed(&mut w, Input::FromAgent { node: A, msg: ask });
        let report = ToController::Report {
            op: OpId(0),
            kind: ReportKind::Switched,
            observation: wrong(V2),
        };
        feed(
            &mut w,
            Input::FromAgent {
                node: A,
                msg: report,
            },
        );
        let hello = ToController::Hello {
            serving: Some(V2),
            generation: Generation(1),
        };
        feed(
            &mut w,
            Input::FromAgent {
                node: A,
                msg: hello,
            },
        );
        assert_eq!(
            sent, 5,
            "apply, 2 commit replies, restore, restore again on hello"
        );
    }

    #[test]
    fn s7_commit_reply_before_its_decision_is_durable_is_rejected() {
        let mut w = World::new();
        w.start(plan(1, false));
        let reply = ToAgent::CommitReply {
            op: OpId(0),
            generation: Generation(1),
            release: V2,
            decision: Decision::Commit,
        };
        let durable = w.state.clone();
        w.ask_commit(0);
        holds(s7_persist_before_reply(&w.state, &reply));
        let v = rejected(s7_persist_before_reply(&durable, &reply), Rule::S7);
        assert_eq!(
            v.detail,
            "commit reply for op0 reveals commit but the durable decision is none"
        );
        let flipped = ToAgent::CommitReply {
            op: OpId(0),
            generation: Generation(1),
            release: V2,
            decision: Decision::Abort,
        };
        rejected(s7_persist_before_reply(&w.state, &flipped), Rule::S7);
        let other_gen = ToAgent::CommitReply {
            op: OpId(0),
            generation: Generation(2),
            release: V2,
            decision: Decision::Commit,
        };
        rejected(s7_persist_before_reply(&w.state, &other_gen), Rule::S7);
        let other_release = ToAgent::CommitReply {
            op: OpId(0),
            generation: Generation(1),
            release: V3,
            decision: Decision::Commit,
        };
        let v = rejected(s7_persist_before_reply(&w.state, &other_release), Rule::S7);
        assert!(v.detail.contains("names"), "{}", v.detail);
    }

    #[test]
    fn s7_apply_before_its_grant_is_durable_is_rejected() {
        let mut w = World::new();
        let apply = ToAgent::Apply {
            op: OpId(0),
            generation: Generation(1),
            release: V2,
        };
        let v = rejected(s7_persist_before_reply(&w.state, &apply), Rule::S7);
        assert_eq!(
            v.detail,
            "apply for op0 sent but op0 is not in the durable log"
        );
        w.start(plan(1, false));
        holds(s7_persist_before_reply(&w.state, &apply));
        let other = ToAgent::Apply {
            op: OpId(0),
            generation: Generation(1),
            release: V3,
        };
        rejected(s7_persist_before_reply(&w.state, &other), Rule::S7);
    }

    #[test]
    fn s7_restore_before_its_request_is_durable_is_rejected() {
        let mut w = World::new();
        w.start(plan(1, false));
        w.ask_commit(0);
        let restore = ToAgent::Restore {
            op: OpId(0),
            generation: Generation(1),
        };
        let v = rejected(s7_persist_before_reply(&w.state, &restore), Rule::S7);
        assert_eq!(
            v.detail,
            "restore for op0 sent but no restore request is durable (op is decided)"
        );
        w.report(0, ReportKind::Switched, wrong(V2));
        holds(s7_persist_before_reply(&w.state, &restore));
        let future = ToAgent::Restore {
            op: OpId(0),
            generation: Generation(9),
        };
        rejected(s7_persist_before_reply(&w.state, &future), Rule::S7);
        // A durable state that has moved on to settle the op still backs it.
        w.report(0, ReportKind::Restored, pass(V1));
        holds(s7_persist_before_reply(&w.state, &restore));
        let mut w = World::canary_wrong();
        w.resolve(0, pass(V1), Resolution::ConfirmBaseline);
        holds(s7_persist_before_reply(&w.state, &restore));
        // An op verified without any restore does not.
        let w = World::canary_verified(1, false);
        rejected(s7_persist_before_reply(&w.state, &restore), Rule::S7);
    }

    #[test]
    fn s6_answers_agree_passes_on_the_stored_decision() {
        let mut w = World::new();
        w.start(plan(1, false));
        w.ask_commit(0);
        holds(s6_answers_agree(&w.state, OpId(0), Decision::Commit));
        // After a restart the state is the replayed log: same answer.
        let restarted = model::controller::replay(&w.log);
        holds(s6_answers_agree(&restarted, OpId(0), Decision::Commit));
    }

    #[test]
    fn s6_answer_that_differs_from_the_stored_decision_is_rejected() {
        let mut w = World::new();
        w.start(plan(1, false));
        let v = rejected(
            s6_answers_agree(&w.state, OpId(0), Decision::Commit),
            Rule::S6,
        );
        assert_eq!(
            v.detail,
            "op0 was answered commit but the stored decision is none"
        );
        w.ask_commit(0);
        rejected(
            s6_answers_agree(&w.state, OpId(0), Decision::Abort),
            Rule::S6,
        );
        rejected(
            s6_answers_agree(&w.state, OpId(4), Decision::Abort),
            Rule::S6,
        );
    }

    #[test]
    fn s10_human_waits_survive_passes_when_operators_acted() {
        let mut w = World::canary_verified(1, true);
        holds(s10_human_waits_survive(&w.state, &|_| false, &|_| false));
        w.input(Input::Approve { rollout: R0 });
        w.resolve(1, pass(V1), Resolution::ConfirmBaseline);
        holds(s10_human_waits_survive(&w.state, &|r| r == R0, &|op| {
            op == OpId(1)
        }));
    }

    #[test]
    fn s10_approval_without_an_operator_is_rejected() {
        let mut w = World::canary_verified(1, true);
        // "Recovery auto-approves": the event appears, no operator gave it.
        w.event(model::controller::Event::RolloutApproved { rollout: R0 });
        let v = rejected(
            s10_human_waits_survive(&w.state, &|_| false, &|_| true),
            Rule::S10,
        );
        assert_eq!(
            v.detail,
            "rollout r0 is approved after its canary but no operator approved it"
        );
    }

    #[test]
    fn s10_resolution_without_an_operator_is_rejected() {
        let mut w = World::canary_wrong();
        w.resolve(0, pass(V1), Resolution::ConfirmBaseline);
        let v = rejected(
            s10_human_waits_survive(&w.state, &|_| true, &|_| false),
            Rule::S10,
        );
        assert_eq!(
            v.detail,
            "op0 is resolved (confirm-baseline) but no operator resolved it"
        );
    }

    #[test]
    fn d1_holds_for_the_fold_and_names_what_a_stale_restart_lost() {
        let w = World::canary_verified(1, false);
        holds(d1_restart_rebuilds_the_fold(&w.state, &w.state));
        // A restart that kept only a prefix of the log: before the grant.
        let mut before = World::new();
        before.start(plan(1, false));
        let prefix = before.log.len() - 1;
        let mut stale = ControllerState::default();
        for e in &w.log[..prefix] {
            model::controller::apply(&mut stale, e);
        }
        let v = rejected(
            d1_restart_rebuilds_the_fold(&stale, &w.state),
            Rule::RestartRebuildsTheFold,
        );
        assert!(v.detail.contains("differs from the log's fold"), "{v}");
        let v = rejected(
            d1_restart_rebuilds_the_fold(&ControllerState::default(), &w.state),
            Rule::RestartRebuildsTheFold,
        );
        assert!(v.detail.contains("gen"), "{v}");
    }
}
