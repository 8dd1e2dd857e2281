//! Controller high availability on etcd (issue #14), with real processes on
//! loopback and the test command's 3-member etcd cluster: two controllers
//! on one log prefix, three agents that list both controllers.
//!
//! `a_standby_takes_over_and_a_deposed_leader_changes_nothing`:
//! 1. The first controller leads; the second is a hot standby (it follows
//!    the log, serves reads, answers `Fleetweft-Role: standby`).
//! 2. The leader is SIGKILLed right after the canary's commit decision is
//!    stored: the standby is elected once the lease expires, reads to the
//!    tail, the agents move to it, the stored decision is replayed (never
//!    re-decided) and the rollout completes.
//! 3. The new leader is frozen (SIGSTOP) past its lease while the restarted
//!    first controller campaigns: it is elected; the frozen one, thawed, is
//!    deposed and exits with `EXIT_DEPOSED` without appending anything.
//!
//! `a_hot_standby_follows_redirects_and_takes_over` (issue #14 items 3-4):
//! the standby's `/api/status` says `standby` with a log sequence that
//! catches up with the leader's; a write to it is a 503 naming the leader;
//! agents pointed first at the standby end on the leader; the CLI given
//! the standby's URL first finds the leader for writes; after the leader's
//! SIGKILL the standby takes over from its followed state (only the tail
//! read) and the rollout completes on it.
//!
//! Asserted from the log in etcd: one grant per node per rollout, one
//! decision per op, every replay equal to it, and the chain verifies.
//! Skipped with a loud notice only when etcd cannot be installed (not root).

use crate::binaries::agent_binary;
use crate::etcd_harness;
use crate::fleet::loopback::Loopback;

use api::client::{ApiClient, FleetView};
use controller::daemon::ha::EXIT_DEPOSED;
use demo::NODES;
use eventlog::{EtcdConfig, EventLog};
use model::controller::Event;
use protocol::bundle;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;
use std::time::{Duration, Instant};
use tokio::process::Child;

/// The lease TTL both controllers run with: a takeover waits about this.
const LEASE_TTL_MS: u64 = 2_000;
/// How long one wait may take.
const STEP: Duration = Duration::from_secs(60);

/// One controller's config and the ports it serves on.
struct ControllerSpec {
    name: &'static str,
    /// Runs with its fault switch (drops the first commit reply).
    faults: bool,
    config: PathBuf,
    api: ApiClient,
    data: PathBuf,
}

/// Write `controller-NAME.toml`: the demo's config, its own data
/// directory and ports, and `[storage]` on etcd under `prefix`.
#[allow(clippy::too_many_arguments)]
fn controller_spec(
    dir: &Path,
    pki: &protocol::pki::FleetPki,
    name: &'static str,
    ports: (u16, u16),
    public_ports: &[u16],
    endpoints: &[String],
    prefix: &str,
    token: &str,
    drop_reply_for: Option<model::Digest>,
) -> ControllerSpec {
    demo::write_controller_config(dir, pki, ports.0, ports.1, public_ports, drop_reply_for)
        .expect("controller config");
    let text = std::fs::read_to_string(dir.join("controller.toml")).expect("read config");
    let data = dir.join(format!("controller-{name}-data"));
    let list: Vec<String> = endpoints.iter().map(|e| format!("{e:?}")).collect();
    let text = text.replace(
        &format!("{:?}", dir.join("controller-data").display().to_string()),
        &format!("{:?}", data.display().to_string()),
    ) + &format!(
        // Snapshots every 64 events (issue #26): the leader writes them on
        // etcd (fenced chunks), and a standby or a takeover starts from one.
        "\n[storage]\nbackend = \"etcd\"\nendpoints = [{}]\nprefix = {prefix:?}\nlease_ttl_ms = {LEASE_TTL_MS}\n\n[log]\nsnapshot_every_events = 64\n",
        list.join(", ")
    );
    let config = dir.join(format!("controller-{name}.toml"));
    std::fs::write(&config, text).expect("write config");
    let api = ApiClient::new(
        format!("http://127.0.0.1:{}", ports.1),
        Some(token.to_string()),
    );
    ControllerSpec {
        name,
        faults: drop_reply_for.is_some(),
        config,
        api,
        data,
    }
}

