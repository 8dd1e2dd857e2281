//! "What can go wrong from here" (issue #27 item 3): the live part of a
//! real controller's state, projected onto the checker's small world, so
//! `fleetweft-check --from-log` can explore every interleaving of faults
//! and operator inputs from where a real rollout stands.
//!
//! [`project`] is pure: a [`ControllerState`] (the fold of a real log) in,
//! a [`Projection`] (a checker [`World`] and its description in domain
//! words) out. What it keeps:
//!
//! - the active rollout (paused or not; a rollout that is neither active
//!   nor paused has nothing left to go wrong and is refused by name);
//! - its canary, with the canary's op if it has one;
//! - the op a pause names (`ProbeFailed`, `FailureBudget`), settled or not;
//! - its live ops (holding a slot, UNKNOWN ones first), up to
//!   [`Limits::nodes_max`] nodes in all;
//! - the next [`Limits::upcoming_max`] followers not yet granted, so the
//!   exploration can grant on.
//!
//! Nodes are renumbered `node-a` (the canary), `node-b`, … in plan order,
//! ops `op0`, … in grant order, and the rollout becomes `r0`; releases and
//! generations keep their real values. What is dropped is accounted for,
//! so the projected rollout decides as the real one would: each live op
//! dropped keeps its slot (the plan's `slots_max` shrinks by one per
//! dropped live op), the failure and UNKNOWN counts of the budgets (B1)
//! are kept as they are (dropped ops never settle in the projection), and
//! the wave ends are mapped onto the projected followers.
//!
//! **What the agents hold.** The controller's log cannot tell where an
//! agent is, only where it is at least. The projection takes the
//! *earliest* agent state the log allows, with the controller's command
//! for the op in flight (what the runtime re-sends):
//!
//! | controller's op | agent | in flight |
//! |---|---|---|
//! | granted | has not taken the op on: serves the baseline | apply |
//! | decided, the node not known to have acted on it | staged, awaiting the decision | the decision |
//! | decided, the node acted on it (`commit_acted_on`) | the decision delivered (switched or aborted, reporting), by the checker's own step | its report |
//! | restoring | as decided, plus the restore | the restore too |
//! | settled | the op closed, serving what the outcome says | nothing |
//!
//! Every later agent state is reachable from the earliest one by the
//! checker's own steps (deliveries, retries; faults from the budget), so
//! the exploration covers where the agent really is, and more. A node
//! known to have acted on its decision is moved past it, because the
//! controller relies on that (it may then settle a restore on a probe of
//! the baseline, which a decision still in flight would contradict).
//!
//! Not projected (said in [`Projection::notes`]): live ops of other
//! (superseded) rollouts, live ops beyond the node cap (frozen: their
//! slots stay held), settled followers (only their counts matter), the
//! roster (names are shown, not enrolled), and an upcoming follower still
//! held by another rollout's op (no upcoming follower is projected then).

use crate::config::{CheckConfig, FOLLOWERS_MAX};
use crate::fleet::{Action, FleetModel};
use crate::world::{App, Artifact, ChunkDisk, Ghost, Msg, World};
use model::agent::{AgentOp, AgentStage, AgentState, ATTEMPT_BUDGET};
use model::chunks::ChunkSet;
use model::controller::words;
use model::controller::{
    current_command, ControllerState, Effect, NodeRecord, Op, OpPhase, Outcome, PauseReason,
    Resolution, Rollout, RolloutStatus,
};
use model::plan::Policy;
use model::{Digest, NodeId, OpId, Plan, RolloutId, ToAgent};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Bounds on what a projection keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Nodes in the projected world, canary included (the checker's
    /// spaces grow about tenfold per node).
    pub nodes_max: usize,
    /// Followers not yet granted that are projected after the granted
    /// ones, so the exploration can grant on.
    pub upcoming_max: usize,
}

/// Nodes of a projection at most: the canary and [`FOLLOWERS_MAX`]
/// followers, the checker's own limit.
pub const NODES_MAX: usize = 1 + FOLLOWERS_MAX as usize;

/// Nodes of a projection by default, canary included: with the default
/// faults a fifth node multiplies the space about tenfold (a 10,000-node
/// fleetsim log: 4 nodes reach depth 12 in 4 million states, 5 only 11
/// in 10 million).
pub const NODES_DEFAULT: usize = 4;

/// Upcoming followers projected by default.
pub const UPCOMING_MAX: usize = 1;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            nodes_max: NODES_DEFAULT,
            upcoming_max: UPCOMING_MAX,
        }
    }
}

