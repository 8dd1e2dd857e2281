//! `fleetweft-check` as an operator or CI runs it: exit codes and output.

use std::process::Command;

fn check(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fleetweft-check"))
        .args(args)
        .output()
        .expect("run fleetweft-check");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn clean_run_exits_zero_with_a_summary() {
    let (code, stdout, stderr) = check(&["--followers", "1", "--faults", "loss,wrong-answer"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("unique states"));
    assert!(stdout.contains("PASS       always    S6 stable decisions"));
    assert!(stdout.contains("FOUND"));
}

#[test]
fn every_listed_mutant_exits_one_naming_its_rule() {
    let (code, list, _) = check(&["--list-mutants"]);
    assert_eq!(code, 0);
    let mutants: Vec<(String, String)> = list
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next()?.to_string();
            let _breaks = words.next()?;
            Some((name, words.next()?.to_string()))
        })
        .collect();
    assert!(mutants.len() >= 9, "{list}");
    for (name, rule) in mutants {
        let (code, stdout, stderr) = check(&["--mutant", &name]);
        assert_eq!(code, 1, "{name}: {stdout}{stderr}");
        assert!(
            stdout.contains(&format!("=> breaks {rule} ")),
            "{name} must name {rule}:\n{stdout}"
        );
        assert!(stdout.contains("1. "), "numbered steps for {name}");
    }
}

#[test]
fn bad_arguments_exit_two_naming_the_argument() {
    for (args, needle) in [
        (vec!["--mutant", "nope"], "--mutant"),
        (vec!["--faults", "loss,meteor"], "--faults"),
        (vec!["--followers", "9"], "--followers"),
        (vec!["--slots", "0"], "--slots"),
        (vec!["--max-faults", "x"], "--max-faults"),
        (vec!["--chunks", "0"], "--chunks"),
        (vec!["--chunks", "5"], "--chunks"),
    ] {
        let (code, _, stderr) = check(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?} should name {needle}: {stderr}"
        );
    }
}

#[test]
fn json_and_markdown_outputs() {
    let dir = std::env::temp_dir().join(format!("fleetweft-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let md = dir.join("cex.md");
    let md_arg = md.to_string_lossy().into_owned();
    let (code, stdout, _) = check(&[
        "--mutant",
        "grant-while-paused",
        "--json",
        "--markdown",
        &md_arg,
    ]);
    assert_eq!(code, 1);
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("valid JSON");
    assert!(json["unique_states"].as_u64().is_some_and(|n| n > 0));
    let page = std::fs::read_to_string(&md).expect("markdown written");
    assert!(page.contains("S5 pause stops grants"), "{page}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--symmetry` where it would be unsound is a usage error naming why;
/// where it is sound the run says so and passes.
#[test]
fn symmetry_is_refused_where_unsound_and_reported_where_used() {
    for (args, why) in [
        (&["--symmetry"][..], "needs --waves"),
        (&["--symmetry", "--waves"][..], "--wave-size 2 or more"),
        (
            &["--symmetry", "--waves", "--wave-size", "2", "--slots", "1"][..],
            "slots for a whole wave",
        ),
    ] {
        let (code, stdout, stderr) = check(args);
        assert_eq!(code, 2, "{args:?}: {stdout}{stderr}");
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    }
    let (code, stdout, stderr) = check(&[
        "--waves",
        "--wave-size",
        "2",
        "--slots",
        "2",
        "--faults",
        "wrong-answer",
        "--symmetry",
    ]);
    assert_eq!(
        code, 1,
        "UNKNOWN is not reachable without loss: {stdout}{stderr}"
    );
    assert!(
        stdout.contains("symmetry over a wave's followers"),
        "{stdout}"
    );
    assert!(stdout.contains("explored: 12104 unique states"), "{stdout}");
}

/// A real sled controller log of the lost-reply story, written from the
/// checker's own events: the canary's commit decided, the reply lost, the
/// rollout paused by an operator. Returns its directory.
fn lost_reply_log(name: &str) -> std::path::PathBuf {
    use simulations::config::{Fault, Faults};
    use simulations::world::Msg;
    use simulations::{Action, CheckConfig, FleetModel};
    // The snapshot fault keeps the log's entries in the world.
    let model = FleetModel::new(CheckConfig {
        followers: 1,
        faults: Faults::none().with(Fault::Snapshot),
        max_faults: 0,
        ..CheckConfig::default()
    });
    let mut w = model.transition(&model.initial(), Action::Start, &mut None);
    for to_agent in [true, false] {
        let msg = *w
            .net
            .iter()
            .find(|m| matches!(m, Msg::ToAgent(..)) == to_agent)
            .expect("a message");
        w = model.transition(&w, Action::Deliver { msg, fault: None }, &mut None);
    }
    let reply = *w.net.iter().next().expect("the reply");
    w = model.transition(&w, Action::Drop(reply), &mut None);
    w = model.transition(&w, Action::Pause(model::RolloutId(0)), &mut None);
    let events = w.log.expect("the log").tail;
    let dir = std::env::temp_dir().join(format!("fromlog-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (log, _) = eventlog::EventLog::<model::controller::Event>::open(&dir).expect("a new log");
    let durable = log.append(events).expect("appended");
    assert!(!durable.into_inner().is_empty(), "the story wrote events");
    drop(log);
    dir
}

#[test]
fn from_log_explores_a_real_log_and_names_what_it_breaks() {
    let dir = lost_reply_log("clean");
    let data = dir.to_string_lossy().into_owned();
    let (code, stdout, stderr) = check(&["--from-log", &data, "--faults", "loss", "--depth", "8"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("projected start:"), "{stdout}");
    assert!(stdout.contains("paused (operator)"), "{stdout}");
    assert!(stdout.contains("decided (commit)"), "{stdout}");
    assert!(stdout.contains("no violation within depth 8"), "{stdout}");
    // A mutant that decides again on the retried commit request is caught
    // from here, with the shortest path from the projected start.
    let (code, stdout, stderr) = check(&["--from-log", &data, "--mutant", "redecide-on-retry"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("breaks \"S6 stable decisions\""),
        "{stdout}"
    );
    assert!(stdout.contains("0. the projected start"), "{stdout}");
    // Up to the first entry only (the nodes' hellos, or nothing): no
    // rollout under way yet.
    let (code, stdout, _) = check(&["--from-log", &data, "--until", "0"]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("nothing to explore from here"), "{stdout}");
    // A configuration the projection cannot honour is refused by name.
    let (code, _, stderr) = check(&["--from-log", &data, "--faults", "snapshot"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("snapshot"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
    let (code, _, stderr) = check(&["--from-log", &data]);
    assert_eq!(code, 2, "a missing log is an error: {stderr}");
}
