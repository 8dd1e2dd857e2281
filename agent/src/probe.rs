//! Probing a route: one GET of the bundle's probe path, judged against the
//! expected status and body, with the identity the route answered with.

use crate::proxy::RELEASE_HEADER;
use crate::supervisor::ProcessSample;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use model::{Digest, RouteObservation};
use std::time::Duration;

/// How long one probe may take.
pub const PROBE_TIMEOUT_MS: u64 = 3_000;
/// Upper bound on the probed body.
pub const PROBE_BODY_BYTES_MAX: usize = 64 * 1024;

/// What a probe expects: the bundle manifest's probe spec.
pub type ProbeExpect = protocol::bundle::ProbeSpec;

/// The raw answer of one probe, kept for evidence and reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeAnswer {
    pub status: Option<u16>,
    pub body: String,
    pub identity: Option<Digest>,
}

/// GET `http://127.0.0.1:{port}{path}` and judge it. `process` is what the
/// supervisor sees of the process behind the route (`None`: no supervised
/// process there); it is recorded with the observation, never judged on.
pub async fn probe(
    port: u16,
    expect: &ProbeExpect,
    process: Option<ProcessSample>,
) -> (RouteObservation, ProbeAnswer) {
    let answer = fetch(port, &expect.path).await;
    let mut observation = expect.judge(
        answer.status,
        &answer.body,
        answer.identity,
        process.is_some_and(|p| p.running),
    );
    observation.process_uptime_ms = process.map(|p| p.uptime_ms);
    observation.process_restarts = process.map(|p| p.restarts);
    (observation, answer)
}

async fn fetch(port: u16, path: &str) -> ProbeAnswer {
    let nothing = ProbeAnswer {
        status: None,
        body: String::new(),
        identity: None,
    };
    let Ok(uri) = format!("http://127.0.0.1:{port}{path}").parse::<hyper::Uri>() else {
        return nothing;
    };
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let call = tokio::time::timeout(Duration::from_millis(PROBE_TIMEOUT_MS), client.get(uri));
    let Ok(Ok(response)) = call.await else {
        return nothing;
    };
    let status = response.status().as_u16();
    let identity = response
        .headers()
        .get(RELEASE_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_digest);
    let body = match http_body_util::Limited::new(response.into_body(), PROBE_BODY_BYTES_MAX)
        .collect()
        .await
    {
        Ok(b) => String::from_utf8_lossy(&b.to_bytes()).into_owned(),
        Err(_) => String::new(),
    };
    ProbeAnswer {
        status: Some(status),
        body,
        identity,
    }
}

/// Parse a 64-hex-digit digest.
pub fn parse_digest(text: &str) -> Option<Digest> {
    let bytes = hex::decode(text.trim()).ok()?;
    let array: [u8; 32] = bytes.try_into().ok()?;
    Some(Digest(array))
}
