//! A small client for the controller's HTTP API, used by the CLI and the
//! demo. Errors say what was asked and what came back.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

/// The default API address.
pub const DEFAULT_CONTROLLER: &str = "http://127.0.0.1:7800";
/// Upper bound on an API answer.
pub const ANSWER_BYTES_MAX: usize = 16 * 1024 * 1024;
/// How long one API call may take.
pub const CALL_TIMEOUT_MS: u64 = 10_000;

/// Most pages [`ApiClient::all_pages`] reads (a million items).
pub const LIST_PAGES_MAX: usize = 1_000;

/// Most reads [`ApiClient::fleet_view`] makes to see the fleet at one
/// log sequence.
pub const FLEET_VIEW_READS_MAX: usize = 5;

/// The whole fleet as read by [`ApiClient::fleet_view`]: the summary plus
/// every rollout, node and op (small fleets only).
#[derive(Clone, Debug)]
pub struct FleetView {
    /// The `/api/status` summary.
    pub status: crate::view::StatusDto,
    /// Last durable log sequence (from the summary).
    pub last_sequence: Option<u64>,
    /// Fleet generation (from the summary).
    pub generation: u64,
    /// Every rollout, oldest first (`/api/rollouts`).
    pub rollouts: Vec<crate::view::RolloutDto>,
    /// Every node in enrollment order (`/api/nodes`, all pages).
    pub nodes: Vec<crate::view::NodeDto>,
    /// Every op in op order, hot and archived (`/api/ops`, all pages).
    pub ops: Vec<crate::view::OpDto>,
}

impl FleetView {
    /// Put the parts together.
    pub fn new(
        status: crate::view::StatusDto,
        rollouts: Vec<crate::view::RolloutDto>,
        nodes: Vec<crate::view::NodeDto>,
        ops: Vec<crate::view::OpDto>,
    ) -> FleetView {
        FleetView {
            last_sequence: status.last_sequence,
            generation: status.generation,
            status,
            rollouts,
            nodes,
            ops,
        }
    }
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The controller could not be reached.
    #[error("{method} {url}: cannot reach the controller: {detail}")]
    Unreachable {
        /// HTTP method.
        method: String,
        /// URL.
        url: String,
        /// What failed.
        detail: String,
    },
    /// The controller answered with an error status.
    #[error("{method} {url}: {status}: {body}")]
    Status {
        /// HTTP method.
        method: String,
        /// URL.
        url: String,
        /// Status code.
        status: u16,
        /// The answer's body.
        body: String,
    },
    /// The answer was not the JSON expected.
    #[error("{url}: unexpected answer: {detail}")]
    Decode {
        /// URL.
        url: String,
        /// What was wrong.
        detail: String,
    },
}

/// An API client of one controller, or of several (HA: a leader and hot
/// standbys, [`ApiClient::with_controllers`]).
#[derive(Clone)]
pub struct ApiClient {
    /// Base URLs in the order given; never empty.
    bases: std::sync::Arc<Vec<String>>,
    token: Option<String>,
    http: Client<HttpConnector, Full<Bytes>>,
}

/// Why one call to one controller failed, with the leader a standby's
/// 503 named (its `Fleetweft-Leader` header).
struct Failed {
    error: ClientError,
    leader: Option<String>,
}

impl ApiClient {
    /// A client for `base` (e.g. `http://127.0.0.1:7800`).
    pub fn new(base: impl Into<String>, token: Option<String>) -> ApiClient {
        Self::with_controllers(vec![base.into()], token)
    }

