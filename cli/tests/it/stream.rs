//! `GET /api/events/stream` and `fleetweft watch` against a real
//! controller (issue 13 item 3): events arrive as they are appended, a
//! reconnect with `Last-Event-ID` has no gap and no duplicate (checked
//! against `/api/events`), a reader that falls behind is dropped with the
//! reason, and `watch --rollout` exits with the rollout's outcome.

use crate::api_harness;
use crate::sse;

use api_harness::{text, Controller};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Every sequence `/api/events` lists, in order.
fn logged(ctl: &Controller) -> Vec<(u64, serde_json::Value)> {
    let mut out = Vec::new();
    loop {
        let from = out.last().map_or(0, |(s, _): &(u64, _)| s + 1);
        let page = ctl.get_json(&format!("/api/events?from={from}&limit=1000"));
        let page = page.as_array().expect("array").clone();
        if page.is_empty() {
            return out;
        }
        for e in page {
            out.push((e["sequence"].as_u64().expect("sequence"), e));
        }
    }
}

fn last(ctl: &Controller) -> u64 {
    ctl.last_sequence().as_u64().expect("a non-empty log")
}

fn post(ctl: &Controller, path: &str, body: &serde_json::Value) -> (u16, String) {
    ctl.http("POST", path, Some(&ctl.token), body.to_string().as_bytes())
}

#[test]
fn the_stream_follows_appends_and_resumes_without_gap_or_duplicate() {
    let ctl = Controller::start();
    let t = Some(ctl.token.as_str());
    // Refusals: no token, a bad Last-Event-ID, an unknown rollout.
    assert_eq!(
        sse::open(ctl.port, "/api/events/stream", None, None)
            .err()
            .map(|e| e.0),
        Some(401)
    );
    let bad = sse::open(ctl.port, "/api/events/stream", t, Some("x"))
        .err()
        .expect("400");
    assert_eq!(bad.0, 400, "{}", bad.1);
    assert!(bad.1.contains("Last-Event-ID"), "{}", bad.1);
    // `after` out of range is refused even beside a valid header (which
    // wins over it): schemathesis found it accepted.
    let path = "/api/events/stream?follow=false&after=9223372036854775808";
    let over = sse::open(ctl.port, path, t, Some("0")).err().expect("400");
    assert_eq!(over.0, 400, "{}", over.1);
    assert!(over.1.contains("`after`"), "{}", over.1);
    let unknown = sse::open(ctl.port, "/api/events/stream?rollout=r9", t, None)
        .err()
        .expect("404");
    assert_eq!(unknown.0, 404, "{}", unknown.1);
    // Not a rollout id at all (an empty `?rollout=` too): 400 naming it.
    for query in ["?rollout=", "?rollout=x1"] {
        let path = format!("/api/events/stream{query}");
        let bad = sse::open(ctl.port, &path, t, None).err().expect("400");
        assert_eq!(bad.0, 400, "{query}: {}", bad.1);
        assert!(bad.1.contains("rollout"), "{query}: {}", bad.1);
    }

    // The replay: the bootstrap enrollments and the first operator, then
    // live appends.
    let mut first = sse::open(ctl.port, "/api/events/stream", t, None).expect("stream");
    let enrolled = first.until(last(&ctl));
    assert!(
        enrolled
            .iter()
            .all(|e| e.kind == "node-enrolled" || e.kind == "operator-added"),
        "{enrolled:?}"
    );
    let rollout = ctl.start_rollout("node-c");
    let live = first.until(last(&ctl));
    let kinds: Vec<&str> = live.iter().map(|e| e.kind.as_str()).collect();
    assert!(
        kinds.contains(&"rollout-started") && kinds.contains(&"op-granted"),
        "{kinds:?}"
    );
    let mut seen: Vec<sse::SseEvent> = enrolled.into_iter().chain(live).collect();
    drop(first);

    // Appended while nobody listens, then a reconnect after the last id.
    let (code, body) = post(
        &ctl,
        &format!("/api/rollouts/{rollout}/pause"),
        &serde_json::json!({}),
    );
    assert_eq!(code, 200, "{body}");
    let resume_after = seen.last().and_then(|e| e.id).expect("an id");
    let mut second = sse::open(
        ctl.port,
        "/api/events/stream",
        t,
        Some(&resume_after.to_string()),
    )
    .expect("stream");
    seen.extend(second.until(last(&ctl)));
    let log = logged(&ctl);
    let ids: Vec<u64> = seen.iter().map(|e| e.id.expect("id")).collect();
    let want: Vec<u64> = log.iter().map(|(s, _)| *s).collect();
    assert_eq!(ids, want, "the stream's sequences differ from /api/events");
    for (event, (_, entry)) in seen.iter().zip(&log) {
        let data: serde_json::Value = serde_json::from_str(&event.data).expect("json data");
        assert_eq!(&data, entry, "data differs from /api/events");
    }
    assert!(seen.iter().any(|e| e.kind == "rollout-paused"));

    // `?after=` and `?rollout=`: only the rollout's events, from there.
    let mut only = sse::open(
        ctl.port,
        &format!("/api/events/stream?rollout={rollout}&after=0"),
        t,
        None,
    )
    .expect("stream");
    let mut filtered = Vec::new();
    while filtered
        .last()
        .is_none_or(|e: &sse::SseEvent| e.kind != "rollout-paused")
    {
        filtered.push(only.next().expect("the rollout's events"));
    }
    assert!(
        filtered
            .iter()
            .all(|e| e.id > Some(0) && e.kind != "node-enrolled"),
        "{filtered:?}"
    );
    assert!(
        filtered.iter().any(|e| e.kind == "op-granted"),
        "{filtered:?}"
    );
}

