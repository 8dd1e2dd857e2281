//! Process-level fault tests: a real controller and real agents as child
//! processes on loopback. Each test is bounded in time and kills every child
//! it started (the `Loopback` guard kills them on drop, also on panic, and
//! removes the fleet's directory unless the test failed).
//!
//! The tests run one at a time (a shared lock): a 2-core machine running
//! four fleets at once would stretch every step towards the op timeout.

use crate::binaries::fleetweft;
use crate::fleet::loopback::{op_of, Loopback};
use api::client::ClientError;
use api::client::FleetView;
use controller::daemon::api::EventDto;
use demo::NODES;
use model::controller::Event;
use protocol::bundle;
use std::future::Future;
use std::path::Path;
use std::process::Command as StdCommand;
use std::time::{Duration, Instant};

/// How long one wait may take.
const STEP: Duration = Duration::from_secs(60);
/// How long one whole test may take.
const TEST: Duration = Duration::from_secs(240);

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// PKI, signed releases of the sample app, the controller, the given
/// agents; every release uploaded. Dropping the fleet kills every child.
async fn start(versions: &[&str], agents: &[&str]) -> Loopback {
    let mut fleet = Loopback::in_temp_dir("");
    fleet.sign_hello(versions);
    fleet.start_controller().await;
    for node in agents {
        fleet.start_agent(node, &[]);
    }
    fleet.upload_hello(versions).await;
    fleet
}

async fn poll<F: Future<Output = bool>>(what: &str, check: impl Fn() -> F) {
    crate::fleet::loopback::poll(what, STEP, check).await
}

fn rollout_is(s: &FleetView, id: &str, status: &str) -> bool {
    s.rollouts.iter().any(|r| r.id == id && r.status == status)
}

fn all_connected(s: &FleetView) -> bool {
    s.nodes.iter().all(|n| n.connected)
}

/// Run a test body under the serial lock and the test deadline.
async fn bounded(body: impl Future<Output = ()>) {
    let _serial = SERIAL.lock().await;
    tokio::time::timeout(TEST, body)
        .await
        .expect("the test overran its deadline");
}

/// v1 on every node through r0 (canary node-a, then node-b, node-c).
async fn install_v1_everywhere(fleet: &Loopback) {
    fleet.wait("every agent connected", all_connected).await;
    fleet.rollout("v1", "node-a", &["node-b", "node-c"]).await;
    fleet
        .wait("r0 completed", |s| rollout_is(s, "r0", "completed"))
        .await;
}

async fn assert_serves(fleet: &Loopback, node: &str, version: &str) {
    let answer = fleet.public(node).await;
    let expected = fleet.digest(version).to_hex();
    assert!(
        matches!(&answer, Some((200, Some(id), body)) if *id == expected && *body == format!("hello from {version}")),
        "{node} should serve {version} ({expected}) on its public route, answered {answer:?}"
    );
}

async fn assert_verified(fleet: &Loopback, node: &str) {
    let proof: proof::NodeProof = fleet
        .api
        .get(&format!("/api/nodes/{node}/proof"))
        .await
        .unwrap();
    assert_eq!(proof.verdict, proof::Verdict::Verified, "{node}: {proof:?}");
}

