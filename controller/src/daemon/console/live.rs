//! Live pages (issue #28 item 4): `GET /live`, a Server-Sent Events
//! stream that says "the log changed" at most once a [`LIVE_BATCH_MS`],
//! and `GET /live.js`, the script every page loads to follow it: on a
//! change it fetches the page it shows again and swaps its `<main>` in
//! place, one fetch at a time, never while a form on it has the focus.
//! Without JavaScript nothing changes: the pages read as before, and the
//! overview still reloads itself every 2 s (`<noscript>`).
//!
//! Why a change tick and not `/api/events/stream`: the console's pages
//! are read without the operator token, and an `EventSource` cannot send
//! one. The tick carries only the log's last sequence, which the pages
//! show anyway. Batched: a burst of appends (a 10,000-node rollout
//! settles hundreds of ops a second) is one tick a second, so a reader
//! re-renders one bounded page (under [`super::PAGE_BYTES_MAX`]) a second
//! at most, however fast the log grows. The streams have a pool of their
//! own ([`crate::daemon::state::LIVE_STREAMS_MAX`]): anonymous readers
//! who fill it stop only these updates, never an operator's event stream.

use super::{pairs, param, refusal, PageQuery};
use crate::daemon::state::{Api, Slot};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event as Sse, KeepAlive};
use axum::response::{IntoResponse, Response};
use model::controller::Event;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

/// At most one `changed` tick per this many milliseconds: the appends
/// that arrive while a tick waits go out with it.
pub const LIVE_BATCH_MS: u64 = 1_000;
/// Interval between keep-alive comments on a quiet stream.
const LIVE_KEEPALIVE_MS: u64 = 15_000;
/// How long a browser may keep `/live.js` before asking again.
const LIVE_JS_MAX_AGE_S: u32 = 300;

/// The script every page loads (`shell` links it). Plain ES5 so any
/// browser with `EventSource` runs it; it does nothing without one.
pub const LIVE_JS: &str = r#"(function () {
  if (!window.EventSource || !window.fetch || !window.DOMParser) return;
  var busy = false, again = false;
  function typing() {
    var a = document.activeElement;
    return a && (a.form || a.tagName === "INPUT" || a.tagName === "SELECT");
  }
  function refresh() {
    if (busy || document.hidden || typing()) { again = true; return; }
    busy = true;
    fetch(location.href, { headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (!text) return;
        var next = new DOMParser().parseFromString(text, "text/html").getElementById("main");
        var now = document.getElementById("main");
        if (next && now) { now.replaceWith(next); document.body.dataset.liveSequence = String(seen); }
      })
      .catch(function () {})
      .then(function () { busy = false; if (again) { again = false; setTimeout(refresh, 1000); } });
  }
  var seen = 0;
  var source = new EventSource("/live");
  source.addEventListener("changed", function (e) { seen = Number(e.data) || seen; refresh(); });
  document.addEventListener("visibilitychange", function () { if (!document.hidden && again) { again = false; refresh(); } });
})();
"#;

/// The live routes.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<Api> {
    utoipa_axum::router::OpenApiRouter::new()
        .routes(utoipa_axum::routes!(live))
        .routes(utoipa_axum::routes!(live_js))
}

/// `GET /live`'s query, as documented.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Declares the query for the document; never built.
struct LiveParams {
    /// `false`: one tick with the log's last sequence now, then the end
    /// (the bounded form, for scripts and the contract test). Default
    /// (`true`, or empty): follow the log.
    #[param(pattern = "^(|true|false)$")]
    follow: Option<String>,
}

/// One SSE event of `GET /live`, as a reader parses it: `event` is
/// `changed`, `data` the log's last sequence (empty for an empty log).
#[derive(serde::Serialize, Debug, utoipa::ToSchema)]
#[allow(dead_code)] // Documents the wire form; written through axum's `Sse`.
pub struct LiveTick {
    /// Always `changed`.
    #[schema(pattern = "^changed$")]
    event: String,
    /// The log's last sequence when the tick was sent.
    #[schema(pattern = "^[0-9]*$")]
    data: String,
}

