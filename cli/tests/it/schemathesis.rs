//! schemathesis against a real controller on loopback (issue 13): every
//! check on, a bounded number of examples, any finding fails this test.
//! `scripts/schemathesis.sh` installs schemathesis (pinned) from PyPI into
//! target/ when missing and runs it. A Rust test rather than a step of
//! scripts/test.sh: the API harness already starts a controller with its
//! PKI, bundle key, nodes and a rollout, on ports it chooses, and cargo
//! builds the binary it runs.

use crate::api_harness;

use api_harness::Controller;
use std::process::Command;
use std::time::Instant;

#[test]
fn schemathesis_finds_nothing_against_a_live_controller() {
    let ctl = Controller::start();
    // A rollout, so the reads have rollouts, ops and an UNKNOWN to show.
    ctl.start_rollout("node-c");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/schemathesis.sh");
    let started = Instant::now();
    let out = Command::new("bash")
        .arg(script)
        .arg(ctl.url())
        .arg(&ctl.token_file)
        .output()
        .expect("running scripts/schemathesis.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}\n{stderr}");
    eprintln!("schemathesis ran {:.1} s", started.elapsed().as_secs_f64());
    assert!(
        out.status.success(),
        "schemathesis reported findings (exit {:?}):\n{stdout}\n{stderr}",
        out.status.code()
    );
}
