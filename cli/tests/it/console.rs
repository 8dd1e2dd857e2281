//! The console against a real controller on loopback (issue #28 item 1):
//! from the overview, follow every `href` of every page, and every one
//! answers 200 with `text/html` (a page, never the API's JSON); the
//! console's lists and pages are reachable that way, and an UNKNOWN op
//! is shown UNKNOWN, never in the class of success.

use crate::api_harness;

use api_harness::*;
use std::collections::{BTreeSet, VecDeque};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Pages the crawl visits at most (a 3-node fleet has far fewer).
const CRAWL_PAGES_MAX: usize = 400;

/// A GET: status, `Content-Type` and body.
fn get(ctl: &Controller, path: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", ctl.port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (headers, body) = text.split_once("\r\n\r\n").expect("a head");
    let status = headers.split(' ').nth(1).unwrap().parse().unwrap();
    let lower = headers.to_ascii_lowercase();
    let content_type = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-type:"))
        .unwrap_or("")
        .trim()
        .to_string();
    let body = if lower.contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, content_type, body)
}

/// Every `src="..."` of `html` (the pictures a page shows).
fn sources(html: &str) -> Vec<String> {
    html.split(" src=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(|s| s.replace("&amp;", "&"))
        .collect()
}

/// Every `href="..."` of `html`, unescaped as a browser would.
fn hrefs(html: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(|h| h.replace("&amp;", "&"))
        .collect()
}

/// The GET forms' actions: each is a page too.
fn actions(html: &str) -> Vec<String> {
    html.split("<form method=\"get\" action=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn every_link_of_every_page_leads_to_a_page() {
    let ctl = Controller::start();
    ctl.start_rollout("node-c");
    let status = ctl.wait_for_unknown();
    let op = status["ops"][0]["id"].as_str().unwrap().to_string();

    let seen = crawl(&ctl, &op);
    eprintln!(
        "{} console pages followed, every one 200 text/html",
        seen.len()
    );

    // The UNKNOWN op's diagram draws its real events from the log, its
    // node's lane under the node's name.
    let (_, _, svg) = get(&ctl, &format!("/ops/{op}/diagram.svg"));
    assert!(svg.contains("node-c"), "{svg}");
    assert!(svg.contains(&format!("grant {op} (r0)")), "{svg}");

    // The UNKNOWN op: its page says so in the neutral class, and no page
    // shows it in the class of success.
    let (_, _, page) = get(&ctl, &format!("/ops/{op}"));
    assert!(
        page.contains("<span class=\"unknown\">unknown</span>"),
        "{page}"
    );
    assert!(page.contains("id=\"why-unknown\""), "{page}");
    assert!(page.contains("<ol id=\"timeline\">"), "{page}");
    assert!(
        page.contains("op-granted"),
        "the timeline has the grant: {page}"
    );
    for path in &seen {
        let (_, _, body) = get(&ctl, path);
        for line in body.lines().filter(|l| l.contains(&format!(">{op}<"))) {
            assert!(
                !line.contains("class=\"ok\"") && !line.contains("c-ok"),
                "{path}: {line}"
            );
        }
        assert!(!body.contains(">completed<"), "{path}: {body}");
    }

    // A page that does not exist is a page too, with its status.
    for (path, code) in [
        ("/rollouts/r9", 404),
        ("/nodes/nowhere", 404),
        ("/ops/op99", 404),
        ("/events?kind=nothing", 400),
    ] {
        let (got, content_type, body) = get(&ctl, path);
        assert_eq!(got, code, "{path}: {body}");
        assert!(
            content_type.starts_with("text/html"),
            "{path}: {content_type}"
        );
    }
}

/// Every page reachable from the overview by links (pages, the op's
/// diagram, the script), each checked to answer 200 in its kind; the
/// pages the issue names must be among them.
fn crawl(ctl: &Controller, op: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut queue = VecDeque::from(["/".to_string()]);
    // The pages named by the issue are reached by links, not typed in.
    let mut must_reach: BTreeSet<String> = [
        "/fleet",
        "/rollouts",
        "/rollouts/r0",
        "/nodes",
        "/nodes/node-c",
        "/nodes/node-c?proof=live",
        "/ops",
        &format!("/ops/{op}"),
        &format!("/ops/{op}/diagram.svg"),
        "/live.js",
        "/handover",
        "/events",
        "/rollouts/r0?wave=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    while let Some(path) = queue.pop_front() {
        if !seen.insert(path.clone()) {
            continue;
        }
        assert!(
            seen.len() <= CRAWL_PAGES_MAX,
            "more than {CRAWL_PAGES_MAX} pages"
        );
        let (code, content_type, body) = get(ctl, &path);
        assert_eq!(code, 200, "GET {path}: {body}");
        must_reach.remove(&path);
        // A picture (an op's sequence diagram) is an SVG, linked and shown
        // by its page; nothing is followed from it.
        if path.ends_with(".svg") {
            assert_eq!(content_type, "image/svg+xml", "GET {path}");
            assert!(body.starts_with("<svg"), "GET {path}: {body}");
            continue;
        }
        // The live script every page loads (issue #28 item 4).
        if path == "/live.js" {
            assert!(content_type.starts_with("text/javascript"), "GET {path}");
            assert!(body.contains("EventSource"), "GET {path}: {body}");
            continue;
        }
        assert!(
            content_type.starts_with("text/html"),
            "GET {path}: {content_type}: {body}"
        );
        assert!(body.starts_with("<!DOCTYPE html>"), "GET {path}: {body}");
        for href in hrefs(&body)
            .into_iter()
            .chain(actions(&body))
            .chain(sources(&body))
        {
            assert!(
                href.starts_with('/') && !href.starts_with("/api/") && href != "/metrics",
                "{path} links to {href}, not a console page"
            );
            if !seen.contains(&href) {
                queue.push_back(href);
            }
        }
    }
    assert!(must_reach.is_empty(), "never linked: {must_reach:?}");
    seen
}

/// Reads SSE from `GET {path}` until `until` returns true on what was read
/// or `wait` passes; returns what was read.
fn read_sse(ctl: &Controller, path: &str, wait: Duration, until: impl Fn(&str) -> bool) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", ctl.port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let deadline = std::time::Instant::now() + wait;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while std::time::Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => {} // the read timeout: look again
        }
        if until(&String::from_utf8_lossy(&got)) {
            break;
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// `GET /live` (issue #28 item 4): `follow=false` is one tick with the
/// log's last sequence; a follower gets a tick after a write, and a burst
/// of 30 writes reaches it as a few batched ticks (at most one a second),
/// the last naming the log's last sequence.
#[test]
fn live_ticks_follow_the_log_batched() {
    let ctl = Controller::start();
    let once = read_sse(&ctl, "/live?follow=false", Duration::from_secs(10), |_| {
        false
    });
    let last = ctl.last_sequence().as_u64().expect("a sequence");
    assert!(
        once.contains(&format!("event: changed\ndata: {last}\n")),
        "{once}"
    );
    let (code, _, page) = get(&ctl, "/live?follow=maybe");
    assert_eq!(code, 400, "{page}");

    let ctl = std::sync::Arc::new(ctl);
    let writer = {
        let ctl = ctl.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            for i in 0..30 {
                let body = serde_json::json!({ "set": { "burst": format!("v{i}") } });
                let (code, answer) = ctl.post_json("/api/nodes/node-a/labels", &body);
                assert_eq!(code, 200, "{answer}");
            }
        })
    };
    let started = std::time::Instant::now();
    // Each write appends who did it and one `NodeLabeled`.
    let target = last + 60;
    let followed = read_sse(&ctl, "/live", Duration::from_secs(20), |t| {
        ticks_of(t).last().is_some_and(|s| *s >= target)
    });
    writer.join().expect("the writer");
    let elapsed = started.elapsed();
    let ticks = ticks_of(&followed);
    assert_eq!(ticks.last(), Some(&target), "{followed}");
    assert_eq!(ctl.last_sequence().as_u64(), Some(target));
    assert!(ticks.windows(2).all(|w| w[0] < w[1]), "{ticks:?}");
    let bound = elapsed.as_secs() + 1;
    assert!(
        (ticks.len() as u64) <= bound,
        "{} ticks in {elapsed:?} for 30 writes: not batched ({ticks:?})",
        ticks.len()
    );
    eprintln!(
        "30 writes reached /live as {} tick(s): {ticks:?}",
        ticks.len()
    );
}

