//! Symmetry reduction over the followers of one wave (issue #11).
//!
//! With waves that fit in the slots ([`CheckConfig::symmetry_refusal`]),
//! a wave is granted whole, in one batch, once every earlier op settled:
//! its followers' plan order only decides which op id each gets. Two
//! worlds that differ by which of a wave's followers is which are then
//! bisimilar: rename the nodes by a permutation σ of the wave, and each
//! renamed node's op to the id the node it takes the place of had (τ),
//! everywhere (controller state, agents' journals, what serves, the disk,
//! the network, partitions, the ghost), keeping the plan as it is. The
//! wave's ops stay in plan order, so every rule sees a world it could
//! have reached. Op ids are compared only per node (the agents' fence)
//! and against later ops, which τ leaves alone.
//!
//! The representative of a world is the renaming (over every permutation
//! of every wave, at most 4! with [`crate::config::FOLLOWERS_MAX`]) whose
//! hash is least: the same for every member of an orbit. stateright only
//! stores the representative's fingerprint and goes on from the world
//! itself, so a representative never has to be a reachable world.
//!
//! A world that names nodes outside these renamings (a recorded
//! violation, unflushed events, a second rollout, a roster) or a wave
//! half granted (only a mutant makes one) is its own representative:
//! never merged, which is always sound.

use crate::config::CheckConfig;
use crate::world::{Ghost, Msg, World};
use model::agent::AgentState;
use model::controller::{ControllerState, PauseReason};
use model::{NodeId, OpId, ToAgent, ToController};
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

/// Most permutations tried per world: 4! (one wave of all four followers).
pub const PERMUTATIONS_MAX: usize = 24;

/// A renaming of nodes (σ) and of their ops (τ).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Renaming {
    /// σ: node i is renamed `nodes[i]`.
    nodes: Vec<NodeId>,
    /// τ: ops renamed; any other op keeps its id.
    ops: BTreeMap<OpId, OpId>,
}

impl Renaming {
    fn node(&self, n: NodeId) -> NodeId {
        self.nodes.get(n.0 as usize).copied().unwrap_or(n)
    }

    fn op(&self, o: OpId) -> OpId {
        self.ops.get(&o).copied().unwrap_or(o)
    }

    fn bits(&self, bits: u32) -> u32 {
        (0..32u32)
            .filter(|i| bits & (1 << i) != 0)
            .map(|i| 1u32 << self.op(OpId(i)).0)
            .fold(0, |a, b| a | b)
    }

    fn node_bits(&self, bits: u8) -> u8 {
        (0..8u32)
            .filter(|i| bits & (1 << i) != 0)
            .map(|i| 1u8 << self.node(NodeId(i)).0)
            .fold(0, |a, b| a | b)
    }
}

/// The waves whose followers are interchangeable: node ids of each wave
/// of two or more followers (the canary, node 0, is never in one).
pub fn groups(cfg: &CheckConfig) -> Vec<Vec<NodeId>> {
    if cfg.symmetry_refusal().is_some() {
        return Vec::new();
    }
    let mut start = 1u32;
    let mut groups = Vec::new();
    for end in cfg.wave_ends() {
        if end + 1 - start >= 2 {
            groups.push((start..=end).map(NodeId).collect());
        }
        start = end + 1;
    }
    groups
}

/// Every permutation of `items` (Heap's algorithm would do; a wave has at
/// most four followers).
fn permutations(items: &[NodeId]) -> Vec<Vec<NodeId>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut all = Vec::new();
    for (i, first) in items.iter().enumerate() {
        let mut rest = items.to_vec();
        rest.remove(i);
        for mut tail in permutations(&rest) {
            tail.insert(0, *first);
            all.push(tail);
        }
    }
    all
}

/// Every σ over `groups` (identity included), as node maps of `count`
/// nodes.
fn sigmas(groups: &[Vec<NodeId>], count: usize) -> Vec<Vec<NodeId>> {
    let identity: Vec<NodeId> = (0..count as u32).map(NodeId).collect();
    let mut all = vec![identity];
    for group in groups {
        let mut next = Vec::new();
        for sigma in &all {
            for image in permutations(group) {
                let mut s = sigma.clone();
                for (from, to) in group.iter().zip(&image) {
                    s[from.0 as usize] = *to;
                }
                next.push(s);
            }
        }
        all = next;
    }
    assert!(all.len() <= PERMUTATIONS_MAX, "{} permutations", all.len());
    all
}

