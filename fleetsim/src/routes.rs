//! Every simulated node's public route, served by ONE embedded HTTP server.
//!
//! Linux routes all of 127.0.0.0/8 to loopback: node `i` gets the route
//! `127.10.x.y:PORT` ([`Routes::addr`]), the server listens once on
//! `0.0.0.0:PORT`, and tells nodes apart by the local address of each
//! accepted connection. What a route answers is [`Routes::answer`], the
//! one function the controller's probes (over HTTP) and the simulated
//! agent's own probe (in memory) both read, so they never disagree.

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use model::{ArtifactRead, Digest, RouteObservation};
use protocol::bundle::ProbeSpec;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// First address of the simulated routes: `127.10.0.1` is node 0.
pub const ROUTE_BASE: Ipv4Addr = Ipv4Addr::new(127, 10, 0, 1);
/// The header a route names its release in (the agent proxy's).
pub const RELEASE_HEADER: &str = "x-fleetweft-release";
/// What a route answers while nothing serves (the agent proxy's 503).
const NOTHING_SERVING_STATUS: u16 = 503;

/// One release the simulated apps can serve.
#[derive(Clone, Debug)]
pub struct SimRelease {
    /// Its digest.
    pub digest: Digest,
    /// Its probe spec (from its signed manifest).
    pub probe: ProbeSpec,
}

/// What one route answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteReply {
    /// HTTP status.
    pub status: u16,
    /// `X-Fleetweft-Release`, when something serves.
    pub identity: Option<Digest>,
    /// The body.
    pub body: String,
}

/// The routes of the whole simulated fleet.
#[derive(Debug)]
pub struct Routes {
    port: u16,
    releases: Vec<SimRelease>,
    /// Per node: 0 nothing serves, `k` serves `releases[k - 1]`.
    serving: Vec<AtomicU8>,
    /// Per node: its copy of `wrong_release` answers wrongly.
    wrong: Vec<bool>,
    wrong_release: Digest,
}

impl Routes {
    /// Routes for `nodes` nodes on `port`, all serving `initial` (an index
    /// into `releases`); `wrong[i]` makes node `i` answer wrongly when it
    /// serves `wrong_release`.
    pub fn new(
        port: u16,
        releases: Vec<SimRelease>,
        initial: Digest,
        wrong: Vec<bool>,
        wrong_release: Digest,
    ) -> Routes {
        assert!(releases.len() < usize::from(u8::MAX), "too many releases");
        let first = releases
            .iter()
            .position(|r| r.digest == initial)
            .map_or(0, |k| k as u8 + 1);
        Routes {
            port,
            releases,
            serving: wrong.iter().map(|_| AtomicU8::new(first)).collect(),
            wrong,
            wrong_release,
        }
    }

