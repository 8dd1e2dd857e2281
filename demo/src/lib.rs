//! `fleetweft demo`: a real controller and three real agents on loopback,
//! a signed Python app rolled from v1 to v2 through a canary, narrated step
//! by step, ending with the proof for every node and the handover report.
//! With `--ha` the story is [`crate::ha`]'s: two controllers on an
//! etcd cluster the demo starts, the leader killed mid-rollout.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod ha;
pub mod ports;
pub mod quickstart;

use crate::quickstart::FleetLayout;
use anyhow::{bail, Context};
use api::client::ApiClient;
use api::client::FleetView;
use api::view::EventDto;
use protocol::bundle::{self, ManifestFields, ProbeSpec};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// The sample app, embedded so the demo needs nothing but its binaries.
pub const HELLO_APP: &str = include_str!("../../examples/hello/app.py");
/// The line of [`HELLO_APP`] that [`sign_hello`] replaces to bake a version in.
pub const BAKED_VERSION_LINE: &str = "BAKED_VERSION = None";
/// The fleet of the demo.
pub const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];
/// How long any one demo step may take.
pub const STEP_TIMEOUT_MS: u64 = 60_000;

/// Which story the demo tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// v1 everywhere, then v2 through the canary to every node.
    Happy,
    /// v2 answers wrongly on the canary (healthy process): restore, pause.
    WrongAnswer,
    /// The first commit reply for v2 is lost; the operator pauses; the
    /// stored decision is replayed and the op settles; no follower granted.
    LostReply,
}

/// Options of `fleetweft demo`.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Where everything goes (a fresh directory is made inside a temp dir
    /// when not given).
    pub dir: Option<PathBuf>,
    /// Which story.
    pub scenario: Scenario,
    /// Keep the fleet running after the story until Ctrl-C.
    pub keep_running: bool,
    /// Two controllers on a 3-member etcd cluster the demo starts; the
    /// leader is killed mid-rollout and the standby finishes it
    /// (`demo_ha`). Tells the happy story only.
    pub ha: bool,
}

/// The processes the demo started (etcd members aside, see `demo_ha`).
pub(crate) struct Fleet {
    /// Name, process, and the file its output goes to.
    children: Vec<(String, Child, PathBuf)>,
}

/// How many lines of a dead child's log the demo shows.
const DEAD_LOG_LINES_MAX: usize = 15;
/// How many lines of each log a timed-out step shows.
const TIMEOUT_LOG_LINES_MAX: usize = 6;

/// The last `lines_max` lines of a log file, without terminal colours.
pub(crate) fn tail(log: &Path, lines_max: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_else(|e| format!("(unreadable: {e})"));
    let lines: Vec<&str> = text.lines().collect();
    let kept = lines[lines.len().saturating_sub(lines_max)..].join("\n");
    strip_ansi(&kept)
}

