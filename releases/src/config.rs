//! Configuration as its own release layer (issue #24 item 1): the
//! fingerprints, the deployment digest and the deployment document the
//! controller hands an agent.
//!
//! A *deployment* is a release's code plus one configuration revision of
//! its app; its digest is [`deployment_digest`] of the two, and is what a
//! rollout targets, what the agent's route names as its identity and what
//! the proof expects. The agent fetches the [`Deployment`] document by
//! that digest and checks [`Deployment::digest`] against it: nothing in
//! the document is trusted for its own word.
//!
//! Secrets travel in the document in the clear (inside mutual TLS) because
//! the app needs them; in the log they are sealed
//! ([`model::config::LoggedValue::Sealed`]), and everywhere they are shown
//! only their keyed fingerprint ([`secret_fingerprint`]) appears.

use model::config::{file_problem, key_problem, CONFIG_BYTES_MAX};
use model::Digest;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// Most bytes of an encoded [`Deployment`]: a revision's logged bytes
/// plus room for names and framing.
pub const DEPLOYMENT_BYTES_MAX: usize = CONFIG_BYTES_MAX + 64 * 1024;

// A document the controller may make fits what an agent accepts.
const _: () = assert!(DEPLOYMENT_BYTES_MAX as u64 <= protocol::frame::DEPLOYMENT_FRAME_BYTES_MAX);

/// An environment value as the agent receives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EnvValue {
    /// A plain value.
    Plain(String),
    /// A secret: its value (the app needs it) and its keyed fingerprint,
    /// which is what the configuration's fingerprint covers.
    Secret {
        /// The plaintext.
        value: String,
        /// [`secret_fingerprint`] of it, computed by the controller.
        fingerprint: Digest,
    },
}

impl EnvValue {
    /// The value the app gets.
    pub fn value(&self) -> &str {
        match self {
            EnvValue::Plain(v) | EnvValue::Secret { value: v, .. } => v,
        }
    }
}

/// One configuration revision of one app, opened (secrets in the clear).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Configuration {
    /// The app it configures.
    pub app: String,
    /// Its revision number (1, 2, ...).
    pub revision: u64,
    /// Environment variables, sorted by name.
    pub env: Vec<(String, EnvValue)>,
    /// Files (name, bytes), sorted by name, written under the deployment.
    pub files: Vec<(String, Vec<u8>)>,
}

/// What the fingerprint hashes: a secret by its keyed fingerprint only.
#[derive(Serialize)]
struct FingerprintInput<'a> {
    app: &'a str,
    revision: u64,
    env: Vec<(&'a str, u8, &'a [u8])>,
    files: &'a [(String, Vec<u8>)],
}

/// The fingerprint of a revision given its parts, a secret given by its
/// keyed fingerprint: what the log records, the agent reports and the
/// proof compares. It covers the revision number, so setting the same
/// values again is a new fingerprint and its rollout is not a no-op.
pub fn fingerprint_of<'a>(
    app: &'a str,
    revision: u64,
    env: impl Iterator<Item = (&'a str, FingerprintValue<'a>)>,
    files: &'a [(String, Vec<u8>)],
) -> Digest {
    let env = env
        .map(|(k, v)| match v {
            FingerprintValue::Plain(text) => (k, 0u8, text.as_bytes()),
            FingerprintValue::Secret(fp) => (k, 1u8, &fp.0[..]),
        })
        .collect();
    let input = FingerprintInput {
        app,
        revision,
        env,
        files,
    };
    // Encoding plain data into a Vec cannot fail.
    let bytes =
        bincode::serde::encode_to_vec(&input, bincode::config::standard()).unwrap_or_default();
    let mut hash = Sha256::new();
    hash.update(b"fleetweft-config-v1\0");
    hash.update(&bytes);
    Digest(hash.finalize().into())
}

