//! Liveness under weak fairness (issue #27 item 2).
//!
//! stateright's `eventually` is unsound on cycles and knows no fairness,
//! so this module explores the same [`stateright::Model`] itself, keeps
//! the reachable graph as fingerprints and compact edges labelled by
//! action class ([`explore`]), and searches it for a *fair* lasso that
//! violates a leads-to property ([`fair_violation`]): a reachable cycle
//! on which the property's "pending" condition holds in every state and
//! every weakly fair action class that is enabled all along the cycle is
//! taken on it, or a reachable state, pending, where no fair action can
//! change anything (the system may stay there forever).
//!
//! Fair: delivering each message in flight, a partition healing, an
//! agent's retry timer, an op's deadline, the controller's route probe of
//! an UNKNOWN op, the next step of a running fetch, a flush. Not fair:
//! faults (loss, duplicates, crashes, early deadlines: any step that
//! spends the fault budget) and the operator (a person may never come).
//!
//! Under weak fairness a strongly connected component is the best
//! candidate for its own cycles: a cycle through all its states and edges
//! takes every class any of its cycles takes, and finds disabled every
//! class any of them finds disabled. So one Tarjan pass per property and
//! entity, restricted to the pending states, decides it.

use crate::fleet::{Action, FleetModel};
use crate::world::{Msg, World};
use model::controller::{step, Event, Input, RolloutStatus};
use model::{NodeId, OpId};
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

/// Upper bound on the states of one liveness exploration (state indexes
/// are `u32`; beyond this the graph would not fit this machine anyway).
pub const LIVENESS_STATES_MAX: usize = 200_000_000;

/// How often the exploration prints progress, in milliseconds.
pub const LIVENESS_PROGRESS_INTERVAL_MS: u64 = 2_000;

/// The class of an edge that no fairness covers (a fault, the operator).
pub const UNFAIR: u32 = u32::MAX;

/// Entities (rollouts or ops) a property can follow: one bit each.
pub const ENTITIES_MAX: u32 = 64;

/// Why a liveness check could not run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LivenessError {
    /// The reachable graph has more states than [`LIVENESS_STATES_MAX`].
    #[error("more than {limit} states: the liveness graph does not fit")]
    TooManyStates { limit: usize },
    /// A state offers more actions than an edge can number.
    #[error("a state offers {count} actions, more than an edge can number ({limit})")]
    TooManyActions { count: usize, limit: usize },
}

pub use crate::leads_to::Liveness;

/// How each property is judged on a world (the names are in `leads_to`).
impl Liveness {
    /// The entities for which the property is pending in `world`: a bit per
    /// rollout id (LV1) or op id (LV2, LV3). A world that broke a safety
    /// rule ends its path and is pending for nothing.
    pub fn pending(self, world: &World) -> u64 {
        if world.violation.is_some() {
            return 0;
        }
        let ctrl = world.controller();
        let mut bits = 0u64;
        match self {
            Liveness::RolloutComesToRest => {
                for r in ctrl.rollouts.iter().filter(|r| r.id.0 < ENTITIES_MAX) {
                    let moving = r.status == RolloutStatus::Active
                        && r.paused.is_none()
                        && !ctrl.awaiting_approval(r.id);
                    bits |= u64::from(moving) << r.id.0;
                }
            }
            Liveness::UnknownOpSettles | Liveness::NoSlotHeldForever => {
                for op in ctrl.ops.values().filter(|o| o.id.0 < ENTITIES_MAX) {
                    bits |= u64::from(self.op_pending(world, &ctrl, op.id)) << op.id.0;
                }
            }
        }
        bits
    }

    fn op_pending(
        self,
        world: &World,
        ctrl: &model::controller::ControllerState,
        id: OpId,
    ) -> bool {
        let Some(op) = ctrl.op(id) else {
            return false;
        };
        if !op.occupies_slot() || world.is_partitioned(op.node) {
            return false;
        }
        match self {
            Liveness::UnknownOpSettles => {
                let paused = ctrl.rollout(op.rollout).is_some_and(|r| r.paused.is_some());
                op.unknown.is_some() && !paused
            }
            Liveness::NoSlotHeldForever => probe_would_settle(world, op.node, id),
            Liveness::RolloutComesToRest => false,
        }
    }
}