/// Why a state cannot be projected.
#[derive(Debug, thiserror::Error)]
pub enum ProjectionError {
    /// No rollout is active (paused ones are): nothing is under way.
    #[error("no active or paused rollout: nothing is under way to explore ({0})")]
    NothingLive(String),
    /// The projection broke a rule by itself: a bug of the projection,
    /// named rather than explored.
    #[error("the projected state breaks {rule}: {detail} (a bug of the projection)")]
    Inconsistent {
        /// The rule's code.
        rule: String,
        /// What broke.
        detail: String,
    },
    /// The limits leave no room for the canary.
    #[error("nodes_max must be at least 1")]
    NoRoom,
}

/// One node of the projected world.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectedNode {
    /// Its id in the checker's world.
    pub id: NodeId,
    /// Its id in the real state.
    pub real: NodeId,
    /// Its enrolled name, or the real id.
    pub name: String,
    /// Its op of the rollout: (real id, projected id).
    pub op: Option<(OpId, OpId)>,
    /// What the controller holds of it and what the agent is assumed to
    /// hold, in domain words.
    pub told: String,
}

/// A real state projected onto the checker's world.
#[derive(Clone, Debug)]
pub struct Projection {
    /// The world the exploration starts from.
    pub world: World,
    /// The configuration it is explored under (nodes and slots from the
    /// projection, faults and operator from the base given).
    pub cfg: CheckConfig,
    /// The real rollout projected as `r0`.
    pub rollout: RolloutId,
    /// The projected nodes, canary first.
    pub nodes: Vec<ProjectedNode>,
    /// Live ops of the rollout left out (beyond the node cap).
    pub dropped_live: Vec<OpId>,
    /// What else was left out or assumed, in domain words.
    pub notes: Vec<String>,
}

impl Projection {
    /// The model that explores from the projected world.
    pub fn model(&self) -> FleetModel {
        FleetModel::from_world(self.cfg.clone(), self.world.clone())
    }

    /// The projected start in domain words: the rollout, each node, and
    /// what was left out.
    pub fn describe(&self) -> Vec<String> {
        let ctrl = &self.world.durable;
        let mut lines = Vec::new();
        if let Some(r) = ctrl.rollouts.front() {
            let status = match (r.status, r.paused) {
                (_, Some(reason)) => words::paused(reason),
                (other, None) => words::rollout_status(other).to_string(),
            };
            lines.push(format!(
                "rollout {} (projected as r0) of {} at {}: {status}, slots {} (projected), {} failed, {} UNKNOWN",
                self.rollout, r.plan.release, r.generation, r.plan.slots_max, r.failed, r.unknown
            ));
        }
        for node in &self.nodes {
            lines.push(format!("  {} = {}: {}", node.id, node.name, node.told));
        }
        for note in &self.notes {
            lines.push(format!("  not projected: {note}"));
        }
        lines
    }
}

/// The nodes kept, and how the real ids map to the projected ones.
struct Selection<'a> {
    rollout: &'a Rollout,
    /// Real follower positions in the plan kept, granted ones first
    /// (followers are granted in plan order, so this is plan order).
    followers: Vec<usize>,
    /// Real ops kept, in grant order.
    ops: Vec<OpId>,
    /// Live ops of the rollout left out.
    dropped_live: Vec<OpId>,
    notes: Vec<String>,
}

impl Selection<'_> {
    /// Real node → projected node.
    fn node_map(&self) -> BTreeMap<NodeId, NodeId> {
        let plan = &self.rollout.plan;
        std::iter::once(plan.canary)
            .chain(self.followers.iter().map(|&p| plan.followers[p]))
            .enumerate()
            .map(|(i, real)| (real, NodeId(i as u32)))
            .collect()
    }

    /// Real op → projected op.
    fn op_map(&self) -> BTreeMap<OpId, OpId> {
        let mut ops = self.ops.clone();
        ops.sort();
        ops.into_iter()
            .enumerate()
            .map(|(i, real)| (real, OpId(i as u32)))
            .collect()
    }
}

/// Pick what to keep: the canary, the op a pause names, live ops
/// (UNKNOWN first) up to the node cap, then upcoming followers.
fn select<'a>(
    state: &ControllerState,
    r: &'a Rollout,
    limits: Limits,
) -> Result<Selection<'a>, ProjectionError> {
    if limits.nodes_max == 0 {
        return Err(ProjectionError::NoRoom);
    }
    let plan = &r.plan;
    let position: BTreeMap<NodeId, usize> = plan
        .followers
        .iter()
        .enumerate()
        .map(|(i, n)| (*n, i))
        .collect();
    let ops: Vec<&Op> = r.ops.iter().filter_map(|id| state.op(*id)).collect();
    let named = match r.paused {
        Some(PauseReason::ProbeFailed { op } | PauseReason::FailureBudget { op }) => Some(op),
        _ => None,
    };
    // The order of preference among followers' ops.
    let mut wanted: Vec<&Op> = ops
        .iter()
        .copied()
        .filter(|o| o.node != plan.canary)
        .collect();
    wanted.sort_by_key(|o| {
        (
            Some(o.id) != named,
            !o.is_unknown(),
            !o.occupies_slot(),
            o.id,
        )
    });
    let mut followers = Vec::new();
    let mut kept = Vec::new();
    let mut dropped_live = Vec::new();
    if let Some(o) = ops.iter().find(|o| o.node == plan.canary) {
        kept.push(o.id);
    }
    for o in wanted {
        let wanted_here = o.occupies_slot() || Some(o.id) == named;
        match position.get(&o.node) {
            Some(&p) if wanted_here && 1 + followers.len() < limits.nodes_max => {
                followers.push(p);
                kept.push(o.id);
            }
            _ if o.occupies_slot() => dropped_live.push(o.id),
            _ => {}
        }
    }
    let mut notes = Vec::new();
    upcoming(state, r, limits, &mut followers, &mut notes);
    followers.sort();
    kept.sort();
    Ok(Selection {
        rollout: r,
        followers,
        ops: kept,
        dropped_live,
        notes,
    })
}

