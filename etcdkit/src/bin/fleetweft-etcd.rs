//! `fleetweft-etcd start DIR | stop DIR`: scripts/etcd.sh's local 3-member
//! cluster on loopback (for trying the etcd log backend and for its
//! benchmark), started through the one launcher (`etcdkit`) with
//! docs/operations.md's settings ([`etcdkit::Tuning::operations`]).
//!
//! Ports: member i's client port is `ETCD_PORT_BASE + i`, its peer port
//! `+ 10 + i`, its `/health` (metrics) port `+ 20 + i`; `ETCD_PORT_BASE`
//! defaults to 23780. `FLEETWEFT_ETCD_SNAPSHOT_COUNT` overrides
//! `--snapshot-count` (not `ETCD_*`: etcd reads those itself and refuses
//! one that repeats a flag). The members run in sessions of their own and
//! outlive this command; their pids are in `DIR/pids`, which `stop` reads.

use etcdkit::{Cluster, ClusterSpec, Lifetime, Ports, Tuning};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Members of the cluster.
const MEMBERS: usize = 3;
/// `ETCD_PORT_BASE` when not set.
const PORT_BASE_DEFAULT: u16 = 23_780;
/// How long the members may take to be healthy, in seconds.
const HEALTH_WAIT_S: u64 = 30;
/// How long `stop` waits for a member to end after SIGTERM, in
/// milliseconds, before it SIGKILLs it.
const STOP_WAIT_MS: u64 = 5_000;
/// Pause between two looks at a stopping member, in milliseconds.
const STOP_POLL_MS: u64 = 100;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [command, dir] if command == "start" => absolute(dir).and_then(|dir| start(&dir)),
        [command, dir] if command == "stop" => absolute(dir).map(|dir| stop(&dir)),
        _ => {
            eprintln!("usage: fleetweft-etcd start DIR | stop DIR");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fleetweft-etcd: {e}");
            ExitCode::FAILURE
        }
    }
}

fn absolute(dir: &str) -> Result<PathBuf, String> {
    std::path::absolute(dir).map_err(|e| format!("{dir}: {e}"))
}

fn env_number<T: std::str::FromStr>(name: &str, default: T) -> Result<T, String> {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .map_err(|_| format!("{name}={text:?} is not a number")),
        Err(_) => Ok(default),
    }
}

fn start(dir: &Path) -> Result<(), String> {
    let pids = dir.join("pids");
    if std::fs::metadata(&pids).is_ok_and(|m| m.len() > 0) {
        return Err(format!(
            "{} exists: a cluster may be running (stop it first)",
            pids.display()
        ));
    }
    let base = env_number("ETCD_PORT_BASE", PORT_BASE_DEFAULT)?;
    let mut tuning = Tuning::operations();
    tuning.snapshot_count = Some(env_number(
        "FLEETWEFT_ETCD_SNAPSHOT_COUNT",
        etcdkit::OPERATIONS_SNAPSHOT_COUNT,
    )?);
    let name = dir
        .file_name()
        .map_or("etcd".into(), |n| n.to_string_lossy().into_owned());
    let spec = ClusterSpec {
        members: MEMBERS,
        data_dir: dir.to_path_buf(),
        log_dir: dir.to_path_buf(),
        log_prefix: String::new(),
        token: format!("fleetweft-{name}"),
        ports: Ports::Base(base),
        tuning,
        tls: None,
        lifetime: Lifetime::Detached,
    };
    let mut cluster = Cluster::start(spec).map_err(|e| e.to_string())?;
    let listed: String = cluster.pids().iter().map(|p| format!("{p}\n")).collect();
    std::fs::write(&pids, listed).map_err(|e| format!("writing {}: {e}", pids.display()))?;
    let wait = Duration::from_secs(HEALTH_WAIT_S);
    for index in 0..MEMBERS {
        if let Err(e) = cluster.wait_member_healthy(index, wait) {
            stop(dir);
            return Err(e.to_string());
        }
    }
    println!("{}", cluster.endpoints().join(","));
    Ok(())
}

/// Stops the members listed in `DIR/pids` that are still etcd processes
/// on this directory's data (never another process that took a pid).
fn stop(dir: &Path) {
    let pids = dir.join("pids");
    let Ok(listed) = std::fs::read_to_string(&pids) else {
        return;
    };
    let ours = format!("--data-dir {}/m", dir.display());
    for pid in listed.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
        let cmdline = |pid: u32| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
                .unwrap_or_default()
        };
        if !cmdline(pid).contains(&ours) {
            continue;
        }
        etcdkit::signal(pid, libc::SIGTERM);
        let mut waited = 0;
        while cmdline(pid).contains(&ours) && waited < STOP_WAIT_MS {
            std::thread::sleep(Duration::from_millis(STOP_POLL_MS));
            waited += STOP_POLL_MS;
        }
        if cmdline(pid).contains(&ours) {
            etcdkit::signal(pid, libc::SIGKILL);
        }
    }
    let _ = std::fs::remove_file(&pids);
}
