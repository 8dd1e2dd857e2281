//! State rules: they hold in every reachable controller state.

use crate::{broken, words, Rule, Violation};
use model::controller::{
    ControllerState, Op, OpPhase, Outcome, Resolution, Rollout, ROLLOUTS_REMEMBERED,
};
use model::{NodeId, OpId};

/// S1: per rollout, the ops holding a slot (granted and not settled, UNKNOWN
/// included) never exceed the plan's `slots_max`.
pub fn s1_slot_bound(state: &ControllerState) -> Result<(), Violation> {
    for r in &state.rollouts {
        let occupied = state.slots_occupied(r.id);
        if occupied > r.plan.slots_max as usize {
            return broken(
                Rule::S1,
                format!(
                    "rollout {} has {occupied} unsettled ops with slots_max {}",
                    r.id, r.plan.slots_max
                ),
            );
        }
    }
    Ok(())
}

/// S2: a node has at most one unsettled op, and the node record's `live_op`
/// names exactly that op (or nothing when the node has none). The controller
/// routes reports and probes by `live_op`, so a record that disagrees with
/// the ops is as bad as a second op.
pub fn s2_one_live_op_per_node(state: &ControllerState) -> Result<(), Violation> {
    // (node, op) of every unsettled op, by node then op: one vector, no map
    // (the model checker runs this after every batch it explores).
    let mut unsettled: Vec<(NodeId, OpId)> = state
        .ops
        .values()
        .filter(|o| o.occupies_slot())
        .map(|o| (o.node, o.id))
        .collect();
    unsettled.sort_unstable();
    for group in unsettled.chunk_by(|a, b| a.0 == b.0) {
        if group.len() > 1 {
            let names: Vec<String> = group.iter().map(|(_, o)| o.to_string()).collect();
            return broken(
                Rule::S2,
                format!(
                    "{} has {} unsettled ops: {}",
                    group[0].0,
                    group.len(),
                    names.join(", ")
                ),
            );
        }
    }
    // Each node once (no node has two now), in node order: those with an
    // unsettled op or a record, merged.
    let mut ops = unsettled.iter().peekable();
    let mut records = state.nodes.iter().peekable();
    loop {
        let (node, actual, recorded) = match (ops.peek(), records.peek()) {
            (None, None) => return Ok(()),
            (Some(&&(n, o)), Some((rn, _))) if n < **rn => {
                ops.next();
                (n, Some(o), None)
            }
            (Some(&&(n, o)), Some((rn, rec))) if n == **rn => {
                let live = rec.live_op;
                ops.next();
                records.next();
                (n, Some(o), live)
            }
            (Some(&&(n, o)), None) => {
                ops.next();
                (n, Some(o), None)
            }
            (_, Some((rn, rec))) => {
                let (n, live) = (**rn, rec.live_op);
                records.next();
                (n, None, live)
            }
        };
        let detail = match (recorded, actual) {
            (None, Some(a)) => format!("{node} records no live op but {a} is unsettled on it"),
            (Some(r), None) => format!("{node} records live op {r} but has no unsettled op"),
            (Some(r), Some(a)) if r != a => {
                format!("{node} records live op {r} but its unsettled op is {a}")
            }
            _ => continue,
        };
        return broken(Rule::S2, detail);
    }
}

/// The canary op of a rollout: the op it granted to the plan's canary node.
fn canary_op<'s>(state: &'s ControllerState, r: &Rollout) -> Option<&'s Op> {
    state.rollout_op_for(r.id, r.plan.canary)
}

/// The ops of a rollout that exist, in grant order.
fn ops_of<'s>(state: &'s ControllerState, r: &'s Rollout) -> impl Iterator<Item = &'s Op> + 's {
    r.ops.iter().filter_map(|id| state.op(*id))
}

/// S4: a rollout has follower ops only once its canary op passed (verified,
/// or confirmed by an operator's observation of the new release) and, where
/// the plan has an approval gate, an operator approved. Followers are told
/// apart by the plan, not by the op's `is_canary` flag, and the flag must
/// agree with the plan: a follower marked canary would dodge the gate.
pub fn s4_canary_first(state: &ControllerState) -> Result<(), Violation> {
    for r in &state.rollouts {
        for op in ops_of(state, r) {
            s4_op(state, op)?;
        }
    }
    Ok(())
}

