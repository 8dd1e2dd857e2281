//! Transition rules: each judges one controller event against the state
//! just *before* it is applied. Events a rule is not about pass it.

use crate::state_rules::flag_mismatch;
use crate::{broken, words, Rule, Violation};
use model::controller::{
    ControllerState, Event, EvidenceSource, Op, OpPhase, Outcome, Resolution, RolloutStatus,
};
use model::{Decision, Generation, NodeId, OpId, RolloutId};

/// S1: a grant happens only while the rollout has a free slot, counting
/// UNKNOWN ops as occupied. A grant for a rollout that does not exist is
/// left to S5 (it is not an active rollout).
pub fn s1_grant_within_slots(before: &ControllerState, event: &Event) -> Result<(), Violation> {
    let Event::OpGranted { op, rollout, .. } = event else {
        return Ok(());
    };
    let Some(r) = before.rollout(*rollout) else {
        return Ok(());
    };
    let occupied = before.slots_occupied(r.id);
    if occupied >= r.plan.slots_max as usize {
        return broken(
            Rule::S1,
            format!(
                "{op} granted in rollout {} while {occupied} of {} slots are occupied",
                r.id, r.plan.slots_max
            ),
        );
    }
    Ok(())
}

/// S3: an op settles (frees its slot) only on evidence already recorded on
/// it, and only once. What the evidence must show depends on the outcome:
///
/// - `Verified`: an item proving the op's release serving;
/// - `NotApplied`: an item proving the baseline serving, and the op was
///   never told to commit (with a commit decision out, a baseline answer
///   does not show the switch never happened);
/// - `RolledBack`: the op has a baseline and some recorded evidence; *which*
///   evidence proves a rollback is S9's rule ([`s9_restore_needs_proof`]),
///   so that "restore requested, settled on the failing probe" reads as S9;
/// - `Resolved(_)`: the latest item is the operator's observation recorded
///   with the resolution, and for `ConfirmNew`/`ConfirmBaseline` it proves
///   the new release/the baseline serving.
pub fn s3_evidence_releases_slot(before: &ControllerState, event: &Event) -> Result<(), Violation> {
    let Event::OpSettled { op, outcome } = event else {
        return Ok(());
    };
    let what = words::outcome(*outcome);
    let Some(o) = before.op(*op) else {
        return broken(
            Rule::S3,
            format!("{op} settled {what} but no such op was granted"),
        );
    };
    if let OpPhase::Settled(earlier) = o.phase {
        return broken(
            Rule::S3,
            format!(
                "{op} settled {what} but it had already settled {}",
                words::outcome(earlier)
            ),
        );
    }
    let proves = |release| {
        o.evidence
            .iter()
            .any(|e| e.observation.proves_serving(release))
    };
    match outcome {
        Outcome::Verified => {
            if !proves(o.release) {
                return broken(
                    Rule::S3,
                    format!(
                        "{op} settled {what} but none of its {} recorded observations shows {} serving",
                        o.evidence.len(),
                        o.release
                    ),
                );
            }
        }
        Outcome::NotApplied => s3_not_applied(*op, o, &what)?,
        Outcome::RolledBack => {
            if o.baseline.is_none() {
                return broken(
                    Rule::S3,
                    format!("{op} settled {what} but it has no baseline to restore"),
                );
            }
            if o.evidence.is_empty() {
                return broken(
                    Rule::S3,
                    format!("{op} settled {what} with no recorded evidence at all"),
                );
            }
        }
        Outcome::Resolved(resolution) => s3_resolved(*op, o, &what, *resolution)?,
    }
    Ok(())
}

/// S4: the grant of a follower needs the rollout's canary op passed and,
/// where the plan has an approval gate, an operator's approval; and a
/// grant's `is_canary` flag must agree with the plan.
pub fn s4_grant_order(before: &ControllerState, event: &Event) -> Result<(), Violation> {
    let Event::OpGranted {
        op,
        rollout,
        node,
        is_canary,
        ..
    } = event
    else {
        return Ok(());
    };
    let Some(r) = before.rollout(*rollout) else {
        return Ok(());
    };
    if *is_canary != (*node == r.plan.canary) {
        return broken(Rule::S4, flag_mismatch(*op, *node, *is_canary, r));
    }
    if *node == r.plan.canary {
        return Ok(());
    }
    let canary = before.rollout_op_for(r.id, r.plan.canary);
    if !canary.is_some_and(Op::passed) {
        let canary_state = canary.map_or_else(
            || "has no op yet".to_string(),
            |c| format!("op {} is {}", c.id, words::phase(c.phase)),
        );
        return broken(
            Rule::S4,
            format!(
                "follower {op} ({node}) granted in rollout {} while canary {} {canary_state}",
                r.id, r.plan.canary
            ),
        );
    }
    if r.plan.approval_after_canary && !r.approved {
        return broken(
            Rule::S4,
            format!(
                "follower {op} ({node}) granted in rollout {} before an operator approved after the canary",
                r.id
            ),
        );
    }
    s4_wave_order(r, *op, *node)
}

