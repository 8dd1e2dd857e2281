//! Configuration as its own release layer (issue #24 item 1) on real
//! agents: after v1 (code only) everywhere, `fleetweft config set` records
//! a revision with a secret and a file, and a rollout of the same code is
//! a configuration rollout, not a no-op: it completes verified with every
//! route naming the deployment (code plus configuration) and every app
//! started with the values, the secret and the file; a second revision
//! rolls out the same way. The secret's value is in no event text, no
//! API answer and no CLI output, only its fingerprint.

use crate::fleet::loopback::Loopback;
use demo::NODES;
use model::Digest;
use std::time::Duration;

/// How long the whole test may take.
const TEST: Duration = Duration::from_secs(420);
/// The secret's value: must appear only in the apps' environment.
const SECRET: &str = "s3cret-value-4711";

/// The environment of `node`'s app process serving `deployment` (the
/// agent starts it with `FLEETWEFT_DEPLOYMENT`), as `KEY=VALUE` lines.
fn app_environment(fleet: &Loopback, node: &str, deployment: Digest) -> Vec<String> {
    let data = fleet.dir.join(format!("{node}-data"));
    let wanted = format!("FLEETWEFT_DEPLOYMENT={}", deployment.to_hex());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in entries.flatten() {
        let Ok(cwd) = std::fs::read_link(entry.path().join("cwd")) else {
            continue;
        };
        let data = data.canonicalize().unwrap_or(data.clone());
        if !cwd.starts_with(&data) {
            continue;
        }
        let Ok(raw) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let vars: Vec<String> = raw
            .split(|b| *b == 0)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect();
        if vars.contains(&wanted) {
            return vars;
        }
    }
    Vec::new()
}

fn var<'a>(vars: &'a [String], name: &str) -> Option<&'a str> {
    let prefix = format!("{name}=");
    vars.iter().find_map(|v| v.strip_prefix(&prefix))
}

/// Sets `hello`'s configuration through the CLI; returns its fingerprint.
fn set_config(fleet: &Loopback, greeting: &str) -> Digest {
    let file = fleet.dir.join("app.toml");
    std::fs::write(&file, format!("greeting = {greeting:?}\n")).expect("write the file");
    let file_arg = format!("app.toml={}", file.display());
    let greeting_arg = format!("GREETING={greeting}");
    let token_arg = format!("TOKEN={SECRET}");
    let out = fleet.cli(&[
        "config",
        "set",
        "hello",
        &greeting_arg,
        &token_arg,
        "--secret",
        "TOKEN",
        "--file",
        &file_arg,
    ]);
    assert!(out.contains("TOKEN (secret, fingerprint "), "{out}");
    assert!(!out.contains(SECRET), "{out}");
    let shown = fleet.cli(&["config", "show", "hello", "--json"]);
    assert!(!shown.contains(SECRET), "{shown}");
    let view: api::view::config::ConfigView = serde_json::from_str(&shown).expect("config JSON");
    let hex = view.fingerprint;
    let bytes: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex"))
        .collect();
    Digest(bytes.try_into().expect("32 bytes"))
}

/// Rolls out `code` (the app has a configuration now) and checks every
/// node serves `deployment` with the app started with `greeting`.
async fn rolls_out_configured(
    fleet: &Loopback,
    id: &str,
    code: Digest,
    fingerprint: Digest,
    greeting: &str,
) -> Digest {
    let deployment = releases::config::deployment_digest(code, fingerprint);
    fleet.roll_out(id, code, &NODES).await;
    for node in NODES {
        let answer = fleet.public(node).await.expect("the route answers");
        assert_eq!(answer.1.as_deref(), Some(&*deployment.to_hex()), "{node}");
        let vars = app_environment(fleet, node, deployment);
        assert_eq!(var(&vars, "GREETING"), Some(greeting), "{node}: {vars:?}");
        assert_eq!(var(&vars, "TOKEN"), Some(SECRET), "{node}");
        assert_eq!(
            var(&vars, "FLEETWEFT_CONFIG_FINGERPRINT"),
            Some(&*fingerprint.to_hex()),
            "{node}"
        );
        let dir = var(&vars, "FLEETWEFT_CONFIG_DIR").expect("the configuration directory");
        let file = std::fs::read_to_string(std::path::Path::new(dir).join("app.toml"));
        assert_eq!(
            file.ok(),
            Some(format!("greeting = {greeting:?}\n")),
            "{node}"
        );
        // The live proof reads the serving process's fingerprint back.
        let p: proof::NodeProof = fleet
            .api
            .get(&format!("/api/nodes/{node}/proof"))
            .await
            .expect("the node's proof");
        assert_eq!(p.verdict, proof::Verdict::Verified, "{p:#?}");
        let row = p.checks.iter().find(|c| c.item == "configuration");
        let seen = row.map(|c| (c.observed.clone(), c.ok));
        assert_eq!(
            seen,
            Some((Some(fingerprint.to_hex()), Some(true))),
            "{p:#?}"
        );
    }
    deployment
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_rollout_deploys_values_secrets_and_files_and_is_never_a_no_op() {
    tokio::time::timeout(TEST, config_body())
        .await
        .expect("the test overran its deadline");
}

async fn config_body() {
    let mut fleet = Loopback::in_temp_dir("");
    fleet.sign_hello(&["v1"]);
    fleet.start_controller().await;
    for node in NODES {
        fleet.start_agent(node, &[]);
    }
    fleet.upload_hello(&["v1"]).await;
    fleet
        .wait("every agent connected", |s| {
            s.nodes.iter().all(|n| n.connected)
        })
        .await;
    let v1 = fleet.digest("v1");
    fleet.roll_out("r0", v1, &NODES).await;

    let first = set_config(&fleet, "hi");
    let d1 = rolls_out_configured(&fleet, "r1", v1, first, "hi").await;
    assert_ne!(
        d1, v1,
        "the same code with a configuration is another deployment"
    );
    let second = set_config(&fleet, "ho");
    assert_ne!(second, first);
    let d2 = rolls_out_configured(&fleet, "r2", v1, second, "ho").await;
    assert_ne!(d2, d1);

    let events = fleet.event_text().await;
    assert!(
        events.contains("configuration hello revision 2"),
        "{events}"
    );
    assert!(!events.contains(SECRET), "{events}");
    let api: serde_json::Value = fleet.api.get("/api/configs/hello").await.expect("the API");
    assert!(!api.to_string().contains(SECRET), "{api}");
    fleet.verify_log().await;
}