/// S4 for one op: its canary flag agrees with the plan, and a follower
/// exists only after its canary passed and, with a gate, an approval.
pub(crate) fn s4_op(state: &ControllerState, op: &Op) -> Result<(), Violation> {
    let Some(r) = state.rollout(op.rollout) else {
        return Ok(());
    };
    let on_canary = op.node == r.plan.canary;
    if op.is_canary != on_canary {
        return broken(Rule::S4, flag_mismatch(op.id, op.node, op.is_canary, r));
    }
    // A forgotten rollout's canary op may be forgotten: its follower was
    // judged against it when granted, and nothing in the rollout changes.
    if on_canary || r.forgotten {
        return Ok(());
    }
    // The canary op may be archived (its rollout finished, its node moved
    // on): its summary keeps the outcome.
    let canary = r.op_for(r.plan.canary).and_then(|c| state.op_summary(c));
    let passed = canary.is_some_and(|c| {
        matches!(
            c.outcome,
            Some(Outcome::Verified | Outcome::Resolved(Resolution::ConfirmNew))
        )
    });
    if !passed {
        let canary_state = canary.map_or_else(
            || "has no op".to_string(),
            |c| match state.op(c.id) {
                Some(hot) => format!("op {} is {}", c.id, words::phase(hot.phase)),
                None => format!("op {} is archived unpassed", c.id),
            },
        );
        return broken(
            Rule::S4,
            format!(
                "follower {} ({}) exists in rollout {} but canary {} {canary_state}",
                op.id, op.node, r.id, r.plan.canary
            ),
        );
    }
    if r.plan.approval_after_canary && !r.approved {
        return broken(
            Rule::S4,
            format!(
                "follower {} ({}) exists in rollout {} before an operator approved after the canary",
                op.id, op.node, r.id
            ),
        );
    }
    Ok(())
}

/// B1 in a state: an active rollout over its failure budget is paused.
pub(crate) fn b1_over_budget_is_paused(r: &model::controller::Rollout) -> Result<(), Violation> {
    if r.status == model::controller::RolloutStatus::Active && r.over_budget() && r.paused.is_none()
    {
        return broken(
            Rule::FailureBudget,
            format!(
                "rollout {} is over its failure budget ({} failed, {} UNKNOWN) but not paused",
                r.id, r.failed, r.unknown
            ),
        );
    }
    Ok(())
}

pub(crate) fn flag_mismatch(
    op: OpId,
    node: NodeId,
    is_canary: bool,
    r: &model::controller::Rollout,
) -> String {
    if is_canary {
        format!(
            "{op} on {node} is marked canary but the canary of rollout {} is {}",
            r.id, r.plan.canary
        )
    } else {
        format!(
            "{op} on {node} is marked follower but {node} is the canary of rollout {}",
            r.id
        )
    }
}

/// S11: once a probe of a rollout's canary op saw a wrong answer or no
/// answer after the switch, the canary is never counted verified, the
/// baseline was asked back (the op left `Granted`/`Decided`), and no follower
/// exists unless an operator confirmed the new release with an observation.
///
/// The rollout being paused is not checked: an operator may resume it, and
/// with the canary not passed no follower can follow anyway.
pub fn s11_wrong_answer_stops(state: &ControllerState) -> Result<(), Violation> {
    s11_excusing(state, None)
}

/// [`s11_wrong_answer_stops`], except that the op `restore_owed` may still
/// be `Decided`: [`crate::check_history`] uses it for the one event between
/// recording a failed probe and the `RestoreRequested` that follows it in
/// the same step batch.
pub(crate) fn s11_excusing(
    state: &ControllerState,
    restore_owed: Option<OpId>,
) -> Result<(), Violation> {
    for r in &state.rollouts {
        s11_rollout(state, r, restore_owed)?;
    }
    Ok(())
}

