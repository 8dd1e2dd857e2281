//! Durable appends per second on etcd next to sled, in one run.
//!
//! Usage: `fleetweft-etcd-bench [--endpoints E1,E2,E3] [--seconds S]`
//!
//! Without `--endpoints` it starts its own 3-member cluster on loopback
//! with `scripts/etcd.sh start` in a temporary directory and stops it
//! afterwards. For each backend (sled in a temporary directory; etcd under
//! a fresh prefix) and each batch size (1, 64, 512 events of about 100
//! encoded bytes per append; one appender thread, each append waits until
//! durable: fsync for sled, a quorum commit for etcd) it appends for S
//! seconds (default 3) and prints appends/s and events/s as a Markdown
//! table. Build with `--release`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use runtime::log::{EtcdClient, EtcdConfig, EtcdStorage, EventLog, Leadership, LogStorage};
use serde::{Deserialize, Serialize};

/// Batch sizes measured, events per append.
const BATCHES: [usize; 3] = [1, 64, 512];

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

fn parse_args() -> anyhow::Result<(Option<Vec<String>>, u64)> {
    let mut endpoints = None;
    let mut seconds = 3;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--endpoints" => endpoints = Some(value.split(',').map(str::to_string).collect()),
            "--seconds" => seconds = value.parse().context("--seconds: a whole number")?,
            other => bail!("unknown argument {other}; usage: [--endpoints E,..] [--seconds S]"),
        }
    }
    Ok((endpoints, seconds))
}

fn run() -> anyhow::Result<()> {
    let (endpoints, seconds) = parse_args()?;
    let (_cluster, endpoints) = match endpoints {
        Some(endpoints) => (None, endpoints),
        None => {
            let (cluster, endpoints) = start_cluster()?;
            (Some(cluster), endpoints)
        }
    };
    let sled_dir = TempDir::new("fleetweft-etcd-bench-sled")?;
    let (sled, _) =
        EventLog::<BenchEvent>::open(sled_dir.path().join("log")).context("sled log")?;
    let prefix = format!("/fleetweft-bench/{}", std::process::id());
    let config = EtcdConfig::new(endpoints.clone(), prefix);
    let client = EtcdClient::connect(&config)?;
    let leadership = Leadership::campaign(&client, &config, "bench", Duration::from_secs(10))?;
    let storage = EtcdStorage::open(&client, &config, &leadership)?;
    let (etcd, _) = EventLog::<BenchEvent, EtcdStorage>::with_storage(storage)?;
    println!(
        "etcd: 3 members on loopback ({}); sled: {}; one appender thread, {seconds} s per row\n",
        endpoints.join(","),
        sled_dir.path().display()
    );
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
