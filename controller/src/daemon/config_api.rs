//! The API's configuration routes (issue #24 item 1): set an app's next
//! revision (secrets sealed before the core sees them) and read its latest.

use super::configuration::{build_revision, ConfigRequest};
use super::error::{ApiError, Path};
use super::state::{acting, operator, Api};
use super::view::config::{ConfigSetRequest, ConfigView};
use super::view::ErrorBody;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use model::controller::Input;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The configuration routes.
pub fn routes() -> OpenApiRouter<Api> {
    OpenApiRouter::new().routes(routes!(get_config, set_config))
}

/// `GET /api/configs/{app}`: the app's latest revision, secrets by
/// fingerprint only.
#[utoipa::path(get, path = "/api/configs/{app}", tag = "reads",
    params(("app" = String, Path, description = "the app (a release manifest's name)")),
    responses(
        (status = 200, description = "the app's latest configuration revision", body = ConfigView),
        (status = 404, description = "the app has no configuration", body = ErrorBody),
        (status = 503, description = "the controller core stopped", body = ErrorBody),
    ))]
async fn get_config(State(api): State<Api>, Path(app): Path<String>) -> Response {
    let Some(snapshot) = api.core.snapshot().await else {
        return ApiError::Unavailable.into_response();
    };
    match snapshot.state.configs.get(&app) {
        Some(revision) => Json(ConfigView::of(revision)).into_response(),
        None => ApiError::NotFound(format!("app {app:?} has no configuration")).into_response(),
    }
}

/// `POST /api/configs/{app}`: record the app's next revision. Rollouts
/// started after it deploy it with their code.
#[utoipa::path(post, path = "/api/configs/{app}", tag = "writes", security(("bearer" = [])),
    params(("app" = String, Path, description = "the app (a release manifest's name)")),
    request_body(content = ConfigSetRequest, description = "JSON object"),
    responses(
        (status = 200, description = "recorded: the new revision", body = ConfigView),
        (status = 400, description = "malformed, over a bound, a name not allowed, a secret with no configuration key, or another revision recorded meanwhile (set it again); nothing recorded", body = ErrorBody),
        (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody), (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody),
        (status = 503, description = "the controller core stopped, or this controller is a standby", body = ErrorBody),
    ))]
async fn set_config(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(app): Path<String>,
    body: Bytes,
) -> Response {
    let actor = match operator(&api, &headers) {
        Ok(actor) => actor,
        Err(rejection) => return rejection.into_response(),
    };
    let request = match parse_request(&body) {
        Ok(request) => request,
        Err(why) => return ApiError::BadRequest(why).into_response(),
    };
    let Some(snapshot) = api.core.snapshot().await else {
        return ApiError::Unavailable.into_response();
    };
    let next = snapshot
        .state
        .configs
        .get(&app)
        .map_or(1, |r| r.revision + 1);
    let revision = match build_revision(&app, next, &request, api.config_key.as_deref()) {
        Ok(revision) => revision,
        Err(e) => return ApiError::BadRequest(e.to_string()).into_response(),
    };
    let view = ConfigView::of(&revision);
    match api
        .core
        .submit(acting(actor, Input::SetConfig { revision }))
        .await
    {
        Ok(_) => Json(view).into_response(),
        Err(super::core::InputError::Refused(refusal)) => {
            ApiError::Refused(refusal).into_response()
        }
        Err(super::core::InputError::Stopped) => ApiError::Unavailable.into_response(),
    }
}

/// The request in `body`, files decoded; the error names the field.
fn parse_request(body: &[u8]) -> Result<ConfigRequest, String> {
    // An object, as documented: serde would also read a struct from an
    // array of its fields in order.
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("malformed configuration: {e}"))?;
    if !value.is_object() {
        return Err("malformed configuration: a JSON object is expected".into());
    }
    let wire: ConfigSetRequest =
        serde_json::from_value(value).map_err(|e| format!("malformed configuration: {e}"))?;
    let mut request = ConfigRequest {
        env: wire.env,
        ..ConfigRequest::default()
    };
    for name in wire.secrets {
        if !request.env.contains_key(&name) {
            return Err(format!("field `secrets`: {name:?} is not a key of `env`"));
        }
        request.secrets.insert(name);
    }
    for (name, text) in wire.files {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(|e| format!("field `files`: {name:?} is not base64: {e}"))?;
        request.files.insert(name, bytes);
    }
    Ok(request)
}
