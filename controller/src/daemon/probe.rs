//! The controller's own probe of a node's public route, judged by the
//! probe spec of the release it should be judged as: what a proof's
//! fresh evidence ([`super::verify`]) and `POST /api/nodes/{name}/probe`
//! ([`super::api`]) both start from.

use super::error::ApiError;
use super::state::Api;
use axum::response::{IntoResponse, Response};
use model::{Digest, NodeId};

/// What one probe of a node's public route by the controller saw.
pub struct Probed {
    /// The release judged against.
    pub release: Digest,
    /// Its probe spec.
    pub spec: protocol::bundle::ProbeSpec,
    /// What answered, if anything.
    pub answer: Option<api::client::RouteAnswer>,
    /// The judged observation.
    pub observation: model::RouteObservation,
    /// The node's public route, where it was probed.
    pub public: std::net::SocketAddr,
}

/// Probe `node`'s public route now and judge the answer by the probe spec of
/// the release it should be judged as. Records nothing; the error is the
/// HTTP answer to give.
///
/// Which release: while the node has a live op, either of the op's two
/// releases can legitimately be serving (the new one once switched, the
/// baseline before the switch, after an abort and after a restore), so the
/// answer is judged by the spec of whichever of the two the route
/// identifies as; an answer identifying as neither (or not at all) is
/// judged by the one the op's phase expects (the baseline while granted,
/// aborted or restoring; the new release otherwise). Without a live op:
/// what was last proven there, else the latest rollout that includes the
/// node. Judging a restored baseline by the new release's spec would make
/// a rollback impossible to prove from the controller.
///
/// The controller sees only the public route, never the process behind it:
/// the observation's `process_healthy` says only whether the app answered
/// (the proxy's 502 for an app that did not answer is no answer of it),
/// and its process uptime and restart count are `None` ("not observed").
/// The controller does not copy the agent's last reported numbers into its
/// own observation: they would be stale and the log would claim the
/// controller saw them. Proofs show the agent's latest reported numbers
/// alongside (see `crate::proof`).
pub async fn probe_route(api: &Api, node: NodeId) -> Result<Probed, Response> {
    let Some(snap) = api.core.snapshot().await else {
        return Err(ApiError::Unavailable.into_response());
    };
    let name = snap.state.roster.display_name(node);
    let Some(entry) = snap.state.roster.get(node) else {
        return Err(ApiError::NotFound(format!("no node {name} is enrolled")).into_response());
    };
    // The roster keeps the route as text; enrollment checked it parses.
    let public: std::net::SocketAddr = entry.public.parse().map_err(|e| {
        ApiError::Conflict(format!(
            "{name}'s public route {:?} is not an address: {e}",
            entry.public
        ))
        .into_response()
    })?;
    let (expected, other) = snap.state.releases_to_judge(node);
    let Some(release) = expected else {
        return Err(
            ApiError::Conflict(format!("no release is intended for {name} yet")).into_response(),
        );
    };
    let spec = probe_spec(api, release).map_err(|e| ApiError::Conflict(e).into_response())?;
    let mut answer = api::client::get_route(public, &spec.path).await;
    let mut judged = (release, spec);
    // The route says it serves the op's other release: judge it by that
    // release's own spec (asking again if that spec probes another path).
    let identity = answer
        .as_ref()
        .and_then(|a| a.identity.as_deref())
        .and_then(agentless_digest);
    if let Some(alt) = other.filter(|alt| identity == Some(*alt)) {
        let alt_spec = probe_spec(api, alt).map_err(|e| ApiError::Conflict(e).into_response())?;
        if alt_spec.path != judged.1.path {
            answer = api::client::get_route(public, &alt_spec.path).await;
        }
        judged = (alt, alt_spec);
    }
    let (release, spec) = judged;
    let observation = controller_observation(&spec, answer.as_ref());
    Ok(Probed {
        release,
        spec,
        answer,
        observation,
        public,
    })
}

