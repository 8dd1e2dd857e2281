//! The stateright model: `model`'s controller and agents inside an
//! environment that loses, duplicates and reorders messages, partitions
//! nodes, crashes processes, answers probes rightly or wrongly, lets a
//! settled node drift (with proofs on), and acts as an operator. The
//! environment decides *what happens*; every decision about *what it means*
//! is `model`'s or `proof`'s (through [`crate::mutants`]).

use crate::config::{CheckConfig, Fault, LivenessCheck};
use crate::durable_log::{DurableLog, Snapshot};
use crate::mutants::{
    agent_step_as, append_fenced, archive_covers, check_rearm, controller_step, effects_as,
    node_proof, recovery_events, reply_before_persist, snapshot_trusted,
};
use crate::world::Hashed;
use crate::world::{App, Artifact, ChunkDisk, ChunkLeft, Ghost, Msg, World};
use invariants::{Rule, Violation};
use model::agent::{
    agent_apply, timer_due, AgentEffect, AgentEvent, AgentInput, AgentStage, AgentState,
    StagingStep,
};
use model::chunks::{ChunkSet, CHUNKS_IN_FLIGHT_MAX};
use model::controller::{
    apply, Actor, ControllerState, Effect, Event, Input, Outcome, Resolution, Role,
    OBSERVATION_INTERVAL_MIN_MS,
};
use model::recovery::{Exit, Row, StageFailure};
use model::{Decision, Digest, NodeId, OpId, Plan, RolloutId, ToAgent};
use proof::{Fresh, ProofMode, Verdict};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// The release every node serves at the start.
pub const V1: Digest = Digest::repeat(1);
/// The release the first rollout moves to.
pub const V2: Digest = Digest::repeat(2);
/// (with `config`) The app whose configuration the operator records.
pub const CONFIG_APP: &str = "app";

/// (with `config`) The fingerprint of the app's revision 1, as the runtime
/// would compute it (the model only compares it).
pub fn config_fingerprint() -> Digest {
    Digest::repeat(41)
}
/// The release a superseding rollout moves to.
pub const V3: Digest = Digest::repeat(3);

/// Upper bound on observations recorded along one path (`Observe`): two
/// are enough for "looked fine, then drifted", and the bound keeps the
/// space finite (each observation is a new recorded time).
pub const OBSERVATIONS_MAX: u8 = 2;

/// The old release `swap-old` puts behind a node serving `release`: v1, the
/// release every node started with; none for a node serving v1.
pub fn old_release(release: Digest) -> Option<Digest> {
    (release != V1).then_some(V1)
}

/// The release a `foreign-route` stand-in answers as, on a node serving
/// `release`: v1, or v2 on a node serving v1 (a stand-in answering as the
/// intended release of a node that was rolled back).
pub fn other_release(release: Digest) -> Digest {
    if release == V1 {
        V2
    } else {
        V1
    }
}

/// A fault the environment attaches to a delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AppFault {
    /// The switched-to release answers wrongly while healthy.
    WrongAnswer,
    /// The restored baseline's process dies right after the restore.
    RestoredDies,
    /// (`agent-crash`) The agent is SIGKILLed while it stages the op's
    /// release, leaving this on disk: nothing (before the write), a torn
    /// write, or the whole artifact not yet journaled as staged. It
    /// restarts at once.
    CrashWhileStaging(Artifact),
    /// (`stage-error`) The staging attempt fails this way.
    StageFails(StageFailure),
    /// (`agent-crash`, with `--migration`) The agent is SIGKILLed while the
    /// release's migration runs (after its start was journaled). It
    /// restarts at once.
    CrashWhileMigrating,
    /// (`migration-error`) The release's migration fails; the driver puts
    /// the data's snapshot back.
    MigrationFails,
}

/// (`agent-crash`, `--chunks` 2 or more) Where a crash strikes a running
/// chunked fetch, beyond "nothing of the next write done" (which is
/// [`Action::CrashAgent`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CrashAt {
    /// In the write of the next chunk not verified, leaving it so.
    Chunk(ChunkLeft),
    /// Every chunk verified, in the tree's assembly, leaving it so.
    Tree(Artifact),
}

/// The crash points of a chunk's write the checker offers.
pub const CHUNK_CRASHES: [ChunkLeft; 3] =
    [ChunkLeft::Partial, ChunkLeft::Torn, ChunkLeft::Complete];

/// The crash points of the tree's assembly the checker offers.
pub const TREE_CRASHES: [Artifact; 2] = [Artifact::Torn, Artifact::Good];

/// The staging failures `stage-error` injects, one of each class.
pub const STAGE_FAILURES: [StageFailure; 3] = [
    StageFailure::Transient {
        bundle_missing: true,
    },
    StageFailure::Permanent,
    StageFailure::MissingEvidence,
];

/// One step of the environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    Deliver {
        msg: Msg,
        fault: Option<AppFault>,
    },
    Duplicate(Msg),
    Drop(Msg),
    Retry(NodeId),
    /// (`stage-error`) The retry timer fires for staging that failed
    /// transiently, and the attempt it starts fails too.
    RetryFailing(NodeId, StageFailure),
    Timeout(OpId),
    Partition(NodeId),
    Heal(NodeId),
    CrashAgent(NodeId),
    CrashController,
    /// (`controller-failover`) A standby wins the election and takes over
    /// from the durable log; the old leader lives on, deposed.
    Failover,
    /// (`controller-failover`) An agent's message reaches the deposed
    /// leader (its link to it is still open).
    DeliverToDeposed(Msg),
    Flush,
    ProbeRoute(NodeId),
    Pause(RolloutId),
    Resume(RolloutId),
    Approve(RolloutId),
    Resolve(OpId),
    RollBack(OpId),
    Start,
    Supersede,
    /// (`swap-old`) A healthy old release is swapped in behind a settled
    /// node's agent.
    SwapOld(NodeId),
    /// (`foreign-route`) A stand-in answers a settled node's route as
    /// another release.
    ForeignRoute(NodeId),
    /// (`old-config`) A settled node's app of a configured deployment is
    /// restarted by hand with an older configuration.
    OldConfig(NodeId),
    /// An operator asks a live proof of a settled node (with proofs on).
    Prove(NodeId),
    /// A verifier records a fresh observation of a settled node: the
    /// controller's route probe merged with the agent's readback, as
    /// `Input::Observe` (with proofs on).
    Observe(NodeId),
    /// (with the roster on) An operator retires an enrolled node, once
    /// along a path; the controller refuses while the node holds a live op.
    Retire(NodeId),
    /// (with `config`) An operator records the app's configuration
    /// revision, once along a path.
    SetConfig,
    /// (with `operators`) The viewer tries to approve a rollout: the real
    /// rules refuse it (O1), so it changes nothing.
    ViewerApproves(RolloutId),
    /// (`snapshot`) The leader writes a snapshot of its durable state,
    /// between batches.
    Snapshot,
    /// (`snapshot`) The controller is SIGKILLed while it writes a
    /// snapshot: the record is torn (it does not verify), and it restarts.
    TornSnapshot,
    /// (`snapshot`) Archiving deletes the log entries the newest snapshot
    /// that verifies covers.
    Archive,
    /// (`--chunks` 2 or more) The running attempt on a node fetches its
    /// next chunk not verified, which lands and verifies; with every
    /// chunk verified, it assembles the tree and verifies it whole.
    FetchChunk(NodeId),
    /// (`agent-crash`, `--chunks` 2 or more) The agent is SIGKILLed in the
    /// middle of its running fetch, and restarts at once.
    CrashMidFetch(NodeId, CrashAt),
    /// (`identity-conflict`) The controller's watch reports that two
    /// agents hold this node's identity.
    IdentityConflict(NodeId),
    /// (`arches`) The operator starts a release built for x86_64 only
    /// over the mixed fleet (its canary runs on aarch64).
    StartNarrow,
    /// (`identity-conflict`) An operator releases a quarantined node
    /// (having revoked the copied certificate).
    ReleaseNode(NodeId),
}

/// The checked system for one configuration.
#[derive(Clone, Debug)]
pub struct FleetModel {
    pub cfg: CheckConfig,
    /// The world to start from instead of [`FleetModel::initial`]'s
    /// fresh fleet: a real state projected by [`crate::projection`]
    /// (`--from-log`). Shared: the checker clones the model per thread.
    pub start: Option<std::sync::Arc<World>>,
}

/// A narrator collects what a transition does, in domain words and with
/// where it happens, while the transition runs; `None` when only the next
/// state matters (the checker's hot path). The numbered text of a
/// counterexample reads the words; its sequence diagram reads the places.
pub type Narration = Option<Vec<Told>>;

/// A batch of controller events folded into the state they lead to, with
/// what the checks found and what the controller sends: what
/// [`FleetModel::controller`] carries out in a world.
struct Batch {
    /// The state after the batch.
    state: Hashed<model::controller::ControllerState>,
    /// Every event the core decided (a mutant's may break W1).
    events: Vec<Event>,
    /// The events folded, each with whether it settled a decided op of a
    /// paused rollout (the ghost's `settled_while_paused`).
    folded: Vec<(Event, bool)>,
    /// The commands the effects send, in order.
    sends: Vec<(NodeId, ToAgent)>,
    /// The first rule a check of an event or of the resulting state broke.
    violation: Option<Violation>,
}

/// What the controller did with one input in one state.
#[derive(Clone)]
enum Reaction {
    Refused,
    Unchanged,
    Changed(Arc<Batch>),
}

/// Most (mutant, state, input) reactions one checker thread remembers; the
/// memo is emptied when full (bounded memory whatever the run's size).
const CONTROLLER_MEMO_ENTRIES_MAX: usize = 1 << 16;

type MemoKey = (Option<crate::mutants::Mutant>, u64, Input);

thread_local! {
    /// [`FleetModel::controller_remembered`]'s memo, per checker thread.
    static CONTROLLER_MEMO: RefCell<HashMap<MemoKey, (Hashed<model::controller::ControllerState>, Reaction), ahash::RandomState>> =
        const { RefCell::new(HashMap::with_hasher(ahash::RandomState::with_seeds(9, 10, 11, 12))) };
}

/// One thing a transition did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Told {
    /// A line of the counterexample's text, and where it happened.
    Line { at: Place, text: String },
    /// What the controller appended so far is durable (appended and
    /// flushed): only the diagram shows it, on the log's lane.
    Durable,
    /// A node's agent puts a message on the network: only the diagram
    /// shows it (the text tells the agent's events, which imply it).
    Sent { from: NodeId, text: String },
}

