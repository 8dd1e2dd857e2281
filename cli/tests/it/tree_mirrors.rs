//! Mirrors by digest (issue #23 item 5) with real agents: a tree release
//! is laid out by `fleetweft bundle export` and served by two plain HTTP
//! servers in this test, one faithful and one flipping a byte of every
//! chunk. The controller's config lists the good mirror for every node and
//! the corrupting one first for the nodes labelled `site=berlin`
//! (node-a). The rollout completes with its proof verified; node-a
//! refused the corrupted chunks and took them from the good mirror, and
//! neither node took a chunk from the controller; each op shows where its
//! chunks came from (`GET /api/ops/{op}`).

use crate::tree_rollout::{start_with, write_tree, AGENTS};
use api::view::OpDto;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A mirror served by this test: the export directory, whether it
/// corrupts what it serves, and what it served.
#[derive(Clone)]
struct Mirror {
    root: PathBuf,
    corrupt: bool,
    requests: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
}

async fn chunk(State(m): State<Mirror>, UrlPath(name): UrlPath<String>) -> (StatusCode, Vec<u8>) {
    m.requests.fetch_add(1, Ordering::SeqCst);
    if name.len() != 64 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
        return (StatusCode::NOT_FOUND, Vec::new());
    }
    match std::fs::read(m.root.join("chunks").join(&name)) {
        Ok(mut bytes) => {
            if m.corrupt {
                if let Some(b) = bytes.get_mut(0) {
                    *b ^= 0xff;
                }
            }
            m.bytes.fetch_add(bytes.len() as u64, Ordering::SeqCst);
            (StatusCode::OK, bytes)
        }
        Err(_) => (StatusCode::NOT_FOUND, Vec::new()),
    }
}

/// Serves `root` at `http://127.0.0.1:PORT/fleet/chunks/<sha256>`; returns
/// the base URL and the mirror's counters.
async fn serve(root: PathBuf, corrupt: bool) -> (String, Mirror) {
    let mirror = Mirror {
        root,
        corrupt,
        requests: Arc::default(),
        bytes: Arc::default(),
    };
    let app = axum::Router::new()
        .route("/fleet/chunks/{name}", axum::routing::get(chunk))
        .with_state(mirror.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a mirror");
    let addr = listener.local_addr().expect("mirror address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/fleet"), mirror)
}

/// `fleetweft bundle export RELEASE --out OUT --json`, as a user runs it.
fn export(release: &std::path::Path, out: &std::path::Path) -> serde_json::Value {
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_fleetweft"))
        .args(["bundle", "export", "--json", "--out"])
        .arg(out)
        .arg(release)
        .output()
        .expect("run fleetweft bundle export");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    serde_json::from_slice(&run.stdout).expect("export JSON")
}

#[test]
fn agents_fetch_chunks_from_a_mirror_and_refuse_a_corrupting_one() {
    super::tree_rollout::run_fleet_test(mirrors_body);
}

async fn mirrors_body(dir: PathBuf) {
    std::fs::create_dir_all(&dir).expect("fleet dir");
    let export_dir = dir.join("mirror");
    let (good_url, good) = serve(export_dir.clone(), false).await;
    let (bad_url, bad) = serve(export_dir.clone(), true).await;
    let extra = format!(
        "[artifacts]\nmirrors = [\"{good_url}\"]\n\n[[artifacts.site]]\nlabels = {{ site = \"berlin\" }}\nmirrors = [\"{bad_url}\"]\n"
    );
    let fleet = start_with(dir.clone(), &extra).await;
    fleet
        .wait("the agents connected", |s| {
            s.nodes[0].connected && s.nodes[1].connected
        })
        .await;
    let _: serde_json::Value = fleet
        .api
        .post_json(
            &format!("/api/nodes/{}/labels", AGENTS[0]),
            &serde_json::json!({"set": {"site": "berlin"}}),
        )
        .await
        .expect("label node-a");
    let tree = dir.join("tree");
    write_tree(&tree, "body { color: black }\n");
    let v1 = fleet.sign_and_upload(&tree, "v1").await;
    let exported = export(&dir.join("signed-v1"), &export_dir);
    let chunks = exported["chunks"].as_u64().expect("chunk count");
    assert!(chunks >= 3, "{exported}");
    assert_eq!(exported["written"].as_u64(), Some(chunks), "{exported}");
    assert!(export_dir
        .join(format!("{}.release", v1.to_hex()))
        .is_file());
    // Run again: everything is there and verified, nothing is written.
    let again = export(&dir.join("signed-v1"), &export_dir);
    assert_eq!(again["written"].as_u64(), Some(0), "{again}");
    assert_eq!(again["kept"].as_u64(), Some(chunks), "{again}");

    fleet.roll_out("r0", v1, &AGENTS).await;
    for node in AGENTS {
        let css = fleet.release_dir(node, v1).join("static/app.css");
        assert_eq!(std::fs::read(css).expect("css"), b"body { color: black }\n");
    }
    assert_sources(&fleet, chunks).await;
    // The corrupting mirror was asked (by node-a only), at most until the
    // agent stopped asking it; the good one served every chunk to each.
    let bad_requests = bad.requests.load(Ordering::SeqCst);
    assert!(bad_requests >= 1, "the corrupting mirror was never asked");
    assert!(
        bad_requests <= u64::from(agent::mirror::MIRROR_FAILURES_IN_A_ROW_MAX) + 4,
        "{bad_requests} requests to a mirror that failed every time"
    );
    assert_eq!(good.requests.load(Ordering::SeqCst), 2 * chunks);
}

/// Each op's reported sources: every chunk from the good mirror, none from
/// the controller; node-a's list starts with the corrupting mirror, which
/// failed and served nothing.
async fn assert_sources(fleet: &crate::fleet::loopback::Loopback, chunks: u64) {
    let view = fleet.api.fleet_view().await.expect("view");
    for op in view.ops.iter().filter(|o| o.rollout == "r0") {
        let dto: OpDto = fleet
            .api
            .get(&format!("/api/ops/{}", op.id))
            .await
            .expect("the op");
        let served: u64 = dto.sources.iter().map(|s| s.chunks).sum();
        assert_eq!(served, chunks, "{dto:?}");
        let controller = dto.sources.iter().find(|s| s.source == "controller");
        assert!(
            controller.is_none_or(|c| c.chunks == 0 && c.bytes == 0),
            "controller egress for chunks: {dto:?}"
        );
        let (good, bad) = if dto.node == AGENTS[0] {
            let bad = dto
                .sources
                .iter()
                .find(|s| s.source.starts_with("mirror[0] "));
            let bad = bad.unwrap_or_else(|| panic!("node-a's first mirror: {dto:?}"));
            (1, Some(bad))
        } else {
            (0, None)
        };
        if let Some(bad) = bad {
            assert_eq!(bad.chunks, 0, "{dto:?}");
            assert!(bad.failures >= 1, "{dto:?}");
        }
        let prefix = format!("mirror[{good}] ");
        let good = dto.sources.iter().find(|s| s.source.starts_with(&prefix));
        assert_eq!(good.map(|g| g.chunks), Some(chunks), "{dto:?}");
    }
}