/// `GET /live`: a tick per batch of appends to the log.
#[utoipa::path(get, path = "/live", tag = "console",
    params(LiveParams),
    responses(
        (status = 200, description = "`text/event-stream`: `event: changed` with `data:` the log's last sequence (empty for an empty log), at most once a second, after appends; nothing while the log is quiet (keep-alive comments). With `follow=false`: one tick, the log's last sequence now, then the end. The schema is one event's", body = LiveTick, content_type = "text/event-stream"),
        (status = 400, description = "a bad parameter, named (HTML)", body = String, content_type = "text/html"),
        (status = 503, description = "too many open streams, or the core stopped (HTML)", body = String, content_type = "text/html"),
    ))]
async fn live(State(api): State<Api>, q: PageQuery) -> Response {
    let pairs = match pairs(q) {
        Ok(p) => p,
        Err(refused) => return refused.into_response(),
    };
    match param(&pairs, "follow") {
        None | Some("" | "true") => {}
        Some("false") => return once(&api).await,
        Some(other) => {
            return refusal(
                StatusCode::BAD_REQUEST,
                &format!("parameter `follow`: {other:?} is not true or false"),
            )
        }
    }
    let Some(slot) = api.live_streams.take() else {
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!(
                "{} console pages follow the log already: this page will not update by itself; reload it",
                crate::daemon::state::LIVE_STREAMS_MAX
            ),
        );
    };
    let ticks = Ticks {
        rx: api.core.subscribe(),
        _slot: slot,
    };
    axum::response::Sse::new(futures_util::stream::unfold(ticks, Ticks::next))
        .keep_alive(KeepAlive::new().interval(Duration::from_millis(LIVE_KEEPALIVE_MS)))
        .into_response()
}

/// `follow=false`: the log's last sequence now, as one tick.
async fn once(api: &Api) -> Response {
    let Some(snap) = api.core.snapshot().await else {
        return super::unavailable();
    };
    let data = snap.last_sequence.map_or(String::new(), |s| s.to_string());
    let tick: Result<Sse, Infallible> = Ok(Sse::default().event("changed").data(data));
    axum::response::Sse::new(futures_util::stream::iter([tick])).into_response()
}

/// `GET /live.js`: the script that follows `/live`.
#[utoipa::path(get, path = "/live.js", tag = "console",
    responses(
        (status = 200, description = "the pages' script (JavaScript)", body = String, content_type = "text/javascript"),
    ))]
async fn live_js() -> Response {
    (
        StatusCode::OK,
        [
            (
                axum::http::header::CONTENT_TYPE,
                "text/javascript; charset=utf-8".to_string(),
            ),
            (
                axum::http::header::CACHE_CONTROL,
                format!("max-age={LIVE_JS_MAX_AGE_S}"),
            ),
        ],
        LIVE_JS,
    )
        .into_response()
}

/// One open `/live` stream.
struct Ticks {
    rx: broadcast::Receiver<Arc<(u64, Event)>>,
    _slot: Slot,
}

impl Ticks {
    /// The next tick: waits for an append, then [`LIVE_BATCH_MS`] more,
    /// and sends the last sequence seen. `None` (the end) when the core
    /// stopped.
    async fn next(mut self) -> Option<(Result<Sse, Infallible>, Ticks)> {
        let mut last = loop {
            match self.rx.recv().await {
                Ok(item) => break item.0,
                // Missed appends are still appends: the next one is read.
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return None,
            }
        };
        tokio::time::sleep(Duration::from_millis(LIVE_BATCH_MS)).await;
        loop {
            match self.rx.try_recv() {
                Ok(item) => last = last.max(item.0),
                Err(TryRecvError::Lagged(_)) => continue,
                Err(TryRecvError::Empty | TryRecvError::Closed) => break,
            }
        }
        let tick = Sse::default().event("changed").data(last.to_string());
        Some((Ok(tick), self))
    }
}