/// Where a narrated line happens (a lane of the sequence diagram).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The controller decides or refuses something.
    Controller,
    /// The controller appends an event to its log.
    Appends,
    /// The controller puts a message for this node on the network.
    Sends(NodeId),
    /// The node's agent does something.
    Node(NodeId),
    /// A fault strikes the node (a crash, what a crash leaves on disk).
    NodeFault(NodeId),
    /// A fault strikes the controller.
    ControllerFault,
    /// An operator (or a verifier on their behalf).
    Operator,
    /// The network (shown on the message's arrow, not as a note).
    Network,
}

fn say(narration: &mut Narration, at: Place, line: impl FnOnce() -> String) {
    if let Some(lines) = narration {
        lines.push(Told::Line { at, text: line() });
    }
}

fn say_sent(narration: &mut Narration, from: NodeId, msg: &Msg) {
    if let Some(lines) = narration {
        let text = describe_msg(msg);
        lines.push(Told::Sent { from, text });
    }
}

fn say_durable(narration: &mut Narration) {
    if let Some(lines) = narration {
        lines.push(Told::Durable);
    }
}

impl FleetModel {
    /// A model of the given configuration.
    pub fn new(cfg: CheckConfig) -> Self {
        FleetModel { cfg, start: None }
    }

    /// Step 0 of a counterexample: how its start reads.
    pub fn start_words(&self) -> &'static str {
        match self.start {
            Some(_) => "0. the projected start (above): the live part of the real log",
            None => "0. every node serves v1 and has said so to the controller",
        }
    }

    /// A model that starts from `world` (a projected real state) rather
    /// than from a fresh fleet.
    pub fn from_world(cfg: CheckConfig, world: World) -> Self {
        FleetModel {
            cfg,
            start: Some(std::sync::Arc::new(world)),
        }
    }

    /// Every node, canary (index 0) first.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> {
        (0..=self.cfg.followers as u32).map(NodeId)
    }

    fn plan(&self, release: Digest) -> Plan {
        Plan {
            release,
            canary: NodeId(0),
            followers: (1..=self.cfg.followers as u32).map(NodeId).collect(),
            slots_max: u16::from(self.cfg.slots),
            approval_after_canary: self.cfg.approval,
        }
    }

    /// With [`CheckConfig::waves`]: waves of `wave_size` followers (one
    /// per follower by default), a failure budget of 0.
    fn policy(&self) -> model::plan::Policy {
        model::plan::Policy {
            wave_ends: self.cfg.wave_ends(),
            approval_between_waves: false,
            max_failed: Some(0),
            max_unknown: None,
        }
    }

    /// The initial world: every node serves v1 and said so; the operator's
    /// first action is to start the rollout to v2. A model made by
    /// [`FleetModel::from_world`] starts from its given world instead.
    pub fn initial(&self) -> World {
        let mut world = self.initial_unchecked();
        // The state rules are recorded where the controller's state changes;
        // the initial one (a projected real state, with `--from-log`) did
        // not come through a step.
        let state = world.controller().into_owned();
        world.record(invariants::check_state(&state));
        world.record(invariants::l1_nothing_left_ends(&state));
        world
    }

    /// (with `operators`) The admin, bootstrapped, and a viewer it adds.
    fn record_operators(&self, world: &mut World, quiet: &mut Narration) {
        let bootstrap = Input::AddOperator {
            name: ADMIN.into(),
            role: Role::Admin,
            credential: ADMIN_CREDENTIAL,
        };
        assert!(
            self.controller(world, bootstrap, quiet),
            "the admin bootstraps"
        );
        let viewer = Input::AddOperator {
            name: VIEWER.into(),
            role: Role::Viewer,
            credential: VIEWER_CREDENTIAL,
        };
        assert!(
            self.operator(world, viewer, quiet),
            "the admin adds a viewer"
        );
    }

    fn initial_unchecked(&self) -> World {
        if let Some(start) = &self.start {
            return World::clone(start);
        }
        let count = self.cfg.followers as usize + 1;
        let mut world = World {
            durable: Default::default(),
            log: self
                .cfg
                .faults
                .has(Fault::Snapshot)
                .then(DurableLog::default),
            deposed: None,
            unflushed: Vec::new(),
            agents: vec![
                Hashed::new(AgentState {
                    serving: Some(V1),
                    release_chunks: self.cfg.chunks,
                    ..AgentState::default()
                });
                count
            ],
            apps: vec![App::Correct; count],
            artifacts: vec![Artifact::Absent; count],
            chunks: vec![ChunkDisk::default(); count],
            net: Default::default(),
            partitioned: 0,
            faults_used: 0,
            observations: 0,
            ghost: Ghost::default(),
            violation: None,
            symmetry: self
                .cfg
                .symmetry
                .then_some((self.cfg.followers, self.cfg.wave_size)),
        };
        let mut quiet = None;
        if self.cfg.operators {
            self.record_operators(&mut world, &mut quiet);
        }
        if self.cfg.roster {
            for node in self.nodes() {
                let input = Input::EnrollNode {
                    name: node.to_string(),
                    labels: Default::default(),
                    public: format!("{node}:8080"),
                };
                let enrolled = self.operator(&mut world, input, &mut quiet);
                assert!(enrolled, "{node} enrolls in an empty roster");
            }
        }
        for node in self.nodes() {
            self.agent(&mut world, node, AgentInput::Connected, None, &mut quiet);
        }
        self.deliver_all_to_controller(&mut world);
        if self.cfg.arches {
            // What the agents' drivers send after every Hello.
            for node in self.nodes() {
                let msg = model::ToController::Platform {
                    platform: Self::platform_of(node),
                };
                self.controller(&mut world, Input::FromAgent { node, msg }, &mut quiet);
            }
        }
        world
    }

    /// (`arches`) What `node` runs on: the canary aarch64, followers x86_64.
    fn platform_of(node: NodeId) -> model::platform::Platform {
        use model::platform::{Arch, Os, Platform};
        let arch = if node == NodeId(0) {
            Arch::Aarch64
        } else {
            Arch::X86_64
        };
        Platform {
            arch,
            os: Os::Linux,
        }
    }

    /// The architectures of the release a start action offers: with
    /// `arches`, a tree for each (or x86_64 only, for `StartNarrow`).
    fn release_arches(&self, action: Action) -> model::platform::ReleaseArches {
        use model::platform::{Arch, ArchSet, ReleaseArches};
        match (self.cfg.arches, action) {
            (false, _) => ReleaseArches::Any,
            (true, Action::StartNarrow) => ReleaseArches::Only(ArchSet::of([Arch::X86_64])),
            (true, _) => ReleaseArches::Only(ArchSet::of([Arch::Aarch64, Arch::X86_64])),
        }
    }

    fn deliver_all_to_controller(&self, world: &mut World) {
        let inbound: Vec<Msg> = world
            .net
            .iter()
            .filter(|m| matches!(m, Msg::ToController(..)))
            .copied()
            .collect();
        for msg in inbound {
            world.net.remove(&msg);
            if let Msg::ToController(node, msg) = msg {
                self.controller(world, Input::FromAgent { node, msg }, &mut None);
            }
        }
    }

    fn budget_left(&self, world: &World, fault: Fault) -> bool {
        self.cfg.faults.has(fault) && world.faults_used < self.cfg.max_faults
    }

    /// Feed one input to the controller core and carry out its effects the
    /// way the runtime does: append, flush, apply, then send (S7). Returns
    /// whether the controller accepted it (a refusal changes nothing).
    /// [`Self::controller`] for an operator's input: with `operators` on,
    /// the admin makes it ([`Input::Acting`]); otherwise it comes bare.
    pub fn operator(&self, world: &mut World, input: Input, narration: &mut Narration) -> bool {
        let input = if self.cfg.operators {
            Input::Acting {
                actor: admin(),
                input: Box::new(input),
            }
        } else {
            input
        };
        self.controller(world, input, narration)
    }

    pub fn controller(&self, world: &mut World, input: Input, narration: &mut Narration) -> bool {
        if narration.is_none()
            && world.unflushed.is_empty()
            && !reply_before_persist(self.cfg.mutant)
        {
            return self.controller_remembered(world, input);
        }
        let current = world.controller();
        let Ok(events) = controller_step(self.cfg.mutant, &current, &input) else {
            say(narration, Place::Controller, || {
                "   controller refuses it".to_string()
            });
            return false;
        };
        // An input that yields no event leaves the state as it is: no copy.
        if !events.is_empty() {
            let before = current.into_owned();
            self.controller_events(world, before, events, narration);
        }
        true
    }

    /// [`FleetModel::controller`] through a per-thread memo: what the core
    /// does with an input depends on its state and the input alone, and the
    /// search meets the same pair again and again (the same delivery to the
    /// controller, with other messages or agents in another order). A hit
    /// must be the same state by [`Hashed::same_as`] (128 bits of hash).
    fn controller_remembered(&self, world: &mut World, input: Input) -> bool {
        let key = (self.cfg.mutant, world.durable.hash_value(), input);
        let known = CONTROLLER_MEMO.with(|memo| {
            memo.borrow()
                .get(&key)
                .filter(|(before, _)| before.same_as(&world.durable))
                .map(|(_, reaction)| reaction.clone())
        });
        let reaction = match known {
            Some(reaction) => reaction,
            None => {
                let reaction = match controller_step(self.cfg.mutant, &world.durable, &key.2) {
                    Err(_) => Reaction::Refused,
                    Ok(events) if events.is_empty() => Reaction::Unchanged,
                    Ok(events) => {
                        let before = world.durable.to_owned_value();
                        Reaction::Changed(Arc::new(self.fold_batch(before, events, &mut None)))
                    }
                };
                CONTROLLER_MEMO.with(|memo| {
                    let mut memo = memo.borrow_mut();
                    if memo.len() >= CONTROLLER_MEMO_ENTRIES_MAX {
                        memo.clear();
                    }
                    memo.insert(key, (world.durable.clone(), reaction.clone()));
                });
                reaction
            }
        };
        match reaction {
            Reaction::Refused => false,
            Reaction::Unchanged => true,
            Reaction::Changed(batch) => {
                self.land(world, &batch, &mut None);
                true
            }
        }
    }

    fn controller_events(
        &self,
        world: &mut World,
        before: model::controller::ControllerState,
        events: Vec<Event>,
        narration: &mut Narration,
    ) {
        if events.is_empty() && world.unflushed.is_empty() {
            // Nothing appended, nothing applied, nothing sent: the state is
            // the durable one, already checked and hashed when it was made.
            return;
        }
        let batch = self.fold_batch(before, events, narration);
        self.land(world, &batch, narration);
    }

    /// Fold a batch into `before` as the runtime does, checking each event
    /// and the state it leads to: a function of the state and the events
    /// alone (the world is not read), so [`FleetModel::controller_remembered`]
    /// may keep it.
    fn fold_batch(
        &self,
        before: model::controller::ControllerState,
        events: Vec<Event>,
        narration: &mut Narration,
    ) -> Batch {
        // imbl maps: the copy T1 compares with shares the original's nodes.
        let mut state = before.clone();
        let mut timers = Vec::new();
        let mut violation = Ok(());
        let mut note = |result: Result<(), Violation>| {
            if violation.is_ok() {
                violation = result;
            }
        };
        let mut folded = Vec::new();
        let mut sends = Vec::new();
        let mut acts = invariants::OperatorActs::batch();
        for event in &events {
            note(invariants::check_event(&state, event));
            note(acts.check(&state, event));
            let paused = match event {
                Event::OpSettled { op, .. } => state
                    .op(*op)
                    .and_then(|o| state.rollout(o.rollout))
                    .is_some_and(|r| r.paused.is_some()),
                _ => false,
            };
            // `apply` asserts W1; a mutant's event that breaks it is recorded
            // above and skipped here, so the checker reports it, not panics.
            if model::controller::referents_exist(&state, event).is_err() {
                continue;
            }
            apply(&mut state, event);
            let settled_while_paused = match event {
                Event::OpSettled { op, .. } => {
                    paused && state.op_summary(*op).is_some_and(|o| o.decision.is_some())
                }
                _ => false,
            };
            folded.push((event.clone(), settled_while_paused));
            say(narration, Place::Appends, || {
                let mut line = format!("   controller: {event}");
                if let Event::OpGranted { rollout, .. } = event {
                    let max = state.rollout(*rollout).map_or(0, |r| r.plan.slots_max);
                    line.push_str(&format!(
                        " — slots {}/{}",
                        state.slots_occupied(*rollout),
                        max
                    ));
                }
                line
            });
            for effect in effects_as(self.cfg.mutant, &state, event) {
                match effect {
                    Effect::Send { to, msg } => sends.push((to, msg)),
                    timer => timers.push(timer),
                }
            }
        }
        note(invariants::t1_batch_deadlines(
            &before, &state, &events, &timers,
        ));
        // A batch is appended and applied atomically, so state rules are
        // checked on the state it leads to, not between its events.
        note(invariants::check_state(&state));
        note(invariants::l1_nothing_left_ends(&state));
        Batch {
            state: Hashed::new(state),
            events,
            folded,
            sends,
            violation: violation.err(),
        }
    }

    /// Carry a folded batch out in `world`: record, flush, then send.
    fn land(&self, world: &mut World, batch: &Batch, narration: &mut Narration) {
        if let Some(v) = &batch.violation {
            world.record(Err(v.clone()));
        }
        for (event, settled_while_paused) in &batch.folded {
            self.note_ghost(world, event, *settled_while_paused);
        }
        if reply_before_persist(self.cfg.mutant) {
            world.unflushed.extend(batch.events.iter().cloned());
        } else {
            // The batch is durable (appended and flushed) before any effect.
            world.durable = batch.state.clone();
            say_durable(narration);
            if let Some(log) = world.log.as_mut() {
                log.append(batch.folded.iter().map(|(e, _)| e.clone()));
            }
        }
        for (to, msg) in &batch.sends {
            world.record(invariants::s7_persist_before_reply(&world.durable, msg));
            if world.ghost.cloned & (1 << to.0) != 0 {
                world.record(Err(Violation::new(
                    Rule::QuarantineSilences,
                    format!(
                        "{} sent to {to} while two agents hold its identity",
                        describe_command(msg)
                    ),
                )));
            }
            say(narration, Place::Sends(*to), || {
                format!("   controller sends {} to {to}", describe_command(msg))
            });
            world.net.insert(Msg::ToAgent(*to, *msg));
        }
    }

    /// `controller-failover`: the old leader's state (durable plus what it
    /// had not flushed) lives on as the deposed leader; the standby takes
    /// over as a restart of the same rollout (SPEC §3): it reads the durable
    /// log, recovers as a restarted controller does, and the agents find it.
    /// Unlike a crash, nothing in flight is lost: the old leader's messages
    /// may still arrive, and agents' messages may still reach it.
    fn failover(&self, world: &mut World, narration: &mut Narration) {
        world.deposed = Some(Box::new(world.controller().into_owned()));
        world.unflushed.clear();
        let recovered = self.restart_state(world, narration);
        let events = recovery_events(self.cfg.mutant, &recovered);
        if !events.is_empty() {
            self.controller_events(world, recovered, events, narration);
        }
        for node in self.nodes() {
            if !world.is_partitioned(node) {
                self.agent(world, node, AgentInput::Connected, None, narration);
            }
        }
    }

    /// The deposed leader decides `input` on what it knew. Under the real
    /// rules the append its decision needs is fenced (the storage compares
    /// the leader key with its lease, `eventlog::etcd_storage`): nothing is
    /// appended, nothing released, and it stops acting. `unfenced-append`
    /// lets the append through into the shared log.
    fn deposed(&self, world: &mut World, input: Input, narration: &mut Narration) {
        let Some(stale) = world.deposed.as_deref().cloned() else {
            return;
        };
        let events = match controller_step(self.cfg.mutant, &stale, &input) {
            Ok(events) if !events.is_empty() => events,
            _ => {
                say(narration, Place::Controller, || {
                    "   deposed leader: nothing to append".to_string()
                });
                return;
            }
        };
        if append_fenced(self.cfg.mutant) {
            say(narration, Place::Controller, || {
                "   deposed leader's append is FENCED: nothing appended or sent; it stops"
                    .to_string()
            });
            world.deposed = None;
            world.ghost.deposed_fenced = true;
            return;
        }
        let mut own = stale;
        for event in &events {
            if model::controller::referents_exist(&own, event).is_ok() {
                apply(&mut own, event);
            }
        }
        world.deposed = Some(Box::new(own));
        say(narration, Place::Controller, || {
            "   deposed leader appends to the shared log:".to_string()
        });
        let log = world.durable.to_owned_value();
        self.controller_events(world, log, events, narration);
    }

    fn note_ghost(&self, world: &mut World, event: &Event, settled_while_paused: bool) {
        match event {
            Event::OpUnknown { op, .. } => world.ghost.were_unknown |= 1 << op.0,
            Event::OpSettled { op, outcome } => {
                if world.ghost.were_unknown & (1 << op.0) != 0 {
                    world.ghost.unknown_settled = true;
                }
                if settled_while_paused {
                    world.ghost.settled_while_paused = true;
                }
                if *outcome == Outcome::RolledBack {
                    world.ghost.rolled_back = true;
                    if world.ghost.migration_failed & (1 << op.0) != 0 {
                        world.ghost.failed_migration_rolled_back = true;
                    }
                    if world.ghost.rolled_back_by_operator & (1 << op.0) != 0 {
                        world.ghost.operator_rollback_proven = true;
                    }
                }
            }
            _ => {}
        }
    }

    /// Feed one input to a node's agent core; journal, then act.
    pub fn agent(
        &self,
        world: &mut World,
        node: NodeId,
        input: AgentInput,
        fault: Option<AppFault>,
        narration: &mut Narration,
    ) {
        let index = node.0 as usize;
        let out = agent_step_as(self.cfg.mutant, &world.agents[index], input);
        let mut journal = *world.agents[index];
        for event in &out.events {
            world.record(invariants::check_agent_event(&journal, event));
            world.record(invariants::s8_switch_agrees_with_record(
                &world.durable,
                event,
            ));
            self.note_recovery(world, node, event);
            world.record(invariants::s8_close_only_settled(
                &world.durable,
                &journal,
                event,
            ));
            agent_apply(&mut journal, event);
            follow_agent_event(world, index, event, fault);
            say(narration, Place::Node(node), || {
                format!("   {node} {event}")
            });
        }
        world.agents[index] = Hashed::new(journal);
        for effect in out.effects {
            match effect {
                AgentEffect::Send(msg) => {
                    say_sent(narration, node, &Msg::ToController(node, msg));
                    world.net.insert(Msg::ToController(node, msg));
                }
                AgentEffect::ProbeRoute => {
                    let observation = world.observe(node);
                    self.agent(
                        world,
                        node,
                        AgentInput::Probed(observation),
                        None,
                        narration,
                    );
                }
                // The driver re-reads the disk: the ground truth, re-verified.
                AgentEffect::ObserveStaged => {
                    // A release found whole: the driver read its manifest.
                    if world.artifacts[index] == Artifact::Good {
                        self.declare_migration(world, node, narration);
                    }
                    let input = if self.cfg.chunks > 1 {
                        let tree = world.artifacts[index];
                        AgentInput::ChunksObserved(world.chunks[index].reading(tree))
                    } else {
                        AgentInput::StageObserved(world.artifacts[index].observed())
                    };
                    self.agent(world, node, input, fault, narration);
                }
                AgentEffect::StageArtifact => {
                    if self.stage(world, node, fault, narration) {
                        return; // the agent crashed: nothing more of this step
                    }
                }
                AgentEffect::RunMigration => {
                    if self.migrate(world, node, fault, narration) {
                        return; // the agent crashed: nothing more of this step
                    }
                }
            }
        }
    }

    /// (`--migration`) The driver read the staged release's manifest: it
    /// declares the configured migration (the core journals it once).
    fn declare_migration(&self, world: &mut World, node: NodeId, narration: &mut Narration) {
        if let Some(kind) = self.cfg.migration {
            let input = AgentInput::MigrationDeclared(kind);
            self.agent(world, node, input, None, narration);
        }
    }

    /// (`--migration`) Run the release's migration on `node` as `fault`
    /// says: it succeeds (the switch follows, with the delivery's fault),
    /// fails (the data is put back), or the agent is SIGKILLed while it
    /// runs (then restarts; returns true).
    fn migrate(
        &self,
        world: &mut World,
        node: NodeId,
        fault: Option<AppFault>,
        narration: &mut Narration,
    ) -> bool {
        match fault {
            Some(AppFault::CrashWhileMigrating) => {
                say(narration, Place::NodeFault(node), || {
                    format!("   {node}'s agent is SIGKILLed while the migration runs")
                });
                self.crash_agent(world, node, narration);
                true
            }
            Some(AppFault::MigrationFails) => {
                self.agent(world, node, AgentInput::MigrationFailed, None, narration);
                false
            }
            _ => {
                self.agent(world, node, AgentInput::Migrated, fault, narration);
                false
            }
        }
    }

    /// Run a staging attempt on `node` as `fault` says: it stages, fails,
    /// or the agent is SIGKILLed mid-way (then restarts; returns true).
    fn stage(
        &self,
        world: &mut World,
        node: NodeId,
        fault: Option<AppFault>,
        narration: &mut Narration,
    ) -> bool {
        if self.cfg.chunks > 1 {
            return self.stage_chunks(world, node, fault, narration);
        }
        let index = node.0 as usize;
        match fault {
            Some(AppFault::CrashWhileStaging(left)) => {
                world.artifacts[index] = left;
                say(narration, Place::NodeFault(node), || {
                    format!(
                        "   {node}'s agent is SIGKILLed while staging, leaving {left:?} on disk"
                    )
                });
                self.crash_agent(world, node, narration);
                true
            }
            Some(AppFault::StageFails(failure)) => {
                let input = AgentInput::StageFailed(failure);
                self.agent(world, node, input, None, narration);
                false
            }
            _ => {
                world.artifacts[index] = Artifact::Good;
                self.declare_migration(world, node, narration);
                self.agent(world, node, AgentInput::Staged, fault, narration);
                false
            }
        }
    }

    /// (`--chunks` 2 or more) A staging attempt in chunks: it fails at
    /// once as `fault` says, or runs, one chunk per
    /// [`Action::FetchChunk`], so that a crash may strike between any two
    /// steps of it ([`Action::CrashAgent`], [`Action::CrashMidFetch`]).
    fn stage_chunks(
        &self,
        world: &mut World,
        node: NodeId,
        fault: Option<AppFault>,
        narration: &mut Narration,
    ) -> bool {
        if let Some(AppFault::StageFails(failure)) = fault {
            let input = AgentInput::StageFailed(failure);
            self.agent(world, node, input, None, narration);
        }
        false
    }

    /// The next chunk of `node`'s running fetch: the lowest the journal
    /// does not hold as verified; `None` when every chunk is (or no
    /// attempt runs).
    fn next_chunk(&self, world: &World, node: NodeId) -> Option<u8> {
        let agent = &world.agents[node.0 as usize];
        let op = agent
            .op
            .filter(|o| o.stage == AgentStage::Staging(StagingStep::Running))?;
        ChunkSet::all(agent.chunk_count())
            .without(op.verified)
            .indexes()
            .next()
    }

    /// [`Action::FetchChunk`]: the next chunk lands whole and verifies (the
    /// driver reports it), or, every chunk verified, the tree is
    /// assembled, verifies whole and the attempt reports it staged.
    fn fetch_chunk(&self, world: &mut World, node: NodeId, narration: &mut Narration) {
        let index = node.0 as usize;
        match self.next_chunk(world, node) {
            Some(chunk) => {
                world.chunks[index].write(chunk);
                self.check_refetch(world, node);
                let input = AgentInput::ChunkFetched(chunk);
                self.agent(world, node, input, None, narration);
            }
            None => {
                world.artifacts[index] = Artifact::Good;
                self.declare_migration(world, node, narration);
                self.agent(world, node, AgentInput::Staged, None, narration);
            }
        }
    }

    /// [`Action::CrashMidFetch`]: the crash leaves the chunk being written,
    /// or the tree being assembled, as `at` says; the agent restarts.
    fn crash_mid_fetch(
        &self,
        world: &mut World,
        node: NodeId,
        at: CrashAt,
        narration: &mut Narration,
    ) {
        let index = node.0 as usize;
        match (self.next_chunk(world, node), at) {
            (Some(chunk), CrashAt::Chunk(left)) => {
                world.chunks[index].leave(chunk, left);
                self.check_refetch(world, node);
                say(narration, Place::NodeFault(node), || {
                    format!("   {node}'s chunk {chunk} is left {left:?}")
                });
            }
            (None, CrashAt::Tree(tree)) => {
                world.artifacts[index] = tree;
                say(narration, Place::NodeFault(node), || {
                    format!("   {node}'s tree is left {tree:?}")
                });
            }
            _ => {}
        }
        world.chunks[index].cut_short = world.chunks[index].cut_short.saturating_add(1);
        self.crash_agent(world, node, narration);
    }

    /// The bound on a resume (issue #23: `resume_refetched_bytes` ≤ one
    /// chunk): a chunk is fetched a second time only when a crash cut its
    /// fetch short, at most [`CHUNKS_IN_FLIGHT_MAX`] per crash. Anything
    /// more means a verified chunk was fetched again.
    fn check_refetch(&self, world: &mut World, node: NodeId) {
        let disk = world.chunks[node.0 as usize];
        if disk.refetched > 0 {
            world.ghost.chunk_refetched = true;
        }
        let bound = disk.cut_short.saturating_mul(CHUNKS_IN_FLIGHT_MAX);
        if disk.refetched > bound {
            world.record(Err(Violation::new(
                Rule::S14,
                format!(
                    "{node} fetched {} chunk(s) a second time after {} crash(es) mid-fetch (at most {bound})",
                    disk.refetched, disk.cut_short
                ),
            )));
        }
    }

    /// With the liveness properties on, a lost message breaks the link it
    /// travelled on and the agent dials again (the runtime's links are
    /// QUIC streams: a message is lost only with its connection, and a
    /// dead connection is redialled), which is how the runtime retries a
    /// lost command: the controller re-sends the live op's command on the
    /// `Hello`. Without liveness the loss stays a bare drop, which keeps
    /// every safety configuration's space (and pinned count) as it was; a
    /// node cut off reconnects when its partition heals instead.
    fn reconnect_after_loss(&self, world: &mut World, node: NodeId, narration: &mut Narration) {
        if self.cfg.liveness == LivenessCheck::Off || world.is_partitioned(node) {
            return;
        }
        say(narration, Place::NodeFault(node), || {
            format!("   the link to {node} breaks with the message; {node}'s agent reconnects")
        });
        self.agent(world, node, AgentInput::Connected, None, narration);
    }

    /// SIGKILL `node`'s agent and start it again: its connection dies with
    /// it, the supervisor restarts a dead app, the journal survives.
    fn crash_agent(&self, world: &mut World, node: NodeId, narration: &mut Narration) {
        world.net.retain(|m| m.node() != node);
        let index = node.0 as usize;
        if world.apps[index] == App::Down {
            world.apps[index] = App::Correct;
        }
        let serving = world.agents[index].serving;
        self.agent(
            world,
            node,
            AgentInput::Restarted { serving },
            None,
            narration,
        );
    }

    /// S14 against the ground truth (a resume only on an artifact that is
    /// really whole on disk), and the table rows taken, for coverage.
    fn note_recovery(&self, world: &mut World, node: NodeId, event: &AgentEvent) {
        let AgentEvent::Recovery { op, reading, exit } = *event else {
            return;
        };
        let artifact = world.artifacts[node.0 as usize];
        if exit == Exit::Resume && artifact != Artifact::Good {
            world.record(Err(Violation::new(
                Rule::S14,
                format!("{node} resumed {op} on a staged artifact that is {artifact:?} on disk"),
            )));
        }
        if self.cfg.faults.has(Fault::StageError)
            || self.cfg.chunks > 1
            || self.cfg.migration.is_some()
        {
            let row = reading.row();
            let bit = Row::ALL.iter().position(|r| *r == row).unwrap_or(0);
            world.ghost.recovery_rows |= 1 << bit;
        }
    }

    /// Every action the environment may take in `world`.
    pub fn enabled(&self, world: &World, actions: &mut Vec<Action>) {
        if world.violation.is_some() {
            return; // the path to here is the counterexample; stop.
        }
        let ctrl = world.controller();
        self.enabled_network(world, actions);
        for node in self.nodes() {
            self.enabled_node(world, &ctrl, node, actions);
        }
        self.enabled_deadlines(world, &ctrl, actions);
        self.enabled_operator(world, &ctrl, actions);
        self.enabled_identity(world, &ctrl, actions);
        if self.budget_left(world, Fault::ControllerCrash) {
            actions.push(Action::CrashController);
        }
        // A takeover mid-rollout, the case fencing is for: before the first
        // rollout nothing is in flight and the old leader has nothing to
        // decide (it keeps the space small).
        let mid_rollout = ctrl.active_rollout().is_some();
        if mid_rollout
            && world.deposed.is_none()
            && self.budget_left(world, Fault::ControllerFailover)
        {
            actions.push(Action::Failover);
        }
        if world.deposed.is_some() {
            let inbound = world
                .net
                .iter()
                .filter(|m| matches!(m, Msg::ToController(..)));
            for msg in inbound.filter(|m| !world.is_partitioned(m.node())) {
                actions.push(Action::DeliverToDeposed(*msg));
            }
        }
        if !world.unflushed.is_empty() {
            actions.push(Action::Flush);
        }
        self.enabled_log(world, actions);
        if ctrl.rollouts.is_empty() {
            actions.push(Action::Start);
            if self.cfg.arches {
                actions.push(Action::StartNarrow);
            }
        }
        if self.cfg.supersede && ctrl.active_rollout().is_some() && ctrl.rollouts.len() == 1 {
            actions.push(Action::Supersede);
        }
        self.enabled_after_settlement(world, &ctrl, actions);
    }

    /// [`Self::enabled`]: deliver, duplicate or drop each message in flight.
    fn enabled_network(&self, world: &World, actions: &mut Vec<Action>) {
        for msg in &world.net {
            if !world.is_partitioned(msg.node()) {
                actions.push(Action::Deliver {
                    msg: *msg,
                    fault: None,
                });
                for fault in self.delivery_faults(world, msg) {
                    actions.push(Action::Deliver {
                        msg: *msg,
                        fault: Some(fault),
                    });
                }
                if self.budget_left(world, Fault::Dup) {
                    actions.push(Action::Duplicate(*msg));
                }
            }
            if self.budget_left(world, Fault::Loss) {
                actions.push(Action::Drop(*msg));
            }
        }
    }

    /// [`Self::enabled`]: what may happen at one node.
    fn enabled_node(
        &self,
        world: &World,
        ctrl: &ControllerState,
        node: NodeId,
        actions: &mut Vec<Action>,
    ) {
        let agent = &world.agents[node.0 as usize];
        // The retry timer fires only when nothing is in flight to or from
        // the node: a retry is for lost messages, not for impatience.
        if timer_due(agent) && self.silent(world, node) {
            actions.push(Action::Retry(node));
            if model::agent::outbox(agent).is_none() && self.budget_left(world, Fault::StageError) {
                // Staging waits for the timer after a transient failure.
                for failure in STAGE_FAILURES {
                    actions.push(Action::RetryFailing(node, failure));
                }
            }
        }
        if world.is_partitioned(node) {
            actions.push(Action::Heal(node));
        } else if self.budget_left(world, Fault::Partition) {
            actions.push(Action::Partition(node));
        }
        if self.budget_left(world, Fault::AgentCrash) {
            actions.push(Action::CrashAgent(node));
        }
        self.enabled_fetch(world, node, actions);
        let live_unknown = ctrl
            .nodes
            .get(&node)
            .and_then(|n| n.live_op)
            .and_then(|op| ctrl.op(op))
            .is_some_and(|o| o.unknown.is_some());
        if live_unknown && !world.is_partitioned(node) {
            actions.push(Action::ProbeRoute(node));
        }
    }

    /// Every deadline the controller ever armed may fire at any moment: the
    /// runtime arms one per grant and never cancels it (as quinn-proto's
    /// `handle_timeout`, a timer is an input that may come late). A deadline
    /// that fires while its node is silent or cut off is due; one that fires
    /// after its op settled or went UNKNOWN is late and free (the real rules
    /// make it change nothing). Only an *early* one, while an answer is on
    /// its way, is a fault: it spends a unit of the budget
    /// ([`Fault::EarlyTimeout`]), which keeps the space bounded.
    fn enabled_deadlines(&self, world: &World, ctrl: &ControllerState, actions: &mut Vec<Action>) {
        for op in ctrl.ops.values() {
            if !self.early_timeout(world, ctrl, op.id)
                || self.budget_left(world, Fault::EarlyTimeout)
            {
                actions.push(Action::Timeout(op.id));
            }
        }
    }

    /// Whether a deadline of `op` firing now is early: the op is live, not
    /// UNKNOWN, and its node is reachable with something in flight.
    fn early_timeout(&self, world: &World, ctrl: &ControllerState, op: OpId) -> bool {
        ctrl.op(op).is_some_and(|o| {
            o.occupies_slot()
                && o.unknown.is_none()
                && !self.silent(world, o.node)
                && !world.is_partitioned(o.node)
        })
    }

    /// The operator offers every command in every state, whether or not it
    /// makes sense there: early, twice, to a settled op or a superseded
    /// rollout. The controller decides; a refusal is a cheap transition that
    /// changes nothing (no ghost record, no fault), so it adds no state.
    /// What bounds the space is how often a command may be *accepted* along
    /// one path: a pause, a resume and a roll back once each (as before);
    /// approvals and resolutions are accepted at most once per rollout or op
    /// by their nature.
    fn enabled_operator(&self, world: &World, ctrl: &ControllerState, actions: &mut Vec<Action>) {
        for r in &ctrl.rollouts {
            // Approving is how the gate's operator acts; it is offered in
            // every configuration, so an approval of a plan without a gate
            // is tried too.
            actions.push(Action::Approve(r.id));
            if self.cfg.operators {
                actions.push(Action::ViewerApproves(r.id));
            }
            if self.cfg.operator && world.ghost.pauses == 0 {
                actions.push(Action::Pause(r.id));
            }
            if self.cfg.operator && world.ghost.resumes == 0 {
                actions.push(Action::Resume(r.id));
            }
        }
        if !self.cfg.operator {
            return;
        }
        for op in ctrl.ops.values() {
            actions.push(Action::Resolve(op.id));
            if self.cfg.rollback && world.ghost.rolled_back_by_operator == 0 {
                actions.push(Action::RollBack(op.id));
            }
        }
        // One retirement along a path keeps the space small; the roster
        // itself says whether one happened (a retired node stays retired).
        let retired = ctrl.roster.iter().any(|(_, e)| e.retired);
        if self.cfg.roster && !retired {
            actions.extend(self.nodes().map(Action::Retire));
        }
        if self.cfg.config && ctrl.configs.is_empty() {
            actions.push(Action::SetConfig);
        }
    }

    /// (`identity-conflict`) A conflict on a node whose identity is not
    /// already cloned (a fault), and a release of a quarantined node.
    fn enabled_identity(&self, world: &World, ctrl: &ControllerState, actions: &mut Vec<Action>) {
        if !self.cfg.faults.has(Fault::IdentityConflict) {
            return;
        }
        for node in self.nodes() {
            let cloned = world.ghost.cloned & (1 << node.0) != 0;
            if !cloned && self.budget_left(world, Fault::IdentityConflict) {
                actions.push(Action::IdentityConflict(node));
            }
            if ctrl.is_quarantined(node) {
                actions.push(Action::ReleaseNode(node));
            }
        }
    }

    /// (`snapshot`) A snapshot may be written between batches (none while
    /// a mutant holds events unflushed: the leader snapshots what is
    /// durable), up to [`crate::durable_log::SNAPSHOTS_MAX`] along a path;
    /// a crash may tear the write (a fault); archiving may delete what the
    /// newest snapshot that verifies covers.
    fn enabled_log(&self, world: &World, actions: &mut Vec<Action>) {
        let Some(log) = &world.log else {
            return;
        };
        if world.unflushed.is_empty() && log.may_snapshot() {
            actions.push(Action::Snapshot);
            if self.budget_left(world, Fault::Snapshot) {
                actions.push(Action::TornSnapshot);
            }
        }
        if archive_covers(self.cfg.mutant, log) > log.archived {
            actions.push(Action::Archive);
        }
    }

    /// The faults that strike a settled node, and the proof actions.
    fn enabled_after_settlement(
        &self,
        world: &World,
        ctrl: &ControllerState,
        actions: &mut Vec<Action>,
    ) {
        if !self.cfg.proofs_enabled() {
            return;
        }
        for node in self.nodes() {
            let Some(release) = settled_release(ctrl, node) else {
                continue;
            };
            // A fault strikes a node that really serves what it settled on:
            // the drift is then the fault's, and nothing else's.
            if world.truly_serves(node, release) {
                if old_release(release).is_some() && self.budget_left(world, Fault::SwapOld) {
                    actions.push(Action::SwapOld(node));
                }
                if self.budget_left(world, Fault::ForeignRoute) {
                    actions.push(Action::ForeignRoute(node));
                }
                let configured = matches!(world.deployed_configuration(node), Some(Some(_)));
                if configured && self.budget_left(world, Fault::OldConfig) {
                    actions.push(Action::OldConfig(node));
                }
            }
            // Like the controller's own probe: not of a node cut off.
            if !world.is_partitioned(node) {
                actions.push(Action::Prove(node));
                if world.observations < OBSERVATIONS_MAX {
                    actions.push(Action::Observe(node));
                }
            }
        }
    }

    /// What a proof or an observation of `node` reads back now: the
    /// controller's probe of the public route and the agent's readback, at
    /// the logical time of the next observation (one interval after the
    /// last, so the rate bound never refuses one).
    pub fn fresh(&self, world: &World, node: NodeId) -> Fresh {
        let now_ms = (u64::from(world.observations) + 1) * OBSERVATION_INTERVAL_MIN_MS;
        let readback = world.readback(node);
        // As the controller does: a release the readback names in place of
        // the one served is judged by its own probe spec (the model's
        // releases are all held, their version their name).
        let older = world.agents[node.0 as usize]
            .serving
            .and_then(|serving| readback.artifact?.other_release(serving))
            .map(|release| proof::KnownRelease {
                release,
                version: release.to_string(),
                answer: world.answer_as(node, release),
            });
        Fresh {
            route: world.observe(node),
            route_at_ms: now_ms,
            agent: Ok((readback, now_ms)),
            isolation: None,
            older,
            // `config-read-from-document`: what the agent installed, not
            // what the serving process runs with.
            configuration: if self.cfg.mutant
                == Some(crate::mutants::Mutant::ConfigReadFromDocument)
            {
                world.deployed_configuration(node)
            } else {
                world.configuration_read(node)
            },
        }
    }

    /// Nothing in flight to or from `node`.
    fn silent(&self, world: &World, node: NodeId) -> bool {
        !world.net.iter().any(|m| m.node() == node)
    }

    fn delivery_faults(&self, world: &World, msg: &Msg) -> Vec<AppFault> {
        match msg {
            Msg::ToAgent(
                node,
                ToAgent::CommitReply {
                    op,
                    decision: Decision::Commit,
                    ..
                },
            ) => self.commit_faults(world, *node, *op),
            Msg::ToAgent(_, ToAgent::Restore { .. })
                if self.budget_left(world, Fault::AppCrash) =>
            {
                vec![AppFault::RestoredDies]
            }
            Msg::ToAgent(node, cmd @ ToAgent::Apply { .. })
                if starts_staging(&world.agents[node.0 as usize], cmd) =>
            {
                let mut faults = Vec::new();
                // With chunks, crashes strike the running fetch as actions.
                if self.budget_left(world, Fault::AgentCrash) && self.cfg.chunks < 2 {
                    let left = [Artifact::Absent, Artifact::Torn, Artifact::Good];
                    faults.extend(left.map(AppFault::CrashWhileStaging));
                }
                if self.budget_left(world, Fault::StageError) {
                    faults.extend(STAGE_FAILURES.map(AppFault::StageFails));
                }
                faults
            }
            _ => Vec::new(),
        }
    }

    /// (`--chunks` 2 or more) A node's running fetch goes on, or a crash
    /// strikes it in the middle of a write (the crash before a write is
    /// [`Action::CrashAgent`]). Fetching needs the link to the controller.
    fn enabled_fetch(&self, world: &World, node: NodeId, actions: &mut Vec<Action>) {
        let running = world.agents[node.0 as usize]
            .op
            .is_some_and(|o| o.stage == AgentStage::Staging(StagingStep::Running));
        if self.cfg.chunks < 2 || !running {
            return;
        }
        if !world.is_partitioned(node) {
            actions.push(Action::FetchChunk(node));
        }
        if !self.budget_left(world, Fault::AgentCrash) {
            return;
        }
        let at: Vec<CrashAt> = match self.next_chunk(world, node) {
            Some(_) => CHUNK_CRASHES.into_iter().map(CrashAt::Chunk).collect(),
            None => TREE_CRASHES.into_iter().map(CrashAt::Tree).collect(),
        };
        actions.extend(at.into_iter().map(|at| Action::CrashMidFetch(node, at)));
    }

    /// Take `action` in `world`, narrating into `narration` when asked.
    pub fn transition(&self, world: &World, action: Action, narration: &mut Narration) -> World {
        let mut next = world.clone();
        match action {
            Action::Deliver { msg, fault } => {
                next.net.remove(&msg);
                if fault.is_some() {
                    next.faults_used += 1;
                }
                self.deliver(&mut next, msg, fault, narration);
            }
            Action::Duplicate(msg) => self.duplicate(&mut next, msg, narration),
            Action::Drop(msg) => {
                next.faults_used += 1;
                next.net.remove(&msg);
                self.reconnect_after_loss(&mut next, msg.node(), narration);
            }
            Action::Timeout(op) => {
                let early = self.early_timeout(world, &world.controller(), op);
                self.controller(&mut next, Input::Timeout { op }, narration);
                // Only an early deadline that changed something is a fault:
                // a late one the real rules ignore adds no state.
                if early && next != *world {
                    next.faults_used += 1;
                }
            }
            Action::Flush => flush(&mut next, narration),
            Action::ProbeRoute(node) => {
                let observation = next.observe(node);
                self.controller(
                    &mut next,
                    Input::RouteProbed { node, observation },
                    narration,
                );
            }
            Action::Retry(_)
            | Action::RetryFailing(_, _)
            | Action::DeliverToDeposed(_)
            | Action::Partition(_)
            | Action::Heal(_)
            | Action::CrashAgent(_)
            | Action::FetchChunk(_)
            | Action::CrashMidFetch(_, _)
            | Action::CrashController
            | Action::Snapshot
            | Action::TornSnapshot
            | Action::Archive
            | Action::Failover
            | Action::SwapOld(_)
            | Action::ForeignRoute(_)
            | Action::OldConfig(_) => self.fault_action(&mut next, action, narration),
            Action::Pause(_)
            | Action::Resume(_)
            | Action::Approve(_)
            | Action::Resolve(_)
            | Action::RollBack(_)
            | Action::Start
            | Action::StartNarrow
            | Action::Supersede
            | Action::Prove(_)
            | Action::Retire(_)
            | Action::SetConfig
            | Action::ViewerApproves(_)
            | Action::Observe(_) => self.operator_action(&mut next, action, narration),
            Action::IdentityConflict(_) | Action::ReleaseNode(_) => {
                self.identity_action(&mut next, action, narration);
            }
        }
        // D1 in every state: whenever the log changed (an append, a
        // snapshot, an archive), what a restart would rebuild from it now
        // is still the fold. A restart checks it too, as it rebuilds.
        if next.violation.is_none() && next.log != world.log {
            self.check_restart(&mut next, false, narration);
        }
        next
    }

    /// `Action::Duplicate`: the network keeps a copy and delivers one.
    fn duplicate(&self, next: &mut World, msg: Msg, narration: &mut Narration) {
        next.faults_used += 1;
        say(narration, Place::Network, || {
            "   (the network keeps a duplicate)".to_string()
        });
        self.deliver(next, msg, None, narration);
    }

    /// [`Self::transition`] for `identity-conflict`: the conflict the
    /// controller's watch reports, and an operator's release.
    fn identity_action(&self, next: &mut World, action: Action, narration: &mut Narration) {
        match action {
            Action::IdentityConflict(node) => {
                next.faults_used += 1;
                next.ghost.cloned |= 1 << node.0;
                let input = Input::IdentityConflict {
                    node,
                    first_peer: "agent".to_string(),
                    second_peer: "copy".to_string(),
                };
                self.controller(next, input, narration);
            }
            Action::ReleaseNode(node) => {
                // The operator revoked the copy first: what the release
                // sends (the node's grant) goes to its one agent.
                let cloned = next.ghost.cloned;
                next.ghost.cloned &= !(1 << node.0);
                if !self.operator(next, Input::ReleaseNode { node }, narration) {
                    next.ghost.cloned = cloned;
                }
            }
            other => unreachable!("not an identity action: {other:?}"),
        }
    }

    /// [`Self::transition`] for a fault or a node's own action (a retry, a
    /// crash, a partition, a fetch, a swapped release, a message reaching a
    /// deposed leader).
    fn fault_action(&self, next: &mut World, action: Action, narration: &mut Narration) {
        match action {
            Action::Partition(node) => {
                next.faults_used += 1;
                next.partitioned |= 1 << node.0;
            }
            Action::Heal(node) => {
                next.partitioned &= !(1 << node.0);
                self.agent(next, node, AgentInput::Connected, None, narration);
            }
            Action::CrashAgent(node) => {
                next.faults_used += 1;
                self.crash_agent(next, node, narration);
            }
            Action::FetchChunk(node) => self.fetch_chunk(next, node, narration),
            Action::CrashMidFetch(node, at) => {
                next.faults_used += 1;
                self.crash_mid_fetch(next, node, at, narration);
            }
            Action::CrashController => {
                next.faults_used += 1;
                self.crash_controller(next, narration);
            }
            Action::Snapshot | Action::TornSnapshot | Action::Archive => {
                self.log_action(next, action, narration);
            }
            Action::Failover => {
                next.faults_used += 1;
                self.failover(next, narration);
            }
            Action::SwapOld(node) => {
                next.faults_used += 1;
                let index = node.0 as usize;
                if let Some(old) = next.agents[index].serving.and_then(old_release) {
                    next.apps[index] = App::SwappedOld(old);
                }
            }
            Action::ForeignRoute(node) => {
                next.faults_used += 1;
                let index = node.0 as usize;
                if let Some(serving) = next.agents[index].serving {
                    next.apps[index] = App::Foreign(other_release(serving));
                }
            }
            Action::OldConfig(node) => {
                next.faults_used += 1;
                next.apps[node.0 as usize] = App::OldConfig;
            }
            Action::Retry(node) => {
                self.agent(next, node, AgentInput::Retry, None, narration);
            }
            Action::RetryFailing(node, failure) => {
                next.faults_used += 1;
                let fault = Some(AppFault::StageFails(failure));
                self.agent(next, node, AgentInput::Retry, fault, narration);
            }
            Action::DeliverToDeposed(msg) => {
                next.net.remove(&msg);
                if let Msg::ToController(node, msg) = msg {
                    self.deposed(next, Input::FromAgent { node, msg }, narration);
                }
            }
            // `transition` routes only these here.
            _ => unreachable!("fault_action: {action:?}"),
        }
    }

    /// [`Self::transition`] for an operator's action. The ghost records
    /// what the operator did only when the controller accepted it: a
    /// refused command changes nothing.
    /// The operator's start: staged (waves, architectures, configuration)
    /// only when the checked configuration needs it. With `config`, v2 is
    /// the deployment of v1's code with the app's revision 1.
    fn start_input(&self, action: Action) -> Input {
        let plan = self.plan(V2);
        if self.cfg.waves || self.cfg.arches || self.cfg.config {
            Input::StartStaged {
                plan,
                // Waves only with `waves`: `arches` alone starts the
                // one-wave plan `StartRollout` would.
                policy: if self.cfg.waves {
                    self.policy()
                } else {
                    model::plan::Policy::default()
                },
                arches: self.release_arches(action),
                deploys: self.cfg.config.then(|| model::config::Deploys {
                    code: V1,
                    app: CONFIG_APP.into(),
                    revision: 1,
                    fingerprint: config_fingerprint(),
                }),
            }
        } else {
            Input::StartRollout { plan }
        }
    }

    fn operator_action(&self, next: &mut World, action: Action, narration: &mut Narration) {
        match action {
            Action::Pause(rollout) => {
                if self.operator(next, Input::Pause { rollout }, narration) {
                    next.ghost.pauses += 1;
                }
            }
            Action::Resume(rollout) => {
                if self.operator(next, Input::Resume { rollout }, narration) {
                    next.ghost.resumes += 1;
                }
            }
            Action::Approve(rollout) => {
                if self.operator(next, Input::Approve { rollout }, narration) {
                    next.ghost.approved_by_operator |= 1 << rollout.0;
                }
            }
            Action::Resolve(op) => self.resolve(next, op, narration),
            Action::RollBack(op) => {
                if self.operator(next, Input::RollBack { op }, narration) {
                    next.ghost.rolled_back_by_operator |= 1 << op.0;
                }
            }
            Action::Start | Action::StartNarrow => {
                let input = self.start_input(action);
                self.operator(next, input, narration);
            }
            Action::Supersede => {
                self.operator(
                    next,
                    Input::StartRollout {
                        plan: self.plan(V3),
                    },
                    narration,
                );
            }
            Action::Prove(node) => self.prove(next, node, narration),
            Action::Retire(node) => {
                let name = node.to_string();
                self.operator(next, Input::RetireNode { name }, narration);
            }
            Action::SetConfig => {
                let revision = model::config::ConfigRevision {
                    app: CONFIG_APP.into(),
                    revision: 1,
                    fingerprint: config_fingerprint(),
                    env: vec![(
                        "GREETING".into(),
                        model::config::LoggedValue::Plain("hi".into()),
                    )],
                    files: Vec::new(),
                };
                self.operator(next, Input::SetConfig { revision }, narration);
            }
            Action::Observe(node) => self.observe_node(next, node, narration),
            Action::ViewerApproves(rollout) => {
                let approve = Box::new(Input::Approve { rollout });
                let input = Input::Acting {
                    actor: viewer(),
                    input: approve,
                };
                self.controller(next, input, narration);
            }
            // `transition` routes only these here.
            _ => unreachable!("operator_action: {action:?}"),
        }
    }

    /// A verifier records a fresh observation of `node` (`Input::Observe`).
    fn observe_node(&self, next: &mut World, node: NodeId, narration: &mut Narration) {
        let fresh = self.fresh(next, node);
        let (observation, source) = proof::merge_readback(&fresh);
        next.observations += 1;
        let input = Input::Observe {
            node,
            observation,
            source,
            now_ms: fresh.route_at_ms,
        };
        self.operator(next, input, narration);
    }

    /// The operator looks at an op's node, records what is there, and
    /// resolves the op by it.
    fn resolve(&self, next: &mut World, op: OpId, narration: &mut Narration) {
        let ctrl = next.controller().into_owned();
        if let Some(o) = ctrl.op(op) {
            // The operator looks at the node and records what is there.
            let observation = next.observe(o.node);
            let resolution = if observation.proves_serving(o.release) {
                Resolution::ConfirmNew
            } else if o.baseline.is_some_and(|b| observation.proves_serving(b)) {
                Resolution::ConfirmBaseline
            } else {
                Resolution::Abandon
            };
            say(narration, Place::Operator, || {
                format!("   operator observes {}: {observation}", o.node)
            });
            let input = Input::Resolve {
                op,
                observation,
                resolution,
            };
            if self.operator(next, input, narration) {
                next.ghost.resolved_by_operator |= 1 << op.0;
            }
        }
    }

    /// SIGKILL the controller and start it again: only the durable log
    /// survives (with `snapshot`, as a restart reads it), every connection
    /// drops and the agents reconnect.
    fn crash_controller(&self, world: &mut World, narration: &mut Narration) {
        world.unflushed.clear();
        world.net.clear();
        let recovered = self.restart_state(world, narration);
        let events = recovery_events(self.cfg.mutant, &recovered);
        if !events.is_empty() {
            self.controller_events(world, recovered, events, narration);
        }
        for node in self.nodes() {
            if !world.is_partitioned(node) {
                self.agent(world, node, AgentInput::Connected, None, narration);
            }
        }
    }

    /// The state a restarted controller (or a standby taking over) starts
    /// from: the durable state, which with `snapshot` is what it rebuilds
    /// from the log as it reads it, or the path ends on D1.
    fn restart_state(&self, world: &mut World, narration: &mut Narration) -> ControllerState {
        self.check_restart(world, true, narration);
        let state = world.durable.to_owned_value();
        world.record(check_rearm(self.cfg.mutant, &state));
        state
    }

    /// (`snapshot`) D1: rebuild the state from the log as a restart reads
    /// it (the snapshots the real start, or a mutant, trusts) and compare
    /// it with the fold of every durable event; a replayed event that
    /// breaks a rule is recorded too. `restarting`: a real restart, which
    /// the ghost and the narration record.
    fn check_restart(&self, world: &mut World, restarting: bool, narration: &mut Narration) {
        let Some(log) = &world.log else {
            return;
        };
        let trusted = |s: &Snapshot| snapshot_trusted(self.cfg.mutant, s);
        let rebuilt = log.rebuild(trusted);
        let archived = log.archived;
        let torn_skipped = rebuilt.as_ref().is_ok_and(|r| {
            log.snapshots
                .iter()
                .any(|s| !s.verified && r.skipped.contains(&s.covers))
        });
        let rebuilt = match rebuilt {
            Ok(rebuilt) => rebuilt,
            Err(violation) => {
                say(narration, Place::ControllerFault, || {
                    format!("   a restart cannot rebuild the state: {violation}")
                });
                world.record(Err(violation));
                return;
            }
        };
        if restarting {
            say(narration, Place::Controller, || {
                format!("   controller {}", describe_rebuild(&rebuilt))
            });
            world.ghost.restarted_from_snapshot |= rebuilt.from.is_some() && archived > 0;
            world.ghost.skipped_torn_snapshot |= torn_skipped;
        }
        world.record(invariants::d1_restart_rebuilds_the_fold(
            &rebuilt.state,
            &world.durable,
        ));
    }

    /// (`snapshot`) Write a snapshot, tear one (the controller crashes and
    /// restarts), or archive the entries the newest snapshot covers.
    fn log_action(&self, world: &mut World, action: Action, narration: &mut Narration) {
        let durable = world.durable.clone();
        let Some(log) = world.log.as_mut() else {
            return;
        };
        match action {
            Action::Snapshot => log.snapshot(&durable),
            Action::TornSnapshot => {
                log.torn_snapshot();
                world.faults_used += 1;
                self.crash_controller(world, narration);
            }
            Action::Archive => {
                let covers = archive_covers(self.cfg.mutant, log);
                log.archive_to(covers);
            }
            _ => {}
        }
    }

    /// An operator's live proof of `node`, judged by the proof crate (or a
    /// mutant of its use). Only a proof that says `verified` while the
    /// route does not really serve the intended release leaves a trace
    /// (the ghost `proof_lied`, P1); any other proof changes nothing.
    fn prove(&self, world: &mut World, node: NodeId, narration: &mut Narration) {
        let ctrl = world.controller();
        let intended = ctrl.intended_rollout(node).map(|r| r.plan.release);
        let really = intended.is_some_and(|r| world.truly_serves(node, r));
        if really && narration.is_none() {
            // Whatever it says, a proof of a node that really serves the
            // intended release leaves no trace: skip judging it (a proof
            // builds its texts, which dominates the checker's time).
            return;
        }
        let fresh = self.fresh(world, node);
        let proof = node_proof(self.cfg.mutant, &ctrl, node, &fresh);
        say(narration, Place::Controller, || {
            let mode = match proof.mode {
                ProofMode::Live => "live",
                ProofMode::Recorded => "recorded",
            };
            format!("   proof ({mode}): {}", proof.summary)
        });
        let lied = proof.verdict == Verdict::Verified && !really;
        drop(ctrl);
        if lied && world.ghost.proof_lied.is_none() {
            world.ghost.proof_lied = Some(node);
        }
    }

    fn deliver(
        &self,
        world: &mut World,
        msg: Msg,
        fault: Option<AppFault>,
        narration: &mut Narration,
    ) {
        match msg {
            Msg::ToAgent(node, cmd) => {
                self.agent(world, node, AgentInput::Command(cmd), fault, narration)
            }
            Msg::ToController(node, msg) => {
                self.controller(world, Input::FromAgent { node, msg }, narration);
            }
        }
    }

    /// [`Self::describe`] for a deadline firing: late, early or due.
    fn describe_timeout(&self, world: &World, op: OpId) -> String {
        let ctrl = world.controller();
        match ctrl.op(op) {
            Some(o) if !o.occupies_slot() => {
                format!(
                    "deadline of {op} fires LATE, after it settled (timers are never cancelled)"
                )
            }
            _ if self.early_timeout(world, &ctrl, op) => {
                format!("deadline of {op} fires EARLY, while an answer is on its way")
            }
            _ => format!("deadline of {op} passes with no settling evidence"),
        }
    }

    /// [`Self::describe`] for an archive: the log entries it deletes.
    fn describe_archive(&self, world: &World) -> String {
        let (from, to) = world.log.as_ref().map_or((0, 0), |log| {
            (log.archived, archive_covers(self.cfg.mutant, log))
        });
        format!("archiving DELETES log entries {from}..{to} (a snapshot covers them)")
    }

    /// One line naming the action, in domain words.
    /// [`Self::describe`] for the actions of `arches` and `identity-conflict`.
    fn describe_added(action: &Action) -> String {
        match action {
            Action::StartNarrow => format!(
                "operator starts rollout r0 of v2 built for x86_64 only (canary {} runs on aarch64)",
                NodeId(0)
            ),
            Action::IdentityConflict(node) => {
                format!("a second agent presents {node}'s certificate: the controller sees an identity conflict")
            }
            Action::ReleaseNode(node) => format!("operator releases {node}"),
            Action::Retire(node) => format!("operator retires {node}"),
            Action::SetConfig => format!(
                "operator sets {CONFIG_APP}'s configuration, revision 1 ({})",
                config_fingerprint()
            ),
            Action::OldConfig(node) => format!(
                "{node}'s app is restarted BY HAND with an old configuration (fingerprint {})",
                crate::world::OLD_CONFIG_FINGERPRINT
            ),
            other => unreachable!("described by describe: {other:?}"),
        }
    }

    pub fn describe(&self, world: &World, action: &Action) -> String {
        match action {
            Action::Deliver { msg, fault } => describe_delivery(msg, *fault),
            Action::Duplicate(msg) => format!(
                "deliver {} and keep a duplicate in flight",
                describe_msg(msg)
            ),
            Action::Drop(msg) => format!("network LOSES {}", describe_msg(msg)),
            Action::Retry(node) => format!("{node} retries what it has outstanding"),
            Action::RetryFailing(node, failure) => {
                format!("{node}'s retry timer fires; staging fails again ({failure})")
            }
            Action::Timeout(op) => self.describe_timeout(world, *op),
            Action::Partition(node) => format!("network PARTITIONS {node}"),
            Action::Heal(node) => format!("partition of {node} heals; agent reconnects"),
            Action::CrashAgent(node) => format!("agent on {node} is SIGKILLed and restarts"),
            Action::FetchChunk(node) => match self.next_chunk(world, *node) {
                Some(chunk) => format!("{node} fetches chunk {chunk}; it lands whole"),
                None => format!("{node} assembles the tree from its chunks; it verifies whole"),
            },
            Action::CrashMidFetch(node, at) => self.describe_crash_mid_fetch(world, *node, *at),
            Action::CrashController => describe_controller_crash(world),
            Action::Failover => {
                "a standby TAKES OVER from the durable log; the old leader lives on, deposed"
                    .to_string()
            }
            Action::DeliverToDeposed(msg) => {
                format!("{} reaches the DEPOSED leader", describe_msg(msg))
            }
            Action::Flush => format!(
                "controller flushes {} events to disk",
                world.unflushed.len()
            ),
            Action::ProbeRoute(node) => format!("controller probes {node}'s public route"),
            Action::Pause(r) | Action::Resume(r) | Action::Approve(r) | Action::ViewerApproves(r) => {
                describe_rollout_action(action, *r)
            }
            Action::Resolve(op) => format!("operator resolves {op} with an observation"),
            Action::RollBack(op) => format!("operator orders {op} rolled back"),
            Action::Start => format!(
                "operator starts rollout r0 of v2 (canary {}, {} followers, slots {})",
                NodeId(0),
                self.cfg.followers,
                self.cfg.slots
            ),
            Action::Supersede => "operator starts a rollout of v3, superseding the current one".into(),
            Action::SwapOld(node) => describe_swap_old(world, *node),
            Action::ForeignRoute(node) => describe_foreign_route(world, *node),
            Action::Prove(node) => format!(
                "operator asks a live proof of {node} (route probe and agent readback)"
            ),
            Action::Observe(node) => format!(
                "verifier records an observation of {node} (route probe and agent readback) at {} ms",
                (u64::from(world.observations) + 1) * OBSERVATION_INTERVAL_MIN_MS
            ),
            Action::StartNarrow
            | Action::Retire(_)
            | Action::SetConfig
            | Action::OldConfig(_)
            | Action::IdentityConflict(_)
            | Action::ReleaseNode(_) => Self::describe_added(action),
            Action::Snapshot => format!(
                "controller writes a snapshot of its state after {}",
                entries(world.log.as_ref().map_or(0, DurableLog::len))
            ),
            Action::TornSnapshot => format!(
                "controller is SIGKILLed while writing a snapshot of {} (the write is TORN: it does not verify) and restarts",
                entries(world.log.as_ref().map_or(0, DurableLog::len))
            ),
            Action::Archive => self.describe_archive(world),
        }
    }
}

