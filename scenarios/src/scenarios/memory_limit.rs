//! Scenario 26 (issue #24 item 4 on real agents): a release's memory
//! limit, run twice on one fleet. l1 (the sample app, `--memory-max
//! 512M`) everywhere; then a release whose app takes 400 MiB as it starts,
//! signed with `--memory-max 64M`, through canary node-a:
//!
//! 1. rlimits only: every agent sees the host's cgroup hierarchies
//!    ([`AgentCgroups::HostOff`]) and is told not to use them (`[isolation]
//!    cgroups = false`): the limit is `RLIMIT_AS`, the app's allocation
//!    fails (`MemoryError`);
//! 2. cgroups: node-a's agent restarted with them ([`AgentCgroups::Host`]):
//!    the limit is cgroup v2 `memory.max` and the kernel kills the app.
//!    On a host without a cgroup v2 memory controller for the agent (a
//!    hybrid host such as this project's CI machine) this half runs against
//!    the cgroup v1 memory hierarchy and says so;
//!    `FLEETWEFT_SCENARIO_26_CGROUP=v2` makes it fail there instead.
//!
//! Each time the canary's op ends `rolled-back` (l1 proven serving by
//! probe), the rollout is paused, its proof failed, the log grants no
//! follower, and the proof's process row for node-a names the isolation
//! its agent applied (to l1, the release behind the route: the only one a
//! readback describes).

use super::signed::{canary_restored, roll_out_verified, sign_and_upload};
use super::*;
use crate::fleet::AgentCgroups;

/// The releases' name.
const APP: &str = "hog";
/// Prepended to the sample app: takes 400 MiB as it starts, before it
/// listens.
const GREEDY_PREFIX: &str =
    "hog = bytearray(400 << 20)\nfor i in range(0, len(hog), 4096):\n    hog[i] = 1\n";
/// Set to `v2` to require a cgroup v2 memory controller in the cgroup run
/// (by default a host without one runs it against cgroup v1, saying so).
pub const CGROUP_ENV: &str = "FLEETWEFT_SCENARIO_26_CGROUP";

pub(super) fn all() -> Vec<Scenario> {
    vec![Scenario {
        number: 26,
        title: "memory limit: a release whose app takes 400 MiB under --memory-max 64M is stopped on the canary, rolled back with proof, paused, no follower; once with rlimits only, once with cgroups (v2, or v1 on a host without a v2 memory controller); the proof names which",
        rule: "limits applied and stated, S9, S11",
        versions: &[],
        extra: &[],
        nodes: &NODES,
        layout: Layout::Single,
        body: body!(memory_limit),
    }]
}

/// How one run's limit is applied: its name, the words the agent uses for
/// l1's limit (the proof's process row) and for the greedy release's.
struct Isolation {
    name: &'static str,
    baseline: &'static str,
    greedy: &'static str,
}

const RLIMITS: Isolation = Isolation {
    name: "rlimits only",
    baseline: "memory 512 MiB as address space only (rlimit RLIMIT_AS",
    greedy: "memory 64 MiB as address space only (rlimit RLIMIT_AS",
};
const CGROUP_V2: Isolation = Isolation {
    name: "cgroup v2",
    baseline: "memory 512 MiB (cgroup v2 memory.max)",
    greedy: "memory 64 MiB (cgroup v2 memory.max)",
};
const CGROUP_V1: Isolation = Isolation {
    name: "cgroup v1",
    baseline: "memory 512 MiB (cgroup v1 memory.limit_in_bytes)",
    greedy: "memory 64 MiB (cgroup v1 memory.limit_in_bytes)",
};

async fn memory_limit(f: &mut Fleet) -> anyhow::Result<String> {
    let off = AgentFaults {
        cgroups: AgentCgroups::HostOff,
        ..AgentFaults::default()
    };
    for node in NODES {
        f.start_agent(node, &off)?;
    }
    f.wait("every agent connected", WAIT_MS, all_connected)
        .await?;
    let app = f.dir.join("app");
    std::fs::create_dir_all(&app)?;
    std::fs::write(app.join("app.py"), demo::HELLO_APP)?;
    let l1 = sign_and_upload(f, &app, APP, "l1", &["--memory-max", "512M"]).await?;
    roll_out_verified(f, l1).await?;
    let greedy = f.dir.join("greedy");
    std::fs::create_dir_all(&greedy)?;
    std::fs::write(
        greedy.join("app.py"),
        format!("{GREEDY_PREFIX}{}", demo::HELLO_APP),
    )?;
    let first = over_the_limit(f, &greedy, "l2", &RLIMITS).await?;
    ensure!(
        f.logs("node-a").contains("MemoryError"),
        "rlimits only: l2's allocation should fail (MemoryError in node-a's log)"
    );

    let with = cgroup_isolation()?;
    f.kill("node-a").await?;
    let on = AgentCgroups::Host;
    f.start_agent(
        "node-a",
        &AgentFaults {
            cgroups: on,
            ..AgentFaults::default()
        },
    )?;
    f.wait("node-a reconnects", WAIT_MS, |s| connected(s, "node-a"))
        .await?;
    let second = over_the_limit(f, &greedy, "l3", with).await?;
    let stopped = format!(
        "stopped by its memory limit before it accepted connections ({}",
        with.greedy
    );
    ensure!(
        f.last_log("node-a").contains(&stopped),
        "{}: node-a's agent should say the kernel stopped l3 ({stopped:?})",
        with.name
    );
    Ok(format!(
        "{}: rolled-back, proof {first}; {}: rolled-back, proof {second}",
        RLIMITS.name, with.name
    ))
}

