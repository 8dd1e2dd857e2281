//! `fleetweft log verify` and `fleetweft log show` against real logs: one
//! written by the controller, a corrupted copy, one breaking a rule, and a
//! directory that is not a log.

use crate::common;
use crate::fleet;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{edit_raw, key};
use eventlog::EventLog;
use fleet::{plan, Fleet};
use model::controller::{apply, step, ControllerState, Event, Input, Outcome};
use model::OpId;

fn fleetweft(args: &[&str], data: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fleetweft"))
        .args(args)
        .arg("--data")
        .arg(data)
        .output()
        .expect("run fleetweft")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A closed log written by the controller: a rollout waiting for approval
/// after its canary, and node-a's connection events before it.
fn controller_log(temp: &tempfile::TempDir) -> PathBuf {
    let dir = temp.path().join("log");
    let mut fleet = Fleet::new(&dir, 3);
    fleet
        .controller(Input::StartRollout { plan: plan(true) })
        .expect("start");
    fleet.run();
    fleet.close().expect("close");
    dir
}

#[test]
fn verify_accepts_a_controller_log_and_summarizes_it() {
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = controller_log(&temp);
    let out = fleetweft(&["log", "verify"], &dir);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("is sound"), "{stdout}");
    assert!(
        stdout.contains("r0  waiting-approval  release v2"),
        "{stdout}"
    );
    assert!(stdout.contains("open ops:      0"), "{stdout}");

    let out = fleetweft(&["log", "verify", "--json"], &dir);
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["sound"], true);
    assert_eq!(json["summary"]["rollouts"][0]["id"], "r0");
    assert!(json["summary"]["entries"].as_u64().is_some_and(|n| n > 3));
}

#[test]
fn verify_names_the_open_unknown_op() {
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path().join("log");
    let mut fleet = Fleet::new(&dir, 3);
    fleet
        .controller(Input::StartRollout { plan: plan(false) })
        .expect("start");
    fleet.to_agents.clear();
    fleet
        .controller(Input::Timeout { op: OpId(0) })
        .expect("timeout");
    fleet.close().expect("close");
    let out = fleetweft(&["log", "verify"], &dir);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("op0  node-a  granted  UNKNOWN: silence"),
        "{stdout}"
    );
}

#[test]
fn verify_exits_1_naming_the_sequence_of_a_flipped_byte() {
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = controller_log(&temp);
    edit_raw(&dir, |_, entries| {
        let mut value = entries
            .get(key(3))
            .expect("read")
            .expect("entry 3")
            .to_vec();
        // Inside the payload: version, sequence, prev_hash, length come first.
        value[36] ^= 0x01;
        entries.insert(key(3), value).expect("write");
    });
    let out = fleetweft(&["log", "verify"], &dir);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("sequence 3"), "{stderr}");
    assert!(stderr.contains("checksum"), "{stderr}");

    let out = fleetweft(&["log", "verify", "--json"], &dir);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["sequence"], 3);
    assert_eq!(json["error"], "damaged");

    // `show` prints what is intact before the damage, then stops.
    let out = fleetweft(&["log", "show"], &dir);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout).lines().count(), 3);
    assert!(text(&out.stderr).contains("sequence 3"));
}

#[test]
fn verify_exits_1_naming_the_rule_an_event_breaks() {
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path().join("log");
    // A rollout whose canary went silent, then a settle with no evidence:
    // the model never produces it, so write it behind the controller's back.
    let mut state = ControllerState::default();
    let mut events = Vec::new();
    for input in [
        Input::StartRollout { plan: plan(false) },
        Input::Timeout { op: OpId(0) },
    ] {
        for event in step(&state, &input).expect("accepted") {
            apply(&mut state, &event);
            events.push(event);
        }
    }
    events.push(Event::OpSettled {
        op: OpId(0),
        outcome: Outcome::NotApplied,
    });
    let bad = events.len() as u64 - 1;
    let (log, _) = EventLog::<Event>::open(&dir).expect("open");
    let _acknowledged = log.append(events).expect("append");
    log.close().expect("close");

    let out = fleetweft(&["log", "verify"], &dir);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("sequence {bad}")), "{stderr}");
    assert!(stderr.contains("S3 evidence releases a slot"), "{stderr}");

    let out = fleetweft(&["log", "verify", "--json"], &dir);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["rule"], "S3");
    assert_eq!(json["sequence"], bad);

    // The controller refuses to start on it too, naming the sequence.
    let err = controller::driver::Controller::open(&dir)
        .map(|_| ())
        .expect_err("refused");
    assert!(
        err.to_string().contains(&format!("sequence {bad}")),
        "{err}"
    );
}