/// S11 for one rollout (see [`s11_excusing`]).
pub(crate) fn s11_rollout(
    state: &ControllerState,
    r: &Rollout,
    restore_owed: Option<OpId>,
) -> Result<(), Violation> {
    let Some(canary) = canary_op(state, r).filter(|c| c.failed_probe_seen) else {
        return Ok(());
    };
    let id = canary.id;
    match canary.phase {
        OpPhase::Settled(Outcome::Verified) => {
            return broken(
                Rule::S11,
                format!(
                    "canary {id} of rollout {} is verified although a probe saw a wrong or no answer",
                    r.id
                ),
            )
        }
        OpPhase::Granted | OpPhase::Decided if restore_owed != Some(id) => {
            return broken(
                Rule::S11,
                format!(
                    "canary {id} of rollout {} saw a wrong or no answer but no restore of {} was requested (op is {})",
                    r.id,
                    words::release(canary.baseline),
                    words::phase(canary.phase)
                ),
            )
        }
        _ => {}
    }
    let confirmed_new = canary.phase == OpPhase::Settled(Outcome::Resolved(Resolution::ConfirmNew));
    // The plan's next follower is granted first, so a follower exists iff
    // the first one has an op (the index; `check_state` recounts it).
    let follower = r.plan.followers.first().and_then(|f| r.op_for(*f));
    if let Some(follower) = follower {
        if !confirmed_new {
            return broken(
                Rule::S11,
                format!(
                    "follower {follower} ({}) exists in rollout {} although canary {id} saw a wrong or no answer and no operator confirmed the new release",
                    r.plan.followers[0], r.id
                ),
            );
        }
    }
    Ok(())
}

/// L1: no unpaused rollout stays active once nothing more can happen in it:
/// its canary's op settled without passing (S4 lets no follower follow), or
/// every node of its plan has a settled op of it. Written apart from the
/// model's `progress`, which decides it. Not part of [`check_state`]: see
/// [`Rule::EndsWhenNothingLeft`].
pub fn l1_nothing_left_ends(state: &ControllerState) -> Result<(), Violation> {
    for r in state.rollouts.iter() {
        if r.status != model::controller::RolloutStatus::Active || r.paused.is_some() {
            continue;
        }
        let op_of = |node: NodeId| {
            r.ops
                .iter()
                .filter_map(|id| state.op(*id))
                .find(|o| o.node == node)
        };
        let settled = |o: &Op| matches!(o.phase, OpPhase::Settled(_));
        let canary = op_of(r.plan.canary);
        let canary_failed = canary.is_some_and(|o| settled(o) && !o.passed());
        let all_settled = r.plan.nodes().all(|n| op_of(n).is_some_and(settled));
        if canary_failed || all_settled {
            return broken(
                Rule::EndsWhenNothingLeft,
                format!(
                    "rollout {} is still active with nothing left to do ({})",
                    r.id,
                    if canary_failed {
                        "its canary's op settled without passing"
                    } else {
                        "every node of its plan has a settled op"
                    }
                ),
            );
        }
    }
    Ok(())
}

/// All state rules: S1, S2, S4, S11, in that order; the first violation.
/// Also recounts every index `apply` keeps (the checker runs this on every
/// state it explores, so an index that drifts from the ops is caught there;
/// the runtime relies on the indexes through [`crate::check_state_touched`]).
pub fn check_state(state: &ControllerState) -> Result<(), Violation> {
    indexes_agree(state)?;
    s1_slot_bound(state)?;
    s2_one_live_op_per_node(state)?;
    s4_canary_first(state)?;
    for r in &state.rollouts {
        b1_over_budget_is_paused(r)?;
    }
    s11_wrong_answer_stops(state)
}

/// The archived rollouts whose ops the state still remembers are the last
/// [`ROLLOUTS_REMEMBERED`] archived, each archived and not forgotten, and
/// every other archived rollout is forgotten: the state stays bounded by
/// the fleet and that count, and nothing is forgotten early.
fn remembered_agrees(state: &ControllerState) -> Result<(), Violation> {
    let remembered = state.remembered.len();
    let archived_not_forgotten = state
        .rollouts
        .iter()
        .filter(|r| r.archived && !r.forgotten)
        .count();
    let each_agrees = state.remembered.iter().all(|id| {
        state
            .rollout(*id)
            .is_some_and(|r| r.archived && !r.forgotten)
    });
    if remembered > ROLLOUTS_REMEMBERED || remembered != archived_not_forgotten || !each_agrees {
        return broken(
            Rule::NamesWhatExists,
            format!(
                "the state remembers {remembered} archived rollout(s) {:?}, but {archived_not_forgotten} are archived and not forgotten (at most {ROLLOUTS_REMEMBERED} are remembered)",
                state.remembered
            ),
        );
    }
    Ok(())
}