impl FleetModel {
    /// [`Action::CrashMidFetch`] in domain words.
    fn describe_crash_mid_fetch(&self, world: &World, node: NodeId, at: CrashAt) -> String {
        let what = match (self.next_chunk(world, node), at) {
            (Some(chunk), CrashAt::Chunk(ChunkLeft::Partial)) => {
                format!("writing chunk {chunk}: it is left PARTIAL")
            }
            (Some(chunk), CrashAt::Chunk(ChunkLeft::Torn)) => {
                format!("writing chunk {chunk}: it is left TORN (whole length, not as sent)")
            }
            (Some(chunk), CrashAt::Chunk(_)) => {
                format!("after chunk {chunk} was written and verified, before it was journaled")
            }
            (_, CrashAt::Tree(Artifact::Torn)) => {
                "assembling the tree: it is left TORN".to_string()
            }
            _ => "after the tree verified, before it was journaled as staged".to_string(),
        };
        format!("agent on {node} is SIGKILLed {what}, and restarts")
    }
}

/// `n` log entries, in words.
/// What really serves, and what is on disk, follow an agent's event: the
/// route switch, the restore, a new op's release not on disk yet.
fn follow_agent_event(
    world: &mut World,
    index: usize,
    event: &AgentEvent,
    fault: Option<AppFault>,
) {
    match event {
        AgentEvent::Switched { .. } => {
            world.apps[index] = if fault == Some(AppFault::WrongAnswer) {
                App::Wrong
            } else {
                App::Correct
            }
        }
        AgentEvent::Restored { .. } => {
            world.apps[index] = if fault == Some(AppFault::RestoredDies) {
                App::Down
            } else {
                App::Correct
            }
        }
        AgentEvent::AbortedUnseen { .. } => world.ghost.aborted_unseen = true,
        AgentEvent::MigrationFailed { op } => world.ghost.migration_failed |= 1 << op.0,
        // A new op's release is not on disk yet.
        AgentEvent::Accepted { .. } => {
            world.artifacts[index] = Artifact::Absent;
            world.chunks[index] = ChunkDisk::default();
        }
        // The driver deletes the chunks that failed
        // re-verification: they are fetched again.
        AgentEvent::ChunksKept { kept, .. } => world.chunks[index].discard_except(*kept),
        _ => {}
    }
}

