//! TLS to etcd: which CA signs the members' certificates and, for mutual
//! TLS (`--client-cert-auth` on the members), this client's certificate.
//!
//! The TLS stack is etcd-client's `tls` feature: tonic's rustls 0.23 with
//! the ring provider, the same rustls and provider as the project's QUIC
//! links (no OpenSSL). Only the configured CA is trusted (no system roots),
//! and the member's certificate must name the host or IP of its endpoint.

use std::path::{Path, PathBuf};

use etcd_client::{Certificate, Identity, TlsOptions};

use super::storage::StorageError;

/// TLS settings of an etcd log ([`EtcdConfig::tls`](super::EtcdConfig)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdTls {
    /// PEM file of the CA certificate(s) that sign the members'
    /// certificates (`[storage] ca_file`, `--ca-file`).
    pub ca_file: PathBuf,
    /// PEM client certificate for mutual TLS (`cert_file`, `--cert-file`);
    /// with `key_file`.
    pub cert_file: Option<PathBuf>,
    /// PEM private key of `cert_file` (`key_file`, `--key-file`).
    pub key_file: Option<PathBuf>,
}

/// The PEM armour a certificate file must hold.
const PEM_CERTIFICATE: &str = "-----BEGIN CERTIFICATE-----";
/// The end of the PEM armour of any private key (PKCS#8, RSA, EC).
const PEM_PRIVATE_KEY: &str = "PRIVATE KEY-----";

impl EtcdTls {
    /// Refuses a half-configured client identity or an unreadable or
    /// non-PEM file, naming the setting (`ca_file`, `cert_file`,
    /// `key_file`, as the daemon's `[storage]` keys and the CLI's flags).
    pub fn validate(&self) -> Result<(), StorageError> {
        match (&self.cert_file, &self.key_file) {
            (Some(_), None) => {
                return Err(bad(
                    "`key_file` (--key-file) is missing: `cert_file` needs the key of its certificate",
                ))
            }
            (None, Some(_)) => {
                return Err(bad(
                    "`cert_file` (--cert-file) is missing: `key_file` is only used with a client certificate",
                ))
            }
            _ => {}
        }
        self.load().map(|_| ())
    }

    /// Reads the files into etcd-client's TLS options.
    pub(super) fn load(&self) -> Result<TlsOptions, StorageError> {
        let ca = read_pem("ca_file", &self.ca_file, PEM_CERTIFICATE)?;
        let mut options = TlsOptions::new().ca_certificate(Certificate::from_pem(ca));
        if let (Some(cert_file), Some(key_file)) = (&self.cert_file, &self.key_file) {
            let cert = read_pem("cert_file", cert_file, PEM_CERTIFICATE)?;
            let key = read_pem("key_file", key_file, PEM_PRIVATE_KEY)?;
            options = options.identity(Identity::from_pem(cert, key));
        }
        Ok(options)
    }
}

fn bad(detail: &str) -> StorageError {
    StorageError::EtcdConfig(format!("TLS: {detail}"))
}

/// The file at `path` (setting `key`), which must contain `armour`.
fn read_pem(key: &str, path: &Path, armour: &str) -> Result<String, StorageError> {
    let flag = key.replace('_', "-");
    let text = std::fs::read_to_string(path).map_err(|err| {
        StorageError::EtcdConfig(format!(
            "TLS: `{key}` (--{flag}) {}: cannot read it: {err}",
            path.display()
        ))
    })?;
    if !text.contains(armour) {
        return Err(StorageError::EtcdConfig(format!(
            "TLS: `{key}` (--{flag}) {}: not a PEM file holding `{armour}`",
            path.display()
        )));
    }
    Ok(text)
}
