//! Fetching release chunks from plain-HTTP mirrors (issue #23 item 5).
//!
//! The controller names a node's mirrors with each grant
//! ([`protocol::frame::FrameBody::Mirrors`]). A chunk is asked of each
//! mirror in order (`GET BASE/chunks/<sha256>`), and finally of the
//! controller (the caller's fallback). A mirror is never trusted: its
//! answer is kept only when it is exactly the manifest's length and
//! hashes to the manifest's digest. Each way a mirror can fail is caught
//! per chunk within a named bound, and the chunk then comes from the next
//! source:
//!
//! - wrong bytes: the SHA-256 differs ([`MirrorError::WrongBytes`]);
//! - a truncated body: fewer bytes than the manifest says
//!   ([`MirrorError::Truncated`]);
//! - an endless or too long body: reading stops at the first byte past the
//!   manifest's chunk length ([`MirrorError::TooLong`]), so memory holds
//!   at most one chunk per fetch;
//! - a stalled connection: no progress (connection, headers or a body
//!   frame) for [`MIRROR_STALL_MS`] ([`MirrorError::Stalled`]), or the
//!   whole chunk not there after [`MIRROR_CHUNK_TIMEOUT_MS`]
//!   ([`MirrorError::TimedOut`], a trickle).
//!
//! A mirror that failed [`MIRROR_FAILURES_IN_A_ROW_MAX`] chunks in a row
//! is not asked again during this staging, so a dead or stalling mirror
//! costs a bounded time, not one stall per chunk.
//!
//! Every chunk's source is tallied ([`Tally`]); the agent reports the
//! tally to the controller ([`protocol::frame::FrameBody::FetchSources`]).
//! A mirror is named by its index and `host:port`, never by its URL (a
//! path or query can carry a secret).

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use protocol::frame::{SourceTally, MIRRORS_MAX, MIRROR_URL_BYTES_MAX};
use releases::{ChunkRef, PartialChunks};
use sha2::{Digest as _, Sha256};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// Longest a mirror may make no progress on one chunk (connecting,
/// answering, or between two body frames), in milliseconds.
pub const MIRROR_STALL_MS: u64 = 5_000;
/// Longest one chunk from one mirror may take in all, in milliseconds: a
/// 4 MiB chunk (`CHUNK_BYTES_MAX`) at 140 KiB/s still fits.
pub const MIRROR_CHUNK_TIMEOUT_MS: u64 = 30_000;
/// Chunks in a row a mirror may fail before it is skipped for the rest of
/// the staging.
pub const MIRROR_FAILURES_IN_A_ROW_MAX: u32 = 3;
/// How the controller is named in a tally.
pub const CONTROLLER_SOURCE: &str = "controller";

/// The time bounds of one chunk from one mirror.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// See [`MIRROR_STALL_MS`].
    pub stall: Duration,
    /// See [`MIRROR_CHUNK_TIMEOUT_MS`].
    pub chunk: Duration,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            stall: Duration::from_millis(MIRROR_STALL_MS),
            chunk: Duration::from_millis(MIRROR_CHUNK_TIMEOUT_MS),
        }
    }
}

/// Why one mirror did not give one chunk.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MirrorError {
    /// The request could not be made or the connection failed.
    #[error("request failed: {0}")]
    Request(String),
    /// The mirror answered something other than 200.
    #[error("answered HTTP {0}")]
    Status(u16),
    /// More bytes than the manifest's chunk length (or announced so).
    #[error("more than the {expected} bytes the manifest says")]
    TooLong {
        /// The manifest's chunk length.
        expected: u64,
    },
    /// The body ended (or was announced to end) short.
    #[error("{got} of the {expected} bytes the manifest says")]
    Truncated {
        /// Bytes received or announced.
        got: u64,
        /// The manifest's chunk length.
        expected: u64,
    },
    /// The bytes do not hash to the chunk's digest.
    #[error("bytes hash to {actual}, not the manifest's chunk")]
    WrongBytes {
        /// Hex SHA-256 of what came.
        actual: String,
    },
    /// No progress within the stall bound.
    #[error("no progress for {ms} ms")]
    Stalled {
        /// The bound.
        ms: u128,
    },
    /// The chunk was not whole within the chunk bound.
    #[error("not whole after {ms} ms")]
    TimedOut {
        /// The bound.
        ms: u128,
    },
}

