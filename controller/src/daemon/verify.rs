//! Proof as readback (SPEC §10): gather fresh evidence of a node when a
//! proof is asked for — the controller's own probe of the public route and
//! the agent's readback over its control connection — and, on an
//! authenticated request or the periodic verifier, record it
//! (`Input::Observe` → `NodeObserved`). A `GET` proof records nothing.

use super::core::InputError;
use super::probe::{controller_observation, probe_route, release_facts, Probed};
use super::state::Api;
use model::controller::{Event, Input, Refusal};
use model::NodeId;
use std::time::{Duration, SystemTime};

/// Upper bound on live proofs gathered at once by one rollout proof (each
/// is a route probe and a readback; the agents bound their own rate).
pub const LIVE_PROOFS_CONCURRENT_MAX: usize = 16;

/// Upper bound on readbacks the periodic verifier runs at once.
pub const VERIFY_CONCURRENT_MAX: usize = 8;

/// Milliseconds since the Unix epoch: the report's, where the CLI reads it.
pub use api::report::epoch_ms;

/// What one readback of a node gathered, with the controller probe it was
/// judged by.
pub struct Gathered {
    /// The evidence, for `proof::live_node_proof`.
    pub fresh: proof::Fresh,
    /// The controller's probe (release judged as, spec, raw answer).
    pub probed: Probed,
}

/// Probe `node`'s public route and ask its agent for a readback, both now.
/// The error is the HTTP answer to give (no release intended, bundle
/// unavailable). An agent that does not answer is evidence too: it is
/// recorded in `Fresh::agent` as why, never replaced by an older value.
pub async fn gather(api: &Api, node: NodeId) -> Result<Gathered, axum::response::Response> {
    // Both at once: the route probe and the readback are independent.
    let (probed, agent) = tokio::join!(probe_route(api, node), read_back(api, node));
    let probed = probed?;
    let route_at_ms = epoch_ms(SystemTime::now());
    let isolation = agent.as_ref().ok().and_then(|r| r.isolation.clone());
    let configuration = agent.as_ref().ok().and_then(|r| r.configuration);
    let older = match &agent {
        Ok(r) => known_release(api, &probed, &r.observation).await,
        Err(_) => None,
    };
    let agent = agent
        .map(|r| (r.observation, epoch_ms(r.observed_at)))
        .map_err(|e| e.to_string());
    Ok(Gathered {
        fresh: proof::Fresh {
            route: probed.observation,
            route_at_ms,
            agent,
            isolation,
            older,
            configuration,
        },
        probed,
    })
}

/// What the controller knows of the release the agent's readback found
/// behind the route instead of the one the route was judged as (issue #24
/// item 1): its version, and the route's answer judged by that release's
/// own probe spec (the answer already got, or the route asked again when
/// that spec probes another path). `None` when the readback names no other
/// release, or one the controller does not hold: an unknown digest stays
/// unknown. Whether the node had it before is the proof's to judge.
async fn known_release(
    api: &Api,
    probed: &Probed,
    readback: &model::RouteObservation,
) -> Option<proof::KnownRelease> {
    let release = readback.artifact?.other_release(probed.release)?;
    let (version, spec) = match release_facts(api, release) {
        Ok(facts) => facts,
        Err(why) => {
            tracing::info!(
                "the readback names {release}, which the controller cannot judge: {why}"
            );
            return None;
        }
    };
    let asked_again;
    let answer = if spec.path == probed.spec.path {
        probed.answer.as_ref()
    } else {
        asked_again = api::client::get_route(probed.public, &spec.path).await;
        asked_again.as_ref()
    };
    Some(proof::KnownRelease {
        release,
        version,
        answer: controller_observation(&spec, answer).verdict,
    })
}

/// Ask `node`'s agent for a readback. An agent that answered one less
/// than `READBACK_INTERVAL_MIN_MS` ago (a rollout proof, then a node
/// proof) is asked again once that interval has passed, instead of
/// reporting "could not read" for a node that would answer: the answer is
/// still read back after the question.
async fn read_back(
    api: &Api,
    node: NodeId,
) -> Result<super::readback::ReadBack, super::readback::ReadBackError> {
    match api.core.read_back(node).await {
        Err(super::readback::ReadBackError::TooSoon) => {
            tokio::time::sleep(Duration::from_millis(
                super::readback::READBACK_INTERVAL_MIN_MS,
            ))
            .await;
            api.core.read_back(node).await
        }
        other => other,
    }
}

/// Record what `fresh` saw of `node` (`Input::Observe`): on a node with a
/// live op it is that op's evidence, otherwise the node's latest
/// observation, as `actor`'s when an operator asked. Returns the durable
/// events.
pub async fn record(
    api: &Api,
    node: NodeId,
    fresh: &proof::Fresh,
    actor: Option<model::controller::Actor>,
) -> Result<Vec<(u64, Event)>, InputError> {
    let (observation, source) = proof::merge_readback(fresh);
    let observe = Input::Observe {
        node,
        observation,
        source,
        now_ms: epoch_ms(SystemTime::now()),
    };
    // An operator's probe is recorded as theirs (and needs a deployer);
    // the periodic verifier's is the controller's own.
    let input = match actor {
        Some(actor) => super::state::acting(actor, observe),
        None => observe,
    };
    api.core.submit(input).await
}

/// The periodic verifier (`[verify] every_s`): every connected node is read
/// back and observed once per interval, the readbacks spread evenly over it
/// and at most [`VERIFY_CONCURRENT_MAX`] at a time. Time enters the model
/// as `Input::Observe`'s `now_ms`; nothing here decides what a reading
/// means.
pub async fn verify_forever(api: Api, every_s: u64) {
    let every = Duration::from_secs(every_s);
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(VERIFY_CONCURRENT_MAX));
    loop {
        let round = tokio::time::Instant::now();
        let connected = match api.core.snapshot().await {
            Some(snap) => snap.connected.clone(),
            None => return,
        };
        let gap = every / u32::try_from(connected.len().max(1)).unwrap_or(u32::MAX);
        for (i, node) in connected.into_iter().enumerate() {
            tokio::time::sleep_until(round + gap * i as u32).await;
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let api = api.clone();
            tokio::spawn(async move {
                verify_one(&api, node).await;
                drop(permit);
            });
        }
        tokio::time::sleep_until(round + every).await;
    }
}

async fn verify_one(api: &Api, node: NodeId) {
    let name = api.core.roster().display_name(node);
    let gathered = match gather(api, node).await {
        Ok(g) => g,
        Err(_) => return, // nothing intended for the node yet
    };
    match record(api, node, &gathered.fresh, None).await {
        Ok(events) => {
            for (_, event) in &events {
                if let Event::NodeObserved { .. } = event {
                    let drifted = api
                        .core
                        .snapshot()
                        .await
                        .and_then(|s| s.state.nodes.get(&node).map(|n| n.drift().is_some()))
                        .unwrap_or(false);
                    if drifted {
                        tracing::warn!("periodic verification: {name} has DRIFTED from its confirmed release: {}", proof::observation_str(&gathered.fresh.route));
                    }
                }
            }
        }
        Err(InputError::Refused(Refusal::ObservedTooSoon { .. })) => {}
        Err(e) => tracing::warn!("periodic verification of {name}: {e}"),
    }
}
