//! The fleet roster on a real controller process: `[[nodes]]` is only a
//! bootstrap (a reordered or shortened list changes nothing enrolled),
//! nodes are enrolled, labeled and retired over the API and the CLI with
//! typed refusals, `select` resolves once into the plan, and a real agent
//! of a node enrolled over the API connects with a certificate from
//! `fleetweft pki issue` while a retired node's agent is refused.

use crate::api_harness;
use crate::binaries::agent_binary;

use api::client::FleetView;
use api_harness::{Controller, NODES};
use controller::daemon::api::{EventDto, NodeDto, OpDto, RolloutDto, StatusDto};
use model::controller::Event;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one wait may take.
const STEP: Duration = Duration::from_secs(60);

fn decode<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("dto json")
}

/// The summary, every node (all pages) and every rollout with its
/// followers (`/api/rollouts/{id}`).
fn status(ctl: &Controller) -> FleetView {
    let summary: StatusDto = decode(ctl.status());
    let listed: Vec<RolloutDto> = decode(ctl.get_json("/api/rollouts"));
    let rollouts = listed
        .iter()
        .map(|r| decode(ctl.get_json(&format!("/api/rollouts/{}", r.id))))
        .collect();
    let nodes: Vec<NodeDto> = ctl
        .all_pages("/api/nodes")
        .into_iter()
        .map(decode)
        .collect();
    let ops: Vec<OpDto> = ctl.all_pages("/api/ops").into_iter().map(decode).collect();
    FleetView::new(summary, rollouts, nodes, ops)
}

fn events(ctl: &Controller) -> Vec<EventDto> {
    let (code, body) = ctl.http("GET", "/api/events?from=0", None, b"");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).expect("events json")
}

fn names(ctl: &Controller) -> Vec<String> {
    status(ctl).nodes.into_iter().map(|n| n.name).collect()
}

fn post(ctl: &Controller, path: &str, body: serde_json::Value) -> (u16, String) {
    ctl.post_json(path, &body)
}