/// One usable mirror of the node's list.
#[derive(Clone, Debug)]
pub struct Mirror {
    /// `BASE` without a trailing slash.
    base: String,
    /// `mirror[I] HOST[:PORT]`: what logs and tallies show.
    pub label: String,
}

impl Mirror {
    /// The mirror at position `index` of the list, or why its URL is
    /// unusable (the controller validated it; an agent checks again).
    pub fn parse(index: usize, url: &str) -> Result<Mirror, String> {
        if url.len() > MIRROR_URL_BYTES_MAX {
            return Err(format!("longer than {MIRROR_URL_BYTES_MAX} bytes"));
        }
        let uri: hyper::Uri = url.parse().map_err(|e| format!("not a URL: {e}"))?;
        let authority = uri.authority().ok_or("no host")?;
        if uri.scheme_str() != Some("http") || uri.query().is_some() {
            return Err("not http://HOST[:PORT][/PATH] without a query".into());
        }
        let host = match authority.port_u16() {
            Some(port) => format!("{}:{port}", authority.host()),
            None => authority.host().to_string(),
        };
        Ok(Mirror {
            base: url.trim_end_matches('/').to_string(),
            label: format!("mirror[{index}] {host}"),
        })
    }

    /// Where the chunk is on this mirror.
    fn chunk_uri(&self, chunk: &ChunkRef) -> Result<hyper::Uri, MirrorError> {
        format!("{}/chunks/{}", self.base, chunk.hex())
            .parse()
            .map_err(|e| MirrorError::Request(format!("bad chunk URL: {e}")))
    }
}

/// The HTTP client mirrors are asked with.
pub type MirrorClient = Client<HttpConnector, Empty<Bytes>>;

/// A client whose connections give up after the stall bound.
pub fn client(bounds: Bounds) -> MirrorClient {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(bounds.stall));
    Client::builder(TokioExecutor::new()).build(connector)
}

/// What a fetch hands its caller as the body arrives (the agent appends
/// it to the chunk's partial file, so a crash keeps it).
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// The mirror answered the whole chunk although only the bytes after
    /// a kept prefix were asked for (it ignores `Range`, as
    /// `python3 -m http.server` does): the kept bytes are dropped, the
    /// pieces that follow start the chunk.
    Restart,
    /// The next bytes of the chunk.
    Bytes(&'a [u8]),
}

/// Asks `mirror` for `chunk`: `Ok` only with exactly the manifest's bytes.
/// With a kept `prefix` (bytes of an attempt a crash cut short) only the
/// rest is asked for (`Range: bytes=N-`); a `206` answer continues the
/// prefix, a `200` replaces it ([`Piece::Restart`]); either way the whole
/// chunk is hashed, so a wrong prefix fails like wrong bytes. Each piece
/// of the body goes to `piece` as it arrives. At most `chunk.len` bytes
/// are held; reading stops at the first byte more.
pub async fn fetch_chunk(
    client: &MirrorClient,
    mirror: &Mirror,
    chunk: &ChunkRef,
    bounds: Bounds,
    mut prefix: Vec<u8>,
    mut piece: impl FnMut(Piece<'_>),
) -> Result<Vec<u8>, MirrorError> {
    let deadline = Instant::now() + bounds.chunk;
    let expected = u64::from(chunk.len);
    if prefix.len() as u64 >= expected {
        prefix.clear();
        piece(Piece::Restart);
    }
    let kept = prefix.len() as u64;
    let mut request = hyper::Request::get(mirror.chunk_uri(chunk)?);
    if kept > 0 {
        request = request.header(hyper::header::RANGE, format!("bytes={kept}-"));
    }
    let request = request
        .body(Empty::new())
        .map_err(|e| MirrorError::Request(e.to_string()))?;
    let response = step(client.request(request), bounds, deadline)
        .await?
        .map_err(|e| MirrorError::Request(e.to_string()))?;
    let mut bytes = match response.status() {
        hyper::StatusCode::PARTIAL_CONTENT if kept > 0 => prefix,
        hyper::StatusCode::OK => {
            if kept > 0 {
                piece(Piece::Restart);
            }
            Vec::new()
        }
        other => return Err(MirrorError::Status(other.as_u16())),
    };
    check_declared_length(&response, expected - bytes.len() as u64, expected)?;
    bytes.reserve_exact(chunk.len as usize - bytes.len());
    let mut body = response.into_body();
    while let Some(frame) = step(body.frame(), bounds, deadline).await? {
        // A body that breaks off (a reset, a close before the declared
        // length) is an answer cut short.
        let frame = frame.map_err(|_| MirrorError::Truncated {
            got: bytes.len() as u64,
            expected,
        })?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers carry no chunk bytes
        };
        if bytes.len() as u64 + data.len() as u64 > expected {
            return Err(MirrorError::TooLong { expected });
        }
        piece(Piece::Bytes(&data));
        bytes.extend_from_slice(&data);
    }
    if (bytes.len() as u64) < expected {
        return Err(MirrorError::Truncated {
            got: bytes.len() as u64,
            expected,
        });
    }
    let actual: [u8; 32] = Sha256::digest(&bytes).into();
    if actual != chunk.sha256 {
        return Err(MirrorError::WrongBytes {
            actual: hex::encode(actual),
        });
    }
    Ok(bytes)
}