/// Add the next followers not yet granted, in plan order.
fn upcoming(
    state: &ControllerState,
    r: &Rollout,
    limits: Limits,
    followers: &mut Vec<usize>,
    notes: &mut Vec<String>,
) {
    if r.status != RolloutStatus::Active {
        return;
    }
    let next = r.followers_granted as usize;
    let room = limits.nodes_max.saturating_sub(1 + followers.len());
    for p in (next..r.plan.followers.len()).take(room.min(limits.upcoming_max)) {
        let node = r.plan.followers[p];
        // Held by another rollout's op: it cannot be granted before that
        // op settles, which the projection does not hold.
        let held = state
            .nodes
            .get(&node)
            .and_then(|n| n.live_op)
            .and_then(|op| state.op(op))
            .is_some_and(|o| o.rollout != r.id);
        if held {
            notes.push(format!(
                "{node}, the next follower, is held by a live op of another rollout"
            ));
            return;
        }
        followers.push(p);
    }
}

/// Project the live part of `state` onto a checker world explored under
/// `base`'s faults and operator (its node count and slots are replaced by
/// the projection's).
pub fn project(
    state: &ControllerState,
    base: &CheckConfig,
    limits: Limits,
) -> Result<Projection, ProjectionError> {
    let r = state.active_rollout().ok_or_else(|| {
        let last = state
            .rollouts
            .back()
            .map_or("no rollout at all".to_string(), |r| {
                format!(
                    "the latest rollout, {}, is {}",
                    r.id,
                    words::rollout_status(r.status)
                )
            });
        ProjectionError::NothingLive(last)
    })?;
    let selection = select(state, r, limits)?;
    let nodes = selection.node_map();
    let ops = selection.op_map();
    let ctrl = project_controller(state, &selection, &nodes, &ops);
    if let Err(v) = invariants::check_state(&ctrl) {
        return Err(ProjectionError::Inconsistent {
            rule: v.rule.code().to_string(),
            detail: v.detail,
        });
    }
    let mut cfg = base.clone();
    cfg.followers = (nodes.len() - 1) as u8;
    cfg.slots = ctrl.rollouts[0].plan.slots_max.clamp(1, 4) as u8;
    cfg.approval = r.plan.approval_after_canary;
    cfg.waves = false;
    cfg.symmetry = false;
    cfg.roster = false;
    let world = project_world(state, ctrl, &cfg, &nodes)?;
    let projected = describe_nodes(state, &world, &nodes, &ops);
    let mut notes = left_out(state, r, &selection);
    notes.splice(0..0, selection.notes);
    Ok(Projection {
        world,
        cfg,
        rollout: r.id,
        nodes: projected,
        dropped_live: selection.dropped_live,
        notes,
    })
}

/// What the projection left out, in words.
fn left_out(state: &ControllerState, r: &Rollout, s: &Selection) -> Vec<String> {
    let mut notes = Vec::new();
    if !s.dropped_live.is_empty() {
        notes.push(format!(
            "{} live op(s) of {} beyond the node cap ({}); they keep their slots",
            s.dropped_live.len(),
            r.id,
            list(&s.dropped_live)
        ));
    }
    let settled_dropped = r
        .ops
        .iter()
        .filter(|id| !s.ops.contains(id))
        .filter(|id| state.op(**id).is_some_and(|o| !o.occupies_slot()))
        .count();
    if settled_dropped > 0 {
        notes.push(format!(
            "{settled_dropped} settled follower op(s) of {} (their failure counts are kept)",
            r.id
        ));
    }
    let other_live: Vec<OpId> = state
        .ops
        .values()
        .filter(|o| o.rollout != r.id && o.occupies_slot())
        .map(|o| o.id)
        .collect();
    if !other_live.is_empty() {
        notes.push(format!(
            "{} live op(s) of other rollouts ({})",
            other_live.len(),
            list(&other_live)
        ));
    }
    let ungranted = r.plan.followers.len() - r.followers_granted as usize;
    let upcoming = s
        .followers
        .iter()
        .filter(|p| **p >= r.followers_granted as usize)
        .count();
    if ungranted > upcoming {
        notes.push(format!(
            "{} follower(s) not yet granted after the {upcoming} projected",
            ungranted - upcoming
        ));
    }
    notes
}

