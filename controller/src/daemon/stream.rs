//! `GET /api/events/stream`: the event log as Server-Sent Events (issue 13).
//!
//! Each SSE event is one log entry: `id:` its sequence, `event:` its kind
//! word ([`words::event_kind`]), `data:` the JSON `GET /api/events` returns
//! for it. A reader resumes with `Last-Event-ID` (or `?after=SEQ`): the
//! stream replays the log from there page by page, then follows live
//! appends (or, with `?follow=false`, ends once its replay reaches the
//! log's end: a bounded form for scripts and for the contract test). It subscribes to the core's appends *before* reading the log
//! and drops live items it already sent, so the hand-over from replay to
//! live has no gap and no duplicate. The live buffer is bounded (`[api]
//! stream_buffer_events`); a reader further behind gets a final `event:
//! dropped` naming the reason and reconnects from the log.

use super::error::{ApiError, Query};
use super::state::{operator_for, Api, Slot};
pub use super::state::{StreamSlots, STREAMS_MAX};
use super::view::{words, ErrorBody};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as Sse, KeepAlive};
use axum::response::{IntoResponse, Response};
use model::controller::Event;
use model::controller::OffLogAction;
use model::{OpId, RolloutId};
use serde::Deserialize;
use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::{self, error::RecvError};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Events read from the log per page while catching up (one bounded read
/// through the core each; never the whole log in memory).
pub const STREAM_PAGE_EVENTS: usize = 256;
/// Interval between keep-alive comments on an idle stream.
pub const STREAM_KEEPALIVE_MS: u64 = 15_000;

/// The stream's route.
pub fn routes() -> OpenApiRouter<Api> {
    OpenApiRouter::new().routes(routes!(event_stream))
}

/// `GET /api/events/stream`'s query.
#[derive(Deserialize, Debug, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StreamQuery {
    /// The last sequence already seen: the stream starts after it (default:
    /// the start of the log). A `Last-Event-ID` header wins over it.
    #[param(minimum = 0, maximum = 9223372036854775807_u64)]
    pub after: Option<u64>,
    /// Only the events of this rollout (`r1`): its rollout events and the
    /// events of its ops.
    #[param(pattern = "^r[0-9]{1,9}$")]
    pub rollout: Option<String>,
    /// Follow live appends after the replay (default `true`). `false`: the
    /// stream ends once its replay reaches the log's end (entries appended
    /// while it reads included).
    pub follow: Option<bool>,
}

/// `GET /api/events/stream`'s header: where a reconnecting reader resumes.
#[derive(Deserialize, Debug, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // Declares the header for the document; read by `open`.
struct StreamHeader {
    /// The last sequence seen: the stream resumes after it and the header
    /// wins over `after`. Empty (an `EventSource` whose last `id:` was
    /// empty) is the same as no header: from `after`, or the start.
    // A String, optional: `Option` would document `null`, which no header
    // can carry.
    #[param(
        rename = "Last-Event-ID",
        required = false,
        pattern = "^(0|[1-9][0-9]{0,17})?$"
    )]
    last_event_id: String,
}

/// One SSE event of `GET /api/events/stream`, as a reader parses it: `id`
/// the log sequence (absent on a `dropped` event that follows none),
/// `event` the kind word ([`words::event_kind`]) or `dropped`, `data` the
/// [`super::view::EventDto`] of `GET /api/events` as JSON, or for
/// `dropped` `{"reason", "last_sequence"}`.
#[derive(serde::Serialize, Debug, utoipa::ToSchema)]
#[allow(dead_code)] // Documents the wire form; the stream writes it through axum's `Sse`.
pub struct StreamEvent {
    /// The log sequence of the entry.
    #[schema(pattern = "^[0-9]+$")]
    id: Option<String>,
    /// The entry's kind word, or `dropped`.
    #[schema(pattern = "^[a-z][a-z-]*$")]
    event: String,
    /// JSON: the `/api/events` entry, or the reason the stream was dropped.
    #[schema(content_media_type = "application/json")]
    data: String,
}

