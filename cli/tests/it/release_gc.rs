//! Listing and removing stored releases on a running controller (issue
//! #23 item 6): `fleetweft bundle list` shows what names each release;
//! `fleetweft bundle rm` refuses one a rollout or an op names, saying
//! which, and removes one nothing names with its chunks, after which a
//! rollout cannot name it.

use crate::api_harness::{text, Controller};
use crate::tree_upload::{assert_ok, chunk_names, signed_release, upload_json};

fn list(ctl: &Controller) -> serde_json::Value {
    let out = ctl.cli(&["bundle", "list", "--json"], None);
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).expect("json")
}

fn row<'a>(listed: &'a serde_json::Value, digest: &str) -> &'a serde_json::Value {
    let rows = listed["releases"].as_array().expect("releases");
    rows.iter()
        .find(|r| r["digest"] == digest)
        .unwrap_or_else(|| panic!("{digest} not listed: {listed}"))
}

#[test]
fn a_release_in_use_is_kept_and_one_nothing_names_goes_with_its_chunks() {
    let ctl = Controller::start();
    let temp = tempfile::tempdir().expect("temp");
    let (out, tree) = signed_release(&ctl, temp.path());
    upload_json(&ctl, &out);
    let held = ctl._dir.path().join("data/chunks");
    let chunks = chunk_names(&held);
    assert!(chunks.len() >= 3, "{chunks:?}");

    // Nothing names either release yet; then a rollout of the bundle.
    let rollout = ctl.start_rollout("node-a");
    let listed = list(&ctl);
    let bundle = listed["releases"][0]["digest"]
        .as_str()
        .expect("digest")
        .to_string();
    assert_eq!(row(&listed, &bundle)["format"], 1, "{listed}");
    let tree_row = row(&listed, &tree);
    assert_eq!(tree_row["format"], 2);
    assert_eq!(tree_row["chunks"], chunks.len());
    assert!(tree_row["in_use"].is_null(), "{listed}");
    assert_eq!(listed["chunks"], chunks.len());
    let in_use = &row(&listed, &bundle)["in_use"];
    assert_eq!(in_use["rollouts"][0], rollout.as_str(), "{listed}");
    assert_eq!(in_use["ops"], 1, "the canary's op holds its slot: {listed}");

    // Refused while named: exit 1, the message says what names it, nothing
    // removed.
    let refused = ctl.cli(&["bundle", "rm", &bundle], Some(&ctl.token));
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stdout));
    let why = text(&refused.stderr);
    assert!(
        why.contains("in use") && why.contains(&format!("rollout {rollout}")),
        "{why}"
    );
    assert!(why.contains("op0"), "{why}");
    assert!(ctl
        ._dir
        .path()
        .join(format!("data/bundles/{bundle}.bundle"))
        .is_file());

    // Without the token, and with something that is not a digest.
    let path = format!("/api/releases/{tree}");
    assert_eq!(ctl.http("DELETE", &path, None, b"").0, 401);
    let (code, body) = ctl.http("DELETE", "/api/releases/nothex", Some(&ctl.token), b"");
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("`digest`"), "{body}");

    // Removed by a prefix: the manifest and every chunk go.
    let removed = ctl.cli(&["bundle", "rm", &tree[..10], "--json"], Some(&ctl.token));
    assert_ok(&removed);
    let removed: serde_json::Value = serde_json::from_slice(&removed.stdout).expect("json");
    assert_eq!(removed["release"]["digest"], tree.as_str(), "{removed}");
    assert_eq!(removed["chunks_removed"], chunks.len(), "{removed}");
    assert!(chunk_names(&held).is_empty());
    assert!(!ctl
        ._dir
        .path()
        .join(format!("data/releases/{tree}.release"))
        .exists());
    let listed = list(&ctl);
    assert_eq!(
        listed["releases"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );

    // Gone: a second removal is a 404 (usage), a rollout cannot name it,
    // and uploading it again brings it back whole.
    let again = ctl.cli(&["bundle", "rm", &tree], Some(&ctl.token));
    assert_eq!(again.status.code(), Some(2), "{}", text(&again.stderr));
    let start = serde_json::json!({
        "release": tree, "canary": "node-b", "followers": [], "slots": 1,
    });
    assert_eq!(ctl.post_json("/api/rollouts", &start).0, 404);
    let uploaded = upload_json(&ctl, &out);
    assert_eq!(uploaded["upload"]["sent"], chunks.len(), "{uploaded}");
    let table = ctl.cli(&["bundle", "list"], None);
    assert_ok(&table);
    let table = text(&table.stdout);
    assert!(
        table.contains("IN USE") && table.contains(&tree[..12]),
        "{table}"
    );
    assert!(table.contains("2 release(s)"), "{table}");
}
