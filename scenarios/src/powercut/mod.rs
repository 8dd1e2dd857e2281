//! `fleetweft-powercut`: the power-cut campaign of issue #25.
//!
//! The real controller and three real agents run, each node in its own
//! network namespace, with every data directory (the controller's sled log,
//! bundle store and webhook state; each agent's journal, staging area and
//! release directories) on a lazy FUSE mount (`lazyfs`) that keeps what was
//! not synced pending. In a loop the harness drives rollouts as an operator
//! would (uploads, starts with and without the approval gate, pauses,
//! resumes, approvals, supersedes), then power fails: at a random moment or
//! at a random sync point, every sync on every mount is held from that
//! instant, every process is SIGKILLed, and every mount drops (or tears)
//! what was pending. Then it checks what survived (see [`checks`]),
//! restarts everything on it and goes on. Every few cuts, and at the end,
//! the power stays on until the current rollout has finished.

pub mod checks;
pub mod mounts;
pub mod witness;

use crate::fleet::{self, AgentFaults, Bins, Fleet, Layout, NODES};
use anyhow::{anyhow, Context};
use api::view::wire::{UploadReply, WriteReply};
use api::view::{RolloutDto, StatusDto};
use mounts::{data_dir, Mounts};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use witness::AckedWrite;

/// Longest a time-chosen cut waits after the operator's action (ms).
pub const CUT_AFTER_MS_MAX: u64 = 1_500;
/// Largest sync count a sync-chosen cut counts to.
pub const CUT_AT_SYNC_MAX: u64 = 60;
/// Syncs of one bundle upload (the file, then its directory): where an
/// upload's sync-chosen cuts aim.
pub const UPLOAD_SYNCS: u64 = 2;
/// How long a sync-chosen cut waits for its sync before cutting anyway.
pub const SYNC_WAIT_MS: u64 = 1_500;
/// A progress line on stderr every this many cuts.
pub const PROGRESS_EVERY_CUTS: u64 = 25;
/// A finish phase (power on until the rollout ends) every this many cuts.
pub const FINISH_EVERY_CUTS: u64 = 50;
/// How long a node may take, after a finish phase, to prove it serves.
pub const VERIFY_MS: u64 = 30_000;
/// How long a finish phase may take before the rollout counts as stuck.
pub const FINISH_MS: u64 = 120_000;

/// Set by SIGINT/SIGTERM ([`stop_on_signals`]): the campaign ends after
/// the cut under way, cleans up and reports what it has.
pub static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Lets SIGINT and SIGTERM end the campaign cleanly (mounts unmounted,
/// namespaces removed, the report printed) instead of killing it.
pub fn stop_on_signals() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        STOP.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    Ok(())
}

/// What the campaign is asked to do.
#[derive(Clone, Debug)]
pub struct Options {
    /// Power cuts to perform.
    pub cuts: u64,
    /// Seed of every random choice (the cut moment, the action).
    pub seed: u64,
    /// A durability mutant to run with (a `durability-mutants` build);
    /// the campaign then stops at the first loss it sees.
    pub mutant: Option<String>,
    /// Where the run lives (mounts, logs); kept on failure.
    pub dir: PathBuf,
    /// Print a line per cut.
    pub verbose: bool,
}

/// The campaign's figures (`--json` prints them).
#[derive(Debug, Default, Serialize)]
pub struct Report {
    /// Power cuts performed.
    pub cuts: u64,
    /// Acknowledged facts checked after cuts: commands agents received,
    /// API writes acknowledged, agent journal counts, uploaded bundles.
    pub acked_checked: u64,
    /// Acknowledged facts missing or changed after a cut.
    pub acked_lost: u64,
    /// Writes torn (a prefix kept, the rest zeroed) by cuts.
    pub torn_tails: u64,
    /// Cuts after which everything restarted and every check passed.
    pub recovered: u64,
    /// Rule violations: `log verify` failing, a second decision, a staged
    /// release half there, a rollout that could not finish.
    pub violations: u64,
    /// Cuts that were chosen as the Nth sync (the rest at a random time).
    pub cuts_at_sync: u64,
    /// Cuts that held a sync in flight.
    pub cuts_with_sync_in_flight: u64,
    /// Cuts that dropped pending state of each store.
    pub cuts_dropping: BTreeMap<&'static str, u64>,
    /// Cuts that fell while an upload was in flight.
    pub cuts_during_upload: u64,
    /// Controller starts after a cut that loaded a snapshot (the rest
    /// replayed the whole live log).
    pub snapshot_starts: u64,
    /// Snapshots a start after a cut skipped as unusable (logged as
    /// `skipping snapshot`).
    pub snapshots_skipped: u64,
    /// The most entries the archive held after a cut (the live log's
    /// first sequence).
    pub archived_entries_max: u64,
    /// Rollouts that completed (between cuts or in finish phases).
    pub rollouts_completed: u64,
    /// Finish phases run (power on until the rollout ended).
    pub finishes: u64,
    /// The mutant, if any.
    pub mutant: Option<String>,
    /// The cut (1-based) at which the first loss or violation was seen.
    pub first_failure_at_cut: Option<u64>,
    /// What the first failures were (at most a few).
    pub failures: Vec<String>,
    /// Wall time (s).
    pub wall_s: f64,
}

