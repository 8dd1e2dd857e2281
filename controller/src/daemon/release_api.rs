//! The API's tree-release upload (issue #23 item 2): chunks are asked for
//! (`HEAD`) and sent (`PUT`, streamed, verified as the bytes land) one by
//! one, so an interrupted upload resumes with what is missing; the signed
//! manifest is posted last and accepted only when every chunk is held.

use super::error::{ApiError, Path};
use super::release_gc;
use super::release_store::{parse_chunk_name, AcceptError};
use super::state::{operator_for, Api};
use super::view::{self, ChunkReply, ErrorBody, ReleaseDto, ReleaseList, RemoveReply, UploadReply};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::StreamExt;
use model::controller::OffLogAction;
use releases::limits::{CHUNK_BYTES_MAX, MANIFEST_BYTES_MAX};
use releases::ReleaseError;
use std::io::{self, Read};
use tokio::sync::mpsc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Body frames in flight between the network and the disk writer: what a
/// chunk upload holds in memory is this many frames, not the chunk.
const FRAMES_IN_FLIGHT: usize = 4;

/// The tree-release routes.
pub fn routes() -> OpenApiRouter<Api> {
    OpenApiRouter::new()
        .routes(routes!(has_chunk, put_chunk))
        .routes(routes!(list_releases, post_release))
        .routes(routes!(remove_release))
}

/// `HEAD /api/chunks/{sha256}`: whether the chunk is held.
#[utoipa::path(head, path = "/api/chunks/{sha256}", tag = "reads",
    params(("sha256" = String, Path, description = "the chunk's SHA-256, 64 lowercase hex digits", pattern = "^[0-9a-f]{64}$")),
    responses(
        (status = 200, description = "held (verified when it landed)"),
        (status = 400, description = "not a chunk name"),
        (status = 404, description = "not held: PUT it"),
    ))]
async fn has_chunk(State(api): State<Api>, Path(name): Path<String>) -> Response {
    match parse_chunk_name(&name) {
        Err(why) => ApiError::BadRequest(why).into_response(),
        Ok(digest) if api.releases.chunks.has(&digest) => StatusCode::OK.into_response(),
        Ok(_) => StatusCode::NOT_FOUND.into_response(),
    }
}

/// `PUT /api/chunks/{sha256}`: store one chunk, streamed.
#[utoipa::path(put, path = "/api/chunks/{sha256}", tag = "writes", security(("bearer" = [])),
    params(("sha256" = String, Path, description = "the chunk's SHA-256, 64 lowercase hex digits", pattern = "^[0-9a-f]{64}$")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "the chunk's bytes, at most 4 MiB"),
    responses(
        (status = 200, description = "held: stored now (fsynced) or already", body = ChunkReply),
        (status = 400, description = "the bytes do not hash to the name; nothing stored", body = ErrorBody),
        (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing stored", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing stored", body = ErrorBody),
        (status = 413, description = "over the chunk size limit; nothing stored", body = ErrorBody),
    ))]