/// Whether the controller's own probe of `node`'s route, as it answers now,
/// would settle `op` under the real rules.
pub fn probe_would_settle(world: &World, node: NodeId, op: OpId) -> bool {
    let input = Input::RouteProbed {
        node,
        observation: world.observe(node),
    };
    step(&world.controller(), &input).is_ok_and(|events| {
        events
            .iter()
            .any(|e| matches!(e, Event::OpSettled { op: o, .. } if *o == op))
    })
}

/// What a weakly fair action is about: continuously enabled, it is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FairClass {
    /// Delivering this message (to the controller that leads).
    Deliver(Msg),
    /// The node's partition heals.
    Heal(NodeId),
    /// The node's agent's retry timer fires.
    Retry(NodeId),
    /// The op's deadline fires.
    Deadline(OpId),
    /// The controller probes the node's route (an UNKNOWN op's).
    Probe(NodeId),
    /// The node's running fetch takes its next step.
    Fetch(NodeId),
    /// Unflushed events are flushed (a mutant's).
    Flush,
}

/// The fair class of `action`, if fairness covers it. A step that spends
/// the fault budget is never fair, whatever its class (see [`explore`]).
pub fn fair_class(action: &Action) -> Option<FairClass> {
    match *action {
        Action::Deliver { msg, fault: None } => Some(FairClass::Deliver(msg)),
        Action::Heal(node) => Some(FairClass::Heal(node)),
        Action::Retry(node) => Some(FairClass::Retry(node)),
        Action::Timeout(op) => Some(FairClass::Deadline(op)),
        Action::ProbeRoute(node) => Some(FairClass::Probe(node)),
        Action::FetchChunk(node) => Some(FairClass::Fetch(node)),
        Action::Flush => Some(FairClass::Flush),
        _ => None,
    }
}

/// One transition of the graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edge {
    /// The state it leads to.
    pub to: u32,
    /// Its interned fair class, or [`UNFAIR`].
    pub class: u32,
    /// Its place in `FleetModel::enabled`'s list for the source state (to
    /// replay it without storing the action).
    pub action: u16,
}

/// A graph in compressed rows: state `s`'s edges are
/// `edges[edge_start[s]..edge_start[s + 1]]`. Only transitions that change
/// the state are edges; a fair action that changes nothing is a stutter,
/// which weak fairness does not count as enabled.
#[derive(Clone, Debug, Default)]
pub struct LabelledGraph {
    pub edge_start: Vec<u32>,
    pub edges: Vec<Edge>,
}

impl LabelledGraph {
    /// Number of states.
    pub fn len(&self) -> usize {
        self.edge_start.len().saturating_sub(1)
    }

    /// Whether the graph has no state.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The edges leaving `state`, with their indexes.
    pub fn out(&self, state: u32) -> impl Iterator<Item = (u32, &Edge)> {
        let (from, to) = (
            self.edge_start[state as usize],
            self.edge_start[state as usize + 1],
        );
        (from..to).map(move |i| (i, &self.edges[i as usize]))
    }

    /// The fair classes enabled in `state`, sorted, without repeats.
    fn enabled(&self, state: u32) -> Vec<u32> {
        let mut classes: Vec<u32> = self
            .out(state)
            .map(|(_, e)| e.class)
            .filter(|c| *c != UNFAIR)
            .collect();
        classes.sort_unstable();
        classes.dedup();
        classes
    }

    /// Build from per-state edge lists (tests and small graphs).
    pub fn from_lists(lists: &[Vec<(u32, u32)>]) -> LabelledGraph {
        let mut graph = LabelledGraph::default();
        for list in lists {
            graph.edge_start.push(graph.edges.len() as u32);
            for (ix, (to, class)) in list.iter().enumerate() {
                graph.edges.push(Edge {
                    to: *to,
                    class: *class,
                    action: ix as u16,
                });
            }
        }
        graph.edge_start.push(graph.edges.len() as u32);
        graph
    }
}

