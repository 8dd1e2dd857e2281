//! Issue #26 item 2, end to end: a daemon with `[log] archive_dir` moves
//! its old history into archive segments while it runs (after each
//! snapshot, outside `keep_events`), starts again on a log whose head was
//! archived, and `fleetweft log verify --archive` verifies the whole chain
//! (with `--deep`, every snapshot against the fold from genesis through
//! the archive); `log show --archive` reads it from sequence 0; a flipped
//! byte in a segment is named by segment and sequence, changing nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::api_harness::{s, Controller};

/// Enrollments: each appends an event, so snapshots (every 64) and
/// archiving runs (keeping 64) happen several times.
const NODES: usize = 300;

fn enroll(ctl: &Controller, i: usize) {
    let body = serde_json::json!({
        "name": format!("edge-{i:03}"),
        "public": format!("127.0.0.1:{}", 20_000 + i),
    });
    let (code, text) = ctl.post_json("/api/nodes", &body);
    assert_eq!(code, 200, "enroll edge-{i:03}: {text}");
}

fn controller_log(ctl: &Controller) -> String {
    std::fs::read_to_string(ctl._dir.path().join("controller.log")).unwrap_or_default()
}

fn fleetweft(args: &[&str], data: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fleetweft"))
        .args(args)
        .arg("--data")
        .arg(data)
        .output()
        .expect("run fleetweft")
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list the archive")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "fwseg"))
        .collect();
    files.sort();
    files
}

#[test]
fn a_running_daemon_archives_and_the_whole_history_verifies() {
    let archive_dir = tempfile::tempdir().expect("archive dir");
    let archive = archive_dir.path().join("archive");
    let mut ctl = Controller::start_with(
        "",
        &format!(
            "\n[log]\nsnapshot_every_events = 64\nsnapshots_keep = 2\narchive_dir = {:?}\nkeep_events = 64\nkeep_days = 0\n",
            s(&archive)
        ),
    );
    for i in 0..NODES {
        enroll(&ctl, i);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while !controller_log(&ctl).contains("the live log starts there") {
        assert!(
            Instant::now() < deadline,
            "no archiving run: {}",
            controller_log(&ctl)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!segments(&archive).is_empty(), "no segment written");
    // The storage gauge (sled: its size, no quota).
    let status = ctl.status();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut status_storage = status["storage"].clone();
    while status_storage.is_null() {
        assert!(Instant::now() < deadline, "no storage measured: {status}");
        std::thread::sleep(Duration::from_millis(200));
        status_storage = ctl.status()["storage"].clone();
    }
    assert!(
        status_storage["bytes"].as_u64().unwrap_or(0) > 0,
        "{status_storage}"
    );
    let metrics = ctl.http("GET", "/metrics", None, b"").1;
    assert!(metrics.contains("\nfleetweft_storage_bytes "), "{metrics}");
    assert!(
        !metrics.contains("fleetweft_storage_quota_bytes"),
        "sled has no quota: {metrics}"
    );

    // A start on a log whose head was archived: from the snapshot.
    let before = ctl.all_pages("/api/nodes");
    ctl.restart();
    assert_eq!(ctl.all_pages("/api/nodes"), before);
    let _ = ctl.child.kill();
    let _ = ctl.child.wait();

    let data = ctl._dir.path().join("data");
    // Without the archive: the live chain verifies, the rules need it all.
    let plain = fleetweft(&["log", "verify"], &data);
    assert_eq!(plain.status.code(), Some(4), "{}", text(&plain));
    assert!(text(&plain).contains("--archive DIR"), "{}", text(&plain));

    // By hand, with the controller stopped: down to the newest snapshot.
    let by_hand = fleetweft(
        &[
            "log",
            "archive",
            "--keep-events",
            "0",
            "--archive",
            &s(&archive),
        ],
        &data,
    );
    assert_eq!(by_hand.status.code(), Some(0), "{}", text(&by_hand));

    let whole = fleetweft(
        &["log", "verify", "--deep", "--archive", &s(&archive)],
        &data,
    );
    let whole_text = text(&whole);
    assert_eq!(whole.status.code(), Some(0), "{whole_text}");
    assert!(whole_text.contains("is sound"), "{whole_text}");
    assert!(
        whole_text.contains("the live log starts at"),
        "{whole_text}"
    );
    assert!(
        whole_text.contains("agree with the fold from genesis"),
        "{whole_text}"
    );
    assert!(!whole_text.contains("not the fold"), "{whole_text}");

    let shown = fleetweft(&["log", "show", "--archive", &s(&archive)], &data);
    assert_eq!(shown.status.code(), Some(0), "{}", text(&shown));
    let lines: Vec<String> = String::from_utf8_lossy(&shown.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert!(lines[0].starts_with("     0  "), "{}", lines[0]);
    assert!(lines.len() > NODES, "{} lines", lines.len());

    // A copy of the archived log: live start, live entries, snapshots;
    // with the same archive, the whole history verifies from the copy.
    let copy = archive_dir.path().join("copy");
    let copied = Command::new(env!("CARGO_BIN_EXE_fleetweft"))
        .args(["log", "copy", "--from"])
        .arg(data.join("log"))
        .arg("--to")
        .arg(&copy)
        .output()
        .expect("run fleetweft log copy");
    assert_eq!(copied.status.code(), Some(0), "{}", text(&copied));
    assert!(
        text(&copied).contains("the head of this log was archived"),
        "{}",
        text(&copied)
    );
    let of_copy = fleetweft(&["log", "verify", "--archive", &s(&archive)], &copy);
    assert_eq!(of_copy.status.code(), Some(0), "{}", text(&of_copy));
    let head = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("head hash:"))
            .map(str::to_string)
    };
    assert_eq!(head(&text(&of_copy)), head(&whole_text));

    // A flipped byte in the last frame of the first segment: named by
    // the segment and a sequence; the file and the log stay as they were.
    let first = segments(&archive)[0].clone();
    let mut bytes = std::fs::read(&first).expect("read segment");
    let at = bytes.len() - 10;
    bytes[at] ^= 0x5a;
    std::fs::write(&first, &bytes).expect("flip a byte");
    let damaged = fleetweft(&["log", "verify", "--archive", &s(&archive)], &data);
    let damaged_text = text(&damaged);
    assert_eq!(damaged.status.code(), Some(1), "{damaged_text}");
    let name = first
        .file_name()
        .expect("name")
        .to_string_lossy()
        .to_string();
    assert!(damaged_text.contains(&name), "{damaged_text}");
    assert!(damaged_text.contains(", sequence "), "{damaged_text}");
    assert_eq!(std::fs::read(&first).expect("read again"), bytes, "changed");
    let json = fleetweft(
        &["log", "verify", "--json", "--archive", &s(&archive)],
        &data,
    );
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).expect("a JSON verdict");
    assert_eq!(value["sound"], false, "{value}");
    assert!(value["sequence"].is_u64(), "{value}");
}

