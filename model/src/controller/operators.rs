//! Named operators with roles (issue #28 item 2): who may do what, decided
//! once, here.
//!
//! An operator has a name, a [`Role`] and one credential, recorded by its
//! SHA-256 digest only (the secret is shown once, when issued, and never
//! logged). Operators are added, their credentials rotated and revoked by
//! events, so a standby and a restart know them exactly as the leader did,
//! and a revoked credential is refused from the event that revoked it on.
//!
//! An operator's input reaches the core as [`super::Input::Acting`]: the
//! actor and the input. `step` checks the actor (recorded, credential
//! current, not revoked) and its role against [`super::roles::required_role`], and
//! records [`super::Event::Acted`] ahead of the input's own events, so every
//! operator event in the log names who did it. Once one operator is
//! recorded, an operator input that comes without an actor is refused
//! ([`super::Refusal::OperatorRequired`]); before that (a log written
//! before operators existed, a test) the rules are the old ones, and the
//! first operator recorded must be an admin (the bootstrap).

use crate::ids::Digest;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Most operators ever recorded (revoked ones count: a name is never
/// reused, so the log's attributions stay unambiguous).
pub const OPERATORS_MAX: usize = 1_024;
/// Longest operator name, in bytes.
pub const OPERATOR_NAME_BYTES_MAX: usize = 64;

/// What an operator may do. Each role may do everything the roles below
/// it may.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
pub enum Role {
    /// Reads, and rotates its own credential.
    #[default]
    Viewer,
    /// Starts, pauses and resumes rollouts, records configurations, probes
    /// nodes, uploads releases.
    Deployer,
    /// Approves gates, resolves and claims ops, orders rollbacks.
    Approver,
    /// Enrolls, labels, retires, releases nodes, revokes certificates,
    /// deletes releases, and manages operators.
    Admin,
}

impl Role {
    /// Every role, lowest first.
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Deployer, Role::Approver, Role::Admin];
}

/// Who an input or a batch of events comes from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Actor {
    /// A recorded operator, with the digest of the credential it presented.
    Operator {
        /// The operator's name.
        name: String,
        /// SHA-256 of the credential presented.
        credential: Digest,
    },
    /// The controller's own configuration file: it may only enroll the
    /// nodes of its `[[nodes]]` table.
    ControllerConfig,
}

/// Who did it, as the log records it ([`super::Event::Acted`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ActedBy {
    /// The operator of that name.
    Operator(String),
    /// The controller's configuration file (`[[nodes]]`).
    ControllerConfig,
}

impl fmt::Display for ActedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ActedBy::Operator(name) => write!(f, "operator {name}"),
            ActedBy::ControllerConfig => f.write_str("controller.toml"),
        }
    }
}

/// One recorded operator.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OperatorRecord {
    /// What it may do.
    pub role: Role,
    /// SHA-256 of its current credential.
    pub credential: Digest,
    /// Revoked: its credential is refused; the name stays taken.
    pub revoked: bool,
}

/// Every operator ever recorded, by name, and an index from a current
/// credential's digest to its operator. Persistent maps, like the rest of
/// the state.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Operators {
    by_name: imbl::OrdMap<String, OperatorRecord>,
    by_credential: imbl::OrdMap<Digest, String>,
}

impl Operators {
    /// No operator recorded yet: the rules before operators apply.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// How many operators were ever recorded.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// The operator of this name, revoked or not.
    pub fn get(&self, name: &str) -> Option<&OperatorRecord> {
        self.by_name.get(name)
    }

    /// The operator whose current, unrevoked credential has this digest.
    pub fn by_credential(&self, credential: &Digest) -> Option<(&str, &OperatorRecord)> {
        let name = self.by_credential.get(credential)?;
        let record = self.by_name.get(name)?;
        Some((name.as_str(), record))
    }

    /// Every operator, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &OperatorRecord)> {
        self.by_name.iter()
    }

    /// Admins not revoked.
    pub fn active_admins(&self) -> usize {
        self.by_name
            .values()
            .filter(|r| r.role == Role::Admin && !r.revoked)
            .count()
    }

    /// `apply` of `OperatorAdded`.
    pub(super) fn add(&mut self, name: &str, role: Role, credential: Digest) {
        assert!(self.get(name).is_none(), "operator {name} added twice");
        let record = OperatorRecord {
            role,
            credential,
            revoked: false,
        };
        self.by_name.insert(name.to_string(), record);
        self.by_credential.insert(credential, name.to_string());
    }

    /// `apply` of `CredentialRotated`.
    pub(super) fn rotate(&mut self, name: &str, credential: Digest) {
        let record = self
            .by_name
            .get_mut(name)
            .unwrap_or_else(|| panic!("rotating unknown operator {name}"));
        assert!(!record.revoked, "rotating revoked operator {name}");
        let old = std::mem::replace(&mut record.credential, credential);
        self.by_credential.remove(&old);
        self.by_credential.insert(credential, name.to_string());
    }

    /// `apply` of `OperatorRevoked`.
    pub(super) fn revoke(&mut self, name: &str) {
        let record = self
            .by_name
            .get_mut(name)
            .unwrap_or_else(|| panic!("revoking unknown operator {name}"));
        assert!(!record.revoked, "operator {name} revoked twice");
        record.revoked = true;
        let credential = record.credential;
        self.by_credential.remove(&credential);
    }
}

/// Why an operator name cannot be recorded, or `None`: 1 to
/// [`OPERATOR_NAME_BYTES_MAX`] bytes of `[a-z0-9._-]`, starting with a
/// letter or digit.
pub fn invalid_name(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > OPERATOR_NAME_BYTES_MAX {
        return Some(format!(
            "an operator name has 1 to {OPERATOR_NAME_BYTES_MAX} bytes, {:?} has {}",
            shown(name),
            name.len()
        ));
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c);
    let first_ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !first_ok || !name.chars().all(allowed) {
        return Some(format!(
            "an operator name is [a-z0-9._-], starting with a letter or digit: {:?}",
            shown(name)
        ));
    }
    None
}

/// At most the first [`OPERATOR_NAME_BYTES_MAX`] characters of a name, for
/// a refusal's text: a refused name may be any length.
fn shown(name: &str) -> String {
    name.chars().take(OPERATOR_NAME_BYTES_MAX).collect()
}
