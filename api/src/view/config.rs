//! Configuration revisions as the API, the CLI and the console show them
//! (issue #24 item 1): plain values as set, a secret only by its keyed
//! fingerprint, a file by its size and SHA-256. Never a secret's value.

use model::config::{ConfigRevision, LoggedValue};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// `POST /api/configs/{app}`: the app's next configuration revision, whole
/// (what is not named is not in it).
#[derive(Serialize, Deserialize, Debug, Clone, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigSetRequest {
    /// Environment variables the app gets.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Names among `env` that are secret: sealed in the log, shown only
    /// by fingerprint.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Files the app finds in `FLEETWEFT_CONFIG_DIR`, by name, base64.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
}

/// One key of a revision.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, ToSchema)]
pub struct ConfigKeyView {
    /// The variable's name.
    pub name: String,
    /// Its value; absent for a secret.
    pub value: Option<String>,
    /// Whether it is a secret.
    pub secret: bool,
    /// A secret's keyed fingerprint (hex); absent for a plain value.
    pub fingerprint: Option<String>,
}

/// One file of a revision.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, ToSchema)]
pub struct ConfigFileView {
    /// Its name in the configuration directory.
    pub name: String,
    /// Its size.
    pub bytes: u64,
    /// SHA-256 of its bytes (hex).
    pub sha256: String,
}

/// `GET /api/configs/{app}`: the app's latest revision.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, ToSchema)]
pub struct ConfigView {
    /// The app.
    pub app: String,
    /// The revision number.
    pub revision: u64,
    /// The revision's fingerprint (hex): what a node running it reports.
    pub fingerprint: String,
    /// Its keys, by name.
    pub env: Vec<ConfigKeyView>,
    /// Its files, by name.
    pub files: Vec<ConfigFileView>,
}

impl ConfigView {
    /// The view of a logged revision.
    pub fn of(revision: &ConfigRevision) -> ConfigView {
        let env = revision
            .env
            .iter()
            .map(|(name, value)| match value {
                LoggedValue::Plain(text) => ConfigKeyView {
                    name: name.clone(),
                    value: Some(text.clone()),
                    secret: false,
                    fingerprint: None,
                },
                LoggedValue::Sealed { fingerprint, .. } => ConfigKeyView {
                    name: name.clone(),
                    value: None,
                    secret: true,
                    fingerprint: Some(fingerprint.to_hex()),
                },
            })
            .collect();
        let files = revision
            .files
            .iter()
            .map(|(name, bytes)| ConfigFileView {
                name: name.clone(),
                bytes: bytes.len() as u64,
                sha256: Sha256::digest(bytes)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect(),
            })
            .collect();
        ConfigView {
            app: revision.app.clone(),
            revision: revision.revision,
            fingerprint: revision.fingerprint.to_hex(),
            env,
            files,
        }
    }

    /// Lines for a terminal: one per key and file; a secret as
    /// `NAME (secret, fingerprint ab12…)`.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "{} configuration revision {} ({})",
            self.app,
            self.revision,
            &self.fingerprint[..12.min(self.fingerprint.len())]
        )];
        for key in &self.env {
            lines.push(match (&key.value, &key.fingerprint) {
                (Some(value), _) => format!("  {}={value}", key.name),
                (None, Some(fp)) => {
                    format!(
                        "  {} (secret, fingerprint {})",
                        key.name,
                        &fp[..12.min(fp.len())]
                    )
                }
                (None, None) => format!("  {} (secret)", key.name),
            });
        }
        for file in &self.files {
            let sha = &file.sha256[..12.min(file.sha256.len())];
            lines.push(format!(
                "  file {} ({} bytes, sha256 {sha})",
                file.name, file.bytes
            ));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::Digest;

    #[test]
    fn a_secret_is_shown_by_its_fingerprint_never_its_value() {
        let revision = ConfigRevision {
            app: "hello".into(),
            revision: 3,
            fingerprint: Digest::repeat(0xab),
            env: vec![
                ("GREETING".into(), LoggedValue::Plain("hi".into())),
                (
                    "TOKEN".into(),
                    LoggedValue::Sealed {
                        nonce: [1; 12],
                        ciphertext: b"sealed-bytes".to_vec(),
                        fingerprint: Digest::repeat(0xcd),
                    },
                ),
            ],
            files: vec![("app.toml".into(), b"x".to_vec())],
        };
        let view = ConfigView::of(&revision);
        let json = serde_json::to_string(&view).expect("json");
        assert!(!json.contains("sealed-bytes"), "{json}");
        assert_eq!(view.env[1].value, None);
        assert_eq!(view.env[1].fingerprint.as_deref(), Some(&*"cd".repeat(32)));
        let text = view.lines().join("\n");
        assert!(text.contains("GREETING=hi"), "{text}");
        assert!(
            text.contains("TOKEN (secret, fingerprint cdcdcdcdcdcd)"),
            "{text}"
        );
        assert!(
            text.contains("file app.toml (1 bytes, sha256 2d711642b726)"),
            "{text}"
        );
    }
}
