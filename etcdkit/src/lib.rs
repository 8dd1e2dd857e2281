//! The one etcd launcher (issue #22 item 5).
//!
//! - [`member_args`]: the command line of one member, from where it
//!   listens ([`MemberSpec`]) and how it is tuned ([`Tuning`]). Every
//!   member any part of Fleetweft starts gets its flags here: the test
//!   harness's, `demo --ha`'s, `scripts/etcd.sh`'s and the network
//!   scenarios' (which start theirs inside namespaces).
//! - [`Cluster`]: members on loopback as child processes, with ports
//!   picked or given, killed with the process that started them (or
//!   detached, for `scripts/etcd.sh`), stopped, restarted, frozen, and
//!   waited for through etcd's own `/health` (served on a plain-http
//!   metrics URL, so a TLS cluster is probed the same way).
//! - `fleetweft-etcd start|stop DIR` (src/bin): `scripts/etcd.sh`'s
//!   cluster, through [`Cluster`].

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// The etcd server binary (Debian's `etcd-server`), found on PATH.
pub const ETCD_EXE: &str = "etcd";
/// `--max-txn-ops` the log's default atomic batch needs.
pub const MAX_TXN_OPS: usize = eventlog::ETCD_MAX_TXN_OPS_REQUIRED;
/// `--max-request-bytes` the log's default atomic batch needs (below the
/// WAL record etcd 3.4 can replay; see `eventlog::ETCD_MAX_REQUEST_BYTES`).
pub const MAX_REQUEST_BYTES: usize = eventlog::ETCD_MAX_REQUEST_BYTES;
/// etcd's raft heartbeat on loopback, in milliseconds: short, so a lease
/// TTL of a second is honoured (etcd's minimum TTL is 1.5 election
/// timeouts).
pub const LOOPBACK_HEARTBEAT_MS: u64 = 50;
/// etcd's election timeout on loopback, in milliseconds (0.75 s minimum
/// lease TTL).
pub const LOOPBACK_ELECTION_TIMEOUT_MS: u64 = 500;
/// A production-like cluster's backend quota, in bytes (4 GiB; the
/// controller's `[storage] quota_backend_bytes` must say the same).
pub const OPERATIONS_QUOTA_BACKEND_BYTES: u64 = 4 << 30;
/// A production-like cluster's revision auto-compaction retention, in
/// revisions.
pub const OPERATIONS_AUTO_COMPACTION_REVISIONS: u64 = 10_000;
/// A production-like cluster's `--snapshot-count`, in raft entries (etcd
/// 3.4's default, 100,000, keeps gigabytes of WAL for the log's ~110 KB
/// batches; docs/operations.md).
pub const OPERATIONS_SNAPSHOT_COUNT: u64 = 5_000;
/// How long one `/health` request may take, in milliseconds.
const HEALTH_REQUEST_MS: u64 = 2_000;
/// Pause between two health probes while waiting, in milliseconds.
const HEALTH_POLL_MS: u64 = 100;
/// Lines of a dead member's log shown when it is named.
const DEAD_LOG_LINES_MAX: usize = 15;

/// Which transaction limits a member starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limits {
    /// What the log's default batch limits need ([`MAX_TXN_OPS`],
    /// [`MAX_REQUEST_BYTES`]).
    Fitting,
    /// etcd's defaults (128 ops, 1.5 MiB): too small for the default
    /// limits (a test of the controller's refusal).
    EtcdDefaults,
}

/// How a member is tuned beyond where it listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// `--heartbeat-interval`, ms; etcd's default when `None`.
    pub heartbeat_ms: Option<u64>,
    /// `--election-timeout`, ms; etcd's default when `None`.
    pub election_timeout_ms: Option<u64>,
    /// Transaction limits.
    pub limits: Limits,
    /// `--pre-vote`: a member rejoining after a partition cannot force an
    /// election that deposes the leading controller (etcd 3.4 has it off).
    pub pre_vote: bool,
    /// `--quota-backend-bytes`.
    pub quota_backend_bytes: Option<u64>,
    /// `--auto-compaction-mode revision --auto-compaction-retention N`.
    pub auto_compaction_revisions: Option<u64>,
    /// `--snapshot-count`.
    pub snapshot_count: Option<u64>,
}