/// The controller's judgement of what its own probe of a public route got.
/// It cannot see the process: `process_healthy` says only whether the app
/// answered. A 5xx without a release identity is the agent's proxy (or a
/// gateway) saying the app did not answer (the proxy's 502 when the app is
/// down): no sign of a running process, so it reads as down, as the agent
/// sees it, not "running". Uptime and restarts stay unobserved (`judge`
/// leaves them `None`).
pub fn controller_observation(
    spec: &protocol::bundle::ProbeSpec,
    answer: Option<&api::client::RouteAnswer>,
) -> model::RouteObservation {
    match answer {
        None => spec.judge(None, "", None, false),
        Some(a) => {
            let identity = a.identity.as_deref().and_then(agentless_digest);
            let mut observation = spec.judge(Some(a.status), &a.body, identity, true);
            observation.process_healthy = observation.verdict != model::ProbeVerdict::Unreachable;
            observation
        }
    }
}

/// The probe spec of `release`, read from its stored, verified bundle; the
/// error says why it cannot be had (an HTTP 409 for the caller).
fn probe_spec(api: &Api, release: Digest) -> Result<protocol::bundle::ProbeSpec, String> {
    release_facts(api, release).map(|(_, spec)| spec)
}

/// The version and the probe spec of `release`, from its stored, verified
/// bundle or release manifest; the error says why they cannot be had.
pub fn release_facts(
    api: &Api,
    release: Digest,
) -> Result<(String, protocol::bundle::ProbeSpec), String> {
    // A deployment is judged by its code's version and probe spec.
    let release = api.deployments.code_of(release).unwrap_or(release);
    if api.releases.knows(release) {
        return api
            .releases
            .read(&api.key, release)
            .and_then(|r| {
                let spec = r.manifest.probe.to_spec().map_err(|e| e.to_string())?;
                Ok((r.manifest.version, spec))
            })
            .map_err(|e| {
                format!(
                    "release {} unavailable to judge the probe: {e}",
                    release.to_hex()
                )
            });
    }
    std::fs::read(api.bundles.path(release))
        .map_err(|e| e.to_string())
        .and_then(|bytes| protocol::bundle::verify(&api.key, &bytes).map_err(|e| e.to_string()))
        .map(|verified| (verified.manifest.version, verified.manifest.probe))
        .map_err(|e| {
            format!(
                "bundle {} unavailable to judge the probe: {e}",
                release.to_hex()
            )
        })
}

/// A release digest as the route or a request names it (hex, trimmed).
pub(super) fn agentless_digest(text: &str) -> Option<Digest> {
    let bytes = ::hex::decode(text.trim()).ok()?;
    Some(Digest(bytes.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::controller_observation;
    use api::client::RouteAnswer;
    use model::{Digest, ProbeVerdict};

    fn spec() -> protocol::bundle::ProbeSpec {
        protocol::bundle::ProbeSpec {
            path: "/health".into(),
            expect_status: 200,
            expect_body: "ok".into(),
            expect_json: None,
        }
    }

    fn answer(status: u16, identity: Option<Digest>, body: &str) -> RouteAnswer {
        RouteAnswer {
            status,
            identity: identity.map(|d| d.to_hex()),
            body: body.into(),
        }
    }

    /// Issue 13: `probe` said "process: running" behind the proxy's 502.
    /// The process is reported as the route shows it: a 502 without an
    /// identity (the agent's proxy: the app did not answer) is down; an app
    /// that answers, even wrongly or with its own 5xx, runs.
    #[test]
    fn the_proxys_502_is_no_running_process() {
        let v2 = Digest::repeat(2);
        let proxy_502 = answer(502, None, "app instance did not answer");
        let o = controller_observation(&spec(), Some(&proxy_502));
        assert_eq!(o.verdict, ProbeVerdict::Unreachable);
        assert!(!o.process_healthy, "{o:?}");
        assert_eq!(
            proof::observation_process_text(&o),
            "down, uptime and restarts not observed"
        );
        let app_502 = answer(502, Some(v2), "upstream broke");
        let o = controller_observation(&spec(), Some(&app_502));
        assert_eq!(o.verdict, ProbeVerdict::WrongAnswer);
        assert!(o.process_healthy, "the app itself answered: {o:?}");
        let ok = controller_observation(&spec(), Some(&answer(200, Some(v2), "ok")));
        assert_eq!(ok.verdict, ProbeVerdict::Pass);
        assert!(ok.process_healthy);
        assert_eq!((ok.process_uptime_ms, ok.process_restarts), (None, None));
        let silent = controller_observation(&spec(), None);
        assert!(!silent.process_healthy);
    }
}
