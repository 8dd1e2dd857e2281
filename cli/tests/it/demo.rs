//! `fleetweft demo` end to end: a real controller and three real agents as
//! child processes on loopback, for every scenario; afterwards the
//! controller's log verifies and no child process is left behind.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fleetweft() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fleetweft"))
}

/// The demo starts `fleetweft-agent` from next to `fleetweft`. Under
/// `cargo test --workspace` it is built already; under `-p runtime` alone,
/// build it with the same profile.
fn ensure_agent_binary() {
    let agent = fleetweft().with_file_name("fleetweft-agent");
    if agent.exists() {
        return;
    }
    let release = fleetweft().parent().is_some_and(|p| p.ends_with("release"));
    let mut build = Command::new(env!("CARGO"));
    // The whole workspace's bins, not `-p agent`: cargo resolves features
    // per selection, and the agent alone would be built with other
    // features than the test build's, recompiling its dependencies here
    // and again in scripts/test.sh's `cargo build --workspace --bins`.
    build.args(["build", "--workspace", "--bins"]);
    if release {
        build.arg("--release");
    }
    let status = build.status().expect("run cargo build for the agent");
    assert!(status.success(), "building fleetweft-agent failed");
    assert!(agent.exists(), "{} still missing", agent.display());
}

fn run_demo(scenario: &str) -> (String, PathBuf) {
    ensure_agent_binary();
    let dir = tempfile::tempdir().expect("temp dir").keep();
    let out = Command::new(fleetweft())
        .args(["demo", "--scenario", scenario, "--dir"])
        .arg(dir.join("demo"))
        .output()
        .expect("run fleetweft demo");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "demo {scenario} failed ({:?}):\n{stdout}\n{stderr}",
        out.status.code()
    );
    (stdout, dir.join("demo"))
}

fn log_verifies(demo: &Path) {
    let out = Command::new(fleetweft())
        .args(["log", "verify", "--data"])
        .arg(demo.join("controller-data/log"))
        .output()
        .expect("run log verify");
    assert!(
        out.status.success(),
        "log verify failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn no_children_left(demo: &Path) {
    // Every child was started with a config inside the demo dir.
    let needle = demo.display().to_string();
    let ps = Command::new("ps")
        .args(["-eo", "args"])
        .output()
        .expect("ps");
    let left: Vec<String> = String::from_utf8_lossy(&ps.stdout)
        .lines()
        .filter(|l| l.contains(&needle) && !l.contains("ps -eo"))
        .map(str::to_string)
        .collect();
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

#[test]
fn happy_rollout_ends_verified_on_every_node() {
    let (out, dir) = run_demo("happy");
    for node in ["node-a", "node-b", "node-c"] {
        assert!(
            out.contains(&format!("    {node}: verified")),
            "{node} not verified:\n{out}"
        );
        assert!(
            out.contains(&format!("{node}: 200 \"hello from v2\"")),
            "{out}"
        );
    }
    assert!(out.contains("rollout r1 completed"), "{out}");
    log_verifies(&dir);
    no_children_left(&dir);
}

#[test]
fn wrong_answer_restores_the_canary_and_pauses() {
    let (out, dir) = run_demo("wrong-answer");
    assert!(
        out.contains("record report for op3 (switched): wrong-answer"),
        "{out}"
    );
    assert!(
        out.contains("rollout r1 paused (probe of op3 failed)"),
        "{out}"
    );
    assert!(out.contains("op3 settled: rolled-back"), "{out}");
    assert!(
        out.contains("r1 granted 1 op(s); canary outcome: rolled-back"),
        "{out}"
    );
    assert!(
        out.contains("node-a: 200 \"hello from v1\""),
        "canary back on v1:\n{out}"
    );
    assert!(!out.contains("grant op4"), "no follower granted:\n{out}");
    log_verifies(&dir);
    no_children_left(&dir);
}

#[test]
fn lost_reply_is_answered_from_the_stored_decision() {
    let (out, dir) = run_demo("lost-reply");
    assert!(out.contains("decide op3: commit (stored)"), "{out}");
    assert!(
        out.contains("replay stored decision for op3: commit"),
        "{out}"
    );
    assert!(
        out.contains("r1 ops while paused: 1"),
        "no follower while paused:\n{out}"
    );
    assert_eq!(
        out.matches("decide op3:").count(),
        1,
        "decided once:\n{out}"
    );
    for node in ["node-a", "node-b", "node-c"] {
        assert!(out.contains(&format!("    {node}: verified")), "{out}");
    }
    log_verifies(&dir);
    no_children_left(&dir);
}

/// `kill` (SIGTERM) of a demo left running stops its controller and agents
/// too: none outlives it.
/// Starts `fleetweft demo ARGS --keep-running` in a fresh directory and
/// reads its narration until it says it keeps running: the demo process,
/// its directory and what it printed.
fn keep_running_demo(args: &[&str]) -> (std::process::Child, PathBuf, String) {
    let dir = tempfile::tempdir().expect("temp dir").keep().join("demo");
    let mut demo = Command::new(fleetweft())
        .arg("demo")
        .args(args)
        .args(["--keep-running", "--dir"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the demo");
    let stdout = demo.stdout.take().expect("piped stdout");
    let mut narration = String::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("read the narration");
        narration.push_str(&line);
        narration.push('\n');
        if line.contains("Ctrl-C stops it") {
            break;
        }
    }
    (demo, dir, narration)
}

#[test]
fn a_terminated_demo_leaves_no_process_behind() {
    ensure_agent_binary();
    let (mut demo, dir, narration) = keep_running_demo(&["--scenario", "happy"]);
    assert!(narration.contains("demo succeeded"), "{narration}");
    let kill = Command::new("kill")
        .args(["-TERM", &demo.id().to_string()])
        .status()
        .expect("run kill");
    assert!(kill.success());
    let status = demo.wait().expect("reap the demo");
    assert!(
        status.code().is_some(),
        "exited by itself after SIGTERM: {status}"
    );
    no_children_left(&dir);
}

/// True when `etcd` runs; otherwise a loud notice (the test command
/// installs etcd-server as root, see scripts/etcd.sh; as root a missing
/// etcd fails the test instead).
fn etcd_available() -> bool {
    let found = Command::new("etcd")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|out| out.stdout.starts_with(b"0\n"));
        assert!(
            !root,
            "etcd is missing although running as root: run `bash scripts/etcd.sh install`"
        );
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"\n######## SKIPPING demo --ha: `etcd` is not installed (scripts/etcd.sh install, as root) ########\n\n",
        );
    }
    found
}