/// `tracing`'s coloured output, readable in a test failure.
pub(crate) fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... final byte in '@'..='~'
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) && c != '[' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl Fleet {
    pub(crate) fn new() -> Fleet {
        Fleet {
            children: Vec::new(),
        }
    }

    pub(crate) async fn stop(&mut self) {
        for (name, child, _) in self.children.iter_mut() {
            let _ = child.start_kill();
            let _ = child.wait().await;
            tracing::debug!("stopped {name}");
        }
        self.children.clear();
    }

    pub(crate) fn push(
        &mut self,
        name: &str,
        exe: &Path,
        args: &[String],
        log: PathBuf,
    ) -> anyhow::Result<()> {
        let child = spawn(exe, args, &log)?;
        self.children.push((name.to_string(), child, log));
        Ok(())
    }

    /// The last `lines_max` lines of every process's log, to show what each
    /// was doing when a step timed out.
    pub(crate) fn log_tails(&self, lines_max: usize) -> String {
        let mut out = String::new();
        for (name, _, log) in &self.children {
            out.push_str(&format!("--- {name} ({}):\n", log.display()));
            out.push_str(&tail(log, lines_max));
            out.push('\n');
        }
        out
    }

    /// Every process of the demo is still running; otherwise say which one
    /// ended and why (the tail of its log), instead of waiting out a step.
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        for (name, child, log) in self.children.iter_mut() {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "{name} exited ({status}); the end of {}:\n{}",
                    log.display(),
                    tail(log, DEAD_LOG_LINES_MAX)
                );
            }
        }
        Ok(())
    }

    /// SIGKILLs the process named `name` and forgets it (so
    /// [`Fleet::check_alive`] does not report it); its pid, or `None` when
    /// no such process runs.
    pub(crate) async fn kill(&mut self, name: &str) -> Option<u32> {
        let index = self.children.iter().position(|(n, _, _)| n == name)?;
        let (_, mut child, _) = self.children.remove(index);
        let pid = child.id();
        // tokio's start_kill is SIGKILL on unix: no shutdown path runs.
        let _ = child.start_kill();
        let _ = child.wait().await;
        pid
    }
}

pub(crate) fn say(text: impl AsRef<str>) {
    println!("{}", text.as_ref());
}

/// Run the demo; Ok(true) when the story ended as it should.
pub async fn run(options: DemoOptions) -> anyhow::Result<bool> {
    let mut fleet = Fleet::new();
    // Ctrl-C and a plain `kill` (SIGTERM, what `timeout` and service
    // managers send) both stop every child before the demo exits; without
    // the SIGTERM arm the controller and agents outlived the demo.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    // The etcd members of `--ha` live outside `fleet` (std processes tied
    // to this process's life), stopped after it.
    let mut etcd = None;
    let outcome = tokio::select! {
        result = async {
            if options.ha {
                crate::ha::story(&options, &mut fleet, &mut etcd).await
            } else {
                story(&options, &mut fleet).await
            }
        } => result,
        _ = tokio::signal::ctrl_c() => {
            say("\ninterrupted: stopping every process");
            Ok(false)
        }
        _ = terminate.recv() => {
            say("\nterminated: stopping every process");
            Ok(false)
        }
    };
    fleet.stop().await;
    if let Some(cluster) = etcd.as_mut() {
        crate::ha::EtcdCluster::stop(cluster);
    }
    outcome
}

/// What the demo made before starting any process: its directory, the
/// fleet's layout (ports picked later), PKI, operator token, and the two
/// signed releases (version, digest, bundle bytes).
pub(crate) struct Prepared {
    pub(crate) dir: PathBuf,
    pub(crate) layout: FleetLayout,
    pub(crate) pki: protocol::pki::FleetPki,
    pub(crate) token: String,
    pub(crate) releases: Vec<(&'static str, model::Digest, Vec<u8>)>,
}

/// Steps [1] and [2], shared by every story: a new or empty directory,
/// the PKI and keys, and hello v1 and v2 signed.
pub(crate) fn prepare(options: &DemoOptions, title: &str) -> anyhow::Result<Prepared> {
    let dir = match &options.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("fleetweft-demo-{}", std::process::id())),
    };
    if dir.exists() && std::fs::read_dir(&dir)?.next().is_some() {
        bail!("{} is not empty; give an empty or new --dir", dir.display());
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    say(format!("Fleetweft demo ({title}) in {}", dir.display()));

    say("\n[1] PKI: fleet CA, controller and node certificates, operator token");
    // The ports are picked when the processes start.
    let layout = layout_of(&dir, 0, 0, &[]);
    let (pki, signing) = layout.write_pki_and_keys()?;
    let token = protocol::pki::load_operator_token(&pki.operator_token())?;

    say("[2] bundle signing key, and two signed releases of the sample app");
    let mut releases = Vec::new();
    for version in ["v1", "v2"] {
        let bytes = sign_hello(&signing, version)?;
        let digest = bundle::bundle_digest(&bytes);
        let path = dir.join(format!("hello-{version}.bundle"));
        std::fs::write(&path, &bytes)?;
        say(format!("    hello {version}: release {}", digest.to_hex()));
        releases.push((version, digest, bytes));
    }
    Ok(Prepared {
        dir,
        layout,
        pki,
        token,
        releases,
    })
}

