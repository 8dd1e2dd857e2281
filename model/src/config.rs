//! Configuration as its own release layer (issue #24 item 1): what the log
//! records of a configuration revision and what a rollout deploys.
//!
//! A *deployment* is a release's code plus one configuration revision of
//! its app. The rules never look inside one: a rollout targets the
//! deployment's digest (`releases::config::deployment_digest`, the code
//! digest when the app has no configuration), so every rule, budget and
//! proof that holds for a release holds for a configuration-only change,
//! which is never a no-op because its digest differs from what serves.
//! What the model adds is that a rollout names the revision it deploys,
//! and only a revision the log recorded, with the fingerprint recorded
//! ([`crate::controller::Event::ConfigSet`]).
//!
//! Pure data: the fingerprints and the sealing of secrets are computed by
//! the runtime (the model has no hash and no cipher).

use crate::ids::Digest;
use serde::{Deserialize, Serialize};

/// Most keys (environment variables) in one configuration revision.
pub const CONFIG_KEYS_MAX: usize = 256;
/// Most files in one configuration revision.
pub const CONFIG_FILES_MAX: usize = 64;
/// Longest key or file name, in bytes.
pub const CONFIG_NAME_BYTES_MAX: usize = 128;
/// Most bytes of one revision's names, values and files together, as
/// logged (a sealed secret counts its ciphertext, nonce and fingerprint):
/// a revision is one log entry (at most 64 KiB), so with the encoding's
/// per-entry overhead ([`CONFIG_ENTRY_OVERHEAD_BYTES_MAX`]) it stays inside
/// the controller's event bound. Configuration is settings and small
/// files; anything larger belongs in the release's tree.
pub const CONFIG_BYTES_MAX: usize = 48 * 1024;
/// Most encoding bytes a key or file adds beyond what
/// [`ConfigRevision::logged_bytes`] counts (length prefixes and tags).
pub const CONFIG_ENTRY_OVERHEAD_BYTES_MAX: usize = 10;
/// Longest app name a configuration is recorded for, in bytes.
pub const CONFIG_APP_BYTES_MAX: usize = 128;
/// Most apps with a configuration: the state keeps each app's latest
/// revision whole, so this bounds it (1,024 x 48 KiB = 48 MiB at worst).
pub const CONFIG_APPS_MAX: usize = 1024;

/// A value as the log holds it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum LoggedValue {
    /// Written as given.
    Plain(String),
    /// A secret: only its ciphertext is logged (sealed by the runtime with
    /// the fleet's configuration key, which is not in the log), and a
    /// keyed fingerprint, which is all the API and the CLI ever show.
    Sealed {
        /// The cipher's nonce.
        nonce: [u8; 12],
        /// The sealed value (with its authentication tag).
        ciphertext: Vec<u8>,
        /// The keyed fingerprint of the plaintext.
        fingerprint: Digest,
    },
}

impl LoggedValue {
    /// Bytes this value adds to a revision's [`CONFIG_BYTES_MAX`].
    pub fn logged_bytes(&self) -> usize {
        match self {
            LoggedValue::Plain(text) => text.len(),
            LoggedValue::Sealed { ciphertext, .. } => ciphertext.len() + 12 + 32,
        }
    }
}

/// One configuration revision of one app, as logged.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ConfigRevision {
    /// The app (a release manifest's name) it configures.
    pub app: String,
    /// 1 for the app's first, then one more each time.
    pub revision: u64,
    /// The fingerprint of the whole revision (app, revision, every key
    /// and file; a secret by its keyed fingerprint), computed by the
    /// runtime: what the agent reports the running process was started
    /// with, and what the proof compares.
    pub fingerprint: Digest,
    /// Environment variables, sorted by name, names unique.
    pub env: Vec<(String, LoggedValue)>,
    /// Files (name, bytes), sorted by name, names unique.
    pub files: Vec<(String, Vec<u8>)>,
}