/// A value as the fingerprint sees it.
#[derive(Clone, Copy, Debug)]
pub enum FingerprintValue<'a> {
    /// A plain value, by its text.
    Plain(&'a str),
    /// A secret, by its keyed fingerprint.
    Secret(&'a Digest),
}

impl Configuration {
    /// Its fingerprint ([`fingerprint_of`]).
    pub fn fingerprint(&self) -> Digest {
        let env = self.env.iter().map(|(k, v)| {
            let v = match v {
                EnvValue::Plain(text) => FingerprintValue::Plain(text),
                EnvValue::Secret { fingerprint, .. } => FingerprintValue::Secret(fingerprint),
            };
            (k.as_str(), v)
        });
        fingerprint_of(&self.app, self.revision, env, &self.files)
    }

    /// Why its names are not allowed (sorted, unique, each allowed), or
    /// `Ok`: an agent checks before it writes a file or sets a variable.
    pub fn check_names(&self) -> Result<(), String> {
        let sorted = |names: Vec<&String>| names.windows(2).all(|w| w[0] < w[1]);
        if let Some((k, why)) = self
            .env
            .iter()
            .find_map(|(k, _)| key_problem(k).map(|w| (k, w)))
        {
            return Err(format!("configuration key {k:?}: {why}"));
        }
        if let Some((n, why)) = self
            .files
            .iter()
            .find_map(|(n, _)| file_problem(n).map(|w| (n, w)))
        {
            return Err(format!("configuration file {n:?}: {why}"));
        }
        if !sorted(self.env.iter().map(|(k, _)| k).collect())
            || !sorted(self.files.iter().map(|(n, _)| n).collect())
        {
            return Err("configuration names are not sorted and unique".into());
        }
        Ok(())
    }
}

/// The digest of a deployment: code `release` with the configuration of
/// fingerprint `config`.
pub fn deployment_digest(release: Digest, config: Digest) -> Digest {
    let mut hash = Sha256::new();
    hash.update(b"fleetweft-deployment-v1\0");
    hash.update(release.0);
    hash.update(config.0);
    Digest(hash.finalize().into())
}

/// The keyed fingerprint of secret `name` of `app` with value `value`:
/// keyed with the fleet's configuration key, so a short secret cannot be
/// found by hashing guesses against a printed fingerprint.
pub fn secret_fingerprint(key: &[u8; 32], app: &str, name: &str, value: &str) -> Digest {
    let mut hash = Sha256::new();
    hash.update(b"fleetweft-secret-v1\0");
    hash.update(key);
    for part in [app, name, value] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part.as_bytes());
    }
    Digest(hash.finalize().into())
}

/// What the controller hands an agent for a deployment digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployment {
    /// The release (code) digest: staged and verified as any release.
    pub release: Digest,
    /// The configuration, opened.
    pub config: Configuration,
}

/// Why a deployment document was refused.
#[derive(Debug, thiserror::Error)]
pub enum DeploymentError {
    /// Over [`DEPLOYMENT_BYTES_MAX`].
    #[error("deployment document of {0} bytes, more than {DEPLOYMENT_BYTES_MAX}")]
    TooLarge(usize),
    /// Not a deployment document.
    #[error("deployment document undecodable: {0}")]
    Undecodable(String),
    /// Decoded, but hashes to another digest than the one asked for.
    #[error("deployment document hashes to {actual}, not {expected}")]
    WrongDigest {
        /// The digest asked for.
        expected: Digest,
        /// What the document hashes to.
        actual: Digest,
    },
    /// A name is not allowed.
    #[error("deployment document: {0}")]
    Names(String),
}

impl Deployment {
    /// Its digest: [`deployment_digest`] of its release and its
    /// configuration's fingerprint.
    pub fn digest(&self) -> Digest {
        deployment_digest(self.release, self.config.fingerprint())
    }

    /// Its bytes.
    pub fn encode(&self) -> Vec<u8> {
        bincode::serde::encode_to_vec(self, bincode::config::standard()).unwrap_or_default()
    }

