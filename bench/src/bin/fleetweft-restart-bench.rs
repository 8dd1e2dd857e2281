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
//! so the live log a start opens stays bounded. Archiving runs on a thread
//! beside the appends, as in the daemon; a restart waits for it first.
//!
//! `--measure-tail N` makes every measured start fold the same tail: at a
//! `--measure-at` point the bench writes a snapshot, goes on for N more
//! events (mid-rollout, as a real stop lands) and only then restarts, so
//! the curve compares history lengths and not where the last snapshot
//! happened to fall (the tail is bounded by `--snapshot-every-events`,
//! whatever the history; 90% of it is the near-worst case).
//!
//! With `--etcd E1,E2,E3` the log is on etcd (under a fresh prefix, one
//! leadership held for the whole run; a start is `EtcdStorage::open_probed`
//! plus `Controller::start_on_storage`, the limit probe done once before,
//! as a standby does), and the etcd member's database size is sampled
//! after every rollout: the largest is printed.
//!
//! `cargo run --release --bin fleetweft-restart-bench -- --nodes 10000 --events 20000000 --measure-at 1000000,5000000,10000000 --measure-tail 90000 --archive-dir /tmp/rba --dir /tmp/rb`
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use anyhow::{bail, Context};
use clap::Parser;
use controller::daemon::annex::Derived;
use controller::driver::{Controller, Started};
use eventlog::{EtcdClient, EtcdConfig, EtcdStorage, Leadership, LimitsProbed};
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
    /// (the daemon's `[log] keep_events`, same default).
    #[arg(long, default_value_t = controller::daemon::config::KEEP_EVENTS_DEFAULT)]
    keep_events: u64,
    /// At each `--measure-at` point: snapshot, then this many more events,
    /// then the restart (0: restart at the end of the rollout that crossed
    /// the point, whatever the tail). Must be below
    /// `--snapshot-every-events`.
    #[arg(long, default_value_t = 0)]
    measure_tail: u64,
    /// Where the sled log goes (must not exist yet; left in place
    /// afterwards). Not with `--etcd`.
    #[arg(long, conflicts_with = "etcd", required_unless_present = "etcd")]
    dir: Option<PathBuf>,
    /// Starts timed at each measurement; the fastest and the median are
    /// printed (the machine is shared: the fastest is the start's cost).
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Only time `--repeat` starts of the log a previous run left in
    /// `--dir`, or on `--etcd` under `--etcd-prefix` (e.g. again on a quiet
    /// machine, or after moving etcd's data directories to another disk).
    #[arg(long)]
    restart_only: bool,
    /// With `--restart-only --etcd`: the prefix the filling run printed
    /// (`log: etcd ... under PREFIX`).
    #[arg(long, requires = "restart_only")]
    etcd_prefix: Option<String>,
    /// The log on this etcd cluster (comma-separated endpoints, e.g. from
    /// `scripts/etcd.sh start DIR`), under a fresh prefix.
    #[arg(long, value_delimiter = ',')]
    etcd: Vec<String>,
}

