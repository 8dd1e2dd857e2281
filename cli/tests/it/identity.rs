//! Identities on a real fleet: a real controller and real agents as child
//! processes on loopback.
//!
//! Two agents presenting node-a's certificate fight (each connection
//! replaces the other's) until the controller sees the identity conflict
//! and quarantines node-a: `/metrics` counts it, the handover report and
//! the dashboard name both peer addresses, and from then on the log does
//! not grow however long they stay. Revoking the certificate closes both
//! connections and the handshake refuses it, also after a controller
//! restart. `fleetweft pki issue` gives node-a a new certificate that
//! connects, and `fleetweft node release` lifts the quarantine.

use crate::binaries::fleetweft;
use crate::fleet::loopback::Loopback;
use api::client::FleetView;
use controller::daemon::api::EventDto;
use model::identity::IDENTITY_CONFLICT_REPLACEMENTS_MIN;
use std::future::Future;
use std::process::Command as StdCommand;
use std::time::{Duration, Instant};

/// How long one wait may take.
const STEP: Duration = Duration::from_secs(60);
/// How long the whole test may take.
const TEST: Duration = Duration::from_secs(240);
/// How long the two agents are left to fight once quarantined.
const FIGHT: Duration = Duration::from_secs(10);

/// Start an agent as `name` holding node-a's identity, with its own
/// data directory and public port (a copy of node-a elsewhere).
fn start_node_a(fleet: &mut Loopback, name: &str) {
    let real = fleet.agent_config("node-a");
    let config = if name == "node-a" {
        real
    } else {
        // Written before the real agent starts: both configs exist
        // before either process reads one.
        let text = std::fs::read_to_string(&real).expect("read config");
        let text = text
            .replace("node-a-data", &format!("{name}-data"))
            .replace(
                &format!("public_port = {}", fleet.public_ports[0]),
                &format!("public_port = {}", fleet.public_ports[1]),
            );
        let own = fleet.dir.join(format!("agent-{name}.toml"));
        std::fs::write(&own, text).expect("write config");
        own
    };
    fleet.spawn_agent(name, &config, &[]);
}

async fn node_a_connected(fleet: &Loopback) -> bool {
    fleet
        .api
        .fleet_view()
        .await
        .is_ok_and(|s| s.nodes.iter().any(|n| n.name == "node-a" && n.connected))
}

async fn poll<F: Future<Output = bool>>(what: &str, check: impl Fn() -> F) {
    crate::fleet::loopback::poll(what, STEP, check).await
}

fn count(events: &[EventDto], what: fn(&model::controller::Event) -> bool) -> usize {
    events.iter().filter(|e| what(&e.event)).count()
}

/// Quarantine: metric, handover and dashboard with both peers, a log that
/// stops growing.
async fn fight_and_quarantine(fleet: &mut Loopback) {
    start_node_a(fleet, "node-a-copy");
    start_node_a(fleet, "node-a");
    let started = Instant::now();
    poll("node-a is quarantined", || async {
        fleet.metric("fleetweft_nodes_quarantined").await == Some(1.0)
    })
    .await;
    eprintln!("quarantined {:?} after the copy started", started.elapsed());
    assert_eq!(
        fleet.metric("fleetweft_identity_conflicts_total").await,
        Some(1.0)
    );
    let status: FleetView = fleet.api.fleet_view().await.expect("status");
    let node = status
        .nodes
        .iter()
        .find(|n| n.name == "node-a")
        .expect("node-a");
    let [first, second] = node.quarantined.clone().expect("quarantined peers");
    assert_ne!(first, second);
    // Exit 1: the handover report is not empty.
    let (code, handover) = fleet.cli_code(&["unresolved"]);
    assert_eq!(code, Some(1), "{handover}");
    assert!(
        handover.contains("quarantined") && handover.contains(&first) && handover.contains(&second),
        "{handover}"
    );
    let page = fleet.api.get_text("/").await.expect("dashboard");
    assert!(
        page.contains("IDENTITY CONFLICT") && page.contains(&first),
        "{page}"
    );

    let before = fleet.events().await;
    tokio::time::sleep(FIGHT).await;
    let after = fleet.events().await;
    assert_eq!(
        after.len(),
        before.len(),
        "the log grew while the two agents held one identity: {:#?}",
        &after[before.len()..]
    );
    let hellos = count(&after, |e| {
        matches!(e, model::controller::Event::NodeHello { .. })
    });
    let quarantines = count(&after, |e| {
        matches!(e, model::controller::Event::NodeQuarantined { .. })
    });
    assert_eq!(quarantines, 1);
    // One hello per connection until the conflict is seen: the first two,
    // one per replacement, and the conflict reported while it is written.
    assert!(
        hellos <= IDENTITY_CONFLICT_REPLACEMENTS_MIN + 2,
        "{hellos} hellos"
    );
    eprintln!(
        "log after {FIGHT:?} of fighting: {} entries ({hellos} NodeHello, 1 NodeQuarantined)",
        after.len()
    );
    assert!(
        !node_a_connected(fleet).await,
        "a quarantined node counts as not connected"
    );
}

