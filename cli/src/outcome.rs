//! What every command returns: the text to print and the exit code, or a
//! failure with its message; the exit codes and `--json`'s text. Shared by
//! [`crate::ops`] and the commands beside it (`release_upload`), so none of
//! them depends on another for these.

use api::client::ClientError;

/// Everything as hoped.
pub const EXIT_OK: u8 = 0;
/// The answer is bad news (or the controller refused the command).
pub const EXIT_BAD_NEWS: u8 = 1;
/// Usage error: bad arguments, no or a wrong token (401/403), a name the
/// controller does not know (404).
pub const EXIT_USAGE: u8 = 2;
/// What a command prints and how it exits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Text for stdout (ends with a newline when not empty).
    pub text: String,
    /// The exit code.
    pub code: u8,
}

/// A failed command: the message for stderr and the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// For stderr.
    pub message: String,
    /// The exit code.
    pub code: u8,
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        // One rule for every command: the invocation itself is wrong (no or
        // a wrong token: 401/403; a name that does not exist: 404) is usage,
        // 2. Anything else is bad news, 1: the controller refused what was
        // sent (a bundle whose signature fails is a 400, a conflicting
        // command a 409), failed (5xx), answered nonsense, or could not be
        // reached.
        let code = match &e {
            ClientError::Status {
                status: 401 | 403 | 404,
                ..
            } => EXIT_USAGE,
            _ => EXIT_BAD_NEWS,
        };
        Failure {
            message: e.to_string(),
            code,
        }
    }
}

/// A value as pretty JSON with a trailing newline (what `--json` prints).
pub fn json_text<T: serde::Serialize>(value: &T) -> String {
    let mut s = serde_json::to_string_pretty(value).unwrap_or_default();
    s.push('\n');
    s
}