/// σ with its τ in `ctrl`, or `None` when σ moves a node with an op to
/// one without (a half-granted wave).
fn renaming(ctrl: &ControllerState, sigma: Vec<NodeId>) -> Option<Renaming> {
    let mut ops = BTreeMap::new();
    if let Some(r) = ctrl.rollouts.front() {
        for (from, to) in sigma.iter().enumerate() {
            let from = NodeId(from as u32);
            if from == *to {
                continue;
            }
            match (r.op_for(from), r.op_for(*to)) {
                (Some(a), Some(b)) => {
                    ops.insert(a, b);
                }
                (None, None) => {}
                _ => return None,
            }
        }
    }
    Some(Renaming { nodes: sigma, ops })
}

/// Whether renaming cannot reach everything `world` names.
fn own_representative(world: &World) -> bool {
    world.violation.is_some()
        || !world.unflushed.is_empty()
        || world.deposed.is_some()
        || world.durable.rollouts.len() > 1
        || !world.durable.roster.is_empty()
        || !world.durable.quarantined.is_empty()
        || !world.durable.revoked_certs.is_empty()
}

/// The representative of `world` under the symmetry its run recorded
/// ([`World::symmetry`]): what the checker is given.
pub fn representative_of(world: &World) -> World {
    match world.symmetry {
        None => world.clone(),
        Some((followers, wave_size)) => {
            let cfg = CheckConfig {
                followers,
                wave_size,
                slots: wave_size,
                waves: true,
                symmetry: true,
                ..CheckConfig::default()
            };
            representative(&cfg, world)
        }
    }
}

/// The representative of `world` under the symmetry of `cfg`'s waves.
pub fn representative(cfg: &CheckConfig, world: &World) -> World {
    let groups = groups(cfg);
    if groups.is_empty() || own_representative(world) {
        return world.clone();
    }
    let mut best: Option<(u64, World)> = None;
    for sigma in sigmas(&groups, world.agents.len()) {
        let Some(renaming) = renaming(&world.durable, sigma) else {
            continue;
        };
        let candidate = rename_world(world, &renaming);
        let hash = fingerprint(&candidate);
        if best.as_ref().is_none_or(|(h, _)| hash < *h) {
            best = Some((hash, candidate));
        }
    }
    best.map_or_else(|| world.clone(), |(_, w)| w)
}

fn fingerprint(world: &World) -> u64 {
    // DefaultHasher::new() has fixed keys: the same world, the same hash.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    world.hash(&mut h);
    h.finish()
}

/// `world` renamed by `r`.
pub fn rename_world(world: &World, r: &Renaming) -> World {
    let count = world.agents.len();
    let mut agents = world.agents.clone();
    let mut apps = world.apps.clone();
    let mut artifacts = world.artifacts.clone();
    let mut chunks = world.chunks.clone();
    for i in 0..count {
        let to = r.node(NodeId(i as u32)).0 as usize;
        agents[to] = crate::world::Hashed::new(rename_agent(&world.agents[i], r));
        apps[to] = world.apps[i];
        artifacts[to] = world.artifacts[i];
        chunks[to] = world.chunks[i];
    }
    World {
        durable: crate::world::Hashed::new(rename_controller(&world.durable, r)),
        deposed: world
            .deposed
            .as_ref()
            .map(|d| Box::new(rename_controller(d, r))),
        // Never renamed: symmetry is refused with the snapshot fault.
        log: world.log.clone(),
        unflushed: world.unflushed.clone(),
        agents,
        apps,
        artifacts,
        chunks,
        net: world.net.iter().map(|m| rename_msg(m, r)).collect(),
        partitioned: r.node_bits(world.partitioned),
        faults_used: world.faults_used,
        observations: world.observations,
        ghost: Ghost {
            resolved_by_operator: r.bits(world.ghost.resolved_by_operator),
            were_unknown: r.bits(world.ghost.were_unknown),
            rolled_back_by_operator: r.bits(world.ghost.rolled_back_by_operator),
            proof_lied: world.ghost.proof_lied.map(|n| r.node(n)),
            ..world.ghost.clone()
        },
        violation: world.violation.clone(),
        symmetry: world.symmetry,
    }
}

fn rename_agent(a: &AgentState, r: &Renaming) -> AgentState {
    let mut a = *a;
    if let Some(op) = a.op.as_mut() {
        op.id = r.op(op.id);
    }
    a.highest_op = a.highest_op.map(|o| r.op(o));
    a
}