/// The unflushed events reach the durable log.
fn flush(next: &mut World, narration: &mut Narration) {
    let flushed = std::mem::take(&mut next.unflushed);
    let mut durable = next.durable.to_owned_value();
    for event in &flushed {
        apply(&mut durable, event);
    }
    next.durable = Hashed::new(durable);
    if let Some(log) = next.log.as_mut() {
        log.append(flushed);
    }
    say_durable(narration);
}

impl FleetModel {
    /// The faults a Commit's delivery may carry: a wrong answer from the
    /// switched release; with `--migration`, a crash while the migration
    /// runs or its failure (only when the Commit starts it).
    fn commit_faults(&self, world: &World, node: NodeId, op: OpId) -> Vec<AppFault> {
        let mut faults = Vec::new();
        if self.budget_left(world, Fault::WrongAnswer) {
            faults.push(AppFault::WrongAnswer);
        }
        let migrates = world.agents[node.0 as usize].op.is_some_and(|o| {
            o.id == op && o.stage == AgentStage::AwaitingDecision && o.migration.is_some()
        });
        if migrates && self.budget_left(world, Fault::AgentCrash) {
            faults.push(AppFault::CrashWhileMigrating);
        }
        if migrates && self.budget_left(world, Fault::MigrationError) {
            faults.push(AppFault::MigrationFails);
        }
        faults
    }
}