/// At most a few ids, then a count.
fn list(ops: &[OpId]) -> String {
    const SHOWN_MAX: usize = 5;
    let shown: Vec<String> = ops
        .iter()
        .take(SHOWN_MAX)
        .map(ToString::to_string)
        .collect();
    match ops.len() > SHOWN_MAX {
        true => format!("{}, … {} more", shown.join(", "), ops.len() - SHOWN_MAX),
        false => shown.join(", "),
    }
}

/// The projected controller state: one rollout `r0`, the kept ops
/// renumbered, the kept nodes' records, and every index `apply` keeps
/// recounted over what was kept.
fn project_controller(
    state: &ControllerState,
    s: &Selection,
    nodes: &BTreeMap<NodeId, NodeId>,
    ops: &BTreeMap<OpId, OpId>,
) -> ControllerState {
    let mut ctrl = ControllerState {
        generation: state.generation,
        next_op: OpId(ops.len() as u32),
        active: Some(RolloutId(0)),
        ..ControllerState::default()
    };
    for (real, id) in ops {
        if let Some(o) = state.op(*real) {
            let mut o = o.clone();
            o.id = *id;
            o.rollout = RolloutId(0);
            o.node = nodes.get(&o.node).copied().unwrap_or(o.node);
            ctrl.ops.insert(*id, o);
        }
    }
    for (real, id) in nodes {
        let record = state.nodes.get(real).cloned().unwrap_or_default();
        let live_op = ctrl
            .ops
            .values()
            .find(|o| o.node == *id && o.occupies_slot());
        let last_op = ctrl
            .ops
            .values()
            .filter(|o| o.node == *id)
            .map(|o| o.id)
            .max();
        let record = NodeRecord {
            live_op: live_op.map(|o| o.id),
            last_op,
            ..record
        };
        if record.drift().is_some() {
            ctrl.drifted.insert(*id);
        }
        ctrl.nodes.insert(*id, record);
        ctrl.intended.insert(*id, RolloutId(0));
    }
    let rollout = project_rollout(s, &ctrl, ops);
    ctrl.rollouts.push_back(Arc::new(rollout));
    ctrl
}

/// The rollout `r0`: the plan over the projected nodes, slots less one
/// per dropped live op, the waves mapped, the counts recounted over the
/// kept ops (but the budgets' counts, kept as they are).
fn project_rollout(s: &Selection, ctrl: &ControllerState, ops: &BTreeMap<OpId, OpId>) -> Rollout {
    let r = s.rollout;
    let plan = Plan {
        release: r.plan.release,
        canary: NodeId(0),
        followers: (1..=s.followers.len() as u32).map(NodeId).collect(),
        // S1 (checked on the whole log) keeps the dropped ops within the
        // slots; saturating all the same, a log is data.
        slots_max: r
            .plan
            .slots_max
            .saturating_sub(u16::try_from(s.dropped_live.len()).unwrap_or(u16::MAX)),
        approval_after_canary: r.plan.approval_after_canary,
    };
    let kept: Vec<&Op> = ctrl.ops.values().collect();
    let occupied = kept.iter().filter(|o| o.occupies_slot()).count() as u32;
    let settled = kept.len() as u32 - occupied;
    let not_passed = kept
        .iter()
        .filter(|o| !o.occupies_slot() && !o.passed())
        .count() as u32;
    let followers_granted = kept.iter().filter(|o| o.node != NodeId(0)).count() as u32;
    let (policy, wave_approvals) = project_policy(r, &s.followers, followers_granted);
    Rollout {
        id: RolloutId(0),
        plan: Arc::new(plan),
        generation: r.generation,
        status: r.status,
        paused: r.paused.map(|reason| rename_pause(reason, ops)),
        approved: r.approved,
        ops: ctrl.ops.keys().copied().collect(),
        op_by_node: kept.iter().map(|o| (o.node, o.id)).collect(),
        occupied,
        followers_granted,
        settled,
        settled_not_passed: not_passed,
        archived: false,
        policy: Arc::new(policy),
        failed: r.failed,
        unknown: r.unknown,
        wave_approvals,
        forgotten: false,
        // The projection carries no node platforms: the projected release
        // is architecture-independent (grants were checked by the real one).
        arches: model::platform::ReleaseArches::Any,
        deploys: None,
    }
}