/// A forgotten rollout finished and was archived; the ops it still lists
/// are exactly its hot ones, each its node's latest, and its counts cover
/// at least them (the others were forgotten with their summaries).
fn forgotten_rollout_agrees(state: &ControllerState, r: &Rollout) -> Result<(), Violation> {
    let hot_and_latest = r.ops.iter().all(|id| {
        state.op(*id).is_some_and(|o| {
            o.rollout == r.id
                && r.op_for(o.node) == Some(*id)
                && state.nodes.get(&o.node).and_then(|n| n.last_op) == Some(*id)
        })
    });
    let counted = r.settled as usize >= r.ops.len() && r.op_by_node.len() == r.ops.len();
    if !(r.archived && r.finished() && hot_and_latest && counted) {
        return broken(
            Rule::NamesWhatExists,
            format!(
                "forgotten rollout {} (archived {}, finished {}) lists ops {:?}: each must be hot, its node's latest, and counted among {} settled",
                r.id,
                r.archived,
                r.finished(),
                r.ops,
                r.settled
            ),
        );
    }
    Ok(())
}

/// [`indexes_agree`] for one rollout that is not forgotten.
fn rollout_indexes_agree(state: &ControllerState, r: &Rollout) -> Result<(), Violation> {
    let ops: Vec<&Op> = ops_of(state, r).collect();
    let hot = ops.len();
    let archived = r.ops.len() - hot;
    let occupied = ops.iter().filter(|o| o.occupies_slot()).count();
    if occupied != r.occupied as usize {
        return broken(
            Rule::S1,
            format!(
                "rollout {} counts {} occupied slots but {occupied} of its ops hold one",
                r.id, r.occupied
            ),
        );
    }
    let settled = r.ops.len() - occupied;
    let not_passed = ops
        .iter()
        .filter(|o| !o.occupies_slot() && !o.passed())
        .count()
        + r.ops
            .iter()
            .filter_map(|id| state.archive.get(id))
            .filter(|a| {
                !matches!(
                    a.outcome,
                    Some(Outcome::Verified | Outcome::Resolved(Resolution::ConfirmNew))
                )
            })
            .count();
    if settled != r.settled as usize || not_passed != r.settled_not_passed as usize {
        return broken(
                Rule::EndsWhenNothingLeft,
                format!(
                    "rollout {} counts {} settled ({} not passed) but has {settled} ({not_passed}), {archived} archived",
                    r.id, r.settled, r.settled_not_passed
                ),
            );
    }
    let followers = ops.iter().filter(|o| o.node != r.plan.canary).count()
        + r.ops
            .iter()
            .filter_map(|id| state.archive.get(id))
            .filter(|a| a.node != r.plan.canary)
            .count();
    let by_node_agrees = r.op_by_node.len() == r.ops.len()
        && r.ops.iter().all(|id| {
            state
                .op_summary(*id)
                .is_some_and(|o| r.op_for(o.node) == Some(*id))
        });
    if followers != r.followers_granted as usize || !by_node_agrees {
        return broken(
                Rule::S4,
                format!(
                    "rollout {}'s indexes count {} followers granted and {} nodes with ops, but it granted {followers} followers and {} ops",
                    r.id,
                    r.followers_granted,
                    r.op_by_node.len(),
                    r.ops.len()
                ),
            );
    }
    Ok(())
}

