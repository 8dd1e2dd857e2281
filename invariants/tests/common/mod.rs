//! A controller and four agents wired through the pure cores with an
//! adversarial network in between, every rule checked at every step.
//!
//! The harness is the checker's view of a run: it feeds the real
//! `step`/`apply`/`effects` and `agent_step`/`agent_apply`, and after every
//! controller event, every agent journal record and every command sent, it
//! runs the matching `invariants` check. A check that fails is returned as
//! an `Err` naming the rule and the event, never papered over.

#![allow(dead_code)] // each test binary uses a different part of it

use invariants::{
    check_agent_event, check_event, check_history, check_state, s10_human_waits_survive,
    s6_answers_agree, s7_persist_before_reply, Rule,
};
use model::agent::{agent_apply, agent_step, AgentEffect, AgentInput, AgentState};
use model::controller::{
    apply, effects, replay, step, ControllerState, Effect, Event, Input, OpPhase, Outcome,
};
use model::{Digest, NodeId, OpId, RolloutId, ToAgent, ToController};
use std::collections::BTreeSet;

pub const V1: Digest = Digest::repeat(1);
/// A bad build: its route answers, wrongly, with a healthy process.
pub const BROKEN: Digest = Digest::repeat(3);
pub const NODES: u32 = 4;

/// What the checks saw, to show that runs reach the interesting places.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub events: usize,
    pub agent_events: usize,
    pub sends: usize,
    pub refusals: usize,
    pub follower_grants: usize,
    pub verified: usize,
    pub rolled_back: usize,
    pub not_applied: usize,
    pub resolved: usize,
    pub unknown: usize,
    pub superseded: usize,
    pub completed: usize,
    pub approvals: usize,
    pub late_reports: usize,
    pub stale_rejections: usize,
    /// Intermediate states after a failed canary probe was recorded and
    /// before the `RestoreRequested` of the same batch (see `controller`).
    pub restore_owed: usize,
}

/// The checker's harness: the controller, the agents and the network
/// between them, as the invariant tests drive them. Not the test kit's
/// in-process fleet (`testkit::fleet::Fleet`), which delivers commands in
/// order, probes and stages at once and checks nothing: here messages
/// wait in flight both ways and the test delivers any of them, in any
/// order, or drops or duplicates them (late copies included), probes stay
/// due until answered, the operators' ground truth and the counts are
/// kept, and every rule is checked at every step, the first one broken
/// returned as an `Err`.
pub struct Harness {
    pub ctrl: ControllerState,
    pub log: Vec<Event>,
    pub agents: Vec<AgentState>,
    /// Commands in flight, in send order; any may be delivered, dropped or
    /// duplicated.
    pub to_agents: Vec<(NodeId, ToAgent)>,
    /// Agent messages in flight.
    pub to_ctrl: Vec<(NodeId, ToController)>,
    /// Every command and agent message ever sent: the network may deliver
    /// a late copy of any of them at any time.
    pub sent_to_agents: Vec<(NodeId, ToAgent)>,
    pub sent_to_ctrl: Vec<(NodeId, ToController)>,
    /// The agent asked for a probe of its route and has no answer yet.
    pub probe_due: Vec<bool>,
    /// How each node's next staging attempt fails (consumed by it); `None`:
    /// it stages. Nothing is ever on disk before an attempt.
    pub stage_failure: Vec<Option<model::recovery::StageFailure>>,
    /// What operators actually did (S10's ground truth).
    pub approved_by_operator: BTreeSet<RolloutId>,
    pub resolved_by_operator: BTreeSet<OpId>,
    pub stats: Stats,
}

impl Harness {
    /// Four agents serving v1 that connected and said so.
    pub fn new() -> Result<Self, String> {
        let mut fleet = Harness {
            ctrl: ControllerState::default(),
            log: Vec::new(),
            agents: vec![
                AgentState {
                    serving: Some(V1),
                    ..AgentState::default()
                };
                NODES as usize
            ],
            to_agents: Vec::new(),
            to_ctrl: Vec::new(),
            sent_to_agents: Vec::new(),
            sent_to_ctrl: Vec::new(),
            probe_due: vec![false; NODES as usize],
            stage_failure: vec![None; NODES as usize],
            approved_by_operator: BTreeSet::new(),
            resolved_by_operator: BTreeSet::new(),
            stats: Stats::default(),
        };
        for n in 0..NODES {
            fleet.agent(NodeId(n), AgentInput::Connected)?;
        }
        while !fleet.to_ctrl.is_empty() {
            fleet.deliver_to_ctrl(0)?;
        }
        Ok(fleet)
    }