    /// Node `index`'s public route.
    pub fn addr(index: usize) -> SocketAddr {
        let ip = u32::from(ROUTE_BASE) + index as u32;
        SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), 0)
    }

    /// Node `index`'s public route on this server's port.
    pub fn public(&self, index: usize) -> SocketAddr {
        let mut addr = Self::addr(index);
        addr.set_port(self.port);
        addr
    }

    /// The node whose route is `ip`, if it is one of ours.
    pub fn node_of(&self, ip: IpAddr) -> Option<usize> {
        let IpAddr::V4(v4) = ip else { return None };
        let index = u32::from(v4).checked_sub(u32::from(ROUTE_BASE))? as usize;
        (index < self.serving.len()).then_some(index)
    }

    /// What node `index` serves.
    pub fn serving(&self, index: usize) -> Option<Digest> {
        let k = self.serving[index].load(Ordering::Acquire);
        (k > 0).then(|| self.releases[usize::from(k) - 1].digest)
    }

    /// Point node `index`'s route at `release` (`None`: nothing).
    pub fn switch(&self, index: usize, release: Option<Digest>) {
        let k = release
            .and_then(|d| self.releases.iter().position(|r| r.digest == d))
            .map_or(0, |k| k as u8 + 1);
        self.serving[index].store(k, Ordering::Release);
    }

    fn release(&self, digest: Digest) -> Option<&SimRelease> {
        self.releases.iter().find(|r| r.digest == digest)
    }

    /// What node `index`'s route answers on `path`.
    pub fn answer(&self, index: usize, path: &str) -> RouteReply {
        let Some(release) = self.serving(index).and_then(|d| self.release(d)) else {
            return RouteReply {
                status: NOTHING_SERVING_STATUS,
                identity: None,
                body: "nothing serves this route".into(),
            };
        };
        let wrong = self.wrong[index] && release.digest == self.wrong_release;
        let body = if path != release.probe.path {
            "not found".to_string()
        } else if wrong {
            "a wrong answer (simulated)".to_string()
        } else {
            release.probe.expect_body.clone()
        };
        let status = if path == release.probe.path {
            release.probe.expect_status
        } else {
            404
        };
        RouteReply {
            status,
            identity: Some(release.digest),
            body,
        }
    }

    /// The agent's own probe of node `index`'s route: judged by the probe
    /// spec of what serves (as the real agent does), with the artifact
    /// read back as what serves and the simulated process up `uptime_ms`.
    pub fn observe(&self, index: usize, uptime_ms: u64) -> RouteObservation {
        let serving = self.serving(index);
        let spec = serving
            .and_then(|d| self.release(d))
            .map(|r| r.probe.clone())
            .unwrap_or(ProbeSpec {
                path: "/".into(),
                expect_status: 200,
                expect_body: String::new(),
                expect_json: None,
            });
        let reply = self.answer(index, &spec.path);
        let mut observation = spec.judge(
            Some(reply.status),
            &reply.body,
            reply.identity,
            serving.is_some(),
        );
        observation.process_uptime_ms = Some(if serving.is_some() { uptime_ms } else { 0 });
        observation.process_restarts = Some(0);
        observation.artifact = serving.map(ArtifactRead::Digest);
        observation
    }

    /// Serve every route on `listener` until the process ends. Connections
    /// to an address that is not a simulated route are closed unanswered.
    pub async fn serve(self: Arc<Self>, listener: tokio::net::TcpListener) {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!("route server: accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            let Some(node) = stream.local_addr().ok().and_then(|a| self.node_of(a.ip())) else {
                continue;
            };
            let routes = self.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let reply = routes.answer(node, request.uri().path());
                    async move { Ok::<_, hyper::http::Error>(response(reply)) }
                });
                let served = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                if let Err(e) = served {
                    tracing::debug!("route server: connection ended: {e}");
                }
            });
        }
    }
}

fn response(reply: RouteReply) -> hyper::Response<Full<Bytes>> {
    let mut builder = hyper::Response::builder().status(reply.status);
    if let Some(identity) = reply.identity {
        builder = builder.header(RELEASE_HEADER, identity.to_hex());
    }
    builder
        .body(Full::new(Bytes::from(reply.body)))
        .unwrap_or_else(|_| hyper::Response::new(Full::new(Bytes::new())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(body: &str) -> ProbeSpec {
        ProbeSpec {
            path: "/hello".into(),
            expect_status: 200,
            expect_body: body.into(),
            expect_json: None,
        }
    }

    #[test]
    fn routes_answer_by_node_and_release() {
        let (v1, v2) = (Digest([1; 32]), Digest([2; 32]));
        let releases = vec![
            SimRelease {
                digest: v1,
                probe: spec("hello from v1"),
            },
            SimRelease {
                digest: v2,
                probe: spec("hello from v2"),
            },
        ];
        let routes = Routes::new(80, releases, v1, vec![false, true], v2);
        assert_eq!(routes.node_of(Routes::addr(1).ip()), Some(1));
        assert_eq!(routes.node_of(Routes::addr(2).ip()), None);
        assert_eq!(routes.node_of(IpAddr::V4(Ipv4Addr::LOCALHOST)), None);
        assert!(routes.observe(1, 5).proves_serving(v1));
        routes.switch(0, Some(v2));
        routes.switch(1, Some(v2));
        assert!(routes.observe(0, 5).proves_serving(v2));
        let wrong = routes.observe(1, 5);
        assert_eq!(wrong.verdict, model::ProbeVerdict::WrongAnswer);
        assert_eq!(wrong.identity, Some(v2));
        routes.switch(1, None);
        assert_eq!(routes.answer(1, "/hello").status, NOTHING_SERVING_STATUS);
        assert_eq!(
            routes.observe(1, 5).verdict,
            model::ProbeVerdict::Unreachable
        );
    }
}