/// A fair violation: the system reaches `entry` and then either stays
/// there forever (`cycle` empty: no fair action changes anything there) or
/// goes round `cycle` (edge indexes, from `entry` back to it) forever.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lasso {
    pub entry: u32,
    pub cycle: Vec<u32>,
}

/// The fair violation nearest the root (by `depth`) among the states where
/// `pending` holds, if any: a pending state with no fair edge, or a fair
/// strongly connected component of pending states.
pub fn fair_violation(
    graph: &LabelledGraph,
    depth: &[u16],
    pending: &dyn Fn(u32) -> bool,
) -> Option<Lasso> {
    let stuck = (0..graph.len() as u32)
        .filter(|s| pending(*s) && !graph.out(*s).any(|(_, e)| e.class != UNFAIR))
        .min_by_key(|s| depth[*s as usize]);
    let mut best: Option<Lasso> = stuck.map(|entry| Lasso {
        entry,
        cycle: Vec::new(),
    });
    for component in components(graph, pending) {
        let Some(entry) = component.iter().copied().min_by_key(|s| depth[*s as usize]) else {
            continue;
        };
        if best
            .as_ref()
            .is_some_and(|b| depth[b.entry as usize] <= depth[entry as usize])
        {
            continue;
        }
        if let Some(cycle) = fair_cycle(graph, &component, entry) {
            best = Some(Lasso { entry, cycle });
        }
    }
    best
}

/// Tarjan's strongly connected components of the subgraph of `pending`
/// states, iteratively (no recursion, whatever the depth); only the
/// non-trivial ones (a cycle inside).
fn components(graph: &LabelledGraph, pending: &dyn Fn(u32) -> bool) -> Vec<Vec<u32>> {
    const UNSEEN: u32 = u32::MAX;
    let n = graph.len();
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut found = Vec::new();
    let mut next_index = 0u32;
    // Frames of the depth-first walk: (state, next edge to look at).
    let mut frames: Vec<(u32, u32)> = Vec::new();
    for root in 0..n as u32 {
        if index[root as usize] != UNSEEN || !pending(root) {
            continue;
        }
        frames.push((root, graph.edge_start[root as usize]));
        index[root as usize] = next_index;
        low[root as usize] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root as usize] = true;
        while let Some(&mut (state, ref mut cursor)) = frames.last_mut() {
            let end = graph.edge_start[state as usize + 1];
            if *cursor < end {
                let to = graph.edges[*cursor as usize].to;
                *cursor += 1;
                if !pending(to) {
                    continue;
                }
                if index[to as usize] == UNSEEN {
                    index[to as usize] = next_index;
                    low[to as usize] = next_index;
                    next_index += 1;
                    stack.push(to);
                    on_stack[to as usize] = true;
                    frames.push((to, graph.edge_start[to as usize]));
                } else if on_stack[to as usize] {
                    low[state as usize] = low[state as usize].min(index[to as usize]);
                }
                continue;
            }
            frames.pop();
            if let Some(&(parent, _)) = frames.last() {
                low[parent as usize] = low[parent as usize].min(low[state as usize]);
            }
            if low[state as usize] == index[state as usize] {
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member as usize] = false;
                    component.push(member);
                    if member == state {
                        break;
                    }
                }
                let cyclic = component.len() > 1 || graph.out(state).any(|(_, e)| e.to == state);
                if cyclic {
                    found.push(component);
                }
            }
        }
    }
    found
}

