//! T1 a deadline for every wait, driven as the controller's daemon drives
//! the model's timers: every batch's effects go to `Timers`, a timeout
//! comes out of `Timers::handle_timeout`, a restart re-arms from the
//! replayed state. Each check has its broken twin, so the rule can fail.

use invariants::{t1_batch_deadlines, t1_deadlines_armed, Rule, Touched};
use model::controller::{apply, effects, step, ControllerState, Effect, Input, Timers};
use model::{Digest, Generation, NodeId, OpId, Plan, ReportKind, RouteObservation, ToController};

const V1: Digest = Digest::repeat(1);
const V2: Digest = Digest::repeat(2);
const OP_TIMEOUT_MS: u64 = 1_000;

/// A controller state with its timers, fed as the daemon feeds them.
struct Driven {
    state: ControllerState,
    timers: Timers,
    now_ms: u64,
    /// Drop every cancel effect (the broken driver of the twin tests).
    drop_cancels: bool,
}

impl Driven {
    fn new(nodes: u32) -> Self {
        let mut driven = Driven {
            state: ControllerState::default(),
            timers: Timers::new(OP_TIMEOUT_MS),
            now_ms: 0,
            drop_cancels: false,
        };
        for n in 0..nodes {
            let hello = ToController::Hello {
                serving: Some(V1),
                generation: Generation(0),
            };
            driven
                .input(Input::FromAgent {
                    node: NodeId(n),
                    msg: hello,
                })
                .expect("T1 holds");
        }
        driven
    }

    /// One input as one batch: step, apply, effects to the timers, then
    /// T1 on the batch and on what the timers hold.
    fn input(&mut self, input: Input) -> Result<(), invariants::Violation> {
        let before = self.state.clone();
        let events = step(&self.state, &input).expect("accepted");
        let mut timer_effects = Vec::new();
        let mut touched = Touched::default();
        for event in &events {
            apply(&mut self.state, event);
            touched.add(&self.state, event);
            timer_effects.extend(
                effects(&self.state, event)
                    .into_iter()
                    .filter(|e| !matches!(e, Effect::Send { .. }))
                    .filter(|e| !(self.drop_cancels && matches!(e, Effect::CancelTimeout { .. }))),
            );
        }
        self.timers.handle_effects(self.now_ms, &timer_effects);
        t1_batch_deadlines(&before, &self.state, &events, &timer_effects)?;
        // As the daemon: on the ops the batch touched (a timeout handed
        // out with this one may still be queued for the next batch).
        let timers = &self.timers;
        t1_deadlines_armed(&self.state, touched.ops, |op| timers.is_armed(op))
    }

    fn from(&mut self, node: u32, msg: ToController) -> Result<(), invariants::Violation> {
        self.input(Input::FromAgent {
            node: NodeId(node),
            msg,
        })
    }

    /// Let `ms` pass and feed what fell due, as the daemon's one timer does.
    fn wait(&mut self, ms: u64) -> Result<Vec<Input>, invariants::Violation> {
        self.now_ms += ms;
        let due = self.timers.handle_timeout(self.now_ms);
        for input in &due {
            self.input(input.clone())?;
        }
        Ok(due)
    }

    fn verify(&mut self, node: u32, op: u32) -> Result<(), invariants::Violation> {
        self.from(node, ToController::CommitRequest { op: OpId(op) })?;
        self.from(
            node,
            ToController::Report {
                op: OpId(op),
                kind: ReportKind::Switched,
                observation: RouteObservation::passing(V2),
            },
        )
    }
}

fn start(driven: &mut Driven) {
    let plan = Plan {
        release: V2,
        canary: NodeId(0),
        followers: vec![NodeId(1), NodeId(2)],
        slots_max: 3,
        approval_after_canary: false,
    };
    driven
        .input(Input::StartRollout { plan })
        .expect("T1 holds");
}

