//! The operator API, dashboard, metrics and CLI against a real controller
//! process with no agents: authentication (401 and nothing logged),
//! malformed requests (400 naming the field), unknown ids (404), and a
//! rollout whose canary never connects, so its op goes UNKNOWN and must show
//! up, unowned, on the dashboard, in the metrics and in `fleetweft unresolved`.

use crate::api_harness;

use api_harness::*;
use std::process::Command;

#[test]
fn writes_without_the_token_are_refused_and_log_nothing() {
    let ctl = Controller::start();
    let id = ctl.start_rollout("node-a");
    let before = ctl.last_sequence();
    assert!(before.is_u64(), "the rollout was logged: {before}");
    let bundle = std::fs::read(&ctl.bundle).unwrap();
    let start = serde_json::json!({"release": "00", "canary": "node-a", "slots": 1}).to_string();
    let writes: Vec<(String, Vec<u8>)> = vec![
        ("/api/bundles".into(), bundle),
        ("/api/rollouts".into(), start.into_bytes()),
        (format!("/api/rollouts/{id}/pause"), Vec::new()),
        (format!("/api/rollouts/{id}/resume"), Vec::new()),
        (format!("/api/rollouts/{id}/approve"), Vec::new()),
    ];
    for (path, body) in &writes {
        for token in [None, Some("0".repeat(64).as_str()), Some("")] {
            let (code, answer) = ctl.http("POST", path, token, body);
            assert_eq!(code, 401, "POST {path} with {token:?}: {answer}");
        }
    }
    assert_eq!(
        ctl.last_sequence(),
        before,
        "a refused write changed the log"
    );
    // The CLI without a token: 401 is a usage error (2), nothing logged.
    let out = ctl.cli(&["rollout", "pause", &id], None);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("401"), "{}", text(&out.stderr));
    assert_eq!(ctl.last_sequence(), before);
    // With the token from the environment it works and is logged.
    let out = ctl.cli(&["rollout", "pause", &id], Some(&ctl.token));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_ne!(ctl.last_sequence(), before);
    // Pausing twice is refused by the controller: bad news (1).
    let out = ctl.cli(&["rollout", "pause", &id], Some(&ctl.token));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

/// A hostile or mistyped `waves` (issue #22 item 8): a wave end of 0%
/// sends nobody, and "50%,10%" (a typo for "5%,10%") would send half the
/// fleet in the first wave. Each is a 400 naming the part; nothing logged.
#[test]
fn zero_and_decreasing_waves_are_400_naming_the_part() {
    let ctl = Controller::start();
    let digest = ctl.upload_bundle();
    let before = ctl.last_sequence();
    for (waves, part) in [("0%", "\"0%\""), ("50%,10%", "\"10%\""), ("1,1", "\"1\"")] {
        let request = serde_json::json!({
            "release": digest, "canary": "node-a", "followers": ["node-b", "node-c"],
            "slots": 1, "waves": waves,
        });
        let (code, answer) = ctl.http(
            "POST",
            "/api/rollouts",
            Some(&ctl.token),
            request.to_string().as_bytes(),
        );
        assert_eq!(code, 400, "{waves}: {answer}");
        let error = serde_json::from_str::<serde_json::Value>(&answer).expect("json")["error"]
            .as_str()
            .expect("an error message")
            .to_string();
        assert!(
            error.contains("waves") && error.contains(part),
            "{waves}: {answer} should name {part}"
        );
    }
    assert_eq!(
        ctl.last_sequence(),
        before,
        "a refused rollout logged something"
    );
}