/// A cycle through `entry` inside `component` that is weakly fair, if the
/// component has one: for every fair class enabled somewhere in it, the
/// cycle takes an edge of that class or passes a state where it is
/// disabled. `None` when some class is enabled in every state and taken
/// on no edge inside (then no cycle of the component is fair).
fn fair_cycle(graph: &LabelledGraph, component: &[u32], entry: u32) -> Option<Vec<u32>> {
    let members: HashSet<u32> = component.iter().copied().collect();
    let mut taken: HashMap<u32, u32> = HashMap::new(); // class -> an edge inside
    let mut enabled_in: HashMap<u32, usize> = HashMap::new();
    let mut disabled_at: HashMap<u32, u32> = HashMap::new();
    for &state in component {
        for (ix, edge) in graph.out(state) {
            if edge.class != UNFAIR && members.contains(&edge.to) {
                taken.entry(edge.class).or_insert(ix);
            }
        }
        for class in graph.enabled(state) {
            *enabled_in.entry(class).or_default() += 1;
        }
    }
    for (&class, &count) in &enabled_in {
        if count == component.len() && !taken.contains_key(&class) {
            return None; // starved: enabled all along, never taken
        }
    }
    // A state where each class never taken inside is disabled.
    for &state in component {
        let here = graph.enabled(state);
        for &class in enabled_in.keys() {
            if !taken.contains_key(&class) && here.binary_search(&class).is_err() {
                disabled_at.entry(class).or_insert(state);
            }
        }
    }
    let mut waypoints: Vec<Waypoint> = taken.values().map(|e| Waypoint::Edge(*e)).collect();
    waypoints.extend(disabled_at.values().map(|s| Waypoint::State(*s)));
    waypoints.sort_unstable();
    waypoints.dedup();
    Some(tour(graph, &members, entry, &waypoints))
}

/// Something the fair cycle must pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Waypoint {
    Edge(u32),
    State(u32),
}

/// A walk under construction: its edges, the states and classes it passed.
struct Walk<'g> {
    graph: &'g LabelledGraph,
    edges: Vec<u32>,
    visited: HashSet<u32>,
    classes: HashSet<u32>,
    at: u32,
}

impl Walk<'_> {
    fn go(&mut self, edges: Vec<u32>) {
        for edge in edges {
            let e = self.graph.edges[edge as usize];
            self.visited.insert(e.to);
            self.classes.insert(e.class);
            self.edges.push(edge);
            self.at = e.to;
        }
    }
}

/// A walk inside `members` from `entry` through every waypoint and back
/// to `entry`, as edge indexes; at least one edge. A waypoint the walk
/// already passed (the state, or an edge of the same class) is skipped.
fn tour(
    graph: &LabelledGraph,
    members: &HashSet<u32>,
    entry: u32,
    waypoints: &[Waypoint],
) -> Vec<u32> {
    let mut walk = Walk {
        graph,
        edges: Vec::new(),
        visited: HashSet::from([entry]),
        classes: HashSet::new(),
        at: entry,
    };
    for waypoint in waypoints {
        match *waypoint {
            Waypoint::State(state) if !walk.visited.contains(&state) => {
                walk.go(path_within(graph, members, walk.at, state));
            }
            Waypoint::Edge(edge) if !walk.classes.contains(&graph.edges[edge as usize].class) => {
                let mut path = path_within(graph, members, walk.at, source_of(graph, edge));
                path.push(edge);
                walk.go(path);
            }
            _ => {}
        }
    }
    if walk.edges.is_empty() {
        // Leave `entry` at least once: its first edge inside, then back.
        let (edge, _) = graph
            .out(entry)
            .find(|(_, e)| members.contains(&e.to))
            .expect("a state of a cyclic component has an edge inside it");
        walk.go(vec![edge]);
    }
    walk.go(path_within(graph, members, walk.at, entry));
    walk.edges
}

/// The state an edge leaves (binary search of the row starts).
fn source_of(graph: &LabelledGraph, edge: u32) -> u32 {
    (graph.edge_start.partition_point(|start| *start <= edge) - 1) as u32
}