/// The indexes `apply` keeps agree with the ops they summarise: per rollout
/// the occupied slots (S1), node → op and followers granted (S4), the
/// settled counts (L1); per node the live op (S2) and latest op; the active
/// rollout (S5) and the next op id.
pub fn indexes_agree(state: &ControllerState) -> Result<(), Violation> {
    remembered_agrees(state)?;
    for r in &state.rollouts {
        if r.forgotten {
            forgotten_rollout_agrees(state, r)?;
            continue;
        }
        rollout_indexes_agree(state, r)?;
    }
    let active = state
        .rollouts
        .iter()
        .rev()
        .find(|r| r.status == model::controller::RolloutStatus::Active)
        .map(|r| r.id);
    if active != state.active {
        return broken(
            Rule::S5,
            format!(
                "the active rollout is recorded as {:?} but is {active:?}",
                state.active
            ),
        );
    }
    let granted = state.ops.len() as u64 + state.archive.len() as u64 + state.forgotten_ops;
    if granted != u64::from(state.next_op.0) {
        return broken(
            Rule::NamesWhatExists,
            format!(
                "{granted} ops exist ({} hot, {} archived, {} forgotten) but the next op id is {}",
                state.ops.len(),
                state.archive.len(),
                state.forgotten_ops,
                state.next_op
            ),
        );
    }
    for (node, record) in state.nodes.iter() {
        let latest = state
            .ops
            .values()
            .filter(|o| o.node == *node)
            .map(|o| o.id)
            .max();
        if record.last_op.is_some() && record.last_op != latest {
            return broken(
                Rule::S2,
                format!(
                    "{node} records latest op {:?} but its latest hot op is {latest:?}",
                    record.last_op
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
    use model::controller::{Event, OpPhase, Outcome, Resolution};
    use model::ReportKind;

    #[test]
    fn s1_slot_bound_holds_while_slots_fill_and_free() {
        let mut w = World::canary_verified(2, false);
        // Both followers hold the two slots; neither settled.
        assert_eq!(w.state.slots_occupied(R0), 2);
        holds(s1_slot_bound(&w.state));
        w.switch(1, pass(V2));
        holds(s1_slot_bound(&w.state));
    }

    #[test]
    fn s1_more_unsettled_ops_than_slots_is_rejected() {
        let mut w = World::new();
        w.start(plan(1, false));
        // Force a follower next to the unsettled canary: 2 ops, 1 slot.
        let grant = w.grant_event(R0, B);
        w.event(grant);
        let v = rejected(s1_slot_bound(&w.state), Rule::S1);
        assert_eq!(v.detail, "rollout r0 has 2 unsettled ops with slots_max 1");
    }

    #[test]
    fn s1_unknown_op_still_counts_against_the_bound() {
        let mut w = World::new();
        w.start(plan(1, false));
        w.input(model::controller::Input::Timeout { op: OpId(0) });
        assert!(w.op(0).unknown.is_some());
        holds(s1_slot_bound(&w.state));
        let grant = w.grant_event(R0, B);
        w.event(grant);
        rejected(s1_slot_bound(&w.state), Rule::S1);
    }

    #[test]
    fn s2_one_live_op_per_node_holds_across_supersede() {
        let mut w = World::new();
        w.start(plan(1, false));
        // r1 wants node-a too, which still holds op0 of r0: no grant yet.
        w.start(plan(1, false));
        assert_eq!(w.state.ops.len(), 1);
        holds(s2_one_live_op_per_node(&w.state));
        w.switch(0, pass(V2));
        holds(s2_one_live_op_per_node(&w.state));
    }

    #[test]
    fn s2_two_unsettled_ops_on_a_node_are_rejected() {
        let mut w = World::new();
        w.start(plan(1, false));
        w.start(plan(1, false));
        let grant = w.grant_event(R1, A);
        w.event(grant);
        let v = rejected(s2_one_live_op_per_node(&w.state), Rule::S2);
        assert_eq!(v.detail, "node-a has 2 unsettled ops: op0, op1");
    }

    #[test]
    fn s2_live_op_record_that_disagrees_is_rejected() {
        let mut w = World::new();
        w.start(plan(1, false));
        let mut lost = w.state.clone();
        lost.nodes.get_mut(&A).unwrap().live_op = None;
        let v = rejected(s2_one_live_op_per_node(&lost), Rule::S2);
        assert_eq!(
            v.detail,
            "node-a records no live op but op0 is unsettled on it"
        );

        let mut stale = w.state.clone();
        stale.nodes.get_mut(&B).unwrap().live_op = Some(OpId(0));
        rejected(s2_one_live_op_per_node(&stale), Rule::S2);

        let mut other = w.state.clone();
        other.nodes.get_mut(&A).unwrap().live_op = Some(OpId(7));
        rejected(s2_one_live_op_per_node(&other), Rule::S2);
    }

    #[test]
    fn s4_canary_first_holds_through_a_gated_rollout() {
        let mut w = World::canary_verified(1, true);
        holds(s4_canary_first(&w.state));
        assert_eq!(w.state.ops.len(), 1, "gate holds followers back");
        w.input(model::controller::Input::Approve { rollout: R0 });
        assert_eq!(w.state.ops.len(), 2);
        holds(s4_canary_first(&w.state));
    }

    #[test]
    fn s4_follower_before_canary_passed_is_rejected() {
        let mut w = World::new();
        w.start(plan(2, false));
        let grant = w.grant_event(R0, B);
        w.event(grant);
        let v = rejected(s4_canary_first(&w.state), Rule::S4);
        assert_eq!(
            v.detail,
            "follower op1 (node-b) exists in rollout r0 but canary node-a op op0 is granted"
        );
    }

    #[test]
    fn s4_follower_without_approval_is_rejected() {
        let mut w = World::canary_verified(1, true);
        let grant = w.grant_event(R0, B);
        w.event(grant);
        let v = rejected(s4_canary_first(&w.state), Rule::S4);
        assert!(v.detail.contains("before an operator approved"), "{v}");
    }

    #[test]
    fn s4_follower_marked_canary_is_rejected() {
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
        w.event(Event::OpGranted {
            op,
            rollout,
            node,
            release,
            generation,
            baseline,
            is_canary: true,
        });
        let v = rejected(s4_canary_first(&w.state), Rule::S4);
        assert!(v.detail.contains("marked canary"), "{v}");
    }

    #[test]
    fn s11_wrong_answer_stops_holds_after_restore_and_rollback() {
        let mut w = World::canary_wrong();
        holds(s11_wrong_answer_stops(&w.state));
        assert!(w.state.rollouts[0].paused.is_some());
        w.report(0, ReportKind::Restored, pass(V1));
        assert_eq!(w.op(0).phase, OpPhase::Settled(Outcome::RolledBack));
        holds(s11_wrong_answer_stops(&w.state));
        // Resuming does not let a follower through: the canary did not pass.
        w.input(model::controller::Input::Resume { rollout: R0 });
        assert_eq!(w.state.ops.len(), 1);
        holds(s11_wrong_answer_stops(&w.state));
    }

    #[test]
    fn s11_operator_cannot_confirm_the_new_release_while_it_is_restored() {
        // Once a wrong answer started a restore, an operator who happens to
        // see v2 answering cannot record it as serving: the Restore may
        // still land under that record. The canary stays failed, so no
        // follower is ever granted in this rollout.
        let mut w = World::canary_wrong();
        let refused = model::controller::step(
            &w.state,
            &model::controller::Input::Resolve {
                op: model::OpId(0),
                observation: pass(V2),
                resolution: Resolution::ConfirmNew,
            },
        );
        assert_eq!(
            refused,
            Err(model::controller::Refusal::RestoreMayStillLand(
                model::OpId(0)
            ))
        );
        w.input(model::controller::Input::Resume { rollout: R0 });
        assert_eq!(w.state.ops.len(), 1, "no follower granted");
        holds(s11_wrong_answer_stops(&w.state));
        holds(check_state(&w.state));
    }

    #[test]
    fn s11_canary_verified_after_wrong_answer_is_rejected() {
        let mut w = World::canary_wrong();
        w.op_mut(0).phase = OpPhase::Settled(Outcome::Verified);
        let v = rejected(s11_wrong_answer_stops(&w.state), Rule::S11);
        assert!(v.detail.contains("is verified although"), "{v}");
    }

    #[test]
    fn s11_wrong_answer_without_restore_is_rejected() {
        let mut w = World::canary_wrong();
        w.op_mut(0).phase = OpPhase::Decided;
        let v = rejected(s11_wrong_answer_stops(&w.state), Rule::S11);
        assert_eq!(
            v.detail,
            "canary op0 of rollout r0 saw a wrong or no answer but no restore of v1 was requested (op is decided)"
        );
    }

    #[test]
    fn s11_follower_after_wrong_answer_is_rejected() {
        let mut w = World::canary_wrong();
        w.report(0, ReportKind::Restored, pass(V1));
        let grant = w.grant_event(R0, B);
        w.event(grant);
        let v = rejected(s11_wrong_answer_stops(&w.state), Rule::S11);
        assert!(v.detail.starts_with("follower op1 (node-b) exists"), "{v}");
        // A canary resolved to the baseline does not open the way either.
        let mut w = World::canary_wrong();
        w.resolve(0, pass(V1), Resolution::ConfirmBaseline);
        let grant = w.grant_event(R0, B);
        w.event(grant);
        rejected(s11_wrong_answer_stops(&w.state), Rule::S11);
    }

    /// The one intermediate state of a real step batch that breaks a state
    /// rule: the failed probe is recorded, the `RestoreRequested` that
    /// follows in the same batch is not applied yet. `check_state` rejects
    /// it on purpose (the rule is not weakened); `check_history` lets it
    /// through only when the restore comes next.
    #[test]
    fn s11_intermediate_state_between_failed_probe_and_restore_is_rejected() {
        let mut w = World::new();
        w.start(plan(1, false));
        w.ask_commit(0);
        let events = model::controller::step(
            &w.state,
            &model::controller::Input::FromAgent {
                node: A,
                msg: model::ToController::Report {
                    op: OpId(0),
                    kind: ReportKind::Switched,
                    observation: wrong(V2),
                },
            },
        )
        .unwrap();
        assert!(matches!(events[0], Event::ReportRecorded { .. }));
        assert_eq!(events[1], Event::RestoreRequested { op: OpId(0) });
        w.event(events[0].clone());
        rejected(check_state(&w.state), Rule::S11);
        for e in &events[1..] {
            w.event(e.clone());
        }
        holds(check_state(&w.state));
    }

    #[test]
    fn check_state_holds_on_every_state_of_a_clean_rollout() {
        let mut w = World::new();
        w.start(plan(2, false));
        w.switch(0, pass(V2));
        w.switch(1, pass(V2));
        w.switch(2, pass(V2));
        let mut state = ControllerState::default();
        for e in &w.log {
            model::controller::apply(&mut state, e);
            holds(check_state(&state));
        }
        assert_eq!(
            state.rollouts[0].status,
            model::controller::RolloutStatus::Completed
        );
    }

    #[test]
    fn check_state_reports_the_first_rule_in_order() {
        let mut w = World::new();
        w.start(plan(1, false));
        // A follower beside the unsettled canary breaks S1 and S4: S1 first.
        let grant = w.grant_event(R0, B);
        w.event(grant);
        rejected(check_state(&w.state), Rule::S1);
        std::sync::Arc::make_mut(&mut std::sync::Arc::make_mut(&mut w.state.rollouts[0]).plan)
            .slots_max = 2;
        rejected(check_state(&w.state), Rule::S4);
    }

    #[test]
    fn l1_holds_on_real_runs_and_rejects_a_stuck_rollout() {
        let mut w = World::new();
        w.start(plan(1, false));
        holds(l1_nothing_left_ends(&w.state));
        w.resolve(0, pass(V1), Resolution::Abandon);
        holds(l1_nothing_left_ends(&w.state));
        assert_eq!(
            w.state.rollouts[0].status,
            model::controller::RolloutStatus::Ended
        );
        // The same state, had the rollout not ended: stuck.
        std::sync::Arc::make_mut(&mut w.state.rollouts[0]).status =
            model::controller::RolloutStatus::Active;
        let v = rejected(l1_nothing_left_ends(&w.state), Rule::EndsWhenNothingLeft);
        assert!(
            v.detail.contains("canary's op settled without passing"),
            "{v}"
        );
        // A pause waits for the operator instead.
        std::sync::Arc::make_mut(&mut w.state.rollouts[0]).paused =
            Some(model::controller::PauseReason::Operator);
        holds(l1_nothing_left_ends(&w.state));
    }
}
