//! Scenario 27 (issue #24 item 1 on real agents): configuration as its own
//! release layer. g1 (the sample app, app `greeter`, code only) everywhere;
//! then `fleetweft config set greeter LEVEL=1 --file greeting.txt=...` and a
//! rollout of the same code: a configuration-only rollout, a new digest
//! (never a no-op), verified on every node with the proof's `configuration`
//! row matching, every app started with the value and the file; then
//! revision 2 (`LEVEL=2`) the same way. Last, node-c's app is restarted by
//! hand with revision 1's environment (its agent stopped meanwhile, so it
//! cannot restart its own first): the live proof of node-c is `stale`,
//! `configuration_fingerprint_mismatch`, expecting revision 2's
//! fingerprint and observing revision 1's.

use super::signed::{roll_out_verified, sign_and_upload};
use super::*;
use model::Digest;

/// The releases' (and the configuration's) app.
const APP: &str = "greeter";

async fn configuration(f: &mut Fleet) -> anyhow::Result<String> {
    for node in NODES {
        f.start_agent(node, &AgentFaults::default())?;
    }
    f.wait("every agent connected", WAIT_MS, all_connected)
        .await?;
    let app = f.dir.join("app");
    std::fs::create_dir_all(&app)?;
    std::fs::write(app.join("app.py"), demo::HELLO_APP)?;
    let g1 = sign_and_upload(f, &app, APP, "g1", &[]).await?;
    roll_out_verified(f, g1).await?;
    let first = configure_and_roll_out(f, g1, 1).await?;
    // Revision 1's environment as node-c's app had it: the old
    // configuration a hand restart brings back.
    let old_env = app_environment(f, "node-c", first.deployment)?;
    let second = configure_and_roll_out(f, g1, 2).await?;
    restart_by_hand(f, g1, second.deployment, old_env).await?;
    let (code, proof) = f.node_proof("node-c").await?;
    ensure!(
        code == 1
            && proof["verdict"] == "stale"
            && proof["reason"] == "configuration_fingerprint_mismatch",
        "node-c, restarted by hand with revision 1, should be stale (configuration_fingerprint_mismatch): {proof:#}"
    );
    let row = configuration_row(&proof)?;
    ensure!(
        row["expected"] == second.fingerprint
            && row["observed"] == first.fingerprint
            && row["ok"] == false,
        "node-c's configuration row should expect revision 2's fingerprint and observe revision 1's: {row:#}"
    );
    Ok(format!(
        "configuration-only rollouts of revisions 1 and 2 verified on 3 nodes; node-c restarted by hand with revision 1: stale ({})",
        proof["summary"].as_str().unwrap_or_default()
    ))
}

pub(super) fn all() -> Vec<Scenario> {
    vec![Scenario {
        number: 27,
        title: "configuration: two configuration-only rollouts of one code, verified on every node with the configuration fingerprint read back; node-c's app restarted by hand with the old configuration: stale (configuration_fingerprint_mismatch)",
        rule: "configuration is a release layer, proof is a readback",
        versions: &[],
        extra: &[],
        nodes: &NODES,
        layout: Layout::Single,
        body: body!(configuration),
    }]
}

/// One configuration revision rolled out.
struct Rolled {
    /// The deployment digest the rollout's plan names.
    deployment: Digest,
    /// The revision's fingerprint, hex.
    fingerprint: String,
}

/// `config set` revision `n` (`LEVEL=n`, a file `greeting.txt`), then a
/// rollout of `code`: its plan names a new deployment digest, it is
/// verified on every node with a matching `configuration` row, and every
/// node's app runs with `LEVEL=n` and the file in its configuration
/// directory.
async fn configure_and_roll_out(f: &mut Fleet, code: Digest, n: u64) -> anyhow::Result<Rolled> {
    let file = f.dir.join(format!("greeting-{n}.txt"));
    let greeting = format!("greetings, revision {n}\n");
    std::fs::write(&file, &greeting)?;
    let (level, file_arg) = (
        format!("LEVEL={n}"),
        format!("greeting.txt={}", file.display()),
    );
    let (status, out) = f
        .cli(&["config", "set", APP, &level, "--file", &file_arg])
        .await?;
    ensure!(status == 0, "config set {APP} {level}: {out}");
    let config: serde_json::Value = f.api().get(&format!("/api/configs/{APP}")).await?;
    ensure!(
        config["revision"] == n,
        "{APP}'s latest revision: {config:#}"
    );
    let fingerprint = config["fingerprint"]
        .as_str()
        .context("the revision's fingerprint")?
        .to_string();
    let id = roll_out_verified(f, code).await?;
    let s = f.status().await?;
    let release = rollout(&s, &id).context("the rollout")?.release.clone();
    let deployment = agent::probe::parse_digest(&release)
        .with_context(|| format!("{id}'s release {release:?}"))?;
    ensure!(
        deployment != code,
        "{id} deploys revision {n}: its plan must name a deployment, not the code {code}"
    );
    for node in NODES {
        check_node(f, node, deployment, &fingerprint, (&level, &greeting)).await?;
    }
    Ok(Rolled {
        deployment,
        fingerprint,
    })
}

