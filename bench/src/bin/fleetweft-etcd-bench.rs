//! Durable appends per second on etcd next to sled, and the takeover time
//! of a hot standby, in one run (issue #14's benchmark).
//!
//! Usage: `fleetweft-etcd-bench [--endpoints E1,E2,E3] [--seconds S]
//! [--takeovers N] [--lease-ttl-ms T] [--agents A] [--only appends|takeover]`
//!
//! Without `--endpoints` it starts its own 3-member cluster on loopback
//! with `scripts/etcd.sh start` in a temporary directory and stops it
//! afterwards.
//!
//! **Appends.** For each backend (sled in a temporary directory; etcd
//! under a fresh prefix), events of about 100 encoded bytes, each append
//! waiting until durable (fsync for sled, a quorum commit for etcd), for S
//! seconds (default 3) per row:
//! - one appender thread, 1, 64 or 512 events per append;
//! - 8 and 64 appender threads of one event per append, through the log's
//!   group commit (what the controller's appends go through): concurrent
//!   appends are merged into one storage batch, one etcd transaction.
//!
//! **Takeover** (`etcd_bench/takeover.rs`): two `fleetweft controller`
//! daemons (from next to this binary) on one prefix with lease TTL T
//! (default 2,000 ms); the leader is SIGKILLed N times (default 20), and
//! the time to the new leader's first grant is split into lease expiry,
//! election, take over and first grant; p50, p99 and max per phase. In
//! the same rounds, A `fleetweft-agent` processes (default 5) list both
//! controllers, and the time from the SIGKILL to every one of them
//! connected to the new leader is measured too (issue #26 item 6).
//!
//! Prints Markdown tables. Build with `cargo build --release --workspace
//! --bins`.
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[path = "etcd_bench/takeover.rs"]
mod takeover;

use anyhow::{bail, Context};
use eventlog::{EtcdClient, EtcdConfig, EtcdStorage, EventLog, Leadership, LogStorage};
use serde::{Deserialize, Serialize};

/// Batch sizes measured, events per append.
const BATCHES: [usize; 3] = [1, 64, 512];
/// Appender threads of the group-commit rows, one event per append.
const APPENDER_THREADS: [usize; 2] = [8, 64];
/// Unmeasured single appends per backend before the first row: a fresh
/// cluster's first second of appends ran at 14/s instead of ~450/s.
const WARM_UP_SECONDS: u64 = 2;
/// Kills of the takeover measurement unless `--takeovers` says otherwise
/// (issue #14: at least 20).
const TAKEOVERS_DEFAULT: usize = 20;
/// The controllers' lease TTL in the takeover measurement by default.
const TAKEOVER_LEASE_TTL_MS_DEFAULT: u64 = 2_000;
/// Agent processes of the takeover measurement unless `--agents` says
/// otherwise: enough to see the slowest of several, few enough for a
/// 2-core machine.
const TAKEOVER_AGENTS_DEFAULT: usize = 5;

/// A controller-like event of about 100 encoded bytes.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct BenchEvent {
    rollout: u64,
    wave: u32,
    device_group: String,
    note: String,
}

fn event(i: u64) -> BenchEvent {
    BenchEvent {
        rollout: i / 1000,
        wave: (i % 17) as u32,
        device_group: format!("edge-site-{:05}/group-{:03}", i % 50_000, i % 997),
        note: "wave advanced after health checks passed".to_string(),
    }
}

/// A directory of this run under the system's temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(TempDir(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A cluster started by this run, stopped on drop (before its directory
/// is removed).
struct OwnCluster {
    dir: TempDir,
    script: PathBuf,
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(&self.script)
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}

fn start_cluster() -> anyhow::Result<(OwnCluster, Vec<String>)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/etcd.sh");
    let dir = TempDir::new("fleetweft-etcd-bench-cluster")?;
    let cluster = OwnCluster {
        dir,
        script: script.clone(),
    };
    let out = Command::new("bash")
        .arg(&script)
        .arg("start")
        .arg(cluster.dir.path())
        .output()
        .context("running scripts/etcd.sh start")?;
    if !out.status.success() {
        bail!(
            "scripts/etcd.sh start failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let endpoints = String::from_utf8_lossy(&out.stdout)
        .trim()
        .split(',')
        .map(str::to_string)
        .collect();
    Ok((cluster, endpoints))
}

/// Appends batches of `batch` events for `seconds`; (appends, events) per second.
fn measure<S: LogStorage>(
    log: &EventLog<BenchEvent, S>,
    batch: usize,
    seconds: u64,
) -> anyhow::Result<(f64, f64)> {
    let started = Instant::now();
    let deadline = Duration::from_secs(seconds);
    let mut appends = 0u64;
    let mut next = 0u64;
    while started.elapsed() < deadline {
        let events = (next..next + batch as u64).map(event).collect();
        let _durable = log.append(events).context("append")?;
        next += batch as u64;
        appends += 1;
    }
    let secs = started.elapsed().as_secs_f64();
    Ok((appends as f64 / secs, next as f64 / secs))
}

/// `threads` appender threads, each appending one event at a time for
/// `seconds`: (events per second, events per storage flush).
fn measure_group<S: LogStorage + Sync>(
    log: &EventLog<BenchEvent, S>,
    threads: usize,
    seconds: u64,
) -> anyhow::Result<(f64, f64)>
where
    EventLog<BenchEvent, S>: Sync,
{
    let before = log.commit_stats().context("commit stats")?;
    let stop = AtomicBool::new(false);
    let appended = AtomicU64::new(0);
    let started = Instant::now();
    let failed = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (stop, appended) = (&stop, &appended);
                scope.spawn(move || -> anyhow::Result<()> {
                    let mut i = t as u64;
                    while !stop.load(Ordering::Relaxed) {
                        let _durable = log.append(vec![event(i)]).context("append")?;
                        appended.fetch_add(1, Ordering::Relaxed);
                        i += threads as u64;
                    }
                    Ok(())
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(seconds));
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("an appender panicked")))
            })
            .find_map(Result::err)
    });
    if let Some(err) = failed {
        return Err(err);
    }
    let secs = started.elapsed().as_secs_f64();
    let after = log.commit_stats().context("commit stats")?;
    let events = appended.load(Ordering::Relaxed) as f64;
    let flushes = (after.flushes - before.flushes).max(1) as f64;
    Ok((events / secs, events / flushes))
}

