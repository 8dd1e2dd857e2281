//! Uploading a format-2 (tree) release to a running controller (issue #23
//! item 2): chunks are asked for and sent one by one, a manifest whose
//! chunks are not all held is refused naming them, an interrupted upload
//! resumes sending only what is missing, a wrong-digest chunk is refused
//! and nothing stored, the accepted release can be named by a rollout, and
//! a format-1 bundle still uploads.

use crate::api_harness::{s, Controller};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `fleetweft` without a controller (signing, keys).
fn offline(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_fleetweft"))
        .args(args)
        .output()
        .expect("run fleetweft")
}

pub(crate) fn assert_ok(out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// A small tree with one file of several chunks, signed with the
/// controller's key into `temp/out`: (out, the release digest).
pub(crate) fn signed_release(ctl: &Controller, temp: &Path) -> (PathBuf, String) {
    let tree = temp.join("app");
    fs::create_dir_all(tree.join("static")).expect("dirs");
    fs::write(tree.join("run.sh"), "#!/bin/sh\nexec ./serve\n").expect("run");
    fs::write(tree.join("static/app.css"), "body{}\n").expect("css");
    let data: Vec<u8> = (0..6_000_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    fs::write(tree.join("model.bin"), data).expect("data");
    let out = temp.join("out");
    let signed = offline(&[
        "bundle",
        "sign",
        "--key",
        &s(&ctl.signing_key),
        "--dir",
        &s(&tree),
        "--name",
        "shop",
        "--version",
        "2.0.0",
        "--run",
        "./run.sh",
        "--probe-path",
        "/health",
        "--expect-status",
        "200",
        "--expect-body",
        "ok",
        "--out",
        &s(&out),
    ]);
    assert_ok(&signed);
    (out, text(&signed.stdout).trim().to_string())
}

/// The chunk names in `out/chunks`, sorted.
pub(crate) fn chunk_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("chunks")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

pub(crate) fn upload_json(ctl: &Controller, path: &Path) -> serde_json::Value {
    let out = ctl.cli(&["bundle", "upload", &s(path), "--json"], Some(&ctl.token));
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).expect("json")
}

#[test]
fn a_tree_release_uploads_resumably_and_can_be_rolled_out() {
    let mut ctl = Controller::start();
    let temp = tempfile::tempdir().expect("temp");
    let (out, digest) = signed_release(&ctl, temp.path());
    let names = chunk_names(&out.join("chunks"));
    assert!(names.len() >= 3, "several chunks: {names:?}");
    let held_dir = ctl._dir.path().join("data/chunks");

    // Interrupted: only the first half of the chunks reached the controller.
    let half = names.len() / 2;
    for name in &names[..half] {
        let bytes = fs::read(out.join("chunks").join(name)).expect("chunk");
        let url = format!("/api/chunks/{name}");
        // Without the token: 401 before the body is read (a short body, so
        // the answer is not lost to a reset), nothing stored.
        let (code, body) = ctl.http("PUT", &url, None, b"x");
        assert_eq!(code, 401, "a PUT needs the token: {body}");
        let (code, body) = ctl.http("PUT", &url, Some(&ctl.token), &bytes);
        assert_eq!(code, 200, "{body}");
        assert_eq!(ctl.http("HEAD", &url, None, b"").0, 200);
    }
    assert_eq!(chunk_names(&held_dir), names[..half].to_vec());
    let missing = &names[half..];
    assert_eq!(
        ctl.http("HEAD", &format!("/api/chunks/{}", missing[0]), None, b"")
            .0,
        404
    );

    // The manifest is refused naming what is missing, and nothing is known.
    let manifest = fs::read(out.join("manifest")).expect("manifest");
    let (code, body) = ctl.http("POST", "/api/releases", Some(&ctl.token), &manifest);
    assert_eq!(code, 409, "{body}");
    assert!(
        body.contains(&format!("{} chunk(s) missing", missing.len())),
        "{body}"
    );
    for name in missing {
        assert!(body.contains(name.as_str()), "{body} should name {name}");
    }
    let start = serde_json::json!({
        "release": digest, "canary": "node-a", "followers": [], "slots": 1,
    });
    let (code, body) = ctl.post_json("/api/rollouts", &start);
    assert_eq!(code, 404, "not uploaded yet: {body}");

    // A chunk whose bytes do not hash to its name: 400 naming both, nothing
    // stored (no file under either name, no temporary file left).
    let (code, body) = ctl.http(
        "PUT",
        &format!("/api/chunks/{}", missing[0]),
        Some(&ctl.token),
        b"not the chunk",
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains(&missing[0]) && body.contains("hash"),
        "{body}"
    );
    assert_eq!(chunk_names(&held_dir), names[..half].to_vec());
    let (code, body) = ctl.http("PUT", "/api/chunks/NOTHEX", Some(&ctl.token), b"x");
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("sha256"), "{body}");

    // Resumed: only the missing chunks are sent, then the manifest.
    let resumed = upload_json(&ctl, &out);
    assert_eq!(resumed["release"]["digest"], digest.as_str(), "{resumed}");
    assert_eq!(resumed["upload"]["chunks"], names.len(), "{resumed}");
    assert_eq!(resumed["upload"]["sent"], missing.len(), "{resumed}");
    assert_eq!(resumed["upload"]["skipped"], half, "{resumed}");
    assert_eq!(chunk_names(&held_dir), names);
    assert!(ctl
        ._dir
        .path()
        .join(format!("data/releases/{digest}.release"))
        .is_file());

    // Again: nothing to send, the same digest.
    let again = upload_json(&ctl, &out.join("manifest"));
    assert_eq!(again["upload"]["sent"], 0, "{again}");
    assert_eq!(again["upload"]["skipped"], names.len(), "{again}");
    assert_eq!(again["release"]["digest"], digest.as_str());

    // It survives a restart (killed, started again), and a rollout can name it.
    // `rollout start --bundle DIR` uploads (nothing left to send) and starts.
    ctl.restart();
    let started = ctl.cli(
        &[
            "rollout",
            "start",
            "--bundle",
            &s(&out),
            "--canary",
            "node-a",
            "--slots",
            "1",
            "--json",
        ],
        Some(&ctl.token),
    );
    assert_ok(&started);
    let started: serde_json::Value = serde_json::from_slice(&started.stdout).expect("json");
    assert_eq!(started["bundle"]["digest"], digest.as_str(), "{started}");
    let rollouts = ctl.get_json("/api/rollouts");
    assert_eq!(rollouts.as_array().map(Vec::len), Some(1), "{rollouts}");
}

