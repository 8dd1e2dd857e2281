//! `fleetweft pki init` and `fleetweft bundle keygen/sign/verify` run as the
//! operator runs them: real files, exit codes and messages.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};

fn fleetweft(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fleetweft"))
        .args(args)
        .output()
        .expect("run fleetweft")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).expect("metadata").permissions().mode() & 0o777
}

fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// Asserts exit 1 and that stderr mentions `needle`.
fn assert_refused(out: &Output, needle: &str) {
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
}

/// A key pair made by `bundle keygen`: (secret, public).
fn keygen(dir: &Path) -> (PathBuf, PathBuf) {
    assert_ok(&fleetweft(&["bundle", "keygen", "--out", path(dir)]));
    (
        dir.join("bundle-signing.key"),
        dir.join("bundle-signing.pub"),
    )
}

/// Signs `app` into `out` with `bundle sign`; returns the printed digest.
fn sign(key: &Path, app: &Path, out: &Path) -> String {
    let result = fleetweft(&[
        "bundle",
        "sign",
        "--key",
        path(key),
        "--app",
        path(app),
        "--name",
        "hello",
        "--version",
        "1.2.3",
        "--probe-path",
        "/health",
        "--expect-status",
        "200",
        "--expect-body",
        "ok",
        "--out",
        path(out),
    ]);
    assert_ok(&result);
    text(&result.stdout).trim().to_string()
}

fn verify(public: &Path, bundle: &Path) -> Output {
    fleetweft(&["bundle", "verify", "--pubkey", path(public), path(bundle)])
}

/// Keys, an app and its signed bundle in a temp dir: (temp, public, bundle).
fn signed_bundle() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let temp = tempfile::tempdir().expect("tempdir");
    let (secret, public) = keygen(&temp.path().join("keys"));
    let app = temp.path().join("app.py");
    fs::write(&app, "print('hello')\n").expect("write app");
    let bundle = temp.path().join("hello.bundle");
    sign(&secret, &app, &bundle);
    (temp, public, bundle)
}

#[test]
fn pki_init_writes_the_layout() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("pki");
    let out = fleetweft(&[
        "pki",
        "init",
        "--dir",
        path(&dir),
        "--nodes",
        "node-a,node-b,node-c",
    ]);
    assert_ok(&out);
    // Every file a config names is printed with the key that takes it.
    let printed = String::from_utf8_lossy(&out.stdout);
    for (key, file) in [
        ("cert", "controller.pem"),
        ("key", "controller-key.pem"),
        ("operator_token", "operator-token"),
        ("ca", "ca.pem"),
        ("cert", "nodes/node-b.pem"),
        ("key", "nodes/node-b-key.pem"),
    ] {
        let line = format!("{key} = {:?}", dir.join(file).display().to_string());
        assert!(printed.contains(&line), "{line} missing from:\n{printed}");
    }
    for public in ["ca.pem", "controller.pem", "nodes/node-c.pem"] {
        assert_eq!(mode(&dir.join(public)), 0o644, "{public}");
    }
    for secret in [
        "ca-key.pem",
        "controller-key.pem",
        "nodes/node-a-key.pem",
        "operator-token",
    ] {
        assert_eq!(mode(&dir.join(secret)), 0o600, "{secret}");
    }
    // The node id comes from the certificate.
    let certs = protocol::pki::load_certs(&dir.join("nodes/node-b.pem")).expect("certs");
    assert_eq!(
        protocol::pki::node_id_from_cert(&certs[0]).expect("node id"),
        "node-b"
    );
    // The token is never printed.
    let token = protocol::pki::load_operator_token(&dir.join("operator-token")).expect("token");
    assert!(!text(&out.stdout).contains(&token));
}

#[test]
fn pki_init_refuses_an_existing_dir() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("pki");
    assert_ok(&fleetweft(&[
        "pki",
        "init",
        "--dir",
        path(&dir),
        "--nodes",
        "a",
    ]));
    let ca = fs::read(dir.join("ca.pem")).expect("ca");
    let out = fleetweft(&["pki", "init", "--dir", path(&dir), "--nodes", "b"]);
    assert_refused(&out, "already exists");
    assert_eq!(fs::read(dir.join("ca.pem")).expect("ca"), ca);
}

