//! The typed [`ApiError`] every handler returns: its HTTP status is chosen
//! by matching the error (a controller [`Refusal`] by its variant), never
//! by reading its message; its body is the one [`ErrorBody`] shape.
//! Extractor rejections (a query string or a path that does not parse)
//! answer the same JSON through [`Query`] and [`Path`].

use api::view::{ErrorBody, QueryError};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use model::controller::Refusal;
use serde::de::DeserializeOwned;

/// Why a request was not served. Nothing was recorded.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// Malformed request: the message names the field or parameter (400).
    #[error("{0}")]
    BadRequest(String),
    /// A write without a current operator credential (401).
    #[error("missing, unknown, rotated or revoked operator credential (Authorization: Bearer)")]
    Unauthorized,
    /// What the path names does not exist (404).
    #[error("{0}")]
    NotFound(String),
    /// The request cannot be served in the current state (409), outside
    /// the core (a probe that cannot be judged, nothing presented yet).
    #[error("{0}")]
    Conflict(String),
    /// The controller core refused the input; the status follows the
    /// refusal ([`refusal_status`]).
    #[error("{0}")]
    Refused(Refusal),
    /// No route has this path (404).
    #[error("no route {0}: see /api/openapi.json")]
    NoRoute(String),
    /// The path is routed, not for this method (405).
    #[error("method not allowed on this route: see /api/openapi.json")]
    MethodNotAllowed,
    /// A body over [`super::api::UPLOAD_BYTES_MAX`] (413).
    #[error("request body too large: {0}")]
    TooLarge(String),
    /// The core stopped: the daemon is shutting down (503).
    #[error("controller core stopped")]
    Unavailable,
    /// A write reached a hot standby (503): only the leader appends. Names
    /// the leader's API URL when one is known (also in the
    /// `Fleetweft-Leader` header).
    #[error("{}", not_leader_message(.leader.as_deref()))]
    NotLeader {
        /// The leader's API URL, as it advertises it.
        leader: Option<String>,
    },
    /// A bounded resource is full (503): the message names it (the event
    /// streams open at once).
    #[error("{0}")]
    Busy(String),
    /// The controller failed to do its part (500): storage.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// Its HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::NotFound(_) | ApiError::NoRoute(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Refused(r) => refusal_status(r),
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unavailable | ApiError::Busy(_) | ApiError::NotLeader { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The body it answers.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: self.to_string(),
        }
    }
}

/// What a standby answers a write.
fn not_leader_message(leader: Option<&str>) -> String {
    match leader {
        Some(url) => format!(
            "this controller is a hot standby (it serves reads only): send writes to the leader at {url}"
        ),
        None => "this controller is a hot standby (it serves reads only) and no leader is known \
                 right now (an election may be under way): retry shortly"
            .into(),
    }
}

impl From<String> for ApiError {
    /// A message naming the field or parameter at fault: a 400.
    fn from(message: String) -> ApiError {
        ApiError::BadRequest(message)
    }
}

impl From<QueryError> for ApiError {
    /// The view layer's refusal of a query, with its message.
    fn from(e: QueryError) -> ApiError {
        match e {
            QueryError::BadRequest(message) => ApiError::BadRequest(message),
            QueryError::NotFound(message) => ApiError::NotFound(message),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status(), Json(self.body())).into_response()
    }
}

/// The HTTP status of a refusal, by its variant (no wildcard: a new
/// refusal must choose): 404 for what does not exist, 400 for input the
/// controller can never accept, 409 for what the state forbids now.
pub fn refusal_status(refusal: &Refusal) -> StatusCode {
    match refusal {
        Refusal::UnknownRollout(_) | Refusal::UnknownOp(_) | Refusal::UnknownNode(_) => {
            StatusCode::NOT_FOUND
        }
        // Who acts (issue #28 item 2): a credential the operators do not
        // know now is a 401, a role too low a 403 naming the role.
        Refusal::OperatorRequired
        | Refusal::UnknownOperator(_)
        | Refusal::OperatorRevoked(_)
        | Refusal::CredentialNotCurrent(_) => StatusCode::UNAUTHORIZED,
        Refusal::RoleRequired { .. } => StatusCode::FORBIDDEN,
        Refusal::NotAnOperatorInput | Refusal::InvalidOperator(_) => StatusCode::BAD_REQUEST,
        Refusal::OperatorNameTaken(_)
        | Refusal::LastAdmin(_)
        | Refusal::OperatorAlreadyRevoked(_) => StatusCode::CONFLICT,
        Refusal::NoSuchOperator(_) => StatusCode::NOT_FOUND,
        Refusal::RosterLimit(_)
        | Refusal::InvalidClaim(_)
        | Refusal::InvalidPeer(_)
        | Refusal::InvalidConfig(_) => StatusCode::BAD_REQUEST,
        Refusal::InvalidPlan(_)
        | Refusal::RolloutNotActive(_)
        | Refusal::AlreadyPaused(_)
        | Refusal::NotPaused(_)
        | Refusal::NotAwaitingApproval(_)
        | Refusal::OpAlreadySettled(_)
        | Refusal::ObservationContradictsResolution(_)
        | Refusal::CommitMayStillLand(_)
        | Refusal::RestoreMayStillLand(_)
        | Refusal::NothingToRollBack(_)
        | Refusal::NoBaseline(_)
        | Refusal::AlreadyRestoring(_)
        | Refusal::ObservedTooSoon { .. }
        | Refusal::NotQuarantined(_)
        | Refusal::AlreadyRevoked(_)
        | Refusal::NodeNameTaken(_)
        | Refusal::NodeRetired(_)
        | Refusal::NodeHasLiveOp { .. }
        | Refusal::PlanNodeRetired(_)
        | Refusal::OverBudget(_)
        | Refusal::NoTreeForArch { .. }
        | Refusal::ConfigNotLatest { .. } => StatusCode::CONFLICT,
    }
}

/// `axum::extract::Query` answering [`ErrorBody`] when the query string
/// does not deserialize (a repeated or mistyped parameter).
#[derive(Debug, Clone)]
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(q) => Ok(Query(q.0)),
            Err(e) => Err(ApiError::BadRequest(format!(
                "malformed query string: {}",
                e.body_text()
            ))),
        }
    }
}

/// `axum::extract::Path` answering [`ErrorBody`] when a path segment does
/// not decode.
#[derive(Debug, Clone)]
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(p) => Ok(Path(p.0)),
            Err(e) => Err(ApiError::BadRequest(format!(
                "malformed path: {}",
                e.body_text()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{OpId, RolloutId};

    /// The status follows the refusal's variant, and the body is the one
    /// shape.
    #[test]
    fn refusals_choose_their_status_by_variant() {
        let cases = [
            (Refusal::UnknownOp(OpId(4)), 404),
            (Refusal::UnknownRollout(RolloutId(1)), 404),
            (Refusal::UnknownNode("x".into()), 404),
            (Refusal::NotPaused(RolloutId(0)), 409),
            (Refusal::InvalidClaim("owner".into()), 400),
        ];
        for (refusal, code) in cases {
            let e = ApiError::Refused(refusal.clone());
            assert_eq!(e.status().as_u16(), code, "{refusal:?}");
            assert_eq!(e.body().error, refusal.to_string());
        }
        assert_eq!(ApiError::Unauthorized.status(), StatusCode::UNAUTHORIZED);
    }
}