/// `fleetweft ARGS --controller URL --token-file FILE`: exit code and
/// output.
fn cli(ctl: &Controller, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fleetweft"))
        .args(args)
        .args(["--controller", &ctl.url(), "--token-file"])
        .arg(&ctl.token_file)
        .output()
        .expect("run fleetweft");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

fn enrolled_count(ctl: &Controller) -> usize {
    events(ctl)
        .iter()
        .filter(|e| matches!(e.event, Event::NodeEnrolled { .. }))
        .count()
}

#[test]
fn the_config_is_a_bootstrap_and_a_reordered_or_shortened_list_changes_nothing() {
    let mut ctl = Controller::start();
    assert_eq!(names(&ctl), NODES);
    assert_eq!(enrolled_count(&ctl), NODES.len());
    // Reverse the [[nodes]] list and drop node-b, then restart.
    let config = ctl._dir.path().join("controller.toml");
    let text = std::fs::read_to_string(&config).expect("config");
    let (head, nodes) = text.split_once("\n[[nodes]]").expect("a [[nodes]] entry");
    let mut entries: Vec<String> = format!("\n[[nodes]]{nodes}")
        .split("\n[[nodes]]")
        .filter(|e| !e.trim().is_empty() && !e.contains("\"node-b\""))
        .map(|e| format!("\n[[nodes]]{e}"))
        .collect();
    entries.reverse();
    std::fs::write(&config, format!("{head}{}", entries.concat())).expect("rewrite");
    ctl.restart();
    assert_eq!(
        names(&ctl),
        NODES,
        "ids and names kept their enrollment order"
    );
    assert_eq!(enrolled_count(&ctl), NODES.len(), "nothing enrolled again");
    // A new entry anywhere in the list is enrolled next, after the others.
    let text = std::fs::read_to_string(&config).expect("config");
    let (head, nodes) = text.split_once("\n[[nodes]]").expect("entries");
    let new =
        "\n[[nodes]]\nname = \"node-z\"\npublic = \"127.0.0.1:9\"\nlabels = { tier = \"edge\" }\n";
    std::fs::write(&config, format!("{head}{new}\n[[nodes]]{nodes}")).expect("rewrite");
    ctl.restart();
    let status = status(&ctl);
    let last = status.nodes.last().expect("nodes");
    assert_eq!(last.name, "node-z");
    assert_eq!(last.labels.get("tier").map(String::as_str), Some("edge"));
    assert_eq!(status.nodes.len(), NODES.len() + 1);
}

#[test]
fn enroll_label_retire_over_the_api_with_typed_refusals() {
    let ctl = Controller::start();
    let enroll = serde_json::json!({
        "name": "edge-1", "labels": {"region": "eu"}, "public": "127.0.0.1:8081"
    });
    // A write without the token changes nothing.
    let (code, _) = ctl.http("POST", "/api/nodes", None, enroll.to_string().as_bytes());
    assert_eq!(code, 401);
    let (code, body) = post(&ctl, "/api/nodes", enroll.clone());
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("enrolled as"), "{body}");
    let (code, body) = post(&ctl, "/api/nodes", enroll);
    assert_eq!(code, 409, "name taken: {body}");
    assert!(body.contains("already enrolled"), "{body}");
    for (bad, field) in [
        (
            serde_json::json!({"name": "Edge", "public": "127.0.0.1:1"}),
            "name",
        ),
        (
            serde_json::json!({"name": "e2", "public": "nowhere"}),
            "public",
        ),
        // Routes no probe can reach (issue #22 item 8).
        (
            serde_json::json!({"name": "e2", "public": "127.0.0.1:0"}),
            "port 0",
        ),
        (
            serde_json::json!({"name": "e2", "public": "0.0.0.0:8080"}),
            "unspecified",
        ),
        (
            serde_json::json!({"name": "e2", "public": "127.0.0.1:1", "labels": {"a": "b,c"}}),
            "label",
        ),
        (
            serde_json::json!({"name": "e2", "public": "127.0.0.1:1", "colour": "red"}),
            "colour",
        ),
    ] {
        let (code, body) = post(&ctl, "/api/nodes", bad.clone());
        assert_eq!(code, 400, "{bad}: {body}");
        assert!(body.contains(field), "{bad}: {body}");
    }
    let (code, body) = post(
        &ctl,
        "/api/nodes/edge-1/labels",
        serde_json::json!({"set": {"tier": "edge"}, "remove": ["region"]}),
    );
    assert_eq!(code, 200, "{body}");
    let (code, body) = post(&ctl, "/api/nodes/nope/labels", serde_json::json!({}));
    assert_eq!(code, 404, "{body}");
    let (code, body) = cli(&ctl, &["node", "retire", "edge-1"]);
    assert_eq!(code, Some(0), "{body}");
    assert!(body.contains("retired"), "{body}");
    let (code, body) = post(&ctl, "/api/nodes/edge-1/retire", serde_json::json!({}));
    assert_eq!(code, 409, "already retired: {body}");
    let (code, body) = post(&ctl, "/api/nodes/nope/retire", serde_json::json!({}));
    assert_eq!(code, 404, "{body}");
    let status = status(&ctl);
    let edge = status
        .nodes
        .iter()
        .find(|n| n.name == "edge-1")
        .expect("edge-1 listed");
    assert!(edge.retired);
    assert_eq!(edge.labels.get("tier").map(String::as_str), Some("edge"));
    assert!(!edge.labels.contains_key("region"));
}