fn rename_pause(reason: PauseReason, ops: &BTreeMap<OpId, OpId>) -> PauseReason {
    let rename = |op: OpId| ops.get(&op).copied().unwrap_or(op);
    match reason {
        PauseReason::ProbeFailed { op } => PauseReason::ProbeFailed { op: rename(op) },
        PauseReason::FailureBudget { op } => PauseReason::FailureBudget { op: rename(op) },
        other => other,
    }
}

/// The policy over the projected followers: a wave boundary wherever two
/// consecutive projected followers are in different real waves; approvals
/// between waves less those of the waves left out.
fn project_policy(r: &Rollout, followers: &[usize], granted: u32) -> (Policy, u32) {
    let real = &r.policy;
    let wave_of = |p: usize| real.wave_ends.partition_point(|end| *end as usize <= p);
    let mut ends = Vec::new();
    if !real.wave_ends.is_empty() && !followers.is_empty() {
        for i in 1..followers.len() {
            if wave_of(followers[i]) != wave_of(followers[i - 1]) {
                ends.push(i as u32);
            }
        }
        ends.push(followers.len() as u32);
    }
    let policy = Policy {
        wave_ends: ends,
        ..Policy::clone(real)
    };
    let lost = r
        .current_wave()
        .saturating_sub(policy.current_wave(granted));
    (policy, r.wave_approvals.saturating_sub(lost))
}

/// The world around the projected controller: agents at the earliest
/// state the log allows, the controller's commands in flight, and the
/// ghost records the properties compare against (what operators did).
fn project_world(
    state: &ControllerState,
    ctrl: ControllerState,
    cfg: &CheckConfig,
    nodes: &BTreeMap<NodeId, NodeId>,
) -> Result<World, ProjectionError> {
    let count = nodes.len();
    let mut world = World {
        durable: crate::world::Hashed::new(ctrl),
        log: None,
        deposed: None,
        unflushed: Vec::new(),
        agents: vec![crate::world::Hashed::new(AgentState::default()); count],
        apps: vec![App::Correct; count],
        artifacts: vec![Artifact::Absent; count],
        chunks: vec![ChunkDisk::default(); count],
        net: Default::default(),
        partitioned: 0,
        faults_used: 0,
        observations: 0,
        ghost: Ghost::default(),
        violation: None,
        symmetry: None,
    };
    world.ghost = ghost_of(&world.durable);
    let mut acted_on = Vec::new();
    for (real, id) in nodes {
        let record = state.nodes.get(real).cloned().unwrap_or_default();
        let before = record.confirmed.or(record.reported_serving);
        let op = world.durable.ops.values().find(|o| o.node == *id).cloned();
        let agent = agent_for(op.as_ref(), before, cfg.chunks);
        let index = id.0 as usize;
        world.agents[index] = crate::world::Hashed::new(agent);
        if matches!(
            agent.op,
            Some(AgentOp {
                stage: AgentStage::AwaitingDecision,
                ..
            })
        ) {
            world.artifacts[index] = Artifact::Good;
        }
        if let Some(o) = op.filter(|o| o.occupies_slot()) {
            in_flight(&mut world, &o);
            if o.commit_acted_on && o.decision.is_some() {
                acted_on.push(o);
            }
        }
    }
    past_the_decision(world, cfg, &acted_on)
}

/// The ghost records a real history leaves: the approval and the
/// resolutions the state shows were an operator's, the ops that are
/// UNKNOWN.
fn ghost_of(ctrl: &ControllerState) -> Ghost {
    let mut ghost = Ghost::default();
    for r in &ctrl.rollouts {
        if r.approved {
            ghost.approved_by_operator |= 1 << r.id.0;
        }
    }
    for o in ctrl.ops.values() {
        if matches!(o.phase, OpPhase::Settled(Outcome::Resolved(_))) {
            ghost.resolved_by_operator |= 1 << o.id.0;
        }
        if o.unknown.is_some() {
            ghost.were_unknown |= 1 << o.id.0;
        }
    }
    ghost
}

/// The earliest agent state the controller's record of `op` allows;
/// `before` is what the node served before it.
fn agent_for(op: Option<&Op>, before: Option<Digest>, chunks: u8) -> AgentState {
    let idle = |serving| AgentState {
        serving,
        release_chunks: chunks,
        ..AgentState::default()
    };
    let Some(o) = op else {
        return idle(before);
    };
    let baseline = o.baseline.or(before);
    let taken_on = |stage| AgentState {
        accepted: o.generation,
        serving: baseline,
        op: Some(AgentOp {
            id: o.id,
            generation: o.generation,
            release: o.release,
            baseline,
            stage,
            // One attempt staged the release.
            budget_left: ATTEMPT_BUDGET - 1,
            verified: ChunkSet::NONE,
            migration: None,
        }),
        highest_op: Some(o.id),
        release_chunks: chunks,
    };
    match (o.phase, o.decision) {
        (OpPhase::Settled(outcome), _) => AgentState {
            accepted: o.generation,
            highest_op: Some(o.id),
            ..idle(settled_serving(o, outcome, before))
        },
        (OpPhase::Decided | OpPhase::Restoring, Some(_)) => taken_on(AgentStage::AwaitingDecision),
        // Granted (or a restore asked before any decision): the apply has
        // not reached the agent yet.
        _ => idle(baseline),
    }
}