/// `GET /api/events/stream`: follow the event log (SSE).
#[utoipa::path(get, path = "/api/events/stream", tag = "reads", security(("bearer" = [])),
    params(StreamQuery, StreamHeader),
    responses(
        (status = 200, description = "`text/event-stream`: one SSE event per log entry (`id` = sequence, `event` = kind word, `data` = the `/api/events` entry), then live appends (none with `follow=false`: the stream ends after the replay); a final `dropped` event when the reader fell behind. The schema is one event's", content_type = "text/event-stream", body = StreamEvent),
        (status = 400, description = "a bad parameter or header, named", body = ErrorBody),
        (status = 401, description = "missing, unknown, rotated or revoked operator credential", body = ErrorBody),
        (status = 404, description = "no such rollout", body = ErrorBody),
        (status = 503, description = "too many open streams, or the core stopped", body = ErrorBody),
    ))]
async fn event_stream(
    State(api): State<Api>,
    headers: HeaderMap,
    Query(q): Query<StreamQuery>,
) -> Response {
    if let Err(rejection) = operator_for(&api, &headers, OffLogAction::ReadEvents) {
        return rejection.into_response();
    }
    match open(&api, &headers, &q).await {
        Ok(follow) => axum::response::Sse::new(futures_util::stream::unfold(follow, Follow::next))
            .keep_alive(KeepAlive::new().interval(Duration::from_millis(STREAM_KEEPALIVE_MS)))
            .into_response(),
        Err(e) => e.into_response(),
    }
}

/// Check the request and set up its stream (subscribed before any read).
async fn open(api: &Api, headers: &HeaderMap, q: &StreamQuery) -> Result<Follow, ApiError> {
    // An empty header is no header (the SSE reconnection of a reader whose
    // last `id:` was empty).
    let header = headers
        .get("last-event-id")
        .filter(|value| !value.as_bytes().iter().all(u8::is_ascii_whitespace));
    // Checked even when the header wins: a malformed request is refused
    // whatever else it carries.
    if q.after.is_some_and(|a| a > super::view::INT64_MAX) {
        return Err(ApiError::BadRequest(
            "parameter `after`: over the int64 range".into(),
        ));
    }
    let after = match header {
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|v| *v <= super::view::INT64_MAX)
                .ok_or_else(|| {
                    ApiError::BadRequest(
                        "header `Last-Event-ID`: expected a log sequence (a whole number)".into(),
                    )
                })?,
        ),
        None => q.after,
    };
    let rx = api.core.subscribe();
    let filter = match &q.rollout {
        None => None,
        Some(text) => Some(rollout_filter(api, text).await?),
    };
    let slot = api.streams.take().ok_or_else(|| {
        ApiError::Busy(format!(
            "{STREAMS_MAX} event streams are open already; try again later"
        ))
    })?;
    Ok(Follow {
        api: api.clone(),
        rx,
        next: after.map_or(0, |a| a.saturating_add(1)),
        live: false,
        follow_live: q.follow.unwrap_or(true),
        filter,
        pending: VecDeque::new(),
        done: false,
        _slot: slot,
    })
}

/// The rollout `text` names, with its ops as of now (ops granted later
/// are added as their `OpGranted` passes).
async fn rollout_filter(api: &Api, text: &str) -> Result<RolloutFilter, ApiError> {
    let Some(rollout) = super::view::parse_rollout_id(text) else {
        return Err(ApiError::BadRequest(format!(
            "parameter `rollout`: {text:?} is not a rollout id such as r1"
        )));
    };
    let snap = api.core.snapshot().await.ok_or(ApiError::Unavailable)?;
    let rollout = Some(rollout)
        .filter(|r| snap.state.rollout(*r).is_some())
        .ok_or_else(|| ApiError::NotFound(format!("parameter `rollout`: no rollout {text}")))?;
    let ops = snap
        .state
        .rollout(rollout)
        .map(|r| r.ops.iter().copied().collect())
        .unwrap_or_default();
    Ok(RolloutFilter { rollout, ops })
}