#[test]
fn a_format_one_bundle_still_uploads_and_a_foreign_manifest_is_refused() {
    let ctl = Controller::start();
    let uploaded = upload_json(&ctl, &ctl.bundle);
    let digest = uploaded["digest"].as_str().expect("digest").to_string();
    assert_eq!(digest.len(), 64, "{uploaded}");
    assert!(ctl
        ._dir
        .path()
        .join(format!("data/bundles/{digest}.bundle"))
        .is_file());

    // A manifest signed with another key: 400, nothing stored, even though
    // every chunk is held.
    let temp = tempfile::tempdir().expect("temp");
    let (out, _) = signed_release(&ctl, temp.path());
    let other = temp.path().join("other");
    assert_ok(&offline(&["bundle", "keygen", "--out", &s(&other)]));
    let tree = temp.path().join("app");
    let foreign = temp.path().join("foreign");
    let signed = offline(&[
        "bundle",
        "sign",
        "--key",
        &s(&other.join("bundle-signing.key")),
        "--dir",
        &s(&tree),
        "--name",
        "shop",
        "--version",
        "2.0.0",
        "--run",
        "./run.sh",
        "--probe-path",
        "/health",
        "--expect-status",
        "200",
        "--expect-body",
        "ok",
        "--out",
        &s(&foreign),
    ]);
    assert_ok(&signed);
    let refused = ctl.cli(&["bundle", "upload", &s(&foreign)], Some(&ctl.token));
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stdout));
    assert!(
        text(&refused.stderr).contains("release refused"),
        "{}",
        text(&refused.stderr)
    );
    let releases = ctl._dir.path().join("data/releases");
    assert_eq!(fs::read_dir(&releases).expect("releases").count(), 0);
    // The controller's own signature of the same tree is accepted.
    upload_json(&ctl, &out);
    assert_eq!(fs::read_dir(&releases).expect("releases").count(), 1);
}

/// One HTTP/1.1 request on `conn`, its answer read whole: (status, body).
fn exchange(conn: &mut std::net::TcpStream, head: &str, body: &[u8]) -> (u16, String) {
    use std::io::{BufRead, BufReader, Read, Write};
    // Written beside the reading: the server may answer before it has
    // read the body, and a body larger than the socket buffers would
    // block a writer that waits for it.
    let mut writer = conn.try_clone().expect("clone");
    let request = [head.as_bytes(), body].concat();
    let sent = std::thread::spawn(move || writer.write_all(&request).is_ok());
    let mut reader = BufReader::new(conn.try_clone().expect("clone"));
    let mut status_line = String::new();
    reader.read_line(&mut status_line).expect("status line");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line, the connection closed: {status_line:?}"));
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("header");
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().expect("length");
        }
    }
    let mut answer = vec![0u8; len];
    reader.read_exact(&mut answer).expect("answer body");
    assert!(
        sent.join().expect("writer"),
        "the request could not be sent whole"
    );
    (status, text(&answer))
}

/// A chunk sent again, which the controller already holds, is answered
/// after its body is read: the connection stays open for the next
/// request. Answering with the body unread made the server close the
/// connection, and a client that had pooled it failed its next request
/// (`POST /api/releases` after re-sent chunks, "SendRequest").
#[test]
fn a_chunk_sent_again_leaves_the_connection_usable() {
    use sha2::Digest as _;
    let ctl = Controller::start();
    // The largest chunk: more than the socket buffers hold.
    let chunk: Vec<u8> = (0..releases::limits::CHUNK_BYTES_MAX)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    let sha = hex::encode(sha2::Sha256::digest(&chunk));
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", ctl.port)).expect("connect");
    conn.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .expect("timeout");
    let put = format!(
        "PUT /api/chunks/{sha} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {}\r\ncontent-type: application/octet-stream\r\ncontent-length: {}\r\n\r\n",
        ctl.token,
        chunk.len()
    );
    for attempt in 0..3 {
        let (status, body) = exchange(&mut conn, &put, &chunk);
        assert_eq!(status, 200, "attempt {attempt}: {body}");
    }
    let get = "GET /api/status HTTP/1.1\r\nhost: x\r\n\r\n";
    let (status, body) = exchange(&mut conn, get, b"");
    assert_eq!(status, 200, "{body}");
}