/// S4 across waves: followers go strictly in plan order, and the first of
/// a later wave only once every op of the waves before it settled (the
/// rollout holds no slot) and, with approvals between waves, approved.
fn s4_wave_order(r: &model::controller::Rollout, op: OpId, node: NodeId) -> Result<(), Violation> {
    let index = r.followers_granted as usize;
    if r.plan.followers.get(index) != Some(&node) {
        return broken(
            Rule::S4,
            format!(
                "follower {op} ({node}) granted in rollout {} out of plan order (follower #{index} is next)",
                r.id
            ),
        );
    }
    let Some(wave) = r.policy.wave_opened_by(index as u32) else {
        return Ok(());
    };
    if r.occupied > 0 {
        return broken(
            Rule::S4,
            format!(
                "follower {op} ({node}) opens wave {wave} of rollout {} while {} ops of earlier waves hold slots",
                r.id, r.occupied
            ),
        );
    }
    if r.policy.approval_between_waves && r.wave_approvals < wave - 1 {
        return broken(
            Rule::S4,
            format!(
                "follower {op} ({node}) opens wave {wave} of rollout {} before an operator approved it",
                r.id
            ),
        );
    }
    Ok(())
}

/// S5: no grant for a rollout that is paused, or that is not active
/// (superseded, completed, or not started at all).
pub fn s5_pause_stops_grants(before: &ControllerState, event: &Event) -> Result<(), Violation> {
    let Event::OpGranted { op, rollout, .. } = event else {
        return Ok(());
    };
    let Some(r) = before.rollout(*rollout) else {
        return broken(
            Rule::S5,
            format!("{op} granted in rollout {rollout}, which was never started"),
        );
    };
    if r.status != RolloutStatus::Active {
        return broken(
            Rule::S5,
            format!(
                "{op} granted in rollout {rollout}, which is {}",
                words::status(r.status)
            ),
        );
    }
    if let Some(reason) = r.paused {
        return broken(
            Rule::S5,
            format!(
                "{op} granted in rollout {rollout} while it is {}",
                words::pause(reason)
            ),
        );
    }
    Ok(())
}