/// The canary settles (its deadline cancelled), node-1's op times out
/// (UNKNOWN, no deadline: evidence settles it, not a clock), node-2's op
/// is decided and waits on its report. A restart re-arms node-2's op only.
#[test]
fn a_driver_that_follows_the_effects_keeps_a_deadline_for_every_wait() {
    let mut driven = Driven::new(3);
    start(&mut driven);
    assert!(
        driven.timers.is_armed(OpId(0)),
        "the canary's grant arms it"
    );
    driven.verify(0, 0).expect("T1 holds");
    assert!(!driven.timers.is_armed(OpId(0)), "settling cancels it");
    assert!(driven.timers.is_armed(OpId(1)) && driven.timers.is_armed(OpId(2)));
    driven
        .from(2, ToController::CommitRequest { op: OpId(2) })
        .expect("T1 holds");
    // node-2 answered: its deadline is re-armed by nothing, still the
    // grant's. Half a timeout later nothing is due.
    assert!(driven.wait(OP_TIMEOUT_MS / 2).expect("T1 holds").is_empty());
    let due = driven.wait(OP_TIMEOUT_MS).expect("T1 holds");
    assert_eq!(due.len(), 2, "both followers' deadlines fell due: {due:?}");
    assert!(driven.state.op(OpId(1)).is_some_and(|o| o.is_unknown()));
    assert!(
        driven.timers.is_empty(),
        "an UNKNOWN op waits on evidence, not a clock"
    );
    // A restart: the deadlines were times of the old process.
    let mut restarted = Timers::new(OP_TIMEOUT_MS);
    restarted.rearm(&driven.state, 0);
    assert_eq!(restarted.len(), 0, "both followers are UNKNOWN now");
    // Evidence settles node-1's op; node-2's report arrives. Nothing waits.
    driven.verify(1, 1).expect("T1 holds");
    assert!(driven.timers.is_empty());
}

/// A restart re-arms the ops that wait (granted, decided) and no other.
#[test]
fn a_restart_rearms_every_op_that_waits_and_no_other() {
    let mut driven = Driven::new(3);
    start(&mut driven);
    driven.verify(0, 0).expect("T1 holds");
    driven
        .from(2, ToController::CommitRequest { op: OpId(2) })
        .expect("T1 holds");
    let mut restarted = Timers::new(OP_TIMEOUT_MS);
    restarted.rearm(&driven.state, 5_000);
    assert!(!restarted.is_armed(OpId(0)), "settled");
    assert!(restarted.is_armed(OpId(1)), "granted");
    assert!(restarted.is_armed(OpId(2)), "decided");
    assert_eq!(restarted.poll_timeout(), Some(5_000 + OP_TIMEOUT_MS));
    let state = &driven.state;
    t1_deadlines_armed(state, state.ops.keys().copied(), |op| {
        restarted.is_armed(op)
    })
    .expect("T1 holds after a restart");
    // The broken twin: a restart that re-arms granted ops only.
    let mut skipped = restarted.clone();
    skipped.handle_effects(0, &[Effect::CancelTimeout { op: OpId(2) }]);
    let broken = t1_deadlines_armed(state, state.ops.keys().copied(), |op| skipped.is_armed(op))
        .expect_err("a decided op without a deadline breaks T1");
    assert_eq!(broken.rule, Rule::DeadlineForEveryWait);
    assert!(broken.detail.contains("op2"), "{broken}");
}

/// The broken twin of the batch check: a driver that keeps a settled op's
/// deadline is caught on the batch that settles it.
#[test]
fn a_settled_op_whose_deadline_stays_armed_breaks_t1() {
    let mut driven = Driven::new(3);
    start(&mut driven);
    driven.drop_cancels = true;
    driven
        .from(0, ToController::CommitRequest { op: OpId(0) })
        .expect("nothing settles yet");
    let broken = driven
        .from(
            0,
            ToController::Report {
                op: OpId(0),
                kind: ReportKind::Switched,
                observation: RouteObservation::passing(V2),
            },
        )
        .expect_err("the settle kept its deadline");
    assert_eq!(broken.rule, Rule::DeadlineForEveryWait);
}