async fn story(options: &DemoOptions, fleet: &mut Fleet) -> anyhow::Result<bool> {
    let Prepared {
        dir,
        mut layout,
        pki,
        token,
        releases,
    } = prepare(options, &format!("{:?}", options.scenario))?;
    let v1 = releases[0].1;
    let v2 = releases[1].1;

    say("[3] starting the controller and three agents on loopback");
    let started = start_fleet(&mut layout, &pki, token, options.scenario, v2, fleet).await?;
    let (api, api_port, public_ports) = (started.api, started.api_port, started.public_ports);
    let mut seen = started.seen;
    say(format!(
        "    controller API on http://127.0.0.1:{api_port}; logs in {}",
        dir.join("logs").display()
    ));

    say("\n[4] uploading both bundles (the controller checks their signatures)");
    for (version, _, bytes) in &releases {
        let answer: serde_json::Value = api.post_bytes("/api/bundles", bytes.clone()).await?;
        say(format!(
            "    {version}: accepted as {}",
            answer["digest"].as_str().unwrap_or("?")
        ));
    }

    say("\n[5] installing v1 everywhere: canary node-a, then node-b, node-c, one slot");
    start_rollout(&api, v1).await?;
    wait_for(&api, fleet, &mut seen, "rollout r0 completed", |s| {
        rollout_status(s, "r0") == Some("completed")
    })
    .await?;

    say("\n[6] rolling out v2 through the canary");
    start_rollout(&api, v2).await?;
    let ok = match options.scenario {
        Scenario::Happy => {
            wait_for(&api, fleet, &mut seen, "rollout r1 completed", |s| {
                rollout_status(s, "r1") == Some("completed")
            })
            .await?;
            true
        }
        Scenario::WrongAnswer => wrong_answer_story(&api, fleet, &mut seen).await?,
        Scenario::LostReply => lost_reply_story(&api, fleet, &mut seen).await?,
    };

    let all_verified = show_outcome(&api, &public_ports, 7).await?;
    let success = match options.scenario {
        Scenario::Happy | Scenario::LostReply => ok && all_verified,
        Scenario::WrongAnswer => ok,
    };
    say(format!(
        "\ndemo {}",
        if success { "succeeded" } else { "FAILED" }
    ));
    if options.keep_running {
        say(format!(
            "fleet keeps running (API http://127.0.0.1:{api_port}); Ctrl-C stops it\n\
             console: http://127.0.0.1:{api_port}/ (to act from it, log in with the operator token in {})",
            pki.operator_token().display()
        ));
        std::future::pending::<()>().await;
    }
    Ok(success)
}

/// [`story`]'s step 6 for a canary that answers wrongly: r1 settles its
/// canary rolled back and pauses, granting nothing more.
async fn wrong_answer_story(
    api: &ApiClient,
    fleet: &mut Fleet,
    seen: &mut u64,
) -> anyhow::Result<bool> {
    wait_for(
        api,
        fleet,
        seen,
        "the canary's op settled and the rollout paused",
        |s| {
            rollout_status(s, "r1") == Some("paused")
                && s.ops
                    .iter()
                    .any(|o| o.rollout == "r1" && o.outcome.is_some())
        },
    )
    .await?;
    let status: FleetView = api.fleet_view().await?;
    let r1_ops: Vec<_> = status.ops.iter().filter(|o| o.rollout == "r1").collect();
    say(format!(
        "\n    r1 granted {} op(s); canary outcome: {}",
        r1_ops.len(),
        r1_ops
            .first()
            .and_then(|o| o.outcome.clone())
            .unwrap_or_default()
    ));
    Ok(r1_ops.len() == 1 && r1_ops[0].outcome.as_deref() == Some("rolled-back"))
}