/// A declared length tells early what the body would show at its end:
/// `want` more bytes make the chunk's `expected`.
fn check_declared_length<B>(
    response: &hyper::Response<B>,
    want: u64,
    expected: u64,
) -> Result<(), MirrorError> {
    let declared = response
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match declared {
        Some(got) if got > want => Err(MirrorError::TooLong { expected }),
        Some(got) if got < want => Err(MirrorError::Truncated {
            got: expected - want + got,
            expected,
        }),
        _ => Ok(()),
    }
}

/// Awaits one step of a fetch: at most the stall bound, and never past
/// the chunk's deadline.
async fn step<T>(
    future: impl std::future::Future<Output = T>,
    bounds: Bounds,
    deadline: Instant,
) -> Result<T, MirrorError> {
    let now = Instant::now();
    let left = deadline.saturating_duration_since(now);
    let (wait, error) = if left < bounds.stall {
        let ms = bounds.chunk.as_millis();
        (left, MirrorError::TimedOut { ms })
    } else {
        let ms = bounds.stall.as_millis();
        (bounds.stall, MirrorError::Stalled { ms })
    };
    tokio::time::timeout(wait, future).await.map_err(|_| error)
}

/// Keeps a mirror's pieces in the chunk's partial file, counting them.
struct Keep<'a> {
    partials: &'a PartialChunks,
    chunk: &'a ChunkRef,
    /// `None` once the file could not be opened or written: the fetch
    /// goes on, a later crash only costs a longer refetch.
    writer: Option<releases::partial::PartialWriter>,
    /// Bytes the mirror sent.
    sent: u64,
}

impl<'a> Keep<'a> {
    fn new(partials: &'a PartialChunks, chunk: &'a ChunkRef, kept: u64) -> Keep<'a> {
        Keep {
            partials,
            chunk,
            writer: Self::open(partials, chunk, kept),
            sent: 0,
        }
    }

    fn open(
        partials: &PartialChunks,
        chunk: &ChunkRef,
        kept: u64,
    ) -> Option<releases::partial::PartialWriter> {
        partials
            .writer(chunk, kept)
            .map_err(|e| tracing::warn!("not keeping partial bytes: {e}"))
            .ok()
    }

    fn take(&mut self, piece: Piece<'_>) {
        match piece {
            Piece::Restart => self.writer = Self::open(self.partials, self.chunk, 0),
            Piece::Bytes(bytes) => {
                self.sent += bytes.len() as u64;
                if let Some(Err(e)) = self.writer.as_mut().map(|w| w.append(bytes)) {
                    tracing::warn!("not keeping more partial bytes: {e}");
                    self.writer = None;
                }
            }
        }
    }
}

/// Per source: served chunks and bytes, failures, failures in a row.
#[derive(Debug)]
struct Source {
    tally: SourceTally,
    failures_in_a_row: u32,
}

/// The node's mirrors for one staging, and where each chunk came from.
#[derive(Debug)]
pub struct Mirrors {
    client: MirrorClient,
    bounds: Bounds,
    mirrors: Vec<Mirror>,
    /// One per mirror, in list order, then the controller.
    sources: Mutex<Vec<Source>>,
}