/// The controller's archive directory, inside its data directory (on its
/// lazy mount, so cuts fall on archiving runs too).
pub const ARCHIVE_DIR_NAME: &str = "archive";

/// The controller's `[log]` in the campaign: a snapshot every
/// `SNAPSHOT_EVERY_EVENTS` (the smallest allowed) and archiving below it
/// outside the last `KEEP_EVENTS`, so that cuts land in snapshot writes
/// and archiving runs, which a daemon with the defaults does once per
/// 100,000 events.
const SNAPSHOT_EVERY_EVENTS: u64 = 64;
const KEEP_EVENTS: u64 = 64;

/// What the daemon logs when a start loaded a snapshot, and when it skips
/// one (controller/src/daemon/mod.rs, eventlog/src/snapshot.rs).
const SNAPSHOT_START_LINE: &str = "a snapshot of the first";
const SNAPSHOT_SKIP_LINE: &str = "skipping snapshot";

/// Most failure messages kept in the report.
const FAILURES_KEPT_MAX: usize = 20;

impl Report {
    fn fail(&mut self, cut: u64, what: String) {
        eprintln!("cut {cut}: FAILED: {what}");
        if self.first_failure_at_cut.is_none() {
            self.first_failure_at_cut = Some(cut);
        }
        if self.failures.len() < FAILURES_KEPT_MAX {
            self.failures.push(format!("cut {cut}: {what}"));
        }
    }
}

/// A small deterministic generator (splitmix64): the campaign's choices
/// replay from `--seed`, and no dependency is needed for it.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// The operator's action before a cut, run while power may fail.
#[derive(Clone, Debug)]
enum Action {
    /// Upload a new release and start a rollout of it.
    Start {
        version: String,
        approval: bool,
    },
    /// Re-upload the current release (the store's write path again).
    Reupload {
        version: String,
    },
    Pause(String),
    Resume(String),
    Approve(String),
    Nothing,
}

/// Runs the campaign. `Err` only when the harness itself cannot go on
/// (FUSE missing, a process that will not start); losses and violations
/// are in the report.
pub async fn run(bins: &Bins, opts: &Options) -> anyhow::Result<Report> {
    let started = Instant::now();
    let mut owners = vec!["controller".to_string()];
    owners.extend(NODES.iter().map(|n| n.to_string()));
    std::fs::create_dir_all(&opts.dir)?;
    let mounts = Mounts::mount(&opts.dir, &owners)?;
    let mut fleet = Fleet::start(&opts.dir, bins, &[], &[], &NODES, Layout::Single)
        .await
        .context("starting the fleet on the lazy mounts")?;
    set_mutant_env(&mut fleet, opts.mutant.as_deref());
    fleet.controller_toml_extra = log_section(&data_dir(&opts.dir, "controller"));
    // The controller started before the mutant's environment and the
    // `[log]` section were set: restart it under them (an orderly stop
    // loses nothing).
    fleet.stop("controller").await?;
    fleet.start_controller(&Default::default()).await?;
    for node in NODES {
        fleet.start_agent(node, &AgentFaults::default())?;
    }
    let mut campaign = Campaign {
        rng: Rng::new(opts.seed),
        report: Report {
            mutant: opts.mutant.clone(),
            ..Report::default()
        },
        acked: Vec::new(),
        uploads: Vec::new(),
        versions: 0,
        current: None,
    };
    let outcome = campaign.cuts(&mut fleet, &mounts, opts).await;
    // A last cut, so nothing waits on a held sync, then the cleanup.
    mounts.line.trip();
    fleet.signal_everything();
    mounts.cut_all();
    let _ = fleet.kill_everything().await;
    let _ = fleet.shutdown().await;
    drop(mounts);
    campaign.report.wall_s = started.elapsed().as_secs_f64();
    outcome.map(|()| campaign.report)
}