/// [`story`]'s step 6 for a lost commit reply: the decision is stored
/// once and replayed, also while the operator holds r1 paused.
async fn lost_reply_story(
    api: &ApiClient,
    fleet: &mut Fleet,
    seen: &mut u64,
) -> anyhow::Result<bool> {
    say("    operator pauses r1 right away (the canary was already granted)");
    let _: serde_json::Value = api
        .post_json("/api/rollouts/r1/pause", &serde_json::json!({}))
        .await?;
    wait_for(
        api,
        fleet,
        seen,
        "the canary's op settled while paused",
        |s| {
            s.ops
                .iter()
                .any(|o| o.rollout == "r1" && o.outcome.is_some())
        },
    )
    .await?;
    let events: Vec<EventDto> = api.get("/api/events?from=0").await?;
    let decided = events
        .iter()
        .filter(|e| e.text.contains("decide op3"))
        .count();
    let replayed = events
        .iter()
        .filter(|e| e.text.contains("replay stored decision for op3"))
        .count();
    let status: FleetView = api.fleet_view().await?;
    let r1_ops = status.ops.iter().filter(|o| o.rollout == "r1").count();
    say(format!(
        "\n    decision for op3 stored once, sent {} time(s) (1 + {replayed} replay); r1 ops while paused: {r1_ops}",
        decided + replayed
    ));
    let held = decided == 1 && replayed >= 1 && r1_ops == 1;
    say("    operator resumes r1");
    let _: serde_json::Value = api
        .post_json("/api/rollouts/r1/resume", &serde_json::json!({}))
        .await?;
    wait_for(api, fleet, seen, "rollout r1 completed", |s| {
        rollout_status(s, "r1") == Some("completed")
    })
    .await?;
    Ok(held)
}

/// The story's end, shared by every story (steps `first_step` and the two
/// after it): each node's public route, the proof per node, and the
/// handover report. True when every node's proof is verified.
pub(crate) async fn show_outcome(
    api: &ApiClient,
    public_ports: &[u16],
    first_step: u32,
) -> anyhow::Result<bool> {
    say(format!(
        "\n[{first_step}] what users get: each node's public route"
    ));
    for (i, node) in NODES.iter().enumerate() {
        let answer = probe_public(public_ports[i]).await;
        say(format!("    {node}: {answer}"));
    }
    say(format!("\n[{}] proof per node", first_step + 1));
    let mut all_verified = true;
    for node in NODES {
        let proof: proof::NodeProof = api.get(&format!("/api/nodes/{node}/proof")).await?;
        all_verified &= proof.verdict == proof::Verdict::Verified;
        // The summary starts with "<node>: <verdict>".
        say(format!("    {}", proof.summary));
        // Columns sized by their content (the process item is wider than a
        // digest), through the CLI's own table renderer.
        let rows: Vec<Vec<String>> = proof
            .checks
            .iter()
            .map(|check| {
                vec![
                    check.item.clone(),
                    check.expected.as_deref().map_or("-".to_string(), short),
                    check
                        .observed
                        .as_deref()
                        .map_or("(could not read)".to_string(), short),
                    match check.ok {
                        Some(true) => "ok".to_string(),
                        Some(false) => format!("NO ({:?})", check.reason),
                        None => format!("? ({:?})", check.reason),
                    },
                ]
            })
            .collect();
        let table = api::table::table(&["EVIDENCE", "EXPECTED", "OBSERVED", "RESULT"], &rows);
        for line in table.lines() {
            say(format!("        {line}"));
        }
    }
    say(format!(
        "\n[{}] handover report (ops holding a slot or waiting for a person)",
        first_step + 2
    ));
    let open: Vec<api::report::Unresolved> = api.get("/api/unresolved").await?;
    if open.is_empty() {
        say("    nothing unresolved");
    }
    for u in &open {
        say(format!(
            "    {} {} on {}: {} ({}) — missing: {}; owner: {}; check: {}",
            u.rollout,
            u.op,
            u.node,
            u.phase,
            u.since,
            if u.missing_evidence.is_empty() {
                "-".to_string()
            } else {
                u.missing_evidence.join(", ")
            },
            u.owner_or_unowned(),
            u.check_command
        ));
        say(format!("        options: {}", u.options.join(" | ")));
    }
    Ok(all_verified)
}