#[test]
fn pki_init_refuses_bad_node_ids() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("pki");
    let out = fleetweft(&["pki", "init", "--dir", path(&dir), "--nodes", "ok,Not_OK"]);
    assert_refused(&out, "invalid node id \"Not_OK\"");
    assert!(!dir.exists());
    assert_eq!(fs::read_dir(temp.path()).expect("read").count(), 0);
}

#[test]
fn sign_then_verify() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (secret, public) = keygen(&temp.path().join("keys"));
    assert_eq!(mode(&secret), 0o600);
    let app = temp.path().join("app.py");
    fs::write(&app, "print('hello')\n").expect("write app");
    let bundle = temp.path().join("hello.bundle");
    let digest = sign(&secret, &app, &bundle);
    let bytes = fs::read(&bundle).expect("bundle");
    let expected: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(digest, expected);

    let out = verify(&public, &bundle);
    assert_ok(&out);
    let stdout = text(&out.stdout);
    for needle in ["hello", "1.2.3", &expected] {
        assert!(stdout.contains(needle), "{needle} not in: {stdout}");
    }
    let key = protocol::bundle::load_verifying_key(&public).expect("public key");
    let verified = protocol::bundle::verify(&key, &bytes).expect("verify");
    assert_eq!(verified.manifest.run, ["python3", "app.py"]);
}

/// `bundle verify --json`: the same answer as one JSON object, a refusal
/// included (exit 1, the reason in `error`); the text output is unchanged.
#[test]
fn verify_json_answers_both_ways() {
    let (_temp, public, bundle) = signed_bundle();
    let json = |out: &Output| -> serde_json::Value {
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
    };
    let out = fleetweft(&[
        "bundle",
        "verify",
        "--json",
        "--pubkey",
        path(&public),
        path(&bundle),
    ]);
    assert_ok(&out);
    let v = json(&out);
    let digest: String = Sha256::digest(fs::read(&bundle).expect("bundle"))
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(v["name"], "hello");
    assert_eq!(v["version"], "1.2.3");
    assert_eq!(v["digest"], serde_json::json!(digest));
    assert_eq!(v["probe"]["path"], "/health");
    let mut bytes = fs::read(&bundle).expect("bundle");
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    fs::write(&bundle, bytes).expect("write");
    let out = fleetweft(&[
        "bundle",
        "verify",
        "--json",
        "--pubkey",
        path(&public),
        path(&bundle),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["verified"], false, "{v}");
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|e| e.contains("app digest mismatch")),
        "{v}"
    );
    // Without --json the refusal is as before: on stderr, exit 1.
    assert_refused(&verify(&public, &bundle), "app digest mismatch");
}

#[test]
fn verify_refuses_a_tampered_app() {
    let (_temp, public, bundle) = signed_bundle();
    let mut bytes = fs::read(&bundle).expect("bundle");
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    fs::write(&bundle, bytes).expect("write");
    assert_refused(&verify(&public, &bundle), "app digest mismatch");
}

#[test]
fn verify_refuses_a_foreign_key() {
    let (temp, _public, bundle) = signed_bundle();
    let (_, foreign) = keygen(&temp.path().join("foreign"));
    assert_refused(&verify(&foreign, &bundle), "unknown key");
}

#[test]
fn verify_refuses_a_non_bundle_and_a_truncated_one() {
    let (temp, public, bundle) = signed_bundle();
    assert_refused(
        &verify(&public, &temp.path().join("app.py")),
        "not a Fleetweft bundle",
    );
    let bytes = fs::read(&bundle).expect("bundle");
    fs::write(&bundle, &bytes[..bytes.len() / 2]).expect("write");
    assert_refused(&verify(&public, &bundle), "truncated");
    assert_refused(&verify(&public, &temp.path().join("missing")), "missing");
}