/// The controller's `[log]` section: snapshots and archiving as often as
/// allowed.
fn log_section(controller_data: &Path) -> String {
    let archive = controller_data.join(ARCHIVE_DIR_NAME);
    format!(
        "\n[log]\nsnapshot_every_events = {SNAPSHOT_EVERY_EVENTS}\narchive_dir = {:?}\nkeep_events = {KEEP_EVENTS}\n",
        archive.display().to_string()
    )
}

/// The mutant's environment on the processes whose durability step it
/// removes.
fn set_mutant_env(fleet: &mut Fleet, mutant: Option<&str>) {
    let Some(mutant) = mutant else {
        return;
    };
    let prefix = match mutant {
        eventlog::mutants::NO_FSYNC_AGENT_JOURNAL => "node-",
        _ => "controller",
    };
    fleet.child_env.push((
        prefix.to_string(),
        eventlog::mutants::MUTANT_ENV.to_string(),
        mutant.to_string(),
    ));
}

/// The campaign's running state.
pub struct Campaign {
    rng: Rng,
    report: Report,
    /// API writes acknowledged since the start (checked after every cut).
    acked: Vec<AckedWrite>,
    /// Bundles whose upload was acknowledged.
    uploads: Vec<model::Digest>,
    /// Releases signed so far.
    versions: u64,
    /// The version of the newest rollout the harness started.
    current: Option<String>,
}

impl Campaign {
    async fn cuts(
        &mut self,
        fleet: &mut Fleet,
        mounts: &Mounts,
        opts: &Options,
    ) -> anyhow::Result<()> {
        for cut in 1..=opts.cuts {
            if STOP.load(std::sync::atomic::Ordering::SeqCst) {
                eprintln!("stopping after {} cuts (signal)", cut - 1);
                return Ok(());
            }
            let action = self.choose(fleet).await;
            let during_upload = self.act_then_cut(fleet, mounts, &action).await?;
            let outcome = mounts.cut_all();
            fleet.kill_everything().await?;
            self.report.cuts = cut;
            self.report.torn_tails += outcome.torn;
            self.report.cuts_during_upload += u64::from(during_upload);
            if outcome.held_syncs > 0 {
                self.report.cuts_with_sync_in_flight += 1;
            }
            for store in &outcome.stores {
                *self.report.cuts_dropping.entry(store.key()).or_default() += 1;
            }
            let before = (self.report.acked_lost, self.report.violations);
            checks::after_cut(fleet, &opts.dir, self, cut).await;
            restart(fleet).await?;
            self.count_start(fleet);
            let failed = (self.report.acked_lost, self.report.violations) != before;
            if !failed {
                self.report.recovered += 1;
            }
            if opts.verbose {
                eprintln!(
                    "cut {cut}: {action:?}; dropped {:?}; torn {}; held syncs {}; {}",
                    outcome.stores.iter().map(|s| s.key()).collect::<Vec<_>>(),
                    outcome.torn,
                    outcome.held_syncs,
                    if failed { "LOSS" } else { "ok" }
                );
            }
            if failed && opts.mutant.is_some() {
                return Ok(());
            }
            if cut % PROGRESS_EVERY_CUTS == 0 {
                let r = &self.report;
                eprintln!(
                    "progress: cuts {cut}/{} acked_checked {} acked_lost {} torn_tails {} recovered {} violations {} rollouts_completed {}",
                    opts.cuts, r.acked_checked, r.acked_lost, r.torn_tails, r.recovered, r.violations, r.rollouts_completed
                );
            }
            if cut % FINISH_EVERY_CUTS == 0 || cut == opts.cuts {
                self.finish(fleet, cut).await?;
            }
        }
        Ok(())
    }

    /// What the controller's start after a cut said about its snapshots.
    fn count_start(&mut self, fleet: &Fleet) {
        let log = fleet.last_log("controller");
        if log.contains(SNAPSHOT_START_LINE) {
            self.report.snapshot_starts += 1;
        }
        self.report.snapshots_skipped += log.matches(SNAPSHOT_SKIP_LINE).count() as u64;
    }