/// `?follow=false` is the bounded form (issue #22 item 7, the contract
/// test reads the stream through it): the replay, then the end, no live
/// append. An empty `Last-Event-ID` is no header: from `after`.
#[test]
fn a_stream_without_follow_ends_after_the_replay_and_an_empty_last_event_id_is_none() {
    let ctl = Controller::start();
    let t = Some(ctl.token.as_str());
    let log: Vec<u64> = logged(&ctl).iter().map(|(s, _)| *s).collect();
    let mut whole = sse::open(ctl.port, "/api/events/stream?follow=false", t, None).expect("200");
    let ids: Vec<u64> = whole
        .read_to_end()
        .iter()
        .map(|e| e.id.expect("id"))
        .collect();
    assert_eq!(ids, log, "follow=false sends the log and ends");
    let mut empty = sse::open(
        ctl.port,
        "/api/events/stream?follow=false&after=0",
        t,
        Some(""),
    )
    .expect("an empty Last-Event-ID is accepted");
    let ids: Vec<u64> = empty
        .read_to_end()
        .iter()
        .map(|e| e.id.expect("id"))
        .collect();
    assert_eq!(
        ids,
        log[1..].to_vec(),
        "an empty header leaves `after` in force"
    );
    // Past the end: nothing to replay, the stream ends at once.
    let end = format!("/api/events/stream?follow=false&after={}", last(&ctl));
    let mut none = sse::open(ctl.port, &end, t, None).expect("200");
    assert!(none.read_to_end().is_empty());
    let bad = sse::open(ctl.port, "/api/events/stream?follow=maybe", t, None)
        .err()
        .expect("400");
    assert_eq!(bad.0, 400, "{}", bad.1);
    assert!(bad.1.contains("follow"), "{}", bad.1);
}

