//! The in-process fleet: a controller and model agents wired by hand, no
//! network between them, each agent probing its own route truthfully (or
//! wrongly, for a node whose v2 is broken) and staging at once.
//!
//! The controller side is any [`Core`]: the pure state (`model/tests/
//! flows.rs`) or the runtime's driver on a real log (the runtime tests wrap
//! it in their own type). The checker's harness in `invariants/tests`
//! differs on purpose: an adversarial network between the two, and every
//! rule checked at every step.

use crate::feed::feed_with;
use crate::fixtures::{V1, V2};
use model::agent::{agent_apply, agent_step, AgentEffect, AgentEvent, AgentInput, AgentState};
use model::controller::{effects, ControllerState, Effect, Event, Input, Refusal};
use model::recovery::{Observed, StageFailure};
use model::{NodeId, ProbeVerdict, RouteObservation, ToAgent};
use std::collections::VecDeque;

/// A controller the fleet drives: takes an input, returns the durable
/// events and the effects they have, in order.
pub trait Core {
    /// Why an input was not taken.
    type Error: std::fmt::Debug;
    /// Handles `input`.
    fn handle(&mut self, input: Input) -> Result<(Vec<Event>, Vec<Effect>), Self::Error>;
}

impl Core for ControllerState {
    type Error = Refusal;
    fn handle(&mut self, input: Input) -> Result<(Vec<Event>, Vec<Effect>), Refusal> {
        let mut sent = Vec::new();
        let events = feed_with(
            self,
            &input,
            |_, _| {},
            |state, event| sent.extend(effects(state, event)),
        )?;
        Ok((events, sent))
    }
}

/// The controller, its agents and the commands in flight to them.
pub struct Fleet<C> {
    /// The controller.
    pub ctrl: C,
    /// Each node's agent, by node id.
    pub agents: Vec<AgentState>,
    /// What each node's v2 answers: true = correct.
    pub v2_correct: Vec<bool>,
    /// How each node's staging attempts fail; `None`: they succeed.
    pub stage_failure: Vec<Option<StageFailure>>,
    /// Commands sent and not delivered yet, oldest first.
    pub to_agents: VecDeque<(NodeId, ToAgent)>,
    /// Every event the controller recorded, in order.
    pub log: Vec<Event>,
    /// Every agent journal record, with its node.
    pub agent_log: Vec<(NodeId, AgentEvent)>,
}

impl Fleet<ControllerState> {
    /// The pure controller and `nodes` agents serving v1, connected.
    pub fn model(nodes: u32) -> Self {
        Fleet::new(ControllerState::default(), nodes)
    }
}

impl<C: Core> Fleet<C> {
    /// `ctrl` and `nodes` agents serving v1, connected.
    pub fn new(ctrl: C, nodes: u32) -> Self {
        let agents = (0..nodes)
            .map(|_| AgentState {
                serving: Some(V1),
                ..AgentState::default()
            })
            .collect();
        let mut fleet = Fleet::with_agents(ctrl, agents);
        for n in 0..nodes {
            fleet.agent(NodeId(n), AgentInput::Connected);
        }
        fleet
    }

    /// `ctrl` and agents as they are (a controller restarted under running
    /// agents); every v2 answers correctly and every staging succeeds.
    pub fn with_agents(ctrl: C, agents: Vec<AgentState>) -> Self {
        let nodes = agents.len();
        Fleet {
            ctrl,
            agents,
            v2_correct: vec![true; nodes],
            stage_failure: vec![None; nodes],
            to_agents: VecDeque::new(),
            log: Vec::new(),
            agent_log: Vec::new(),
        }
    }

    /// Feeds `input` to the controller; queues its sends for the agents
    /// and returns the events.
    pub fn controller(&mut self, input: Input) -> Result<Vec<Event>, C::Error> {
        let (events, sent) = self.ctrl.handle(input)?;
        self.log.extend(events.iter().cloned());
        for effect in sent {
            if let Effect::Send { to, msg } = effect {
                self.to_agents.push_back((to, msg));
            }
        }
        Ok(events)
    }

    /// [`Fleet::controller`] of an input the test expects to be taken.
    #[track_caller]
    pub fn accept(&mut self, input: Input) -> Vec<Event> {
        let shown = format!("{input:?}");
        self.controller(input)
            .unwrap_or_else(|e| panic!("{shown} not taken: {e:?}"))
    }

    /// Runs one agent step and everything it triggers (its messages to
    /// the controller, which must be taken; its probe; its staging).
    pub fn agent(&mut self, node: NodeId, input: AgentInput) {
        let idx = node.0 as usize;
        let out = agent_step(&self.agents[idx], input);
        for event in &out.events {
            agent_apply(&mut self.agents[idx], event);
            self.agent_log.push((node, *event));
        }
        for effect in out.effects {
            match effect {
                AgentEffect::Send(msg) => {
                    self.accept(Input::FromAgent { node, msg });
                }
                AgentEffect::ProbeRoute => {
                    let serving = self.agents[idx].serving;
                    let correct = serving != Some(V2) || self.v2_correct[idx];
                    let observation = RouteObservation {
                        verdict: if correct {
                            ProbeVerdict::Pass
                        } else {
                            ProbeVerdict::WrongAnswer
                        },
                        identity: serving,
                        process_healthy: true,
                        process_uptime_ms: None,
                        process_restarts: None,
                        artifact: None,
                    };
                    self.agent(node, AgentInput::Probed(observation));
                }
                // Nothing is on disk before an attempt; every attempt stages.
                AgentEffect::ObserveStaged => {
                    self.agent(node, AgentInput::StageObserved(Observed::Absent))
                }
                AgentEffect::StageArtifact => match self.stage_failure[idx] {
                    Some(failure) => self.agent(node, AgentInput::StageFailed(failure)),
                    None => self.agent(node, AgentInput::Staged),
                },
                // No release here declares a migration; one that did would
                // succeed.
                AgentEffect::RunMigration => self.agent(node, AgentInput::Migrated),
            }
        }
    }

    /// Delivers the oldest command in flight, if any.
    pub fn deliver_one(&mut self) -> bool {
        match self.to_agents.pop_front() {
            Some((node, msg)) => {
                self.agent(node, AgentInput::Command(msg));
                true
            }
            None => false,
        }
    }

    /// Delivers commands until none is in flight.
    pub fn run(&mut self) {
        while self.deliver_one() {}
    }
}