/// A shortest path of edges inside `members` from `from` to `to` (empty
/// when they are the same state).
fn path_within(graph: &LabelledGraph, members: &HashSet<u32>, from: u32, to: u32) -> Vec<u32> {
    if from == to {
        return Vec::new();
    }
    let mut came_by: HashMap<u32, u32> = HashMap::new(); // state -> edge
    let mut queue = VecDeque::from([from]);
    while let Some(state) = queue.pop_front() {
        for (ix, edge) in graph.out(state) {
            if !members.contains(&edge.to) || edge.to == from || came_by.contains_key(&edge.to) {
                continue;
            }
            came_by.insert(edge.to, ix);
            if edge.to == to {
                let mut path = vec![ix];
                let mut cursor = state;
                while cursor != from {
                    let back = came_by[&cursor];
                    path.push(back);
                    cursor = source_of(graph, back);
                }
                path.reverse();
                return path;
            }
            queue.push_back(edge.to);
        }
    }
    unreachable!("states of one strongly connected component reach each other")
}

/// The explored graph of a model, and what the properties need of it.
pub struct Explored {
    pub graph: LabelledGraph,
    /// Breadth-first parent of each state (the root is its own parent).
    pub parent: Vec<u32>,
    /// The edge's action index that discovered each state.
    pub parent_action: Vec<u16>,
    /// Breadth-first depth of each state.
    pub depth: Vec<u16>,
    /// Per state, per property of [`Liveness::ALL`]: the pending entities.
    pub pending: Vec<[u64; 3]>,
    /// Fair classes by interned id.
    pub classes: Vec<FairClass>,
    pub elapsed: Duration,
}

/// A stable 64-bit fingerprint of a world (SipHash with fixed keys).
fn fingerprint(world: &World) -> u64 {
    #[allow(deprecated)]
    let mut hasher = std::hash::SipHasher::new();
    world.hash(&mut hasher);
    hasher.finish()
}

/// The breadth-first exploration under way: what is kept of the graph,
/// and the fingerprints and class ids seen so far.
struct Explorer<'m> {
    model: &'m FleetModel,
    explored: Explored,
    seen: HashMap<u64, u32>,
    class_ids: HashMap<FairClass, u32>,
    queue: VecDeque<World>,
}

impl Explorer<'_> {
    /// The interned id of `action`'s fair class, or [`UNFAIR`] when no
    /// fairness covers it or the step spent the fault budget.
    fn class_of(&mut self, action: &Action, before: &World, after: &World) -> u32 {
        let Some(class) = fair_class(action).filter(|_| after.faults_used == before.faults_used)
        else {
            return UNFAIR;
        };
        let fresh = self.class_ids.len() as u32;
        let id = *self.class_ids.entry(class).or_insert(fresh);
        if id == fresh {
            self.explored.classes.push(class);
        }
        id
    }

    /// The index of `next`, discovered from state `from` by action `ix`
    /// (queued when new).
    fn index_of(&mut self, next: World, from: u32, ix: u16) -> Result<u32, LivenessError> {
        let fresh = self.explored.parent.len() as u32;
        let to = *self.seen.entry(fingerprint(&next)).or_insert(fresh);
        if to == fresh {
            if self.explored.parent.len() >= LIVENESS_STATES_MAX {
                return Err(LivenessError::TooManyStates {
                    limit: LIVENESS_STATES_MAX,
                });
            }
            let depth = self.explored.depth[from as usize].saturating_add(1);
            self.explored.parent.push(from);
            self.explored.parent_action.push(ix);
            self.explored.depth.push(depth);
            self.queue.push_back(next);
        }
        Ok(to)
    }

    /// Record state `index` (`world`): its pending bits and its edges.
    fn expand(
        &mut self,
        world: &World,
        index: u32,
        actions: &mut Vec<Action>,
    ) -> Result<(), LivenessError> {
        let graph = &mut self.explored.graph;
        graph.edge_start.push(graph.edges.len() as u32);
        self.explored
            .pending
            .push(Liveness::ALL.map(|l| l.pending(world)));
        self.model.enabled(world, actions);
        if actions.len() > usize::from(u16::MAX) {
            let (count, limit) = (actions.len(), usize::from(u16::MAX));
            return Err(LivenessError::TooManyActions { count, limit });
        }
        for (ix, action) in actions.drain(..).enumerate() {
            let next = self.model.transition(world, action, &mut None);
            if next == *world {
                continue; // a stutter: no edge, and not "enabled"
            }
            let class = self.class_of(&action, world, &next);
            let to = self.index_of(next, index, ix as u16)?;
            self.explored.graph.edges.push(Edge {
                to,
                class,
                action: ix as u16,
            });
        }
        Ok(())
    }
}

