//! Configuration as its own release layer (issue #24 item 1), the
//! controller's part: sealing secrets before they reach the log, building
//! a revision from what an operator sent, and the deployment documents
//! agents fetch.
//!
//! Secrets are *encrypted in the log*, not kept out of it: the log is
//! what a hot standby replays and what a backup restores, so a secret kept
//! elsewhere would be lost on a takeover or a restore while the revision
//! that names it survives. Each secret is sealed with ChaCha20-Poly1305
//! under the fleet's configuration key (a file beside the PKI, never in
//! the log; every controller of a fleet holds the same one), with a random
//! nonce and the app, the key's name and the revision as associated data,
//! so a sealed value cannot be moved to another key or revision. The API
//! and the CLI show a secret only by its keyed fingerprint.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use model::config::{ConfigRevision, Deploys, LoggedValue};
use model::controller::ControllerState;
use model::Digest;
use rand_core::{OsRng, RngCore};
use releases::config::{
    deployment_digest, fingerprint_of, secret_fingerprint, Configuration, Deployment, EnvValue,
    FingerprintValue,
};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, RwLock};

/// Bytes of the configuration key.
pub const CONFIG_KEY_BYTES: usize = 32;
/// Deployment documents kept per app for agents to fetch: the latest few
/// rollouts' (a newer revision or code replaces the oldest).
pub const DEPLOYMENTS_PER_APP_MAX: usize = 4;

/// Why configuration work failed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The key file could not be read or is not 64 hex characters.
    #[error("configuration key {path}: {why}")]
    Key {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// A secret was given but the controller has no key.
    #[error("secret {0:?} given but the controller has no configuration key (tls.config_key, created by `fleetweft pki init`): refusing to log it in the clear")]
    NoKey(String),
    /// A sealed value did not open (another key, or damaged).
    #[error("secret {name:?} of {app} revision {revision} does not open with this controller's configuration key")]
    Unseal {
        /// The app.
        app: String,
        /// The key's name.
        name: String,
        /// The revision.
        revision: u64,
    },
}

/// The fleet's configuration key.
#[derive(Clone)]
pub struct ConfigKey([u8; CONFIG_KEY_BYTES]);

impl std::fmt::Debug for ConfigKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConfigKey(..)")
    }
}

impl ConfigKey {
    /// The key in `path` (64 hex characters, whitespace around ignored);
    /// `None` when the file does not exist.
    pub fn load(path: &Path) -> Result<Option<ConfigKey>, ConfigError> {
        let bad = |why: String| ConfigError::Key {
            path: path.display().to_string(),
            why,
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(bad(e.to_string())),
        };
        let bytes = hex::decode(text.trim()).map_err(|e| bad(e.to_string()))?;
        let key: [u8; CONFIG_KEY_BYTES] = bytes
            .try_into()
            .map_err(|_| bad(format!("not {} hex characters", 2 * CONFIG_KEY_BYTES)))?;
        Ok(Some(ConfigKey(key)))
    }

    /// A key from its bytes (tests, `pki init`).
    pub fn from_bytes(bytes: [u8; CONFIG_KEY_BYTES]) -> ConfigKey {
        ConfigKey(bytes)
    }

    fn cipher(&self) -> ChaCha20Poly1305 {
        ChaCha20Poly1305::new(Key::from_slice(&self.0))
    }
}

/// The associated data binding a sealed value to its place.
fn aad(app: &str, name: &str, revision: u64) -> Vec<u8> {
    let mut aad = Vec::new();
    for part in [app.as_bytes(), name.as_bytes()] {
        aad.extend_from_slice(&(part.len() as u64).to_le_bytes());
        aad.extend_from_slice(part);
    }
    aad.extend_from_slice(&revision.to_le_bytes());
    aad
}

