//! `[[webhooks]]` against a receiver on loopback (issue 13 item 3): every
//! delivery carries a valid HMAC-SHA256 signature, a refused delivery is
//! retried, and every event arrives exactly once across a controller
//! restart (the cursor file resumes after the last acknowledged one).

use crate::api_harness;

use api_harness::Controller;
use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECRET: &str = "test-webhook-secret";

/// What the receiver saw: acknowledged deliveries by sequence (each body),
/// and every attempt.
#[derive(Default)]
struct Seen {
    acked: Vec<(u64, serde_json::Value)>,
    attempts: usize,
    bad_signatures: usize,
    /// Refuse every delivery (a receiver that is down).
    refuse: bool,
}

async fn receive(
    axum::extract::State(seen): axum::extract::State<Arc<Mutex<Seen>>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let mut seen = seen.lock().unwrap();
    seen.attempts += 1;
    let signature = headers
        .get("x-fleetweft-signature")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("sha256="))
        .and_then(|v| hex::decode(v).ok());
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(&body);
    if signature.is_none_or(|s| mac.verify_slice(&s).is_err()) {
        seen.bad_signatures += 1;
        return StatusCode::UNAUTHORIZED;
    }
    // The first attempt is refused: the controller must retry it.
    if seen.attempts == 1 || seen.refuse {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let sequence: u64 = headers["x-fleetweft-sequence"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["sequence"], sequence);
    seen.acked.push((sequence, json));
    StatusCode::NO_CONTENT
}

/// Start the receiver on its own runtime thread; its port.
fn receiver(seen: Arc<Mutex<Seen>>) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let app = axum::Router::new()
                .route("/hook", axum::routing::post(receive))
                .with_state(seen);
            axum::serve(listener, app).await.unwrap();
        });
    });
    port
}

fn logged(ctl: &Controller) -> BTreeMap<u64, serde_json::Value> {
    let events = ctl.get_json("/api/events?from=0&limit=1000");
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["sequence"].as_u64().unwrap(), e.clone()))
        .collect()
}

/// Wait until the receiver acknowledged every logged event.
fn wait_delivered(ctl: &Controller, seen: &Arc<Mutex<Seen>>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let want = logged(ctl).len();
        if seen.lock().unwrap().acked.len() >= want {
            return;
        }
        assert!(Instant::now() < deadline, "not every event delivered");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn cursor(ctl: &Controller) -> serde_json::Value {
    let dir = ctl._dir.path().join("data").join("webhooks");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.path().extension().is_some_and(|x| x == "cursor"))
        .expect("a cursor file");
    serde_json::from_slice(&std::fs::read(file.path()).unwrap()).unwrap()
}

#[test]
fn every_event_is_delivered_once_signed_across_a_restart() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let port = receiver(seen.clone());
    let tail =
        format!("\n[[webhooks]]\nurl = \"http://127.0.0.1:{port}/hook\"\nsecret = \"{SECRET}\"\n");
    let mut ctl = Controller::start_with("", &tail);
    let rollout = ctl.start_rollout("node-c");
    wait_delivered(&ctl, &seen);
    // The cursor is written after each acknowledged delivery.
    let last = *logged(&ctl).keys().last().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while cursor(&ctl)["last_delivered"] != last {
        assert!(
            Instant::now() < deadline,
            "cursor {} != {last}",
            cursor(&ctl)
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // The receiver goes down; an event is appended and refused; the
    // controller restarts: the event is still owed (the cursor is before
    // it, though the log's end is past it) and nothing else is repeated.
    let refused_before = {
        let mut s = seen.lock().unwrap();
        s.refuse = true;
        s.attempts
    };
    let write = |ctl: &Controller, what: &str| {
        let path = format!("/api/rollouts/{rollout}/{what}");
        let (code, body) = ctl.http("POST", &path, Some(&ctl.token), b"{}");
        assert_eq!(code, 200, "{body}");
    };
    write(&ctl, "pause");
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.lock().unwrap().attempts == refused_before {
        assert!(Instant::now() < deadline, "the pause was never attempted");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        cursor(&ctl)["last_delivered"],
        last,
        "cursor moved past a refused event"
    );
    ctl.restart();
    seen.lock().unwrap().refuse = false;
    write(&ctl, "resume");
    wait_delivered(&ctl, &seen);
    std::thread::sleep(Duration::from_millis(300));

    let seen = seen.lock().unwrap();
    assert_eq!(seen.bad_signatures, 0);
    assert!(
        seen.attempts > seen.acked.len(),
        "the refused first attempt was not retried"
    );
    let log = logged(&ctl);
    let sequences: Vec<u64> = seen.acked.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        sequences,
        log.keys().copied().collect::<Vec<_>>(),
        "not every event exactly once, in order"
    );
    for (sequence, body) in &seen.acked {
        assert_eq!(
            body, &log[sequence],
            "delivery {sequence} differs from /api/events"
        );
    }
    assert!(seen
        .acked
        .iter()
        .any(|(_, b)| b["event"].get("RolloutPaused").is_some()));
}