/// Why a configuration revision is refused before anything is logged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigProblem {
    /// The app name is empty or longer than [`CONFIG_APP_BYTES_MAX`].
    #[error("app name {0:?} is empty, longer than {CONFIG_APP_BYTES_MAX} bytes, or holds a control character")]
    AppName(String),
    /// More keys or files than the bounds allow.
    #[error("{count} {what}, more than the {max} a revision may hold")]
    TooMany {
        /// `keys` or `files`.
        what: &'static str,
        /// How many were given.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// A key or file name that is not allowed.
    #[error("{what} name {name:?} is not allowed: {why}")]
    Name {
        /// `key` or `file`.
        what: &'static str,
        /// The name as given.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A key or file named twice (or the list not sorted, a bug of its
    /// maker: the runtime sorts).
    #[error("{what} {name:?} is given twice or out of order")]
    Duplicate {
        /// `key` or `file`.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// The values and files are over [`CONFIG_BYTES_MAX`] together.
    #[error("the revision holds {bytes} bytes, more than {CONFIG_BYTES_MAX}")]
    TooLarge {
        /// Its size as logged.
        bytes: usize,
    },
    /// The revision is not the app's next one (another operator set one
    /// in between).
    #[error("revision {given} of {app} is not its next one ({next})")]
    NotNext {
        /// The app.
        app: String,
        /// The revision given.
        given: u64,
        /// The revision expected.
        next: u64,
    },
    /// A state over [`CONFIG_APPS_MAX`] apps with a configuration.
    #[error("{CONFIG_APPS_MAX} apps already have a configuration")]
    TooManyApps,
}

/// Why an environment variable's name is refused, or `None`: a letter or
/// `_` first, then letters, digits and `_`; never `FLEETWEFT_` (the agent's
/// own variables) or `PORT` (the route's).
pub fn key_problem(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Some("a letter or _ first, then letters, digits and _");
    }
    if name.len() > CONFIG_NAME_BYTES_MAX {
        return Some("longer than 128 bytes");
    }
    if name.starts_with("FLEETWEFT_") || name == "PORT" {
        return Some("the agent sets it (PORT, FLEETWEFT_*)");
    }
    None
}

/// Why a configuration file's name is refused, or `None`: one path
/// component of letters, digits, `.`, `-` and `_`, not `.` or `..`.
pub fn file_problem(name: &str) -> Option<&'static str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    if name.is_empty() || name == "." || name == ".." || !name.chars().all(allowed) {
        return Some("one path component of letters, digits, '.', '-' and '_'");
    }
    if name.len() > CONFIG_NAME_BYTES_MAX {
        return Some("longer than 128 bytes");
    }
    None
}

impl ConfigRevision {
    /// Checks every bound and name; the revision number is checked by the
    /// controller's step against the app's last.
    pub fn check(&self) -> Result<(), ConfigProblem> {
        // As a manifest's name: bounded, no control characters.
        let bad_app = self.app.is_empty()
            || self.app.len() > CONFIG_APP_BYTES_MAX
            || self.app.chars().any(char::is_control);
        if bad_app {
            return Err(ConfigProblem::AppName(self.app.clone()));
        }
        let too_many = |what, count, max| ConfigProblem::TooMany { what, count, max };
        if self.env.len() > CONFIG_KEYS_MAX {
            return Err(too_many("keys", self.env.len(), CONFIG_KEYS_MAX));
        }
        if self.files.len() > CONFIG_FILES_MAX {
            return Err(too_many("files", self.files.len(), CONFIG_FILES_MAX));
        }
        check_names("key", self.env.iter().map(|(k, _)| k), key_problem)?;
        check_names("file", self.files.iter().map(|(n, _)| n), file_problem)?;
        let bytes = self.logged_bytes();
        if bytes > CONFIG_BYTES_MAX {
            return Err(ConfigProblem::TooLarge { bytes });
        }
        Ok(())
    }

    /// Bytes of its names, values and files as logged.
    pub fn logged_bytes(&self) -> usize {
        let env: usize = self
            .env
            .iter()
            .map(|(k, v)| k.len() + v.logged_bytes())
            .sum();
        let files: usize = self.files.iter().map(|(n, b)| n.len() + b.len()).sum();
        env + files
    }
}

/// Names strictly increasing (sorted, unique) and each allowed.
fn check_names<'a>(
    what: &'static str,
    names: impl Iterator<Item = &'a String>,
    problem: fn(&str) -> Option<&'static str>,
) -> Result<(), ConfigProblem> {
    let mut previous: Option<&String> = None;
    for name in names {
        if let Some(why) = problem(name) {
            let name = name.clone();
            return Err(ConfigProblem::Name { what, name, why });
        }
        if previous.is_some_and(|p| p >= name) {
            let name = name.clone();
            return Err(ConfigProblem::Duplicate { what, name });
        }
        previous = Some(name);
    }
    Ok(())
}

/// What a rollout deploys besides the code: recorded right after its
/// `RolloutStarted` when the app has a configuration
/// ([`crate::controller::Event::RolloutConfigured`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Deploys {
    /// The release (code) digest; the plan's release is the deployment's
    /// digest, which covers this and the configuration.
    pub code: Digest,
    /// The app whose configuration it deploys.
    pub app: String,
    /// The revision deployed.
    pub revision: u64,
    /// That revision's fingerprint, as recorded.
    pub fingerprint: Digest,
}