impl Tuning {
    /// The test harness's and the demo's: short raft timers on loopback,
    /// the limits the log needs.
    pub fn loopback() -> Tuning {
        Tuning {
            heartbeat_ms: Some(LOOPBACK_HEARTBEAT_MS),
            election_timeout_ms: Some(LOOPBACK_ELECTION_TIMEOUT_MS),
            limits: Limits::Fitting,
            pre_vote: false,
            quota_backend_bytes: None,
            auto_compaction_revisions: None,
            snapshot_count: None,
        }
    }

    /// The limits the log needs and pre-vote, etcd's timers (the network
    /// scenarios' hosts).
    pub fn networked() -> Tuning {
        Tuning {
            heartbeat_ms: None,
            election_timeout_ms: None,
            pre_vote: true,
            ..Tuning::loopback()
        }
    }

    /// docs/operations.md's production settings (`scripts/etcd.sh`): the
    /// limits, pre-vote, a database that never fills up (quota and
    /// auto-compaction) and a WAL purged every [`OPERATIONS_SNAPSHOT_COUNT`]
    /// entries.
    pub fn operations() -> Tuning {
        Tuning {
            quota_backend_bytes: Some(OPERATIONS_QUOTA_BACKEND_BYTES),
            auto_compaction_revisions: Some(OPERATIONS_AUTO_COMPACTION_REVISIONS),
            snapshot_count: Some(OPERATIONS_SNAPSHOT_COUNT),
            ..Tuning::networked()
        }
    }
}

/// A member's server certificate, for clients over https with client
/// certificates required (`--client-cert-auth`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerTls {
    /// The member's certificate (PEM).
    pub cert: PathBuf,
    /// Its key (PEM).
    pub key: PathBuf,
    /// The CA client certificates must chain to (PEM).
    pub ca: PathBuf,
}

/// Where one member lives and listens.
#[derive(Clone, Debug)]
pub struct MemberSpec {
    /// `--name`, e.g. `m1`.
    pub name: String,
    /// `--data-dir`.
    pub data_dir: PathBuf,
    /// Its client URL (listened on and advertised), `http://HOST:PORT` or
    /// `https://...` with [`MemberSpec::tls`].
    pub client_url: String,
    /// Its peer URL (listened on and advertised).
    pub peer_url: String,
    /// `--listen-metrics-urls`: a plain-http `/health` beside a TLS client
    /// URL (`None`: none).
    pub metrics_url: Option<String>,
    /// `--initial-cluster`: `name=peer_url,...` for every member.
    pub initial_cluster: String,
    /// `--initial-cluster-state`: `new`, or `existing` for a member
    /// restarted on its data (etcd then ignores the `--initial-*` flags).
    pub existing: bool,
    /// `--initial-cluster-token`.
    pub token: String,
    /// Client TLS.
    pub tls: Option<ServerTls>,
}

