//! The pure controller core's cost per input, and what the rule checks cost
//! on top of it. Drives `model::controller::{step, apply, effects}` through
//! whole rollouts in one process, answering every command as a healthy agent
//! would (commit request, switched report with a passing probe), so no IO,
//! clock or network is measured. Prints figures, asserts no timing.
//!
//! `cargo run --release -p simulations --bin fleetweft-core-bench`
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::collections::VecDeque;
use std::time::Instant;

use clap::Parser;
use model::controller::{effects, step_in_place, ControllerState, Effect, Event, Fold, Input};
use model::plan::{FOLLOWERS_MAX, SLOTS_MAX_LIMIT};
use model::{
    Decision, Digest, Generation, NodeId, Plan, ReportKind, RouteObservation, ToAgent, ToController,
};

#[derive(Parser)]
#[command(about = "Cost per input of the pure controller core, with and without rule checks")]
struct Args {
    /// Fleet sizes to measure (canary + followers), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "10,100,1000")]
    nodes: Vec<usize>,
    /// Rollouts run one after another on each fleet; the last is measured.
    #[arg(long, default_value_t = 1)]
    rollouts: usize,
    /// Slots per rollout.
    #[arg(long, default_value_t = SLOTS_MAX_LIMIT)]
    slots: u16,
    /// Runs of each measurement; the fastest is printed (the machine is
    /// shared and noisy, the fastest run is the one least disturbed).
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Also measure a fleet of this many nodes on its first rollout, in
    /// the same run, and print each figure as a ratio to it (issue #11's
    /// target: 10,000 nodes after 100 rollouts within 2x of 100 nodes on
    /// a first rollout). Measurements alternate so noise hits both.
    #[arg(long)]
    ratio_to: Option<usize>,
}

/// Which rule checks run around each applied event.
#[derive(Clone, Copy, Debug)]
enum Checks {
    /// Neither: the core alone.
    Off,
    /// `invariants::check_event` before each event is applied.
    Events,
    /// Event checks plus the state rules on what each input touched
    /// (`invariants::check_state_touched`), as the runtime runs them.
    EventsAndTouched,
}

/// Totals of one measured rollout.
#[derive(Default)]
struct Tally {
    inputs: u64,
    events: u64,
    nanos: u128,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        (1..=SLOTS_MAX_LIMIT).contains(&args.slots),
        "--slots must be 1..={SLOTS_MAX_LIMIT}"
    );
    println!("nodes  rollout  inputs  events  checks           ns/input  ns/event");
    for &nodes in &args.nodes {
        anyhow::ensure!(
            (2..=FOLLOWERS_MAX + 1).contains(&nodes),
            "--nodes {nodes}: a fleet is 2..={} nodes (canary + followers)",
            FOLLOWERS_MAX + 1
        );
        let mut base = Fleet::new(nodes);
        for _ in 1..args.rollouts {
            base.rollout(args.slots, Checks::Off);
        }
        let reference = args.ratio_to.map(Fleet::new);
        let mut ns_off = 0.0;
        for checks in [Checks::Off, Checks::Events, Checks::EventsAndTouched] {
            let mut best: Option<Tally> = None;
            let mut best_ref: Option<Tally> = None;
            for _ in 0..args.repeat.max(1) {
                let t = base.clone().rollout(args.slots, checks);
                if best.as_ref().is_none_or(|b| t.nanos < b.nanos) {
                    best = Some(t);
                }
                if let Some(r) = &reference {
                    let t = r.clone().rollout(args.slots, checks);
                    if best_ref.as_ref().is_none_or(|b| t.nanos < b.nanos) {
                        best_ref = Some(t);
                    }
                }
            }
            let t = best.unwrap_or_default();
            if let (Some(r), Some(n)) = (best_ref, args.ratio_to) {
                let per = |t: &Tally| t.nanos as f64 / t.inputs.max(1) as f64;
                println!(
                    "  ratio {checks:?}: {nodes} nodes, rollout {} = {:.0} ns/input; {n} nodes, rollout 1 = {:.0} ns/input; {:.2}x",
                    args.rollouts,
                    per(&t),
                    per(&r),
                    per(&t) / per(&r)
                );
            }
            let per_input = t.nanos as f64 / t.inputs as f64;
            if matches!(checks, Checks::Off) {
                ns_off = per_input;
            }
            println!(
                "{nodes:>5}  {:>7}  {:>6}  {:>6}  {:<15}  {:>8.0}  {:>8.0}   ({:.2}x)",
                args.rollouts,
                t.inputs,
                t.events,
                format!("{checks:?}"),
                per_input,
                t.nanos as f64 / t.events as f64,
                per_input / ns_off,
            );
        }
    }
    Ok(())
}