fn rename_msg(m: &Msg, r: &Renaming) -> Msg {
    match *m {
        Msg::ToAgent(n, cmd) => Msg::ToAgent(r.node(n), rename_command(cmd, r)),
        Msg::ToController(n, msg) => Msg::ToController(r.node(n), rename_report(msg, r)),
    }
}

fn rename_command(cmd: ToAgent, r: &Renaming) -> ToAgent {
    match cmd {
        ToAgent::Apply {
            op,
            generation,
            release,
        } => ToAgent::Apply {
            op: r.op(op),
            generation,
            release,
        },
        ToAgent::CommitReply {
            op,
            generation,
            release,
            decision,
        } => ToAgent::CommitReply {
            op: r.op(op),
            generation,
            release,
            decision,
        },
        ToAgent::Restore { op, generation } => ToAgent::Restore {
            op: r.op(op),
            generation,
        },
        ToAgent::Settled { op, generation } => ToAgent::Settled {
            op: r.op(op),
            generation,
        },
    }
}

fn rename_report(msg: ToController, r: &Renaming) -> ToController {
    match msg {
        hello @ ToController::Hello { .. } => hello,
        platform @ ToController::Platform { .. } => platform,
        ToController::CommitRequest { op } => ToController::CommitRequest { op: r.op(op) },
        ToController::Report {
            op,
            kind,
            observation,
        } => ToController::Report {
            op: r.op(op),
            kind,
            observation,
        },
        ToController::Rejected {
            op,
            generation,
            accepted,
        } => ToController::Rejected {
            op: r.op(op),
            generation,
            accepted,
        },
    }
}

/// The controller state renamed by `r`, its plan kept: a renamed wave's
/// ops are listed in id order again, as grants in plan order list them.
fn rename_controller(c: &ControllerState, r: &Renaming) -> ControllerState {
    let rollouts = c
        .rollouts
        .iter()
        .map(|ro| {
            let mut ro = ro.as_ref().clone();
            let mut ops: Vec<OpId> = ro.ops.iter().map(|o| r.op(*o)).collect();
            ops.sort();
            ro.ops = ops.into_iter().collect();
            ro.paused = ro.paused.map(|reason| match reason {
                PauseReason::ProbeFailed { op } => PauseReason::ProbeFailed { op: r.op(op) },
                PauseReason::FailureBudget { op } => PauseReason::FailureBudget { op: r.op(op) },
                other => other,
            });
            ro.op_by_node = ro
                .op_by_node
                .iter()
                .map(|(n, o)| (r.node(*n), r.op(*o)))
                .collect();
            std::sync::Arc::new(ro)
        })
        .collect();
    ControllerState {
        generation: c.generation,
        rollouts,
        ops: c
            .ops
            .values()
            .map(|o| {
                let mut o = o.clone();
                o.id = r.op(o.id);
                o.node = r.node(o.node);
                (o.id, o)
            })
            .collect(),
        archive: c
            .archive
            .values()
            .map(|s| {
                let mut s = *s;
                s.id = r.op(s.id);
                s.node = r.node(s.node);
                (s.id, s)
            })
            .collect(),
        // Rollout ids are not renamed. Forgetting needs more rollouts than
        // any checked configuration has, so no forgotten op id is renamed.
        remembered: c.remembered.clone(),
        configs: c.configs.clone(),
        // Operators name no node or op.
        operators: c.operators.clone(),
        forgotten_ops: c.forgotten_ops,
        next_op: c.next_op,
        active: c.active,
        intended: c.intended.iter().map(|(n, ro)| (r.node(*n), *ro)).collect(),
        nodes: c
            .nodes
            .iter()
            .map(|(n, rec)| {
                let mut rec = rec.clone();
                rec.live_op = rec.live_op.map(|o| r.op(o));
                rec.last_op = rec.last_op.map(|o| r.op(o));
                (r.node(*n), rec)
            })
            .collect(),
        quarantined: c.quarantined.clone(),
        revoked_certs: c.revoked_certs.clone(),
        roster: c.roster.clone(),
        drifted: c.drifted.iter().map(|n| r.node(*n)).collect(),
    }
}