/// What a node serves once its op settled `outcome`.
fn settled_serving(o: &Op, outcome: Outcome, before: Option<Digest>) -> Option<Digest> {
    match outcome {
        Outcome::Verified | Outcome::Resolved(Resolution::ConfirmNew) => Some(o.release),
        Outcome::RolledBack
        | Outcome::NotApplied
        | Outcome::Resolved(Resolution::ConfirmBaseline) => o.baseline.or(before),
        // Abandoned: the record says nothing; the last claim stands.
        Outcome::Resolved(Resolution::Abandon) => before,
    }
}

/// The controller's commands for a live op, in flight: the one that
/// moves it on from its phase, and before a restore the decision the node
/// may not have heard.
fn in_flight(world: &mut World, o: &Op) {
    if let (OpPhase::Restoring, Some(decision)) = (o.phase, o.decision) {
        world.net.insert(Msg::ToAgent(
            o.node,
            ToAgent::CommitReply {
                op: o.id,
                generation: o.generation,
                release: o.release,
                decision,
            },
        ));
    }
    if let (OpPhase::Restoring, None) = (o.phase, o.decision) {
        world.net.insert(Msg::ToAgent(
            o.node,
            ToAgent::Apply {
                op: o.id,
                generation: o.generation,
                release: o.release,
            },
        ));
    }
    if let Some(Effect::Send { to, msg }) = current_command(&world.durable, o.id) {
        world.net.insert(Msg::ToAgent(to, msg));
    }
}

/// Deliver the decision to each node the log shows acted on it, by the
/// checker's own step (the agent switches or aborts, probes and reports;
/// a release the log saw answer wrongly answers wrongly here too).
fn past_the_decision(
    world: World,
    cfg: &CheckConfig,
    acted_on: &[Op],
) -> Result<World, ProjectionError> {
    let model = FleetModel::new(cfg.clone());
    let mut world = world;
    for o in acted_on {
        let Some(decision) = o.decision else { continue };
        let msg = Msg::ToAgent(
            o.node,
            ToAgent::CommitReply {
                op: o.id,
                generation: o.generation,
                release: o.release,
                decision,
            },
        );
        world.net.insert(msg);
        // The log saw the new release answer wrongly: the switch makes it
        // so here too (the ground truth agrees with the evidence).
        let fault = (o.failed_probe_seen && decision == model::Decision::Commit)
            .then_some(crate::fleet::AppFault::WrongAnswer);
        world = model.transition(&world, Action::Deliver { msg, fault }, &mut None);
    }
    // What the log already shows spends none of the exploration's budget.
    world.faults_used = 0;
    match world.violation.take() {
        Some(v) => Err(ProjectionError::Inconsistent {
            rule: v.rule.code().to_string(),
            detail: v.detail,
        }),
        None => Ok(world),
    }
}

/// Each projected node in domain words: its real name, its op, and what
/// its agent is assumed to hold.
fn describe_nodes(
    state: &ControllerState,
    world: &World,
    nodes: &BTreeMap<NodeId, NodeId>,
    ops: &BTreeMap<OpId, OpId>,
) -> Vec<ProjectedNode> {
    let real_op: BTreeMap<OpId, OpId> = ops.iter().map(|(r, p)| (*p, *r)).collect();
    nodes
        .iter()
        .map(|(real, id)| {
            let op = world.durable.ops.values().find(|o| o.node == *id);
            let agent = &world.agents[id.0 as usize];
            let controller = match op {
                None => "not yet granted".to_string(),
                Some(o) => format!(
                    "{} (real {}) {}",
                    o.id,
                    real_op.get(&o.id).copied().unwrap_or(o.id),
                    op_words(o)
                ),
            };
            let name = state.roster.display_name(*real);
            let role = if id.0 == 0 { " (canary)" } else { "" };
            ProjectedNode {
                id: *id,
                real: *real,
                name: format!("{name}{role}"),
                op: op.and_then(|o| real_op.get(&o.id).map(|r| (*r, o.id))),
                told: format!("{controller}; agent assumed: {}", agent_words(agent)),
            }
        })
        .collect()
}