/// Seals `value`, secret `name` of `app`'s `revision`.
pub fn seal(key: &ConfigKey, app: &str, name: &str, revision: u64, value: &str) -> LoggedValue {
    let mut nonce = [0u8; 12];
    OsRng.fill_bytes(&mut nonce);
    let aad = aad(app, name, revision);
    let payload = Payload {
        msg: value.as_bytes(),
        aad: &aad,
    };
    // Encrypting into a Vec fails only for a message over 256 GiB.
    let ciphertext = key
        .cipher()
        .encrypt(Nonce::from_slice(&nonce), payload)
        .unwrap_or_default();
    LoggedValue::Sealed {
        nonce,
        ciphertext,
        fingerprint: secret_fingerprint(&key.0, app, name, value),
    }
}

/// Opens a sealed value of `revision` (whose app it is).
fn open(
    key: &ConfigKey,
    revision: &ConfigRevision,
    name: &str,
    nonce: &[u8; 12],
    ciphertext: &[u8],
) -> Result<String, ConfigError> {
    let unseal = || ConfigError::Unseal {
        app: revision.app.clone(),
        name: name.to_string(),
        revision: revision.revision,
    };
    let aad = aad(&revision.app, name, revision.revision);
    let payload = Payload {
        msg: ciphertext,
        aad: &aad,
    };
    let plain = key
        .cipher()
        .decrypt(Nonce::from_slice(nonce), payload)
        .map_err(|_| unseal())?;
    String::from_utf8(plain).map_err(|_| unseal())
}

/// What an operator asks to set: every value, which of them are secret,
/// and the files.
#[derive(Clone, Debug, Default)]
pub struct ConfigRequest {
    /// Environment variables.
    pub env: BTreeMap<String, String>,
    /// Names among `env` that are secret.
    pub secrets: std::collections::BTreeSet<String>,
    /// Files by name.
    pub files: BTreeMap<String, Vec<u8>>,
}

/// The revision `revision` of `app` that `request` makes: secrets sealed,
/// the fingerprint computed. The model checks bounds and names.
pub fn build_revision(
    app: &str,
    revision: u64,
    request: &ConfigRequest,
    key: Option<&ConfigKey>,
) -> Result<ConfigRevision, ConfigError> {
    let mut env = Vec::with_capacity(request.env.len());
    for (name, value) in &request.env {
        let logged = if request.secrets.contains(name) {
            let key = key.ok_or_else(|| ConfigError::NoKey(name.clone()))?;
            seal(key, app, name, revision, value)
        } else {
            LoggedValue::Plain(value.clone())
        };
        env.push((name.clone(), logged));
    }
    let files: Vec<(String, Vec<u8>)> = request
        .files
        .iter()
        .map(|(n, b)| (n.clone(), b.clone()))
        .collect();
    let fingerprint = fingerprint_of(app, revision, fingerprint_values(&env), &files);
    Ok(ConfigRevision {
        app: app.to_string(),
        revision,
        fingerprint,
        env,
        files,
    })
}

/// The values as the fingerprint sees them (a secret by its fingerprint).
fn fingerprint_values(
    env: &[(String, LoggedValue)],
) -> impl Iterator<Item = (&str, FingerprintValue<'_>)> {
    env.iter().map(|(k, v)| {
        let v = match v {
            LoggedValue::Plain(text) => FingerprintValue::Plain(text),
            LoggedValue::Sealed { fingerprint, .. } => FingerprintValue::Secret(fingerprint),
        };
        (k.as_str(), v)
    })
}

