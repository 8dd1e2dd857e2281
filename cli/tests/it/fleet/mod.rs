//! A controller on a real log wired to in-memory agents, as in
//! model/tests/flows.rs but through `controller::driver::Controller`.
#![allow(dead_code)]

mod backend;

use std::collections::VecDeque;
use std::path::Path;

pub use backend::{backends, Backend, LogHome};

use controller::driver::{Controller, ControllerError, Ready};
use model::agent::{agent_apply, agent_step, AgentEffect, AgentInput, AgentState};
use model::controller::{Effect, Event, Input};
use model::{Digest, NodeId, Plan, ProbeVerdict, RouteObservation, ToAgent};

pub const V1: Digest = Digest::repeat(1);
pub const V2: Digest = Digest::repeat(2);

/// The controller, its agents and the messages in flight to them.
pub struct Fleet {
    /// Where the controller's log lives (sled or etcd).
    pub home: LogHome,
    pub ctrl: Controller,
    pub agents: Vec<AgentState>,
    /// What each node's v2 answers: true = correct.
    pub v2_correct: Vec<bool>,
    pub to_agents: VecDeque<(NodeId, ToAgent)>,
    /// Every event the controller acknowledged (returned in a `Ready`).
    pub acknowledged: Vec<(u64, Event)>,
}

impl Fleet {
    /// A fresh controller log in `dir` and `nodes` agents serving v1, connected.
    pub fn new(dir: &Path, nodes: u32) -> Self {
        Self::on(LogHome::new(&Backend::Sled, dir, "fleet"), nodes)
    }

    /// A fresh controller on `home`'s log (any backend) and `nodes` agents
    /// serving v1, connected.
    pub fn on(mut home: LogHome, nodes: u32) -> Self {
        let ctrl = home.open();
        let agents = (0..nodes)
            .map(|_| AgentState {
                serving: Some(V1),
                ..AgentState::default()
            })
            .collect();
        let mut fleet = Fleet {
            home,
            ctrl,
            agents,
            v2_correct: vec![true; nodes as usize],
            to_agents: VecDeque::new(),
            acknowledged: Vec::new(),
        };
        for n in 0..nodes {
            fleet.agent(NodeId(n), AgentInput::Connected);
        }
        fleet
    }

    /// Feeds `input` to the controller; queues its sends for the agents and
    /// returns the durable events.
    pub fn controller(&mut self, input: Input) -> Result<Vec<Event>, ControllerError> {
        let ready: Ready = self.ctrl.handle(input)?;
        let (events, effects) = ready.into_parts();
        self.acknowledged.extend(events.iter().cloned());
        for effect in effects {
            if let Effect::Send { to, msg } = effect {
                self.to_agents.push_back((to, msg));
            }
        }
        Ok(events.into_iter().map(|(_, event)| event).collect())
    }

    /// Runs one agent step and everything it triggers.
    pub fn agent(&mut self, node: NodeId, input: AgentInput) {
        let idx = node.0 as usize;
        let out = agent_step(&self.agents[idx], input);
        for event in &out.events {
            agent_apply(&mut self.agents[idx], event);
        }
        for effect in out.effects {
            match effect {
                AgentEffect::Send(msg) => {
                    self.controller(Input::FromAgent { node, msg })
                        .expect("agent message accepted");
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
                AgentEffect::ObserveStaged => self.agent(
                    node,
                    AgentInput::StageObserved(model::recovery::Observed::Absent),
                ),
                AgentEffect::StageArtifact => self.agent(node, AgentInput::Staged),
            }
        }
    }

    /// Delivers the oldest message in flight, if any.
    pub fn deliver_one(&mut self) -> bool {
        match self.to_agents.pop_front() {
            Some((node, msg)) => {
                self.agent(node, AgentInput::Command(msg));
                true
            }
            None => false,
        }
    }

    /// Delivers messages until none is in flight.
    pub fn run(&mut self) {
        while self.deliver_one() {}
    }

    /// Stops the controller (closing its log, or dropping it like a crash)
    /// and starts it again on the same directory; agents keep running.
    /// Messages in flight are lost with the old connections.
    pub fn restart(self, close: bool) -> Self {
        let Fleet {
            mut home,
            ctrl,
            agents,
            v2_correct,
            acknowledged,
            ..
        } = self;
        home.stop(ctrl, close);
        let ctrl = home.open();
        Fleet {
            home,
            ctrl,
            agents,
            v2_correct,
            to_agents: VecDeque::new(),
            acknowledged,
        }
    }

    /// Stops the controller in order (on etcd: resigns its leadership) and
    /// hands back its log's home, to read the log back.
    pub fn stop(self) -> LogHome {
        let Fleet { mut home, ctrl, .. } = self;
        home.stop(ctrl, true);
        home
    }
}

/// Canary node-a, followers node-b and node-c, one slot.
pub fn plan(approval_after_canary: bool) -> Plan {
    Plan {
        release: V2,
        canary: NodeId(0),
        followers: vec![NodeId(1), NodeId(2)],
        slots_max: 1,
        approval_after_canary,
    }
}