/// Revocation refused at the handshake, across a controller restart.
async fn revoke_and_restart(fleet: &mut Loopback) {
    let out = fleet.cli(&["node", "revoke-cert", "node-a"]);
    assert!(out.contains("revoked"), "{out}");
    assert_eq!(fleet.metric("fleetweft_certs_revoked").await, Some(1.0));
    let refused = "refused a revoked client certificate at the handshake";
    poll("the controller refuses the revoked certificate", || async {
        fleet.logs("controller").contains(refused)
    })
    .await;
    fleet.kill("controller").await;
    fleet.start_controller().await;
    let log = || fleet.logs("controller");
    let before = log().matches(refused).count();
    poll("the restarted controller refuses it too", || async {
        log().matches(refused).count() > before
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!node_a_connected(fleet).await);
    // Naming the certificate file gives the same fingerprint as the one
    // node-a presented: already revoked (exit 1, nothing recorded).
    let cert = fleet.pki.node_cert("node-a").display().to_string();
    let (code, text) = fleet.cli_code(&["node", "revoke-cert", "node-a", "--cert", &cert]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("already revoked"), "{text}");
    // Another node's certificate is refused before anything is sent.
    let other = fleet.pki.node_cert("node-b").display().to_string();
    let (code, text) = fleet.cli_code(&["node", "revoke-cert", "node-a", "--cert", &other]);
    assert_ne!(code, Some(0), "{text}");
    assert!(text.contains("node-b"), "{text}");
}

/// A new certificate connects; the release lets it speak.
async fn issue_and_release(fleet: &mut Loopback) {
    fleet.kill("node-a-copy").await;
    fleet.kill("node-a").await;
    let refused = StdCommand::new(fleetweft())
        .args(["pki", "issue", "node-a", "--dir"])
        .arg(&fleet.pki.dir)
        .output()
        .expect("pki issue");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("--force"),
        "{stderr}"
    );
    let out = StdCommand::new(fleetweft())
        .args(["pki", "issue", "node-a", "--force", "--dir"])
        .arg(&fleet.pki.dir)
        .output()
        .expect("pki issue");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("node-a.pem") && stdout.contains("node-a-key.pem"),
        "{stdout}"
    );
    start_node_a(fleet, "node-a");
    // Still quarantined: connected but muted.
    poll("the new certificate gets through the handshake", || async {
        fleet
            .last_log("node-a")
            .contains("connected to the controller")
    })
    .await;
    let out = fleet.cli(&["node", "release", "node-a"]);
    assert!(out.contains("released"), "{out}");
    poll("node-a connects with its new certificate", || async {
        node_a_connected(fleet).await
    })
    .await;
    assert_eq!(fleet.metric("fleetweft_nodes_quarantined").await, Some(0.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_identity_two_agents_quarantine_revoke_issue_release() {
    tokio::time::timeout(TEST, async {
        let mut fleet = Loopback::in_temp_dir("");
        fleet.start_controller().await;
        fight_and_quarantine(&mut fleet).await;
        revoke_and_restart(&mut fleet).await;
        issue_and_release(&mut fleet).await;
    })
    .await
    .expect("the test overran its deadline");
}