/// A controller and the healthy agents answering it.
#[derive(Clone)]
struct Fleet {
    state: ControllerState,
    nodes: usize,
    serving: Digest,
    next_release: u8,
}

impl Fleet {
    fn new(nodes: usize) -> Self {
        let mut fleet = Fleet {
            state: ControllerState::default(),
            nodes,
            serving: Digest::repeat(1),
            next_release: 2,
        };
        for n in 0..nodes {
            let hello = ToController::Hello {
                serving: Some(fleet.serving),
                generation: Generation(0),
            };
            fleet.feed(node(n), hello, Checks::Off, &mut Tally::default());
        }
        fleet
    }

    /// One whole rollout of a new release over the fleet, timed.
    fn rollout(&mut self, slots: u16, checks: Checks) -> Tally {
        let release = Digest::repeat(self.next_release);
        self.next_release = self.next_release.wrapping_add(1).max(2);
        let plan = Plan {
            release,
            canary: node(0),
            followers: (1..self.nodes).map(node).collect(),
            slots_max: slots,
            approval_after_canary: false,
        };
        let mut tally = Tally::default();
        let mut queue = VecDeque::new();
        queue.extend(self.handle(Input::StartRollout { plan }, checks, &mut tally));
        while let Some((to, msg)) = queue.pop_front() {
            if let Some(answer) = agent_answer(&msg) {
                let input = Input::FromAgent {
                    node: to,
                    msg: answer,
                };
                queue.extend(self.handle(input, checks, &mut tally));
            }
        }
        self.serving = release;
        tally
    }

    fn feed(&mut self, n: NodeId, msg: ToController, checks: Checks, tally: &mut Tally) {
        self.handle(Input::FromAgent { node: n, msg }, checks, tally);
    }

    /// step → check → apply → effects, the controller's loop without IO,
    /// as the runtime's batch runs it (`step_in_place` on its own state).
    fn handle(
        &mut self,
        input: Input,
        checks: Checks,
        tally: &mut Tally,
    ) -> Vec<(NodeId, ToAgent)> {
        let started = Instant::now();
        let mut watch = Watch {
            checks,
            sends: Vec::new(),
            touched: invariants::Touched::default(),
        };
        let events = step_in_place(&mut self.state, &input, &mut watch).unwrap_or_default();
        if matches!(checks, Checks::EventsAndTouched) {
            if let Err(v) = invariants::check_state_touched(&self.state, &watch.touched, None) {
                panic!("the real rules broke one: {v}");
            }
        }
        tally.nanos += started.elapsed().as_nanos();
        tally.inputs += 1;
        tally.events += events.len() as u64;
        watch.sends
    }
}

/// What the bench does around each event the model applies.
struct Watch {
    checks: Checks,
    sends: Vec<(NodeId, ToAgent)>,
    touched: invariants::Touched,
}

impl Fold for Watch {
    fn before(&mut self, state: &ControllerState, event: &Event) {
        if !matches!(self.checks, Checks::Off) {
            if let Err(v) = invariants::check_event(state, event) {
                panic!("the real rules broke one: {v}");
            }
        }
    }

    fn after(&mut self, state: &ControllerState, event: &Event) {
        self.touched.add(state, event);
        for effect in effects(state, event) {
            if let Effect::Send { to, msg } = effect {
                self.sends.push((to, msg));
            }
        }
    }
}

fn node(index: usize) -> NodeId {
    NodeId(u32::try_from(index).expect("fleet sizes are bounded by FOLLOWERS_MAX"))
}

/// What a healthy agent answers: ask to commit an applied op, report a
/// passing switch once told to commit; nothing else needs an answer.
fn agent_answer(msg: &ToAgent) -> Option<ToController> {
    match *msg {
        ToAgent::Apply { op, .. } => Some(ToController::CommitRequest { op }),
        ToAgent::CommitReply {
            op,
            release,
            decision: Decision::Commit,
            ..
        } => Some(ToController::Report {
            op,
            kind: ReportKind::Switched,
            observation: RouteObservation::passing(release),
        }),
        _ => None,
    }
}