/// Explore every state reachable in `model` breadth first, keeping only
/// fingerprints, compact edges and the pending bits of each property.
/// States are numbered in discovery order, which breadth first is also
/// the order they are expanded in, so edges are appended row by row.
pub fn explore(model: &FleetModel, progress: bool) -> Result<Explored, LivenessError> {
    let started = Instant::now();
    let init = model.initial();
    let mut explorer = Explorer {
        model,
        explored: Explored {
            graph: LabelledGraph::default(),
            parent: vec![0],
            parent_action: vec![0],
            depth: vec![0],
            pending: Vec::new(),
            classes: Vec::new(),
            elapsed: Duration::ZERO,
        },
        seen: HashMap::from([(fingerprint(&init), 0)]),
        class_ids: HashMap::new(),
        queue: VecDeque::from([init]),
    };
    let mut actions = Vec::new();
    let mut last_report = Instant::now();
    let mut index = 0u32;
    while let Some(world) = explorer.queue.pop_front() {
        explorer.expand(&world, index, &mut actions)?;
        index += 1;
        if progress && last_report.elapsed() >= Duration::from_millis(LIVENESS_PROGRESS_INTERVAL_MS)
        {
            last_report = Instant::now();
            let secs = started.elapsed().as_secs_f64();
            eprintln!(
                "[{secs:6.1}s] liveness graph: {index} states explored, {} found, {} edges, {:.0} states/s",
                explorer.explored.parent.len(),
                explorer.explored.graph.edges.len(),
                f64::from(index) / secs.max(1e-9)
            );
        }
    }
    let mut explored = explorer.explored;
    explored
        .graph
        .edge_start
        .push(explored.graph.edges.len() as u32);
    explored.elapsed = started.elapsed();
    Ok(explored)
}

/// A property's fair violation, with the entity it is about.
#[derive(Clone, Debug)]
pub struct Found {
    pub property: Liveness,
    pub entity: u32,
    pub lasso: Lasso,
}