    /// The document in `bytes`, checked to be the deployment `expected`.
    pub fn decode(bytes: &[u8], expected: Digest) -> Result<Deployment, DeploymentError> {
        if bytes.len() > DEPLOYMENT_BYTES_MAX {
            return Err(DeploymentError::TooLarge(bytes.len()));
        }
        let config = bincode::config::standard().with_limit::<DEPLOYMENT_BYTES_MAX>();
        let (doc, used): (Deployment, usize) = bincode::serde::decode_from_slice(bytes, config)
            .map_err(|e| DeploymentError::Undecodable(e.to_string()))?;
        if used != bytes.len() {
            return Err(DeploymentError::Undecodable(format!(
                "{} trailing bytes",
                bytes.len() - used
            )));
        }
        let actual = doc.digest();
        if actual != expected {
            return Err(DeploymentError::WrongDigest { expected, actual });
        }
        doc.config.check_names().map_err(DeploymentError::Names)?;
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Deployment {
        Deployment {
            release: Digest::repeat(7),
            config: Configuration {
                app: "hello".into(),
                revision: 2,
                env: vec![
                    ("GREETING".into(), EnvValue::Plain("hi".into())),
                    (
                        "TOKEN".into(),
                        EnvValue::Secret {
                            value: "s3cret".into(),
                            fingerprint: secret_fingerprint(&[1; 32], "hello", "TOKEN", "s3cret"),
                        },
                    ),
                ],
                files: vec![("app.toml".into(), b"level = 3\n".to_vec())],
            },
        }
    }

    #[test]
    fn a_document_decodes_only_as_its_own_digest() {
        let doc = sample();
        let bytes = doc.encode();
        assert_eq!(
            Deployment::decode(&bytes, doc.digest()).ok(),
            Some(doc.clone())
        );
        let other = Digest::repeat(9);
        assert!(matches!(
            Deployment::decode(&bytes, other),
            Err(DeploymentError::WrongDigest { .. })
        ));
        assert!(matches!(
            Deployment::decode(&bytes[..bytes.len() - 1], doc.digest()),
            Err(DeploymentError::Undecodable(_))
        ));
    }

    #[test]
    fn every_part_moves_the_fingerprint_but_a_secrets_plaintext_alone_does_not() {
        let base = sample().config;
        let fp = base.fingerprint();
        let mut changed = base.clone();
        changed.revision = 3;
        assert_ne!(changed.fingerprint(), fp, "the revision");
        let mut changed = base.clone();
        changed.env[0].1 = EnvValue::Plain("ho".into());
        assert_ne!(changed.fingerprint(), fp, "a plain value");
        let mut changed = base.clone();
        changed.files[0].1.push(b'\n');
        assert_ne!(changed.fingerprint(), fp, "a file");
        // The fingerprint covers a secret by its keyed fingerprint: the
        // plaintext is bound through it, not hashed in the clear.
        let mut changed = base.clone();
        if let EnvValue::Secret { value, .. } = &mut changed.env[1].1 {
            *value = "other".into();
        }
        assert_eq!(changed.fingerprint(), fp);
        let new_fp = secret_fingerprint(&[1; 32], "hello", "TOKEN", "other");
        if let EnvValue::Secret { fingerprint, .. } = &mut changed.env[1].1 {
            *fingerprint = new_fp;
        }
        assert_ne!(changed.fingerprint(), fp, "a secret's fingerprint");
    }

    #[test]
    fn the_deployment_digest_differs_from_its_code_and_by_configuration() {
        let code = Digest::repeat(7);
        let a = deployment_digest(code, Digest::repeat(1));
        assert_ne!(a, code);
        assert_ne!(a, deployment_digest(code, Digest::repeat(2)));
        assert_ne!(a, deployment_digest(Digest::repeat(8), Digest::repeat(1)));
    }

    #[test]
    fn a_secret_fingerprint_is_keyed_and_bound_to_its_name() {
        let a = secret_fingerprint(&[1; 32], "hello", "TOKEN", "x");
        assert_ne!(a, secret_fingerprint(&[2; 32], "hello", "TOKEN", "x"));
        assert_ne!(a, secret_fingerprint(&[1; 32], "hello", "TOKE", "Nx"));
        assert_ne!(a, secret_fingerprint(&[1; 32], "other", "TOKEN", "x"));
    }

    #[test]
    fn bad_names_are_refused_naming_them() {
        let mut doc = sample();
        doc.config.files[0].0 = "../etc".into();
        assert!(doc
            .config
            .check_names()
            .is_err_and(|e| e.contains("../etc")));
        let mut doc = sample();
        doc.config.env[0].0 = "FLEETWEFT_RELEASE".into();
        assert!(doc
            .config
            .check_names()
            .is_err_and(|e| e.contains("FLEETWEFT_RELEASE")));
        let mut doc = sample();
        doc.config.env.swap(0, 1);
        assert!(doc.config.check_names().is_err());
    }
}