fn start_controller(dir: &Path, spec: &ControllerSpec, run: u32) -> Child {
    let exe = Path::new(env!("CARGO_BIN_EXE_fleetweft"));
    let mut args = vec![
        "controller".to_string(),
        "--config".to_string(),
        spec.config.display().to_string(),
    ];
    if spec.faults {
        args.push("--allow-fault-injection".to_string());
    }
    let log = dir.join(format!("logs/controller-{}-{run}.log", spec.name));
    demo::spawn(exe, &args, &log).expect("start controller")
}

async fn wait_view(
    api: &ApiClient,
    what: &str,
    dir: &Path,
    done: impl Fn(&FleetView) -> bool,
) -> FleetView {
    let deadline = Instant::now() + STEP;
    loop {
        if let Ok(view) = api.fleet_view().await {
            if done(&view) {
                return view;
            }
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for: {what} (logs in {})",
            dir.join("logs").display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `/api/status` as JSON, with the role headers of the answer.
async fn status(api: &ApiClient) -> Option<(serde_json::Value, Headers)> {
    let (headers, body) = raw_http(api.base(), "GET", "/api/status", None).await?;
    Some((serde_json::from_str(&body).ok()?, headers))
}

/// Wait until the controller behind `api` answers with `role`.
async fn wait_role(api: &ApiClient, what: &str, dir: &Path, role: &str) -> serde_json::Value {
    let deadline = Instant::now() + STEP;
    loop {
        if let Some((status, headers)) = status(api).await {
            if status["role"] == role {
                assert_eq!(
                    headers.get("fleetweft-role").map(String::as_str),
                    Some(role)
                );
                return status;
            }
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for: {what} (logs in {})",
            dir.join("logs").display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Response headers, lower-cased names.
type Headers = BTreeMap<String, String>;

/// One HTTP/1.1 request on a fresh connection (`Connection: close`), read
/// to the end: the headers and the body. `None` if nothing answered.
async fn raw_http(
    base: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> Option<(Headers, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(host).await.ok()?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let body = if method == "GET" { "" } else { "{}" };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    tokio::time::timeout(STEP, stream.read_to_end(&mut answer))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let mut lines = head.lines();
    let status = lines.next()?.split_whitespace().nth(1)?.to_string();
    let mut headers: Headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    headers.insert(":status".into(), status);
    // axum answers JSON with a Content-Length, never chunked here.
    Some((headers, body.to_string()))
}

/// Every event of the log in etcd, after verifying its chain.
fn etcd_events(endpoints: &[String], prefix: &str) -> Vec<(u64, Event)> {
    let config = EtcdConfig::new(endpoints.to_vec(), prefix);
    let storage = logtools::copy::open_etcd_read_only(&config).expect("open etcd log");
    let (_log, events) = EventLog::<Event, _>::with_storage(storage).expect("a sound log");
    events
}

/// One grant per node per rollout, one decision per op, replays equal it.
fn assert_log_sound(events: &[(u64, Event)]) -> (usize, usize) {
    let mut grants = BTreeMap::new();
    let mut decisions = BTreeMap::new();
    let mut replays = 0;
    for (_, event) in events {
        match event {
            Event::OpGranted { rollout, node, .. } => {
                *grants.entry((*rollout, *node)).or_insert(0) += 1;
            }
            Event::CommitDecided { op, decision } => {
                assert!(
                    decisions.insert(*op, *decision).is_none(),
                    "{op} decided twice"
                );
            }
            Event::CommitReplayed { op, decision } => {
                assert_eq!(
                    decisions.get(op),
                    Some(decision),
                    "{op} replayed another decision"
                );
                replays += 1;
            }
            _ => {}
        }
    }
    assert!(
        grants.values().all(|n| *n == 1),
        "a node granted twice: {grants:?}"
    );
    (decisions.len(), replays)
}

fn copy_bundles(from: &Path, to: &Path) {
    let (from, to) = (from.join("bundles"), to.join("bundles"));
    std::fs::create_dir_all(&to).expect("bundles dir");
    for entry in std::fs::read_dir(&from).expect("read bundles") {
        let entry = entry.expect("bundle entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy bundle");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_and_a_deposed_leader_changes_nothing() {
    let Some(endpoints) = etcd_harness::shared_endpoints() else {
        return;
    };
    let prefix = etcd_harness::prefix("ha-takeover");
    let tmp = tempfile::tempdir().expect("temp dir");
    let f = fleet(tmp.path());
    let Fleet {
        dir,
        pki,
        token,
        signing,
        public_ports,
        ..
    } = &f;
    let dir = dir.clone();
    let port = || demo::ports::free_port().expect("free port");
    let (a_ports, b_ports) = ((port(), port()), (port(), port()));
    let bytes = demo::sign_hello(signing, "v1").expect("sign v1");
    let release = bundle::bundle_digest(&bytes);
    let spec = |name, ports, drop| {
        controller_spec(
            &dir,
            pki,
            name,
            ports,
            public_ports,
            &endpoints,
            &prefix,
            token,
            drop,
        )
    };
    // a loses the reply to the canary's commit request: the decision is
    // stored, never delivered, and a dies before any retry reaches it.
    let (a, b) = (spec("a", a_ports, Some(release)), spec("b", b_ports, None));

    // 1. a leads; b waits in the campaign, serving nothing.
    let mut a_child = start_controller(&dir, &a, 1);
    wait_view(&a.api, "a's API answers", &dir, |_| true).await;
    let mut b_child = start_controller(&dir, &b, 1);
    let agents = start_agents(&f, &agent_binary(), [a_ports.0, b_ports.0]);
    wait_view(&a.api, "every agent connected to a", &dir, |v| {
        v.nodes.len() == NODES.len() && v.nodes.iter().all(|n| n.connected)
    })
    .await;
    wait_role(&b.api, "b answers as a hot standby", &dir, "standby").await;
    let _: serde_json::Value = a
        .api
        .post_bytes("/api/bundles", bytes)
        .await
        .expect("upload");
    // Bundles live in each controller's data directory: the operator
    // uploads to every controller host (docs/operations.md, HA).
    copy_bundles(&a.data, &b.data);

    // 2. SIGKILL a right after the canary's decision is stored.
    let _: serde_json::Value = a
        .api
        .post_json(
            "/api/rollouts",
            &serde_json::json!({
                "release": release.to_hex(),
                "canary": "node-a",
                "followers": ["node-b", "node-c"],
                "slots": 1,
            }),
        )
        .await
        .expect("start the rollout");
    let deadline = Instant::now() + STEP;
    while !etcd_events(&endpoints, &prefix)
        .iter()
        .any(|(_, e)| matches!(e, Event::CommitDecided { .. }))
    {
        assert!(Instant::now() < deadline, "no commit decision on a");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The fault switch dropped the reply; the agent's retry comes after
    // retry_ms (3 s): a dies before it.
    a_child.start_kill().expect("SIGKILL a");
    let _ = a_child.wait().await;
    let killed_at = Instant::now();
    wait_role(&b.api, "b elected", &dir, "leader").await;
    let takeover_ms = killed_at.elapsed().as_millis();
    let view = wait_view(&b.api, "the rollout completes on b", &dir, |v| {
        v.rollouts
            .iter()
            .any(|r| r.id == "r0" && r.status == "completed")
    })
    .await;
    assert!(view.nodes.iter().all(|n| n.connected), "agents moved to b");
    let (decided, replays) = assert_log_sound(&etcd_events(&endpoints, &prefix));
    assert_eq!(decided, 3, "one decision per op of three nodes");
    assert!(
        replays >= 1,
        "b replayed the decision a stored, never re-decided"
    );
    eprintln!(
        "takeover after SIGKILL: b's API answered {takeover_ms} ms later; {replays} replay(s)"
    );

    // 3. Freeze b past its lease; a, restarted, is elected; b, thawed, is
    // deposed and exits without appending.
    let before = etcd_events(&endpoints, &prefix).len();
    let b_pid = b_child.id().expect("b's pid").to_string();
    let signal = |sig: &str| {
        let ok = StdCommand::new("kill").args([sig, &b_pid]).status();
        assert!(ok.expect("kill").success(), "kill {sig} b");
    };
    signal("-STOP");
    let mut a_child = start_controller(&dir, &a, 2);
    wait_role(&a.api, "a elected again", &dir, "leader").await;
    let after_election = etcd_events(&endpoints, &prefix).len();
    signal("-CONT");
    let status = tokio::time::timeout(STEP, b_child.wait())
        .await
        .expect("the deposed leader stops")
        .expect("b's exit status");
    assert_eq!(status.code(), Some(EXIT_DEPOSED), "b exits as deposed");
    let b_log = std::fs::read_to_string(dir.join("logs/controller-b-1.log")).expect("b's log");
    assert!(b_log.contains("deposed"), "{b_log}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let events = etcd_events(&endpoints, &prefix);
    assert_log_sound(&events);
    assert!(after_election >= before, "the log only grows");
    wait_view(&a.api, "agents back on a", &dir, |v| {
        v.nodes.len() == NODES.len() && v.nodes.iter().all(|n| n.connected)
    })
    .await;
    a_child.start_kill().expect("stop a");
    let _ = a_child.wait().await;
    drop(agents);
}

/// The fleet's files for one HA test (the test kit's loopback layout,
/// `fleet::loopback`: PKI, token, signing key, public ports); each test
/// writes its two controllers' configs on it.
type Fleet = Loopback;

fn fleet(dir: &Path) -> Fleet {
    Loopback::lay_out(dir.to_path_buf(), "")
}

/// Start one agent per node, each listing `addrs` in that order.
fn start_agents(f: &Fleet, exe: &Path, addrs: [u16; 2]) -> Vec<Child> {
    let mut agents = Vec::new();
    for (i, node) in NODES.iter().enumerate() {
        let config =
            demo::write_agent_config(&f.dir, &f.pki, node, addrs[0], f.public_ports[i], None)
                .expect("agent config");
        let text = std::fs::read_to_string(&config).expect("read agent config");
        let text = text.replace(
            &format!("addr = \"127.0.0.1:{}\"", addrs[0]),
            &format!(
                "addrs = [\"127.0.0.1:{}\", \"127.0.0.1:{}\"]",
                addrs[0], addrs[1]
            ),
        )
            + "\n[timing]\nretry_ms = 3000\nbackoff_base_ms = 100\nbackoff_max_ms = 1000\n";
        std::fs::write(&config, text).expect("write agent config");
        let log = f.dir.join(format!("logs/{node}.log"));
        let args = ["--config".to_string(), config.display().to_string()];
        agents.push(demo::spawn(exe, &args, &log).expect("start agent"));
    }
    agents
}

/// The last sequence of the log in etcd.
fn etcd_last(endpoints: &[String], prefix: &str) -> Option<u64> {
    etcd_events(endpoints, prefix).last().map(|(s, _)| *s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_standby_follows_redirects_and_takes_over() {
    let Some(endpoints) = etcd_harness::shared_endpoints() else {
        return;
    };
    let started = Instant::now();
    let prefix = etcd_harness::prefix("ha-standby");
    let tmp = tempfile::tempdir().expect("temp dir");
    let f = fleet(tmp.path());
    let dir = f.dir.clone();
    let port = || demo::ports::free_port().expect("free port");
    let (a_ports, b_ports) = ((port(), port()), (port(), port()));
    let bytes = demo::sign_hello(&f.signing, "v1").expect("sign v1");
    let release = bundle::bundle_digest(&bytes);
    let spec = |name, ports, drop| {
        let s = (&f.pki, &f.public_ports, &endpoints, &prefix, &f.token);
        controller_spec(&dir, s.0, name, ports, s.1, s.2, s.3, s.4, drop)
    };
    // a drops the canary's commit reply: the agent retries after 3 s, and
    // a is killed before that, with the decision stored and unsent.
    let (a, b) = (spec("a", a_ports, Some(release)), spec("b", b_ports, None));
    let mut a_child = start_controller(&dir, &a, 1);
    wait_role(&a.api, "a leads", &dir, "leader").await;
    let mut b_child = start_controller(&dir, &b, 1);
    // 1. b follows: standby, naming a as the leader, sequence caught up.
    let deadline = Instant::now() + STEP;
    let standby = loop {
        let s = wait_role(&b.api, "b is a hot standby", &dir, "standby").await;
        if s["leader"] == a.api.base() {
            break s;
        }
        assert!(Instant::now() < deadline, "b never named a: {s}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(standby["log_sequence"], standby["last_sequence"]);

    // 2. Agents list the standby first: each is told "not the leader" and
    // ends on a.
    let agents = start_agents(&f, &agent_binary(), [b_ports.0, a_ports.0]);
    wait_view(&a.api, "every agent reached the leader via b", &dir, |v| {
        v.nodes.len() == NODES.len() && v.nodes.iter().all(|n| n.connected)
    })
    .await;
    // Each agent dials both at once (issue #26 item 6): it may reach a
    // first, or be told "not the leader" by b; b never serves one.
    let b_log = std::fs::read_to_string(dir.join("logs/controller-b-1.log")).expect("b's log");
    let mut redirected = 0;
    for node in NODES {
        assert!(
            !b_log.contains(&format!("{node} connected")),
            "the standby served {node}:\n{b_log}"
        );
        let log = std::fs::read_to_string(dir.join(format!("logs/{node}.log"))).expect("agent log");
        redirected += usize::from(log.contains("not the leader"));
    }
    eprintln!(
        "standby test: {redirected} of {} agents redirected by b",
        NODES.len()
    );

    // 3. A write to the standby: 503 in the API's error shape, naming a.
    let (headers, body) = raw_http(b.api.base(), "POST", "/api/rollouts", Some(&f.token))
        .await
        .expect("b answers");
    assert_eq!(headers[":status"], "503", "{body}");
    assert_eq!(headers["fleetweft-role"], "standby");
    assert_eq!(
        headers.get("fleetweft-leader"),
        Some(&a.api.base().to_string())
    );
    assert!(
        headers.contains_key("fleetweft-log-sequence"),
        "{headers:?}"
    );
    let error: serde_json::Value = serde_json::from_str(&body).expect("JSON error");
    let message = error["error"].as_str().expect("the error shape");
    assert!(message.contains(a.api.base()), "{message}");
    let (headers, _) = raw_http(a.api.base(), "GET", "/api/status", None)
        .await
        .expect("a answers");
    assert_eq!(headers["fleetweft-role"], "leader");

    // 4. The CLI given b first (and a dead URL): the writes of `rollout
    // start` follow b's 503 to a; a read goes to the first that answers.
    let bundle_file = dir.join("v1.bundle");
    std::fs::write(&bundle_file, &bytes).expect("bundle file");
    let dead = format!("http://127.0.0.1:{}", port());
    let controllers = format!("{dead},{},{}", b.api.base(), a.api.base());
    let cli = |args: &[&str]| {
        let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        all.extend(["--controller".into(), controllers.clone()]);
        all.extend(["--pki".into(), dir.join("pki").display().to_string()]);
        StdCommand::new(env!("CARGO_BIN_EXE_fleetweft"))
            .args(&all)
            .output()
            .expect("run fleetweft")
    };
    let out = cli(&[
        "rollout",
        "start",
        "--bundle",
        &bundle_file.display().to_string(),
        "--canary",
        "node-a",
        "--followers",
        "node-b,node-c",
        "--slots",
        "1",
    ]);
    assert!(
        out.status.success(),
        "rollout start via b failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    copy_bundles(&a.data, &b.data);
    let out = cli(&["status", "--json"]);
    let read: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status --json");
    assert_eq!(
        read["role"], "standby",
        "the read went to b, the first that answers"
    );

    // 5. The canary's decision is stored (its reply dropped); b catches up
    // with the leader's log, then a is killed.
    let deadline = Instant::now() + STEP;
    while !etcd_events(&endpoints, &prefix)
        .iter()
        .any(|(_, e)| matches!(e, Event::CommitDecided { .. }))
    {
        assert!(Instant::now() < deadline, "no commit decision on a");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let leader_end = etcd_last(&endpoints, &prefix).expect("a non-empty log");
    let deadline = Instant::now() + STEP;
    loop {
        let (s, headers) = status(&b.api).await.expect("b answers");
        let seen = s["log_sequence"].as_u64();
        if seen >= Some(leader_end) {
            // The header is read after the body is made: never behind it.
            let header: u64 = headers["fleetweft-log-sequence"]
                .parse()
                .expect("a sequence");
            assert!(
                Some(header) >= seen,
                "header {header} behind the body {seen:?}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "b stuck at {seen:?} < {leader_end}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    a_child.start_kill().expect("SIGKILL a");
    let _ = a_child.wait().await;
    let killed = Instant::now();
    let end_at_kill = etcd_last(&endpoints, &prefix).expect("log");

    // 6. b takes over from its followed state, and finishes the rollout.
    wait_role(&b.api, "b takes over", &dir, "leader").await;
    let takeover = killed.elapsed();
    assert!(
        takeover < Duration::from_millis(LEASE_TTL_MS + 4_000),
        "takeover took {takeover:?}"
    );
    // The agents follow within about a second (issue #26 item 6): before,
    // each noticed its dead leader only by QUIC's 10 s idle timeout.
    wait_view(&b.api, "every agent back on b", &dir, |v| {
        v.nodes.len() == NODES.len() && v.nodes.iter().all(|n| n.connected)
    })
    .await;
    let agents_back = killed.elapsed();
    assert!(
        agents_back < Duration::from_millis(LEASE_TTL_MS + 4_000),
        "the agents were back on b {agents_back:?} after the kill"
    );
    let view = wait_view(&b.api, "the rollout completes on b", &dir, |v| {
        v.rollouts
            .iter()
            .any(|r| r.id == "r0" && r.status == "completed")
    })
    .await;
    assert!(view.nodes.iter().all(|n| n.connected), "agents moved to b");
    let b_log = std::fs::read_to_string(dir.join("logs/controller-b-1.log")).expect("b's log");
    let line = b_log
        .lines()
        .find(|l| l.contains("took over as leader from the followed state"))
        .expect("b logged its takeover");
    let tail: u64 = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("tail="))
        .and_then(|n| n.parse().ok())
        .expect("tail= in the takeover line");
    assert!(
        tail <= end_at_kill - leader_end,
        "b read {tail} events at takeover: more than appended after it caught up ({line})"
    );
    let (decided, replays) = assert_log_sound(&etcd_events(&endpoints, &prefix));
    assert_eq!(decided, 3, "one decision per op");
    assert!(replays >= 1, "b replayed a's stored decision");
    eprintln!(
        "standby test: takeover {} ms after SIGKILL, agents back {} ms, {tail} tail event(s), whole test {} s",
        takeover.as_millis(),
        agents_back.as_millis(),
        started.elapsed().as_secs()
    );
    b_child.start_kill().expect("stop b");
    let _ = b_child.wait().await;
    drop(agents);
}