#[test]
fn a_reader_that_falls_behind_is_dropped_with_the_reason_and_catches_up() {
    let ctl = Controller::start_with("stream_buffer_events = 2", "");
    let t = Some(ctl.token.as_str());
    let mut reader = sse::open(ctl.port, "/api/events/stream", t, None).expect("stream");
    let mut seen = reader.until(last(&ctl));
    // Bursts of concurrent enrollments: the core commits them in batches
    // whose events come faster than this reader takes them.
    let mut dropped = None;
    for round in 0..10 {
        let threads: Vec<_> = (0..48)
            .map(|i| {
                let (port, token) = (ctl.port, ctl.token.clone());
                std::thread::spawn(move || {
                    let body = serde_json::json!({"name": format!("burst-{round}-{i}"), "public": "127.0.0.1:9"});
                    let c = sse_enroll(port, &token, &body.to_string());
                    assert_eq!(c, 200);
                })
            })
            .collect();
        for th in threads {
            th.join().expect("enroll");
        }
        let end = last(&ctl);
        while let Some(event) = reader.next() {
            if event.kind == "dropped" {
                dropped = Some(event);
                break;
            }
            let id = event.id;
            seen.push(event);
            if id == Some(end) {
                break;
            }
        }
        if dropped.is_some() {
            break;
        }
    }
    let dropped = dropped.expect("the reader was never dropped");
    assert!(dropped.data.contains("fell behind"), "{}", dropped.data);
    assert!(
        reader.next().is_none(),
        "the stream goes on after `dropped`"
    );
    let resume = seen.last().and_then(|e| e.id).expect("an id");
    let mut again =
        sse::open(ctl.port, "/api/events/stream", t, Some(&resume.to_string())).expect("stream");
    seen.extend(again.until(last(&ctl)));
    let ids: Vec<u64> = seen.iter().map(|e| e.id.expect("id")).collect();
    let want: Vec<u64> = logged(&ctl).iter().map(|(s, _)| *s).collect();
    assert_eq!(ids, want, "a gap or a duplicate across the drop");
}

fn sse_enroll(port: u16, token: &str, body: &str) -> u16 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let head = format!(
        "POST /api/nodes HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).expect("write");
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn watch(ctl: &Controller, rollout: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_fleetweft"))
        .args(["watch", "--rollout", rollout, "--controller", &ctl.url()])
        .env("FLEETWEFT_TOKEN", &ctl.token)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fleetweft watch")
}

/// Wait for `child` to exit, at most 20 s; its code and output.
fn finish(mut child: std::process::Child) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!("watch did not exit: {}", text(&out.stdout));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.code(),
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

#[test]
fn watch_exits_1_on_a_pause_and_0_on_completion() {
    let ctl = Controller::start();
    let rollout = ctl.start_rollout("node-c");
    let out = ctl.cli(&["watch", "--rollout", "r9"], Some(&ctl.token));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("r9"), "{}", text(&out.stderr));

    let paused = watch(&ctl, &rollout);
    std::thread::sleep(Duration::from_millis(700));
    let (code, body) = post(
        &ctl,
        &format!("/api/rollouts/{rollout}/pause"),
        &serde_json::json!({}),
    );
    assert_eq!(code, 200, "{body}");
    let (code, out) = finish(paused);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("rollout-paused"), "{out}");

    let (code, body) = post(
        &ctl,
        &format!("/api/rollouts/{rollout}/resume"),
        &serde_json::json!({}),
    );
    assert_eq!(code, 200, "{body}");
    let status = ctl.wait_for_unknown();
    let op = status["ops"][0]["id"].as_str().expect("op id").to_string();
    let release = status["rollouts"][0]["release"]
        .as_str()
        .expect("release")
        .to_string();
    let completing = watch(&ctl, &rollout);
    std::thread::sleep(Duration::from_millis(700));
    let resolve = serde_json::json!({
        "observation": {"verdict": "pass", "identity": release, "process_healthy": true},
        "resolution": "confirm-new",
    });
    let (code, body) = post(&ctl, &format!("/api/ops/{op}/resolve"), &resolve);
    assert_eq!(code, 200, "{body}");
    let (code, out) = finish(completing);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("rollout-completed"), "{out}");
}

/// An orderly stop does not wait on an event stream, which never ends by
/// itself: SIGTERM with a stream open exits 0 within the grace period.
#[test]
fn sigterm_with_an_open_stream_exits_0_after_the_grace_period() {
    let mut ctl = Controller::start();
    let t = Some(ctl.token.as_str());
    let _open = sse::open(ctl.port, "/api/events/stream", t, None).expect("stream");
    let pid = ctl.child.id().to_string();
    let sent = std::time::Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    let bound = std::time::Duration::from_millis(controller::daemon::SHUTDOWN_GRACE_MS + 10_000);
    let code = loop {
        if let Some(exit) = ctl.child.try_wait().expect("wait") {
            break exit.code();
        }
        assert!(sent.elapsed() < bound, "the controller did not stop");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(code, Some(0), "an orderly stop exits 0");
}