/// The deployment of code `code` with `revision`, secrets opened: what an
/// agent fetches.
pub fn deployment(
    code: Digest,
    revision: &ConfigRevision,
    key: Option<&ConfigKey>,
) -> Result<Deployment, ConfigError> {
    let mut env = Vec::with_capacity(revision.env.len());
    for (name, value) in &revision.env {
        let value = match value {
            LoggedValue::Plain(text) => EnvValue::Plain(text.clone()),
            LoggedValue::Sealed {
                nonce,
                ciphertext,
                fingerprint,
            } => {
                let key = key.ok_or_else(|| ConfigError::NoKey(name.clone()))?;
                EnvValue::Secret {
                    value: open(key, revision, name, nonce, ciphertext)?,
                    fingerprint: *fingerprint,
                }
            }
        };
        env.push((name.clone(), value));
    }
    let config = Configuration {
        app: revision.app.clone(),
        revision: revision.revision,
        env,
        files: revision.files.clone(),
    };
    Ok(Deployment {
        release: code,
        config,
    })
}

/// What a rollout of `code` of `app` deploys now: the app's latest
/// recorded revision, and the deployment digest the plan names; `None`
/// when the app has no configuration (the plan names the code).
pub fn deploys_for(state: &ControllerState, app: &str, code: Digest) -> Option<(Deploys, Digest)> {
    let revision = state.configs.get(app)?;
    let deploys = Deploys {
        code,
        app: app.to_string(),
        revision: revision.revision,
        fingerprint: revision.fingerprint,
    };
    Some((deploys, deployment_digest(code, revision.fingerprint)))
}

/// The deployment documents agents may fetch, by deployment digest: those
/// of the latest [`DEPLOYMENTS_PER_APP_MAX`] rollouts of each app that
/// deploy its latest revision. Filled by the core as it folds
/// `RolloutConfigured`, read by the agents' streams.
#[derive(Default)]
pub struct Deployments {
    inner: RwLock<DeploymentsInner>,
}

#[derive(Default)]
struct DeploymentsInner {
    documents: HashMap<Digest, Arc<Vec<u8>>>,
    /// Each held deployment's code digest.
    code: HashMap<Digest, Digest>,
    /// Per app, its documents' digests, oldest first.
    by_app: HashMap<String, Vec<Digest>>,
}

impl Deployments {
    /// The document of deployment `digest`, if held.
    pub fn get(&self, digest: Digest) -> Option<Arc<Vec<u8>>> {
        let inner = self.inner.read().unwrap_or_else(|p| p.into_inner());
        inner.documents.get(&digest).cloned()
    }

    /// The code digest of deployment `digest`, if held: what its version
    /// and probe spec are read from.
    pub fn code_of(&self, digest: Digest) -> Option<Digest> {
        let inner = self.inner.read().unwrap_or_else(|p| p.into_inner());
        inner.code.get(&digest).copied()
    }

    /// Makes and keeps the document `deploys` names, when it is its app's
    /// latest revision in `state` (an older one is no longer deployable).
    pub fn note(&self, state: &ControllerState, deploys: &Deploys, key: Option<&ConfigKey>) {
        let Some(revision) = state.configs.get(&deploys.app) else {
            return;
        };
        if (revision.revision, revision.fingerprint) != (deploys.revision, deploys.fingerprint) {
            return;
        }
        let doc = match deployment(deploys.code, revision, key) {
            Ok(doc) => doc,
            Err(e) => {
                tracing::error!(error = %e, "cannot make the deployment document; agents will be told it is missing");
                return;
            }
        };
        let digest = doc.digest();
        let mut inner = self.inner.write().unwrap_or_else(|p| p.into_inner());
        let inner = &mut *inner;
        let list = inner.by_app.entry(deploys.app.clone()).or_default();
        if !list.contains(&digest) {
            list.push(digest);
            inner.documents.insert(digest, Arc::new(doc.encode()));
            inner.code.insert(digest, deploys.code);
        }
        while list.len() > DEPLOYMENTS_PER_APP_MAX {
            let old = list.remove(0);
            inner.documents.remove(&old);
            inner.code.remove(&old);
        }
    }

