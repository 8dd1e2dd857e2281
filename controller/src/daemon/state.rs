//! What every HTTP surface shares (`api`, `dashboard`, the event stream,
//! the verifier): the handlers' state [`Api`], who the operator is, and the
//! count of open event streams. It depends on no surface, and the
//! composition root ([`super::http`]) on all of them.

use super::bundles::BundleDir;
use super::config::ControllerConfig;
use super::core::CoreHandle;
use super::error::ApiError;
use axum::http::HeaderMap;
use ed25519_dalek::VerifyingKey;
use model::controller::{Actor, Input, OffLogAction, Role};
use model::Digest;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Shared state of every handler.
#[derive(Clone)]
pub struct Api {
    /// The configuration (node names).
    pub cfg: Arc<ControllerConfig>,
    /// The core.
    pub core: CoreHandle,
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
    /// SHA-256 of the operator token file: the first admin's credential,
    /// recorded when the log has no operator yet (issue #28 item 2).
    pub bootstrap_credential: Digest,
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

/// The bearer credential `headers` present (`Authorization: Bearer …`),
/// or the empty string.
fn bearer(headers: &HeaderMap) -> &str {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
}

/// SHA-256 of a presented credential: what the log records of it.
pub fn credential_digest(secret: &str) -> Digest {
    use sha2::Digest as _;
    Digest(sha2::Sha256::digest(secret.trim().as_bytes()).into())
}

/// The operator whose current, unrevoked credential `secret` is, as it
/// acts, and its role (issue #28 item 2): the API's bearer and the
/// console's login take the same credential. Looked up by the secret's
/// digest in the operators as of the last durable events, so a revoked
/// or rotated credential is refused from the event that revoked it on
/// (and the model checks again when the input is stepped).
pub fn operator_of(api: &Api, secret: &str) -> Option<(Actor, Role)> {
    if secret.trim().is_empty() {
        return None;
    }
    let credential = credential_digest(secret);
    let operators = api.core.operators();
    let (name, record) = operators.by_credential(&credential)?;
    let actor = Actor::Operator {
        name: name.to_string(),
        credential,
    };
    Some((actor, record.role))
}

/// The operator presenting the request's credential, else the 401.
pub fn operator(api: &Api, headers: &HeaderMap) -> Result<Actor, ApiError> {
    operator_of(api, bearer(headers))
        .map(|(actor, _)| actor)
        .ok_or(ApiError::Unauthorized)
}

/// The operator presenting the request's credential when its role allows
/// `action`, an action outside the log; else the 401, or the 403
/// naming the role it needs.
pub fn operator_for(
    api: &Api,
    headers: &HeaderMap,
    action: OffLogAction,
) -> Result<Actor, ApiError> {
    let Some((actor, has)) = operator_of(api, bearer(headers)) else {
        return Err(ApiError::Unauthorized);
    };
    let needs = model::controller::roles::off_log_role(action);
    match &actor {
        Actor::Operator { name, .. } if has < needs => Err(ApiError::Refused(
            model::controller::Refusal::RoleRequired {
                operator: name.clone(),
                needs,
                has,
            },
        )),
        _ => Ok(actor),
    }
}

/// `input` as `actor` makes it.
pub fn acting(actor: Actor, input: Input) -> Input {
    Input::Acting {
        actor,
        input: Box::new(input),
    }
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
