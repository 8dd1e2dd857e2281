//! The node's public route: a small reverse proxy on the public port that
//! forwards to the current app instance and stamps `X-Fleetweft-Release`
//! with the digest of the instance it forwarded to. The route, not the
//! process, is what users get, so route probes go through here.

use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};
use model::Digest;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;

/// The header naming the release that answered.
pub const RELEASE_HEADER: &str = "x-fleetweft-release";
/// How long the proxy waits for the app's answer to begin (its status and
/// headers). Bodies are streamed both ways as they come, never buffered:
/// what the proxy holds of one is one frame at a time (hyper's flow
/// control), so a release can serve answers and take uploads of any size
/// (issue #23 item 2), and a long answer is not cut.
pub const PROXY_TIMEOUT_MS: u64 = 5_000;

/// Where the public route forwards to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backend {
    pub port: u16,
    pub release: Digest,
}

/// The switch: which backend the public route serves, and how many
/// requests each backend still has in flight. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Route {
    current: Arc<RwLock<Option<Backend>>>,
    in_flight: Arc<Mutex<HashMap<u16, usize>>>,
}

/// One request forwarded to a backend port, counted until it is dropped:
/// with the answer's body, so a streamed answer counts until it ends.
#[derive(Debug)]
pub struct InFlight {
    counts: Arc<Mutex<HashMap<u16, usize>>>,
    port: u16,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = counts.get_mut(&self.port) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.port);
            }
        }
    }
}

impl Route {
    /// Point the route at `backend` (or at nothing).
    pub fn switch(&self, backend: Option<Backend>) {
        match self.current.write() {
            Ok(mut guard) => *guard = backend,
            Err(poisoned) => *poisoned.into_inner() = backend,
        }
    }

    /// The backend the route forwards to now.
    pub fn current(&self) -> Option<Backend> {
        match self.current.read() {
            Ok(guard) => *guard,
            Err(poisoned) => *poisoned.into_inner(),
        }
    }

    /// Requests forwarded to `port` whose answer has not ended: what a
    /// backend taken off the route still owes its clients.
    pub fn in_flight(&self, port: u16) -> usize {
        let counts = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        counts.get(&port).copied().unwrap_or(0)
    }

    /// Counts one request to `port` until the guard is dropped.
    fn enter(&self, port: u16) -> InFlight {
        let mut counts = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        *counts.entry(port).or_insert(0) += 1;
        InFlight {
            counts: self.in_flight.clone(),
            port,
        }
    }
}

/// An answer's body that keeps its request counted until it ends.
pub struct Counted {
    body: Incoming,
    _in_flight: InFlight,
}

impl hyper::body::Body for Counted {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, hyper::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

type HttpClient = Client<HttpConnector, Incoming>;

/// What the route answers: a short text of its own, or the app's body as
/// it streams.
type RouteBody = Either<Full<Bytes>, Counted>;

/// Serve the public route on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, route: Route) {
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let route = route.clone();
        let client = client.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let route = route.clone();
                let client = client.clone();
                async move { Ok::<_, hyper::Error>(forward(req, route, client).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn plain(status: StatusCode, text: &str) -> Response<RouteBody> {
    let mut response = Response::new(Either::Left(Full::new(Bytes::from(text.to_string()))));
    *response.status_mut() = status;
    response
}

async fn forward(req: Request<Incoming>, route: Route, client: HttpClient) -> Response<RouteBody> {
    let Some(backend) = route.current() else {
        // Also what a restarting agent answers until its route is rebuilt:
        // say only what is true (nothing serves here now), not why.
        return plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "no release is serving on this route\n",
        );
    };
    let path = req
        .uri()
        .path_and_query()
        .map_or("/".to_string(), |p| p.as_str().to_string());
    let Ok(uri) = format!("http://127.0.0.1:{}{}", backend.port, path).parse::<hyper::Uri>() else {
        return plain(StatusCode::BAD_REQUEST, "bad path\n");
    };
    let in_flight = route.enter(backend.port);
    let (parts, body) = req.into_parts();
    let mut upstream = Request::new(body);
    *upstream.method_mut() = parts.method;
    *upstream.uri_mut() = uri;
    for (name, value) in parts.headers.iter() {
        if name != hyper::header::HOST {
            upstream.headers_mut().append(name, value.clone());
        }
    }
    let answer = tokio::time::timeout(
        Duration::from_millis(PROXY_TIMEOUT_MS),
        client.request(upstream),
    )
    .await;
    let Ok(Ok(answer)) = answer else {
        // No identity header: nothing answered, so nothing is claimed.
        return plain(StatusCode::BAD_GATEWAY, "app instance did not answer\n");
    };
    let (mut parts, body) = answer.into_parts();
    if let Ok(value) = hyper::header::HeaderValue::from_str(&backend.release.to_hex()) {
        parts.headers.insert(RELEASE_HEADER, value);
    }
    let body = Counted {
        body,
        _in_flight: in_flight,
    };
    Response::from_parts(parts, Either::Right(body))
}

#[cfg(test)]
mod tests;