/// What [`start_fleet`] brought up.
struct Started {
    api: ApiClient,
    api_port: u16,
    public_ports: Vec<u16>,
    /// The next log sequence the narration has not shown.
    seen: u64,
}

/// How many times the demo starts its fleet before giving up. A start
/// fails when a process dies on the way up, e.g. because another program
/// bound one of its ports between the pick and the bind (see `ports`).
pub const FLEET_START_ATTEMPTS_MAX: u32 = 3;

/// Write the configs, start the controller and the agents, and wait until
/// every agent is connected; on a process dying, start again on fresh
/// ports with empty data (nothing was rolled out yet).
async fn start_fleet(
    layout: &mut FleetLayout,
    pki: &protocol::pki::FleetPki,
    token: String,
    scenario: Scenario,
    v2: model::Digest,
    fleet: &mut Fleet,
) -> anyhow::Result<Started> {
    let faults_controller = scenario == Scenario::LostReply;
    let faults_canary = scenario == Scenario::WrongAnswer;
    let exe = std::env::current_exe().context("locating the fleetweft binary")?;
    let agent_exe = exe.with_file_name("fleetweft-agent");
    if !agent_exe.exists() {
        bail!(
            "{} not found: build it with `cargo build --release -p agent` (scripts/demo.sh does)",
            agent_exe.display()
        );
    }
    let dir = layout.dir.clone();
    let dir = dir.as_path();
    let mut attempt = 1;
    loop {
        let quic_port = crate::ports::free_port()?;
        let api_port = crate::ports::free_port()?;
        let public_ports: Vec<u16> = (0..NODES.len())
            .map(|_| crate::ports::free_port())
            .collect::<Result<_, _>>()?;
        *layout = layout_of(dir, quic_port, api_port, &public_ports);
        layout.write_controller_config(pki, faults_controller.then_some(v2))?;
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs)?;
        push_controller(fleet, &exe, dir, &logs, faults_controller)?;
        for (i, node) in NODES.iter().enumerate() {
            let wrong = faults_canary && i == 0;
            let config =
                layout.write_agent_config(pki, node, public_ports[i], wrong.then_some(v2))?;
            let mut args = vec!["--config".to_string(), config.display().to_string()];
            if wrong {
                args.push("--allow-fault-injection".into());
            }
            fleet.push(node, &agent_exe, &args, logs.join(format!("{node}.log")))?;
        }
        let api = ApiClient::new(format!("http://127.0.0.1:{api_port}"), Some(token.clone()));
        let mut seen = 0u64;
        let up = wait_for(&api, fleet, &mut seen, "every agent connected", |s| {
            s.nodes.iter().all(|n| n.connected)
        })
        .await;
        match up {
            Ok(()) => {
                return Ok(Started {
                    api,
                    api_port,
                    public_ports,
                    seen,
                })
            }
            Err(e) if attempt < FLEET_START_ATTEMPTS_MAX => {
                say(format!(
                    "    the fleet did not come up (attempt {attempt} of {FLEET_START_ATTEMPTS_MAX}): {e:#}"
                ));
                fleet.stop().await;
                let kept = keep_attempt_logs(dir, &logs, attempt)?;
                say(format!(
                    "    starting again on fresh ports (logs of that attempt in {})",
                    kept.display()
                ));
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Start the controller of an attempt, with fault injection when the
/// scenario's faults need it.
fn push_controller(
    fleet: &mut Fleet,
    exe: &Path,
    dir: &Path,
    logs: &Path,
    faults_controller: bool,
) -> anyhow::Result<()> {
    let mut args = vec![
        "controller".to_string(),
        "--config".into(),
        dir.join("controller.toml").display().to_string(),
    ];
    if faults_controller {
        args.push("--allow-fault-injection".into());
    }
    fleet.push("controller", exe, &args, logs.join("controller.log"))
}

/// After a failed start: keep the attempt's logs aside, start from empty
/// data. Returns where the logs went.
fn keep_attempt_logs(dir: &Path, logs: &Path, attempt: u32) -> anyhow::Result<PathBuf> {
    // Keep the failed attempt's logs; start from empty data.
    let kept = dir.join(format!("logs-attempt-{attempt}"));
    std::fs::rename(logs, &kept)
        .with_context(|| format!("keeping the logs as {}", kept.display()))?;
    remove_if_present(&dir.join("controller-data"))?;
    for node in NODES {
        remove_if_present(&dir.join(format!("{node}-data")))?;
    }
    Ok(kept)
}

fn remove_if_present(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", path.display())),
    }
}

pub(crate) fn rollout_status<'a>(status: &'a FleetView, id: &str) -> Option<&'a str> {
    status
        .rollouts
        .iter()
        .find(|r| r.id == id)
        .map(|r| r.status.as_str())
}

