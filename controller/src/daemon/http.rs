//! The HTTP server's composition root: the router that merges the
//! surfaces (`api`, the console), each registered
//! through utoipa-axum at the path its `#[utoipa::path]` documents, and
//! serves the document they make at `/api/openapi.json`. The surfaces
//! depend on the view layer and on the shared state ([`super::state`]),
//! never on each other or on this root.

use super::error::ApiError;
use super::role::{Role, LEADER_HEADER, ROLE_HEADER, SEQUENCE_HEADER};
pub use super::state::{operator, Api};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, Method, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;

/// Every route with the OpenAPI document they make (without the
/// document's own route). Tests read the document from here.
pub fn routes() -> OpenApiRouter<Api> {
    OpenApiRouter::with_openapi(super::openapi::base())
        .merge(super::api::routes())
        .merge(super::release_api::routes())
        .merge(super::config_api::routes())
        .merge(super::operators_api::routes())
        .merge(super::console::routes())
        .merge(super::stream::routes())
        .merge(super::explore::routes())
}

/// The OpenAPI document, generated from the handlers and the DTOs.
pub fn document() -> utoipa::openapi::OpenApi {
    let (_, doc) = with_document_route(routes()).split_for_parts();
    doc
}

fn with_document_route(r: OpenApiRouter<Api>) -> OpenApiRouter<Api> {
    r.routes(utoipa_axum::routes!(super::openapi::openapi_json))
}

/// The router: every surface, the document, and JSON errors for what no
/// route serves (unknown paths 404, wrong methods 405, bodies over the
/// limit 413), so every answer of the server has the one error shape.
/// Every answer names the controller's role and folded log sequence
/// ([`marked`]); a standby answers writes 503.
pub fn router(api: Api) -> axum::Router {
    let (router, doc) = with_document_route(routes()).split_for_parts();
    let doc = Arc::new(doc);
    router
        .layer(axum::Extension(doc))
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .fallback(|uri: Uri| async move { ApiError::NoRoute(uri.path().to_string()) })
        .layer(DefaultBodyLimit::max(super::api::UPLOAD_BYTES_MAX))
        .layer(axum::middleware::map_response(json_rejections))
        .layer(axum::middleware::from_fn_with_state(api.clone(), marked))
        .with_state(api)
}

/// Whether `method` may change anything: every route that writes takes
/// POST, PUT, PATCH or DELETE; reads are GET (and HEAD).
fn writes(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Marks every answer with `Fleetweft-Role` and `Fleetweft-Log-Sequence`
/// (and, on a standby, `Fleetweft-Leader` when a leader is known), and
/// answers a write on a hot standby with [`ApiError::NotLeader`] (503)
/// before any handler sees it: a standby's state is a view, only the
/// leader decides.
///
/// The headers are read once the answer is made: the role only goes from
/// standby to leader and the sequence only grows, so they are at least
/// what the body says (a body that says `leader` has a `leader` header).
async fn marked(State(api): State<Api>, request: Request, next: Next) -> Response {
    let cell = api.core.role();
    let mut response = if cell.role() == Role::Standby && writes(request.method()) {
        ApiError::NotLeader {
            leader: cell.leader().map(|advert| advert.api),
        }
        .into_response()
    } else {
        next.run(request).await
    };
    let role = cell.role();
    let leader = cell.leader().map(|advert| advert.api);
    let headers = response.headers_mut();
    headers.insert(ROLE_HEADER, HeaderValue::from_static(role.as_str()));
    if let Some(sequence) = cell.log_sequence() {
        headers.insert(SEQUENCE_HEADER, HeaderValue::from(sequence));
    }
    if role == Role::Standby {
        if let Some(value) = leader.and_then(|url| HeaderValue::from_str(&url).ok()) {
            headers.insert(LEADER_HEADER, value);
        }
    }
    response
}

/// Bodies over the limit are refused by axum's own layer as plain text:
/// answer the one error shape instead.
async fn json_rejections(response: axum::response::Response) -> axum::response::Response {
    if response.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE
        && !is_json(response.headers())
    {
        return ApiError::TooLarge(format!("at most {} bytes", super::api::UPLOAD_BYTES_MAX))
            .into_response();
    }
    response
}

fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

#[cfg(test)]
mod tests {
    use super::document;

    /// The event page's documented `kind` pattern names exactly the event
    /// kind words.
    #[test]
    fn the_documented_event_kinds_are_the_words() {
        let doc = serde_json::to_value(document()).expect("json");
        let params = doc["paths"]["/events"]["get"]["parameters"]
            .as_array()
            .expect("parameters");
        let kind = params.iter().find(|p| p["name"] == "kind").expect("kind");
        let pattern = kind["schema"]["pattern"].as_str().expect("a pattern");
        let words: Vec<&str> = pattern
            .trim_start_matches("^(|")
            .trim_end_matches(")$")
            .split('|')
            .collect();
        assert_eq!(words, crate::daemon::view::words::EVENT_KINDS);
    }
}
