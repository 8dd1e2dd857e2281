//! What every HTTP surface shares (`api`, `dashboard`, the event stream,
//! the verifier): the handlers' state [`Api`], the operator check, and the
//! count of open event streams. It depends on no surface, and the
//! composition root ([`super::http`]) on all of them.

use super::bundles::BundleDir;
use super::config::ControllerConfig;
use super::core::CoreHandle;
use super::error::ApiError;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use ed25519_dalek::VerifyingKey;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Shared state of every handler.
#[derive(Clone)]
pub struct Api {
    /// The configuration (node names).
    pub cfg: Arc<ControllerConfig>,
    /// The core.
    pub core: CoreHandle,
    /// The operator token.
    pub token: Arc<String>,
    /// Accepted bundles.
    pub bundles: Arc<BundleDir>,
    /// Accepted tree releases and their chunks.
    pub releases: Arc<super::release_store::ReleaseStore>,
    /// The bundle signing key.
    pub key: Arc<VerifyingKey>,
    /// The event streams open now (`GET /api/events/stream`).
    pub streams: StreamSlots,
    /// The console's change streams open now (`GET /live`).
    pub live_streams: StreamSlots,
    /// Node mirrors and where agents' chunks came from (`[artifacts]`).
    pub mirrors: Arc<super::mirrors::Mirrors>,
    /// Held for reading by what makes a stored release needed (starting a
    /// rollout on it, accepting a manifest whose chunks are held) and for
    /// writing by removing one (`DELETE /api/releases/{digest}`), so a
    /// removal never races a rollout that names the release or a manifest
    /// that names a chunk the sweep is about to drop.
    pub release_gate: Arc<tokio::sync::RwLock<()>>,
    /// The fleet's configuration key, when it has one (issue #24 item 1).
    pub config_key: Option<Arc<super::configuration::ConfigKey>>,
    /// Deployment documents, and each one's code (issue #24 item 1).
    pub deployments: Arc<super::configuration::Deployments>,
    /// The console's logged-in sessions (issue #28 item 3).
    pub sessions: super::sessions::Sessions,
}

/// Most event streams open at once; one more is refused with 503.
pub const STREAMS_MAX: usize = 32;

/// Most console change streams (`GET /live`) open at once. A pool of
/// their own: `/live` is read without a token, so anonymous readers
/// filling it stop only the console's live updates, never an operator's
/// event stream ([`STREAMS_MAX`]).
pub const LIVE_STREAMS_MAX: usize = 64;

/// The open streams of one pool, counted against its bound.
#[derive(Clone)]
pub struct StreamSlots {
    open: Arc<AtomicUsize>,
    max: usize,
}

/// The API's event streams: [`STREAMS_MAX`].
impl Default for StreamSlots {
    fn default() -> Self {
        StreamSlots::new(STREAMS_MAX)
    }
}

/// One open stream's slot, given back when the stream ends.
pub struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl StreamSlots {
    /// A pool of at most `max` open streams.
    pub fn new(max: usize) -> StreamSlots {
        StreamSlots {
            open: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// A slot for one more stream, if fewer than the pool's bound are open.
    pub fn take(&self) -> Option<Slot> {
        let max = self.max;
        let taken = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok();
        taken.then(|| Slot(self.open.clone()))
    }
}

/// `None` when the request carries the operator token, else the 401 answer.
pub fn unauthorized(api: &Api, headers: &HeaderMap) -> Option<Response> {
    let presented = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    (!token_matches(api, presented)).then(|| ApiError::Unauthorized.into_response())
}

/// Whether `presented` is the operator token: the API's bearer and the
/// console's login take the same credential.
pub fn token_matches(api: &Api, presented: &str) -> bool {
    super::sessions::same_secret(presented, &api.token)
}

#[cfg(test)]
mod slot_tests {
    use super::*;

    /// A pool gives out at most its bound, takes a slot back when it is
    /// dropped, and filling one pool (the console's, anonymous) leaves
    /// another (the API's event streams) untouched.
    #[test]
    fn a_full_pool_refuses_and_leaves_the_other_pool_alone() {
        let api = StreamSlots::default();
        let live = StreamSlots::new(LIVE_STREAMS_MAX);
        let held: Vec<Slot> = (0..LIVE_STREAMS_MAX).map_while(|_| live.take()).collect();
        assert_eq!(held.len(), LIVE_STREAMS_MAX);
        assert!(live.take().is_none(), "over the bound");
        let streams: Vec<Slot> = (0..STREAMS_MAX).map_while(|_| api.take()).collect();
        assert_eq!(streams.len(), STREAMS_MAX, "the other pool is whole");
        drop(held);
        assert!(live.take().is_some(), "a dropped slot is given back");
    }
}
