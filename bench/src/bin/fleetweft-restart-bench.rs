//! `fleetweft-restart-bench`: how long a controller takes to start on a
//! long log, and how that grows with history (issues #11 and #26).
//!
//! Fills a fresh log through `Controller::handle_batch` (the daemon's group
//! commit) with whole rollouts over `--nodes` healthy in-process agents
//! until it holds `--events` events, writing a snapshot (the model's state
//! and the daemon's annex, as the daemon does) every
//! `--snapshot-every-events`. At each `--measure-at` point (and at the end)
//! it closes the log and times a start as the daemon does it:
//! `Controller::start` (newest snapshot verified and decoded, the tail
//! read, verified and rule-checked) plus rebuilding the core's derived
//! indexes from the annex and the tail; the state must equal the one
//! before the stop. `--full-replay` also times a start from genesis
//! (`Controller::open_with_events`, every event rule-checked) at the end.
//! Prints one line per phase.
//!
//! With `--archive-dir`, after each snapshot the entries below it and
//! outside `--keep-events` move to archive segments and leave the live log,
//! as the daemon's housekeeping does (`[log] archive_dir`, `keep_events`),
//! so the live log a start opens stays bounded.
//!
//! `cargo run --release --bin fleetweft-restart-bench -- --nodes 10000 --events 20000000 --measure-at 1000000,5000000,10000000 --dir /tmp/rb`

use anyhow::{bail, Context};
use clap::Parser;
use controller::daemon::annex::Derived;
use controller::driver::Controller;
use model::controller::{Effect, Input, Labels};
use model::{Decision, Digest, Generation, NodeId, Plan, ReportKind, RouteObservation};
use model::{ToAgent, ToController};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
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
    /// A snapshot once this many events were appended since the last (the
    /// daemon's default); 0: none.
    #[arg(long, default_value_t = 100_000)]
    snapshot_every_events: u64,
    /// Also time a stop and start once the log holds at least each of
    /// these many events (comma-separated).
    #[arg(long, value_delimiter = ',')]
    measure_at: Vec<u64>,
    /// Also time a start from genesis (no snapshot) at the end.
    #[arg(long)]
    full_replay: bool,
    /// Archive below each snapshot into this directory (must not exist
    /// yet), as the daemon's housekeeping does; default: no archiving.
    #[arg(long)]
    archive_dir: Option<PathBuf>,
    /// With `--archive-dir`: entries kept in the live log behind its end
    /// (the daemon's `[log] keep_events`).
    #[arg(long, default_value_t = 1_000_000)]
    keep_events: u64,
    /// Where the log goes (must not exist yet; left in place afterwards).
    #[arg(long)]
    dir: PathBuf,
}

/// The controller being filled, what the daemon's core would derive, and
/// when the last snapshot was taken.
struct Filling {
    ctrl: Controller,
    derived: Derived,
    snapshot_every_events: u64,
    snapshot_covers: u64,
    snapshots: u64,
    snapshot_s: f64,
    /// Size of the last snapshot, in bytes.
    snapshot_bytes: usize,
    /// `--archive-dir` and `--keep-events`.
    archive: Option<(PathBuf, u64)>,
    /// Entries archived so far, and the time it took.
    archived: u64,
    archive_s: f64,
}

impl Filling {
    fn events(&self) -> u64 {
        self.ctrl.last_sequence().map_or(0, |s| s + 1)
    }
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
    let mut f = Filling {
        ctrl: Controller::open(&dir).context("open a fresh log")?,
        derived: Derived::default(),
        snapshot_every_events: args.snapshot_every_events,
        snapshot_covers: 0,
        snapshots: 0,
        snapshot_s: 0.0,
        snapshot_bytes: 0,
        archive: args.archive_dir.clone().map(|d| (d, args.keep_events)),
        archived: 0,
        archive_s: 0.0,
    };
    if let Some((archive_dir, _)) = &f.archive {
        if archive_dir.exists() {
            bail!(
                "{} exists: the bench archives into a fresh directory",
                archive_dir.display()
            );
        }
    }
    let mut inputs: VecDeque<Input> = (0..args.nodes)
        .map(|n| Input::EnrollNode {
            name: format!("sim-{n:05}"),
            labels: Labels::new(),
            public: "127.0.0.1:1".into(),
        })
        .collect();
    drain(&mut f, &mut inputs)?;
    let mut rollouts = 0u32;
    let mut serving = Digest::repeat(1);
    inputs.extend((0..args.nodes).map(|n| hello(n, serving)));
    drain(&mut f, &mut inputs)?;
    let mut measure_at: VecDeque<u64> = args.measure_at.iter().copied().collect();
    while f.events() < args.events {
        serving = Digest::repeat(2 + (rollouts % 200) as u8);
        let plan = Plan {
            release: serving,
            canary: NodeId(0),
            followers: (1..args.nodes).map(NodeId).collect(),
            slots_max: args.slots,
            approval_after_canary: false,
        };
        inputs.push_back(Input::StartRollout { plan });
        drain(&mut f, &mut inputs)?;
        rollouts += 1;
        eprintln!(
            "filled: {rollouts} rollouts, {} events, {} snapshots (last {} bytes), {:.1} s",
            f.events(),
            f.snapshots,
            f.snapshot_bytes,
            filled.elapsed().as_secs_f64()
        );
        if measure_at.front().is_some_and(|at| f.events() >= *at) {
            measure_at.pop_front();
            f = restart(f, &dir)?;
        }
    }
    println!(
        "fill: {} events, {rollouts} rollouts over {} nodes, {:.1} s; {} snapshots, the last {} bytes, {:.1} ms each on average; {} archived in {:.1} s",
        f.events(),
        args.nodes,
        filled.elapsed().as_secs_f64(),
        f.snapshots,
        f.snapshot_bytes,
        f.snapshot_s * 1e3 / f.snapshots.max(1) as f64,
        f.archived,
        f.archive_s
    );
    let f = restart(f, &dir)?;
    if args.full_replay {
        full_replay(f, &dir)?;
    }
    Ok(())
}

