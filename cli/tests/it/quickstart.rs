//! `fleetweft quickstart` end to end, as a new user follows it: write the
//! fleet, start every printed command as a real process (controller and
//! three agents), sign v1 and v2 with the printed `bundle sign` commands,
//! roll both out with the printed `rollout start` commands, and check that
//! the canary answers "hello from v2" and both rollouts complete.

use crate::binaries::{agent_binary, fleetweft};
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a rollout may take to complete on a loaded machine.
const ROLLOUT_TIMEOUT_MS: u64 = 90_000;

/// Children killed when the test ends, pass or fail.
struct Processes(Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn sh(line: &str) -> Command {
    let mut command = Command::new("/bin/sh");
    command.arg("-c").arg(format!("exec {line}"));
    command
}

fn run_ok(line: &str) -> String {
    let out = sh(line).output().expect("run a printed command");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "`{line}` failed ({:?}):\n{stdout}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The rollout `id`'s status, read through the printed status command.
fn rollout_status(status_line: &str, id: &str) -> Option<String> {
    let out = sh(&format!("{status_line} --json")).output().ok()?;
    let view: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    view["rollouts"]
        .as_array()?
        .iter()
        .find(|r| r["id"] == id)
        .and_then(|r| r["status"].as_str().map(str::to_string))
}

fn wait_completed(status_line: &str, id: &str) {
    let deadline = Instant::now() + Duration::from_millis(ROLLOUT_TIMEOUT_MS);
    loop {
        let status = rollout_status(status_line, id);
        if status.as_deref() == Some("completed") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "rollout {id} not completed after {ROLLOUT_TIMEOUT_MS} ms: {status:?}\n{}",
            run_ok(status_line)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The body of GET /hello on a public route (plain HTTP/1.0).
fn hello(port: u16) -> String {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return "unreachable".into();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let _ =
        stream.write_all(b"GET /hello HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
        .split_once("\r\n\r\n")
        .map_or(answer.clone(), |(_, body)| body.to_string())
}

#[test]
fn the_printed_commands_run_a_fleet_that_rolls_v1_then_v2() {
    agent_binary();
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path().join("fleet");
    let port = || demo::ports::free_port().expect("free port").to_string();
    let (api, quic) = (port(), port());
    // Three consecutive free ports are not guaranteed; pick a base and
    // accept the small chance of a clash (the failure names the port).
    let base = port();
    let out = Command::new(fleetweft())
        .arg("quickstart")
        .arg(&dir)
        .args(["--nodes", "a,b,c", "--api-port", &api, "--quic-port", &quic])
        .args(["--base-public-port", &base])
        .output()
        .expect("run quickstart");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "quickstart failed:\n{text}");
    let lines: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("$ "))
        .collect();
    assert_eq!(lines.len(), 1 + 3 + 2 + 4, "printed commands:\n{text}");

    let logs = temp.path().join("logs");
    std::fs::create_dir_all(&logs).expect("logs dir");
    let mut processes = Processes(Vec::new());
    for (i, line) in lines[..4].iter().enumerate() {
        let log = std::fs::File::create(logs.join(format!("{i}.log"))).expect("log");
        let err = log.try_clone().expect("log");
        let child = sh(line)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .expect("start a printed daemon command");
        processes.0.push(child);
    }
    for line in &lines[4..6] {
        run_ok(line);
    }
    let (rollout_v1, status) = (lines[6], lines[7]);
    // The agents may still be connecting: a start refused for that is
    // retried, anything else fails the test.
    let deadline = Instant::now() + Duration::from_millis(ROLLOUT_TIMEOUT_MS);
    while !sh(rollout_v1).status().expect("rollout start").success() {
        assert!(Instant::now() < deadline, "`{rollout_v1}` never accepted");
        std::thread::sleep(Duration::from_millis(500));
    }
    wait_completed(status, "r0");
    let canary: u16 = base.parse().expect("port");
    assert_eq!(hello(canary), "hello from v1");
    // A bundle the controller refuses is bad news (exit 1), not usage (2).
    let bad = temp.path().join("not-a-bundle");
    std::fs::write(&bad, b"not a bundle").expect("write");
    let v1_bundle = dir.join("hello-v1.bundle").display().to_string();
    let refused = sh(&rollout_v1.replace(&v1_bundle, &bad.display().to_string()))
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("bundle refused"), "{stderr}");
    run_ok(lines[8]);
    wait_completed(lines[9], "r1");
    for (i, node_port) in (canary..canary + 3).enumerate() {
        assert_eq!(hello(node_port), "hello from v2", "node {i}");
    }
    // Every read command of the CLI emits valid JSON with --json.
    let api = status
        .split("--controller ")
        .nth(1)
        .expect("status names the API");
    let fw = fleetweft().display().to_string();
    for read in [
        "status",
        "nodes",
        "ops",
        "proof a",
        "proof --rollout r1",
        "unresolved",
    ] {
        let line = format!(
            "{fw} {read} --json --controller {api} --pki {}",
            dir.join("pki").display()
        );
        let out = sh(&line).output().expect("run");
        let parsed: Result<serde_json::Value, _> = serde_json::from_slice(&out.stdout);
        assert!(
            parsed.is_ok(),
            "`{read} --json` is not JSON: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // SIGTERM is an orderly stop with exit 0 for the controller and every
    // agent, and their logs (files, not a terminal) carry no ANSI colour.
    for (i, child) in processes.0.iter_mut().enumerate() {
        // SAFETY: kill(2) of our own child (`sh -c exec` made it the daemon).
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            assert!(Instant::now() < deadline, "process {i} ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(100));
        };
        let log = std::fs::read_to_string(logs.join(format!("{i}.log"))).expect("log");
        assert_eq!(status.code(), Some(0), "process {i} after SIGTERM:\n{log}");
        assert!(log.contains("SIGTERM: stopping"), "{log}");
        assert!(!log.contains('\u{1b}'), "ANSI colour in a log file:\n{log}");
    }
    // The log commands' --json, on the stopped controller's log.
    let data = dir.join("controller-data/log").display().to_string();
    let verify = run_ok(&format!("{fw} log verify --json --data {data}"));
    serde_json::from_str::<serde_json::Value>(&verify).expect("log verify --json is JSON");
    let show = run_ok(&format!("{fw} log show --json --data {data}"));
    for line in show.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("log show --json: JSON lines");
    }
}