#[test]
fn malformed_requests_are_400_naming_the_field_and_unknown_ids_404() {
    let ctl = Controller::start();
    // Only the bootstrap's enrollments are in the log.
    let bootstrapped = ctl.last_sequence();
    let t = Some(ctl.token.as_str());
    let release = "ab".repeat(32);
    let no_slots = format!(r#"{{"release": "{release}", "canary": "node-a", "slots": 0}}"#);
    let too_many_slots =
        format!(r#"{{"release": "{release}", "canary": "node-a", "slots": 10001}}"#);
    let cases: [(&str, &str); 6] = [
        (
            r#"{"release": "ab", "canary": "node-a", "slots": "two"}"#,
            "slots",
        ),
        (r#"{"release": "ab", "slots": 1}"#, "canary"),
        (
            r#"{"release": 7, "canary": "node-a", "slots": 1}"#,
            "release",
        ),
        (
            r#"{"release": "ab", "canary": "node-a", "slots": 1, "colour": "red"}"#,
            "colour",
        ),
        // Out of 1..=SLOTS_MAX_LIMIT, with a well-formed release.
        (&no_slots, "slots"),
        (&too_many_slots, "slots"),
    ];
    for (body, field) in cases {
        let (code, answer) = ctl.http("POST", "/api/rollouts", t, body.as_bytes());
        assert_eq!(code, 400, "{body}: {answer}");
        assert!(
            answer.contains(field),
            "{body}: {answer} should name {field}"
        );
    }
    let (code, answer) = ctl.http("POST", "/api/rollouts", t, b"{not json");
    assert_eq!(code, 400, "{answer}");
    assert_eq!(
        ctl.last_sequence(),
        bootstrapped,
        "a refused request logged something"
    );

    // Bundles: tampered, unsigned and garbage uploads are refused with the reason.
    let signed = std::fs::read(&ctl.bundle).expect("bundle");
    let mut tampered = signed.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0x01;
    let mut unsigned = signed.clone();
    let magic = protocol::bundle::MAGIC.len();
    let manifest_len =
        u32::from_be_bytes(unsigned[magic..magic + 4].try_into().expect("length")) as usize;
    let signature = magic + 4 + manifest_len + 4;
    unsigned[signature..signature + 64].fill(0);
    for (body, reason) in [
        (tampered, "digest mismatch"),
        (unsigned, "unsigned"),
        (b"hello".to_vec(), "bundle"),
    ] {
        let (code, answer) = ctl.http("POST", "/api/bundles", t, &body);
        assert_eq!(code, 400, "{answer}");
        assert!(
            answer.to_lowercase().contains(reason),
            "{answer} should say {reason}"
        );
    }

    for path in ["/api/rollouts/r9/pause", "/api/rollouts/nope/approve"] {
        let (code, answer) = ctl.http("POST", path, t, b"");
        assert_eq!(code, 404, "{path}: {answer}");
    }
    let (code, answer) = ctl.http("GET", "/api/rollouts/r9/proof", None, b"");
    assert_eq!(code, 404, "{answer}");
    let (code, answer) = ctl.http("GET", "/api/nodes/node-zz/proof", None, b"");
    assert_eq!(code, 404, "{answer}");

    // The CLI: an unknown node or rollout is a usage error (2).
    let out = ctl.cli(&["proof", "node-zz"], None);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let out = ctl.cli(&["proof", "--rollout", "r9"], None);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    // Nothing in flight: unresolved is empty (0); status is fine (0).
    let out = ctl.cli(&["unresolved"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("nothing unresolved"));
    let out = ctl.cli(&["unresolved", "--json"], None);
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json, serde_json::json!([]));
    let out = ctl.cli(&["status"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("NODE") && stdout.contains("node-c"),
        "{stdout}"
    );
    // An unreachable controller is bad news (1), not a usage error.
    let out = Command::new(env!("CARGO_BIN_EXE_fleetweft"))
        .args(["status", "--controller"])
        .arg(format!("http://127.0.0.1:{}", free_tcp_port()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

#[test]
fn an_unknown_op_shows_unowned_on_the_dashboard_metrics_and_cli() {
    let ctl = Controller::start();
    // Before any rollout: the page has the fleet table, metrics the names.
    let (code, page) = ctl.http("GET", "/", None, b"");
    assert_eq!(code, 200);
    assert!(page.contains(r#"<noscript><meta http-equiv="refresh" content="2"></noscript>"#));
    assert!(page.contains(r#"<table id="fleet">"#), "{page}");
    for node in NODES {
        assert!(page.contains(&format!("<td>{node}</td>")), "{page}");
    }

    // Start through the CLI, with the token file: canary node-c never connects.
    let token_file = s(&ctl.token_file);
    let bundle = s(&ctl.bundle);
    let out = ctl.cli(
        &[
            "rollout",
            "start",
            "--bundle",
            &bundle,
            "--canary",
            "node-c",
            "--slots",
            "1",
            "--token-file",
            &token_file,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("uploaded app v2"),
        "{}",
        text(&out.stdout)
    );

    let status = ctl.wait_for_unknown();
    let op = status["ops"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(status["ops"][0]["node"], "node-c");
    assert_eq!(status["rollouts"][0]["slots_occupied"], 1);

    let (_, unresolved) = ctl.http("GET", "/api/unresolved", None, b"");
    let unresolved: serde_json::Value = serde_json::from_str(&unresolved).unwrap();
    let missing = unresolved[0]["missing_evidence"][0]
        .as_str()
        .expect("missing evidence")
        .to_string();

    let (code, page) = ctl.http("GET", "/", None, b"");
    assert_eq!(code, 200);
    assert!(page.contains(r#"<table id="unresolved">"#), "{page}");
    assert!(page.contains(&format!("{op} UNKNOWN")), "{page}");
    assert!(
        page.contains(&format!(
            "<li>{}</li>",
            controller::daemon::dashboard::escape(&missing)
        )),
        "{page}"
    );
    assert!(
        page.contains(r#"<td class="unowned">unowned</td>"#),
        "{page}"
    );
    assert!(page.contains(r#"<td class="unknown">UNKNOWN ("#), "{page}");
    assert!(page.contains("1 / 1 (1 UNKNOWN)"), "{page}");
    assert!(page.contains(r#"<table id="events">"#), "{page}");
    // UNKNOWN never wears the colours of success or failure.
    let style = page
        .split(".unknown{")
        .nth(1)
        .unwrap()
        .split('}')
        .next()
        .unwrap();
    assert!(
        !style.contains("#2a7a2a") && !style.contains("#b02020"),
        "{style}"
    );

    let (code, metrics) = ctl.http("GET", "/metrics", None, b"");
    assert_eq!(code, 200);
    for line in [
        "fleetweft_slots_occupied{rollout=\"r0\"} 1",
        "fleetweft_ops{state=\"unknown\"} 1",
        "fleetweft_ops{state=\"granted\"} 0",
        "fleetweft_ops{state=\"decided\"} 0",
        "fleetweft_ops{state=\"restoring\"} 0",
        "fleetweft_ops{state=\"settled\"} 0",
        "fleetweft_agents_connected 0",
    ] {
        assert!(metrics.contains(line), "{line} missing:\n{metrics}");
    }
    let seq = ctl.last_sequence().as_u64().unwrap();
    assert!(
        metrics.contains(&format!("fleetweft_log_sequence {seq}\n")),
        "{metrics}"
    );
    let age: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("fleetweft_oldest_unknown_op_age_seconds "))
        .expect("age metric")
        .parse()
        .unwrap();
    assert!((0.0..60.0).contains(&age), "{age}");

    // CLI: unresolved is bad news (1), in text and JSON.
    let out = ctl.cli(&["unresolved"], None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("unowned") && stdout.contains(&missing),
        "{stdout}"
    );
    let out = ctl.cli(&["unresolved", "--json"], None);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json, unresolved, "--json prints the API's DTO");
    // Proof of the silent canary and of the rollout: not verified (1).
    let out = ctl.cli(&["proof", "node-c", "--json"], None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["node"], "node-c");
    assert_ne!(json["verdict"], "verified");
    let out = ctl.cli(&["proof", "--rollout", "r0"], None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("rollout r0: "));
    // Status: 0, and --json is the API's DTO.
    let out = ctl.cli(&["status", "--json"], None);
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["unknown_ops"][0]["id"], serde_json::json!(op));
    assert_eq!(json["ops"]["unknown"], 1);
    assert_eq!(json["unresolved"], 1);
    assert!(json["last_sequence"].is_u64());
    let out = ctl.cli(&["status"], None);
    assert!(
        text(&out.stdout).contains("UNKNOWN ("),
        "{}",
        text(&out.stdout)
    );

    // The handover report's check command works: the controller probes the
    // silent node's route, records what it saw, and it settles nothing.
    let check = unresolved[0]["check_command"]
        .as_str()
        .expect("check command");
    assert_eq!(check, "fleetweft probe node-c");
    let out = ctl.cli(&["probe", "node-c"], None);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a probe records evidence: token needed"
    );
    let before = ctl.last_sequence().as_u64().unwrap();
    let out = ctl.cli(&["probe", "node-c", "--token-file", &token_file], None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("nothing answered"), "{stdout}");
    assert!(stdout.contains("unreachable"), "{stdout}");
    assert!(
        stdout.contains(&format!("record controller probe for {op}: unreachable")),
        "{stdout}"
    );
    // Who probed (`Acted`), then what was seen.
    assert_eq!(ctl.last_sequence().as_u64().unwrap(), before + 2);
    let status = ctl.wait_for_unknown();
    assert_eq!(
        status["ops"][0]["holds_slot"], true,
        "silence settles nothing"
    );
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

fn events_text(ctl: &Controller) -> String {
    let (code, body) = ctl.http("GET", "/api/events", None, b"");
    assert_eq!(code, 200, "{body}");
    body
}

#[test]
fn resolve_and_claim_need_the_token_name_bad_fields_and_refuse_contradictions() {
    let ctl = Controller::start();
    ctl.start_rollout("node-c");
    let status = ctl.wait_for_unknown();
    let op = status["ops"][0]["id"].as_str().unwrap().to_string();
    let release = status["ops"][0]["release"].as_str().unwrap().to_string();
    let before = ctl.last_sequence();
    let t = Some(ctl.token.as_str());
    let resolve = format!("/api/ops/{op}/resolve");
    let claim = format!("/api/ops/{op}/claim");
    let abandon = serde_json::json!({
        "observation": {"verdict": "unreachable", "identity": null, "process_healthy": false},
        "resolution": "abandon",
    })
    .to_string();
    let claim_body = r#"{"owner": "alice", "review_by": "2026-12-01T10:00:00Z"}"#;

    // 401 without (or with a wrong) token, nothing logged.
    for (path, body) in [(&resolve, abandon.as_str()), (&claim, claim_body)] {
        for token in [None, Some("0".repeat(64).as_str()), Some("")] {
            let (code, answer) = ctl.http("POST", path, token, body.as_bytes());
            assert_eq!(code, 401, "POST {path} with {token:?}: {answer}");
        }
    }
    let out = ctl.cli(&["claim", &op, "--owner", "x", "--review-by", "y"], None);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let out = ctl.cli(
        &["resolve", &op, "--resolution", "abandon", "--probe"],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_eq!(
        ctl.last_sequence(),
        before,
        "a refused write changed the log"
    );

    // 400 naming the field.
    let bad: [(&str, &str, &str); 12] = [
        (
            &resolve,
            r#"{"observation": {"verdict": "maybe"}, "resolution": "abandon"}"#,
            "observation.verdict",
        ),
        (
            &resolve,
            r#"{"observation": {"verdict": "pass", "identity": "zz"}, "resolution": "abandon"}"#,
            "observation.identity",
        ),
        (
            &resolve,
            r#"{"observation": {"verdict": "pass", "process_healthy": "yes"}, "resolution": "abandon"}"#,
            "observation.process_healthy",
        ),
        (
            &resolve,
            r#"{"observation": {"verdict": "pass", "process_restarts": "many"}, "resolution": "abandon"}"#,
            "observation.process_restarts",
        ),
        (
            &resolve,
            r#"{"observation": {"verdict": "pass", "process_restarts": 4294967296}, "resolution": "abandon"}"#,
            "observation.process_restarts",
        ),
        (
            &resolve,
            r#"{"observation": {"verdict": "pass", "process_uptime_ms": -5}, "resolution": "abandon"}"#,
            "observation.process_uptime_ms",
        ),
        (
            &resolve,
            r#"{"probe": true, "resolution": "forget"}"#,
            "resolution",
        ),
        (&resolve, r#"{"probe": true}"#, "resolution"),
        (
            &resolve,
            r#"{"probe": "yes", "resolution": "abandon"}"#,
            "probe",
        ),
        (
            &resolve,
            r#"{"probe": true, "resolution": "abandon", "colour": "red"}"#,
            "colour",
        ),
        (&claim, r#"{"owner": 7, "review_by": "soon"}"#, "owner"),
        (&claim, r#"{"owner": "alice"}"#, "review_by"),
    ];
    for (path, body, field) in bad {
        let (code, answer) = ctl.http("POST", path, t, body.as_bytes());
        assert_eq!(code, 400, "{path} {body}: {answer}");
        assert!(
            answer.contains(&format!("`{field}`")),
            "{body}: {answer} should name {field}"
        );
    }
    let (code, answer) = ctl.http("POST", &resolve, t, b"{not json");
    assert_eq!(code, 400, "{answer}");
    // Neither or both of observation and probe.
    let (code, answer) = ctl.http("POST", &resolve, t, br#"{"resolution": "abandon"}"#);
    assert_eq!(code, 400, "{answer}");

    // 404 for unknown ops.
    for path in [
        "/api/ops/op9/resolve",
        "/api/ops/nope/resolve",
        "/api/ops/op9/claim",
        "/api/ops/nope/claim",
    ] {
        let body = if path.ends_with("claim") {
            claim_body
        } else {
            abandon.as_str()
        };
        let (code, answer) = ctl.http("POST", path, t, body.as_bytes());
        assert_eq!(code, 404, "{path}: {answer}");
        assert!(json(&answer)["error"].is_string(), "{answer}");
    }
    assert_eq!(ctl.last_sequence(), before);

    // 409: an observation that contradicts the resolution, typed or probed.
    let contradicting = serde_json::json!({
        "observation": {"verdict": "unreachable", "identity": null, "process_healthy": false},
        "resolution": "confirm-new",
    })
    .to_string();
    let (code, answer) = ctl.http("POST", &resolve, t, contradicting.as_bytes());
    assert_eq!(code, 409, "{answer}");
    assert!(answer.contains("does not show"), "{answer}");
    let wrong_identity = serde_json::json!({
        "observation": {"verdict": "pass", "identity": "11".repeat(32), "process_healthy": true},
        "resolution": "confirm-new",
    })
    .to_string();
    let (code, answer) = ctl.http("POST", &resolve, t, wrong_identity.as_bytes());
    assert_eq!(code, 409, "{answer}");
    let out = ctl.cli(
        &["resolve", &op, "--resolution", "confirm-new", "--probe"],
        Some(&ctl.token),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let out = ctl.cli(
        &[
            "resolve",
            &op,
            "--resolution",
            "confirm-baseline",
            "--observed-verdict",
            "pass",
            "--observed-identity",
            &release,
            "--process-healthy",
        ],
        Some(&ctl.token),
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "no baseline: {}",
        text(&out.stderr)
    );
    // Claims the model refuses: empty owner, too long. Input the schema
    // declares invalid (pattern, maxLength): 400, like any malformed body.
    for body in [
        r#"{"owner": "  ", "review_by": "soon"}"#.to_string(),
        serde_json::json!({"owner": "a".repeat(129), "review_by": "soon"}).to_string(),
        serde_json::json!({"owner": "alice", "review_by": "t".repeat(129)}).to_string(),
    ] {
        let (code, answer) = ctl.http("POST", &claim, t, body.as_bytes());
        assert_eq!(code, 400, "{body}: {answer}");
    }
    assert_eq!(ctl.last_sequence(), before, "a refusal changed the log");
    let status = ctl.view();
    assert_eq!(status["ops"][0]["holds_slot"], true);
    assert_eq!(status["rollouts"][0]["slots_occupied"], 1);

    // An operator who saw the process's numbers records them with the
    // observation; the proof shows them (and judges the restart count).
    let out = ctl.cli(
        &[
            "resolve",
            &op,
            "--resolution",
            "abandon",
            "--observed-verdict",
            "unreachable",
            "--observed-identity",
            "none",
            "--process-uptime-ms",
            "0",
            "--process-restarts",
            "5",
        ],
        Some(&ctl.token),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // The recorded evidence (the operator typed the numbers): --cached.
    let (code, proof) = ctl.http("GET", "/api/nodes/node-c/proof?cached=true", None, b"");
    assert_eq!(code, 200, "{proof}");
    let proof = json(&proof);
    let process = proof["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["item"] == "process")
        .expect("process check")
        .clone();
    assert_eq!(process["observed"], "down, 5 restarts", "{proof}");
    assert_eq!(process["expected"], "running, at most 3 restarts");
    assert_eq!(process["reason"], "restart_loop");
    // Abandoned settles the verdict before any check is judged.
    assert_eq!(proof["reason"], "abandoned", "{proof}");
}

#[test]
fn a_claim_shows_its_owner_and_survives_a_restart_then_abandon_frees_the_slot() {
    let mut ctl = Controller::start();
    ctl.start_rollout("node-c");
    let status = ctl.wait_for_unknown();
    let op = status["ops"][0]["id"].as_str().unwrap().to_string();
    let t = Some(ctl.token.as_str());
    let (_, page) = ctl.http("GET", "/", None, b"");
    assert!(
        page.contains(r#"<td class="unowned">unowned</td>"#),
        "{page}"
    );

    // A claim is held by the operator who makes it (issue #28 item 2):
    // without an owner the admin's; another name is refused.
    let (code, answer) = ctl.http(
        "POST",
        &format!("/api/ops/{op}/claim"),
        t,
        br#"{"owner": "alice", "review_by": "2026-12-01T10:00:00Z"}"#,
    );
    assert_eq!(code, 400, "{answer}");
    assert!(
        answer.contains("held by the operator who makes it"),
        "{answer}"
    );
    let (code, answer) = ctl.http(
        "POST",
        &format!("/api/ops/{op}/claim"),
        t,
        br#"{"review_by": "2026-12-01T10:00:00Z"}"#,
    );
    assert_eq!(code, 200, "{answer}");
    assert!(
        answer.contains(&format!(
            "{op} claimed by admin, review by 2026-12-01T10:00:00Z"
        )),
        "{answer}"
    );
    let (_, unresolved) = ctl.http("GET", "/api/unresolved", None, b"");
    let unresolved = json(&unresolved);
    assert_eq!(unresolved[0]["op"], serde_json::json!(op));
    assert_eq!(unresolved[0]["owner"], "admin");
    assert_eq!(unresolved[0]["review_by"], "2026-12-01T10:00:00Z");
    let (_, page) = ctl.http("GET", "/", None, b"");
    assert!(!page.contains("unowned</td>"), "{page}");
    assert!(
        page.contains("<td>admin</td><td>2026-12-01T10:00:00Z</td>"),
        "{page}"
    );

    // A new claim, by another operator through the CLI, replaces the owner.
    let (code, added) = ctl.post_json(
        "/api/operators",
        &serde_json::json!({"name": "bob", "role": "approver"}),
    );
    assert_eq!(code, 200, "{added}");
    let bob = json(&added)["credential"]
        .as_str()
        .expect("bob's credential")
        .to_string();
    let out = ctl.cli(
        &["claim", &op, "--review-by", "2026-12-02T08:00:00Z"],
        Some(&bob),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("claimed by bob"),
        "{}",
        text(&out.stdout)
    );
    let claimed_at = ctl.last_sequence();

    // Durable: kill the controller and start it on the same data dir.
    ctl.restart();
    let t = Some(ctl.token.as_str());
    assert_eq!(ctl.last_sequence(), claimed_at, "replayed, nothing lost");
    let (_, unresolved) = ctl.http("GET", "/api/unresolved", None, b"");
    let unresolved = json(&unresolved);
    assert_eq!(unresolved[0]["owner"], "bob");
    assert_eq!(unresolved[0]["review_by"], "2026-12-02T08:00:00Z");
    let out = ctl.cli(&["unresolved"], None);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("bob") && !stdout.contains("unowned"),
        "{stdout}"
    );
    let events = events_text(&ctl);
    assert!(
        events.contains("claimed by admin") && events.contains("claimed by bob"),
        "{events}"
    );
    let status = ctl.view();
    assert_eq!(
        status["ops"][0]["holds_slot"], true,
        "a claim settles nothing"
    );

    // Abandon with a fresh controller probe: nothing answers on node-c,
    // which backs an abandon. The op settles and its slot is freed.
    let before = ctl.last_sequence().as_u64().unwrap();
    let out = ctl.cli(
        &[
            "resolve",
            &op,
            "--resolution",
            "abandon",
            "--probe",
            "--json",
        ],
        Some(&ctl.token),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let texts: Vec<&str> = answer["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with(&format!("operator observation for {op}: unreachable"))),
        "{texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| *t == format!("{op} settled: resolved (abandon), slot freed")),
        "{texts:?}"
    );
    assert!(ctl.last_sequence().as_u64().unwrap() >= before + 2);
    let status = ctl.view();
    assert_eq!(status["ops"][0]["holds_slot"], false);
    assert_eq!(status["ops"][0]["phase"], "settled");
    assert_eq!(status["rollouts"][0]["slots_occupied"], 0);
    assert!(status["nodes"][2]["live_op"].is_null(), "{status}");
    let events = events_text(&ctl);
    assert!(events.contains("settled: resolved (abandon)"), "{events}");
    let out = ctl.cli(&["unresolved", "--json"], None);
    let json_out: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        json_out
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u["op"] != serde_json::json!(op)),
        "{json_out}"
    );
    // Settled: a second resolve or a claim is refused (409), nothing logged.
    let seq = ctl.last_sequence();
    let (code, answer) = ctl.http(
        "POST",
        &format!("/api/ops/{op}/resolve"),
        t,
        br#"{"observation": {"verdict": "unreachable", "identity": null, "process_healthy": false}, "resolution": "abandon"}"#,
    );
    assert_eq!(code, 409, "{answer}");
    let (code, answer) = ctl.http(
        "POST",
        &format!("/api/ops/{op}/claim"),
        t,
        br#"{"review_by": "later"}"#,
    );
    assert_eq!(code, 409, "{answer}");
    assert_eq!(ctl.last_sequence(), seq);
}

/// Where the CLI takes the operator token from: `--token-file FILE`, else
/// `--pki DIR` (`DIR/operator-token`), else `FLEETWEFT_TOKEN`. A given file
/// or directory without a valid token is a usage error (2) naming the file,
/// never a fallback to the next source.
#[test]
fn the_cli_takes_the_token_from_the_pki_dir() {
    let ctl = Controller::start();
    let id = ctl.start_rollout("node-a");
    let pki = ctl.token_file.parent().expect("pki dir").to_path_buf();
    let wrong = "0".repeat(64);
    let cli = |args: &[&str], env: Option<&str>| {
        let mut all = args.to_vec();
        all.push("--json");
        ctl.cli(&all, env)
    };

    // --pki DIR alone: the write goes through and is logged.
    let before = ctl.last_sequence();
    let out = cli(&["rollout", "pause", &id, "--pki", &s(&pki)], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_ne!(ctl.last_sequence(), before);

    // --pki beats a wrong FLEETWEFT_TOKEN.
    let before = ctl.last_sequence();
    let out = cli(&["rollout", "resume", &id, "--pki", &s(&pki)], Some(&wrong));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_ne!(ctl.last_sequence(), before);

    // A directory without an operator-token file: exit 2 naming the file,
    // nothing logged, and no fallback to the (valid) environment token.
    let empty = tempfile::tempdir().expect("temp dir");
    let missing = empty.path().join("operator-token");
    let before = ctl.last_sequence();
    let out = cli(
        &["rollout", "pause", &id, "--pki", &s(empty.path())],
        Some(&ctl.token),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&s(&missing)) && stderr.contains("--pki"),
        "{stderr} should name {} and --pki",
        missing.display()
    );
    // A directory whose token file does not hold a token: named too.
    std::fs::write(&missing, "not a token\n").expect("write");
    let out = cli(&["rollout", "pause", &id, "--pki", &s(empty.path())], None);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&s(&missing)) && stderr.contains("not an operator token"),
        "{stderr}"
    );
    assert_eq!(
        ctl.last_sequence(),
        before,
        "a refused write changed the log"
    );

    // --token-file beats --pki: a good file wins over a bad directory, and a
    // bad file is an error even with a good directory.
    let out = cli(
        &[
            "rollout",
            "pause",
            &id,
            "--token-file",
            &s(&ctl.token_file),
            "--pki",
            &s(empty.path()),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let before = ctl.last_sequence();
    let out = cli(
        &[
            "rollout",
            "resume",
            &id,
            "--token-file",
            &s(&missing),
            "--pki",
            &s(&pki),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("--token-file"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(ctl.last_sequence(), before);

    // The help text says the order.
    let out = ctl.cli(&["rollout", "pause", "--help"], None);
    let help = text(&out.stdout);
    assert!(help.contains("--pki <DIR>"), "{help}");
    assert!(help.contains("FLEETWEFT_TOKEN"), "{help}");
}

/// The routes `controller::daemon::http::router` serves; kept by hand so a route
/// added to the router without documentation fails here.
const ROUTER_ROUTES: &[(&str, &str)] = &[
    ("/", "get"),
    ("/metrics", "get"),
    ("/fleet", "get"),
    ("/rollouts", "get"),
    ("/rollouts/{id}", "get"),
    ("/nodes", "get"),
    ("/nodes/{name}", "get"),
    ("/ops", "get"),
    ("/ops/{op}", "get"),
    ("/ops/{op}/act", "post"),
    ("/rollouts/{id}/act", "post"),
    ("/nodes/{name}/act", "post"),
    ("/login", "get"),
    ("/login", "post"),
    ("/logout", "post"),
    ("/ops/{op}/diagram.svg", "get"),
    ("/handover", "get"),
    ("/live", "get"),
    ("/live.js", "get"),
    ("/events", "get"),
    ("/api/status", "get"),
    ("/api/events", "get"),
    ("/api/events/stream", "get"),
    ("/api/bundles", "post"),
    ("/api/chunks/{sha256}", "head"),
    ("/api/chunks/{sha256}", "put"),
    ("/api/releases", "get"),
    ("/api/releases", "post"),
    ("/api/releases/{digest}", "delete"),
    ("/api/configs/{app}", "get"),
    ("/api/configs/{app}", "post"),
    ("/api/operators", "get"),
    ("/api/operators", "post"),
    ("/api/operators/{name}/rotate", "post"),
    ("/api/operators/{name}/revoke", "post"),
    ("/api/rollouts", "get"),
    ("/api/rollouts", "post"),
    ("/api/rollouts/{id}", "get"),
    ("/api/nodes", "get"),
    ("/api/nodes", "post"),
    ("/api/nodes/{name}/labels", "post"),
    ("/api/nodes/{name}/retire", "post"),
    ("/api/rollouts/{id}/pause", "post"),
    ("/api/rollouts/{id}/resume", "post"),
    ("/api/rollouts/{id}/approve", "post"),
    ("/api/rollouts/{id}/proof", "get"),
    ("/api/rollouts/{id}/explore", "get"),
    ("/api/nodes/{name}/proof", "get"),
    ("/api/nodes/{name}/probe", "post"),
    ("/api/nodes/{name}/observe", "post"),
    ("/api/nodes/{name}/release", "post"),
    ("/api/nodes/{name}/revoke-cert", "post"),
    ("/api/unresolved", "get"),
    ("/api/ops", "get"),
    ("/api/ops/{op}", "get"),
    ("/api/ops/{op}/resolve", "post"),
    ("/api/ops/{op}/claim", "post"),
    ("/api/ops/{op}/rollback", "post"),
    ("/api/openapi.json", "get"),
];

/// `POST /api/ops/{op}/rollback` (and `fleetweft rollback`): the token is
/// required, a body field is refused by name, an unknown op is 404, and an
/// op with no stored commit (its node never answered here) is refused with
/// the reason; nothing is logged by any of them.
#[test]
fn rollback_needs_the_token_and_refuses_an_op_that_never_switched() {
    let ctl = Controller::start();
    ctl.start_rollout("node-c");
    let status = ctl.wait_for_unknown();
    let op = status["ops"][0]["id"].as_str().unwrap().to_string();
    let before = ctl.last_sequence();
    let path = format!("/api/ops/{op}/rollback");
    for token in [None, Some("0".repeat(64).as_str())] {
        let (code, answer) = ctl.http("POST", &path, token, b"{}");
        assert_eq!(code, 401, "{token:?}: {answer}");
    }
    let t = Some(ctl.token.as_str());
    let (code, answer) = ctl.http("POST", &path, t, br#"{"force": true}"#);
    assert_eq!(code, 400, "{answer}");
    assert!(answer.contains("field `force`"), "{answer}");
    let (code, answer) = ctl.http("POST", "/api/ops/op9/rollback", t, b"");
    assert_eq!(code, 404, "{answer}");
    let (code, answer) = ctl.http("POST", &path, t, b"");
    assert_eq!(code, 409, "{answer}");
    assert!(answer.contains("nothing to roll back"), "{answer}");
    // A refusal is bad news (exit 1), not a usage error.
    let out = ctl.cli(&["rollback", &op], t);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("nothing to roll back"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        ctl.last_sequence(),
        before,
        "a refused write changed the log"
    );
}

#[test]
fn the_openapi_document_matches_the_router() {
    let ctl = Controller::start();
    ctl.start_rollout("node-c");
    let (code, body) = ctl.http("GET", "/api/openapi.json", None, b"");
    assert_eq!(code, 200, "{body}");
    let doc = json(&body);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"), "{doc}");
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    let paths = doc["paths"].as_object().expect("paths");

    // An unrouted path is a 404 and a wrong method a 405, both with the
    // one JSON error shape; so is a query string that does not parse.
    let (code, body) = ctl.http("GET", "/api/nowhere", None, b"");
    assert_eq!(code, 404);
    assert!(json(&body)["error"].is_string(), "{body}");
    let (code, body) = ctl.http("GET", "/api/bundles", None, b"");
    assert_eq!(code, 405);
    assert!(json(&body)["error"].is_string(), "{body}");
    let (code, body) = ctl.http("GET", "/api/events?limit=null&limit=null", None, b"");
    assert_eq!(code, 400, "{body}");
    assert!(json(&body)["error"].is_string(), "{body}");
    let (code, body) = ctl.http("GET", "/api/events?limit=1001", None, b"");
    assert_eq!(code, 400, "{body}");
    assert!(
        json(&body)["error"].as_str().unwrap().contains("`limit`"),
        "{body}"
    );
    // The documented limit is the enforced one.
    let limit = &doc["paths"]["/api/events"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "limit")
        .unwrap()["schema"];
    assert_eq!(limit["maximum"], 1000, "{limit}");
    assert_eq!(limit["minimum"], 1, "{limit}");
    // The lists answer what the schema says: arrays.
    for path in ["/api/events", "/api/rollouts", "/api/unresolved"] {
        let schema =
            &doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"];
        assert_eq!(schema["type"], "array", "{path}: {schema}");
        assert!(
            json(&ctl.http("GET", path, None, b"").1).is_array(),
            "{path}"
        );
    }
    // The read routes answer the same DTOs as /api/status.
    let status = json(&ctl.http("GET", "/api/status", None, b"").1);
    assert_eq!(
        json(&ctl.http("GET", "/api/rollouts", None, b"").1),
        status["rollouts"]
    );
    let nodes = json(&ctl.http("GET", "/api/nodes", None, b"").1);
    assert_eq!(nodes["items"].as_array().map(Vec::len), Some(3), "{nodes}");
    assert_eq!(nodes["total"], 3);
    assert!(nodes["next"].is_null());
    assert_eq!(status["nodes"]["enrolled"], 3);
    // One rollout adds its followers to the summary's entry.
    let mut r0 = json(&ctl.http("GET", "/api/rollouts/r0", None, b"").1);
    assert_eq!(r0["followers"], serde_json::json!([]));
    r0.as_object_mut().unwrap().remove("followers");
    assert_eq!(r0, status["rollouts"][0]);
    let (code, _) = ctl.http("GET", "/api/rollouts/r9", None, b"");
    assert_eq!(code, 404);

    let mut documented = Vec::new();
    for (path, methods) in paths {
        for (method, operation) in methods.as_object().unwrap() {
            documented.push((path.clone(), method.clone()));
            let concrete = path
                .replace("{id}", "r0")
                .replace("{name}", "node-a")
                .replace("{op}", "op0")
                .replace("{sha256}", &"0".repeat(64))
                .replace("{digest}", &"0".repeat(64));
            // The console's change ticks follow the log; their bounded form ends.
            let concrete = if path == "/live" {
                "/live?follow=false".to_string()
            } else {
                concrete
            };
            let write = method == "post" || method == "put" || method == "delete";
            // The console's forms act with a session cookie, not a bearer
            // token; logging in needs neither.
            let form = path == "/login" || path == "/logout" || path.ends_with("/act");
            // The event stream is the one guarded read: each holds one of
            // STREAMS_MAX slots, which anonymous clients must not exhaust.
            let guarded = (write && path != "/login") || path == "/api/events/stream";
            assert_eq!(
                operation.get("security").is_some(),
                guarded,
                "{method} {path}: security exactly on writes (but the login) and the event stream"
            );
            let scheme = if form { "session" } else { "bearer" };
            if let Some(security) = operation.get("security") {
                assert!(
                    security.to_string().contains(scheme),
                    "{method} {path}: {security}"
                );
            }
            // (The console's forms take form bodies, not this JSON: their
            // 401 without a session is console_actions.rs's.)
            if write && !form {
                // Without a token: 401, so the route exists and is guarded.
                let verb = method.to_uppercase();
                let (code, answer) = ctl.http(&verb, &concrete, None, b"{}");
                assert_eq!(code, 401, "{method} {path}: {answer}");
            }
            let token = write.then_some(ctl.token.as_str());
            let (code, answer) = ctl.http(&method.to_uppercase(), &concrete, token, b"{}");
            assert_ne!(code, 405, "{method} {path} is not routed: {answer}");
            // A HEAD answer has no body: its 404 is the answer, not a miss.
            if code == 404 && method != "head" {
                let error = serde_json::from_str::<serde_json::Value>(&answer)
                    .ok()
                    .and_then(|v| v["error"].as_str().map(String::from));
                assert!(
                    error.is_some(),
                    "{method} {concrete} is not routed (bare 404): {answer:?}"
                );
            }
            if let Some(body) = operation.get("requestBody") {
                assert!(body["content"].as_object().is_some_and(|c| !c.is_empty()));
            }
        }
    }
    for (path, method) in ROUTER_ROUTES {
        assert!(
            documented.contains(&(path.to_string(), method.to_string())),
            "{method} {path} is routed but not documented"
        );
    }
    assert_eq!(documented.len(), ROUTER_ROUTES.len(), "{documented:?}");
}

/// The paged reads: a page of nodes filtered by label and state, the
/// rollout's ops, one op by id (404 naming an op never granted), and a
/// JSON 400 naming each bad parameter.
#[test]
fn paged_reads_filter_and_name_bad_parameters() {
    let ctl = Controller::start();
    ctl.start_rollout("node-c");
    let status = ctl.wait_for_unknown();
    let op = status["ops"][0]["id"].as_str().unwrap().to_string();
    let page = ctl.get_json("/api/nodes?state=unknown");
    let names: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["name"].as_str())
        .collect();
    assert_eq!(names, ["node-c"], "{page}");
    assert!(page.get("total").is_none(), "a filtered page has no total");
    let page = ctl.get_json("/api/nodes?limit=1");
    assert_eq!(page["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(page["next"], "node-a");
    let page = ctl.get_json("/api/nodes?limit=1&after=node-a");
    assert_eq!(page["items"][0]["name"], "node-b");
    let page = ctl.get_json("/api/ops?rollout=r0&state=unknown");
    assert_eq!(page["items"][0]["id"], serde_json::json!(op));
    assert_eq!(page["items"][0]["state"], "unknown");
    let one = ctl.get_json(&format!("/api/ops/{op}"));
    assert_eq!(one["id"], serde_json::json!(op));
    assert_eq!(one["holds_slot"], true);
    let (code, body) = ctl.http("GET", "/api/ops/op99", None, b"");
    assert_eq!(code, 404, "{body}");
    assert!(
        json(&body)["error"].as_str().unwrap().contains("op99"),
        "{body}"
    );
    for (path, parameter, expected) in [
        ("/api/nodes?limit=0", "limit", 400),
        ("/api/nodes?limit=1001", "limit", 400),
        ("/api/nodes?state=sleepy", "state", 400),
        ("/api/nodes?label=region", "label", 400),
        ("/api/nodes?after=nobody", "after", 404),
        ("/api/nodes?colour=red", "colour", 400),
        ("/api/ops?rollout=r9", "rollout", 404),
        ("/api/ops?state=sleepy", "state", 400),
        ("/api/ops?after=x", "after", 400),
    ] {
        // A cursor or a filter naming nothing is 404, a malformed one 400.
        let (code, body) = ctl.http("GET", path, None, b"");
        assert_eq!(code, expected, "{path}: {body}");
        let error = json(&body)["error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            error.starts_with(&format!("parameter `{parameter}`")),
            "{path}: {body}"
        );
    }
    // The CLI pages through the same endpoints.
    let out = ctl.cli(&["ops", "--rollout", "r0", "--state", "unknown"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(&op), "{}", text(&out.stdout));
    let out = ctl.cli(&["nodes", "--state", "unknown", "--json"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let page: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(page["items"][0]["name"], "node-c");
    let out = ctl.cli(&["nodes", "--state", "sleepy"], None);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("parameter `state`"),
        "{}",
        text(&out.stderr)
    );
}