/// Which events a `?rollout=` stream passes.
struct RolloutFilter {
    rollout: RolloutId,
    /// The rollout's ops (at most its plan's nodes).
    ops: HashSet<OpId>,
}

impl RolloutFilter {
    fn passes(&mut self, event: &Event) -> bool {
        if let Event::OpGranted { op, rollout, .. } = event {
            if *rollout == self.rollout {
                self.ops.insert(*op);
            }
        }
        super::view::event_rollout(event) == Some(self.rollout)
            || super::view::event_op(event).is_some_and(|op| self.ops.contains(&op))
    }
}

/// One open stream: where it is in the log and what it has to send.
struct Follow {
    api: Api,
    rx: broadcast::Receiver<Arc<(u64, Event)>>,
    /// The next sequence to send: everything before it was sent (or
    /// filtered out).
    next: u64,
    /// Replay is over: items come from `rx`.
    live: bool,
    /// Go live after the replay; `false`: end there.
    follow_live: bool,
    filter: Option<RolloutFilter>,
    /// SSE events ready to go (at most one page).
    pending: VecDeque<Sse>,
    done: bool,
    _slot: Slot,
}

impl Follow {
    /// The stream's next SSE event; `None` ends it.
    async fn next(mut self) -> Option<(Result<Sse, Infallible>, Follow)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some((Ok(event), self));
            }
            if self.done {
                return None;
            }
            if self.live {
                self.follow().await;
            } else {
                self.replay().await;
            }
        }
    }

    /// One page from the log; an empty page ends the replay.
    async fn replay(&mut self) {
        let page = self.api.core.events(self.next, STREAM_PAGE_EVENTS).await;
        if page.is_empty() {
            self.live = true;
            self.done = !self.follow_live;
            return;
        }
        for (sequence, event) in page {
            self.take(sequence, &event);
        }
    }

    /// One live append, or the end of the stream.
    async fn follow(&mut self) {
        match self.rx.recv().await {
            Ok(item) => {
                let (sequence, event) = &*item;
                if *sequence > self.next {
                    // Not seen in order (cannot happen while subscribed
                    // before the replay): read the log again from `next`.
                    self.live = false;
                    return;
                }
                self.take(*sequence, event);
            }
            Err(RecvError::Lagged(missed)) => {
                let reason = format!(
                    "fell behind: {missed} events over the stream buffer of {}; reconnect with Last-Event-ID to resume from the log",
                    self.api.cfg.api.stream_buffer_events
                );
                self.drop_with(reason);
            }
            Err(RecvError::Closed) => self.drop_with("the controller core stopped".into()),
        }
    }

    /// Queue `event` at `sequence` unless it was sent already or filtered.
    fn take(&mut self, sequence: u64, event: &Event) {
        if sequence < self.next {
            return;
        }
        self.next = sequence + 1;
        if let Some(filter) = &mut self.filter {
            if !filter.passes(event) {
                return;
            }
        }
        let dto = {
            let roster = self.api.core.roster();
            super::view::event_dto(&roster, sequence, event.clone())
        };
        let sse = Sse::default()
            .id(sequence.to_string())
            .event(words::event_kind(event))
            .json_data(&dto);
        match sse {
            Ok(sse) => self.pending.push_back(sse),
            Err(e) => self.drop_with(format!("encoding event {sequence}: {e}")),
        }
    }

    /// End the stream with a `dropped` event saying why and where.
    fn drop_with(&mut self, reason: String) {
        tracing::info!("event stream dropped: {reason}");
        let last = self.next.checked_sub(1);
        let body = serde_json::json!({ "reason": reason, "last_sequence": last });
        self.pending
            .push_back(Sse::default().event("dropped").data(body.to_string()));
        self.done = true;
    }
}