/// [`FleetModel::describe`] for a delivery, with the fault it carries.
fn describe_delivery(msg: &Msg, fault: Option<AppFault>) -> String {
    let what = describe_msg(msg);
    match fault {
        None => format!("deliver {what}"),
        Some(AppFault::WrongAnswer) => {
            format!("deliver {what}; the new release will answer WRONGLY (healthy process)")
        }
        Some(AppFault::RestoredDies) => {
            format!("deliver {what}; the restored app's process dies right after")
        }
        Some(AppFault::CrashWhileStaging(left)) => format!(
            "deliver {what}; the agent is SIGKILLed while staging ({})",
            match left {
                Artifact::Absent => "before writing the artifact",
                Artifact::Torn => "in the middle of writing the artifact",
                Artifact::Good => "after writing the artifact, before journaling it",
            }
        ),
        Some(AppFault::StageFails(failure)) => {
            format!("deliver {what}; staging fails ({failure})")
        }
        Some(AppFault::CrashWhileMigrating) => {
            format!("deliver {what}; the agent is SIGKILLed while the migration runs")
        }
        Some(AppFault::MigrationFails) => {
            format!("deliver {what}; the migration fails (the data's snapshot is put back)")
        }
    }
}

/// [`FleetModel::describe`] for a controller crash.
fn describe_controller_crash(world: &World) -> String {
    let lost = world.unflushed.len();
    if lost > 0 {
        format!("controller is SIGKILLed ({lost} unflushed events lost) and restarts")
    } else {
        "controller is SIGKILLed and restarts from its durable log".to_string()
    }
}