/// Every world reachable in `model` without reduction, and how many
/// orbits (distinct representatives) they fall into: with a sound
/// reduction the reduced run visits exactly that many worlds. For tests
/// on small configurations (it keeps every world in memory).
pub fn reachable_orbits(model: &crate::FleetModel) -> (usize, usize) {
    use std::collections::{HashSet, VecDeque};
    let init = model.initial();
    let mut seen: HashSet<World> = HashSet::from([init.clone()]);
    let mut orbits: HashSet<u64> = HashSet::from([fingerprint(&representative_of(&init))]);
    let mut queue = VecDeque::from([init]);
    let mut actions = Vec::new();
    while let Some(world) = queue.pop_front() {
        model.enabled(&world, &mut actions);
        for action in actions.drain(..) {
            let next = model.transition(&world, action, &mut None);
            if next == world || seen.contains(&next) {
                continue;
            }
            orbits.insert(fingerprint(&representative_of(&next)));
            seen.insert(next.clone());
            queue.push_back(next);
        }
    }
    (seen.len(), orbits.len())
}

/// The first world reachable without reduction (breadth first) that has a
/// renaming that is not reachable, with the path to it and that renaming:
/// `None` when the reachable worlds are closed under every renaming, as a
/// sound reduction needs. For tests on small configurations.
pub fn first_asymmetry(model: &crate::FleetModel) -> Option<(Vec<String>, World, World)> {
    use std::collections::{HashMap, VecDeque};
    let init = model.initial();
    let mut parent: HashMap<World, Option<(World, crate::Action)>> = HashMap::new();
    parent.insert(init.clone(), None);
    let mut order = vec![init.clone()];
    let mut queue = VecDeque::from([init]);
    let mut actions = Vec::new();
    while let Some(world) = queue.pop_front() {
        model.enabled(&world, &mut actions);
        for action in actions.drain(..) {
            let next = model.transition(&world, action, &mut None);
            if next == world || parent.contains_key(&next) {
                continue;
            }
            parent.insert(next.clone(), Some((world.clone(), action)));
            order.push(next.clone());
            queue.push_back(next);
        }
    }
    let groups = groups(&model.cfg);
    for world in &order {
        if own_representative(world) {
            continue;
        }
        for sigma in sigmas(&groups, world.agents.len()) {
            let Some(r) = renaming(&world.durable, sigma) else {
                continue;
            };
            let renamed = rename_world(world, &r);
            if !parent.contains_key(&renamed) {
                let mut path = Vec::new();
                let mut cursor = world.clone();
                while let Some(Some((prev, action))) = parent.get(&cursor).cloned() {
                    path.push(model.describe(&prev, &action));
                    cursor = prev;
                }
                path.reverse();
                return Some((path, world.clone(), renamed));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(followers: u8, wave_size: u8, slots: u8) -> CheckConfig {
        CheckConfig {
            followers,
            wave_size,
            slots,
            waves: true,
            symmetry: true,
            ..CheckConfig::default()
        }
    }

    #[test]
    fn groups_are_the_waves_of_two_or_more_followers() {
        let n = |ids: &[u32]| ids.iter().map(|i| NodeId(*i)).collect::<Vec<_>>();
        assert_eq!(groups(&cfg(3, 2, 2)), vec![n(&[1, 2])]);
        assert_eq!(groups(&cfg(4, 2, 2)), vec![n(&[1, 2]), n(&[3, 4])]);
        assert_eq!(groups(&cfg(4, 4, 4)), vec![n(&[1, 2, 3, 4])]);
        // Unsound configurations get no symmetry at all.
        assert!(groups(&cfg(3, 2, 1)).is_empty());
        assert!(groups(&cfg(3, 1, 2)).is_empty());
        assert_eq!(sigmas(&groups(&cfg(4, 2, 2)), 5).len(), 4);
        assert_eq!(sigmas(&groups(&cfg(4, 4, 4)), 5).len(), PERMUTATIONS_MAX);
    }

    #[test]
    fn a_world_and_its_renaming_have_one_representative() {
        let cfg = cfg(2, 2, 2);
        let model = crate::FleetModel::new(cfg.clone());
        let mut world = model.initial();
        // Tell the followers apart: node-b is cut off.
        world.partitioned = 1 << 1;
        let swapped = rename_world(
            &world,
            &Renaming {
                nodes: vec![NodeId(0), NodeId(2), NodeId(1)],
                ops: BTreeMap::new(),
            },
        );
        assert_ne!(world, swapped);
        assert_eq!(swapped.partitioned, 1 << 2);
        assert_eq!(representative(&cfg, &world), representative(&cfg, &swapped));
        // Without symmetry every world is its own.
        let off = CheckConfig {
            symmetry: false,
            slots: 1,
            ..cfg
        };
        assert_eq!(representative(&off, &world), world);
    }
}