    /// Feed one input to the controller: step, then for every event of the
    /// batch check it, apply it, check the state, and send its effects
    /// (checking S7 and S6 on each command against the state that holds
    /// the event). Refused inputs change nothing and are fine.
    pub fn controller(&mut self, input: Input) -> Result<(), String> {
        let events = match step(&self.ctrl, &input) {
            Ok(events) => events,
            Err(_) => {
                self.stats.refusals += 1;
                return Ok(());
            }
        };
        match &input {
            Input::Approve { rollout } => {
                self.approved_by_operator.insert(*rollout);
            }
            Input::Resolve { op, .. } => {
                self.resolved_by_operator.insert(*op);
            }
            _ => {}
        }
        for (i, event) in events.iter().enumerate() {
            let fail = |what: String| {
                format!(
                    "{what}\n  at event {event} of the batch for {input:?}\n  batch: {events:#?}"
                )
            };
            check_event(&self.ctrl, event).map_err(|v| fail(format!("check_event: {v}")))?;
            apply(&mut self.ctrl, event);
            self.log.push(event.clone());
            self.count(event);
            if let Err(v) = check_state(&self.ctrl) {
                // The one intermediate state allowed to break a state rule:
                // a failed canary probe was just recorded and the next event
                // of this very batch requests the restore.
                let owed = match event {
                    Event::ReportRecorded { op, .. } | Event::ProbeRecorded { op, .. } => {
                        v.rule == Rule::S11
                            && events.get(i + 1) == Some(&Event::RestoreRequested { op: *op })
                    }
                    _ => false,
                };
                if !owed {
                    return Err(fail(format!("check_state: {v}")));
                }
                self.stats.restore_owed += 1;
            }
            for effect in effects(&self.ctrl, event) {
                if let Effect::Send { to, msg } = effect {
                    s7_persist_before_reply(&self.ctrl, &msg)
                        .map_err(|v| fail(format!("s7 on {msg:?}: {v}")))?;
                    if let ToAgent::CommitReply { op, decision, .. } = msg {
                        s6_answers_agree(&self.ctrl, op, decision)
                            .map_err(|v| fail(format!("s6 on {msg:?}: {v}")))?;
                    }
                    self.stats.sends += 1;
                    self.to_agents.push((to, msg));
                    self.sent_to_agents.push((to, msg));
                }
            }
        }
        check_state(&self.ctrl).map_err(|v| format!("check_state after {input:?}: {v}"))?;
        let approved = &self.approved_by_operator;
        let resolved = &self.resolved_by_operator;
        s10_human_waits_survive(&self.ctrl, &|r| approved.contains(&r), &|op| {
            resolved.contains(&op)
        })
        .map_err(|v| format!("s10 after {input:?}: {v}"))
    }

    fn count(&mut self, event: &Event) {
        let s = &mut self.stats;
        s.events += 1;
        match event {
            Event::OpGranted {
                is_canary: false, ..
            } => s.follower_grants += 1,
            Event::OpSettled { outcome, .. } => match outcome {
                Outcome::Verified => s.verified += 1,
                Outcome::RolledBack => s.rolled_back += 1,
                Outcome::NotApplied => s.not_applied += 1,
                Outcome::Resolved(_) => s.resolved += 1,
            },
            Event::OpUnknown { .. } => s.unknown += 1,
            Event::RolloutSuperseded { .. } => s.superseded += 1,
            Event::RolloutCompleted { .. } => s.completed += 1,
            Event::RolloutApproved { .. } => s.approvals += 1,
            Event::LateReportIgnored { .. } | Event::ForeignMessageIgnored { .. } => {
                s.late_reports += 1
            }
            Event::StaleCommandRejected { .. } => s.stale_rejections += 1,
            _ => {}
        }
    }

