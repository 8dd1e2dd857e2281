//! Acting from the console (issue #28 item 3) against a real controller,
//! over plain HTTP as a browser speaks it: a wrong token opens no session;
//! the right one sets a `Secure; HttpOnly; SameSite=Strict` cookie; a
//! rollout's page offers what the model accepts now, and only to a
//! session; a form acts only with its session's CSRF token; the model's
//! refusal is shown in its own words (the API's); a claim is recorded
//! from the op's page, a label and a probe from a node's page (retire
//! offered only where the model accepts it); after logging out the old
//! cookie acts no more.

use crate::api_harness;

use api_harness::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One answer: status, head (lowercase) and body.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    /// A header's value (its name in lowercase).
    fn header(&self, name: &str) -> Option<String> {
        self.head
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .map(|v| v.trim().to_string())
    }
}

/// A request with `cookie` (the session cookie's value) and a form body.
fn send(ctl: &Controller, method: &str, path: &str, cookie: Option<&str>, form: &str) -> Answer {
    let mut stream = TcpStream::connect(("127.0.0.1", ctl.port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let cookie = cookie
        .map(|c| format!("Cookie: fleetweft_session={c}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{cookie}\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
        form.len()
    );
    stream.write_all(head.as_bytes()).expect("write");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("read");
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    let head = head.to_ascii_lowercase();
    let body = if head.contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_string()
    };
    Answer { status, head, body }
}

/// `text` percent-encoded for a form field.
fn field(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect()
}

/// The value of the first hidden `csrf` field of a page.
fn csrf_of(page: &str) -> Option<String> {
    let rest = page.split("name=\"csrf\" value=\"").nth(1)?;
    rest.split('"').next().map(str::to_string)
}

/// Logs in; returns the session cookie's value after checking its flags.
fn log_in(ctl: &Controller, next: &str) -> String {
    log_in_with(ctl, &ctl.token, next)
}

/// Logs in with `credential`; the session cookie's value.
fn log_in_with(ctl: &Controller, credential: &str, next: &str) -> String {
    let form = format!("token={}&next={}", field(credential), field(next));
    let a = send(ctl, "POST", "/login", None, &form);
    assert_eq!(a.status, 303, "{}", a.body);
    assert_eq!(a.header("location").as_deref(), Some(next));
    let cookie = a.header("set-cookie").expect("a session cookie");
    for flag in ["secure", "httponly", "samesite=strict", "path=/"] {
        assert!(cookie.contains(flag), "{cookie}");
    }
    let value = cookie
        .strip_prefix("fleetweft_session=")
        .and_then(|v| v.split(';').next())
        .expect("the cookie's value");
    assert_eq!(value.len(), 64, "a 256-bit id: {cookie}");
    assert!(!cookie.contains(credential), "never the credential");
    value.to_string()
}

/// `text` as the console escapes it.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn paused(ctl: &Controller) -> bool {
    ctl.view()["rollouts"][0]["paused_reason"]
        .as_str()
        .is_some()
}

#[test]
fn a_logged_in_operator_pauses_resumes_and_claims_from_the_pages_and_sees_refusals() {
    let ctl = Controller::start();
    ctl.start_rollout("node-c");
    ctl.wait_for_unknown();

    // Anonymous: the page offers a login, no form.
    let page = send(&ctl, "GET", "/rollouts/r0", None, "");
    assert!(page.body.contains("id=\"login-to-act\""), "{}", page.body);
    assert!(
        page.body.contains("/login?next=%2Frollouts%2Fr0"),
        "{}",
        page.body
    );
    assert!(csrf_of(&page.body).is_none(), "{}", page.body);
    let login = send(&ctl, "GET", "/login?next=/rollouts/r0", None, "");
    assert_eq!(login.status, 200);
    assert!(
        login.body.contains("<label for=\"token\">"),
        "{}",
        login.body
    );

    // A wrong token: 401, no session.
    let wrong = send(&ctl, "POST", "/login", None, "token=nope&next=%2F");
    assert_eq!(wrong.status, 401, "{}", wrong.body);
    assert!(wrong.header("set-cookie").is_none());
    assert!(
        wrong
            .body
            .contains("Unknown, rotated or revoked credential"),
        "{}",
        wrong.body
    );

    let cookie = log_in(&ctl, "/rollouts/r0");
    let page = send(&ctl, "GET", "/rollouts/r0", Some(&cookie), "");
    let csrf = csrf_of(&page.body).expect("the page's forms carry the session's token");
    assert!(
        page.body.contains("value=\"pause\">pause</button>")
            && !page.body.contains("value=\"resume\"")
            && !page.body.contains("value=\"approve\""),
        "only what the model accepts now: {}",
        page.body
    );

    // Without the token, or without the cookie: nothing is done.
    let no_token = send(
        &ctl,
        "POST",
        "/rollouts/r0/act",
        Some(&cookie),
        "action=pause",
    );
    assert_eq!(no_token.status, 403, "{}", no_token.body);
    let stale = format!("action=pause&csrf={}", "0".repeat(64));
    assert_eq!(
        send(&ctl, "POST", "/rollouts/r0/act", Some(&cookie), &stale).status,
        403
    );
    let pause = format!("action=pause&csrf={csrf}");
    let no_cookie = send(&ctl, "POST", "/rollouts/r0/act", None, &pause);
    assert_eq!(no_cookie.status, 401, "{}", no_cookie.body);
    let claim_anonymously = format!("action=claim&review_by=now&csrf={csrf}");
    assert_eq!(
        send(&ctl, "POST", "/ops/op0/act", None, &claim_anonymously).status,
        401
    );
    assert_eq!(
        send(&ctl, "POST", "/logout", None, &format!("csrf={csrf}")).status,
        401
    );
    assert!(!paused(&ctl), "nothing was done");

    // Pause from the page, then again: the model refuses, in its words.
    let done = send(&ctl, "POST", "/rollouts/r0/act", Some(&cookie), &pause);
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(done.header("location").as_deref(), Some("/rollouts/r0"));
    assert!(paused(&ctl));
    let again = send(&ctl, "POST", "/rollouts/r0/act", Some(&cookie), &pause);
    assert_eq!(again.status, 409, "{}", again.body);
    let (code, api) = ctl.post_json("/api/rollouts/r0/pause", &serde_json::json!({}));
    assert_eq!(code, 409, "{api}");
    let words: serde_json::Value = serde_json::from_str(&api).expect("an error object");
    let message = escaped(words["error"].as_str().expect("the API's message"));
    assert!(
        again.body.contains("id=\"refusal\"") && again.body.contains(&message),
        "the console says what the API says ({message}): {}",
        again.body
    );
    let page = send(&ctl, "GET", "/rollouts/r0", Some(&cookie), "");
    assert!(page.body.contains("value=\"resume\""), "{}", page.body);
    let resume = format!("action=resume&csrf={csrf}");
    assert_eq!(
        send(&ctl, "POST", "/rollouts/r0/act", Some(&cookie), &resume).status,
        303
    );
    assert!(!paused(&ctl));

    // The UNKNOWN op's page: claim it.
    let op_page = send(&ctl, "GET", "/ops/op0", Some(&cookie), "");
    assert!(op_page.body.contains("id=\"claim\""), "{}", op_page.body);
    let claim = format!("action=claim&review_by=tomorrow&csrf={csrf}");
    let claimed = send(&ctl, "POST", "/ops/op0/act", Some(&cookie), &claim);
    assert_eq!(claimed.status, 303, "{}", claimed.body);
    let unresolved = ctl.get_json("/api/unresolved");
    assert_eq!(
        unresolved[0]["owner"], "admin",
        "held by the operator logged in: {unresolved}"
    );

    // A node's page: probe, retire where the model accepts it, labels.
    let node_a = send(&ctl, "GET", "/nodes/node-a", Some(&cookie), "");
    assert!(
        node_a.body.contains("value=\"probe\"") && node_a.body.contains("value=\"retire\""),
        "{}",
        node_a.body
    );
    let node_c = send(&ctl, "GET", "/nodes/node-c", Some(&cookie), "");
    assert!(
        !node_c.body.contains("value=\"retire\""),
        "node-c holds a live op: {}",
        node_c.body
    );
    let label = format!("action=label&set=region%3Deu&csrf={csrf}");
    assert_eq!(
        send(&ctl, "POST", "/nodes/node-a/act", Some(&cookie), &label).status,
        303
    );
    let nodes = ctl.all_pages("/api/nodes");
    let a = nodes
        .iter()
        .find(|n| n["name"] == "node-a")
        .expect("node-a");
    assert_eq!(a["labels"]["region"], "eu", "{a}");
    let retire_c = format!("action=retire&csrf={csrf}");
    let refused = send(&ctl, "POST", "/nodes/node-c/act", Some(&cookie), &retire_c);
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(refused.body.contains("id=\"refusal\""), "{}", refused.body);
    let before = ctl.last_sequence();
    let probe = format!("action=probe&csrf={csrf}");
    let probed = send(&ctl, "POST", "/nodes/node-c/act", Some(&cookie), &probe);
    assert_eq!(probed.status, 303, "{}", probed.body);
    assert_ne!(
        ctl.last_sequence(),
        before,
        "the probe recorded what it saw"
    );

    // Logged out: the old cookie acts no more.
    let out = send(
        &ctl,
        "POST",
        "/logout",
        Some(&cookie),
        &format!("csrf={csrf}"),
    );
    assert_eq!(out.status, 303, "{}", out.body);
    assert!(out
        .header("set-cookie")
        .is_some_and(|c| c.contains("max-age=0")));
    assert_eq!(
        send(&ctl, "POST", "/rollouts/r0/act", Some(&cookie), &pause).status,
        401
    );
    assert!(!paused(&ctl));
}

/// A credential `name` gets from the admin, with `role`, through the CLI
/// (`--write FILE`, mode 0600).
fn add_operator(ctl: &Controller, name: &str, role: &str) -> String {
    let file = std::env::temp_dir().join(format!(
        "fleetweft-operator-{name}-{}-{}",
        std::process::id(),
        ctl.port
    ));
    let _ = std::fs::remove_file(&file);
    let path = file.to_string_lossy().into_owned();
    let out = ctl.cli(
        &["operator", "add", name, "--role", role, "--write", &path],
        Some(&ctl.token),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file)
        .expect("written")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "a credential file is the owner's only");
    let credential = std::fs::read_to_string(&file).expect("read");
    let _ = std::fs::remove_file(&file);
    credential.trim().to_string()
}

