//! A release's limits applied to its app process (issue #24 item 4): the
//! memory limit stops an app that goes over it, and what was applied is
//! said (cgroup where the node has one, rlimits where not).

use agent::supervisor::{AppSpec, Instance};
use model::Digest;
use std::time::{Duration, Instant};

/// Serves on $PORT, then, half a second later, takes 400 MiB.
const GREEDY_APP: &str = r#"
import http.server, threading, time, os
srv = http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), http.server.SimpleHTTPRequestHandler)
threading.Thread(target=srv.serve_forever, daemon=True).start()
time.sleep(0.5)
hog = bytearray(400 << 20)
for i in range(0, len(hog), 4096):
    hog[i] = 1
time.sleep(60)
"#;

fn spec(dir: &std::path::Path, memory_bytes_max: Option<u64>, cgroups: bool) -> AppSpec {
    AppSpec {
        release: Digest::repeat(7),
        code: Digest::repeat(7),
        dir: dir.to_path_buf(),
        run: ["python3", "-c", GREEDY_APP].map(String::from).to_vec(),
        env: Vec::new(),
        limits: releases::AppLimits {
            memory_bytes_max,
            open_files_max: Some(64),
            ..releases::AppLimits::default()
        },
        cgroups,
        data: None,
    }
}

/// Waits up to `within` for the instance's process to exit.
async fn dies_within(instance: &mut Instance, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if !instance.is_alive() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Starts the greedy app under a 64 MiB limit and checks it is stopped;
/// returns what was applied.
async fn stopped_over_its_limit(cgroups: bool) -> String {
    let dir = tempfile::tempdir().expect("temp");
    let mut instance = Instance::start(spec(dir.path(), Some(64 << 20), cgroups))
        .await
        .expect("starts under its limits");
    let applied = instance.isolation.applied.to_string();
    assert!(applied.contains("memory 64 MiB"), "{applied}");
    assert!(
        applied.contains("open files 64 (rlimit RLIMIT_NOFILE)"),
        "{applied}"
    );
    assert!(
        dies_within(&mut instance, Duration::from_secs(10)).await,
        "an app over its memory limit kept running ({applied})"
    );
    instance.stop().await;
    applied
}

/// With cgroups (this machine has a writable v1 memory hierarchy; a v2
/// one is used where it exists) the kernel stops the app at its limit.
#[tokio::test]
async fn an_app_over_its_memory_limit_is_stopped_and_the_proof_says_how() {
    let found = agent::isolation::Hierarchies::detect();
    let applied = stopped_over_its_limit(true).await;
    if found.v2.is_some() || found.v1.iter().any(|(c, _)| *c == "memory") {
        assert!(applied.contains("(cgroup v"), "{applied}");
    } else {
        assert!(applied.contains("address space only"), "{applied}");
    }
}

/// Without cgroups the limit is an address-space rlimit, and the proof
/// says so: the app's allocation fails and it exits.
#[tokio::test]
async fn without_cgroups_the_limit_is_an_rlimit_and_says_so() {
    let applied = stopped_over_its_limit(false).await;
    assert!(
        applied.contains("address space only (rlimit RLIMIT_AS"),
        "{applied}"
    );
}

#[tokio::test]
async fn the_same_app_without_a_limit_keeps_running() {
    let dir = tempfile::tempdir().expect("temp");
    let mut instance = Instance::start(spec(dir.path(), None, true))
        .await
        .expect("starts");
    assert!(
        !dies_within(&mut instance, Duration::from_secs(3)).await,
        "the app died without a limit: the test above proves nothing"
    );
    instance.stop().await;
}

/// Takes 400 MiB before it listens.
const GREEDY_AT_START: &str = r#"
hog = bytearray(400 << 20)
for i in range(0, len(hog), 4096):
    hog[i] = 1
"#;

/// An app its memory limit stops before it listens is not started, and
/// the error says the limit stopped it (where a memory cgroup counts the
/// kernel's kills), not that the port never answered.
#[tokio::test]
async fn a_start_stopped_by_the_memory_limit_says_so() {
    let dir = tempfile::tempdir().expect("temp");
    let mut greedy = spec(dir.path(), Some(64 << 20), true);
    greedy.run = ["python3", "-c", GREEDY_AT_START]
        .map(String::from)
        .to_vec();
    let err = Instance::start(greedy)
        .await
        .expect_err("stopped before it listens");
    let text = err.to_string();
    let found = agent::isolation::Hierarchies::detect();
    if found.v1.iter().any(|(c, _)| *c == "memory") || found.v2.is_some() {
        assert!(text.contains("stopped by its memory limit"), "{text}");
        assert!(text.contains("memory 64 MiB (cgroup v"), "{text}");
    } else {
        assert!(text.contains("did not accept connections"), "{text}");
    }
}

/// Writes a count into $FLEETWEFT_DATA_DIR/count (one more than found),
/// then serves.
const COUNTING_APP: &str = r#"
import http.server, os
path = os.path.join(os.environ["FLEETWEFT_DATA_DIR"], "count")
n = int(open(path).read()) if os.path.exists(path) else 0
open(path, "w").write(str(n + 1))
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), http.server.SimpleHTTPRequestHandler).serve_forever()
"#;

/// The app's data directory outlives its instances: a second release of
/// the same app finds what the first wrote (issue #24 item 2).
#[tokio::test]
async fn data_written_by_one_release_is_found_by_the_next() {
    let node = tempfile::tempdir().expect("temp");
    let data = agent::app_data::dir_for(node.path(), "counter");
    for (fill, expected) in [(1u8, "1"), (2, "2")] {
        let mut release = spec(node.path(), None, true);
        release.release = Digest::repeat(fill);
        release.run = ["python3", "-c", COUNTING_APP].map(String::from).to_vec();
        release.data = Some(data.clone());
        let mut instance = Instance::start(release).await.expect("starts");
        let count = std::fs::read_to_string(data.join("count")).expect("the app wrote");
        assert_eq!(count, expected, "release {fill}");
        instance.stop().await;
    }
}