fn op_words(o: &Op) -> String {
    let phase = match (o.phase, o.decision) {
        (OpPhase::Granted, _) => format!("{}, no decision", words::op_phase(o.phase)),
        (OpPhase::Decided, _) => words::op_phase_with_decision(o.phase, o.decision),
        (OpPhase::Restoring, _) => format!("{} the baseline", words::op_phase(o.phase)),
        (OpPhase::Settled(_), _) => words::op_phase_with_outcome(o.phase),
    };
    match o.unknown {
        Some(reason) => format!("{phase}, UNKNOWN ({})", words::unknown_reason(reason)),
        None => phase,
    }
}

fn agent_words(agent: &AgentState) -> String {
    let serving = model::words::release(agent.serving);
    let Some(op) = agent.op else {
        return format!("serves {serving}, no op");
    };
    let stage = match op.stage {
        AgentStage::AwaitingDecision => "staged, awaiting the decision".to_string(),
        AgentStage::Staging(_) => "staging".to_string(),
        AgentStage::Migrating => "running the release's migration".to_string(),
        AgentStage::Probing(kind) => format!("probing after {kind}"),
        AgentStage::Reporting(kind, seen) => {
            format!("reporting {kind} ({})", model::words::verdict(seen.verdict))
        }
    };
    format!("serves {serving}, {} {stage}", op.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Faults;
    use crate::fleet::V2;
    use crate::run::{run_bounded, Bounds, RunOptions};
    use model::Decision;
    use std::time::Duration;

    /// A fresh fleet of a canary and `followers`, no faults, `slots`.
    fn fleet(followers: u8, slots: u8) -> FleetModel {
        FleetModel::new(CheckConfig {
            followers,
            slots,
            faults: Faults::none(),
            max_faults: 0,
            ..CheckConfig::default()
        })
    }

    /// Take `action` in `world`, which must change it.
    fn act(model: &FleetModel, world: &World, action: Action) -> World {
        let next = model.transition(world, action, &mut None);
        assert_ne!(&next, world, "{action:?} changed nothing");
        assert!(next.violation.is_none(), "{:?}", next.violation);
        next
    }

    /// Deliver the first message in flight that `pick` chooses.
    fn deliver(model: &FleetModel, world: &World, pick: impl Fn(&Msg) -> bool) -> World {
        let msg = *world
            .net
            .iter()
            .find(|m| pick(m))
            .expect("such a message in flight");
        act(model, world, Action::Deliver { msg, fault: None })
    }

    fn to_agent(m: &Msg) -> bool {
        matches!(m, Msg::ToAgent(..))
    }

    fn to_controller(m: &Msg) -> bool {
        matches!(m, Msg::ToController(..))
    }

    /// The lost-reply story: the canary's commit is decided, the reply is
    /// lost, an operator pauses, the deadline makes the op UNKNOWN.
    fn lost_reply() -> (FleetModel, World) {
        let model = fleet(2, 1);
        let mut w = act(&model, &model.initial(), Action::Start);
        w = deliver(&model, &w, to_agent); // apply: the canary stages
        w = deliver(&model, &w, to_controller); // commit request: decided
        let reply = *w.net.iter().find(|m| to_agent(m)).expect("the reply");
        w = act(&model, &w, Action::Drop(reply));
        w = act(&model, &w, Action::Pause(RolloutId(0)));
        w = act(&model, &w, Action::Timeout(OpId(0)));
        (model, w)
    }

    #[test]
    fn a_paused_rollout_keeps_its_pause_and_its_unknown_op() {
        let (_, w) = lost_reply();
        let p = project(&w.durable, &CheckConfig::default(), Limits::default()).unwrap();
        let ctrl = &p.world.durable;
        let r = &ctrl.rollouts[0];
        assert_eq!(
            r.paused,
            Some(PauseReason::Operator),
            "the pause was dropped"
        );
        let op = ctrl.op(OpId(0)).expect("the live op was dropped");
        assert!(op.is_unknown(), "the op is no longer UNKNOWN");
        assert_eq!(op.decision, Some(Decision::Commit));
        assert_eq!(r.occupied, 1);
        assert!(p.dropped_live.is_empty());
        // The canary and the next follower; the one after is left out.
        assert_eq!(p.nodes.len(), 2);
        assert_eq!(p.cfg.followers, 1);
        // The earliest agent the log allows: staged, awaiting the
        // decision, which is in flight again.
        let agent = &p.world.agents[0];
        assert!(matches!(
            agent.op.map(|o| o.stage),
            Some(AgentStage::AwaitingDecision)
        ));
        assert!(p.world.net.iter().any(|m| matches!(
            m,
            Msg::ToAgent(
                _,
                ToAgent::CommitReply {
                    decision: Decision::Commit,
                    ..
                }
            )
        )));
        assert_eq!(p.world.ghost.were_unknown, 1);
        invariants::check_state(ctrl).unwrap();
        let told = p.describe().join("\n");
        assert!(told.contains("paused (operator)"), "{told}");
        assert!(told.contains("UNKNOWN"), "{told}");
    }

    #[test]
    fn live_ops_beyond_the_cap_keep_their_slots() {
        // Canary verified, two followers granted in two slots.
        let model = fleet(3, 2);
        let mut w = act(&model, &model.initial(), Action::Start);
        w = deliver(&model, &w, to_agent);
        w = deliver(&model, &w, to_controller);
        w = deliver(&model, &w, to_agent); // commit: switch, probe, report
        w = deliver(&model, &w, to_controller); // verified: followers granted
        let r = w.durable.rollouts[0].clone();
        assert_eq!(r.occupied, 2, "two followers hold the two slots");
        // op2 goes UNKNOWN: preferred over op1.
        w = act(&model, &w, Action::Timeout(OpId(2)));
        let limits = Limits {
            nodes_max: 2,
            upcoming_max: 1,
        };
        let p = project(&w.durable, &CheckConfig::default(), limits).unwrap();
        let ctrl = &p.world.durable;
        assert_eq!(p.dropped_live, vec![OpId(1)]);
        let r0 = &ctrl.rollouts[0];
        assert_eq!(r0.plan.slots_max, 1, "the dropped op keeps its slot");
        assert_eq!(r0.occupied, 1);
        assert_eq!(r0.unknown, 1);
        let kept = ctrl.op(OpId(1)).expect("the UNKNOWN op is kept");
        assert!(kept.is_unknown());
        assert_eq!(p.nodes[1].op, Some((OpId(2), OpId(1))));
        // The granted op is in flight to its (earliest) agent.
        assert!(p
            .world
            .net
            .iter()
            .any(|m| matches!(m, Msg::ToAgent(NodeId(1), ToAgent::Apply { .. }))));
        assert!(p.notes.iter().any(|n| n.contains("keep their slots")));
        invariants::check_state(ctrl).unwrap();
    }

    #[test]
    fn a_node_past_its_decision_is_switched() {
        // The canary switched and reported a wrong answer: restoring.
        let model = fleet(1, 1);
        let mut w = act(&model, &model.initial(), Action::Start);
        w = deliver(&model, &w, to_agent);
        w = deliver(&model, &w, to_controller);
        let reply = *w.net.iter().find(|m| to_agent(m)).unwrap();
        let faulty = Action::Deliver {
            msg: reply,
            fault: Some(crate::fleet::AppFault::WrongAnswer),
        };
        w = model.transition(&w, faulty, &mut None);
        w = deliver(&model, &w, to_controller);
        let op = w.durable.op(OpId(0)).unwrap();
        assert_eq!(op.phase, OpPhase::Restoring);
        assert!(op.commit_acted_on);
        let p = project(&w.durable, &CheckConfig::default(), Limits::default()).unwrap();
        // The agent is past the commit (it serves v2, wrongly, as the log
        // saw), and the restore is in flight.
        assert_eq!(p.world.agents[0].serving, Some(V2));
        assert_eq!(p.world.apps[0], App::Wrong);
        assert_eq!(p.world.faults_used, 0, "what the log shows is no fault");
        assert!(p
            .world
            .net
            .iter()
            .any(|m| matches!(m, Msg::ToAgent(_, ToAgent::Restore { .. }))));
        assert!(p.world.violation.is_none());
    }

    #[test]
    fn nothing_under_way_is_refused_by_name() {
        let model = fleet(1, 1);
        let err = project(
            &model.initial().durable,
            &CheckConfig::default(),
            Limits::default(),
        );
        assert!(matches!(err, Err(ProjectionError::NothingLive(_))));
    }

    fn small_bounds() -> Bounds {
        Bounds {
            depth_max: 30,
            states_max: 200_000,
            time_max: Duration::from_secs(60),
        }
    }

    #[test]
    fn from_the_lost_reply_the_real_rules_hold_and_a_mutant_is_caught() {
        let (_, w) = lost_reply();
        let base = CheckConfig {
            faults: Faults::none().with(crate::config::Fault::Loss),
            max_faults: 1,
            ..CheckConfig::default()
        };
        let options = RunOptions {
            threads: 1,
            progress: false,
            order: Default::default(),
        };
        let p = project(&w.durable, &base, Limits::default()).unwrap();
        let report = run_bounded(&p.model(), &options, &small_bounds());
        assert!(
            report.failures().next().is_none(),
            "{:?}",
            report.properties
        );
        assert!(report.unique_states > 10, "{}", report.unique_states);
        // A decision made anew on the retried commit request (S6).
        let mut cfg = base.clone();
        cfg.mutant = Some(crate::Mutant::RedecideOnRetry);
        let p = project(&w.durable, &cfg, Limits::default()).unwrap();
        let report = run_bounded(&p.model(), &options, &small_bounds());
        let broken: Vec<_> = report.failures().filter_map(|f| f.rule.clone()).collect();
        assert!(!broken.is_empty(), "the mutant was not caught from here");
    }
}