/// The sequences of the `changed` ticks in an SSE answer.
fn ticks_of(sse: &str) -> Vec<u64> {
    sse.split("event: changed\ndata: ")
        .skip(1)
        .filter_map(|t| t.split('\n').next()?.trim().parse().ok())
        .collect()
}

/// axe-core (WCAG 2.x A and AA rules) in headless chromium finds nothing on
/// any console page of a controller holding an UNKNOWN op (issue #28 item
/// 6); each page's load time is printed (`scripts/a11y.sh`).
#[test]
fn every_console_page_passes_axe_core() {
    let ctl = Controller::start();
    ctl.start_rollout("node-c");
    let status = ctl.wait_for_unknown();
    let op = status["ops"][0]["id"].as_str().unwrap().to_string();
    let pages: Vec<String> = crawl(&ctl, &op)
        .into_iter()
        .filter(|p| !p.ends_with(".svg") && !p.ends_with(".js"))
        .collect();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/a11y.sh");
    let out = std::process::Command::new("bash")
        .arg(script)
        .arg(ctl.url())
        .args(&pages)
        .output()
        .expect("running scripts/a11y.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "scripts/a11y.sh: {stdout}\n{stderr}");
    let mut checked = 0;
    let mut load_ms = Vec::new();
    let mut findings = Vec::new();
    for line in stdout.lines() {
        let page: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        checked += 1;
        load_ms.push(page["load_ms"].as_u64().unwrap_or(0));
        for v in page["violations"].as_array().expect("violations") {
            findings.push(format!("{}: {v}", page["path"]));
        }
    }
    assert_eq!(checked, pages.len(), "{stdout}\n{stderr}");
    assert!(findings.is_empty(), "axe-core: {}", findings.join("\n"));
    load_ms.sort_unstable();
    eprintln!(
        "axe-core: {checked} console pages, no violation; load p50 {} ms, max {} ms",
        load_ms[load_ms.len() / 2],
        load_ms.last().unwrap_or(&0)
    );
}
