//! The staged-rollout set-ups the tests repeat: nodes that said hello
//! serving v1, a v2 rollout over them, an op that switches. Each is
//! offered as inputs (for a test that feeds them its own way: logged,
//! checked by the rules) and, where the tests want it, as a state.

use crate::feed::accept;
use model::controller::{ControllerState, Event, Input, Labels};
use model::plan::Policy;
use model::platform::ReleaseArches;
use model::{Digest, Generation, NodeId, OpId, Plan, ReportKind, RouteObservation, ToController};

/// The release every node serves before a rollout.
pub const V1: Digest = Digest::repeat(1);
/// The release the fixtures roll out.
pub const V2: Digest = Digest::repeat(2);
/// A third release, for a rollout after the first.
pub const V3: Digest = Digest::repeat(3);
/// The public route every enrolled test node names.
pub const PUBLIC: &str = "127.0.0.1:8080";

/// `node`'s agent connected and says it serves `serving` (generation 0).
pub fn hello(node: NodeId, serving: Option<Digest>) -> Input {
    Input::FromAgent {
        node,
        msg: ToController::Hello {
            serving,
            generation: Generation(0),
        },
    }
}

/// Enrolls `name` with `labels` at [`PUBLIC`].
pub fn enroll(name: &str, labels: Labels) -> Input {
    Input::EnrollNode {
        name: name.into(),
        labels,
        public: PUBLIC.into(),
    }
}

/// A rollout of [`V2`] over nodes `0..nodes`: canary node 0, the others
/// followers in id order.
pub fn plan(nodes: u32, slots_max: u16, approval_after_canary: bool) -> Plan {
    Plan {
        release: V2,
        canary: NodeId(0),
        followers: (1..nodes).map(NodeId).collect(),
        slots_max,
        approval_after_canary,
    }
}

/// Every node of `plan` (canary first, then the followers) says hello
/// serving [`V1`].
pub fn hellos(plan: &Plan) -> Vec<Input> {
    std::iter::once(plan.canary)
        .chain(plan.followers.iter().copied())
        .map(|node| hello(node, Some(V1)))
        .collect()
}

/// [`hellos`], then `plan` started (its canary's op granted).
pub fn started_inputs(plan: Plan) -> Vec<Input> {
    let mut inputs = hellos(&plan);
    inputs.push(Input::StartRollout { plan });
    inputs
}

/// [`hellos`], then `plan` started in waves under `policy`, for a release
/// every architecture runs.
pub fn staged_inputs(plan: Plan, policy: Policy) -> Vec<Input> {
    let mut inputs = hellos(&plan);
    inputs.push(Input::StartStaged {
        plan,
        policy,
        arches: ReleaseArches::Any,
        deploys: None,
    });
    inputs
}

/// The state after [`started_inputs`].
pub fn started(plan: Plan) -> ControllerState {
    state_after(started_inputs(plan))
}

/// The state after [`staged_inputs`].
pub fn started_staged(plan: Plan, policy: Policy) -> ControllerState {
    state_after(staged_inputs(plan, policy))
}

/// A fresh state after `inputs`, each accepted.
pub fn state_after(inputs: Vec<Input>) -> ControllerState {
    let mut state = ControllerState::default();
    for input in inputs {
        accept(&mut state, input);
    }
    state
}

/// `node` asks to commit `op`, then reports the switch probed with
/// `observation`.
pub fn switch_inputs(node: NodeId, op: OpId, observation: RouteObservation) -> [Input; 2] {
    let report = ToController::Report {
        op,
        kind: ReportKind::Switched,
        observation,
    };
    [
        Input::FromAgent {
            node,
            msg: ToController::CommitRequest { op },
        },
        Input::FromAgent { node, msg: report },
    ]
}

/// Op `op`'s node switches with a probe that saw `observation`; the events
/// of both inputs.
pub fn switch(state: &mut ControllerState, op: u32, observation: RouteObservation) -> Vec<Event> {
    let node = state.op(OpId(op)).expect("op").node;
    let mut events = Vec::new();
    for input in switch_inputs(node, OpId(op), observation) {
        events.extend(accept(state, input));
    }
    events
}

/// Op `op` switches to [`V2`] and passes its probe (it is verified).
pub fn verify(state: &mut ControllerState, op: u32) -> Vec<Event> {
    switch(state, op, RouteObservation::passing(V2))
}