fn commit_decisions(events: &[EventDto], op: &str) -> usize {
    events
        .iter()
        .filter(|e| matches!(&e.event, Event::CommitDecided { op: o, .. } if o.to_string() == op))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_killed_mid_stage_resumes_and_applies_once() {
    bounded(async {
        let mut fleet = start(&["v1", "v2"], &NODES).await;
        install_v1_everywhere(&fleet).await;

        fleet.rollout("v2", "node-a", &["node-b", "node-c"]).await;
        // Kill the canary's agent as soon as its op is granted or decided.
        let deadline = Instant::now() + STEP;
        let (op, phase) = loop {
            let s = fleet.status().await;
            if let Some(o) = op_of(&s, "r1", "node-a") {
                break (o.id.clone(), o.phase.clone());
            }
            assert!(Instant::now() < deadline, "r1 never granted the canary");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        // Then, tighter, as soon as the agent logs accepting it (journaled;
        // it fetches, verifies and stages from then on). Where exactly the
        // kill lands is a race; the assertions hold for every position.
        let accepted = format!("accepts {op}");
        let first_log = fleet.dir.join("logs/node-a.1.log");
        let deadline = Instant::now() + STEP;
        while !std::fs::read_to_string(&first_log)
            .unwrap_or_default()
            .contains(&accepted)
        {
            assert!(Instant::now() < deadline, "node-a never took {op}");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        fleet.kill("node-a").await;
        eprintln!("killed node-a with {op} {phase}");
        fleet
            .wait("node-a seen disconnected", |s| !s.nodes[0].connected)
            .await;
        fleet.start_agent("node-a", &[]);

        fleet
            .wait("r1 completed", |s| rollout_is(s, "r1", "completed"))
            .await;
        for node in NODES {
            assert_verified(&fleet, node).await;
            assert_serves(&fleet, node, "v2").await;
        }
        let events = fleet.events().await;
        assert_eq!(
            commit_decisions(&events, &op),
            1,
            "one stored decision for {op}:\n{}",
            fleet.event_text().await
        );
        // The restarted agent brought back what its journal said serves:
        // v1 if it was killed before the switch, v2 if after.
        let first = std::fs::read_to_string(&first_log).unwrap();
        let switched_before_kill = first.contains(&format!("switches the route for {op}"));
        let back = fleet
            .digest(if switched_before_kill { "v2" } else { "v1" })
            .to_hex();
        let second = std::fs::read_to_string(fleet.dir.join("logs/node-a.2.log")).unwrap();
        eprintln!(
            "node-a killed {} the switch; first run ended with: {:?}",
            if switched_before_kill {
                "after"
            } else {
                "before"
            },
            first
                .lines()
                .rev()
                .find(|l| l.contains("agent::daemon"))
                .unwrap_or("")
        );
        assert!(
            second.contains(&format!("restarts and sees {} serving", &back[..12])),
            "{second}"
        );
        // The agent's own record (both runs): one switch for the op.
        let agent_log = fleet.logs("node-a");
        assert_eq!(
            agent_log
                .matches(&format!("switches the route for {op}"))
                .count(),
            1,
            "node-a switched once for {op}:\n{agent_log}"
        );
        fleet.verify_log().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cannot_report_for_another() {
    bounded(async {
        // No agents: node-c's op stays granted.
        let fleet = start(&["v1"], &[]).await;
        fleet.rollout("v1", "node-c", &[]).await;
        let s = fleet
            .wait("op on node-c granted", |s| op_of(s, "r0", "node-c").is_some())
            .await;
        let op = op_of(&s, "r0", "node-c").unwrap().clone();
        assert_eq!(op.phase, "granted");

        // Connect with node-b's certificate and report node-c's op as a pass.
        let identity = protocol::tls::ClientIdentity::from_pem_files(
            &fleet.pki.ca_cert(),
            &fleet.pki.node_cert("node-b"),
            &fleet.pki.node_key("node-b"),
        )
        .unwrap();
        let addr = format!("127.0.0.1:{}", fleet.quic_port).parse().unwrap();
        let mut conn = protocol::quic::AgentConnection::connect(addr, "localhost", identity)
            .await
            .unwrap();
        let release = fleet.digest("v1");
        let op_id = model::OpId(op.id.trim_start_matches("op").parse().unwrap());
        for body in [
            model::ToController::Hello {
                serving: Some(release),
                generation: model::Generation(op.generation),
            },
            model::ToController::Report {
                op: op_id,
                kind: model::ReportKind::Switched,
                observation: model::RouteObservation::passing(release),
            },
        ] {
            conn.control()
                .send(&protocol::frame::FrameBody::ToController(body))
                .await
                .unwrap();
        }
        let needle = format!("node-b spoke about node-c's op {}: ignored", op.id);
        let api = fleet.api.clone();
        poll(&needle, || async {
            api.get::<Vec<EventDto>>("/api/events?from=0")
                .await
                .is_ok_and(|e| e.iter().any(|e| e.text.starts_with(&needle)))
        })
        .await;
        let s = fleet.status().await;
        let after = op_of(&s, "r0", "node-c").unwrap();
        assert!(after.outcome.is_none(), "{after:?}");
        assert!(after.holds_slot, "{after:?}");
        assert!(after.phase == "granted", "{after:?}");
        let c = &s.nodes[2];
        assert_eq!(c.confirmed, None, "{c:?}");
        assert_eq!(c.reported_serving, None, "{c:?}");
        assert_eq!(c.live_op.as_deref(), Some(op.id.as_str()), "{c:?}");
        let events = fleet.events().await;
        assert!(
            !events.iter().any(|e| matches!(
                &e.event,
                Event::ReportRecorded { op: o, .. } | Event::OpSettled { op: o, .. } if o.to_string() == op.id
            )),
            "{}",
            fleet.event_text().await
        );
        conn.close();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_bundle_is_refused() {
    bounded(async {
        let fleet = start(&["v1", "v2"], &["node-a"]).await;
        fleet
            .wait("node-a connected", |s| s.nodes[0].connected)
            .await;
        fleet.rollout("v1", "node-a", &[]).await;
        fleet
            .wait("r0 completed", |s| rollout_is(s, "r0", "completed"))
            .await;

        // Upload of a tampered bundle: refused, with the reason.
        let (v2, good) = fleet.releases["v2"].clone();
        let mut bad = good.clone();
        let at = bad.len() / 2;
        bad[at] ^= 0x01;
        match fleet
            .api
            .post_bytes::<serde_json::Value>("/api/bundles", bad.clone())
            .await
        {
            Err(ClientError::Status { status, body, .. }) => {
                assert_eq!(status, 400, "{body}");
                assert!(body.contains("bundle refused: "), "{body}");
                eprintln!("upload refused: {body}");
            }
            other => panic!("tampered upload not refused: {other:?}"),
        }

        // The accepted file replaced by a tampered copy after upload.
        let stored = fleet
            .dir
            .join(format!("controller-data/bundles/{}.bundle", v2.to_hex()));
        assert_eq!(std::fs::read(&stored).unwrap(), good);
        std::fs::write(&stored, &bad).unwrap();

        fleet.rollout("v2", "node-a", &[]).await;
        let s = fleet
            .wait("r1's op settled", |s| {
                op_of(s, "r1", "node-a").is_some_and(|o| o.outcome.is_some())
            })
            .await;
        let op = op_of(&s, "r1", "node-a").unwrap().clone();
        eprintln!("r1 op: {op:?}\n{}", fleet.event_text().await);
        assert_eq!(op.outcome.as_deref(), Some("not-applied"), "{op:?}");
        let events = fleet.events().await;
        assert_eq!(commit_decisions(&events, &op.id), 0, "never decided");
        assert!(
            events.iter().any(|e| matches!(
                &e.event,
                Event::ReportRecorded {
                    op: o,
                    kind: model::ReportKind::Refused(model::StageRefusal::BundleUnavailable),
                    observation,
                }
                    if o.to_string() == op.id && observation.proves_serving(fleet.digest("v1"))
            )),
            "a refused (bundle unavailable) report proving v1 still serves:\n{}",
            fleet.event_text().await
        );
        assert_serves(&fleet, "node-a", "v1").await;
        let staged = fleet
            .dir
            .join(format!("node-a-data/releases/{}", v2.to_hex()));
        assert!(!staged.exists(), "{} exists", staged.display());
        // What actually happens: the controller serves only bytes that hash
        // to the bundle's name, so the agent is told the bundle is missing
        // (treated as transient), spends its attempt budget, then refuses.
        let agent_log = fleet.logs("node-a");
        let short = &v2.to_hex()[..12];
        assert!(
            agent_log.contains(&format!("controller has no bundle {short}")),
            "{agent_log}"
        );
        assert!(
            agent_log.contains(&format!("refuses the bundle of {}", op.id)),
            "{agent_log}"
        );
        assert!(
            !agent_log.contains(&format!("switches the route for {}", op.id)),
            "{agent_log}"
        );
    })
    .await;
}

/// SPEC §5 with a permanent error: a node trusting another signing key (a
/// botched key rotation) fetches the bundle once, fails to verify it,
/// journals the failure as permanent, and the recovery table stops at once
/// (no retry spends budget on what will fail the same way). Nothing is
/// installed, and the controller hears "bundle rejected", not
/// "unavailable". The node serves nothing, so nothing proves what serves:
/// the op is UNKNOWN with its slot held, not "not applied".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_failing_verification_stops_at_once_as_rejected() {
    bounded(async {
        let mut fleet = start(&["v1"], &["node-b", "node-c"]).await;
        let (_, foreign) = bundle::keygen();
        let foreign_key = fleet.dir.join("keys/foreign.pub");
        bundle::save_verifying_key(&foreign_key, &foreign).unwrap();
        fleet.start_agent_trusting("node-a", &foreign_key);
        fleet.wait("every agent connected", all_connected).await;
        fleet.rollout("v1", "node-a", &[]).await;
        let api = fleet.api.clone();
        poll("node-a's bundle-rejected report is recorded", || {
            let api = api.clone();
            async move {
                let events: Vec<EventDto> = api.get("/api/events?from=0").await.unwrap_or_default();
                events.iter().any(|e| {
                    matches!(
                        &e.event,
                        Event::ReportRecorded {
                            kind: model::ReportKind::Refused(model::StageRefusal::BundleRejected),
                            ..
                        }
                    )
                })
            }
        })
        .await;
        let s = fleet.status().await;
        let op = op_of(&s, "r0", "node-a").unwrap().clone();
        assert_eq!(op.outcome, None, "nothing proves what serves: {op:?}");
        assert!(
            op.unknown.as_deref() == Some("restore-unproven") && op.holds_slot,
            "UNKNOWN, slot held: {op:?}"
        );
        let events = fleet.events().await;
        assert_eq!(commit_decisions(&events, &op.id), 0, "never decided");
        let staged = fleet.dir.join(format!(
            "node-a-data/releases/{}",
            fleet.digest("v1").to_hex()
        ));
        assert!(!staged.exists(), "{} exists", staged.display());
        let log = fleet.logs("node-a");
        let table: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("recovery table") && l.contains(&op.id))
            .collect();
        // First the table lets the first attempt run; after the permanent
        // failure it stops, with two of three units of budget left.
        assert!(
            table.len() == 2
                && table[0].contains("Transient, Absent, budget 3 -> Retry")
                && table[1].contains("Permanent, Absent, budget 2 -> Stop"),
            "{table:#?}"
        );
        assert!(log.contains("stopping: bundle rejected"), "{log}");
        // The agent keeps re-sending its report (retry_ms = 1 s) while the
        // op waits; the copies change nothing and are not logged.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let reports = fleet
            .events()
            .await
            .iter()
            .filter(|e| matches!(&e.event, Event::ReportRecorded { op: o, .. } if o.to_string() == op.id))
            .count();
        assert_eq!(reports, 1, "{}", fleet.event_text().await);
        assert_eq!(
            log.matches("stage failed").count(),
            1,
            "one attempt, never retried:\n{log}"
        );
        fleet.verify_log().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_down_during_two_rollouts_converges_to_the_newest() {
    bounded(async {
        let mut fleet = start(&["v1", "v2", "v3"], &NODES).await;
        install_v1_everywhere(&fleet).await;

        fleet.kill("node-c").await;
        fleet
            .wait("node-c seen disconnected", |s| !s.nodes[2].connected)
            .await;
        fleet.rollout("v2", "node-a", &["node-b", "node-c"]).await;
        let s = fleet
            .wait("r1 granted node-c (down)", |s| {
                op_of(s, "r1", "node-c").is_some()
            })
            .await;
        let stale = op_of(&s, "r1", "node-c").unwrap().clone();
        fleet.rollout("v3", "node-a", &["node-b", "node-c"]).await;
        fleet
            .wait("r2 verified node-a and node-b", |s| {
                rollout_is(s, "r1", "superseded")
                    && ["node-a", "node-b"].iter().all(|n| {
                        op_of(s, "r2", n).is_some_and(|o| o.outcome.as_deref() == Some("verified"))
                    })
            })
            .await;

        fleet.start_agent("node-c", &[]);
        fleet
            .wait("r2 completed", |s| rollout_is(s, "r2", "completed"))
            .await;
        for node in NODES {
            assert_serves(&fleet, node, "v3").await;
            assert_verified(&fleet, node).await;
        }
        let s = fleet.status().await;
        let stale_after = s.ops.iter().find(|o| o.id == stale.id).unwrap();
        eprintln!(
            "stale op after: {stale_after:?}\n{}",
            fleet.event_text().await
        );
        // The superseded op never switched node-c's route: on reconnect the
        // controller re-sent its Apply (generation 2 >= node-c's accepted 1,
        // so not stale for the agent), then answered the commit request from
        // the newer intent: Abort; the op settled not-applied on evidence.
        assert_eq!(
            stale_after.decision.as_deref(),
            Some("abort"),
            "{stale_after:?}"
        );
        assert_eq!(
            stale_after.outcome.as_deref(),
            Some("not-applied"),
            "{stale_after:?}"
        );
        let agent_log = fleet.logs("node-c");
        assert!(
            !agent_log.contains(&format!("switches the route for {}", stale.id)),
            "{agent_log}"
        );
        let events = fleet.events().await;
        let rejected = events
            .iter()
            .filter(|e| matches!(e.event, Event::StaleCommandRejected { .. }))
            .count();
        eprintln!("stale commands rejected: {rejected}");
        fleet.verify_log().await;
    })
    .await;
}

/// `fleetweft rollback` end to end with real processes: node-a holds inside
/// its switch (fault injection) while the operator orders the op rolled
/// back, so the Restore waits behind the switch. The late switch report is
/// recorded as an echo, the agent then restores v1, its probe proves it,
/// and the op settles rolled-back; the rollout is paused by the operator
/// and node-b is never granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_rollback_settles_only_when_the_baseline_is_proven() {
    bounded(async {
        let mut fleet = start(&["v1", "v2"], &NODES).await;
        install_v1_everywhere(&fleet).await;
        fleet.kill("node-a").await;
        fleet.start_agent_with_faults("node-a", "hold_at = \"switch\"\nhold_ms = 4000\n");
        fleet.wait("every agent connected", all_connected).await;
        fleet.rollout("v2", "node-a", &["node-b"]).await;
        let s = fleet
            .wait("node-a's op has a stored commit", |s| {
                op_of(s, "r1", "node-a").is_some_and(|o| o.decision.as_deref() == Some("commit"))
            })
            .await;
        let op = op_of(&s, "r1", "node-a").unwrap().id.clone();
        let out = StdCommand::new(fleetweft())
            .args(["rollback", &op, "--controller", &fleet.api_url])
            .env("FLEETWEFT_TOKEN", &fleet.token)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout)
                .contains(&format!("operator orders {op} rolled back")),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let s = fleet
            .wait("the rolled-back op settles", |s| {
                op_of(s, "r1", "node-a").is_some_and(|o| o.outcome.is_some())
            })
            .await;
        let o = op_of(&s, "r1", "node-a").unwrap();
        assert_eq!(o.outcome.as_deref(), Some("rolled-back"), "{o:?}");
        assert_serves(&fleet, "node-a", "v1").await;
        assert!(
            op_of(&s, "r1", "node-b").is_none(),
            "paused: node-b never granted"
        );
        let events = fleet.event_text().await;
        assert!(events.contains("paused (operator)"), "{events}");
        // The switch finished after the order (its report is only an echo);
        // the agent's restore report is what settled the op.
        assert!(
            events.contains(&format!("record report for {op} (switched)"))
                && events.contains(&format!("record report for {op} (restored)")),
            "{events}"
        );
        assert!(
            fleet.logs("node-a").contains("holding at switch"),
            "the restore really waited behind the switch"
        );
        fleet.verify_log().await;
    })
    .await;
}

/// Proof is a readback (SPEC §10): a live proof reads the route and the
/// agent back when asked; an agent that does not answer is "could not
/// read", never its recorded values shown as current; a recorded look at a
/// settled node that contradicts its release is drift, on every surface;
/// looks are bounded per node; the periodic verifier records looks by
/// itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_proof_reads_back_and_a_silent_agent_is_not_shown_as_current() {
    bounded(async {
        let mut fleet = start(&["v1"], &NODES).await;
        install_v1_everywhere(&fleet).await;
        // A rollout proof reads every node back; a node proof right after
        // it is still read back (the agent's readback interval is waited
        // out, not reported as "could not read").
        let rollout: proof::RolloutProof = fleet.api.get("/api/rollouts/r0/proof").await.unwrap();
        assert_eq!(rollout.verdict, proof::Verdict::Verified, "{rollout:#?}");
        let proof: proof::NodeProof = fleet.api.get("/api/nodes/node-a/proof").await.unwrap();
        assert_eq!(proof.verdict, proof::Verdict::Verified, "{proof:#?}");
        assert_eq!(proof.mode, proof::ProofMode::Live);
        assert!(
            proof.checks.iter().all(|c| c.observed_at_ms.is_some()),
            "{proof:#?}"
        );
        let sequence = fleet.status().await.last_sequence;
        // A GET proof writes nothing.
        assert_eq!(fleet.status().await.last_sequence, sequence);

        // node-b's agent dies (its app and route with it).
        fleet.kill("node-b").await;
        let proof: proof::NodeProof = fleet.api.get("/api/nodes/node-b/proof").await.unwrap();
        assert_ne!(proof.verdict, proof::Verdict::Verified, "{proof:#?}");
        let artifact = proof
            .checks
            .iter()
            .find(|c| c.item == "artifact digest")
            .unwrap();
        assert_eq!(artifact.ok, None, "{artifact:?}");
        assert_eq!(
            artifact.reason,
            Some(proof::ReasonCode::ReadbackUnavailable)
        );
        assert!(
            artifact
                .observed
                .as_deref()
                .unwrap_or("")
                .starts_with("could not read: the agent"),
            "{artifact:?}"
        );
        let process = proof.checks.iter().find(|c| c.item == "process").unwrap();
        assert!(
            !process.observed.as_deref().unwrap_or("").contains(" up "),
            "the recorded uptime is not shown as current: {process:?}"
        );
        // The cached proof is the memory, labelled as such.
        let cached: proof::NodeProof = fleet
            .api
            .get("/api/nodes/node-b/proof?cached=true")
            .await
            .unwrap();
        assert_eq!(cached.mode, proof::ProofMode::Recorded);
        assert_eq!(cached.verdict, proof::Verdict::Verified);

        // Recording the look makes the drift a durable fact.
        let seen: serde_json::Value = fleet
            .api
            .post_json("/api/nodes/node-b/observe", &serde_json::json!({}))
            .await
            .unwrap();
        assert!(seen["not_recorded"].is_null(), "{seen:#}");
        let s = fleet.status().await;
        let b = s.nodes.iter().find(|n| n.name == "node-b").unwrap();
        assert!(b.drifted && b.observed.is_some(), "{b:?}");
        let metrics = fleet.api.get_text("/metrics").await.unwrap();
        assert!(metrics.contains("fleetweft_nodes_drifted 1"), "{metrics}");
        let open: Vec<api::report::Unresolved> = fleet.api.get("/api/unresolved").await.unwrap();
        assert!(
            open.iter()
                .any(|u| u.node == "node-b" && u.phase == "drifted"),
            "{open:#?}"
        );
        // At most one look per node per interval: the next is not recorded.
        let before = fleet.status().await.last_sequence;
        let again: serde_json::Value = fleet
            .api
            .post_json("/api/nodes/node-b/observe", &serde_json::json!({}))
            .await
            .unwrap();
        assert!(
            again["not_recorded"]
                .as_str()
                .is_some_and(|w| w.contains("10000 ms")),
            "{again:#}"
        );
        assert_eq!(
            fleet.status().await.last_sequence,
            before,
            "a refused look adds nothing to the log"
        );

        // The periodic verifier records looks by itself.
        fleet.kill("controller").await;
        let config = fleet.dir.join("controller.toml");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str("\n[verify]\nevery_s = 10\n");
        std::fs::write(&config, text).unwrap();
        let config = config.display().to_string();
        fleet.spawn(
            "controller",
            &fleetweft(),
            &["controller".into(), "--config".into(), config],
        );
        fleet
            .wait("the verifier records node-c's look", |s| {
                s.nodes
                    .iter()
                    .find(|n| n.name == "node-c")
                    .is_some_and(|n| n.observed.is_some() && !n.drifted)
            })
            .await;
        fleet.verify_log().await;
    })
    .await;
}

/// Copy a directory tree (the controller's data, stopped).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Issue 13, the first hour: an operator restores an older copy of the
/// controller's data. Real binaries: v1 everywhere (r0, generation 1), the
/// controller stopped and its data copied, v2 rolled out (r1, generation
/// 2), the controller stopped and the copy put back. Started again at
/// generation 1, the three real agents reconnect saying they accepted 2:
/// `fleetweft status --json`, `/metrics` and the handover report say the
/// log is behind, and the daemon log warns once per node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_older_controller_backup_is_behind_its_agents() {
    bounded(async {
        let mut fleet = start(&["v1", "v2"], &NODES).await;
        install_v1_everywhere(&fleet).await;
        let config = fleet.dir.join("controller.toml").display().to_string();
        let data = fleet.dir.join("controller-data");
        let backup = fleet.dir.join("controller-backup");
        let restart = |fleet: &mut Loopback| {
            fleet.spawn(
                "controller",
                &fleetweft(),
                &["controller".into(), "--config".into(), config.clone()],
            )
        };
        fleet.kill("controller").await;
        copy_tree(&data, &backup);
        restart(&mut fleet);
        fleet.wait("every agent back", all_connected).await;
        fleet.rollout("v2", "node-a", &["node-b", "node-c"]).await;
        let s = fleet
            .wait("r1 completed", |s| rollout_is(s, "r1", "completed"))
            .await;
        assert_eq!(s.generation, 2);
        assert_eq!(s.status.nodes_ahead_of_log, 0, "{:?}", s.status);

        fleet.kill("controller").await;
        std::fs::remove_dir_all(&data).unwrap();
        copy_tree(&backup, &data);
        restart(&mut fleet);
        let s = fleet
            .wait("every agent says it is ahead", |s| {
                s.status.nodes_ahead_of_log == NODES.len()
            })
            .await;
        assert_eq!(s.generation, 1, "the older copy runs");
        for (a, node) in s.status.ahead_of_log.iter().zip(NODES) {
            assert_eq!(
                (a.node.as_str(), a.reported_generation, a.log_generation),
                (node, 2, 1)
            );
        }
        let out = StdCommand::new(fleetweft())
            .args(["status", "--json", "--controller", &fleet.api_url])
            .output()
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["nodes_ahead_of_log"], 3, "{json}");
        let warning = "LOG BEHIND THE FLEET: node-b reports generation 2, but the controller's log is at generation 1";
        assert!(
            json["ahead_of_log"][1]["warning"]
                .as_str()
                .is_some_and(|w| w.starts_with(warning)),
            "{json}"
        );
        let metrics = fleet.api.get_text("/metrics").await.unwrap();
        assert!(
            metrics.contains("\nfleetweft_nodes_ahead_of_log 3\n"),
            "{metrics}"
        );
        let report: Vec<serde_json::Value> = fleet.api.get("/api/unresolved").await.unwrap();
        let behind: Vec<&str> = report
            .iter()
            .filter(|u| {
                u["phase"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("ahead of the log"))
            })
            .filter_map(|u| u["node"].as_str())
            .collect();
        assert_eq!(behind, NODES.to_vec(), "{report:#?}");
        let log = fleet.logs("controller");
        assert_eq!(log.matches(warning).count(), 1, "once for node-b: {log}");
    })
    .await;
}
