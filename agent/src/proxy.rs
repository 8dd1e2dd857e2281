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
use std::sync::{Arc, RwLock};
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

/// The switch: which backend the public route serves. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Route {
    current: Arc<RwLock<Option<Backend>>>,
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
}

type HttpClient = Client<HttpConnector, Incoming>;

/// What the route answers: a short text of its own, or the app's body as
/// it streams.
type RouteBody = Either<Full<Bytes>, Incoming>;

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
    Response::from_parts(parts, Either::Right(body))
}

#[cfg(test)]
mod tests;