/// [`FleetModel::describe`] for an old release swapped in behind an agent.
fn describe_swap_old(world: &World, node: NodeId) -> String {
    let serving = world.agents[node.0 as usize].serving;
    match serving.and_then(old_release) {
        Some(old) => format!(
            "a healthy {old} is SWAPPED IN behind {node}'s agent (its proxy still answers as {})",
            serving.map_or("nothing".to_string(), |r| r.to_string())
        ),
        None => format!("an old release is swapped in behind {node}'s agent"),
    }
}

/// [`FleetModel::describe`] for a stand-in answering a node's route.
fn describe_foreign_route(world: &World, node: NodeId) -> String {
    let serving = world.agents[node.0 as usize].serving;
    match serving.map(other_release) {
        Some(other) => format!("a STAND-IN answers {node}'s public route, identifying as {other}"),
        None => format!("a stand-in answers {node}'s public route"),
    }
}

fn entries(n: usize) -> String {
    if n == 1 {
        "1 log entry".to_string()
    } else {
        format!("{n} log entries")
    }
}

/// Where a restart's state came from, in domain words.
fn describe_rebuild(rebuilt: &crate::durable_log::Rebuilt) -> String {
    let skipped = if rebuilt.skipped.is_empty() {
        String::new()
    } else {
        let covers: Vec<String> = rebuilt.skipped.iter().map(|c| c.to_string()).collect();
        format!(
            " (skipped the snapshot(s) of the first {} log entries: not verified, or their tail archived)",
            covers.join(", ")
        )
    };
    match rebuilt.from {
        Some(covers) => format!(
            "rebuilds its state from the snapshot of the first {}, then {} event(s) replayed{skipped}",
            entries(covers),
            rebuilt.replayed
        ),
        None => format!(
            "rebuilds its state from genesis, {} event(s) replayed{skipped}",
            rebuilt.replayed
        ),
    }
}

