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
        let (code, content_type, body) = get(&ctl, &path);
        assert_eq!(code, 200, "GET {path}: {body}");
        assert!(
            content_type.starts_with("text/html"),
            "GET {path}: {content_type}: {body}"
        );
        assert!(body.starts_with("<!DOCTYPE html>"), "GET {path}: {body}");
        must_reach.remove(&path);
        for href in hrefs(&body).into_iter().chain(actions(&body)) {
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
    eprintln!(
        "{} console pages followed, every one 200 text/html",
        seen.len()
    );

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
