//! `fleetweft-restart-bench`: how long a controller takes to open a long
//! log (issue #11: "a restart on a log of at least 1,000,000 events is back
//! and serving in ≤ 20 s, with every rule checked").
//!
//! Fills a fresh log through `Controller::handle_batch` (the daemon's group
//! commit) with whole rollouts over `--nodes` healthy in-process agents
//! until it holds `--events` events, closes it, then times
//! `Controller::open_with_events`: chain verification, decoding and
//! `invariants::check_history` (every event rule, the state rules on what
//! each event touched). Prints one line per phase.
//!
//! `cargo run --release -p runtime --bin fleetweft-restart-bench -- --nodes 10000 --events 1000000`

use anyhow::{bail, Context};
use clap::Parser;
use controller::driver::Controller;
use model::controller::{Effect, Input, Labels};
use model::{Decision, Digest, Generation, NodeId, Plan, ReportKind, RouteObservation};
use model::{ToAgent, ToController};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Parser)]
#[command(name = "fleetweft-restart-bench")]
struct Args {
    /// Nodes in the fleet (each rollout spans all of them).
    #[arg(long, default_value_t = 10_000)]
    nodes: u32,
    /// Fill the log until it holds at least this many events.
    #[arg(long, default_value_t = 1_000_000)]
    events: u64,
    /// Slots per rollout.
    #[arg(long, default_value_t = 500)]
    slots: u16,
    /// Where the log goes (must not exist yet; left in place afterwards).
    #[arg(long)]
    dir: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.nodes < 2 || args.nodes as usize > model::plan::FOLLOWERS_MAX + 1 {
        bail!(
            "--nodes must be 2..={} (one rollout spans the fleet)",
            model::plan::FOLLOWERS_MAX + 1
        );
    }
    let dir = args.dir.clone();
    if dir.exists() {
        bail!("{} exists: the bench fills a fresh log", dir.display());
    }
    let filled = Instant::now();
    let mut ctrl = Controller::open(&dir).context("open a fresh log")?;
    let mut inputs: VecDeque<Input> = (0..args.nodes)
        .map(|n| Input::EnrollNode {
            name: format!("sim-{n:05}"),
            labels: Labels::new(),
            public: "127.0.0.1:1".into(),
        })
        .collect();
    drain(&mut ctrl, &mut inputs)?;
    let mut rollouts = 0u32;
    let mut serving = Digest::repeat(1);
    inputs.extend((0..args.nodes).map(|n| hello(n, serving)));
    drain(&mut ctrl, &mut inputs)?;
    while ctrl.last_sequence().unwrap_or(0) + 1 < args.events {
        serving = Digest::repeat(2 + (rollouts % 200) as u8);
        let plan = Plan {
            release: serving,
            canary: NodeId(0),
            followers: (1..args.nodes).map(NodeId).collect(),
            slots_max: args.slots,
            approval_after_canary: false,
        };
        inputs.push_back(Input::StartRollout { plan });
        drain(&mut ctrl, &mut inputs)?;
        rollouts += 1;
        eprintln!(
            "filled: {rollouts} rollouts, {} events, {:.1} s",
            ctrl.last_sequence().map_or(0, |s| s + 1),
            filled.elapsed().as_secs_f64()
        );
    }
    let events = ctrl.last_sequence().map_or(0, |s| s + 1);
    let fill_s = filled.elapsed().as_secs_f64();
    let state = ctrl.state().clone();
    ctrl.close().context("close")?;
    println!(
        "fill: {events} events, {rollouts} rollouts over {} nodes, {fill_s:.1} s",
        args.nodes
    );
    let opened = Instant::now();
    let (reopened, replayed) = Controller::open_with_events(&dir).context("reopen")?;
    let open_s = opened.elapsed().as_secs_f64();
    if reopened.state() != &state {
        bail!("the reopened state differs from the state before the restart");
    }
    println!(
        "restart: open + verify + check_history of {} events in {open_s:.2} s ({:.1} µs/event); state equal",
        replayed.len(),
        open_s * 1e6 / replayed.len().max(1) as f64
    );
    Ok(())
}

fn hello(node: u32, serving: Digest) -> Input {
    Input::FromAgent {
        node: NodeId(node),
        msg: ToController::Hello {
            serving: Some(serving),
            generation: Generation(0),
        },
    }
}

/// Handle `inputs` in durable batches, feeding back what healthy agents
/// answer, until nothing is left to answer.
fn drain(ctrl: &mut Controller, inputs: &mut VecDeque<Input>) -> anyhow::Result<()> {
    while !inputs.is_empty() {
        let batch = ctrl.handle_batch(inputs).context("append")?;
        if let Some(refused) = batch.outcomes.iter().find_map(|o| o.as_ref().err()) {
            bail!("an input was refused: {refused}");
        }
        let (_, effects) = batch.ready.into_parts();
        for effect in effects {
            if let Effect::Send { to, msg } = effect {
                if let Some(msg) = agent_answer(&msg) {
                    inputs.push_back(Input::FromAgent { node: to, msg });
                }
            }
        }
    }
    Ok(())
}

/// What a healthy agent answers: ask to commit an applied op, report a
/// passing switch once told to commit.
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