/// How long a campaign waits for the previous holder's lease to expire.
const CAMPAIGN_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Where the log lives, and what a start on it needs (one per run: its
/// size does not matter).
#[allow(clippy::large_enum_variant)]
enum Backend {
    Sled(PathBuf),
    Etcd {
        client: EtcdClient,
        config: EtcdConfig,
        leadership: Leadership,
        probed: LimitsProbed,
    },
}

impl Backend {
    /// A fresh, empty log.
    fn fresh(&self) -> anyhow::Result<Controller> {
        match self {
            Backend::Sled(dir) => Controller::open(dir).context("open a fresh log"),
            Backend::Etcd { .. } => {
                let storage = self.etcd_storage()?;
                Ok(Controller::open_on_storage(storage)
                    .context("open a fresh log on etcd")?
                    .0)
            }
        }
    }

    /// A start as the daemon does it: newest snapshot, then the tail.
    fn start(&self) -> anyhow::Result<Started<Derived>> {
        match self {
            Backend::Sled(dir) => Controller::start(dir, Derived::decode).context("start"),
            Backend::Etcd { .. } => {
                let storage = self.etcd_storage()?;
                Controller::start_on_storage(storage, Derived::decode).context("start on etcd")
            }
        }
    }

    fn etcd_storage(&self) -> anyhow::Result<Box<dyn eventlog::LogStorage>> {
        let Backend::Etcd {
            client,
            config,
            leadership,
            probed,
        } = self
        else {
            bail!("not an etcd log");
        };
        let storage = EtcdStorage::open_probed(client, config, leadership, probed)
            .context("open the etcd storage")?;
        Ok(Box::new(storage))
    }

    fn name(&self) -> String {
        match self {
            Backend::Sled(dir) => format!("sled in {}", dir.display()),
            Backend::Etcd { config, .. } => {
                format!(
                    "etcd {} under {}",
                    config.endpoints.join(","),
                    config.prefix
                )
            }
        }
    }
}

/// Connects to etcd, campaigns for `prefix` (default: a fresh one) and
/// probes its limits.
fn etcd_backend(endpoints: &[String], prefix: Option<String>) -> anyhow::Result<Backend> {
    if endpoints.is_empty() {
        bail!("no log: give --dir (sled) or --etcd (endpoints)");
    }
    let prefix =
        prefix.unwrap_or_else(|| format!("/fleetweft-restart-bench/{}", std::process::id()));
    let config = EtcdConfig::new(endpoints.to_vec(), prefix);
    let client = EtcdClient::connect(&config).context("connect to etcd")?;
    // A restart-only run campaigns on the prefix the filling run held: its
    // lease must first expire, so wait for it as a standby would.
    let leadership = Leadership::campaign(&client, &config, "restart-bench", CAMPAIGN_WAIT)
        .context("campaign")?;
    let probing = Instant::now();
    let probed = EtcdStorage::probe(&client, &config).context("probe the batch limits")?;
    println!(
        "etcd: limit probe {:.3} s (once; a start after it skips it, as a standby's does)",
        probing.elapsed().as_secs_f64()
    );
    Ok(Backend::Etcd {
        client,
        config,
        leadership,
        probed,
    })
}

/// The controller being filled, what the daemon's core would derive, and
/// when the last snapshot was taken.
struct Filling {
    ctrl: Controller,
    backend: Backend,
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
    /// The archiving run under way: the entries it archives below, and
    /// how long it took.
    archiving: Option<std::thread::JoinHandle<anyhow::Result<(u64, f64)>>>,
    /// `--measure-at` points not reached yet, and `--measure-tail`.
    measure_at: VecDeque<u64>,
    measure_tail: u64,
    /// A restart is due once the log holds this many events.
    restart_at: Option<u64>,
    /// The largest database size the storage reported (etcd), in bytes.
    db_bytes_max: u64,
    /// Starts timed at each measurement (`--repeat`).
    repeat: u32,
}

impl Filling {
    fn new(
        ctrl: Controller,
        backend: Backend,
        snapshot_every_events: u64,
        archive: Option<(PathBuf, u64)>,
    ) -> Filling {
        Filling {
            ctrl,
            backend,
            derived: Derived::default(),
            snapshot_every_events,
            snapshot_covers: 0,
            snapshots: 0,
            snapshot_s: 0.0,
            snapshot_bytes: 0,
            archive,
            archived: 0,
            archive_s: 0.0,
            archiving: None,
            measure_at: VecDeque::new(),
            measure_tail: 0,
            restart_at: None,
            db_bytes_max: 0,
            repeat: 1,
        }
    }

    fn events(&self) -> u64 {
        self.ctrl.last_sequence().map_or(0, |s| s + 1)
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    check_args(&args)?;
    let backend = match &args.dir {
        Some(dir) if args.restart_only => {
            return restart_only(Backend::Sled(dir.clone()), args.repeat);
        }
        Some(dir) if dir.exists() => bail!("{} exists: the bench fills a fresh log", dir.display()),
        Some(dir) => Backend::Sled(dir.clone()),
        None if args.restart_only => {
            let Some(prefix) = args.etcd_prefix.clone() else {
                bail!("--restart-only needs --dir (sled) or --etcd with --etcd-prefix");
            };
            let backend = etcd_backend(&args.etcd, Some(prefix))?;
            return restart_only(backend, args.repeat);
        }
        None => etcd_backend(&args.etcd, None)?,
    };
    if let Some(archive_dir) = &args.archive_dir {
        if archive_dir.exists() {
            bail!(
                "{} exists: the bench archives into a fresh directory",
                archive_dir.display()
            );
        }
    }
    println!("log: {}", backend.name());
    let filled = Instant::now();
    let archive = args.archive_dir.clone().map(|d| (d, args.keep_events));
    let mut f = Filling::new(
        backend.fresh()?,
        backend,
        args.snapshot_every_events,
        archive,
    );
    f.measure_at = args.measure_at.iter().copied().collect();
    f.measure_tail = args.measure_tail;
    f.repeat = args.repeat;
    let mut inputs = enrollments(args.nodes);
    f = drain(f, &mut inputs)?;
    let mut rollouts = 0u32;
    let mut serving = Digest::repeat(1);
    inputs.extend((0..args.nodes).map(|n| hello(n, serving)));
    f = drain(f, &mut inputs)?;
    while f.events() < args.events {
        serving = Digest::repeat(2 + (rollouts % 200) as u8);
        let plan = plan_of(&args, serving);
        inputs.push_back(Input::StartRollout { plan });
        f = drain(f, &mut inputs)?;
        rollouts += 1;
        sample_space(&mut f)?;
        eprintln!(
            "filled: {rollouts} rollouts, {} events, {} snapshots (last {} bytes), db {} bytes, {:.1} s",
            f.events(),
            f.snapshots,
            f.snapshot_bytes,
            f.db_bytes_max,
            filled.elapsed().as_secs_f64()
        );
        if f.measure_tail == 0 && f.measure_at.front().is_some_and(|at| f.events() >= *at) {
            f.measure_at.pop_front();
            f = restart(f)?;
        }
    }
    archive_wait(&mut f)?;
    print_fill(&f, &args, rollouts, filled);
    let f = restart(f)?;
    if args.full_replay {
        full_replay(f)?;
    }
    Ok(())
}

/// One enrollment a node, `sim-00000` up.
fn enrollments(nodes: u32) -> VecDeque<Input> {
    (0..nodes)
        .map(|n| Input::EnrollNode {
            name: format!("sim-{n:05}"),
            labels: Labels::new(),
            public: "127.0.0.1:1".into(),
        })
        .collect()
}

/// A rollout of `serving` over the whole fleet, node 0 the canary.
fn plan_of(args: &Args, serving: Digest) -> Plan {
    Plan {
        release: serving,
        canary: NodeId(0),
        followers: (1..args.nodes).map(NodeId).collect(),
        slots_max: args.slots,
        approval_after_canary: false,
    }
}

/// The options' limits: a fleet one rollout spans, a tail a snapshot does
/// not cut.
fn check_args(args: &Args) -> anyhow::Result<()> {
    if args.nodes < 2 || args.nodes as usize > model::plan::FOLLOWERS_MAX + 1 {
        bail!(
            "--nodes must be 2..={} (one rollout spans the fleet)",
            model::plan::FOLLOWERS_MAX + 1
        );
    }
    if args.measure_tail > 0 && args.measure_tail >= args.snapshot_every_events {
        bail!(
            "--measure-tail must be below --snapshot-every-events (a snapshot would cut the tail)"
        );
    }
    Ok(())
}

/// What the fill did: events, rollouts, snapshots, archiving, the largest
/// database.
fn print_fill(f: &Filling, args: &Args, rollouts: u32, filled: Instant) {
    println!(
        "fill: {} events, {rollouts} rollouts over {} nodes, {:.1} s; {} snapshots, the last {} bytes, {:.1} ms each on average; {} archived in {:.1} s; largest database {} bytes",
        f.events(),
        args.nodes,
        filled.elapsed().as_secs_f64(),
        f.snapshots,
        f.snapshot_bytes,
        f.snapshot_s * 1e3 / f.snapshots.max(1) as f64,
        f.archived,
        f.archive_s,
        f.db_bytes_max
    );
}

/// The storage's database size (etcd reports one), kept at its largest.
fn sample_space(f: &mut Filling) -> anyhow::Result<()> {
    if let Some(space) = f.ctrl.archiver().space().context("storage size")? {
        f.db_bytes_max = f.db_bytes_max.max(space.bytes);
    }
    Ok(())
}

/// Stops the controller and starts it again as the daemon does,
/// `--repeat` times; prints the fastest and the median start and what the
/// start folded.
fn restart(mut f: Filling) -> anyhow::Result<Filling> {
    archive_wait(&mut f)?;
    let events = f.events();
    let state = f.ctrl.state().clone();
    let mut derived = f.derived.clone();
    let mut ctrl = f.ctrl;
    let mut times_s = Vec::new();
    let (mut covers, mut tail) = (0, 0);
    for _ in 0..f.repeat.max(1) {
        ctrl.close().context("close")?;
        let opened = Instant::now();
        let started = f.backend.start()?;
        covers = started.snapshot.as_ref().map_or(0, |s| s.covers);
        let rebuilt = Derived::rebuild(
            started.snapshot.map(|s| s.annex),
            &started.tail,
            started.controller.state(),
        );
        times_s.push(opened.elapsed().as_secs_f64());
        if started.controller.state() != &state {
            bail!("the state after the start differs from the state before the stop");
        }
        if rebuilt != derived {
            bail!("the derived indexes after the start differ from the ones before the stop");
        }
        if !started.skipped.is_empty() {
            bail!("snapshots skipped: {:?}", started.skipped);
        }
        (ctrl, derived, tail) = (started.controller, rebuilt, started.tail.len());
    }
    times_s.sort_by(f64::total_cmp);
    println!(
        "restart at {events} events ({} archived): snapshot of {covers} + tail of {tail} events in {:.3} s (fastest of {}; median {:.3} s); state and indexes equal",
        f.archived,
        times_s[0],
        times_s.len(),
        times_s[times_s.len() / 2]
    );
    Ok(Filling {
        ctrl,
        derived,
        snapshot_covers: covers,
        ..f
    })
}

/// `--restart-only`: times starts of the log the bench left in `--dir`.
fn restart_only(backend: Backend, repeat: u32) -> anyhow::Result<()> {
    let started = backend.start()?;
    let derived = Derived::rebuild(
        started.snapshot.map(|s| s.annex),
        &started.tail,
        started.controller.state(),
    );
    let first_live = started.controller.archiver().first_live()?;
    let mut f = Filling::new(started.controller, backend, 0, None);
    f.derived = derived;
    f.archived = first_live;
    f.repeat = repeat;
    restart(f)?;
    Ok(())
}

/// A start from genesis, every event rule-checked (no snapshot).
fn full_replay(f: Filling) -> anyhow::Result<()> {
    let Backend::Sled(dir) = &f.backend else {
        bail!("--full-replay is for a sled log");
    };
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
/// answer, until nothing is left to answer; restarts where
/// `--measure-tail` says one is due.
fn drain(mut f: Filling, inputs: &mut VecDeque<Input>) -> anyhow::Result<Filling> {
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
        maybe_snapshot(&mut f)?;
        for effect in effects {
            if let Effect::Send { to, msg } = effect {
                if let Some(msg) = agent_answer(&msg) {
                    inputs.push_back(Input::FromAgent { node: to, msg });
                }
            }
        }
        f = maybe_measure(f)?;
    }
    Ok(f)
}

/// `--measure-tail`: at a `--measure-at` point a snapshot, then after
/// the tail a restart.
fn maybe_measure(mut f: Filling) -> anyhow::Result<Filling> {
    if f.measure_tail == 0 {
        return Ok(f);
    }
    let end = f.events();
    if f.restart_at.is_some_and(|at| end >= at) {
        f.restart_at = None;
        return restart(f);
    }
    if f.restart_at.is_none() && f.measure_at.front().is_some_and(|at| end >= *at) {
        f.measure_at.pop_front();
        snapshot(&mut f)?;
        f.restart_at = Some(end + f.measure_tail);
    }
    Ok(f)
}

/// A snapshot when `--snapshot-every-events` says one is due, as the
/// daemon's core writes it (after a durable batch).
fn maybe_snapshot(f: &mut Filling) -> anyhow::Result<()> {
    let end = f.events();
    if f.snapshot_every_events == 0 || end - f.snapshot_covers < f.snapshot_every_events {
        return Ok(());
    }
    snapshot(f)
}

/// A snapshot now, then archiving below it.
fn snapshot(f: &mut Filling) -> anyhow::Result<()> {
    let end = f.events();
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
/// daemon's housekeeping archives (`controller::archive::archive_upto`):
/// on a thread beside the appends. Unlike the daemon, a run still under
/// way when the next snapshot comes is waited for: the bench appends far
/// faster than a fleet does on average (on etcd, faster than archiving
/// moves entries), and a live log that grows because the archive lags
/// would measure the bench's rate, not a start on a long history.
fn archive(f: &mut Filling, end: u64) -> anyhow::Result<()> {
    let Some((dir, keep_events)) = f.archive.clone() else {
        return Ok(());
    };
    archive_wait(f)?;
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
    f.archiving = Some(std::thread::spawn(move || {
        let took = Instant::now();
        let config = eventlog::ArchiveConfig::default();
        archiver.archive(&dir, upto, &config).context("archive")?;
        Ok((upto, took.elapsed().as_secs_f64()))
    }));
    Ok(())
}

/// Waits for the archiving run under way, if any.
fn archive_wait(f: &mut Filling) -> anyhow::Result<()> {
    let Some(run) = f.archiving.take() else {
        return Ok(());
    };
    let (upto, took_s) = run
        .join()
        .map_err(|_| anyhow::anyhow!("the archiving thread panicked"))??;
    f.archived = upto;
    f.archive_s += took_s;
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