/// S6: a decision is made once per op and every replay repeats it:
/// `CommitDecided` only when none is stored, `CommitReplayed` only with the
/// stored decision.
pub fn s6_stable_decisions(before: &ControllerState, event: &Event) -> Result<(), Violation> {
    match event {
        Event::CommitDecided { op, decision } if before.op_forgotten(*op) => broken(
            Rule::S6,
            format!(
                "decided {} for {op}, which the state forgot: its decision, if any, lives only in the log, so it is never decided again",
                words::decision(*decision)
            ),
        ),
        Event::CommitDecided { op, decision } => {
            let Some(o) = before.op_summary(*op) else {
                return broken(
                    Rule::S6,
                    format!(
                        "decided {} for {op}, which was never granted",
                        words::decision(*decision)
                    ),
                );
            };
            if let Some(stored) = o.decision {
                return broken(
                    Rule::S6,
                    format!(
                        "decided {} for {op} although {} is already stored",
                        words::decision(*decision),
                        words::decision(stored)
                    ),
                );
            }
            Ok(())
        }
        Event::CommitReplayed { op, decision } => {
            let stored = before.op_summary(*op).and_then(|o| o.decision);
            if stored != Some(*decision) {
                return broken(
                    Rule::S6,
                    format!(
                        "replayed {} for {op} but the stored decision is {}",
                        words::decision(*decision),
                        words::stored_decision(stored)
                    ),
                );
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// S8 on the controller: a report or probe is recorded only against an
/// unsettled op (a late one must become `LateReportIgnored`); a grant
/// carries its rollout's generation, no older than the fleet's, under a
/// fresh op id (reusing one would let a late report pass for a new op's);
/// and a commit is decided only for an unsettled op of the current
/// generation, so a superseded op never switches a route over newer intent.
pub fn s8_late_report_changes_nothing(
    before: &ControllerState,
    event: &Event,
) -> Result<(), Violation> {
    match event {
        Event::ReportRecorded { op, .. } | Event::ProbeRecorded { op, .. } => {
            let what = if matches!(event, Event::ReportRecorded { .. }) {
                "agent report"
            } else {
                "controller probe"
            };
            match before.op(*op).map(|o| o.phase) {
                None => broken(
                    Rule::S8,
                    format!("{what} recorded for {op}, which was never granted"),
                ),
                Some(OpPhase::Settled(outcome)) => broken(
                    Rule::S8,
                    format!(
                        "{what} recorded for {op} after it settled {}; a late report must be ignored",
                        words::outcome(outcome)
                    ),
                ),
                Some(_) => Ok(()),
            }
        }
        // A node's word counts only for its own ops (SPEC §8): a message
        // about another node's op must be logged as foreign, never as the
        // sender's own late report.
        Event::LateReportIgnored { node, op } => match before.op_summary(*op) {
            Some(o) if o.node != *node => broken(
                Rule::S8,
                format!(
                    "{node}'s message about {}'s {op} logged as its own late report",
                    o.node
                ),
            ),
            _ => Ok(()),
        },
        // Only an op the state forgot may be ignored as forgotten: a hot or
        // archived op's message is judged as the node's own or foreign.
        Event::ForgottenOpIgnored { node, op } if !before.op_forgotten(*op) => broken(
            Rule::S8,
            format!("{node}'s message about {op} logged as about a forgotten op, but the state still knows it (or never granted it)"),
        ),
        Event::ForeignMessageIgnored { node, op, owner } => s8_foreign(before, *node, *op, *owner),
        Event::OpGranted {
            op,
            rollout,
            generation,
            ..
        } => s8_grant(before, *op, *rollout, *generation),
        Event::CommitDecided {
            op,
            decision: Decision::Commit,
        } => s8_commit(before, *op),
        _ => Ok(()),
    }
}

/// S3 for an op settled `NotApplied`.
fn s3_not_applied(op: OpId, o: &Op, what: &str) -> Result<(), Violation> {
    let proves = |release| {
        o.evidence
            .iter()
            .any(|e| e.observation.proves_serving(release))
    };
    let Some(baseline) = o.baseline else {
        return broken(
            Rule::S3,
            format!("{op} settled {what} but it has no baseline to prove"),
        );
    };
    if !proves(baseline) {
        return broken(
                    Rule::S3,
                    format!(
                        "{op} settled {what} but none of its {} recorded observations shows the baseline {baseline} serving",
                        o.evidence.len()
                    ),
                );
    }
    if o.decision == Some(Decision::Commit) {
        return broken(
            Rule::S3,
            format!(
                "{op} settled {what} although {} was told to commit {}",
                o.node, o.release
            ),
        );
    }
    Ok(())
}

/// S3 for an op settled `Resolved(resolution)`.
fn s3_resolved(op: OpId, o: &Op, what: &str, resolution: Resolution) -> Result<(), Violation> {
    let Some(last) = o
        .evidence
        .last()
        .filter(|e| e.source == EvidenceSource::Operator)
    else {
        return broken(
            Rule::S3,
            format!("{op} settled {what} without an operator observation recorded with it"),
        );
    };
    let shown = last.observation;
    let backed = match resolution {
        Resolution::ConfirmNew => shown.proves_serving(o.release),
        Resolution::ConfirmBaseline => o.baseline.is_some_and(|b| shown.proves_serving(b)),
        Resolution::Abandon => true,
    };
    if !backed {
        let claimed = match resolution {
            Resolution::ConfirmNew => o.release.to_string(),
            _ => format!("the baseline {}", words::release(o.baseline)),
        };
        return broken(
                    Rule::S3,
                    format!(
                        "{op} settled {what} but the operator's observation ({shown}) does not show {claimed} serving"
                    ),
                );
    }
    Ok(())
}

/// S8 for `ForeignMessageIgnored`.
fn s8_foreign(
    before: &ControllerState,
    node: NodeId,
    op: OpId,
    owner: Option<NodeId>,
) -> Result<(), Violation> {
    let actual = before.op_summary(op).map(|o| o.node);
    if before.op_forgotten(op) {
        return broken(
                    Rule::S8,
                    format!("{node}'s message about {op}, which the state forgot, logged as foreign: its owner is not known any more"),
                );
    }
    if actual != owner || actual == Some(node) {
        return broken(
                    Rule::S8,
                    format!(
                        "{node}'s message about {op} logged as foreign with owner {owner:?}, but the op belongs to {actual:?}"
                    ),
                );
    }
    Ok(())
}

/// S8 for `OpGranted`.
fn s8_grant(
    before: &ControllerState,
    op: OpId,
    rollout: RolloutId,
    generation: Generation,
) -> Result<(), Violation> {
    let fresh = before.next_op_id();
    if op != fresh {
        return broken(
            Rule::S8,
            format!("grant reuses or skips op ids: {op} granted where {fresh} is next"),
        );
    }
    if let Some(r) = before.rollout(rollout) {
        if generation != r.generation {
            return broken(
                Rule::S8,
                format!(
                    "{op} granted under {generation} but rollout {rollout} runs under {}",
                    r.generation
                ),
            );
        }
    }
    if generation < before.generation {
        return broken(
            Rule::S8,
            format!(
                "{op} granted under {generation}, older than the fleet's {}",
                before.generation
            ),
        );
    }
    Ok(())
}

/// S8 for a commit decision.
fn s8_commit(before: &ControllerState, op: OpId) -> Result<(), Violation> {
    let Some(o) = before.op_summary(op) else {
        return Ok(()); // S6 reports a decision for an op that does not exist.
    };
    if let Some(outcome) = o.outcome {
        return broken(
            Rule::S8,
            format!(
                "decided commit for {op} after it settled {}",
                words::outcome(outcome)
            ),
        );
    }
    if o.generation < before.generation {
        return broken(
            Rule::S8,
            format!(
                "decided commit for {op} of {} although the fleet moved to {}",
                o.generation, before.generation
            ),
        );
    }
    Ok(())
}

/// S9: an op is recorded rolled back only from `Restoring` and only with an
/// observation recorded after the restore was requested that proves the
/// baseline serving. "Restore requested" or "agent says restored" alone
/// leave it UNKNOWN.
pub fn s9_restore_needs_proof(before: &ControllerState, event: &Event) -> Result<(), Violation> {
    let Event::OpSettled {
        op,
        outcome: Outcome::RolledBack,
    } = event
    else {
        return Ok(());
    };
    let Some(o) = before.op(*op) else {
        return Ok(()); // S3 reports settling an op that does not exist.
    };
    if o.phase != OpPhase::Restoring {
        return broken(
            Rule::S9,
            format!(
                "{op} settled {} but no restore was requested (op is {})",
                words::outcome(Outcome::RolledBack),
                words::phase(o.phase)
            ),
        );
    }
    let proven = o.baseline.is_some_and(|b| {
        o.evidence
            .iter()
            .any(|e| e.after_restore && e.observation.proves_serving(b))
    });
    if !proven {
        let last = o
            .evidence
            .last()
            .map_or_else(|| "none".to_string(), |e| e.observation.to_string());
        return broken(
            Rule::S9,
            format!(
                "{op} settled {} without a probe after the restore showing the baseline {} serving (latest observation: {last})",
                words::outcome(Outcome::RolledBack),
                words::release(o.baseline)
            ),
        );
    }
    Ok(())
}

/// W1: `event` folds only into ops and rollouts that exist, and a new one
/// takes the next id. `apply` asserts this; checking it here first lets a
/// replay refuse a damaged or forged log by name instead of panicking.
pub fn w1_names_what_exists(before: &ControllerState, event: &Event) -> Result<(), Violation> {
    model::controller::referents_exist(before, event).map_err(|missing| {
        Violation::new(
            Rule::NamesWhatExists,
            format!("event {event} names {missing}"),
        )
    })?;
    match event {
        Event::RolloutFollowersAdded { rollout, followers } => {
            w1_followers_once(before, *rollout, followers)
        }
        _ => Ok(()),
    }
}

/// W1 for a plan recorded in several entries: each follower joins the plan
/// once (a node named twice would be granted twice, S2). The plan's nodes
/// are the ones `intended` maps to the rollout (it is the latest, so no
/// newer plan took them): O(chunk · log n), not O(plan).
fn w1_followers_once(
    before: &ControllerState,
    rollout: model::ids::RolloutId,
    followers: &[model::ids::NodeId],
) -> Result<(), Violation> {
    let mut chunk = std::collections::BTreeSet::new();
    for node in followers {
        if before.intended.get(node) == Some(&rollout) || !chunk.insert(*node) {
            return broken(
                Rule::NamesWhatExists,
                format!("rollout {rollout}'s plan names {node} twice"),
            );
        }
    }
    Ok(())
}

/// All transition rules, in the order S1, S3, S4, S5, S6, S8, S9, then the
/// rules on inputs that may come at any moment
/// ([`crate::check_input_event`]: approvals, pause events, late deadlines),
/// Q1, R1 and W1; the first violation. S3 comes before S9 on purpose: settling
/// with no evidence at all is S3, settling a rollback on evidence that does
/// not prove it is S9. W1 comes last so an event the other rules already
/// name keeps their words; it must come before `apply`, which asserts it.
pub fn check_event(before: &ControllerState, event: &Event) -> Result<(), Violation> {
    s1_grant_within_slots(before, event)?;
    s3_evidence_releases_slot(before, event)?;
    s4_grant_order(before, event)?;
    s5_pause_stops_grants(before, event)?;
    s6_stable_decisions(before, event)?;
    s8_late_report_changes_nothing(before, event)?;
    s9_restore_needs_proof(before, event)?;
    crate::input_rules::check_input_event(before, event)?;
    crate::q1_quarantine_silences(before, event)?;
    crate::r1_roster_holds(before, event)?;
    b1_no_grant_over_budget(before, event)?;
    crate::a1_grant_has_a_tree(before, event)?;
    crate::config_rules::c1_deploys_recorded_config(before, event)?;
    w1_names_what_exists(before, event)
}

/// B1: no follower is granted while its rollout is over its failure budget
/// (more failed ops than `max_failed`, or `max_unknown` ops UNKNOWN at
/// once). Written apart from `Rollout::over_budget`: it recounts.
pub fn b1_no_grant_over_budget(before: &ControllerState, event: &Event) -> Result<(), Violation> {
    let Event::OpGranted {
        op,
        rollout,
        is_canary: false,
        ..
    } = event
    else {
        return Ok(());
    };
    let Some(r) = before.rollout(*rollout) else {
        return Ok(());
    };
    if let Some(max) = r.policy.max_failed {
        if r.failed > max {
            return broken(
                Rule::FailureBudget,
                format!(
                    "follower {op} granted in rollout {} with {} failed ops over a budget of {max}",
                    r.id, r.failed
                ),
            );
        }
    }
    if let Some(max) = r.policy.max_unknown {
        if r.unknown >= max {
            return broken(
                Rule::FailureBudget,
                format!(
                    "follower {op} granted in rollout {} with {} ops UNKNOWN, at its budget of {max}",
                    r.id, r.unknown
                ),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;
    use model::controller::{Input, UnknownReason};
    use model::{Generation, NodeId, OpId, Plan, ReportKind, RolloutId};

    fn settle(op: u32, outcome: Outcome) -> Event {
        Event::OpSettled {
            op: OpId(op),
            outcome,
        }
    }

    /// Every event of a world's log passes `check` against the state
    /// before it.
    fn every_event_passes(w: &World, check: fn(&ControllerState, &Event) -> Result<(), Violation>) {
        let mut state = ControllerState::default();
        for e in &w.log {
            holds(check(&state, e));
            model::controller::apply(&mut state, e);
        }
    }

    /// A world whose log exercises grants, decisions, replays, reports,
    /// probes, verification, rollback, resolution and supersede.
    fn busy_world() -> World {
        let mut w = World::canary_verified(2, true);
        w.input(Input::Approve { rollout: R0 });
        w.ask_commit(1);
        w.ask_commit(1); // replayed
        w.report(1, ReportKind::Switched, wrong(V2)); // op1 restoring
        w.report(1, ReportKind::Restored, pass(V1)); // op1 rolled back
        w.switch(2, unreachable()); // op2 restoring
        w.resolve(2, pass(V1), Resolution::ConfirmBaseline);
        w.report(2, ReportKind::Restored, pass(V1)); // late
        w.start(plan(1, false)); // r1 supersedes r0
        w.switch(3, pass(V2));
        let has = |f: fn(&Event) -> bool| w.log.iter().any(f);
        assert!(has(|e| matches!(e, Event::CommitReplayed { .. })));
        assert!(has(|e| matches!(
            e,
            Event::OpSettled {
                outcome: Outcome::RolledBack,
                ..
            }
        )));
        assert!(has(|e| matches!(
            e,
            Event::OpSettled {
                outcome: Outcome::Resolved(_),
                ..
            }
        )));
        assert!(has(|e| matches!(e, Event::RolloutSuperseded { .. })));
        assert!(has(|e| matches!(e, Event::LateReportIgnored { .. })));
        w
    }

    #[test]
    fn s1_grant_within_slots_passes_on_real_grants() {
        every_event_passes(&busy_world(), s1_grant_within_slots);
    }

    #[test]
    fn s1_grant_beyond_slots_is_rejected() {
        let mut w2 = World::new();
        w2.start(plan(1, false));
        // The canary holds the only slot.
        let v = rejected(
            s1_grant_within_slots(&w2.state, &w2.grant_event(R0, B)),
            Rule::S1,
        );
        assert_eq!(
            v.detail,
            "op1 granted in rollout r0 while 1 of 1 slots are occupied"
        );
        // An UNKNOWN canary holds it just the same.
        w2.input(Input::Timeout { op: OpId(0) });
        rejected(
            s1_grant_within_slots(&w2.state, &w2.grant_event(R0, B)),
            Rule::S1,
        );
    }

    #[test]
    fn s3_evidence_releases_slot_passes_on_real_settles() {
        every_event_passes(&busy_world(), s3_evidence_releases_slot);
    }

    #[test]
    fn s3_settle_without_evidence_is_rejected() {
        let mut w = World::new();
        w.start(plan(1, false));
        w.input(Input::Timeout { op: OpId(0) });
        // "Release on timeout": silence is not evidence.
        let v = rejected(
            s3_evidence_releases_slot(&w.state, &settle(0, Outcome::NotApplied)),
            Rule::S3,
        );
        assert_eq!(
            v.detail,
            "op0 settled not-applied but none of its 0 recorded observations shows the baseline v1 serving"
        );
        rejected(
            s3_evidence_releases_slot(&w.state, &settle(0, Outcome::Verified)),
            Rule::S3,
        );
        rejected(
            s3_evidence_releases_slot(&w.state, &settle(0, Outcome::RolledBack)),
            Rule::S3,
        );
    }

    #[test]
    fn s3_verified_without_a_passing_probe_of_the_release_is_rejected() {
        let mut w = World::new();
        w.start(plan(1, false));
        w.ask_commit(0);
        // Healthy process, wrong identity: not evidence of v2.
        w.report(0, ReportKind::Switched, pass(V3));
        let v = rejected(
            s3_evidence_releases_slot(&w.state, &settle(0, Outcome::Verified)),
            Rule::S3,
        );
        assert!(v.detail.contains("shows v2 serving"), "{v}");
    }

    #[test]
    fn s3_not_applied_after_a_commit_is_rejected() {
        let mut w = World::new();
        w.start(plan(1, false));
        w.ask_commit(0);
        // The route still answers v1 (the switch may not have happened
        // yet): with a commit out, that does not show the op never applied.
        w.input(Input::RouteProbed {
            node: A,
            observation: pass(V1),
        });
        let v = rejected(
            s3_evidence_releases_slot(&w.state, &settle(0, Outcome::NotApplied)),
            Rule::S3,
        );
        assert!(v.detail.contains("was told to commit"), "{v}");
    }

    #[test]
    fn s3_settle_without_baseline_is_rejected() {
        let mut w = World::new();
        w.start(plan(1, false));
        w.op_mut(0).baseline = None;
        w.report(0, ReportKind::NotApplied, pass(V1));
        rejected(
            s3_evidence_releases_slot(&w.state, &settle(0, Outcome::NotApplied)),
            Rule::S3,
        );
        rejected(
            s3_evidence_releases_slot(&w.state, &settle(0, Outcome::RolledBack)),
            Rule::S3,
        );
    }

    #[test]
    fn s3_resolve_without_operator_observation_is_rejected() {
        let mut w = World::canary_wrong();
        // The agent's evidence is there, but no operator observation.
        w.input(Input::RouteProbed {
            node: A,
            observation: wrong(V2),
        });
        let v = rejected(
            s3_evidence_releases_slot(&w.state, &settle(0, Outcome::Resolved(Resolution::Abandon))),
            Rule::S3,
        );
        assert_eq!(
            v.detail,
            "op0 settled resolved (abandon) without an operator observation recorded with it"
        );
    }

    #[test]
    fn s3_resolve_contradicting_its_observation_is_rejected() {
        let mut w = World::canary_wrong();
        w.event(Event::OperatorObserved {
            op: OpId(0),
            observation: wrong(V2),
        });
        let v = rejected(
            s3_evidence_releases_slot(
                &w.state,
                &settle(0, Outcome::Resolved(Resolution::ConfirmNew)),
            ),
            Rule::S3,
        );
        assert!(v.detail.contains("does not show v2 serving"), "{v}");
        rejected(
            s3_evidence_releases_slot(
                &w.state,
                &settle(0, Outcome::Resolved(Resolution::ConfirmBaseline)),
            ),
            Rule::S3,
        );
        holds(s3_evidence_releases_slot(
            &w.state,
            &settle(0, Outcome::Resolved(Resolution::Abandon)),
        ));
    }

    #[test]
    fn s3_settle_twice_or_of_no_op_is_rejected() {
        let w = World::canary_verified(1, false);
        let v = rejected(
            s3_evidence_releases_slot(&w.state, &settle(0, Outcome::Verified)),
            Rule::S3,
        );
        assert!(v.detail.contains("already settled verified"), "{v}");
        let v = rejected(
            s3_evidence_releases_slot(&w.state, &settle(9, Outcome::Verified)),
            Rule::S3,
        );
        assert_eq!(v.detail, "op9 settled verified but no such op was granted");
    }

    #[test]
    fn s4_grant_order_passes_on_real_grants() {
        every_event_passes(&busy_world(), s4_grant_order);
    }

    #[test]
    fn s4_follower_granted_before_canary_passed_is_rejected() {
        let mut w = World::new();
        w.start(plan(2, false));
        let v = rejected(s4_grant_order(&w.state, &w.grant_event(R0, B)), Rule::S4);
        assert_eq!(
            v.detail,
            "follower op1 (node-b) granted in rollout r0 while canary node-a op op0 is granted"
        );
        // A canary that failed and rolled back has not passed either.
        let mut w = World::canary_wrong();
        w.report(0, ReportKind::Restored, pass(V1));
        rejected(s4_grant_order(&w.state, &w.grant_event(R0, B)), Rule::S4);
    }

    #[test]
    fn s4_follower_granted_before_approval_is_rejected() {
        let mut w = World::canary_verified(1, true);
        let v = rejected(s4_grant_order(&w.state, &w.grant_event(R0, B)), Rule::S4);
        assert!(v.detail.contains("before an operator approved"), "{v}");
        w.input(Input::Approve { rollout: R0 });
        // Approved: the real grant of op1 happened; node-c's is next in
        // order and would pass S4 (S1 is another matter).
        holds(s4_grant_order(&w.state, &w.grant_event(R0, C)));
    }

    #[test]
    fn s4_grant_with_a_wrong_canary_flag_is_rejected() {
        let mut w = World::new();
        w.start(plan(2, false));
        let Event::OpGranted {
            op,
            rollout,
            node,
            release,
            generation,
            baseline,
            ..
        } = w.grant_event(R0, B)
        else {
            unreachable!()
        };
        let disguised = Event::OpGranted {
            op,
            rollout,
            node,
            release,
            generation,
            baseline,
            is_canary: true,
        };
        let v = rejected(s4_grant_order(&w.state, &disguised), Rule::S4);
        assert_eq!(
            v.detail,
            "op1 on node-b is marked canary but the canary of rollout r0 is node-a"
        );
    }

    #[test]
    fn s5_pause_stops_grants_passes_on_real_grants() {
        let mut w = World::canary_verified(1, false);
        w.input(Input::Pause { rollout: R0 });
        w.switch(1, pass(V2)); // settles while paused; no grant
        assert_eq!(w.state.ops.len(), 2);
        w.input(Input::Resume { rollout: R0 });
        assert_eq!(w.state.ops.len(), 3, "resume grants again");
        every_event_passes(&w, s5_pause_stops_grants);
        every_event_passes(&busy_world(), s5_pause_stops_grants);
    }

    #[test]
    fn s5_grant_while_paused_is_rejected() {
        let mut w = World::canary_verified(2, false);
        w.input(Input::Pause { rollout: R0 });
        w.switch(1, pass(V2));
        let v = rejected(
            s5_pause_stops_grants(&w.state, &w.grant_event(R0, C)),
            Rule::S5,
        );
        assert_eq!(
            v.detail,
            "op3 granted in rollout r0 while it is paused (operator)"
        );
    }

    #[test]
    fn s5_grant_in_a_rollout_that_is_not_active_is_rejected() {
        let mut w = World::canary_verified(1, false);
        w.start(plan(1, false));
        let v = rejected(
            s5_pause_stops_grants(&w.state, &w.grant_event(R0, C)),
            Rule::S5,
        );
        assert!(v.detail.ends_with("which is superseded"), "{v}");
        let ghost = Event::OpGranted {
            op: w.state.next_op_id(),
            rollout: RolloutId(7),
            node: C,
            release: V2,
            generation: Generation(2),
            baseline: Some(V1),
            is_canary: true,
        };
        let v = rejected(s5_pause_stops_grants(&w.state, &ghost), Rule::S5);
        assert!(v.detail.ends_with("which was never started"), "{v}");
    }

    #[test]
    fn s6_stable_decisions_passes_on_real_decisions_and_replays() {
        every_event_passes(&busy_world(), s6_stable_decisions);
    }

    #[test]
    fn s6_second_decision_is_rejected() {
        let mut w = World::new();
        w.start(plan(1, false));
        w.ask_commit(0);
        let redecide = Event::CommitDecided {
            op: OpId(0),
            decision: Decision::Abort,
        };
        let v = rejected(s6_stable_decisions(&w.state, &redecide), Rule::S6);
        assert_eq!(
            v.detail,
            "decided abort for op0 although commit is already stored"
        );
        let same_again = Event::CommitDecided {
            op: OpId(0),
            decision: Decision::Commit,
        };
        rejected(s6_stable_decisions(&w.state, &same_again), Rule::S6);
    }

    #[test]
    fn s6_replay_of_another_decision_is_rejected() {
        let mut w = World::new();
        w.start(plan(1, false));
        let replay = Event::CommitReplayed {
            op: OpId(0),
            decision: Decision::Commit,
        };
        let v = rejected(s6_stable_decisions(&w.state, &replay), Rule::S6);
        assert_eq!(
            v.detail,
            "replayed commit for op0 but the stored decision is none"
        );
        w.ask_commit(0);
        holds(s6_stable_decisions(&w.state, &replay));
        let flipped = Event::CommitReplayed {
            op: OpId(0),
            decision: Decision::Abort,
        };
        rejected(s6_stable_decisions(&w.state, &flipped), Rule::S6);
    }

    #[test]
    fn s8_a_message_about_another_nodes_op_is_foreign_not_late() {
        let w = busy_world();
        let op = OpId(0);
        let owner = w.state.op_summary(op).expect("op0 granted").node;
        let other = NodeId(owner.0 + 1);
        // The real core tells the two apart.
        let events = model::controller::step(
            &w.state,
            &Input::FromAgent {
                node: other,
                msg: model::ToController::CommitRequest { op },
            },
        )
        .expect("accepted");
        assert_eq!(
            events,
            vec![Event::ForeignMessageIgnored {
                node: other,
                op,
                owner: Some(owner),
            }]
        );
        every_event_passes(&w, s8_late_report_changes_nothing);
        holds(s8_late_report_changes_nothing(&w.state, &events[0]));
        // Logged as the sender's own late report: broken.
        let v = rejected(
            s8_late_report_changes_nothing(&w.state, &Event::LateReportIgnored { node: other, op }),
            Rule::S8,
        );
        assert!(v.detail.contains("late report"), "{v}");
        // Foreign with the wrong owner, or foreign although it is its own: broken.
        for (node, owner_claimed) in [(other, Some(other)), (owner, Some(owner)), (other, None)] {
            rejected(
                s8_late_report_changes_nothing(
                    &w.state,
                    &Event::ForeignMessageIgnored {
                        node,
                        op,
                        owner: owner_claimed,
                    },
                ),
                Rule::S8,
            );
        }
    }

    #[test]
    fn s8_late_report_changes_nothing_passes_on_real_events() {
        let w = busy_world();
        assert!(w
            .log
            .iter()
            .any(|e| matches!(e, Event::LateReportIgnored { .. })));
        every_event_passes(&w, s8_late_report_changes_nothing);
    }

    #[test]
    fn s8_report_recorded_for_a_settled_op_is_rejected() {
        let w = World::canary_verified(1, false);
        let late = Event::ReportRecorded {
            op: OpId(0),
            kind: ReportKind::Switched,
            observation: wrong(V2),
        };
        let v = rejected(s8_late_report_changes_nothing(&w.state, &late), Rule::S8);
        assert_eq!(
            v.detail,
            "agent report recorded for op0 after it settled verified; a late report must be ignored"
        );
        let probe = Event::ProbeRecorded {
            op: OpId(0),
            observation: wrong(V2),
        };
        rejected(s8_late_report_changes_nothing(&w.state, &probe), Rule::S8);
        let nowhere = Event::ProbeRecorded {
            op: OpId(5),
            observation: wrong(V2),
        };
        rejected(s8_late_report_changes_nothing(&w.state, &nowhere), Rule::S8);
    }

    #[test]
    fn s8_grant_under_an_old_generation_or_reused_id_is_rejected() {
        let mut w = World::canary_verified(1, false);
        let Event::OpGranted {
            rollout,
            node,
            release,
            baseline,
            is_canary,
            ..
        } = w.grant_event(R0, C)
        else {
            unreachable!()
        };
        w.switch(1, pass(V2)); // r0 moves on to node-c (op2)
        let old = Event::OpGranted {
            op: w.state.next_op_id(),
            rollout,
            node,
            release,
            generation: Generation(0),
            baseline,
            is_canary,
        };
        let v = rejected(s8_late_report_changes_nothing(&w.state, &old), Rule::S8);
        assert_eq!(
            v.detail,
            "op3 granted under gen 0 but rollout r0 runs under gen 1"
        );
        let reused = Event::OpGranted {
            op: OpId(1),
            rollout,
            node,
            release,
            generation: Generation(1),
            baseline,
            is_canary,
        };
        let v = rejected(s8_late_report_changes_nothing(&w.state, &reused), Rule::S8);
        assert_eq!(
            v.detail,
            "grant reuses or skips op ids: op1 granted where op3 is next"
        );
    }

    #[test]
    fn s8_commit_for_a_superseded_op_is_rejected() {
        let mut w = World::new();
        w.start(plan(1, false));
        w.start(Plan {
            canary: B,
            followers: vec![],
            ..plan(1, false)
        });
        // op0 belongs to gen 1; the fleet is at gen 2. The real answer is
        // abort, decided when the rollout was superseded and replayed to
        // the commit request.
        assert_eq!(w.op(0).decision, Some(Decision::Abort));
        let steps = w.ask_commit(0);
        assert_eq!(
            steps[0],
            Event::CommitReplayed {
                op: OpId(0),
                decision: Decision::Abort
            }
        );
        let mut w = World::new();
        w.start(plan(1, false));
        w.start(Plan {
            canary: B,
            followers: vec![],
            ..plan(1, false)
        });
        let commit = Event::CommitDecided {
            op: OpId(0),
            decision: Decision::Commit,
        };
        let v = rejected(s8_late_report_changes_nothing(&w.state, &commit), Rule::S8);
        assert_eq!(
            v.detail,
            "decided commit for op0 of gen 1 although the fleet moved to gen 2"
        );
    }

    #[test]
    fn s9_restore_needs_proof_passes_on_real_rollbacks() {
        let mut w = World::canary_wrong();
        w.report(0, ReportKind::Restored, pass(V1));
        assert_eq!(w.op(0).phase, OpPhase::Settled(Outcome::RolledBack));
        every_event_passes(&w, s9_restore_needs_proof);
        every_event_passes(&busy_world(), s9_restore_needs_proof);
    }

    #[test]
    fn s9_rolled_back_without_restore_request_is_rejected() {
        let mut w = World::new();
        w.start(plan(1, false));
        w.ask_commit(0);
        w.input(Input::RouteProbed {
            node: A,
            observation: pass(V1),
        });
        let v = rejected(
            s9_restore_needs_proof(&w.state, &settle(0, Outcome::RolledBack)),
            Rule::S9,
        );
        assert_eq!(
            v.detail,
            "op0 settled rolled-back but no restore was requested (op is decided)"
        );
    }

    #[test]
    fn s9_rolled_back_on_a_failed_restore_probe_is_rejected() {
        let mut w = World::canary_wrong();
        // "Agent says restored" with a probe that saw nothing.
        let events = w.report(0, ReportKind::Restored, unreachable());
        assert!(events.contains(&Event::OpUnknown {
            op: OpId(0),
            reason: UnknownReason::RestoreUnproven
        }));
        let v = rejected(
            s9_restore_needs_proof(&w.state, &settle(0, Outcome::RolledBack)),
            Rule::S9,
        );
        assert!(
            v.detail.contains("without a probe after the restore"),
            "{v}"
        );
        // Restore requested, settled at once: also S9, not S3, since the
        // failing probe is recorded evidence.
        let w = World::canary_wrong();
        rejected(
            check_event(&w.state, &settle(0, Outcome::RolledBack)),
            Rule::S9,
        );
    }

    #[test]
    fn s9_proof_from_before_the_restore_is_rejected() {
        let mut w = World::new();
        w.start(plan(1, false));
        w.ask_commit(0);
        // v1 answered before the switch, then v2 answered wrongly.
        w.input(Input::RouteProbed {
            node: A,
            observation: pass(V1),
        });
        w.report(0, ReportKind::Switched, wrong(V2));
        assert_eq!(w.op(0).phase, OpPhase::Restoring);
        holds(s3_evidence_releases_slot(
            &w.state,
            &settle(0, Outcome::RolledBack),
        ));
        rejected(
            s9_restore_needs_proof(&w.state, &settle(0, Outcome::RolledBack)),
            Rule::S9,
        );
    }

    #[test]
    fn check_event_passes_on_every_real_event() {
        every_event_passes(&busy_world(), check_event);
    }

    #[test]
    fn check_event_reports_no_evidence_at_all_as_s3_before_s9() {
        let mut w = World::new();
        w.start(plan(1, false));
        w.ask_commit(0);
        // A restore requested with nothing recorded (no real step does it).
        w.event(Event::RestoreRequested { op: OpId(0) });
        let v = rejected(
            check_event(&w.state, &settle(0, Outcome::RolledBack)),
            Rule::S3,
        );
        assert_eq!(
            v.detail,
            "op0 settled rolled-back with no recorded evidence at all"
        );
        // With a failing restore probe recorded it is S9.
        w.event(Event::ReportRecorded {
            op: OpId(0),
            kind: ReportKind::Restored,
            observation: unreachable(),
        });
        rejected(
            check_event(&w.state, &settle(0, Outcome::RolledBack)),
            Rule::S9,
        );
        w.event(Event::ProbeRecorded {
            op: OpId(0),
            observation: pass(V1),
        });
        holds(check_event(&w.state, &settle(0, Outcome::RolledBack)));
    }

    #[test]
    fn check_event_runs_rules_in_order() {
        let mut w = World::new();
        w.start(plan(1, false));
        w.input(Input::Pause { rollout: R0 });
        // Beyond slots (S1), before the canary (S4), while paused (S5): S1.
        rejected(check_event(&w.state, &w.grant_event(R0, B)), Rule::S1);
        std::sync::Arc::make_mut(&mut std::sync::Arc::make_mut(&mut w.state.rollouts[0]).plan)
            .slots_max = 2;
        rejected(check_event(&w.state, &w.grant_event(R0, B)), Rule::S4);
        rejected(check_event(&w.state, &w.grant_event(R0, A)), Rule::S5);
    }

    #[test]
    fn w1_passes_on_real_events() {
        every_event_passes(&busy_world(), w1_names_what_exists);
    }

    /// Every kind of event that folds into an op or a rollout is refused
    /// when that op or rollout does not exist, and so is a new op or
    /// rollout whose id is not the next; `check_event` reports it.
    #[test]
    fn w1_refuses_events_naming_what_does_not_exist() {
        let w = World::canary_verified(1, false);
        let (op, r) = (OpId(9), RolloutId(7));
        let mut grant = w.grant_event(R0, B);
        if let Event::OpGranted { op: id, .. } = &mut grant {
            *id = OpId(5);
        }
        let cases = [
            (
                settle(9, Outcome::Verified),
                "op op9, which was never granted",
            ),
            (
                Event::OpUnknown {
                    op,
                    reason: UnknownReason::Silence,
                },
                "op op9",
            ),
            (Event::RestoreRequested { op }, "op op9"),
            (
                Event::CommitDecided {
                    op,
                    decision: model::Decision::Commit,
                },
                "op op9",
            ),
            (
                Event::RolloutApproved { rollout: r },
                "rollout r7, which was never started",
            ),
            (Event::RolloutCompleted { rollout: r }, "rollout r7"),
            (w.grant_event(R0, B), ""),
            (grant, "op op5"),
        ];
        for (event, words) in cases {
            let result = w1_names_what_exists(&w.state, &event);
            if words.is_empty() {
                holds(result);
                continue;
            }
            let v = rejected(result, Rule::NamesWhatExists);
            assert!(v.detail.contains(words), "{v}");
        }
        let v = rejected(
            check_event(
                &w.state,
                &Event::OpClaimed {
                    op,
                    owner: "ops".into(),
                    review_by: "soon".into(),
                },
            ),
            Rule::NamesWhatExists,
        );
        assert!(v.detail.contains("op op9"), "{v}");
    }
}