impl Mirrors {
    /// The usable mirrors of `urls` (at most [`MIRRORS_MAX`]; an unusable
    /// URL is logged and left out, keeping the others' indexes).
    pub fn new(urls: &[String], bounds: Bounds) -> Mirrors {
        let mirrors: Vec<Mirror> = urls
            .iter()
            .take(MIRRORS_MAX)
            .enumerate()
            .filter_map(|(i, url)| match Mirror::parse(i, url) {
                Ok(m) => Some(m),
                Err(why) => {
                    tracing::warn!("mirror[{i}] left out: {why}");
                    None
                }
            })
            .collect();
        let labels = mirrors.iter().map(|m| m.label.clone());
        let sources = labels
            .chain([CONTROLLER_SOURCE.to_string()])
            .map(|source| Source {
                tally: SourceTally {
                    source,
                    chunks: 0,
                    bytes: 0,
                    failures: 0,
                },
                failures_in_a_row: 0,
            })
            .collect();
        Mirrors {
            client: client(bounds),
            bounds,
            mirrors,
            sources: Mutex::new(sources),
        }
    }

    /// `chunk` from the first mirror that gives exactly its bytes, each
    /// failure logged and tallied; `None` when none did (the caller asks
    /// the controller and calls [`Mirrors::served_by_controller`]). The
    /// first mirror is asked only for what follows `prefix` (bytes kept
    /// by an attempt a crash cut short); the body is appended to the
    /// chunk's partial file in `partials` as it arrives. A failed attempt
    /// forgets the partial bytes (`prefix` is emptied): the next source
    /// is asked for the whole chunk. Tallies count the bytes each source
    /// sent.
    pub async fn fetch(
        &self,
        chunk: &ChunkRef,
        prefix: &mut Vec<u8>,
        partials: &PartialChunks,
    ) -> Option<Vec<u8>> {
        for (i, mirror) in self.mirrors.iter().enumerate() {
            if self.skipped(i) {
                continue;
            }
            let kept = prefix.len() as u64;
            let mut keep = Keep::new(partials, chunk, kept);
            let fetched = fetch_chunk(
                &self.client,
                mirror,
                chunk,
                self.bounds,
                prefix.clone(),
                |p| keep.take(p),
            )
            .await;
            match fetched {
                Ok(bytes) => {
                    self.record(i, Some(keep.sent));
                    return Some(bytes);
                }
                Err(e) => {
                    tracing::warn!(
                        "chunk {} from {}: {e}; trying the next source",
                        chunk.hex(),
                        mirror.label
                    );
                    self.record(i, None);
                    partials.remove(chunk);
                    prefix.clear();
                }
            }
        }
        None
    }

    /// Tallies a chunk of `len` bytes the controller served.
    pub fn served_by_controller(&self, len: u64) {
        self.record(self.mirrors.len(), Some(len));
    }

    /// The tally so far: mirrors in list order, the controller last;
    /// sources that did nothing are left out.
    pub fn tally(&self) -> Vec<SourceTally> {
        self.lock()
            .iter()
            .map(|s| s.tally.clone())
            .filter(|t| t.chunks > 0 || t.failures > 0)
            .collect()
    }

    fn skipped(&self, i: usize) -> bool {
        self.lock()
            .get(i)
            .is_some_and(|s| s.failures_in_a_row >= MIRROR_FAILURES_IN_A_ROW_MAX)
    }

    /// Tallies source `i`: `Some(len)` served a chunk, `None` failed one.
    fn record(&self, i: usize, served: Option<u64>) {
        let mut sources = self.lock();
        let Some(source) = sources.get_mut(i) else {
            return;
        };
        match served {
            Some(len) => {
                source.tally.chunks += 1;
                source.tally.bytes += len;
                source.failures_in_a_row = 0;
            }
            None => {
                source.tally.failures += 1;
                source.failures_in_a_row += 1;
                if source.failures_in_a_row == MIRROR_FAILURES_IN_A_ROW_MAX {
                    tracing::warn!(
                        "{} failed {MIRROR_FAILURES_IN_A_ROW_MAX} chunks in a row: not asked again for this release",
                        source.tally.source
                    );
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Source>> {
        // A poisoned lock only means a fetch task panicked mid-update of a
        // counter: the tally is still meaningful.
        self.sources.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests;