#[test]
fn verify_exits_2_on_a_directory_that_is_not_a_log() {
    let temp = tempfile::tempdir().expect("temp dir");
    std::fs::write(temp.path().join("notes.txt"), "hello").expect("write");
    for dir in [temp.path().to_path_buf(), temp.path().join("missing")] {
        let out = fleetweft(&["log", "verify"], &dir);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains("not a Fleetweft log"));
        let out = fleetweft(&["log", "show"], &dir);
        assert_eq!(out.status.code(), Some(2));
    }
    assert!(!temp.path().join("missing").exists(), "nothing created");
}

#[test]
fn show_prints_events_in_domain_words() {
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = controller_log(&temp);
    let out = fleetweft(&["log", "show"], &dir);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.contains("node-a connected, serving v1"), "{stdout}");
    assert!(
        stdout.contains("rollout r0 starts: v2 on canary node-a then node-b, node-c"),
        "{stdout}"
    );
    assert!(stdout.contains("decide op0: commit (stored)"), "{stdout}");
    assert!(
        stdout.contains("op0 settled: verified, slot freed"),
        "{stdout}"
    );

    let out = fleetweft(&["log", "show", "--from", "3", "--json"], &dir);
    assert_eq!(out.status.code(), Some(0));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("json line"))
        .collect();
    assert_eq!(lines[0]["sequence"], 3);
    assert!(lines[0]["event"].is_object());
    assert!(lines[0]["text"].as_str().is_some_and(|t| t.contains("r0")));
}

/// `log show --diagram` draws the log as the checker draws a
/// counterexample: the operator's start, the append to the log, the apply
/// released to the canary, its commit request and the reply.
#[test]
fn show_draws_a_controller_log_as_a_sequence_chart() {
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = controller_log(&temp);
    let mermaid = temp.path().join("run.mmd");
    let out = fleetweft(
        &["log", "show", "--diagram", &mermaid.to_string_lossy()],
        &dir,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("drew "),
        "{}",
        text(&out.stdout)
    );
    let chart = std::fs::read_to_string(&mermaid).expect("chart written");
    assert!(chart.starts_with("sequenceDiagram\n"), "{chart}");
    for lane in ["operator", "controller", "log", "node-a"] {
        assert!(chart.contains(&format!(" as {lane}\n")), "{lane}: {chart}");
    }
    // Lanes: L0 operator, L1 controller, L2 log; node-a's lane comes next.
    assert!(chart.contains("L0->>L1: start a rollout\n"), "{chart}");
    assert!(
        chart.contains("rollout r0 starts: v2 on canary node-a"),
        "{chart}"
    );
    assert!(chart.contains("->>L1: commit request\n"), "{chart}");
    assert!(chart.contains("L1->>L3: apply op0 (v2)\n"), "{chart}");
    assert!(
        chart.contains("L1->>L3: commit reply Commit for op0\n"),
        "{chart}"
    );
    assert!(chart.contains("end of the log: "), "{chart}");

    let svg = temp.path().join("run.svg");
    let out = fleetweft(&["log", "show", "--diagram", &svg.to_string_lossy()], &dir);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let picture = std::fs::read_to_string(&svg).expect("picture written");
    assert!(picture.starts_with("<svg "), "{picture}");

    let out = fleetweft(&["log", "show", "--json", "--diagram", "x.svg"], &dir);
    assert_eq!(out.status.code(), Some(2), "--json and --diagram conflict");
}

#[test]
fn show_escapes_control_characters_in_operator_text() {
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path().join("log");
    let mut fleet = Fleet::new(&dir, 3);
    fleet
        .controller(Input::StartRollout { plan: plan(false) })
        .expect("start");
    fleet.to_agents.clear();
    fleet
        .controller(Input::Timeout { op: OpId(0) })
        .expect("timeout");
    // What a hostile or careless operator can type into a claim.
    fleet
        .controller(Input::Claim {
            op: OpId(0),
            owner: "mallory\x1b[31m\rroot".into(),
            review_by: "soon\t\u{7}\n\u{9b}2J".into(),
        })
        .expect("claim");
    fleet.close().expect("close");

    let out = fleetweft(&["log", "show"], &dir);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(r"op0 claimed by mallory\u{1b}[31m\rroot, review by soon\t\u{7}\n\u{9b}2J"),
        "{stdout}"
    );
    // Not one control character reaches the terminal but the line ends.
    assert!(
        !stdout.chars().any(|c| c.is_control() && c != '\n'),
        "{stdout:?}"
    );
    assert_eq!(stdout.lines().count(), stdout.matches('\n').count());

    // JSON lines escape them too (JSON's own escapes), and keep the text.
    let out = fleetweft(&["log", "show", "--json"], &dir);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(!stdout.chars().any(|c| c.is_control() && c != '\n'));
    let claim = stdout
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("json line"))
        .find(|line| line["event"]["OpClaimed"].is_object())
        .expect("the claim");
    assert_eq!(
        claim["event"]["OpClaimed"]["owner"],
        "mallory\x1b[31m\rroot"
    );
}