    /// Rebuilt from `state` at start: the rollouts still active or
    /// intended for some node (bounded by the fleet, never by history).
    pub fn rebuild(&self, state: &ControllerState, key: Option<&ConfigKey>) {
        let mut ids: Vec<_> = state
            .intended
            .values()
            .copied()
            .chain(state.active)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            if let Some(deploys) = state.rollout(id).and_then(|r| r.deploys.clone()) {
                self.note(state, &deploys, key);
            }
        }
    }
}

/// Keeps `deployments` following the log: rebuilt from the state at
/// start (and after falling behind the event feed), and each
/// `RolloutConfigured` made into its document once durable. Its own task:
/// opening secrets never holds up the core.
pub fn follow(
    core: super::core::CoreHandle,
    deployments: Arc<Deployments>,
    key: Option<Arc<ConfigKey>>,
) {
    use model::controller::Event;
    use tokio::sync::broadcast::error::RecvError;
    let mut events = core.subscribe();
    tokio::spawn(async move {
        let key = key.as_deref();
        if let Some(snapshot) = core.snapshot().await {
            deployments.rebuild(&snapshot.state, key);
        }
        loop {
            match events.recv().await {
                Ok(entry) => {
                    let Event::RolloutConfigured { deploys, .. } = &entry.1 else {
                        continue;
                    };
                    if let Some(snapshot) = core.snapshot().await {
                        deployments.note(&snapshot.state, deploys, key);
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    if let Some(snapshot) = core.snapshot().await {
                        deployments.rebuild(&snapshot.state, key);
                    }
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ConfigRequest {
        let mut r = ConfigRequest::default();
        r.env.insert("GREETING".into(), "hi".into());
        r.env.insert("TOKEN".into(), "s3cret".into());
        r.secrets.insert("TOKEN".into());
        r.files.insert("app.toml".into(), b"level = 3\n".to_vec());
        r
    }

    #[test]
    fn a_secret_is_sealed_in_the_revision_and_opens_only_in_its_place() {
        let key = ConfigKey::from_bytes([5; 32]);
        let rev = build_revision("hello", 1, &request(), Some(&key)).expect("builds");
        let logged = format!("{rev:?}");
        assert!(!logged.contains("s3cret"), "{logged}");
        assert!(logged.contains("hi"));
        let doc = deployment(Digest::repeat(1), &rev, Some(&key)).expect("opens");
        assert_eq!(doc.config.env[1].1.value(), "s3cret");
        // The agent's fingerprint of the opened document is the logged one.
        assert_eq!(doc.config.fingerprint(), rev.fingerprint);
        // Another key, or the value moved to another revision, does not open.
        let other = ConfigKey::from_bytes([6; 32]);
        assert!(matches!(
            deployment(Digest::repeat(1), &rev, Some(&other)),
            Err(ConfigError::Unseal { .. })
        ));
        let mut moved = rev.clone();
        moved.revision = 2;
        assert!(deployment(Digest::repeat(1), &moved, Some(&key)).is_err());
    }

    #[test]
    fn a_secret_without_a_key_is_refused_not_logged_in_the_clear() {
        let refused = build_revision("hello", 1, &request(), None);
        assert!(matches!(refused, Err(ConfigError::NoKey(name)) if name == "TOKEN"));
        let mut plain = request();
        plain.secrets.clear();
        assert!(build_revision("hello", 1, &plain, None).is_ok());
    }

    #[test]
    fn a_key_file_must_be_64_hex_characters() {
        let dir = std::env::temp_dir().join(format!("fw-config-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("config-key");
        let _ = std::fs::remove_file(&path);
        assert!(matches!(ConfigKey::load(&path), Ok(None)));
        std::fs::write(&path, "abcd\n").expect("write");
        let bad = ConfigKey::load(&path).expect_err("short");
        assert!(bad.to_string().contains("config-key"), "{bad}");
        std::fs::write(&path, format!("{}\n", "ab".repeat(32))).expect("write");
        assert!(matches!(ConfigKey::load(&path), Ok(Some(_))));
    }
}
