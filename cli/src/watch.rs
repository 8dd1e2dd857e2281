//! `fleetweft watch [--rollout ID]`: follow `GET /api/events/stream` and
//! print one line per event (`--json`: the JSON lines). With `--rollout`
//! it ends with the rollout's outcome: exit 0 once it completed, 1 when it
//! paused, ended without every node passing or was superseded. A dropped
//! connection (or a `dropped` event: the reader fell behind) reconnects
//! with `Last-Event-ID`, at most [`WATCH_RETRIES_MAX`] times in a row,
//! backing off from [`WATCH_BACKOFF_BASE_MS`] to [`WATCH_BACKOFF_MAX_MS`].

use api::client::ApiClient;
use api::view::{self, EventDto, RolloutDto, StatusDto};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use model::RolloutId;
use std::io::Write;
use std::time::Duration;

/// Exit code: the rollout completed (or, without `--rollout`, stdout closed).
pub const EXIT_OK: u8 = 0;
/// Exit code: the rollout paused, ended short or was superseded.
pub const EXIT_BAD_NEWS: u8 = 1;
/// Exit code: usage, refusal (token, unknown rollout) or no connection.
pub const EXIT_USAGE: u8 = 2;

/// Why `watch` stopped without an outcome.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    /// For stderr.
    pub message: String,
    /// The exit code ([`EXIT_USAGE`]).
    pub code: u8,
}

/// Reconnections in a row without an event before `watch` gives up.
pub const WATCH_RETRIES_MAX: u32 = 8;
/// The first reconnection's delay; each further one doubles it.
pub const WATCH_BACKOFF_BASE_MS: u64 = 250;
/// The longest delay between reconnections.
pub const WATCH_BACKOFF_MAX_MS: u64 = 5_000;
/// Upper bound on one SSE event's text (an event's JSON is far smaller).
pub const SSE_EVENT_BYTES_MAX: usize = 4 * 1024 * 1024;
/// How long connecting (up to the answer's head) may take.
pub const CONNECT_TIMEOUT_MS: u64 = 10_000;

/// How one connection ended.
enum Ended {
    /// The rollout reached an outcome: the exit code.
    Outcome(u8),
    /// The connection ended (closed, failed, or dropped us): reconnect.
    Reconnect(String),
    /// The controller refused the request (401, 400, 404): retrying cannot
    /// help.
    Refused(String),
}

/// One SSE event as parsed off the wire.
#[derive(Default, Debug)]
struct SseEvent {
    id: Option<u64>,
    kind: String,
    data: String,
}

