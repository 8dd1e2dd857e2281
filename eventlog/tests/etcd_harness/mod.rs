//! A local etcd cluster for the etcd backend's integration tests, started
//! by the one etcd launcher (`etcdkit`, issue #22 item 5) with its
//! loopback tuning.
//!
//! Members run as child processes started with `PR_SET_PDEATHSIG =
//! SIGKILL` from a thread that lives as long as the test process, so the
//! kernel kills them when the test binary exits, however it exits (a failed
//! assertion, a panic, an abort, SIGKILL): nothing is left running. A
//! [`Cluster`] also kills its members on drop. Data lives under cargo's
//! `CARGO_TARGET_TMPDIR`, wiped when a cluster of the same name starts.
//!
//! When `etcd` is missing the harness asks `scripts/etcd.sh install` (which
//! installs Debian's `etcd-server` as root); if that cannot work (not root)
//! [`shared`] / [`Cluster::start`] return `None` after printing a LOUD skip
//! notice, and the calling test returns early. As root a failed install
//! fails the test.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use eventlog::{EtcdConfig, EtcdTls};

pub use etcdkit::Limits;

/// `--max-txn-ops` of the test clusters: the default batch limits' need.
pub const MAX_TXN_OPS: usize = etcdkit::MAX_TXN_OPS;
/// `--max-request-bytes` of the test clusters (as scripts/etcd.sh).
pub const MAX_REQUEST_BYTES: usize = etcdkit::MAX_REQUEST_BYTES;
/// Longest a cluster may take to answer a quorum read after start.
const HEALTH_WAIT: Duration = Duration::from_secs(30);
/// Times a cluster is started, each on fresh ports, before its start is a failure.
const START_ATTEMPTS_MAX: usize = 3;

/// A running local cluster.
pub struct Cluster {
    dir: PathBuf,
    /// The members, through the launcher.
    members: etcdkit::Cluster,
    /// Client TLS (https, client certificates required) when started so.
    pki: Option<Pki>,
}

/// A test PKI in PEM files: a CA, a server certificate for 127.0.0.1 and
/// localhost (the members'), a client certificate, and a second CA that
/// signed none of them.
#[derive(Clone)]
pub struct Pki {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    pub other_ca: PathBuf,
}

impl Pki {
    /// Generates the PKI into `dir` with rcgen.
    pub fn generate(dir: &Path) -> Pki {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
            KeyUsagePurpose,
        };
        std::fs::create_dir_all(dir).expect("create the PKI directory");
        let write = |name: &str, text: String| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write a PEM file");
            path
        };
        let ca_of = |name: &str| {
            let key = KeyPair::generate().expect("CA key");
            let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.distinguished_name.push(DnType::CommonName, name);
            params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            let cert = params.self_signed(&key).expect("self-sign the CA");
            (cert, key)
        };
        let (ca, ca_key) = ca_of("fleetweft test etcd CA");
        let (other_ca, _) = ca_of("an unrelated CA");
        let leaf = |sans: Vec<String>, name: &str| {
            let key = KeyPair::generate().expect("leaf key");
            let mut params = CertificateParams::new(sans).expect("leaf params");
            params.distinguished_name.push(DnType::CommonName, name);
            // etcd 3.4's gateway dials its own member with the server
            // certificate, so that one serves as a client certificate too.
            params.extended_key_usages = vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ];
            let cert = params.signed_by(&key, &ca, &ca_key).expect("sign a leaf");
            (cert.pem(), key.serialize_pem())
        };
        let (server_cert, server_key) =
            leaf(vec!["127.0.0.1".into(), "localhost".into()], "etcd member");
        let (client_cert, client_key) = leaf(Vec::new(), "fleetweft controller");
        Pki {
            ca: write("ca.pem", ca.pem()),
            server_cert: write("server.pem", server_cert),
            server_key: write("server-key.pem", server_key),
            client_cert: write("client.pem", client_cert),
            client_key: write("client-key.pem", client_key),
            other_ca: write("other-ca.pem", other_ca.pem()),
        }
    }

    /// The client side with the right CA and the client certificate.
    pub fn client_tls(&self) -> EtcdTls {
        EtcdTls {
            ca_file: self.ca.clone(),
            cert_file: Some(self.client_cert.clone()),
            key_file: Some(self.client_key.clone()),
        }
    }
}

/// The cluster shared by the tests of one test binary (each test uses its
/// own prefix), or `None` (after a loud notice) when etcd is unavailable.
pub fn shared() -> Option<&'static Mutex<Cluster>> {
    static SHARED: OnceLock<Option<Mutex<Cluster>>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let cluster = Cluster::start("shared", 3, Limits::Fitting)?;
            remove_at_exit(&cluster);
            Some(Mutex::new(cluster))
        })
        .as_ref()
}

