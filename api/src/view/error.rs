//! The API's one error shape, [`ErrorBody`] (`{"error": "..."}`), and why
//! the view layer refuses a query ([`QueryError`]). The controller's
//! typed `ApiError` (its HTTP status, its answer) wraps it.

use serde::{Deserialize, Serialize};

/// The body of every error answer, on every route.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, utoipa::ToSchema)]
pub struct ErrorBody {
    /// What was wrong, naming the field or parameter when one is to blame
    /// (``field `slots`: ...``, ``parameter `limit`: ...``).
    pub error: String,
}

/// Why the view layer refused a query: what the HTTP layer answers as
/// 400 or 404, with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// Malformed query: the message names the parameter (400).
    #[error("{0}")]
    BadRequest(String),
    /// What the query names does not exist (404).
    #[error("{0}")]
    NotFound(String),
}

impl From<String> for QueryError {
    /// A message naming the parameter at fault: a 400.
    fn from(message: String) -> QueryError {
        QueryError::BadRequest(message)
    }
}
