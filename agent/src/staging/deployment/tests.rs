use super::*;
use crate::staging::{self, BUNDLE_FILE};
use model::platform::Arch;
use model::ArtifactRead;
use protocol::bundle::{self, ManifestFields, ProbeSpec};
use releases::config::{secret_fingerprint, Configuration, EnvValue};

pub(crate) fn signed(signing: &ed25519_dalek::SigningKey, app: &[u8]) -> Vec<u8> {
    bundle::sign(
        signing,
        app,
        ManifestFields {
            name: "hello".into(),
            version: "v1".into(),
            app_file_name: "app.py".into(),
            run: vec!["python3".into(), "app.py".into()],
            probe: ProbeSpec {
                path: "/".into(),
                expect_status: 200,
                expect_body: "hi".into(),
                expect_json: None,
            },
        },
    )
    .expect("sign")
}

pub(crate) fn document(code: Digest, revision: u64) -> Deployment {
    Deployment {
        release: code,
        config: Configuration {
            app: "hello".into(),
            revision,
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

/// A data directory with one release installed and a deployment of it.
pub(crate) struct Fixture {
    dir: tempfile::TempDir,
    pub(crate) key: ed25519_dalek::VerifyingKey,
    pub(crate) signing: ed25519_dalek::SigningKey,
    pub(crate) code: Digest,
    pub(crate) doc: Deployment,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let (signing, key) = bundle::keygen();
        let bytes = signed(&signing, b"print('v1')");
        let code = bundle::bundle_digest(&bytes);
        staging::install(dir.path(), &key, code, &bytes).expect("install the code");
        let doc = document(code, 1);
        install(dir.path(), doc.digest(), &doc.encode()).expect("install the deployment");
        Fixture {
            dir,
            key,
            signing,
            code,
            doc,
        }
    }

    pub(crate) fn data(&self) -> &Path {
        self.dir.path()
    }

    fn read_back(&self) -> ArtifactRead {
        staging::read_back(self.data(), &self.key, Arch::current(), self.doc.digest())
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("meta").permissions().mode() & 0o777
}

#[test]
fn install_writes_the_document_private_and_the_files_read_only() {
    let f = Fixture::new();
    let d = f.doc.digest();
    let dir = deployment_dir(f.data(), d);
    assert_eq!(mode(&dir.join(DOCUMENT_FILE)), 0o600, "secrets at rest");
    let config = config_dir(f.data(), d);
    assert_eq!(mode(&config), 0o555);
    assert_eq!(mode(&config.join("app.toml")), 0o444);
    assert_eq!(
        std::fs::read(config.join("app.toml")).expect("file"),
        b"level = 3\n"
    );
    // Nothing left under a temporary name.
    let names: Vec<_> = std::fs::read_dir(f.data().join(DEPLOYMENTS_DIR))
        .expect("list")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from(d.to_hex())]);
    // Installed again: the same, no error.
    install(f.data(), d, &f.doc.encode()).expect("again");
}

#[test]
fn a_document_for_another_digest_is_refused_permanently_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let doc = document(Digest::repeat(7), 1);
    let asked = Digest::repeat(9);
    let e = install(dir.path(), asked, &doc.encode()).expect_err("wrong digest");
    assert!(e.permanent());
    assert!(e.to_string().contains(&asked.to_string()), "{e}");
    assert!(!is_installed(dir.path(), asked), "nothing written");
    let e = install(dir.path(), asked, b"not a document").expect_err("garbage");
    assert!(matches!(e, StageError::DeploymentRefused { .. }) && e.permanent());
}