async fn put_chunk(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Body,
) -> Response {
    if let Err(rejection) = operator_for(&api, &headers, OffLogAction::UploadRelease) {
        return rejection.into_response();
    }
    let digest = match parse_chunk_name(&name) {
        Ok(d) => d,
        Err(why) => return ApiError::BadRequest(why).into_response(),
    };
    if declared_length(&headers).is_some_and(|n| n > u64::from(CHUNK_BYTES_MAX)) {
        return too_large().into_response();
    }
    let (tx, rx) = mpsc::channel(FRAMES_IN_FLIGHT);
    let releases = api.releases.clone();
    let writer = tokio::task::spawn_blocking(move || {
        releases.chunks.put(
            &digest,
            FrameReader {
                rx,
                frame: Bytes::new(),
            },
        )
    });
    let mut frames = body.into_data_stream();
    let mut stopped_early = false;
    while let Some(frame) = frames.next().await {
        let frame = frame.map_err(|e| io::Error::other(e.to_string()));
        // The writer stopped (done, over the limit, failed): its answer says why.
        if tx.send(frame).await.is_err() {
            stopped_early = true;
            break;
        }
    }
    drop(tx);
    let drained = !stopped_early || drain(&mut frames).await;
    let mut response = match writer.await {
        Ok(Ok(bytes)) => Json(ChunkReply {
            sha256: name,
            bytes,
        })
        .into_response(),
        Ok(Err(e)) => chunk_error(e).into_response(),
        Err(e) => ApiError::Internal(format!("storing the chunk: {e}")).into_response(),
    };
    if !drained {
        response.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    response
}

/// Reads and drops what is left of a request body the writer stopped
/// reading (a chunk already held is not read again), at most
/// [`CHUNK_BYTES_MAX`] bytes: answering with the body unread makes the
/// server close the connection after the answer, and a client that had
/// pooled it fails its next request on it ("connection closed before the
/// message completed"; seen as a flaky `POST /api/releases` after
/// re-uploaded chunks). False when more was left: the answer then says
/// `Connection: close`.
async fn drain<S>(frames: &mut S) -> bool
where
    S: futures_util::Stream<Item = Result<Bytes, axum::Error>> + Unpin,
{
    let mut left = u64::from(CHUNK_BYTES_MAX);
    while let Some(frame) = frames.next().await {
        let Ok(frame) = frame else {
            return false;
        };
        match left.checked_sub(frame.len() as u64) {
            Some(rest) => left = rest,
            None => return false,
        }
    }
    true
}

/// `POST /api/releases`: accept a signed format-2 manifest.
#[utoipa::path(post, path = "/api/releases", tag = "writes", security(("bearer" = [])),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "the signed manifest `fleetweft bundle sign --dir` wrote (OUT/manifest)"),
    responses(
        (status = 200, description = "accepted and stored (fsynced): its digest is what `POST /api/rollouts` names", body = UploadReply),
        (status = 400, description = "the signature, format or limits refused it", body = ErrorBody),
        (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing stored", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing stored", body = ErrorBody),
        (status = 409, description = "chunks it names are not held, counted and named: upload them and post again", body = ErrorBody),
        (status = 413, description = "over the manifest size limit", body = ErrorBody),
    ))]
async fn post_release(State(api): State<Api>, headers: HeaderMap, body: Body) -> Response {
    if let Err(rejection) = operator_for(&api, &headers, OffLogAction::UploadRelease) {
        return rejection.into_response();
    }
    let Ok(bytes) = axum::body::to_bytes(body, MANIFEST_BYTES_MAX).await else {
        let why = format!("a release manifest is at most {MANIFEST_BYTES_MAX} bytes");
        return ApiError::TooLarge(why).into_response();
    };
    let releases = api.releases.clone();
    let key = api.key.clone();
    // A removal's sweep must see this manifest before it judges a chunk.
    let _gate = api.release_gate.read().await;
    let accepted = tokio::task::spawn_blocking(move || releases.accept(&key, &bytes)).await;
    let release = match accepted {
        Ok(Ok(release)) => release,
        Ok(Err(e @ AcceptError::Refused(_))) => {
            return ApiError::BadRequest(e.to_string()).into_response()
        }
        Ok(Err(e @ AcceptError::Missing { .. })) => {
            return ApiError::Conflict(e.to_string()).into_response()
        }
        Ok(Err(e)) => return ApiError::Internal(e.to_string()).into_response(),
        Err(e) => return ApiError::Internal(format!("accepting: {e}")).into_response(),
    };
    Json(UploadReply {
        digest: release.digest.to_hex(),
        name: release.manifest.name,
        version: release.manifest.version,
    })
    .into_response()
}

/// `GET /api/releases`: every stored release and what names it.
#[utoipa::path(get, path = "/api/releases", tag = "reads",
    responses(
        (status = 200, description = "the stored releases, format-1 bundles first, and the chunk store's totals", body = ReleaseList),
        (status = 500, description = "the stores could not be read", body = ErrorBody),
        (status = 503, description = "the controller core stopped", body = ErrorBody),
    ))]
async fn list_releases(State(api): State<Api>) -> Response {
    let Some(snap) = api.core.snapshot().await else {
        return ApiError::Unavailable.into_response();
    };
    let (bundles, releases, key) = (api.bundles.clone(), api.releases.clone(), api.key.clone());
    let listed = tokio::task::spawn_blocking(move || {
        let stored = release_gc::list(&bundles, &releases, &key)?;
        let chunks = releases.chunks.entries().map_err(io::Error::other)?;
        io::Result::Ok((stored, chunks))
    })
    .await;
    let (stored, chunks) = match listed {
        Ok(Ok(listed)) => listed,
        Ok(Err(e)) => return ApiError::Internal(format!("listing releases: {e}")).into_response(),
        Err(e) => return ApiError::Internal(format!("listing releases: {e}")).into_response(),
    };
    let roster = &snap.state.roster;
    let mut uses: std::collections::BTreeMap<String, _> = snap
        .state
        .release_uses()
        .into_iter()
        .map(|(digest, uses)| (digest.to_hex(), uses))
        .collect();
    let releases = stored
        .into_iter()
        .map(|s| {
            let in_use = uses
                .remove(&s.digest)
                .map(|u| view::releases::release_use(roster, &u));
            ReleaseDto { in_use, ..s }
        })
        .collect();
    Json(ReleaseList {
        releases,
        chunks: chunks.len() as u64,
        chunk_bytes: chunks.iter().map(|c| c.bytes).sum(),
    })
    .into_response()
}