/// Issue #26 item 3 on etcd: the daemon archives, deletes the archived
/// keys and compacts etcd's history up to the delete; `/api/status` and
/// `/metrics` show the database's size against the configured quota
/// (etcd 3.4 reports none), below the 80% warning; `log verify --etcd
/// --archive` verifies the whole chain. On a cluster of its own:
/// compaction is cluster-wide.
/// How long each wait of the etcd test may take: an election, an
/// archiving run, a storage measurement. Each takes about a second alone;
/// CI's run (stop 41) failed one of them at 30 s while the first
/// end-to-end test rebuilt the workspace's binaries on both cores.
const ETCD_STEP: Duration = Duration::from_secs(90);

#[test]
fn on_etcd_the_daemon_archives_compacts_and_shows_its_storage_against_the_quota() {
    let Some(cluster) = crate::etcd_harness::Cluster::start(
        "archive-gauge",
        1,
        crate::etcd_harness::Limits::Fitting,
    ) else {
        return;
    };
    let endpoints = cluster.endpoints();
    let prefix = format!("/fleetweft-test/archive-gauge-{}", std::process::id());
    let archive_dir = tempfile::tempdir().expect("archive dir");
    let archive = archive_dir.path().join("archive");
    let quota: u64 = 64 << 20;
    let list: Vec<String> = endpoints.iter().map(|e| format!("{e:?}")).collect();
    let ctl = Controller::start_with(
        "",
        &format!(
            "\n[storage]\nbackend = \"etcd\"\nendpoints = [{}]\nprefix = {prefix:?}\nquota_backend_bytes = {quota}\n\n[log]\nsnapshot_every_events = 64\nsnapshots_keep = 2\narchive_dir = {:?}\nkeep_events = 64\nkeep_days = 0\n",
            list.join(", "),
            s(&archive)
        ),
    );
    // On etcd the daemon answers as a standby until it won the election.
    let deadline = Instant::now() + ETCD_STEP;
    while ctl.status()["role"] != "leader" {
        assert!(Instant::now() < deadline, "never leader: {}", ctl.status());
        std::thread::sleep(Duration::from_millis(100));
    }
    for i in 0..200 {
        enroll(&ctl, i);
    }
    let deadline = Instant::now() + ETCD_STEP;
    while !controller_log(&ctl).contains("compacted_to=Some(") {
        assert!(
            Instant::now() < deadline,
            "no archiving run with a compaction: {}",
            controller_log(&ctl)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let deadline = Instant::now() + ETCD_STEP;
    let storage = loop {
        let storage = ctl.status()["storage"].clone();
        if !storage.is_null() {
            break storage;
        }
        assert!(Instant::now() < deadline, "no storage measured");
        std::thread::sleep(Duration::from_millis(200));
    };
    let bytes = storage["bytes"].as_u64().expect("bytes");
    assert!(bytes > 0, "{storage}");
    assert_eq!(storage["quota_bytes"].as_u64(), Some(quota), "{storage}");
    assert_eq!(
        storage["used_percent"].as_u64(),
        Some(bytes * 100 / quota),
        "{storage}"
    );
    assert!(storage["warning"].is_null(), "{storage}");
    let metrics = ctl.http("GET", "/metrics", None, b"").1;
    assert!(metrics.contains("\nfleetweft_storage_bytes "), "{metrics}");
    assert!(
        metrics.contains(&format!("\nfleetweft_storage_quota_bytes {quota}\n")),
        "{metrics}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_fleetweft"))
        .args([
            "log",
            "verify",
            "--etcd",
            &endpoints.join(","),
            "--prefix",
            &prefix,
        ])
        .args(["--archive", &s(&archive)])
        .output()
        .expect("run fleetweft log verify --etcd --archive");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("the live log starts at"),
        "{}",
        text(&out)
    );
}
