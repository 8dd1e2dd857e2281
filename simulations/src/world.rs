//! The checked world: the controller (durable log folded, plus what a mutant
//! left unflushed), the agents' journals, what each node's route really
//! serves, the network, the fault budget, and ghost records that only the
//! properties read.

use invariants::Violation;
use model::agent::AgentState;
use model::controller::{apply, ControllerState, Event};
use model::{NodeId, ProbeVerdict, RouteObservation, ToAgent, ToController};
use std::borrow::Cow;
use std::collections::BTreeSet;

/// How the app instance behind a node's public route really behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum App {
    /// Answers what the probe spec expects.
    Correct,
    /// Answers, healthy, but wrongly.
    Wrong,
    /// The process is gone.
    Down,
}

/// A message in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Msg {
    ToAgent(NodeId, ToAgent),
    ToController(NodeId, ToController),
}

impl Msg {
    /// The node at the far end of the message.
    pub fn node(&self) -> NodeId {
        match self {
            Msg::ToAgent(n, _) | Msg::ToController(n, _) => *n,
        }
    }
}

/// Records that only the properties read; no rule consults them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    pub pauses: u8,
    pub resumes: u8,
    /// Rollouts an operator approved (bit per rollout id).
    pub approved_by_operator: u8,
    /// Ops an operator resolved (bit per op id).
    pub resolved_by_operator: u32,
    /// Ops that were UNKNOWN at some point (bit per op id).
    pub were_unknown: u32,
    /// An op that was UNKNOWN later settled with evidence.
    pub unknown_settled: bool,
    /// An op settled while its rollout was paused.
    pub settled_while_paused: bool,
    /// An op was rolled back with proof.
    pub rolled_back: bool,
    /// Ops an operator ordered rolled back (bit per op id).
    pub rolled_back_by_operator: u32,
    /// An op an operator ordered rolled back settled `RolledBack` (with the
    /// proof S9 asks for).
    pub operator_rollback_proven: bool,
    /// An agent aborted an op whose `Apply` it never received (superseded
    /// while the command was lost), so the op settled without a fetch.
    pub aborted_unseen: bool,
}

/// One state of the checked system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct World {
    /// The controller state folded from the durable log.
    pub durable: ControllerState,
    /// Events applied but not yet flushed. Always empty under the real rules,
    /// which flush before anything leaves; only `reply-before-persist` uses it.
    pub unflushed: Vec<Event>,
    /// Each agent's journal, by node index.
    pub agents: Vec<AgentState>,
    /// What each node's route really serves, by node index.
    pub apps: Vec<App>,
    /// Messages in flight (a set: identical copies are one message).
    pub net: BTreeSet<Msg>,
    /// Partitioned nodes, one bit per node index.
    pub partitioned: u8,
    pub faults_used: u8,
    pub ghost: Ghost,
    /// The first rule broken along the path to this state, if any.
    pub violation: Option<Violation>,
}

impl World {
    /// The controller as it decides now: durable state plus unflushed events.
    pub fn controller(&self) -> Cow<'_, ControllerState> {
        if self.unflushed.is_empty() {
            Cow::Borrowed(&self.durable)
        } else {
            let mut state = self.durable.clone();
            for event in &self.unflushed {
                apply(&mut state, event);
            }
            Cow::Owned(state)
        }
    }

    /// Whether `node` is cut off.
    pub fn is_partitioned(&self, node: NodeId) -> bool {
        self.partitioned & (1 << node.0) != 0
    }

    /// What a probe of `node`'s public route observes right now.
    ///
    /// The process uptime, restart count and artifact read-back stay `None`
    /// in every state: the rules never read them (S11), and varying them
    /// would only multiply the explored states (the pinned counts in
    /// `docs/model.md` depend on it).
    pub fn observe(&self, node: NodeId) -> RouteObservation {
        let serving = self.agents[node.0 as usize].serving;
        match (serving, self.apps[node.0 as usize]) {
            (Some(release), App::Correct) => RouteObservation::passing(release),
            (Some(release), App::Wrong) => RouteObservation {
                verdict: ProbeVerdict::WrongAnswer,
                identity: Some(release),
                process_healthy: true,
                process_uptime_ms: None,
                process_restarts: None,
                artifact: None,
            },
            (_, App::Down) | (None, _) => RouteObservation {
                verdict: ProbeVerdict::Unreachable,
                identity: None,
                process_healthy: false,
                process_uptime_ms: None,
                process_restarts: None,
                artifact: None,
            },
        }
    }

    /// Keep the first violation only: the path to it is the counterexample.
    pub fn record(&mut self, result: Result<(), Violation>) {
        if let (None, Err(v)) = (&self.violation, result) {
            self.violation = Some(v);
        }
    }
}