/// Whether delivering `cmd` to an agent in `agent` starts an op, and so
/// its staging: an `Apply` of the newest generation for an op newer than
/// any it took on (what `agent_step` accepts).
fn starts_staging(agent: &AgentState, cmd: &ToAgent) -> bool {
    let ToAgent::Apply { op, generation, .. } = *cmd else {
        return false;
    };
    generation >= agent.accepted
        && agent.highest_op.is_none_or(|h| op > h)
        && agent.op.is_none_or(|o| o.id != op)
}

/// The release `node` settled on: the controller's record of it has no
/// live op and a confirmed release.
pub fn settled_release(ctrl: &ControllerState, node: NodeId) -> Option<Digest> {
    ctrl.nodes
        .get(&node)
        .filter(|r| r.live_op.is_none())
        .and_then(|r| r.confirmed)
}

fn describe_command(cmd: &ToAgent) -> String {
    match cmd {
        ToAgent::Apply {
            op,
            generation,
            release,
        } => format!("apply {op} ({release}, {generation})"),
        ToAgent::CommitReply {
            op,
            generation,
            decision,
            ..
        } => format!("commit reply {decision:?} for {op} ({generation})"),
        ToAgent::Restore { op, generation } => format!("restore for {op} ({generation})"),
        ToAgent::Settled { op, .. } => format!("settled acknowledgement for {op}"),
    }
}