    /// Picks the operator's next action from what the controller says.
    async fn choose(&mut self, fleet: &Fleet) -> Action {
        let latest = latest_rollout(fleet).await;
        let new_start = |c: &mut Campaign| {
            c.versions += 1;
            Action::Start {
                version: format!("pc{}", c.versions),
                approval: c.rng.below(3) == 0,
            }
        };
        let Some(r) = latest else {
            return new_start(self);
        };
        match r.status.as_str() {
            "completed" | "ended" | "superseded" => {
                if r.status == "completed" {
                    self.report.rollouts_completed += 1;
                }
                new_start(self)
            }
            "waiting-approval" => Action::Approve(r.id),
            "paused"
                if r.paused_reason
                    .as_deref()
                    .is_some_and(|w| w.contains("operator")) =>
            {
                Action::Resume(r.id)
            }
            // Paused by a failure or a budget: supersede with a new release.
            "paused" => new_start(self),
            _ => match self.rng.below(6) {
                0 => Action::Pause(r.id),
                1 => match &self.current {
                    Some(v) => Action::Reupload { version: v.clone() },
                    None => Action::Nothing,
                },
                _ => Action::Nothing,
            },
        }
    }

    /// Runs `action` while power may fail; returns whether an upload was
    /// in flight when it did.
    async fn act_then_cut(
        &mut self,
        fleet: &mut Fleet,
        mounts: &Mounts,
        action: &Action,
    ) -> anyhow::Result<bool> {
        let (digest, bytes) = match action {
            Action::Start { version, .. } | Action::Reupload { version } => {
                let (d, b) = fleet.add_release(version)?;
                (Some(d), Some(b))
            }
            _ => (None, None),
        };
        if let Action::Start { version, .. } = action {
            self.current = Some(version.clone());
        }
        let api = fleet.api().clone();
        let act = {
            let action = action.clone();
            async move { perform(&api, &action, digest, bytes).await }
        };
        let at_sync = self.rng.below(2) == 0;
        let line = mounts.line.clone();
        if at_sync {
            self.report.cuts_at_sync += 1;
            // An upload's own syncs (its file, its directory) come first:
            // aim there half the time, so cuts land inside uploads often.
            let uploads = matches!(action, Action::Start { .. } | Action::Reupload { .. });
            let at = if uploads && self.rng.below(2) == 0 {
                1 + self.rng.below(UPLOAD_SYNCS)
            } else {
                1 + self.rng.below(CUT_AT_SYNC_MAX)
            };
            line.trip_at_sync(at);
        }
        let wait_ms = self.rng.below(CUT_AFTER_MS_MAX);
        let power = async {
            if at_sync {
                let deadline = Instant::now() + Duration::from_millis(SYNC_WAIT_MS);
                while !line.tripped() && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            } else {
                tokio::time::sleep(Duration::from_millis(wait_ms)).await;
            }
            line.trip();
        };
        let act = tokio::spawn(act);
        power.await;
        let uploading = matches!(action, Action::Start { .. } | Action::Reupload { .. });
        // The action's reply, if it came: kill first (the instant of the
        // cut), then collect what was acknowledged. Processes blocked in a
        // held sync die at the cut, which answers it.
        fleet.signal_everything();
        let acked = match tokio::time::timeout(Duration::from_secs(5), act).await {
            Ok(Ok(acked)) => acked,
            _ => Acked::default(),
        };
        let in_flight = uploading && !acked.upload_done;
        self.acked.extend(acked.writes);
        if let Some(d) = acked.uploaded {
            if !self.uploads.contains(&d) {
                self.uploads.push(d);
            }
        }
        Ok(in_flight)
    }

    /// Power stays on until the newest rollout has ended: the operator
    /// approves, resumes and supersedes as needed. A rollout that cannot
    /// get there within [`FINISH_MS`] is a violation.
    async fn finish(&mut self, fleet: &mut Fleet, cut: u64) -> anyhow::Result<()> {
        self.report.finishes += 1;
        let deadline = Instant::now() + Duration::from_millis(FINISH_MS);
        loop {
            let Some(r) = latest_rollout(fleet).await else {
                return Ok(());
            };
            match r.status.as_str() {
                "completed" => {
                    self.report.rollouts_completed += 1;
                    // The next cut starts a new one.
                    self.current = None;
                    return self.check_all_verified(fleet, cut).await;
                }
                "ended" | "superseded" => return Ok(()),
                "waiting-approval" => {
                    let _ = perform(fleet.api(), &Action::Approve(r.id.clone()), None, None).await;
                }
                "paused" => {
                    let _ = perform(fleet.api(), &Action::Resume(r.id.clone()), None, None).await;
                }
                _ => {}
            }
            if Instant::now() > deadline {
                self.report.violations += 1;
                self.report.fail(
                    cut,
                    format!(
                        "rollout {} could not finish in {FINISH_MS} ms: {}",
                        r.id, r.status
                    ),
                );
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(fleet::POLL_MS)).await;
        }
    }