/// The command line (without the program) of the member `spec` tuned by
/// `tuning`.
pub fn member_args(spec: &MemberSpec, tuning: &Tuning) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--name".into(),
        spec.name.clone(),
        "--data-dir".into(),
        spec.data_dir.display().to_string(),
        "--listen-client-urls".into(),
        spec.client_url.clone(),
        "--advertise-client-urls".into(),
        spec.client_url.clone(),
        "--listen-peer-urls".into(),
        spec.peer_url.clone(),
        "--initial-advertise-peer-urls".into(),
        spec.peer_url.clone(),
        "--initial-cluster".into(),
        spec.initial_cluster.clone(),
        "--initial-cluster-state".into(),
        if spec.existing { "existing" } else { "new" }.into(),
        "--initial-cluster-token".into(),
        spec.token.clone(),
    ];
    if let Some(metrics) = &spec.metrics_url {
        args.extend(["--listen-metrics-urls".into(), metrics.clone()]);
    }
    if let Some(ms) = tuning.heartbeat_ms {
        args.extend(["--heartbeat-interval".into(), ms.to_string()]);
    }
    if let Some(ms) = tuning.election_timeout_ms {
        args.extend(["--election-timeout".into(), ms.to_string()]);
    }
    if tuning.limits == Limits::Fitting {
        args.push(format!("--max-txn-ops={MAX_TXN_OPS}"));
        args.push(format!("--max-request-bytes={MAX_REQUEST_BYTES}"));
    }
    if let Some(bytes) = tuning.quota_backend_bytes {
        args.extend(["--quota-backend-bytes".into(), bytes.to_string()]);
    }
    if let Some(count) = tuning.snapshot_count {
        args.extend(["--snapshot-count".into(), count.to_string()]);
    }
    if let Some(revisions) = tuning.auto_compaction_revisions {
        args.extend([
            "--auto-compaction-mode".into(),
            "revision".into(),
            "--auto-compaction-retention".into(),
            revisions.to_string(),
        ]);
    }
    if tuning.pre_vote {
        args.push("--pre-vote".into());
    }
    if let Some(tls) = &spec.tls {
        args.extend([
            "--cert-file".into(),
            tls.cert.display().to_string(),
            "--key-file".into(),
            tls.key.display().to_string(),
            "--trusted-ca-file".into(),
            tls.ca.display().to_string(),
            "--client-cert-auth".into(),
        ]);
    }
    args.extend(["--logger".into(), "zap".into()]);
    args
}

/// Whether `etcd` is on PATH and runs.
pub fn etcd_installed() -> bool {
    Command::new(ETCD_EXE)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Which ports a loopback cluster's members use.
#[derive(Clone, Copy, Debug)]
pub enum Ports {
    /// Picked from the kernel now (released again for etcd to bind).
    Free,
    /// Member i (1-based): client `base + i`, peer `base + 10 + i`,
    /// metrics `base + 20 + i` (`scripts/etcd.sh`'s fixed layout).
    Base(u16),
}

/// What the members' processes are tied to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// Killed by the kernel when the process that started them ends,
    /// however it ends (`PR_SET_PDEATHSIG`, set from a thread that lives
    /// as long as the process), and by [`Cluster`]'s drop.
    TiedToProcess,
    /// Their own session, outliving the starter (`scripts/etcd.sh`); the
    /// cluster's drop leaves them running.
    Detached,
}

/// What [`Cluster::start`] starts.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    /// Members, `m1`..`mN`.
    pub members: usize,
    /// Member data: `<data_dir>/m<i>`.
    pub data_dir: PathBuf,
    /// Member logs: `<log_dir>/<log_prefix>m<i>.log`.
    pub log_dir: PathBuf,
    /// See [`ClusterSpec::log_dir`].
    pub log_prefix: String,
    /// `--initial-cluster-token`.
    pub token: String,
    /// Ports.
    pub ports: Ports,
    /// Tuning of every member.
    pub tuning: Tuning,
    /// Client TLS of every member.
    pub tls: Option<ServerTls>,
    /// What the members are tied to.
    pub lifetime: Lifetime,
}

/// Why a cluster could not be started or did not become healthy.
#[derive(Debug)]
pub enum ClusterError {
    /// `etcd` is not on PATH.
    NotInstalled,
    /// Creating a directory or log file, or starting a member, failed.
    Io(String, std::io::Error),
    /// A member exited: its name, status and the end of its log.
    Exited(String),
    /// No answer within the wait.
    Timeout(String),
}

impl std::fmt::Display for ClusterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClusterError::NotInstalled => write!(
                f,
                "`etcd` is not on PATH: install Debian's etcd-server \
                 (`bash scripts/etcd.sh install etcd` as root)"
            ),
            ClusterError::Io(what, e) => write!(f, "{what}: {e}"),
            ClusterError::Exited(text) | ClusterError::Timeout(text) => f.write_str(text),
        }
    }
}