    /// Feed one input to a node's agent: check and journal its records,
    /// queue its messages, note a probe it asks for.
    pub fn agent(&mut self, node: NodeId, input: AgentInput) -> Result<(), String> {
        let index = node.0 as usize;
        let out = agent_step(&self.agents[index], input);
        for event in &out.events {
            check_agent_event(&self.agents[index], event)
                .map_err(|v| format!("check_agent_event on {node} for {input:?}: {v}"))?;
            agent_apply(&mut self.agents[index], event);
            self.stats.agent_events += 1;
        }
        if matches!(input, AgentInput::Probed(_)) {
            self.probe_due[index] = false;
        }
        for effect in out.effects {
            match effect {
                AgentEffect::Send(msg) => {
                    self.to_ctrl.push((node, msg));
                    self.sent_to_ctrl.push((node, msg));
                }
                AgentEffect::ProbeRoute => self.probe_due[index] = true,
                AgentEffect::ObserveStaged => self.agent(
                    node,
                    AgentInput::StageObserved(model::recovery::Observed::Absent),
                )?,
                AgentEffect::StageArtifact => {
                    let answer = match self.stage_failure[index].take() {
                        Some(failure) => AgentInput::StageFailed(failure),
                        None => AgentInput::Staged,
                    };
                    self.agent(node, answer)?
                }
                // No release here declares a migration; one that did
                // would succeed.
                AgentEffect::RunMigration => self.agent(node, AgentInput::Migrated)?,
            }
        }
        Ok(())
    }

    /// Deliver the command at `index` (taking it out of the network).
    pub fn deliver_to_agent(&mut self, index: usize) -> Result<(), String> {
        let (node, msg) = self.to_agents.remove(index);
        self.agent(node, AgentInput::Command(msg))
    }

    /// Deliver the agent message at `index`.
    pub fn deliver_to_ctrl(&mut self, index: usize) -> Result<(), String> {
        let (node, msg) = self.to_ctrl.remove(index);
        self.controller(Input::FromAgent { node, msg })
    }

    /// What a node's route truthfully answers: the release it serves,
    /// correctly unless it is the [`BROKEN`] build, or nothing.
    pub fn truthful_probe(&self, node: NodeId) -> model::RouteObservation {
        match self.agents[node.0 as usize].serving {
            Some(BROKEN) => model::RouteObservation {
                verdict: model::ProbeVerdict::WrongAnswer,
                identity: Some(BROKEN),
                process_healthy: true,
                process_uptime_ms: None,
                process_restarts: None,
                artifact: None,
            },
            Some(release) => model::RouteObservation::passing(release),
            None => model::RouteObservation {
                verdict: model::ProbeVerdict::Unreachable,
                identity: None,
                process_healthy: false,
                process_uptime_ms: None,
                process_restarts: None,
                artifact: None,
            },
        }
    }

    /// Fair, fault-free delivery for a while: answer due probes truthfully,
    /// then commands, then agent messages, oldest first.
    pub fn drain(&mut self, budget: usize) -> Result<(), String> {
        for _ in 0..budget {
            if let Some(n) = self.probe_due.iter().position(|due| *due) {
                let node = NodeId(n as u32);
                let observation = self.truthful_probe(node);
                self.agent(node, AgentInput::Probed(observation))?;
            } else if !self.to_agents.is_empty() {
                self.deliver_to_agent(0)?;
            } else if !self.to_ctrl.is_empty() {
                self.deliver_to_ctrl(0)?;
            } else {
                break;
            }
        }
        Ok(())
    }

    /// The whole log passes `check_history`, which rebuilds this very state,
    /// as does a restart (replay).
    pub fn check_log(&self) -> Result<(), String> {
        let state = check_history(&self.log).map_err(|v| format!("check_history: {v}"))?;
        if state != self.ctrl {
            return Err("check_history rebuilt a different state".to_string());
        }
        if replay(&self.log) != self.ctrl {
            return Err("replay rebuilt a different state".to_string());
        }
        Ok(())
    }

    /// An op by id, for tests.
    pub fn phase(&self, op: u32) -> Option<OpPhase> {
        self.ctrl.op(OpId(op)).map(|o| o.phase)
    }
}