/// The shared cluster lives in a static, which is never dropped: at exit,
/// kill its members and remove its data (hundreds of MiB of preallocated
/// WAL), so a test run leaves neither processes nor data behind.
fn remove_at_exit(cluster: &Cluster) {
    static AT_EXIT: OnceLock<(Vec<u32>, PathBuf)> = OnceLock::new();
    extern "C" fn clean_up() {
        if let Some((pids, dir)) = AT_EXIT.get() {
            for pid in pids {
                // SAFETY: plain syscall on our own children's pids.
                unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
            }
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    let pids = cluster.members.pids();
    if AT_EXIT.set((pids, cluster.dir.clone())).is_ok() {
        // SAFETY: registers a plain function; it runs once at exit.
        unsafe { libc::atexit(clean_up) };
    }
}

/// Endpoints of the shared cluster, or `None` when etcd is unavailable.
pub fn shared_endpoints() -> Option<Vec<String>> {
    shared().map(|cluster| {
        cluster
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .endpoints()
    })
}

/// A unique prefix per test, so tests sharing a cluster never meet.
pub fn prefix(test: &str) -> String {
    format!("/fleetweft-test/{test}-{}", std::process::id())
}

/// The config for `prefix` on `endpoints` (the default 5 s TTL, so a
/// loaded CI machine does not depose a test's leader by accident; the
/// expiry tests set a short one).
pub fn config(endpoints: &[String], prefix: &str) -> EtcdConfig {
    EtcdConfig::new(endpoints.to_vec(), prefix)
}

impl Cluster {
    /// Starts `members` members named `name` and waits until they answer a
    /// quorum read. `None` (after a loud notice) when etcd is unavailable.
    pub fn start(name: &str, members: usize, limits: Limits) -> Option<Cluster> {
        Self::start_with(name, members, limits, false)
    }

    /// As [`Cluster::start`], serving clients over https only and
    /// requiring client certificates (`--client-cert-auth`) when `tls`;
    /// the PKI is generated into the cluster's directory ([`Cluster::pki`]).
    pub fn start_with(name: &str, members: usize, limits: Limits, tls: bool) -> Option<Cluster> {
        if !ensure_etcd() {
            return None;
        }
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("etcd-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the cluster's data directory");
        let pki = tls.then(|| Pki::generate(&dir.join("pki")));
        let spec = |attempt: usize| etcdkit::ClusterSpec {
            members,
            data_dir: dir.clone(),
            log_dir: dir.clone(),
            log_prefix: String::new(),
            ports: etcdkit::Ports::Free,
            // Short ticks: etcd's minimum lease TTL is 1.5 election
            // timeouts (here 0.75 s, so a 1 s TTL is honoured).
            tuning: etcdkit::Tuning {
                limits,
                ..etcdkit::Tuning::loopback()
            },
            tls: pki.as_ref().map(|pki| etcdkit::ServerTls {
                cert: pki.server_cert.clone(),
                key: pki.server_key.clone(),
                ca: pki.ca.clone(),
            }),
            lifetime: etcdkit::Lifetime::TiedToProcess,
            token: format!("{name}-{}-{attempt}", std::process::id()),
        };
        // Free ports are picked before etcd binds them, and another test's
        // process can take one in between (seen: a member exiting with
        // "address already in use"): a member that exits while the
        // cluster starts is started again, all of it on fresh ports.
        for attempt in 1..=START_ATTEMPTS_MAX {
            let mut members =
                etcdkit::Cluster::start(spec(attempt)).expect("start the etcd members");
            // Every member, not only a quorum: a client given all the
            // endpoints may send its first request to the one still
            // starting (seen: a raw put refused on a member's client port
            // while the other two already answered).
            let all_healthy = members.wait_healthy(HEALTH_WAIT).and_then(|()| {
                (0..spec(attempt).members)
                    .try_for_each(|index| members.wait_member_healthy(index, HEALTH_WAIT))
            });
            match all_healthy {
                Ok(()) => return Some(Cluster { dir, members, pki }),
                Err(etcdkit::ClusterError::Exited(why)) if attempt < START_ATTEMPTS_MAX => {
                    eprintln!("etcd cluster {name}, attempt {attempt}: a member exited ({why}); starting again on fresh ports");
                    drop(members);
                    for m in 1..=spec(attempt).members {
                        let _ = std::fs::remove_dir_all(dir.join(format!("m{m}")));
                    }
                }
                Err(e) => panic!(
                    "the etcd cluster in {} did not become healthy: {e}",
                    dir.display()
                ),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    /// Client endpoints, `127.0.0.1:PORT`.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.endpoints()
    }

    /// The PKI of a TLS cluster.
    pub fn pki(&self) -> Option<&Pki> {
        self.pki.as_ref()
    }

    /// The log config for `prefix` on this cluster (with the client TLS of
    /// a TLS cluster).
    pub fn config(&self, prefix: &str) -> EtcdConfig {
        let mut config = EtcdConfig::new(self.endpoints(), prefix);
        config.tls = self.pki.as_ref().map(Pki::client_tls);
        config
    }

    /// SIGKILLs member `index` (a machine dying mid-request).
    pub fn kill_member(&mut self, index: usize) {
        self.members.kill_member(index);
    }

    /// SIGSTOPs member `index`: its connections stay open but nothing it
    /// was sent is answered (a hung machine). `kill_member` ends it.
    pub fn freeze_member(&mut self, index: usize) {
        self.members.freeze_member(index);
    }

    /// Restarts killed member `index` on its data (no health wait).
    pub fn restart_member(&mut self, index: usize) {
        self.members
            .restart_member(index)
            .expect("restart the etcd member");
    }

    /// The index of the member that is raft leader now, asking each live
    /// member's status until one says it leads (within [`HEALTH_WAIT`]).
    pub fn raft_leader(&self) -> usize {
        let started = Instant::now();
        loop {
            for index in 0..self.endpoints().len() {
                if !self.members.is_running(index) {
                    continue;
                }
                if let Some(true) = self.member_leads(index) {
                    return index;
                }
            }
            assert!(
                started.elapsed() < HEALTH_WAIT,
                "no etcd member reported being raft leader within {HEALTH_WAIT:?}"
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether member `index` says it is the raft leader (`None`: no answer).
    fn member_leads(&self, index: usize) -> Option<bool> {
        let endpoint = format!(
            "{}://127.0.0.1:{}",
            if self.pki.is_some() { "https" } else { "http" },
            self.members.client_port(index)
        );
        let mut options = etcd_client::ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(1))
            .with_timeout(Duration::from_secs(1));
        if let Some(pki) = &self.pki {
            let read = |path: &Path| std::fs::read_to_string(path).expect("read a PEM file");
            options = options.with_tls(
                etcd_client::TlsOptions::new()
                    .ca_certificate(etcd_client::Certificate::from_pem(read(&pki.ca)))
                    .identity(etcd_client::Identity::from_pem(
                        read(&pki.client_cert),
                        read(&pki.client_key),
                    )),
            );
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the status probe");
        runtime.block_on(async {
            let mut client = etcd_client::Client::connect([endpoint], Some(options))
                .await
                .ok()?;
            let status = client.status().await.ok()?;
            let id = status.header()?.member_id();
            Some(status.leader() == id)
        })
    }

    /// SIGKILLs every member (a whole-cluster power loss).
    pub fn kill_all(&mut self) {
        self.members.kill_all();
    }

    /// Restarts every killed member on its data and waits for health.
    pub fn restart_all(&mut self) {
        self.members
            .restart_all()
            .expect("restart the etcd members");
        self.wait_healthy();
    }

    /// Waits until member `index` answers a status request (restarted and
    /// serving), within [`HEALTH_WAIT`].
    pub fn wait_member_up(&self, index: usize) {
        let started = Instant::now();
        while self.member_leads(index).is_none() {
            assert!(
                started.elapsed() < HEALTH_WAIT,
                "member m{} did not answer within {HEALTH_WAIT:?}",
                index + 1
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Times a cluster is started before its start is a failure.
    const START_ATTEMPTS_MAX: usize = 3;

    /// Waits until the cluster answers a quorum read.
    pub fn wait_healthy(&mut self) {
        if let Err(e) = self.members.wait_healthy(HEALTH_WAIT) {
            panic!(
                "the etcd cluster in {} did not become healthy: {e}",
                self.dir.display()
            );
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.members.kill_all();
        // Kept after a failure, for the members' logs.
        if !thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// True when `etcd` is on PATH, installing it through scripts/etcd.sh if
/// possible; false (after a loud notice) when it cannot be installed.
fn ensure_etcd() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        if has_etcd() {
            return true;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/etcd.sh");
        let installed = Command::new("bash")
            .arg(&script)
            .args(["install", "etcd"])
            .status()
            .map(|status| status.success())
            .unwrap_or(false);
        if installed && has_etcd() {
            return true;
        }
        let root = unsafe { libc::geteuid() } == 0;
        assert!(
            !root,
            "etcd is missing and `scripts/etcd.sh install` failed although running as root"
        );
        // Straight to the stderr handle: libtest captures `eprintln!` of
        // passing tests, and this notice must not be swallowed.
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"\n\
              ################################################################\n\
              ## SKIPPING the etcd backend's integration tests: `etcd` is    ##\n\
              ## not installed and cannot be (not root). Install Debian's    ##\n\
              ## etcd-server (scripts/etcd.sh install as root) to run them.  ##\n\
              ################################################################\n\n",
        );
        false
    })
}

fn has_etcd() -> bool {
    etcdkit::etcd_installed()
}