/// `node` serves `deployment` (its route's identity), its live proof's
/// `configuration` row matches `fingerprint`, and its app runs with
/// `level` and the file `greeting.txt` holding `greeting`.
async fn check_node(
    f: &Fleet,
    node: &str,
    deployment: Digest,
    fingerprint: &str,
    (level, greeting): (&str, &str),
) -> anyhow::Result<()> {
    let answer = f.public(node).await.context("the public route")?;
    ensure!(
        answer.identity.as_deref() == Some(deployment.to_hex().as_str()),
        "{node}'s route should answer as {deployment}: {answer:?}"
    );
    let (_, proof) = f.node_proof(node).await?;
    let row = configuration_row(&proof)?;
    ensure!(
        row["ok"] == true && row["expected"] == fingerprint && row["observed"] == fingerprint,
        "{node}'s configuration row: {row:#}"
    );
    let env = app_environment(f, node, deployment)?;
    ensure!(
        env.iter().any(|v| v == level),
        "{node}'s app should run with {level}"
    );
    let dir = env
        .iter()
        .find_map(|v| v.strip_prefix("FLEETWEFT_CONFIG_DIR="))
        .context("FLEETWEFT_CONFIG_DIR in the app's environment")?;
    let file = std::fs::read_to_string(Path::new(dir).join("greeting.txt"))?;
    ensure!(file == greeting, "{node}'s greeting.txt: {file:?}");
    Ok(())
}

/// The proof's `configuration` row.
fn configuration_row(proof: &serde_json::Value) -> anyhow::Result<&serde_json::Value> {
    proof["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["item"] == "configuration"))
        .with_context(|| format!("no configuration row in the proof: {proof:#}"))
}

/// The environment (`KEY=VALUE`) of `node`'s app process serving
/// `deployment`.
fn app_environment(f: &Fleet, node: &str, deployment: Digest) -> anyhow::Result<Vec<String>> {
    let wanted = format!("FLEETWEFT_DEPLOYMENT={}", deployment.to_hex());
    let data = f.dir.join(format!("{node}-data"));
    for (pid, _, _) in crate::fleet::processes_under(&data) {
        let Ok(raw) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let vars: Vec<String> = raw
            .split(|b| *b == 0)
            .filter(|v| !v.is_empty())
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect();
        if vars.contains(&wanted) {
            return Ok(vars);
        }
    }
    bail!("no app process of {node} runs {deployment}")
}

/// node-c's app, serving `deployment` of `code`, restarted by hand with
/// `old_env` (on the port the agent gave the running instance): its agent
/// is stopped (SIGSTOP) meanwhile, so its supervisor cannot take the port
/// back first, and continued once the hand-started app answers the route.
async fn restart_by_hand(
    f: &mut Fleet,
    code: Digest,
    deployment: Digest,
    old_env: Vec<String>,
) -> anyhow::Result<()> {
    let running = app_environment(f, "node-c", deployment)?;
    let port = running
        .iter()
        .find(|v| v.starts_with("PORT="))
        .context("PORT in the running app's environment")?
        .clone();
    let env: Vec<String> = old_env
        .into_iter()
        .map(|v| {
            if v.starts_with("PORT=") {
                port.clone()
            } else {
                v
            }
        })
        .collect();
    let cwd = f
        .app_dir("node-c", code)
        .context("node-c's app directory")?;
    let port: u16 = port
        .trim_start_matches("PORT=")
        .parse()
        .with_context(|| format!("the running app's {port}"))?;
    let agent = f.pid("node-c")?;
    signal(agent, libc::SIGSTOP)?;
    let started = hand_start(f, &cwd, &env, (code, port)).await;
    signal(agent, libc::SIGCONT)?;
    started?;
    wait_for(
        "node-c's route answers the hand-started app",
        WAIT_MS,
        || async { f.public("node-c").await.is_some_and(|a| a.status == 200) },
    )
    .await
}

/// Kill node-c's app of `code` and start it by hand with `env` in `cwd`;
/// wait until it listens on `port` (node-c's agent is stopped: its route
/// does not answer meanwhile).
async fn hand_start(
    f: &mut Fleet,
    cwd: &Path,
    env: &[String],
    (code, port): (Digest, u16),
) -> anyhow::Result<()> {
    for pid in f.app_pids("node-c", code) {
        signal(pid, libc::SIGKILL)?;
    }
    wait_for("node-c's app is gone", WAIT_MS, || {
        let gone = f.app_pids("node-c", code).is_empty();
        async move { gone }
    })
    .await?;
    let name = "node-c-app-by-hand";
    f.start_by_hand("node-c", name, cwd, env, &["/usr/bin/python3", "app.py"])?;
    let pid = f.pid(name)?;
    wait_for("the hand-started app listens", WAIT_MS, || {
        let listens = listens_on(pid, port);
        async move { listens }
    })
    .await
}

/// Whether `port` is listened on in the network namespace of `pid`
/// (`/proc/PID/net/tcp{,6}`, state `0A`).
fn listens_on(pid: u32, port: u16) -> bool {
    let local = format!(":{port:04X}");
    ["tcp", "tcp6"].iter().any(|table| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).is_ok_and(|text| {
            text.lines().skip(1).any(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                fields.len() > 3 && fields[1].ends_with(&local) && fields[3] == "0A"
            })
        })
    })
}

/// kill(2) of a process this scenario's fleet started.
fn signal(pid: u32, sig: libc::c_int) -> anyhow::Result<()> {
    let pid = libc::pid_t::try_from(pid)?;
    // SAFETY: kill(2) only, on a pid of this fleet's processes.
    let rc = unsafe { libc::kill(pid, sig) };
    ensure!(
        rc == 0,
        "kill({pid}, {sig}): {}",
        std::io::Error::last_os_error()
    );
    Ok(())
}