impl std::error::Error for ClusterError {}

/// One member's addresses and process.
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    metrics_port: u16,
    log: PathBuf,
    child: Option<Child>,
}

/// Members on loopback, as child processes.
pub struct Cluster {
    spec: ClusterSpec,
    members: Vec<Member>,
}

impl Cluster {
    /// Starts the members of `spec` (a new cluster, or the existing one
    /// on data already in `data_dir`); [`Cluster::wait_healthy`] waits
    /// for them.
    pub fn start(spec: ClusterSpec) -> Result<Cluster, ClusterError> {
        if !etcd_installed() {
            return Err(ClusterError::NotInstalled);
        }
        for dir in [&spec.data_dir, &spec.log_dir] {
            std::fs::create_dir_all(dir)
                .map_err(|e| ClusterError::Io(format!("creating {}", dir.display()), e))?;
        }
        let mut members = Vec::new();
        for i in 1..=spec.members {
            let (client_port, peer_port, metrics_port) = match spec.ports {
                Ports::Free => (free_port()?, free_port()?, free_port()?),
                Ports::Base(base) => {
                    let offset = |k: usize| {
                        u16::try_from(k)
                            .ok()
                            .and_then(|k| base.checked_add(k))
                            .ok_or_else(|| {
                                ClusterError::Io(
                                    format!("port base {base} + {k}"),
                                    std::io::ErrorKind::InvalidInput.into(),
                                )
                            })
                    };
                    (offset(i)?, offset(10 + i)?, offset(20 + i)?)
                }
            };
            members.push(Member {
                name: format!("m{i}"),
                client_port,
                peer_port,
                metrics_port,
                log: spec.log_dir.join(format!("{}m{i}.log", spec.log_prefix)),
                child: None,
            });
        }
        let mut cluster = Cluster { spec, members };
        for index in 0..cluster.members.len() {
            let existing = cluster.data_of(index).exists();
            cluster.start_member(index, existing)?;
        }
        Ok(cluster)
    }

    fn data_of(&self, index: usize) -> PathBuf {
        self.spec.data_dir.join(&self.members[index].name)
    }