/// `DELETE /api/releases/{digest}`: remove a release nothing names.
#[utoipa::path(delete, path = "/api/releases/{digest}", tag = "writes", security(("bearer" = [])),
    params(("digest" = String, Path, description = "the release digest, 64 lowercase hex digits", pattern = "^[0-9a-f]{64}$")),
    responses(
        (status = 200, description = "removed (the signed file unlinked and its directory fsynced, then its chunks no other release names)", body = RemoveReply),
        (status = 400, description = "not a release digest", body = ErrorBody),
        (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing removed", body = ErrorBody),
        (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing removed", body = ErrorBody),
        (status = 404, description = "no such release stored", body = ErrorBody),
        (status = 409, description = "a rollout, a node or an op still names it: the message says which; nothing removed", body = ErrorBody),
        (status = 503, description = "the controller core stopped", body = ErrorBody),
    ))]
async fn remove_release(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    if let Err(rejection) = operator_for(&api, &headers, OffLogAction::DeleteRelease) {
        return rejection.into_response();
    }
    let digest = match parse_chunk_name(&name) {
        Ok(d) => model::Digest(d),
        Err(why) => {
            return ApiError::BadRequest(why.replace("`sha256`", "`digest`")).into_response()
        }
    };
    // No rollout starts and no manifest is accepted until this is done.
    let _gate = api.release_gate.write().await;
    let Some(snap) = api.core.snapshot().await else {
        return ApiError::Unavailable.into_response();
    };
    if let Some(uses) = snap.state.release_use(digest) {
        let words = view::releases::release_use(&snap.state.roster, &uses).text;
        let why = format!("release {name} is in use, nothing removed: {words}");
        return ApiError::Conflict(why).into_response();
    }
    let (bundles, releases, key) = (api.bundles.clone(), api.releases.clone(), api.key.clone());
    let now = std::time::SystemTime::now();
    let removed = tokio::task::spawn_blocking(move || {
        release_gc::remove(&bundles, &releases, &key, digest, now)
    })
    .await;
    match removed {
        Ok(Ok(Some(r))) => {
            tracing::info!(
                "removed release {name}: {} chunk(s), {} orphan(s)",
                r.chunks_removed,
                r.orphans_removed
            );
            Json(RemoveReply {
                release: r.release,
                chunks_removed: r.chunks_removed,
                chunk_bytes_freed: r.chunk_bytes_freed,
                orphans_removed: r.orphans_removed,
                orphan_bytes_freed: r.orphan_bytes_freed,
                sweep_problem: r.sweep_problem,
            })
            .into_response()
        }
        Ok(Ok(None)) => ApiError::NotFound(format!("no release {name} is stored")).into_response(),
        Ok(Err(e)) => ApiError::Internal(format!("removing release {name}: {e}")).into_response(),
        Err(e) => ApiError::Internal(format!("removing release {name}: {e}")).into_response(),
    }
}

/// The `Content-Length` the client declared, if any.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

fn too_large() -> ApiError {
    ApiError::TooLarge(format!(
        "a chunk is at most {CHUNK_BYTES_MAX} bytes; nothing stored"
    ))
}

/// The answer for a chunk the store refused.
fn chunk_error(e: ReleaseError) -> ApiError {
    match e {
        ReleaseError::ChunkMismatch { .. } => ApiError::BadRequest(format!("{e}; nothing stored")),
        ReleaseError::OverLimit { .. } => too_large(),
        other => ApiError::Internal(format!("storing the chunk: {other}")),
    }
}

/// A blocking reader over the body frames the handler forwards, so the
/// chunk store hashes and writes them as they arrive.
struct FrameReader {
    rx: mpsc::Receiver<io::Result<Bytes>>,
    frame: Bytes,
}

impl Read for FrameReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.frame.is_empty() {
            match self.rx.blocking_recv() {
                None => return Ok(0),
                Some(frame) => self.frame = frame?,
            }
        }
        let n = buf.len().min(self.frame.len());
        buf[..n].copy_from_slice(&self.frame.split_to(n));
        Ok(n)
    }
}