/// Stops the controller and starts it again as the daemon does; prints
/// the time and what the start folded.
fn restart(f: Filling, dir: &Path) -> anyhow::Result<Filling> {
    let events = f.events();
    let state = f.ctrl.state().clone();
    let derived = f.derived.clone();
    f.ctrl.close().context("close")?;
    let opened = Instant::now();
    let started = Controller::start(dir, Derived::decode).context("start")?;
    let covers = started.snapshot.as_ref().map_or(0, |s| s.covers);
    let rebuilt = Derived::rebuild(
        started.snapshot.map(|s| s.annex),
        &started.tail,
        started.controller.state(),
    );
    let start_s = opened.elapsed().as_secs_f64();
    if started.controller.state() != &state {
        bail!("the state after the start differs from the state before the stop");
    }
    if rebuilt != derived {
        bail!("the derived indexes after the start differ from the ones before the stop");
    }
    if !started.skipped.is_empty() {
        bail!("snapshots skipped: {:?}", started.skipped);
    }
    println!(
        "restart at {events} events ({} archived): snapshot of {covers} + tail of {} events in {start_s:.3} s; state and indexes equal",
        f.archived,
        started.tail.len()
    );
    Ok(Filling {
        ctrl: started.controller,
        derived: rebuilt,
        snapshot_covers: covers,
        ..f
    })
}

/// A start from genesis, every event rule-checked (no snapshot).
fn full_replay(f: Filling, dir: &Path) -> anyhow::Result<()> {
    let state = f.ctrl.state().clone();
    f.ctrl.close().context("close")?;
    let opened = Instant::now();
    let (reopened, replayed) = Controller::open_with_events(dir).context("reopen")?;
    let open_s = opened.elapsed().as_secs_f64();
    if reopened.state() != &state {
        bail!("the reopened state differs from the state before the restart");
    }
    println!(
        "full replay: open + verify + check_history of {} events in {open_s:.2} s ({:.1} µs/event); state equal",
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
fn drain(f: &mut Filling, inputs: &mut VecDeque<Input>) -> anyhow::Result<()> {
    while !inputs.is_empty() {
        let batch = f.ctrl.handle_batch(inputs).context("append")?;
        if let Some(refused) = batch.outcomes.iter().find_map(|o| o.as_ref().err()) {
            bail!("an input was refused: {refused}");
        }
        let (events, effects) = batch.ready.into_parts();
        f.derived = Derived::rebuild(
            Some(std::mem::take(&mut f.derived)),
            &events,
            f.ctrl.state(),
        );
        maybe_snapshot(f)?;
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

/// A snapshot when `--snapshot-every-events` says one is due, as the
/// daemon's core writes it (after a durable batch).
fn maybe_snapshot(f: &mut Filling) -> anyhow::Result<()> {
    let end = f.events();
    if f.snapshot_every_events == 0 || end - f.snapshot_covers < f.snapshot_every_events {
        return Ok(());
    }
    let took = Instant::now();
    let annex = f.derived.encode().map_err(anyhow::Error::msg)?;
    let written = f.ctrl.put_snapshot(&annex).context("snapshot")?;
    f.snapshot_covers = written.covers;
    f.snapshot_bytes = written.bytes;
    f.ctrl.prune_snapshots(2).context("prune snapshots")?;
    f.snapshots += 1;
    f.snapshot_s += took.elapsed().as_secs_f64();
    archive(f, end)
}

/// Below the snapshot just written and outside the count window, as the
/// daemon's housekeeping archives (`controller::archive::archive_upto`).
fn archive(f: &mut Filling, end: u64) -> anyhow::Result<()> {
    let Some((dir, keep_events)) = f.archive.clone() else {
        return Ok(());
    };
    let retention = controller::archive::Retention {
        keep_events,
        keep_days: 0,
    };
    let times = controller::archive::SnapshotTimes::default();
    let now = std::time::SystemTime::now();
    let upto = controller::archive::archive_upto(end, f.snapshot_covers, retention, &times, now);
    let archiver = f.ctrl.archiver();
    if upto <= archiver.first_live().context("live start")? {
        return Ok(());
    }
    let took = Instant::now();
    let config = eventlog::ArchiveConfig::default();
    archiver.archive(&dir, upto, &config).context("archive")?;
    drop(archiver);
    f.archived = upto;
    f.archive_s += took.elapsed().as_secs_f64();
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