    /// Client endpoints, `127.0.0.1:PORT`, in member order.
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .collect()
    }

    /// Member `index`'s client port.
    pub fn client_port(&self, index: usize) -> u16 {
        self.members[index].client_port
    }

    /// The member processes' ids (of those running).
    pub fn pids(&self) -> Vec<u32> {
        self.members
            .iter()
            .filter_map(|m| m.child.as_ref().map(Child::id))
            .collect()
    }

    /// Where the members' data lives.
    pub fn data_dir(&self) -> &Path {
        &self.spec.data_dir
    }

    /// Member `index`'s log file.
    pub fn log_of(&self, index: usize) -> &Path {
        &self.members[index].log
    }

    /// Whether member `index` runs (was not killed).
    pub fn is_running(&self, index: usize) -> bool {
        self.members[index].child.is_some()
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn start_member(&mut self, index: usize, existing: bool) -> Result<(), ClusterError> {
        let member = &self.members[index];
        let scheme = if self.spec.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let spec = MemberSpec {
            name: member.name.clone(),
            data_dir: self.data_of(index),
            client_url: format!("{scheme}://127.0.0.1:{}", member.client_port),
            peer_url: format!("http://127.0.0.1:{}", member.peer_port),
            metrics_url: Some(format!("http://127.0.0.1:{}", member.metrics_port)),
            initial_cluster: self.initial_cluster(),
            existing,
            token: self.spec.token.clone(),
            tls: self.spec.tls.clone(),
        };
        let log = std::fs::File::create(&member.log)
            .map_err(|e| ClusterError::Io(format!("creating {}", member.log.display()), e))?;
        let err = log
            .try_clone()
            .map_err(|e| ClusterError::Io(format!("cloning {}", member.log.display()), e))?;
        let mut command = Command::new(ETCD_EXE);
        command
            .args(member_args(&spec, &self.spec.tuning))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        let child = match self.spec.lifetime {
            Lifetime::TiedToProcess => spawn_tied_to_process(command),
            Lifetime::Detached => spawn_detached(command),
        }
        .map_err(|e| ClusterError::Io(format!("starting etcd member {}", member.name), e))?;
        self.members[index].child = Some(child);
        Ok(())
    }

    /// SIGKILLs member `index` (a machine dying mid-request) and reaps it.
    pub fn kill_member(&mut self, index: usize) {
        if let Some(mut child) = self.members[index].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOPs member `index`: its connections stay open but nothing it
    /// was sent is answered (a hung machine); [`Cluster::kill_member`]
    /// ends it.
    pub fn freeze_member(&mut self, index: usize) {
        if let Some(child) = &self.members[index].child {
            signal(child.id(), libc::SIGSTOP);
        }
    }

    /// Restarts killed member `index` on its data (no health wait).
    pub fn restart_member(&mut self, index: usize) -> Result<(), ClusterError> {
        if self.members[index].child.is_none() {
            self.start_member(index, true)?;
        }
        Ok(())
    }

    /// SIGKILLs every member (a whole-cluster power loss).
    pub fn kill_all(&mut self) {
        for index in 0..self.members.len() {
            self.kill_member(index);
        }
    }

    /// Restarts every killed member on its data (no health wait).
    pub fn restart_all(&mut self) -> Result<(), ClusterError> {
        for index in 0..self.members.len() {
            self.restart_member(index)?;
        }
        Ok(())
    }

    /// Whether member `index` answers `/health` with `"health":"true"`
    /// (it sees a raft leader and a quorum read succeeded).
    pub fn member_healthy(&self, index: usize) -> bool {
        self.members[index].child.is_some() && health(self.members[index].metrics_port)
    }

    /// Whether some running member answers healthy: the cluster serves
    /// quorum reads.
    pub fn healthy(&self) -> bool {
        (0..self.members.len()).any(|i| self.member_healthy(i))
    }

    /// A running member that exited, named with the end of its log.
    pub fn check_alive(&mut self) -> Result<(), ClusterError> {
        for member in &mut self.members {
            if let Some(child) = member.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(ClusterError::Exited(format!(
                        "etcd member {} exited ({status}); the end of {}:\n{}",
                        member.name,
                        member.log.display(),
                        tail(&member.log, DEAD_LOG_LINES_MAX)
                    )));
                }
            }
        }
        Ok(())
    }

    /// Waits until `ready` holds for this cluster, within `wait`; a
    /// member that exits ends the wait, named.
    fn wait_until(
        &mut self,
        wait: Duration,
        what: &str,
        ready: impl Fn(&Cluster) -> bool,
    ) -> Result<(), ClusterError> {
        let started = Instant::now();
        loop {
            if ready(self) {
                return Ok(());
            }
            self.check_alive()?;
            if started.elapsed() > wait {
                return Err(ClusterError::Timeout(format!(
                    "{what} within {wait:?} (see the members' logs in {})",
                    self.spec.log_dir.display()
                )));
            }
            thread::sleep(Duration::from_millis(HEALTH_POLL_MS));
        }
    }

    /// Waits until the cluster serves quorum reads ([`Cluster::healthy`]).
    pub fn wait_healthy(&mut self, wait: Duration) -> Result<(), ClusterError> {
        self.wait_until(wait, "the etcd cluster did not answer", Cluster::healthy)
    }

    /// Waits until member `index` answers healthy.
    pub fn wait_member_healthy(
        &mut self,
        index: usize,
        wait: Duration,
    ) -> Result<(), ClusterError> {
        let what = format!("etcd member m{} was not healthy", index + 1);
        self.wait_until(wait, &what, |c| c.member_healthy(index))
    }

    /// Kills every member and removes their data (the logs stay).
    pub fn stop_and_remove(&mut self) {
        self.kill_all();
        let _ = std::fs::remove_dir_all(&self.spec.data_dir);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.spec.lifetime == Lifetime::TiedToProcess {
            self.kill_all();
        }
    }
}