/// Loaded back (as after a restart): named by the deployment, running
/// the code's manifest, with the configuration's environment; a
/// configuration file changed on disk is rewritten from the document.
#[test]
fn load_brings_back_the_deployment_over_its_code() {
    let f = Fixture::new();
    let d = f.doc.digest();
    let file = config_dir(f.data(), d).join("app.toml");
    let config = config_dir(f.data(), d);
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::remove_file(&file).expect("remove");
    std::fs::write(&file, b"level = 9\n").expect("alter");
    let release = staging::load(f.data(), &f.key, Arch::current(), d).expect("load");
    assert_eq!((release.digest, release.code), (d, f.code));
    assert_eq!(
        release.run,
        vec!["python3".to_string(), "app.py".to_string()]
    );
    assert_eq!(release.dir, staging::release_dir(f.data(), f.code));
    assert_eq!(std::fs::read(&file).expect("file"), b"level = 3\n");
    assert_eq!(mode(&config), 0o555);
    let env = release.config_env();
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(get("GREETING").as_deref(), Some("hi"));
    assert_eq!(get("TOKEN").as_deref(), Some("s3cret"));
    assert_eq!(
        get("FLEETWEFT_CONFIG_FINGERPRINT"),
        Some(f.doc.config.fingerprint().to_hex())
    );
    assert_eq!(get("FLEETWEFT_DEPLOYMENT"), Some(d.to_hex()));
    assert_eq!(
        get("FLEETWEFT_CONFIG_DIR"),
        Some(config.to_string_lossy().into_owned())
    );
    // The secret's value never reaches a log line through Debug.
    assert!(!format!("{release:?}").contains("s3cret"));
    // A plain release adds nothing.
    let plain = staging::load(f.data(), &f.key, Arch::current(), f.code).expect("code");
    assert!(plain.config_env().is_empty() && plain.configured.is_none());
}

#[test]
fn observe_tells_a_deployment_absent_good_or_unknown() {
    let f = Fixture::new();
    let other = document(f.code, 2);
    assert!(matches!(
        staging::observe(f.data(), &f.key, Arch::current(), other.digest()),
        staging::Installed::Absent
    ));
    let d = f.doc.digest();
    assert!(matches!(
        staging::observe(f.data(), &f.key, Arch::current(), d),
        staging::Installed::ReVerified(r) if r.digest == d && r.code == f.code
    ));
    // The document replaced by another deployment's: not good, not absent.
    let path = deployment_dir(f.data(), d).join(DOCUMENT_FILE);
    std::fs::write(&path, other.encode()).expect("swap");
    assert!(matches!(
        staging::observe(f.data(), &f.key, Arch::current(), d),
        staging::Installed::Unknown(StageError::DeploymentRefused { .. })
    ));
}

#[test]
fn read_back_says_the_deployment_only_when_code_document_and_files_hold() {
    let f = Fixture::new();
    let d = f.doc.digest();
    assert_eq!(f.read_back(), ArtifactRead::Digest(d));
    // The code's app file swapped for another release's signed app.
    let v0 = signed(&f.signing, b"print('v0')");
    let d0 = bundle::bundle_digest(&v0);
    staging::install(f.data(), &f.key, d0, &v0).expect("install v0");
    let app = staging::release_dir(f.data(), f.code).join("app.py");
    std::fs::write(&app, b"print('v0')").expect("swap");
    assert_eq!(
        f.read_back(),
        ArtifactRead::AppFileOf {
            installed: d,
            release: d0
        }
    );
    std::fs::write(&app, b"print('x')").expect("alter");
    assert_eq!(f.read_back(), ArtifactRead::AppFileAltered(d));
    std::fs::write(&app, b"print('v1')").expect("put back");
    assert_eq!(f.read_back(), ArtifactRead::Digest(d));
    // A configuration file changed behind the agent's back.
    let config = config_dir(f.data(), d);
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(config.join("extra"), b"x").expect("add");
    assert_eq!(f.read_back(), ArtifactRead::AppFileAltered(d));
    std::fs::remove_file(config.join("extra")).expect("remove");
    assert_eq!(f.read_back(), ArtifactRead::Digest(d));
    // The code's bundle changed: what is there is said.
    let bundle_file = staging::release_dir(f.data(), f.code).join(BUNDLE_FILE);
    let good = std::fs::read(&bundle_file).expect("bundle");
    let mut changed = good.clone();
    changed[0] ^= 1;
    std::fs::write(&bundle_file, &changed).expect("tamper");
    assert_eq!(
        f.read_back(),
        ArtifactRead::Digest(bundle::bundle_digest(&changed))
    );
    std::fs::write(&bundle_file, &good).expect("put back");
    // The document replaced by another revision's: that deployment.
    let path = deployment_dir(f.data(), d).join(DOCUMENT_FILE);
    let other = document(f.code, 2);
    std::fs::write(&path, other.encode()).expect("swap document");
    assert_eq!(f.read_back(), ArtifactRead::Digest(other.digest()));
    std::fs::write(&path, b"garbage").expect("garbage");
    assert!(matches!(f.read_back(), ArtifactRead::Digest(x) if x != d));
    std::fs::remove_file(&path).expect("remove");
    assert_eq!(f.read_back(), ArtifactRead::Unreadable);
}