#[test]
fn select_resolves_once_into_the_plan_and_an_empty_selection_is_refused() {
    let ctl = Controller::start();
    for (name, labels) in [
        ("eu-1", "region=eu"),
        ("us-1", "region=us"),
        ("eu-2", "region=eu"),
        ("eu-3", "region=eu"),
    ] {
        let (code, out) = cli(
            &ctl,
            &[
                "node",
                "add",
                name,
                "--label",
                labels,
                "--label",
                "tier=edge",
                "--public",
                "127.0.0.1:9",
            ],
        );
        assert_eq!(code, Some(0), "{out}");
    }
    let (code, out) = cli(&ctl, &["node", "retire", "eu-3"]);
    assert_eq!(code, Some(0), "{out}");
    let bundle = ctl.bundle.display().to_string();
    let (code, out) = cli(
        &ctl,
        &[
            "rollout",
            "start",
            "--bundle",
            &bundle,
            "--select",
            "region=mars",
            "--slots",
            "1",
        ],
    );
    assert_ne!(code, Some(0), "{out}");
    assert!(out.contains("matches no enrolled node"), "{out}");
    let (code, out) = cli(
        &ctl,
        &[
            "rollout",
            "start",
            "--bundle",
            &bundle,
            "--select",
            "region=eu,tier=edge",
            "--slots",
            "1",
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    let status = status(&ctl);
    let r = status.rollouts.last().expect("a rollout");
    // The first selected node is the canary; the retired one is left out.
    assert_eq!(r.canary, "eu-1");
    assert_eq!(r.followers, Some(vec!["eu-2".to_string()]));
    // Relabeling after the start changes nothing in the recorded plan.
    let (code, out) = cli(&ctl, &["node", "label", "us-1", "region=eu"]);
    assert_eq!(code, Some(0), "{out}");
    let again = api_harness_status_rollout(&ctl);
    assert_eq!(again, vec!["eu-2".to_string()]);
}

fn api_harness_status_rollout(ctl: &Controller) -> Vec<String> {
    status(ctl)
        .rollouts
        .last()
        .expect("rollout")
        .followers
        .clone()
        .expect("one rollout names its followers")
}

/// A running agent process, killed on drop.
struct Agent(std::process::Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_agent(ctl: &Controller, node: &str) -> Agent {
    let dir = ctl._dir.path();
    // The agent config names keys/bundle-signing.pub (demo layout).
    std::fs::create_dir_all(dir.join("keys")).expect("keys dir");
    std::fs::copy(
        dir.join("bundle-signing.pub"),
        dir.join("keys/bundle-signing.pub"),
    )
    .expect("bundle key");
    let public = api_harness::free_tcp_port();
    let config = demo::write_agent_config(dir, &ctl.pki, node, ctl.quic_port, public, None)
        .expect("agent config");
    let log = std::fs::File::create(dir.join(format!("agent-{node}.log"))).expect("log");
    let child = Command::new(agent_binary())
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("start the agent");
    Agent(child)
}

fn connected(ctl: &Controller, node: &str) -> bool {
    status(ctl)
        .nodes
        .iter()
        .any(|n| n.name == node && n.connected)
}

fn controller_log(ctl: &Controller) -> String {
    std::fs::read_to_string(ctl._dir.path().join("controller.log")).unwrap_or_default()
}

fn wait_for(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + STEP;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_agent_enrolled_over_the_api_connects_and_a_retired_one_is_refused() {
    let ctl = Controller::start();
    let pki_dir = ctl.pki.dir.display().to_string();
    for node in ["edge-1", "ghost-1"] {
        let out = Command::new(env!("CARGO_BIN_EXE_fleetweft"))
            .args(["pki", "issue", node, "--dir", &pki_dir])
            .output()
            .expect("pki issue");
        assert!(out.status.success(), "{out:?}");
    }
    let (code, out) = cli(&ctl, &["node", "add", "edge-1", "--public", "127.0.0.1:9"]);
    assert_eq!(code, Some(0), "{out}");
    let _edge = start_agent(&ctl, "edge-1");
    wait_for("edge-1's agent is accepted", || connected(&ctl, "edge-1"));
    // A certificate the fleet CA signed for a name never enrolled is
    // refused after the handshake.
    let _ghost = start_agent(&ctl, "ghost-1");
    wait_for("ghost-1 is refused", || {
        controller_log(&ctl).contains("certificate names ghost-1, which is not enrolled")
    });
    // Retiring closes edge-1's connection and refuses it from then on.
    let (code, out) = cli(&ctl, &["node", "retire", "edge-1"]);
    assert_eq!(code, Some(0), "{out}");
    wait_for("edge-1's reconnect is refused", || {
        controller_log(&ctl).contains("certificate names edge-1, which is retired")
    });
    assert!(!connected(&ctl, "edge-1"));
    assert!(!connected(&ctl, "ghost-1"));
}

/// Nodes a large bootstrap enrolls in one start.
const BOOTSTRAP_NODES: usize = 1_000;

#[test]
fn a_large_bootstrap_enrolls_every_entry_in_file_order() {
    let mut ctl = Controller::start();
    let config = ctl._dir.path().join("controller.toml");
    let mut text = std::fs::read_to_string(&config).expect("config");
    for i in 0..BOOTSTRAP_NODES {
        text.push_str(&format!(
            "\n[[nodes]]\nname = \"bulk-{i}\"\npublic = \"127.0.0.1:9\"\nlabels = {{ shard = \"s{}\" }}\n",
            i % 10
        ));
    }
    std::fs::write(&config, text).expect("rewrite");
    let started = Instant::now();
    ctl.restart();
    eprintln!(
        "bootstrap of {BOOTSTRAP_NODES} nodes: controller serving after {:?}",
        started.elapsed()
    );
    let names = names(&ctl);
    assert_eq!(names.len(), NODES.len() + BOOTSTRAP_NODES);
    for (i, name) in names[NODES.len()..].iter().enumerate() {
        assert_eq!(name, &format!("bulk-{i}"), "enrollment order is file order");
    }
}
