//! The real binaries the end-to-end tests start.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// `fleetweft`, as cargo built it for this test binary.
pub fn fleetweft() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fleetweft"))
}

/// `fleetweft-agent` next to `fleetweft`, (re)built once per test process
/// with the same profile: an agent binary older than the code under test
/// speaks another wire version and never connects, and cargo gives a test
/// only its own package's binaries.
pub fn agent_binary() -> PathBuf {
    static AGENT: OnceLock<PathBuf> = OnceLock::new();
    AGENT.get_or_init(build_agent).clone()
}

fn build_agent() -> PathBuf {
    let fleetweft = fleetweft();
    let release = fleetweft.parent().is_some_and(|p| p.ends_with("release"));
    let mut build = Command::new(env!("CARGO"));
    // The whole workspace's bins, not `-p agent`: cargo resolves features
    // per selection, and the agent alone would be built with other
    // features than the test build's, recompiling its dependencies here
    // and again in scripts/test.sh's `cargo build --workspace --bins`.
    build.args(["build", "--workspace", "--bins"]);
    if release {
        build.arg("--release");
    }
    // Cargo gives this test the CARGO_PKG_*/CARGO_MANIFEST_* variables of
    // `runtime`; build scripts that watch them (ring's does) would rebuild
    // for this inner cargo and again for the next outer one.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_MANIFEST_")
            || name.starts_with("CARGO_BIN_")
            || [
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "OUT_DIR",
            ]
            .contains(&name.as_ref())
        {
            build.env_remove(name.as_ref());
        }
    }
    let status = build.status().expect("running cargo build for the agent");
    assert!(status.success(), "cargo build --workspace --bins failed");
    let agent = fleetweft.with_file_name("fleetweft-agent");
    assert!(
        agent.exists(),
        "{} missing after the build",
        agent.display()
    );
    agent
}