    /// After a completed rollout every node's live proof must verify, once
    /// its agent is back (bounded by [`VERIFY_MS`]).
    async fn check_all_verified(&mut self, fleet: &Fleet, cut: u64) -> anyhow::Result<()> {
        for node in NODES {
            let deadline = Instant::now() + Duration::from_millis(VERIFY_MS);
            loop {
                let (code, proof) = fleet.node_proof(node).await?;
                if code == 0 && proof["verdict"] == "verified" {
                    break;
                }
                if Instant::now() > deadline {
                    self.report.violations += 1;
                    self.report.fail(
                        cut,
                        format!(
                            "{node} not verified after a completed rollout: {}",
                            proof["summary"]
                        ),
                    );
                    break;
                }
                tokio::time::sleep(Duration::from_millis(fleet::POLL_MS)).await;
            }
        }
        Ok(())
    }
}

/// What an action got acknowledged before power failed.
#[derive(Default)]
struct Acked {
    writes: Vec<AckedWrite>,
    uploaded: Option<model::Digest>,
    upload_done: bool,
}

/// Performs `action` through the API; collects the acknowledgements.
async fn perform(
    api: &api::client::ApiClient,
    action: &Action,
    digest: Option<model::Digest>,
    bytes: Option<Vec<u8>>,
) -> Acked {
    let mut acked = Acked::default();
    let write = |what: String, reply: WriteReply| AckedWrite {
        what,
        events: reply
            .events
            .into_iter()
            .map(|e| (e.sequence, e.text))
            .collect(),
    };
    match action {
        Action::Start { version, approval } => {
            let (Some(d), Some(b)) = (digest, bytes) else {
                return acked;
            };
            if api
                .post_bytes::<UploadReply>("/api/bundles", b)
                .await
                .is_err()
            {
                return acked;
            }
            acked.uploaded = Some(d);
            acked.upload_done = true;
            let body = serde_json::json!({
                "release": d.to_hex(),
                "canary": NODES[0],
                "followers": &NODES[1..],
                "slots": 1,
                "approve_after_canary": approval,
            });
            if let Ok(reply) = api.post_json::<WriteReply>("/api/rollouts", &body).await {
                acked.writes.push(write(format!("start {version}"), reply));
            }
        }
        Action::Reupload { .. } => {
            let (Some(d), Some(b)) = (digest, bytes) else {
                return acked;
            };
            if api
                .post_bytes::<UploadReply>("/api/bundles", b)
                .await
                .is_ok()
            {
                acked.uploaded = Some(d);
                acked.upload_done = true;
            }
        }
        Action::Pause(id) | Action::Resume(id) | Action::Approve(id) => {
            let verb = match action {
                Action::Pause(_) => "pause",
                Action::Resume(_) => "resume",
                _ => "approve",
            };
            let path = format!("/api/rollouts/{id}/{verb}");
            if let Ok(reply) = api
                .post_json::<WriteReply>(&path, &serde_json::json!({}))
                .await
            {
                acked.writes.push(write(format!("{verb} {id}"), reply));
            }
        }
        Action::Nothing => {}
    }
    acked
}

/// The newest rollout, if the controller answers.
async fn latest_rollout(fleet: &Fleet) -> Option<RolloutDto> {
    let status: StatusDto = fleet.api().get("/api/status").await.ok()?;
    status.rollouts.last().cloned()
}

/// Starts the controller and every agent again on what survived.
async fn restart(fleet: &mut Fleet) -> anyhow::Result<()> {
    fleet
        .start_controller(&Default::default())
        .await
        .map_err(|e| anyhow!("the controller did not come back after a cut: {e:#}"))?;
    for node in NODES {
        fleet.start_agent(node, &AgentFaults::default())?;
    }
    Ok(())
}

/// The default run directory.
pub fn default_dir() -> PathBuf {
    std::env::temp_dir().join(format!("fleetweft-powercut-{}", std::process::id()))
}

/// Whether `dir` may be removed after a clean run.
pub fn removable(dir: &Path) -> bool {
    dir.starts_with(std::env::temp_dir())
}