/// Sends `sig` to process `pid` (one of our own children).
pub fn signal(pid: u32, sig: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: a plain syscall on a pid of our own.
        unsafe { libc::kill(pid, sig) };
    }
}

/// `GET /health` on 127.0.0.1:`port`: true when etcd says healthy.
fn health(port: u16) -> bool {
    let timeout = Duration::from_millis(HEALTH_REQUEST_MS);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, timeout) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    if stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply.contains("\"health\":\"true\"")
}

/// The last `lines_max` lines of a log file.
fn tail(log: &Path, lines_max: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_else(|e| format!("(unreadable: {e})"));
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(lines_max)..].join("\n")
}

/// A port the kernel just handed out (released again for etcd to bind).
fn free_port() -> Result<u16, ClusterError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| ClusterError::Io("binding a loopback port".into(), e))
}

/// A command to start and where to send the child.
type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `command` from a thread that never exits, with the kernel told
/// to SIGKILL the child when that thread (so: the process) dies. (The
/// parent-death signal follows the thread that forked: a short-lived
/// thread would take its children with it.)
fn spawn_tied_to_process(mut command: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        thread::spawn(move || {
            for (mut command, reply) in rx {
                let _ = reply.send(command.spawn());
            }
            // The channel lives in a static: never reached, the thread (and
            // with it the children's parent-death signal) lasts until exit.
        });
        Mutex::new(tx)
    });
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork
    // and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let (reply_tx, reply_rx) = mpsc::channel();
    let gone = || std::io::Error::other("the etcd spawner thread is gone");
    spawner
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((command, reply_tx))
        .map_err(|_| gone())?;
    reply_rx.recv().map_err(|_| gone())?
}

/// Spawns `command` in a session of its own (it outlives its starter and
/// a terminal's hang-up).
fn spawn_detached(mut command: Command) -> std::io::Result<Child> {
    // SAFETY: setsid is async-signal-safe; nothing else runs between fork
    // and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.spawn()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> MemberSpec {
        MemberSpec {
            name: "m1".into(),
            data_dir: "/d/m1".into(),
            client_url: "http://127.0.0.1:1".into(),
            peer_url: "http://127.0.0.1:2".into(),
            metrics_url: None,
            initial_cluster: "m1=http://127.0.0.1:2".into(),
            existing: false,
            token: "t".into(),
            tls: None,
        }
    }

    /// scripts/etcd.sh's members start with docs/operations.md's flags.
    #[test]
    fn the_operations_tuning_has_the_documented_flags() {
        let args = member_args(&spec(), &Tuning::operations()).join(" ");
        for flag in [
            "--max-txn-ops=32768",
            "--max-request-bytes=10420224",
            "--quota-backend-bytes 4294967296",
            "--snapshot-count 5000",
            "--auto-compaction-mode revision --auto-compaction-retention 10000",
            "--pre-vote",
            "--initial-cluster-state new",
        ] {
            assert!(args.contains(flag), "{flag} missing: {args}");
        }
        assert!(!args.contains("--heartbeat-interval"), "{args}");
    }

    /// The tests' and the demo's members: short raft timers, the limits,
    /// nothing else.
    #[test]
    fn the_loopback_tuning_has_short_timers_and_the_limits() {
        let args = member_args(&spec(), &Tuning::loopback()).join(" ");
        assert!(args.contains("--heartbeat-interval 50 --election-timeout 500"));
        assert!(args.contains("--max-txn-ops=32768"));
        assert!(!args.contains("--pre-vote"));
        let defaults = Tuning {
            limits: Limits::EtcdDefaults,
            ..Tuning::loopback()
        };
        assert!(!member_args(&spec(), &defaults)
            .join(" ")
            .contains("--max-txn-ops"));
    }
}