fn describe_msg(msg: &Msg) -> String {
    match msg {
        Msg::ToAgent(node, cmd) => format!("{} to {node}", describe_command(cmd)),
        Msg::ToController(node, m) => match m {
            model::ToController::Hello {
                serving,
                generation,
            } => match serving {
                Some(r) => format!("hello from {node} (serving {r}, {generation})"),
                None => format!("hello from {node} (serving nothing, {generation})"),
            },
            model::ToController::CommitRequest { op } => {
                format!("commit request for {op} from {node}")
            }
            model::ToController::Report {
                op,
                kind,
                observation,
            } => format!("report {kind:?} for {op} from {node}: {observation}"),
            model::ToController::Rejected { op, generation, .. } => {
                format!("stale-command rejection for {op} ({generation}) from {node}")
            }
            model::ToController::Platform { platform } => {
                format!("{node} runs on {platform}")
            }
        },
    }
}

/// (with `operators`) The admin's name and credential digest.
const ADMIN: &str = "root";
const ADMIN_CREDENTIAL: model::Digest = model::Digest::repeat(0xa0);
/// (with `operators`) The viewer's name and credential digest.
const VIEWER: &str = "vera";
const VIEWER_CREDENTIAL: model::Digest = model::Digest::repeat(0xa1);

/// The admin, as it acts.
fn admin() -> Actor {
    Actor::Operator {
        name: ADMIN.into(),
        credential: ADMIN_CREDENTIAL,
    }
}

/// The viewer, as it acts.
fn viewer() -> Actor {
    Actor::Operator {
        name: VIEWER.into(),
        credential: VIEWER_CREDENTIAL,
    }
}

/// An operator's action on rollout `r`, in words.
fn describe_rollout_action(action: &Action, r: RolloutId) -> String {
    match action {
        Action::Pause(_) => format!("operator pauses rollout {r}"),
        Action::Resume(_) => format!("operator resumes rollout {r}"),
        Action::ViewerApproves(_) => format!("viewer {VIEWER} tries to approve rollout {r}"),
        _ => format!("operator approves rollout {r}"),
    }
}