    /// A client for several controllers (a leader and its hot standbys):
    /// a read goes to the first that answers, in order; a write that a
    /// standby answers with 503 goes to the leader it names when that is
    /// one of `bases`, else to the next not tried yet. An empty list means
    /// [`DEFAULT_CONTROLLER`].
    pub fn with_controllers(bases: Vec<String>, token: Option<String>) -> ApiClient {
        let mut bases: Vec<String> = bases
            .iter()
            .map(|b| b.trim().trim_end_matches('/').to_string())
            .filter(|b| !b.is_empty())
            .collect();
        if bases.is_empty() {
            bases.push(DEFAULT_CONTROLLER.to_string());
        }
        ApiClient {
            bases: std::sync::Arc::new(bases),
            token,
            http: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// The first API base URL (no trailing slash).
    pub fn base(&self) -> &str {
        &self.bases[0]
    }

    /// Every API base URL, in order.
    pub fn bases(&self) -> &[String] {
        &self.bases
    }

    /// The operator token, if one was given.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// GET and decode JSON.
    pub async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let bytes = self.call("GET", path, Bytes::new(), None).await?;
        self.decode(path, &bytes)
    }

    /// GET a text answer (the dashboard, `/metrics`).
    pub async fn get_text(&self, path: &str) -> Result<String, ClientError> {
        let bytes = self.call("GET", path, Bytes::new(), None).await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Every item of a paged list (`/api/nodes`, `/api/ops`), following
    /// `next` from page to page; `query` is the filter (`state=unknown`),
    /// possibly empty. At most [`LIST_PAGES_MAX`] pages are read: a list
    /// longer than that is refused rather than read for ever.
    pub async fn all_pages<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        query: &str,
    ) -> Result<Vec<T>, ClientError> {
        let mut items = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..LIST_PAGES_MAX {
            let mut url = format!("{path}?limit={}", crate::view::PAGE_LIMIT_MAX);
            if !query.is_empty() {
                url.push('&');
                url.push_str(query);
            }
            if let Some(a) = &after {
                url.push_str("&after=");
                url.push_str(a);
            }
            let page: crate::view::Page<T> = self.get(&url).await?;
            items.extend(page.items);
            after = page.next;
            if after.is_none() {
                return Ok(items);
            }
        }
        Err(ClientError::Decode {
            url: path.to_string(),
            detail: format!("more than {LIST_PAGES_MAX} pages"),
        })
    }

    /// The status summary and every rollout, node and op, read page by
    /// page: what a test or the demo checks on a small fleet. Not for
    /// 10,000 nodes: use the summary and one page there.
    ///
    /// The parts come from several requests, so the whole is read again
    /// while the log moved on between the first request and a last
    /// `/api/status` (at most [`FLEET_VIEW_READS_MAX`] reads): a check
    /// across parts (an op settled, its rollout paused) then sees one
    /// moment. A fleet that never stops moving gets the last read.
    pub async fn fleet_view(&self) -> Result<FleetView, ClientError> {
        let mut view = self.fleet_view_once().await?;
        for _ in 1..FLEET_VIEW_READS_MAX {
            let now: crate::view::StatusDto = self.get("/api/status").await?;
            if now.last_sequence == view.last_sequence {
                break;
            }
            view = self.fleet_view_once().await?;
        }
        Ok(view)
    }

    /// One read of every part, which may straddle new events.
    async fn fleet_view_once(&self) -> Result<FleetView, ClientError> {
        let status: crate::view::StatusDto = self.get("/api/status").await?;
        let rollouts = self.get("/api/rollouts").await?;
        let nodes = self.all_pages("/api/nodes", "").await?;
        let ops = self.all_pages("/api/ops", "").await?;
        Ok(FleetView::new(status, rollouts, nodes, ops))
    }

    /// POST a JSON body and decode the JSON answer.
    pub async fn post_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<T, ClientError> {
        let bytes = Bytes::from(body.to_string());
        let answer = self
            .call("POST", path, bytes, Some("application/json"))
            .await?;
        self.decode(path, &answer)
    }

    /// POST raw bytes and decode the JSON answer.
    pub async fn post_bytes<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: Vec<u8>,
    ) -> Result<T, ClientError> {
        self.send_bytes("POST", path, body).await
    }