/// Run `watch`; the exit code (the lines are printed as they come).
pub async fn watch(client: &ApiClient, rollout: Option<&str>, json: bool) -> Result<u8, Failure> {
    let usage = |message: String| Failure {
        message,
        code: EXIT_USAGE,
    };
    let status: StatusDto = client
        .get("/api/status")
        .await
        .map_err(|e| usage(e.to_string()))?;
    let mut last = status.last_sequence;
    let target = match rollout {
        None => None,
        Some(text) => {
            let id = view::parse_rollout_id(text).ok_or_else(|| {
                usage(format!("--rollout {text:?}: expected a rollout id like r1"))
            })?;
            let dto: RolloutDto = client
                .get(&format!("/api/rollouts/{text}"))
                .await
                .map_err(|e| usage(format!("--rollout {text}: {e}")))?;
            // Already over: say so now (its events may be far back).
            if let Some(code) = settled_code(&dto.status) {
                println!("{text} is {} already", dto.status);
                return Ok(code);
            }
            Some(id)
        }
    };
    let mut failures = 0u32;
    loop {
        let before = last;
        match follow(client, rollout, target, &mut last, json).await {
            Ended::Outcome(code) => return Ok(code),
            Ended::Refused(why) => return Err(usage(why)),
            Ended::Reconnect(why) => {
                if last != before {
                    failures = 0;
                }
                failures += 1;
                if failures > WATCH_RETRIES_MAX {
                    return Err(usage(format!(
                        "the event stream failed {WATCH_RETRIES_MAX} times in a row: {why}"
                    )));
                }
                let delay =
                    (WATCH_BACKOFF_BASE_MS << (failures - 1).min(16)).min(WATCH_BACKOFF_MAX_MS);
                eprintln!("fleetweft watch: {why}; reconnecting in {delay} ms");
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
        }
    }
}

/// The exit code of a rollout whose status word says it is over.
fn settled_code(status: &str) -> Option<u8> {
    match status {
        "completed" => Some(EXIT_OK),
        "paused" | "ended" | "superseded" => Some(EXIT_BAD_NEWS),
        _ => None,
    }
}

/// One connection to the stream, resuming after `last`.
async fn follow(
    client: &ApiClient,
    rollout: Option<&str>,
    target: Option<RolloutId>,
    last: &mut Option<u64>,
    json: bool,
) -> Ended {
    let mut url = format!("{}/api/events/stream", client.base());
    if let Some(r) = rollout {
        url.push_str(&format!("?rollout={r}"));
    }
    let mut request = hyper::Request::get(&url).header("accept", "text/event-stream");
    if let Some(token) = client.token() {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    if let Some(seen) = last {
        request = request.header("last-event-id", seen.to_string());
    }
    let Ok(request) = request.body(Empty::<Bytes>::new()) else {
        return Ended::Reconnect(format!("{url}: not a valid request"));
    };
    let http: Client<HttpConnector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let answer = match tokio::time::timeout(
        Duration::from_millis(CONNECT_TIMEOUT_MS),
        http.request(request),
    )
    .await
    {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => return Ended::Reconnect(format!("{url}: {e}")),
        Err(_) => {
            return Ended::Reconnect(format!("{url}: no answer within {CONNECT_TIMEOUT_MS} ms"))
        }
    };
    if !answer.status().is_success() {
        let status = answer.status();
        let body = http_body_util::Limited::new(answer.into_body(), 64 * 1024)
            .collect()
            .await
            .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
            .unwrap_or_default();
        let why = format!("{url}: {status}: {body}");
        return if status.is_client_error() {
            Ended::Refused(why)
        } else {
            Ended::Reconnect(why)
        };
    }
    let mut body = answer.into_body();
    let mut buffer: Vec<u8> = Vec::new();
    loop {
        let frame = match body.frame().await {
            Some(Ok(frame)) => frame,
            Some(Err(e)) => return Ended::Reconnect(format!("the stream broke: {e}")),
            None => return Ended::Reconnect("the controller closed the stream".into()),
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        buffer.extend_from_slice(&data);
        while let Some(end) = find_blank_line(&buffer) {
            let block: Vec<u8> = buffer.drain(..end.1).collect();
            let event = parse_block(&String::from_utf8_lossy(&block[..end.0]));
            if let Some(ended) = handle(event, target, last, json) {
                return ended;
            }
        }
        if buffer.len() > SSE_EVENT_BYTES_MAX {
            return Ended::Reconnect(format!("an SSE event over {SSE_EVENT_BYTES_MAX} bytes"));
        }
    }
}

/// `(end of the block, end of its blank line)` of the first complete block.
fn find_blank_line(buffer: &[u8]) -> Option<(usize, usize)> {
    buffer
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|at| (at, at + 2))
}

fn parse_block(block: &str) -> SseEvent {
    let mut event = SseEvent::default();
    for line in block.lines() {
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => event.id = value.parse().ok(),
            "event" => event.kind = value.to_string(),
            "data" => {
                if !event.data.is_empty() {
                    event.data.push('\n');
                }
                event.data.push_str(value);
            }
            _ => {} // comments (keep-alives) and unknown fields
        }
    }
    event
}

/// Print one SSE event; `Some` when it ends this connection or the watch.
fn handle(
    event: SseEvent,
    target: Option<RolloutId>,
    last: &mut Option<u64>,
    json: bool,
) -> Option<Ended> {
    if event.kind == "dropped" {
        return Some(Ended::Reconnect(format!(
            "the controller dropped the stream: {}",
            event.data
        )));
    }
    let id = event.id?;
    let dto: EventDto = match serde_json::from_str(&event.data) {
        Ok(dto) => dto,
        Err(e) => return Some(Ended::Reconnect(format!("event {id}: not an event ({e})"))),
    };
    *last = Some(id);
    let mut out = std::io::stdout().lock();
    let printed = if json {
        writeln!(out, "{}", event.data)
    } else {
        writeln!(
            out,
            "{id:>6} {:<24} {}",
            event.kind,
            logtools::inspect::printable(&dto.text)
        )
    };
    // A closed stdout (`watch | head`): nothing more to do.
    if printed.and_then(|()| out.flush()).is_err() {
        return Some(Ended::Outcome(EXIT_OK));
    }
    let outcome = view::rollout_outcome(&dto.event, target?)?;
    Some(Ended::Outcome(if outcome {
        EXIT_OK
    } else {
        EXIT_BAD_NEWS
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_blocks_parse_with_comments_and_multi_line_data() {
        let event =
            parse_block(": keep-alive\nid: 7\nevent: rollout-paused\ndata: {\"a\":\ndata: 1}");
        assert_eq!(event.id, Some(7));
        assert_eq!(event.kind, "rollout-paused");
        assert_eq!(event.data, "{\"a\":\n1}");
        assert_eq!(find_blank_line(b"id: 1\n\nid: 2"), Some((5, 7)));
        assert_eq!(find_blank_line(b"id: 1\n"), None);
    }

    #[test]
    fn over_statuses_exit_with_their_outcome() {
        assert_eq!(settled_code("completed"), Some(EXIT_OK));
        for s in ["paused", "ended", "superseded"] {
            assert_eq!(settled_code(s), Some(EXIT_BAD_NEWS));
        }
        for s in ["active", "waiting-approval"] {
            assert_eq!(settled_code(s), None);
        }
    }
}
