//! Group commit: a batch of inputs stepped against the evolving state and
//! made durable in one flush gives exactly the events, refusals and state
//! that handling the same inputs one at a time gives; and one input at the
//! slot limit (10,000 grants at once) fits one append.
//!
//! Each test runs on every log backend (`fleet::backends`): on etcd one
//! append is one fenced transaction, so "one flush" and "fits one append"
//! are checked against etcd's transaction limits too.

use std::collections::VecDeque;

use controller::driver::{Controller, ControllerError, EVENTS_PER_INPUT_MAX};
use model::controller::{Event, Input, Labels, Refusal};
use model::{Digest, NodeId, OpId, Plan, ProbeVerdict, ReportKind, RouteObservation};
use model::{RolloutId, ToController};

use crate::fleet::{backends, LogHome};

const V2: Digest = Digest::repeat(2);

fn enroll(name: &str) -> Input {
    Input::EnrollNode {
        name: name.into(),
        labels: Labels::new(),
        public: "127.0.0.1:1".into(),
    }
}

fn plan(followers: u32, slots_max: u16) -> Plan {
    Plan {
        release: V2,
        canary: NodeId(0),
        followers: (1..=followers).map(NodeId).collect(),
        slots_max,
        approval_after_canary: false,
    }
}

fn from(node: u32, msg: ToController) -> Input {
    Input::FromAgent {
        node: NodeId(node),
        msg,
    }
}

fn switched_pass(op: u32) -> ToController {
    ToController::Report {
        op: OpId(op),
        kind: ReportKind::Switched,
        observation: RouteObservation {
            verdict: ProbeVerdict::Pass,
            identity: Some(V2),
            process_healthy: true,
            process_uptime_ms: None,
            process_restarts: None,
            artifact: None,
        },
    }
}

/// A mix of operator and agent inputs, two of them refused.
fn inputs() -> Vec<Input> {
    vec![
        enroll("a"),
        enroll("b"),
        enroll("a"), // refused: the name is taken
        enroll("c"),
        Input::StartRollout { plan: plan(2, 2) },
        from(0, ToController::CommitRequest { op: OpId(0) }),
        from(0, ToController::CommitRequest { op: OpId(0) }), // replayed
        from(0, switched_pass(0)),
        Input::Approve {
            rollout: RolloutId(7), // refused: no such rollout
        },
        from(1, ToController::CommitRequest { op: OpId(1) }),
        Input::Pause {
            rollout: RolloutId(0),
        },
    ]
}

type Outcome = Result<Vec<(u64, Event)>, Refusal>;

fn one_by_one(home: &mut LogHome) -> (Controller, Vec<Outcome>) {
    let mut ctrl = home.open();
    let outcomes = inputs()
        .into_iter()
        .map(|input| match ctrl.handle(input) {
            Ok(ready) => Ok(ready.into_parts().0),
            Err(ControllerError::Refused(refusal)) => Err(refusal),
            Err(other) => panic!("log failed: {other}"),
        })
        .collect();
    (ctrl, outcomes)
}

#[test]
fn a_batch_equals_the_same_inputs_one_at_a_time_with_one_flush() {
    for backend in backends() {
        let temp = tempfile::tempdir().expect("temp dir");
        let mut single_home = LogHome::new(&backend, &temp.path().join("single"), "single");
        let (single, expected) = one_by_one(&mut single_home);
        let mut home = LogHome::new(&backend, &temp.path().join("batched"), "batched");
        let mut batched = home.open();
        let flushes_before = batched.commit_stats().expect("stats").flushes;
        let mut queue: VecDeque<Input> = inputs().into();
        let batch = batched.handle_batch(&mut queue).expect("batch");
        assert!(queue.is_empty(), "a small batch takes every input");
        let (events, _effects) = batch.ready.into_parts();
        let got: Vec<Outcome> = batch
            .outcomes
            .into_iter()
            .map(|o| o.map(|range| events[range].to_vec()))
            .collect();
        assert_eq!(got, expected, "same events, sequences and refusals");
        assert!(got[2].is_err() && got[8].is_err(), "{got:?}");
        assert_eq!(batched.state(), single.state());
        assert_eq!(
            batched.commit_stats().expect("stats").flushes - flushes_before,
            1,
            "one flush for the whole batch on {}",
            backend.name()
        );
        // What is durable is the same: reopening rebuilds the same state.
        let state = batched.state().clone();
        home.stop(batched, true);
        single_home.stop(single, true);
        let reopened = home.open();
        assert_eq!(reopened.state(), &state, "on {}", backend.name());
        home.stop(reopened, true);
    }
}

#[test]
fn a_batch_takes_at_most_its_bound_and_leaves_the_rest_in_order() {
    for backend in backends() {
        let temp = tempfile::tempdir().expect("temp dir");
        let mut home = LogHome::new(&backend, temp.path(), "bound");
        let mut ctrl = home.open();
        let total = controller::driver::BATCH_INPUTS_MAX + 5;
        let mut queue: VecDeque<Input> = (0..total).map(|i| enroll(&format!("n{i}"))).collect();
        let first = ctrl.handle_batch(&mut queue).expect("first batch");
        assert_eq!(first.outcomes.len(), controller::driver::BATCH_INPUTS_MAX);
        assert_eq!(queue.len(), 5);
        let second = ctrl.handle_batch(&mut queue).expect("second batch");
        assert_eq!(second.outcomes.len(), 5);
        let (events, _) = second.ready.into_parts();
        assert!(
            matches!(&events[0].1, Event::NodeEnrolled { name, .. } if *name == format!("n{}", total - 5)),
            "{:?}",
            events[0]
        );
        home.stop(ctrl, true);
    }
}

/// At the slot limit: a settled canary frees 10,000 follower grants in one
/// input, and a start that supersedes that rollout aborts them all and
/// grants the next one's canary, each within one append.
#[test]
fn one_input_at_the_slot_limit_fits_one_durable_batch() {
    let slots = model::plan::SLOTS_MAX_LIMIT;
    let followers = u32::from(slots);
    for backend in backends() {
        let temp = tempfile::tempdir().expect("temp dir");
        let mut home = LogHome::new(&backend, temp.path(), "slot-limit");
        let mut ctrl = home.open();
        let mut queue: VecDeque<Input> =
            (0..=followers).map(|i| enroll(&format!("n{i}"))).collect();
        while !queue.is_empty() {
            let batch = ctrl.handle_batch(&mut queue).expect("enroll");
            assert!(batch.outcomes.iter().all(Result::is_ok));
        }
        let handle = |ctrl: &mut Controller, input| {
            let ready = ctrl.handle(input).expect("accepted");
            ready.into_parts().0.len()
        };
        handle(
            &mut ctrl,
            Input::StartRollout {
                plan: plan(followers, slots),
            },
        );
        handle(
            &mut ctrl,
            from(0, ToController::CommitRequest { op: OpId(0) }),
        );
        let granted = handle(&mut ctrl, from(0, switched_pass(0)));
        assert!(
            granted > usize::from(slots),
            "{granted} events: every slot granted at once"
        );
        assert!(granted <= EVENTS_PER_INPUT_MAX);
        let rollout = &ctrl.state().rollouts[0];
        assert_eq!(rollout.occupied, u32::from(slots));
        let again = Input::StartRollout {
            plan: plan(followers, slots),
        };
        let superseded = handle(&mut ctrl, again);
        assert!(
            superseded > usize::from(slots),
            "{superseded} events: every op aborted"
        );
        assert!(superseded <= EVENTS_PER_INPUT_MAX);
        home.stop(ctrl, true);
    }
}