    /// Raw bytes with `method`, the JSON answer decoded.
    async fn send_bytes<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Vec<u8>,
    ) -> Result<T, ClientError> {
        let answer = self
            .call(
                method,
                path,
                Bytes::from(body),
                Some("application/octet-stream"),
            )
            .await?;
        self.decode(path, &answer)
    }

    /// HEAD: `true` when the controller holds what `path` names (a 2xx),
    /// `false` on a 404.
    pub async fn exists(&self, path: &str) -> Result<bool, ClientError> {
        match self.call("HEAD", path, Bytes::new(), None).await {
            Ok(_) => Ok(true),
            Err(ClientError::Status { status: 404, .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// PUT raw bytes and decode the JSON answer.
    pub async fn put_bytes<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: Vec<u8>,
    ) -> Result<T, ClientError> {
        self.send_bytes("PUT", path, body).await
    }

    /// DELETE what `path` names and decode the JSON answer.
    pub async fn delete<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<T, ClientError> {
        let answer = self.call("DELETE", path, Bytes::new(), None).await?;
        self.decode(path, &answer)
    }

    fn decode<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        bytes: &[u8],
    ) -> Result<T, ClientError> {
        serde_json::from_slice(bytes).map_err(|e| ClientError::Decode {
            url: format!("{}{path}", self.base()),
            detail: e.to_string(),
        })
    }

    /// One call, to the controllers in turn until one serves it: an
    /// unreachable one, or one answering 503 (a standby refusing a write,
    /// a core stopping), passes it on; any other answer is the answer. A
    /// 503's leader hint is followed only to a URL of the list: the token
    /// goes only where the operator said.
    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Bytes,
        content_type: Option<&str>,
    ) -> Result<Bytes, ClientError> {
        let mut tried = vec![false; self.bases.len()];
        let mut at = 0;
        loop {
            tried[at] = true;
            let failed = match self
                .call_at(&self.bases[at], method, path, body.clone(), content_type)
                .await
            {
                Ok(bytes) => return Ok(bytes),
                Err(failed) => failed,
            };
            let passes = match &failed.error {
                ClientError::Unreachable { .. } => true,
                ClientError::Status { status, .. } => *status == 503,
                ClientError::Decode { .. } => false,
            };
            let hinted = failed
                .leader
                .as_deref()
                .map(|l| l.trim_end_matches('/'))
                .and_then(|l| self.bases.iter().position(|b| b == l))
                .filter(|i| !tried[*i]);
            let next = hinted.or_else(|| tried.iter().position(|t| !t));
            match next {
                Some(next) if passes => at = next,
                _ => return Err(failed.error),
            }
        }
    }

    async fn call_at(
        &self,
        base: &str,
        method: &str,
        path: &str,
        body: Bytes,
        content_type: Option<&str>,
    ) -> Result<Bytes, Failed> {
        let url = format!("{base}{path}");
        let unreachable = |detail: String| Failed {
            error: ClientError::Unreachable {
                method: method.to_string(),
                url: url.clone(),
                detail,
            },
            leader: None,
        };
        let mut request = hyper::Request::builder().method(method).uri(&url);
        if let Some(token) = &self.token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        if let Some(ct) = content_type {
            request = request.header("content-type", ct);
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| unreachable(e.to_string()))?;
        let answer = tokio::time::timeout(
            Duration::from_millis(CALL_TIMEOUT_MS),
            self.http.request(request),
        )
        .await
        .map_err(|_| unreachable(format!("no answer within {CALL_TIMEOUT_MS} ms")))?
        .map_err(|e| unreachable(e.to_string()))?;
        let status = answer.status().as_u16();
        let leader = answer
            .headers()
            .get(crate::role::LEADER_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = http_body_util::Limited::new(answer.into_body(), ANSWER_BYTES_MAX)
            .collect()
            .await
            .map_err(|e| unreachable(e.to_string()))?
            .to_bytes();
        if status >= 400 {
            // The API's one error shape; anything else is shown as it came.
            let body = serde_json::from_slice::<crate::view::ErrorBody>(&bytes)
                .map(|e| e.error)
                .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned());
            return Err(Failed {
                error: ClientError::Status {
                    method: method.to_string(),
                    url,
                    status,
                    body,
                },
                leader,
            });
        }
        Ok(bytes)
    }
}

/// Upper bound on a probed route's body.
pub const ROUTE_BODY_BYTES_MAX: usize = 64 * 1024;
/// How long a route probe may take.
pub const ROUTE_TIMEOUT_MS: u64 = 3_000;

/// What a route answered: a view DTO, re-exported where the probe is.
pub use crate::view::RouteAnswer;

/// GET `http://{addr}{path}` on a node's public route; `None` when nothing
/// answered within [`ROUTE_TIMEOUT_MS`].
pub async fn get_route(addr: std::net::SocketAddr, path: &str) -> Option<RouteAnswer> {
    RouteClient::new().get(addr, path).await
}

/// A client of public routes that keeps its connections open between
/// requests (as a browser or a service client does), so many requests
/// share a few connections: what a load generator sends.
#[derive(Clone)]
pub struct RouteClient {
    client: Client<HttpConnector, http_body_util::Empty<Bytes>>,
}

impl Default for RouteClient {
    fn default() -> Self {
        RouteClient::new()
    }
}

impl RouteClient {
    /// A client with an empty connection pool.
    pub fn new() -> RouteClient {
        RouteClient {
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// GET `http://{addr}{path}`; `None` when nothing answered within
    /// [`ROUTE_TIMEOUT_MS`] or the body was over [`ROUTE_BODY_BYTES_MAX`].
    pub async fn get(&self, addr: std::net::SocketAddr, path: &str) -> Option<RouteAnswer> {
        let uri: hyper::Uri = format!("http://{addr}{path}").parse().ok()?;
        let timeout = Duration::from_millis(ROUTE_TIMEOUT_MS);
        let answer = tokio::time::timeout(timeout, self.client.get(uri))
            .await
            .ok()?
            .ok()?;
        let status = answer.status().as_u16();
        let identity = answer
            .headers()
            .get("x-fleetweft-release")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = http_body_util::Limited::new(answer.into_body(), ROUTE_BODY_BYTES_MAX).collect();
        let body = tokio::time::timeout(timeout, body)
            .await
            .ok()?
            .ok()?
            .to_bytes();
        Some(RouteAnswer {
            status,
            identity,
            body: String::from_utf8_lossy(&body).trim().to_string(),
        })
    }
}