/// Every event of the log, as the model encodes it.
fn log(ctl: &Controller) -> Vec<model::controller::Event> {
    // A short log: one page.
    let page = ctl.get_json("/api/events?from=0&limit=1000");
    page.as_array()
        .expect("a page of events")
        .iter()
        .map(|e| serde_json::from_value(e["event"].clone()).expect("an event"))
        .collect()
}

/// Issue #28 item 2's acceptance on a real controller: a viewer's approve
/// is refused naming the role it lacks by the API (403), the CLI (exit 2)
/// and the console (403 page); every operator event in the log names its
/// operator (O1 over the whole log, and the approver's own events); a
/// rotated or revoked credential is refused at once, and a revoked one
/// also after a restart.
#[test]
fn roles_are_enforced_everywhere_and_a_revoked_credential_is_refused_at_once_and_after_a_restart() {
    let mut ctl = Controller::start();
    let rollout = ctl.start_rollout("node-c");
    let vera = add_operator(&ctl, "vera", "viewer");
    let ada = add_operator(&ctl, "ada", "approver");
    let listed = ctl.cli(&["operator", "list"], None);
    let listed = text(&listed.stdout);
    assert!(
        listed.contains("vera  viewer  active") && listed.contains("ada  approver"),
        "{listed}"
    );

    // The viewer's approve: refused before the state is looked at, in
    // every surface, naming the role it needs and the one it has.
    let approve = format!("/api/rollouts/{rollout}/approve");
    let (code, body) = ctl.http("POST", &approve, Some(&vera), b"{}");
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains("needs the approver role") && body.contains("vera has the viewer role"),
        "{body}"
    );
    let cli = ctl.cli(&["rollout", "approve", &rollout], Some(&vera));
    assert_eq!(cli.status.code(), Some(2), "{}", text(&cli.stderr));
    assert!(
        text(&cli.stderr).contains("approver"),
        "{}",
        text(&cli.stderr)
    );
    let cookie = log_in_with(&ctl, &vera, "/rollouts/r0");
    let page = send(&ctl, "GET", "/rollouts/r0", Some(&cookie), "");
    let csrf = csrf_of(&page.body).expect("a session's forms");
    let form = format!("action=pause&csrf={csrf}");
    let refused = send(&ctl, "POST", "/rollouts/r0/act", Some(&cookie), &form);
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused.body.contains("needs the deployer role"),
        "{}",
        refused.body
    );

    // The approver pauses and resumes: recorded as hers.
    for verb in ["pause", "resume"] {
        let (code, body) = ctl.http(
            "POST",
            &format!("/api/rollouts/{rollout}/{verb}"),
            Some(&ada),
            b"{}",
        );
        assert_eq!(code, 200, "{verb}: {body}");
        assert!(body.contains("by operator ada:"), "{body}");
    }
    let events = log(&ctl);
    invariants::check_history(&events).expect("O1 and every other rule hold over the real log");
    let acted = |name: &str| model::controller::Event::Acted {
        by: model::controller::ActedBy::Operator(name.into()),
    };
    for (i, event) in events.iter().enumerate() {
        if matches!(
            event,
            model::controller::Event::RolloutPaused { .. }
                | model::controller::Event::RolloutResumed { .. }
        ) {
            assert_eq!(events[i - 1], acted("ada"), "who paused and resumed");
        }
        let by_admin = match event {
            model::controller::Event::RolloutStarted { .. } => true,
            model::controller::Event::OperatorAdded { name, .. } => name != "admin",
            _ => false,
        };
        if by_admin {
            assert_eq!(
                events[i - 1],
                acted("admin"),
                "who started and added: {event:?}"
            );
        }
    }

    // Ada rotates her own credential: the old one is refused at once.
    let (code, body) = ctl.http("POST", "/api/operators/ada/rotate", Some(&ada), b"{}");
    assert_eq!(code, 200, "{body}");
    let rotated: serde_json::Value = serde_json::from_str(&body).expect("json");
    let ada2 = rotated["credential"]
        .as_str()
        .expect("a new credential")
        .to_string();
    assert_eq!(ctl.http("POST", &approve, Some(&ada), b"{}").0, 401);
    assert_eq!(
        ctl.http("POST", &approve, Some(&ada2), b"{}").0,
        409,
        "authorized; no gate to pass"
    );

    // The admin revokes vera: refused at once (the API and her console
    // session), and after a restart.
    let revoked = ctl.cli(&["operator", "revoke", "vera"], Some(&ctl.token));
    assert!(revoked.status.success(), "{}", text(&revoked.stderr));
    let (code, body) = ctl.http("POST", "/api/operators/vera/rotate", Some(&vera), b"{}");
    assert_eq!(code, 401, "{body}");
    let after = send(&ctl, "POST", "/rollouts/r0/act", Some(&cookie), &form);
    assert_eq!(after.status, 401, "{}", after.body);
    assert!(after.body.contains("vera is revoked"), "{}", after.body);
    let last = ctl.cli(&["operator", "revoke", "admin"], Some(&ctl.token));
    assert!(
        !last.status.success() && text(&last.stderr).contains("last admin"),
        "{}",
        text(&last.stderr)
    );
    ctl.restart();
    assert_eq!(
        ctl.http("POST", "/api/operators/vera/rotate", Some(&vera), b"{}")
            .0,
        401
    );
    assert_eq!(
        ctl.http("POST", &approve, Some(&ada2), b"{}").0,
        409,
        "ada still acts"
    );
    assert_eq!(log_in_status(&ctl, &vera), 401);
}

/// The status of a console login with `credential`.
fn log_in_status(ctl: &Controller, credential: &str) -> u16 {
    let form = format!("token={}&next=%2F", field(credential));
    send(ctl, "POST", "/login", None, &form).status
}
