//! `fleetweft completions` and `fleetweft manpages`: generated from the clap
//! definitions of both binaries, so they name the real commands and flags.

use std::process::Command;

fn fleetweft(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fleetweft"))
        .args(args)
        .output()
        .expect("run fleetweft")
}

#[test]
fn completions_name_the_real_commands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = fleetweft(&["completions", shell]);
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("quickstart") && text.contains("rollout"),
            "{shell}"
        );
    }
    let out = fleetweft(&["completions", "bash", "--binary", "fleetweft-agent"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("--allow-fault-injection"),
        "{text}"
    );
    // An unknown shell is a usage error.
    assert_eq!(fleetweft(&["completions", "tcsh"]).status.code(), Some(2));
}

#[test]
fn manpages_cover_both_binaries_and_every_command() {
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path().join("man1");
    let out = fleetweft(&["manpages", dir.to_str().expect("utf-8 path")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for page in [
        "fleetweft.1",
        "fleetweft-agent.1",
        "fleetweft-rollout-start.1",
        "fleetweft-quickstart.1",
    ] {
        let text = std::fs::read_to_string(dir.join(page)).unwrap_or_default();
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page}: {text:.80}"
        );
    }
    let agent = std::fs::read_to_string(dir.join("fleetweft-agent.1")).expect("agent page");
    assert!(agent.contains("config"), "{agent:.200}");
}