#[test]
fn keygen_and_sign_refuse_to_overwrite() {
    let (temp, _public, bundle) = signed_bundle();
    let keys = temp.path().join("keys");
    let before = fs::read(keys.join("bundle-signing.key")).expect("key");
    let out = fleetweft(&["bundle", "keygen", "--out", path(&keys)]);
    assert_refused(&out, "already exists");
    assert_eq!(
        fs::read(keys.join("bundle-signing.key")).expect("key"),
        before
    );

    let out = fleetweft(&[
        "bundle",
        "sign",
        "--key",
        path(&keys.join("bundle-signing.key")),
        "--app",
        path(&temp.path().join("app.py")),
        "--name",
        "hello",
        "--version",
        "2",
        "--probe-path",
        "/",
        "--expect-status",
        "200",
        "--expect-body",
        "ok",
        "--out",
        path(&bundle),
    ]);
    assert_refused(&out, "already exists");
}

#[test]
fn sign_names_a_missing_app_and_a_bad_probe() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (secret, _) = keygen(&temp.path().join("keys"));
    let base = |app: &Path, probe: &str, out: &Path| {
        fleetweft(&[
            "bundle",
            "sign",
            "--key",
            path(&secret),
            "--app",
            path(app),
            "--name",
            "hello",
            "--version",
            "1",
            "--probe-path",
            probe,
            "--expect-status",
            "200",
            "--expect-body",
            "ok",
            "--run",
            "./server --port 8080",
            "--out",
            path(out),
        ])
    };
    let out_path = temp.path().join("out.bundle");
    let missing = temp.path().join("no-such-app");
    assert_refused(&base(&missing, "/health", &out_path), "no-such-app");
    let app = temp.path().join("server");
    fs::write(&app, "#!/bin/sh\n").expect("write");
    assert_refused(&base(&app, "health", &out_path), "probe path");
    assert!(!out_path.exists(), "no partial bundle");
    assert_ok(&base(&app, "/health", &out_path));
}

/// `--expect-json POINTER=JSON` signs a probe that judges one JSON field;
/// it excludes `--expect-body`, and a value that is not JSON is named.
#[test]
fn sign_with_a_json_field_probe() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (secret, public) = keygen(&temp.path().join("keys"));
    let app = temp.path().join("app.py");
    fs::write(&app, "print('hello')\n").expect("write app");
    let run = |body: &[&str], out: &Path| {
        let mut args = vec![
            "bundle",
            "sign",
            "--key",
            path(&secret),
            "--app",
            path(&app),
            "--name",
            "hello",
            "--version",
            "2",
            "--probe-path",
            "/status",
            "--expect-status",
            "200",
            "--out",
            path(out),
        ];
        args.extend_from_slice(body);
        fleetweft(&args)
    };
    let out = temp.path().join("json.bundle");
    let bare = run(&["--expect-json", "/version=v2"], &out);
    assert_eq!(bare.status.code(), Some(2), "{}", text(&bare.stderr));
    assert!(
        text(&bare.stderr).contains("must be JSON"),
        "{}",
        text(&bare.stderr)
    );
    let both = run(&["--expect-json", "/ok=true", "--expect-body", "ok"], &out);
    assert_eq!(both.status.code(), Some(2), "{}", text(&both.stderr));
    let neither = run(&[], &out);
    assert_eq!(neither.status.code(), Some(2), "{}", text(&neither.stderr));
    assert!(!out.exists(), "no bundle from a refused command");
    assert_ok(&run(&["--expect-json", r#"/version="v2""#], &out));
    let key = protocol::bundle::load_verifying_key(&public).expect("public key");
    let verified =
        protocol::bundle::verify(&key, &fs::read(&out).expect("bundle")).expect("verify");
    let field = verified
        .manifest
        .probe
        .expect_json
        .clone()
        .expect("a JSON field");
    assert_eq!(field.pointer, "/version");
    assert_eq!(field.equals, serde_json::json!("v2"));
    assert!(verified.manifest.probe.body_matches(r#"{"version": "v2"}"#));
}
