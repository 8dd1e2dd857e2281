//! `fleetweft bundle sign --dir`, `bundle inspect` and `bundle verify` of
//! format-2 releases (trees of chunks), run as the operator runs them;
//! format 1 keeps its behaviour and inspects as a tree of one file.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
}

fn assert_refused(out: &Output, needle: &str) {
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
}

/// Keys and a small app tree: (temp, secret, public, tree).
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let temp = tempfile::tempdir().expect("tempdir");
    let keys = temp.path().join("keys");
    assert_ok(&fleetweft(&["bundle", "keygen", "--out", path(&keys)]));
    let tree = temp.path().join("app");
    fs::create_dir_all(tree.join("shop/static")).expect("dirs");
    fs::write(tree.join("shop/__main__.py"), "print('shop')\n").expect("main");
    fs::write(tree.join("shop/static/app.css"), "body{}\n").expect("css");
    let data: Vec<u8> = (0..5_000_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    fs::write(tree.join("model.bin"), data).expect("data");
    fs::write(tree.join("run.sh"), "#!/bin/sh\nexec python3 -m shop\n").expect("run");
    fs::set_permissions(tree.join("run.sh"), fs::Permissions::from_mode(0o755)).expect("chmod");
    (
        temp,
        keys.join("bundle-signing.key"),
        keys.join("bundle-signing.pub"),
        tree,
    )
}

fn sign_dir(key: &Path, tree: &Path, out: &Path) -> Output {
    fleetweft(&[
        "bundle",
        "sign",
        "--key",
        path(key),
        "--dir",
        path(tree),
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
        path(out),
    ])
}

#[test]
fn sign_dir_writes_the_export_layout_and_verifies() {
    let (temp, key, public, tree) = setup();
    let out = temp.path().join("release");
    let signed = sign_dir(&key, &tree, &out);
    assert_ok(&signed);
    let digest = text(&signed.stdout).trim().to_string();
    assert_eq!(digest.len(), 64, "{digest}");
    let manifest = fs::read(out.join("manifest")).expect("manifest");
    assert_eq!(releases::release_digest(&manifest).to_hex(), digest);
    // Every chunk file is named by the SHA-256 of its bytes.
    let chunks: Vec<_> = fs::read_dir(out.join("chunks")).expect("chunks").collect();
    assert!(chunks.len() >= 4, "{}", chunks.len());
    for chunk in chunks {
        let chunk = chunk.expect("entry").path();
        let bytes = fs::read(&chunk).expect("chunk");
        let name = chunk
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        assert_eq!(
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes)),
            name
        );
    }
    let verified = fleetweft(&["bundle", "verify", "--pubkey", path(&public), path(&out)]);
    assert_ok(&verified);
    let stdout = text(&verified.stdout);
    for needle in ["shop", "2.0.0", &digest, "4 files", "chunks verified"] {
        assert!(stdout.contains(needle), "{needle} not in: {stdout}");
    }
    // The unpacked source tree verifies against it too.
    let against_tree = fleetweft(&[
        "bundle",
        "verify",
        "--pubkey",
        path(&public),
        "--tree",
        path(&tree),
        path(&out),
    ]);
    assert_ok(&against_tree);
    assert!(text(&against_tree.stdout).contains("tree verified"));
    // Signing again to the same place is refused; nothing is overwritten.
    assert_refused(&sign_dir(&key, &tree, &out), "already exists");
}

