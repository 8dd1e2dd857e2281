//! The operators' API (issue #28 item 2): list them, add one, rotate a
//! credential, revoke one. Who may do which is the model's decision
//! (`model::controller::roles::required_role`): an admin adds and
//! revokes, any operator rotates its own credential. The controller issues
//! each credential (256 random bits, hex) and answers it once; the log
//! records only its SHA-256.

use super::error::{ApiError, Path};
use super::state::{acting, credential_digest, operator, Api};
use super::view::{
    words, AddOperatorRequest, CredentialReply, ErrorBody, OperatorDto, RecordedEvent, WriteReply,
};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use model::controller::{Actor, Input, Role};
use rand_core::{OsRng, RngCore};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Random bytes in an issued credential (hex-encoded: 64 characters, the
/// operator token file's format).
const CREDENTIAL_BYTES: usize = 32;

/// The operators' routes.
pub fn routes() -> OpenApiRouter<Api> {
    OpenApiRouter::new()
        .routes(routes!(list_operators, add_operator))
        .routes(routes!(rotate_credential))
        .routes(routes!(revoke_operator))
}

/// A fresh credential.
fn issue() -> String {
    let mut bytes = [0u8; CREDENTIAL_BYTES];
    OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// `GET /api/operators`: every operator recorded, revoked ones too, by
/// name (at most `OPERATORS_MAX`).
#[utoipa::path(get, path = "/api/operators", tag = "reads",
    responses((status = 200, description = "every operator recorded, by name: names and roles, never credentials", body = [OperatorDto])))]
async fn list_operators(State(api): State<Api>) -> Response {
    let operators = api.core.operators();
    let list: Vec<OperatorDto> = operators
        .iter()
        .map(|(name, record)| OperatorDto {
            name: name.clone(),
            role: words::role(record.role).to_string(),
            revoked: record.revoked,
        })
        .collect();
    Json(list).into_response()
}

/// Submit `input` as `actor`; the events in domain words.
async fn submit(api: &Api, actor: Actor, input: Input) -> Result<Vec<RecordedEvent>, ApiError> {
    use super::core::InputError;
    match api.core.submit(acting(actor, input)).await {
        Ok(events) => {
            let roster = api.core.roster();
            Ok(events
                .iter()
                .map(|(sequence, event)| RecordedEvent {
                    sequence: *sequence,
                    text: super::core::describe(&roster, event),
                })
                .collect())
        }
        Err(InputError::Refused(refusal)) => Err(ApiError::Refused(refusal)),
        Err(InputError::Stopped) => Err(ApiError::Unavailable),
    }
}

/// `POST /api/operators` (admin): record an operator and issue its
/// credential, answered once.
#[utoipa::path(post, path = "/api/operators", security(("bearer" = [])), tag = "writes",
    request_body(content = AddOperatorRequest, description = "JSON object"),
    responses(
        (status = 200, description = "recorded: the credential, shown this once", body = CredentialReply),
        (status = 400, description = "malformed request, a name not allowed, or a role that is not viewer, deployer, approver or admin; nothing recorded", body = ErrorBody),
        (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody),
        (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody),
        (status = 409, description = "the name is taken (names are never reused); nothing recorded", body = ErrorBody),
        (status = 503, description = "the controller core stopped", body = ErrorBody),
    ))]
async fn add_operator(State(api): State<Api>, headers: HeaderMap, body: Bytes) -> Response {
    let actor = match operator(&api, &headers) {
        Ok(actor) => actor,
        Err(rejection) => return rejection.into_response(),
    };
    let request: AddOperatorRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => return ApiError::BadRequest(format!("the body: {e}")).into_response(),
    };
    let Some(role) = words::parse_role(&request.role) else {
        return ApiError::BadRequest(format!(
            "field `role`: {:?} is not viewer, deployer, approver or admin",
            request.role
        ))
        .into_response();
    };
    let credential = issue();
    let input = Input::AddOperator {
        name: request.name.clone(),
        role,
        credential: credential_digest(&credential),
    };
    match submit(&api, actor, input).await {
        Ok(events) => Json(CredentialReply {
            operator: request.name,
            role: words::role(role).to_string(),
            credential,
            events,
        })
        .into_response(),
        Err(e) => e.into_response(),
    }
}

/// `POST /api/operators/{name}/rotate` (the operator itself, or an admin):
/// a new credential replaces the old one, which is refused from then on.
#[utoipa::path(post, path = "/api/operators/{name}/rotate", security(("bearer" = [])), tag = "writes",
    params(("name" = String, Path, description = "the operator's name")),
    responses(
        (status = 200, description = "rotated: the new credential, shown this once", body = CredentialReply),
        (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody),
        (status = 403, description = "the operator's role does not allow it (another operator's credential needs an admin); nothing recorded", body = ErrorBody),
        (status = 404, description = "no operator of that name; nothing recorded", body = ErrorBody),
        (status = 409, description = "that operator is revoked; nothing recorded", body = ErrorBody),
        (status = 503, description = "the controller core stopped", body = ErrorBody),
    ))]
async fn rotate_credential(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    let actor = match operator(&api, &headers) {
        Ok(actor) => actor,
        Err(rejection) => return rejection.into_response(),
    };
    let credential = issue();
    let input = Input::RotateCredential {
        name: name.clone(),
        credential: credential_digest(&credential),
    };
    match submit(&api, actor, input).await {
        Ok(events) => {
            let role = api
                .core
                .operators()
                .get(&name)
                .map_or(Role::Viewer, |r| r.role);
            Json(CredentialReply {
                operator: name,
                role: words::role(role).to_string(),
                credential,
                events,
            })
            .into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// `POST /api/operators/{name}/revoke` (admin): the operator's credential
/// is refused from the event on, also after a restart; never the last admin.
#[utoipa::path(post, path = "/api/operators/{name}/revoke", security(("bearer" = [])), tag = "writes",
    params(("name" = String, Path, description = "the operator's name")),
    responses(
        (status = 200, description = "revoked: the events recorded, in domain words", body = WriteReply),
        (status = 401, description = "missing, unknown, rotated or revoked operator credential; nothing recorded", body = ErrorBody),
        (status = 403, description = "the operator's role does not allow it: the message names the role it needs; nothing recorded", body = ErrorBody),
        (status = 404, description = "no operator of that name; nothing recorded", body = ErrorBody),
        (status = 409, description = "the last admin, or revoked already; nothing recorded", body = ErrorBody),
        (status = 503, description = "the controller core stopped", body = ErrorBody),
    ))]
async fn revoke_operator(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    let actor = match operator(&api, &headers) {
        Ok(actor) => actor,
        Err(rejection) => return rejection.into_response(),
    };
    match submit(&api, actor, Input::RevokeOperator { name }).await {
        Ok(events) => Json(WriteReply { events }).into_response(),
        Err(e) => e.into_response(),
    }
}
