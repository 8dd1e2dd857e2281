//! Test helpers: build controller states the way production does (inputs
//! through `step`, events through `apply`), or by hand where a test needs a
//! state the real rules never produce.

use crate::{Rule, Violation};
use model::controller::{apply, step, ControllerState, Event, Input, Op, OpPhase, Resolution};
use model::{
    Digest, NodeId, OpId, Plan, ProbeVerdict, ReportKind, RolloutId, RouteObservation, ToController,
};

pub const V1: Digest = Digest::repeat(1);
pub const V2: Digest = Digest::repeat(2);
pub const V3: Digest = Digest::repeat(3);
pub const A: NodeId = NodeId(0);
pub const B: NodeId = NodeId(1);
pub const C: NodeId = NodeId(2);
pub const R0: RolloutId = RolloutId(0);
pub const R1: RolloutId = RolloutId(1);

/// v2 on canary node-a, then node-b and node-c.
pub fn plan(slots: u16, gate: bool) -> Plan {
    Plan {
        release: V2,
        canary: A,
        followers: vec![B, C],
        slots_max: slots,
        approval_after_canary: gate,
    }
}

pub fn pass(release: Digest) -> RouteObservation {
    RouteObservation::passing(release)
}

/// The service answers, wrongly, while the process looks healthy.
pub fn wrong(release: Digest) -> RouteObservation {
    RouteObservation {
        verdict: ProbeVerdict::WrongAnswer,
        identity: Some(release),
        process_healthy: true,
        process_uptime_ms: None,
        process_restarts: None,
        artifact: None,
    }
}

pub fn unreachable() -> RouteObservation {
    RouteObservation {
        verdict: ProbeVerdict::Unreachable,
        identity: None,
        process_healthy: false,
        process_uptime_ms: None,
        process_restarts: None,
        artifact: None,
    }
}

/// A controller driven through `step`/`apply`, with its event log.
#[derive(Clone)]
pub struct World {
    pub state: ControllerState,
    pub log: Vec<Event>,
}

impl World {
    /// Nodes a, b, c connected and serving v1.
    pub fn new() -> Self {
        let mut w = World {
            state: ControllerState::default(),
            log: Vec::new(),
        };
        for node in [A, B, C] {
            w.from(
                node,
                ToController::Hello {
                    serving: Some(V1),
                    generation: model::Generation(0),
                },
            );
        }
        w
    }

    /// Step and apply one input; panics if the controller refuses it.
    pub fn input(&mut self, input: Input) -> Vec<Event> {
        let events = step(&self.state, &input).expect("input accepted");
        for e in &events {
            self.event(e.clone());
        }
        events
    }

    /// Apply one event as is, bypassing `step`: for states the real rules
    /// never produce.
    pub fn event(&mut self, event: Event) {
        apply(&mut self.state, &event);
        self.log.push(event);
    }

    pub fn from(&mut self, node: NodeId, msg: ToController) -> Vec<Event> {
        self.input(Input::FromAgent { node, msg })
    }

    pub fn op(&self, id: u32) -> &Op {
        self.state.op(OpId(id)).expect("op exists")
    }

    pub fn op_mut(&mut self, id: u32) -> &mut Op {
        &mut self.state.ops[&model::OpId(id)]
    }

    pub fn start(&mut self, plan: Plan) -> Vec<Event> {
        self.input(Input::StartRollout { plan })
    }

    pub fn ask_commit(&mut self, op: u32) -> Vec<Event> {
        let node = self.op(op).node;
        self.from(node, ToController::CommitRequest { op: OpId(op) })
    }

    pub fn report(
        &mut self,
        op: u32,
        kind: ReportKind,
        observation: RouteObservation,
    ) -> Vec<Event> {
        let node = self.op(op).node;
        self.from(
            node,
            ToController::Report {
                op: OpId(op),
                kind,
                observation,
            },
        )
    }

    /// Commit `op` and report the switch probed with `observation`.
    pub fn switch(&mut self, op: u32, observation: RouteObservation) -> Vec<Event> {
        self.ask_commit(op);
        self.report(op, ReportKind::Switched, observation)
    }

    pub fn resolve(
        &mut self,
        op: u32,
        observation: RouteObservation,
        resolution: Resolution,
    ) -> Vec<Event> {
        self.input(Input::Resolve {
            op: OpId(op),
            observation,
            resolution,
        })
    }

    /// A grant event for `node` in `rollout` as the controller would write
    /// it, whether or not the rules allow it now.
    pub fn grant_event(&self, rollout: RolloutId, node: NodeId) -> Event {
        let r = self.state.rollout(rollout).expect("rollout exists");
        Event::OpGranted {
            op: self.state.next_op_id(),
            rollout,
            node,
            release: r.plan.release,
            generation: r.generation,
            baseline: Some(V1),
            is_canary: node == r.plan.canary,
        }
    }

    /// Rollout r0 of [`plan`] with its canary op0 switched and verified.
    pub fn canary_verified(slots: u8, gate: bool) -> Self {
        let mut w = World::new();
        w.start(plan(u16::from(slots), gate));
        w.switch(0, pass(V2));
        assert_eq!(
            w.op(0).phase,
            OpPhase::Settled(model::controller::Outcome::Verified)
        );
        w
    }

    /// Rollout r0 whose canary op0 answered wrongly: restoring, paused.
    pub fn canary_wrong() -> Self {
        let mut w = World::new();
        w.start(plan(1, false));
        w.switch(0, wrong(V2));
        assert_eq!(w.op(0).phase, OpPhase::Restoring);
        w
    }
}

/// Assert `result` is a violation of `rule`, and return it.
#[track_caller]
pub fn rejected(result: Result<(), Violation>, rule: Rule) -> Violation {
    match result {
        Err(v) if v.rule == rule => {
            assert!(!v.detail.is_empty());
            v
        }
        Err(v) => panic!("expected a {rule} violation, got {v}"),
        Ok(()) => panic!("expected a {rule} violation, got none"),
    }
}

/// Assert `result` holds, showing the violation otherwise.
#[track_caller]
pub fn holds(result: Result<(), Violation>) {
    if let Err(v) = result {
        panic!("expected no violation, got {v}");
    }
}