/// The cgroup run's isolation: cgroup v2 when the agent (started in the
/// harness's own cgroup) finds a v2 memory controller it may use; cgroup
/// v1 when it finds a v1 memory hierarchy and [`CGROUP_ENV`] does not say
/// `v2`; else an error that says what the host offers.
fn cgroup_isolation() -> anyhow::Result<&'static Isolation> {
    let found = agent::isolation::Hierarchies::detect();
    let v2 = found.v2.as_ref();
    if v2.is_some_and(|(_, enabled)| enabled.iter().any(|c| c == "memory")) {
        return Ok(&CGROUP_V2);
    }
    let v1 = found.v1.iter().find(|(name, _)| *name == "memory");
    let require_v2 = std::env::var(CGROUP_ENV).is_ok_and(|v| v == "v2");
    if let (Some(_), false) = (v1, require_v2) {
        eprintln!(
            "scenario 26: NOTE: no cgroup v2 memory controller for the agent on this host; \
             the cgroup run uses the cgroup v1 memory hierarchy ({CGROUP_ENV}=v2 requires v2)"
        );
        return Ok(&CGROUP_V1);
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let controllers = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .iter()
        .map(|m| {
            let text = std::fs::read_to_string(format!("{m}/cgroup.controllers"));
            format!(
                "{m}/cgroup.controllers: {:?}",
                text.unwrap_or_default().trim()
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    bail!(
        "NO CGROUP V2 MEMORY CONTROLLER for the agent on this host: the cgroup run of scenario 26 cannot run here \
         (the agent's cgroup, /proc/self/cgroup: {:?}; v2 subtree it may use: {:?}; {controllers}; \
         a writable cgroup v1 memory hierarchy: {}). {CGROUP_ENV}=v2 was set, which requires v2.",
        own.trim(),
        v2,
        v1.map_or("none".to_string(), |(_, d)| d.display().to_string()),
    )
}

/// The greedy app signed as `version` with `--memory-max 64M`, through
/// canary node-a: restored with proof (l1 serving), paused, no follower,
/// the rollout's proof failed, its process row for node-a naming `how`
/// as applied to l1, and node-a's agent logging `how` for `version`.
/// Returns the proof's reason for node-a.
async fn over_the_limit(
    f: &mut Fleet,
    greedy: &Path,
    version: &str,
    how: &Isolation,
) -> anyhow::Result<String> {
    let release = sign_and_upload(f, greedy, APP, version, &["--memory-max", "64M"]).await?;
    let id = f
        .start_rollout_api(release, "node-a", &["node-b", "node-c"])
        .await?;
    canary_restored(f, &id, "l1").await?;
    let (code, proof) = f.rollout_proof(&id).await?;
    let canary = &proof["nodes"][0];
    ensure!(
        code == 1 && proof["verdict"] == "failed" && canary["verdict"] == "failed",
        "{}: {id}'s proof should be failed on node-a: {proof:#}",
        how.name
    );
    let process = canary["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["item"] == "process"))
        .and_then(|c| c["observed"].as_str())
        .unwrap_or_default();
    ensure!(
        process.contains(&format!("limits: {}", how.baseline)),
        "{}: the proof's process row for node-a should name {:?}: {proof:#}",
        how.name,
        how.baseline
    );
    let applied = format!("release={release}");
    let said = f
        .last_log("node-a")
        .lines()
        .any(|l| l.contains("limits applied") && l.contains(&applied) && l.contains(how.greedy));
    ensure!(
        said,
        "{}: node-a's agent should log {version}'s limit as {:?}",
        how.name,
        how.greedy
    );
    Ok(format!("{} with {process:?}", canary["reason"]))
}