/// Check every property on an explored graph: the violation nearest the
/// root per property, if any.
pub fn check(explored: &Explored) -> Vec<(Liveness, Option<Found>)> {
    Liveness::ALL
        .into_iter()
        .enumerate()
        .map(|(p, property)| {
            let any = explored
                .pending
                .iter()
                .fold(0u64, |acc, bits| acc | bits[p]);
            let mut best: Option<Found> = None;
            for entity in (0..ENTITIES_MAX).filter(|e| any & (1 << e) != 0) {
                let pending = |s: u32| explored.pending[s as usize][p] & (1 << entity) != 0;
                let Some(lasso) = fair_violation(&explored.graph, &explored.depth, &pending) else {
                    continue;
                };
                let nearer = best.as_ref().is_none_or(|b| {
                    explored.depth[lasso.entry as usize] < explored.depth[b.lasso.entry as usize]
                });
                if nearer {
                    best = Some(Found {
                        property,
                        entity,
                        lasso,
                    });
                }
            }
            (property, best)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const C0: u32 = 0;
    const C1: u32 = 1;

    /// The classes taken along `cycle`, and whether it returns to `entry`.
    fn closes(graph: &LabelledGraph, lasso: &Lasso) -> bool {
        let mut at = lasso.entry;
        for edge in &lasso.cycle {
            assert_eq!(source_of(graph, *edge), at, "the cycle is a walk");
            at = graph.edges[*edge as usize].to;
        }
        at == lasso.entry
    }

    #[test]
    fn a_fair_cycle_is_found_and_closes() {
        // 0 -> 1 (unfair), 1 <-> 2 by class 0; class 1 (1 -> 3) is
        // enabled at 1 but not at 2, so going round 1, 2 is fair.
        let graph = LabelledGraph::from_lists(&[
            vec![(1, UNFAIR)],
            vec![(2, C0), (3, C1)],
            vec![(1, C0)],
            vec![],
        ]);
        let pending = |s: u32| s == 1 || s == 2;
        let lasso = fair_violation(&graph, &[0, 1, 2, 2], &pending).expect("a fair cycle");
        assert_eq!(lasso.entry, 1);
        assert!(!lasso.cycle.is_empty());
        assert!(closes(&graph, &lasso));
    }

    #[test]
    fn a_cycle_that_starves_an_enabled_fair_action_is_not_reported() {
        // The same loop, but class 1 leaves from both states and is never
        // taken inside: weak fairness rules the loop out.
        let graph = LabelledGraph::from_lists(&[
            vec![(1, UNFAIR)],
            vec![(2, C0), (3, C1)],
            vec![(1, C0), (3, C1)],
            vec![],
        ]);
        let pending = |s: u32| s == 1 || s == 2;
        assert_eq!(fair_violation(&graph, &[0, 1, 2, 2], &pending), None);
    }

    #[test]
    fn a_loop_of_unfair_steps_alone_is_no_cycle_but_a_stuck_state_is() {
        // 1 <-> 2 by unfair steps only (an operator's): the system may
        // also stay in 1, where nothing fair is enabled.
        let graph = LabelledGraph::from_lists(&[
            vec![(1, C0)],
            vec![(2, UNFAIR)],
            vec![(1, UNFAIR), (3, C1)],
            vec![],
        ]);
        let pending = |s: u32| s == 1 || s == 2;
        let lasso = fair_violation(&graph, &[0, 1, 2, 3], &pending).expect("stuck in 1");
        assert_eq!(
            lasso,
            Lasso {
                entry: 1,
                cycle: vec![]
            }
        );
        // Not pending where it is stuck: nothing to report.
        let only_two = |s: u32| s == 2;
        assert_eq!(fair_violation(&graph, &[0, 1, 2, 3], &only_two), None);
    }

    #[test]
    fn a_cycle_must_pass_where_an_untaken_class_is_disabled() {
        // A ring 1 -> 2 -> 3 -> 1 (class 0); class 1 is enabled at 1 and
        // 2 only. The fair cycle must pass 3 (the whole ring).
        let graph = LabelledGraph::from_lists(&[
            vec![(1, UNFAIR)],
            vec![(2, C0), (4, C1)],
            vec![(3, C0), (4, C1)],
            vec![(1, C0)],
            vec![],
        ]);
        let pending = |s: u32| (1..=3).contains(&s);
        let lasso = fair_violation(&graph, &[0, 1, 2, 3, 2], &pending).expect("fair ring");
        assert!(closes(&graph, &lasso));
        assert_eq!(lasso.cycle.len(), 3, "{lasso:?}");
    }

    #[test]
    fn tarjan_walks_a_long_ring_without_recursion() {
        // A ring this long: a recursive walk would overflow a test
        // thread's stack (2 MiB).
        const RING_STATES: u32 = 200_000;
        let lists: Vec<Vec<(u32, u32)>> = (0..RING_STATES)
            .map(|s| vec![((s + 1) % RING_STATES, C0)])
            .collect();
        let graph = LabelledGraph::from_lists(&lists);
        let depth: Vec<u16> = (0..RING_STATES)
            .map(|s| s.min(u32::from(u16::MAX)) as u16)
            .collect();
        let lasso = fair_violation(&graph, &depth, &|_| true).expect("the ring is fair");
        assert_eq!(lasso.entry, 0);
        assert_eq!(lasso.cycle.len(), RING_STATES as usize);
    }
}
