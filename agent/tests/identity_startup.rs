//! The real `fleetweft-agent` binary refuses to start on a bad identity:
//! a key that is not its certificate's, another node's certificate, a
//! foreign CA's certificate, an expired one. Each exits non-zero within a
//! second, naming the file, before it dials anything.

use protocol::pki::{init_fleet, FleetPki};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

/// How fast a refusal must be: the issue's acceptance line.
const REFUSAL_WITHIN: Duration = Duration::from_secs(1);
/// The exit code of an unusable config or identity (`main.rs`).
const EXIT_BAD_CONFIG: i32 = 2;

fn fleet(root: &Path, name: &str) -> FleetPki {
    let nodes = vec!["node-a".to_string(), "node-b".to_string()];
    init_fleet(&root.join(name), &nodes, "localhost").expect("pki")
}

fn write_config(root: &Path, node: &str, ca: &Path, cert: &Path, key: &Path) -> PathBuf {
    let path = root.join(format!(
        "agent-{}.toml",
        cert.file_stem().unwrap_or_default().to_string_lossy()
    ));
    let text = format!(
        r#"node = "{node}"
data_dir = "{data}"
public_port = 1
[controller]
addr = "127.0.0.1:9"
[tls]
ca = "{ca}"
cert = "{cert}"
key = "{key}"
[bundles]
pubkey = "{pubkey}"
"#,
        data = root.join("data").display(),
        ca = ca.display(),
        cert = cert.display(),
        key = key.display(),
        pubkey = root.join("bundle.pub").display(),
    );
    std::fs::write(&path, text).expect("write config");
    path
}

/// A node-a certificate from `pki`'s CA over node-a's key that expired
/// yesterday.
fn expired_node_a(pki: &FleetPki, root: &Path) -> PathBuf {
    let read = |p: PathBuf| std::fs::read_to_string(p).expect("read pem");
    let ca_key = rcgen::KeyPair::from_pem(&read(pki.ca_key())).expect("ca key");
    let ca = rcgen::CertificateParams::from_ca_cert_pem(&read(pki.ca_cert()))
        .expect("ca params")
        .self_signed(&ca_key)
        .expect("issuer");
    let key = rcgen::KeyPair::from_pem(&read(pki.node_key("node-a"))).expect("key");
    let mut params =
        rcgen::CertificateParams::new(vec!["node-a.nodes.fleetweft".to_string()]).expect("params");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let day = Duration::from_secs(86_400);
    let now = SystemTime::now();
    params.not_before = (now - 30 * day).into();
    params.not_after = (now - day).into();
    let cert = params.signed_by(&key, &ca, &ca_key).expect("sign");
    let path = root.join("expired-node-a.pem");
    std::fs::write(&path, cert.pem()).expect("write");
    path
}

/// Runs the agent on `config`; returns its exit code, how long it took and
/// its stderr.
fn run_agent(config: &Path) -> (Option<i32>, Duration, String) {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_fleetweft-agent"))
        .arg("--config")
        .arg(config)
        .output()
        .expect("run fleetweft-agent");
    (
        out.status.code(),
        started.elapsed(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_bad_identity_stops_the_agent_within_a_second_naming_the_file() {
    let temp = tempfile::tempdir().expect("tempdir");
    let root = temp.path();
    let ours = fleet(root, "ours");
    let foreign = fleet(root, "foreign");
    let expired = expired_node_a(&ours, root);
    let cases: Vec<(&str, &str, PathBuf, PathBuf, &str)> = vec![
        // (case, configured node, cert, key, what stderr must name)
        (
            "mismatched key",
            "node-a",
            ours.node_cert("node-a"),
            ours.node_key("node-b"),
            "node-b-key.pem",
        ),
        (
            "another node's certificate",
            "node-b",
            ours.node_cert("node-a"),
            ours.node_key("node-a"),
            "node-a.pem",
        ),
        (
            "a foreign CA's certificate",
            "node-a",
            foreign.node_cert("node-a"),
            foreign.node_key("node-a"),
            "foreign/nodes/node-a.pem",
        ),
        (
            "an expired certificate",
            "node-a",
            expired.clone(),
            ours.node_key("node-a"),
            "expired-node-a.pem",
        ),
    ];
    for (case, node, cert, key, named) in cases {
        let config = write_config(root, node, &ours.ca_cert(), &cert, &key);
        let (code, took, stderr) = run_agent(&config);
        assert_eq!(
            code,
            Some(EXIT_BAD_CONFIG),
            "{case}: exit code; stderr: {stderr}"
        );
        assert!(
            took < REFUSAL_WITHIN,
            "{case}: took {took:?}; stderr: {stderr}"
        );
        assert!(
            stderr.contains(named),
            "{case}: stderr does not name {named}: {stderr}"
        );
        assert!(stderr.contains("identity refused"), "{case}: {stderr}");
    }
}

#[test]
fn a_good_identity_gets_past_the_check() {
    // The same harness with a good identity fails later, on the missing
    // bundle key: proof that the refusals above come from the identity.
    let temp = tempfile::tempdir().expect("tempdir");
    let root = temp.path();
    let ours = fleet(root, "ours");
    let config = write_config(
        root,
        "node-a",
        &ours.ca_cert(),
        &ours.node_cert("node-a"),
        &ours.node_key("node-a"),
    );
    let (code, _, stderr) = run_agent(&config);
    assert_eq!(code, Some(1), "stderr: {stderr}");
    assert!(!stderr.contains("identity refused"), "{stderr}");
    assert!(stderr.contains("bundle.pub"), "{stderr}");
}