/// What the command line asked for.
struct Args {
    endpoints: Option<Vec<String>>,
    seconds: u64,
    takeovers: usize,
    lease_ttl_ms: u64,
    agents: usize,
    appends: bool,
    takeover: bool,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut parsed = Args {
        endpoints: None,
        seconds: 3,
        takeovers: TAKEOVERS_DEFAULT,
        lease_ttl_ms: TAKEOVER_LEASE_TTL_MS_DEFAULT,
        agents: TAKEOVER_AGENTS_DEFAULT,
        appends: true,
        takeover: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--endpoints" => {
                parsed.endpoints = Some(value.split(',').map(str::to_string).collect())
            }
            "--seconds" => parsed.seconds = value.parse().context("--seconds: a whole number")?,
            "--takeovers" => {
                parsed.takeovers = value.parse().context("--takeovers: a whole number")?
            }
            "--lease-ttl-ms" => {
                parsed.lease_ttl_ms = value.parse().context("--lease-ttl-ms: a whole number")?
            }
            "--agents" => parsed.agents = value.parse().context("--agents: a whole number")?,
            "--only" => match value.as_str() {
                "appends" => parsed.takeover = false,
                "takeover" => parsed.appends = false,
                other => bail!("--only {other}: expected appends or takeover"),
            },
            other => bail!(
                "unknown argument {other}; usage: [--endpoints E,..] [--seconds S] \
                 [--takeovers N] [--lease-ttl-ms T] [--agents A] [--only appends|takeover]"
            ),
        }
    }
    Ok(parsed)
}

fn run() -> anyhow::Result<()> {
    let args = parse_args()?;
    let (_cluster, endpoints) = match args.endpoints.clone() {
        Some(endpoints) => (None, endpoints),
        None => {
            let (cluster, endpoints) = start_cluster()?;
            (Some(cluster), endpoints)
        }
    };
    if args.appends {
        appends(&endpoints, args.seconds)?;
    }
    if args.takeover {
        let dir = TempDir::new("fleetweft-takeover-bench")?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        let plan = takeover::Plan {
            lease_ttl_ms: args.lease_ttl_ms,
            kills: args.takeovers,
            agents: args.agents,
        };
        let measured = runtime.block_on(takeover::measure(dir.path(), &endpoints, plan));
        let rounds = match measured {
            Ok(rounds) => rounds,
            Err(err) => {
                // Keep the daemons' logs for the diagnosis.
                let kept = dir.0.clone();
                std::mem::forget(dir);
                return Err(err.context(format!("files and logs kept in {}", kept.display())));
            }
        };
        println!("\n{}", takeover::table(&rounds, plan));
    }
    Ok(())
}

fn appends(endpoints: &[String], seconds: u64) -> anyhow::Result<()> {
    let sled_dir = TempDir::new("fleetweft-etcd-bench-sled")?;
    let (sled, _) =
        EventLog::<BenchEvent>::open(sled_dir.path().join("log")).context("sled log")?;
    let prefix = format!("/fleetweft-bench/{}", std::process::id());
    let config = EtcdConfig::new(endpoints.to_vec(), prefix);
    let client = EtcdClient::connect(&config)?;
    let leadership = Leadership::campaign(&client, &config, "bench", Duration::from_secs(10))?;
    let storage = EtcdStorage::open(&client, &config, &leadership)?;
    let (etcd, _) = EventLog::<BenchEvent, EtcdStorage>::with_storage(storage)?;
    println!(
        "etcd: 3 members on loopback ({}); sled: {}; one appender thread, {seconds} s per row\n",
        endpoints.join(","),
        sled_dir.path().display()
    );
    measure(&sled, 1, WARM_UP_SECONDS)?;
    measure(&etcd, 1, WARM_UP_SECONDS)?;
    println!(
        "| events per append | sled appends/s | sled events/s | etcd appends/s | etcd events/s |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for batch in BATCHES {
        let (sled_appends, sled_events) = measure(&sled, batch, seconds)?;
        let (etcd_appends, etcd_events) = measure(&etcd, batch, seconds)?;
        println!(
            "| {batch} | {sled_appends:.0} | {sled_events:.0} | {etcd_appends:.0} | {etcd_events:.0} |"
        );
    }
    println!("\nGroup commit: appender threads of one event per append, {seconds} s per row\n");
    println!("| appender threads | sled events/s | sled events per flush | etcd events/s | etcd events per transaction |");
    println!("|---:|---:|---:|---:|---:|");
    for threads in APPENDER_THREADS {
        let (sled_events, sled_group) = measure_group(&sled, threads, seconds)?;
        let (etcd_events, etcd_group) = measure_group(&etcd, threads, seconds)?;
        println!(
            "| {threads} | {sled_events:.0} | {sled_group:.1} | {etcd_events:.0} | {etcd_group:.1} |"
        );
    }
    leadership.resign()?;
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("fleetweft-etcd-bench: {err:#}");
            ExitCode::FAILURE
        }
    }
}