/// `demo --ha` (issue #14's acceptance): two controllers on the demo's own
/// 3-member etcd cluster; the leader is SIGKILLed right after the canary's
/// commit decision is stored and the standby finishes the rollout,
/// replaying that decision. Exit 0, each step narrated, the log in etcd
/// sound, and nothing it started left running (etcd included).
#[test]
fn ha_standby_finishes_the_rollout_after_the_leader_is_killed() {
    if !etcd_available() {
        return;
    }
    ensure_agent_binary();
    let dir = tempfile::tempdir().expect("temp dir").keep().join("demo");
    let out = Command::new(fleetweft())
        .args(["demo", "--ha", "--dir"])
        .arg(&dir)
        .output()
        .expect("run fleetweft demo --ha");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "demo --ha failed ({:?}):\n{stdout}\n{stderr}",
        out.status.code()
    );
    let out = stdout;
    for step in [
        "3-member etcd cluster on loopback",
        "a: leader on http://127.0.0.1:",
        "b: standby on http://127.0.0.1:",
        "following the leader at http://127.0.0.1:",
        "rollout r0 completed",
        "SIGKILL controller a (pid ",
        "b: role standby, leader http://127.0.0.1:",
        "b: role leader ",
        "rollout r1 completed",
        "3 of 3 agents connected to b",
        "nothing unresolved",
        "hash chain verified",
        "0 decided twice",
        "0 differing; nodes granted twice in a rollout: 0",
        "demo succeeded",
    ] {
        assert!(out.contains(step), "missing {step:?}:\n{out}");
    }
    // The canary's op of r1 is op3: decided once by a, replayed by b.
    assert_eq!(
        out.matches("decide op3:").count(),
        1,
        "decided once:\n{out}"
    );
    assert!(
        out.contains("replay stored decision for op3: commit"),
        "b replayed a's stored decision:\n{out}"
    );
    let kill = out.find("SIGKILL controller a").expect("the kill");
    let replay = out
        .find("replay stored decision for op3")
        .expect("the replay");
    assert!(kill < replay, "the replay comes after the kill:\n{out}");
    for node in ["node-a", "node-b", "node-c"] {
        assert!(out.contains(&format!("    {node}: verified")), "{out}");
        assert!(
            out.contains(&format!("{node}: 200 \"hello from v2\"")),
            "{out}"
        );
    }
    assert!(
        !dir.join("etcd").exists(),
        "the etcd members' data was removed"
    );
    assert!(dir.join("logs/etcd-m1.log").exists(), "their logs are kept");
    no_children_left(&dir);
}

/// A `demo --ha` that is SIGKILLed (no handler runs) still leaves nothing:
/// its etcd members, controllers and agents carry a parent-death signal.
#[test]
fn a_sigkilled_ha_demo_leaves_no_process_behind() {
    if !etcd_available() {
        return;
    }
    if !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("SKIPPING: without util-linux's setpriv the demo cannot tie its children");
        return;
    }
    ensure_agent_binary();
    let (mut demo, dir, narration) = keep_running_demo(&["--ha"]);
    assert!(narration.contains("demo succeeded"), "{narration}");
    demo.kill().expect("SIGKILL the demo");
    demo.wait().expect("reap the demo");
    // The kernel delivers the parent-death signals as the demo exits; give
    // the children a moment to be reaped by init.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let ps = Command::new("ps")
            .args(["-eo", "args"])
            .output()
            .expect("ps");
        let needle = dir.display().to_string();
        let left = String::from_utf8_lossy(&ps.stdout)
            .lines()
            .any(|l| l.contains(&needle) && !l.contains("ps -eo"));
        if !left || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    no_children_left(&dir);
    let _ = std::fs::remove_dir_all(dir.join("etcd"));
}