#[test]
fn verify_refuses_a_damaged_or_missing_chunk_and_a_changed_tree() {
    let (temp, key, public, tree) = setup();
    let out = temp.path().join("release");
    assert_ok(&sign_dir(&key, &tree, &out));
    let verify = || fleetweft(&["bundle", "verify", "--pubkey", path(&public), path(&out)]);
    let chunk = fs::read_dir(out.join("chunks"))
        .expect("chunks")
        .map(|e| e.expect("entry").path())
        .max_by_key(|p| fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .expect("a chunk");
    let bytes = fs::read(&chunk).expect("read");
    fs::write(&chunk, &bytes[..bytes.len() - 1]).expect("truncate");
    assert_refused(&verify(), "damaged");
    assert!(chunk.exists(), "verify never removes files");
    fs::remove_file(&chunk).expect("rm");
    assert_refused(&verify(), "not in the store");
    fs::write(&chunk, &bytes).expect("restore");
    assert_ok(&verify());
    let json = fleetweft(&[
        "bundle",
        "verify",
        "--json",
        "--pubkey",
        path(&public),
        path(&out),
    ]);
    assert_ok(&json);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(value["verified"], true);
    assert_eq!(value["format"], 2);
    assert_eq!(value["files"], 4);
    fs::write(tree.join("shop/extra.py"), "x").expect("extra");
    let changed = fleetweft(&[
        "bundle",
        "verify",
        "--pubkey",
        path(&public),
        "--tree",
        path(&tree),
        path(&out),
    ]);
    assert_refused(&changed, "shop/extra.py");
    // A foreign key is refused by name.
    let other = temp.path().join("other");
    assert_ok(&fleetweft(&["bundle", "keygen", "--out", path(&other)]));
    let foreign = fleetweft(&[
        "bundle",
        "verify",
        "--pubkey",
        path(&other.join("bundle-signing.pub")),
        path(&out),
    ]);
    assert_refused(&foreign, "unknown key");
}

#[test]
fn sign_dir_refuses_a_symlink_naming_it_and_leaves_nothing() {
    let (temp, key, _public, tree) = setup();
    std::os::unix::fs::symlink("/etc/passwd", tree.join("shop/passwd")).expect("link");
    let out = temp.path().join("release");
    let refused = sign_dir(&key, &tree, &out);
    assert_refused(&refused, "shop/passwd");
    assert!(text(&refused.stderr).contains("symlink"));
    assert!(!out.exists());
    let left: Vec<_> = fs::read_dir(temp.path())
        .expect("ls")
        .map(|e| e.expect("e").file_name())
        .collect();
    assert_eq!(left.len(), 2, "no temporary directory left: {left:?}");
    // --dir without --run is a usage error.
    let no_run = fleetweft(&[
        "bundle",
        "sign",
        "--key",
        path(&key),
        "--dir",
        path(&tree),
        "--name",
        "n",
        "--version",
        "1",
        "--probe-path",
        "/",
        "--expect-status",
        "200",
        "--expect-body",
        "ok",
        "--out",
        path(&out),
    ]);
    assert_eq!(no_run.status.code(), Some(2), "{}", text(&no_run.stderr));
}

#[test]
fn inspect_shows_the_tree_of_either_format() {
    let (temp, key, public, tree) = setup();
    let out = temp.path().join("release");
    assert_ok(&sign_dir(&key, &tree, &out));
    let shown = fleetweft(&["bundle", "inspect", path(&out)]);
    assert_ok(&shown);
    let stdout = text(&shown.stdout);
    for needle in [
        "format:    2",
        "shop/static/app.css",
        "model.bin",
        "0755",
        "NOT checked",
        "chunks:",
    ] {
        assert!(stdout.contains(needle), "{needle} not in: {stdout}");
    }
    let checked = fleetweft(&[
        "bundle",
        "inspect",
        "--pubkey",
        path(&public),
        "--json",
        path(&out.join("manifest")),
    ]);
    assert_ok(&checked);
    let value: serde_json::Value = serde_json::from_slice(&checked.stdout).expect("json");
    assert_eq!(value["signature_checked"], true);
    assert_eq!(value["files"], 4);
    assert_eq!(value["entries"][0]["path"], "model.bin");
    // A format-1 bundle: a tree of one file, its digest the bundle's.
    let app = tree.join("shop/__main__.py");
    let bundle = temp.path().join("one.bundle");
    let signed = fleetweft(&[
        "bundle",
        "sign",
        "--key",
        path(&key),
        "--app",
        path(&app),
        "--name",
        "one",
        "--version",
        "1",
        "--probe-path",
        "/",
        "--expect-status",
        "200",
        "--expect-body",
        "ok",
        "--out",
        path(&bundle),
    ]);
    assert_ok(&signed);
    let digest = text(&signed.stdout).trim().to_string();
    let shown = fleetweft(&["bundle", "inspect", "--json", path(&bundle)]);
    assert_ok(&shown);
    let value: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
    assert_eq!(value["format"], 1);
    assert_eq!(value["digest"], digest.as_str());
    assert_eq!(value["entries"][0]["path"], "__main__.py");
    assert_eq!(value["chunks"], 1);
    // Format 1 verifies as before.
    let verified = fleetweft(&["bundle", "verify", "--pubkey", path(&public), path(&bundle)]);
    assert_ok(&verified);
    assert!(text(&verified.stdout).contains(&digest));
    assert_refused(
        &fleetweft(&["bundle", "inspect", path(&app)]),
        "neither a format-1 bundle",
    );
}