/// A digest shortened for tables; other text unchanged.
pub(crate) fn short(text: &str) -> String {
    if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        text[..12].to_string()
    } else {
        text.to_string()
    }
}

pub(crate) async fn start_rollout(api: &ApiClient, release: model::Digest) -> anyhow::Result<()> {
    let _: serde_json::Value = api
        .post_json(
            "/api/rollouts",
            &serde_json::json!({
                "release": release.to_hex(),
                "canary": NODES[0],
                "followers": [NODES[1], NODES[2]],
                "slots": 1,
            }),
        )
        .await?;
    Ok(())
}

/// Poll the controller, narrating new events, until `done` holds.
pub(crate) async fn wait_for(
    api: &ApiClient,
    fleet: &mut Fleet,
    seen: &mut u64,
    what: &str,
    done: impl Fn(&FleetView) -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_millis(STEP_TIMEOUT_MS);
    loop {
        print_events_from(api, seen).await;
        if let Ok(status) = api.fleet_view().await {
            if done(&status) {
                // The events that led to what the status shows were logged
                // before it was read: print them too, in this step.
                print_events_from(api, seen).await;
                return Ok(());
            }
        }
        fleet
            .check_alive()
            .with_context(|| format!("while waiting for: {what}"))?;
        if Instant::now() > deadline {
            bail!(
                "timed out after {STEP_TIMEOUT_MS} ms waiting for: {what}\n{}",
                fleet.log_tails(TIMEOUT_LOG_LINES_MAX)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Print the events logged from `seen` on (hellos left out), moving `seen`.
pub(crate) async fn print_events_from(api: &ApiClient, seen: &mut u64) {
    let path = format!("/api/events?from={seen}");
    if let Ok(events) = api.get::<Vec<EventDto>>(&path).await {
        for e in events {
            if !matches!(e.event, model::controller::Event::NodeHello { .. }) {
                say(format!("    #{:<3} {}", e.sequence, e.text));
            }
            *seen = e.sequence + 1;
        }
    }
}

pub(crate) async fn probe_public(port: u16) -> String {
    let client = ApiClient::new(format!("http://127.0.0.1:{port}"), None);
    // The route answers text, not JSON: read it through a raw probe.
    match raw_get(port, "/hello").await {
        Some((status, release, body)) => format!(
            "{status} {body:?} from release {}",
            release.map_or("?".into(), |r| r[..12].to_string())
        ),
        None => {
            drop(client);
            "no answer".into()
        }
    }
}

/// The sample app as release `version` (its body says `hello from
/// <version>`), signed: the bundle bytes. The demo, the fault tests and the
/// scenarios all ship this.
pub fn sign_hello(
    signing: &ed25519_dalek::SigningKey,
    version: &str,
) -> Result<Vec<u8>, protocol::bundle::BundleError> {
    // Baked into the file as well as the manifest, so each release's app
    // file differs (scenarios swap app files behind the agent's back).
    let app = HELLO_APP.replace(BAKED_VERSION_LINE, &format!("BAKED_VERSION = {version:?}"));
    bundle::sign(
        signing,
        app.as_bytes(),
        ManifestFields {
            name: "hello".into(),
            version: version.into(),
            app_file_name: "app.py".into(),
            run: vec!["python3".into(), "app.py".into()],
            probe: ProbeSpec {
                path: "/hello".into(),
                expect_status: 200,
                expect_body: format!("hello from {version}"),
                expect_json: None,
            },
        },
    )
}

/// GET `path` on a node's public route: status, `X-Fleetweft-Release`, body.
pub async fn raw_get(port: u16, path: &str) -> Option<(u16, Option<String>, String)> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    api::client::get_route(addr, path)
        .await
        .map(|a| (a.status, a.identity, a.body))
}

/// Start `exe` with `args`, stdout and stderr to `log`, killed on drop,
/// and killed by the kernel when its parent dies (where util-linux's
/// setpriv is installed, as on every Debian system): a SIGTERMed or
/// SIGKILLed `fleetweft-fleetsim` or test runs no drop, and left its
/// controller running before this. (The kernel's parent-death signal
/// follows the thread that forked on some kernels: start children from a
/// thread that lives as long as they should, a tokio worker or the main
/// thread, never a `spawn_blocking` thread, which ends when idle.)
pub fn spawn(exe: &Path, args: &[String], log: &Path) -> anyhow::Result<Child> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let err = out.try_clone()?;
    // Through util-linux's `setpriv --pdeathsig KILL`, which execs `exe`
    // (same pid) with the parent-death signal set (this crate forbids the
    // unsafe `pre_exec` that would set it directly).
    let (program, all_args) = ha::tied(exe, args);
    Command::new(program)
        .args(all_args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))
}

/// The demo fleet's ([`NODES`]) layout in `dir` on the given ports.
pub fn layout_of(dir: &Path, quic_port: u16, api_port: u16, public_ports: &[u16]) -> FleetLayout {
    FleetLayout {
        dir: dir.to_path_buf(),
        nodes: NODES.iter().map(|s| s.to_string()).collect(),
        quic_port,
        api_port,
        public_ports: public_ports.to_vec(),
    }
}

/// Write `<dir>/controller.toml` for the demo fleet ([`NODES`]), through
/// the quickstart's builder.
pub fn write_controller_config(
    dir: &Path,
    pki: &protocol::pki::FleetPki,
    quic_port: u16,
    api_port: u16,
    public_ports: &[u16],
    drop_reply_for: Option<model::Digest>,
) -> anyhow::Result<()> {
    layout_of(dir, quic_port, api_port, public_ports)
        .write_controller_config(pki, drop_reply_for)?;
    Ok(())
}

/// Write `<dir>/agent-<node>.toml` and return its path (through the
/// quickstart's builder).
pub fn write_agent_config(
    dir: &Path,
    pki: &protocol::pki::FleetPki,
    node: &str,
    quic_port: u16,
    public_port: u16,
    answer_wrongly: Option<model::Digest>,
) -> anyhow::Result<PathBuf> {
    Ok(layout_of(dir, quic_port, 0, &[]).write_agent_config(
        pki,
        node,
        public_port,
        answer_wrongly,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The child process of the test below: starts `sleep` with [`spawn`],
    /// prints its pid and exits at once, so no drop runs (as when the
    /// parent is SIGKILLed).
    #[test]
    #[ignore = "run as a child process by a_spawned_child_dies_with_its_parent"]
    fn spawn_and_exit_without_drop() {
        let Some(log) = std::env::var_os("FLEETWEFT_SPAWN_LOG") else {
            panic!("run by a_spawned_child_dies_with_its_parent only")
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let _guard = runtime.enter();
        let sleep = spawn(
            Path::new("/bin/sleep"),
            &["30".to_string()],
            Path::new(&log),
        );
        let pid = sleep.expect("spawn").id().expect("pid");
        println!("PID {pid}");
        std::process::exit(0);
    }

    /// A child started by [`spawn`] dies with its parent, though nothing
    /// dropped its handle: a SIGTERMed fleetsim leaves no controller.
    #[test]
    fn a_spawned_child_dies_with_its_parent() {
        let dir = tempfile::tempdir().expect("temp dir");
        let parent = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args(["--ignored", "--exact", "tests::spawn_and_exit_without_drop"])
            .args(["--nocapture", "--test-threads", "1"])
            .env("FLEETWEFT_SPAWN_LOG", dir.path().join("sleep.log"))
            .output()
            .expect("run the parent");
        let stdout = String::from_utf8_lossy(&parent.stdout);
        let pid: u32 = stdout
            .lines()
            // The harness prints the test's name on the same line.
            .find_map(|l| l.split("PID ").nth(1))
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no pid from the parent: {stdout}"));
        let gone = |pid: u32| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Gone, or killed and not reaped yet.
            stat.is_empty() || stat.split_whitespace().nth(2) == Some("Z")
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !gone(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(gone(pid), "sleep {pid} outlived its parent");
    }

    /// The baked version reaches the app file: without it v1's and v2's
    /// files would be the same and the scenarios that swap them prove
    /// nothing.
    #[test]
    fn sign_hello_bakes_the_version_into_the_app() {
        assert_eq!(HELLO_APP.matches(BAKED_VERSION_LINE).count(), 1);
        let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
        let bytes = sign_hello(&key, "v2").expect("signs");
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("BAKED_VERSION = \"v2\""));
    }

    /// A process that died is named, with the end of its log, instead of
    /// the demo waiting out a whole step for something that cannot happen.
    #[test]
    fn a_dead_child_is_named_with_its_log() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let dir = tempfile::tempdir().expect("temp dir");
            let mut fleet = Fleet {
                children: Vec::new(),
            };
            let sh = Path::new("/bin/sh");
            let alive = ["-c".to_string(), "sleep 30".to_string()];
            fleet
                .push("sleeper", sh, &alive, dir.path().join("sleeper.log"))
                .expect("spawn");
            assert!(fleet.check_alive().is_ok(), "a running child is alive");
            let dies = [
                "-c".to_string(),
                "echo 'binding the public route: Address in use'; exit 3".to_string(),
            ];
            fleet
                .push("node-b", sh, &dies, dir.path().join("node-b.log"))
                .expect("spawn");
            let deadline = Instant::now() + Duration::from_secs(10);
            let error = loop {
                match fleet.check_alive() {
                    Err(e) => break format!("{e:#}"),
                    Ok(()) if Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(20)).await
                    }
                    Ok(()) => panic!("the dead child was never noticed"),
                }
            };
            assert!(error.contains("node-b exited"), "{error}");
            assert!(error.contains("exit status: 3"), "{error}");
            assert!(error.contains("Address in use"), "{error}");
            let tails = fleet.log_tails(TIMEOUT_LOG_LINES_MAX);
            assert!(tails.contains("--- sleeper"), "{tails}");
            assert_eq!(strip_ansi("\u{1b}[2mtime\u{1b}[0m INFO"), "time INFO");
            fleet.stop().await;
        });
    }
}
