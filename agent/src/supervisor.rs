//! Running app instances: one process per installed release, on a private
//! loopback port, restarted within a bound. A running process is not
//! evidence of anything; the route probe is. The supervisor only keeps
//! processes up and says how often it had to.

use model::Digest;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// How long a started app may take to accept connections.
pub const APP_START_TIMEOUT_MS: u64 = 10_000;
/// How often a starting app is tried for a listener, in milliseconds.
const LISTEN_POLL_MS: u64 = 50;
/// How long an instance taken off the route may finish the requests it
/// still has in flight before it is told to stop, in milliseconds.
pub const DRAIN_GRACE_MS: u64 = 10_000;
/// How long a stopping instance has between SIGTERM and SIGKILL, in
/// milliseconds.
pub const STOP_GRACE_MS: u64 = 5_000;
/// How often a draining or stopping instance is looked at, in milliseconds.
const RETIRE_POLL_MS: u64 = 50;
/// Restarts tolerated within [`RESTART_WINDOW_MS`] before the instance is
/// declared to be in a restart loop and left down. The same bound proofs
/// judge recorded restart counts against, hence shared through `model`.
pub const RESTARTS_MAX: u32 = model::evidence::PROCESS_RESTARTS_MAX;
/// The window over which restarts are counted.
pub const RESTART_WINDOW_MS: u64 = 30_000;

/// What to run for one release.
#[derive(Clone, Debug)]
pub struct AppSpec {
    /// What serves: the release, or the deployment (code plus
    /// configuration, issue #24 item 1) this instance runs.
    pub release: Digest,
    /// The code's release digest, handed over as `FLEETWEFT_RELEASE`:
    /// `release` itself unless a deployment runs.
    pub code: Digest,
    /// The release's directory (holds the app file); the working directory.
    pub dir: PathBuf,
    /// argv, e.g. `["python3", "app.py"]`.
    pub run: Vec<String>,
    /// Extra environment: a deployment's configuration
    /// ([`crate::staging::deployment::Configured::env_for`]), the
    /// manifest's version, fault injection (see the agent config).
    pub env: Vec<(String, String)>,
    /// The release's declared limits and user, applied as far as the node
    /// can ([`crate::isolation`]).
    pub limits: releases::AppLimits,
    /// Whether the limits may use cgroups (`[isolation] cgroups`); else
    /// rlimits only.
    pub cgroups: bool,
    /// The app's data directory, kept across releases
    /// ([`crate::app_data`]), handed over as `FLEETWEFT_DATA_DIR`; made
    /// (mode 0700, owned by the release's user) before the start.
    pub data: Option<PathBuf>,
}

/// Why an instance could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SuperviseError {
    #[error("release {release}: empty run command in its manifest")]
    EmptyCommand { release: Digest },
    #[error("release {release}: cannot start {program:?}: {source}")]
    Spawn {
        release: Digest,
        program: String,
        source: std::io::Error,
    },
    #[error("release {release}: no free loopback port: {source}")]
    Port {
        release: Digest,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "release {release}: process did not accept connections within {APP_START_TIMEOUT_MS} ms"
    )]
    NotListening { release: Digest },
    #[error(
        "release {release}: restart loop ({RESTARTS_MAX} restarts within {RESTART_WINDOW_MS} ms)"
    )]
    RestartLoop { release: Digest },
    #[error(
        "release {release}: stopped by its memory limit before it accepted connections ({applied}; {kills} kill(s) by the kernel)"
    )]
    OverMemoryLimit {
        release: Digest,
        applied: String,
        kills: u64,
    },
    #[error("release {release}: its data directory {path}: {source}")]
    DataDir {
        release: Digest,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("release {release}: its limits cannot be applied: {source}")]
    Isolation {
        release: Digest,
        #[source]
        source: crate::isolation::IsolationError,
    },
}

/// One supervised app process.
#[derive(Debug)]
pub struct Instance {
    pub spec: AppSpec,
    pub port: u16,
    child: Child,
    started: Instant,
    /// Restart times within the window.
    restarts: Vec<Instant>,
    /// Restarts of the release's process since this agent process first
    /// started it: every restart by [`Instance::keep_alive`], plus the fresh
    /// starts that replaced a dead instance (see
    /// [`Instance::carry_restarts_from`]). Kept in memory only, so an agent
    /// restart counts from 0 again.
    pub restart_count: u32,
    /// Set once the restart bound was exceeded: the instance stays down.
    pub looping: bool,
    /// The release's limits as applied to this instance's processes (each
    /// restart joins the same cgroups).
    pub isolation: std::sync::Arc<crate::isolation::Prepared>,
}

impl Instance {
    /// Start an instance on a free private port and wait until it listens.
    ///
    /// The port is chosen by binding port 0 and releasing it for the app, so
    /// another process can take it in between; the app then fails to bind
    /// and exits. Such a start is retried on a fresh port, at most
    /// [`START_ATTEMPTS_MAX`] times.
    pub async fn start(spec: AppSpec) -> Result<Instance, SuperviseError> {
        let mut attempt = 1;
        loop {
            let port = free_port(spec.release)?;
            let isolation = std::sync::Arc::new(isolate(&spec, port)?);
            if let Some(path) = &spec.data {
                crate::app_data::ensure(path, isolation.owner()).map_err(|source| {
                    SuperviseError::DataDir {
                        release: spec.release,
                        path: path.clone(),
                        source,
                    }
                })?;
            }
            let child = spawn(&spec, port, &isolation)?;
            let mut instance = Instance {
                spec: spec.clone(),
                port,
                child,
                started: Instant::now(),
                restarts: Vec::new(),
                restart_count: 0,
                looping: false,
                isolation,
            };
            match instance.wait_listening().await {
                Ok(()) => return Ok(instance),
                Err(e) if attempt >= START_ATTEMPTS_MAX => return Err(e),
                Err(e) => {
                    tracing::warn!("{e}; trying another port (attempt {attempt})");
                    instance.stop().await;
                    attempt += 1;
                }
            }
        }
    }

    /// Wait until *this* process listens on its port. A successful connect
    /// alone is not enough: another process may hold the port (the race
    /// described at [`Instance::start`]), and then the app died on bind.
    /// Where `/proc` is readable, the listening socket must belong to the
    /// child; elsewhere a connect while the child is alive has to do.
    ///
    /// A connect is tried first and the owner checked only once something
    /// answers, off the async threads, with the listeners asked of netlink
    /// ([`crate::listeners`]): `/proc/net/tcp` lists every socket of the
    /// network namespace, and on a node under load (33,000 sockets in
    /// TIME_WAIT after a minute at 600 requests/s to HTTP/1.0 apps) one
    /// read takes 0.6 s. Read on every 50 ms poll, on the agent's runtime,
    /// it made a start take seconds (`fleetweft-switch-bench`).
    async fn wait_listening(&mut self) -> Result<(), SuperviseError> {
        let deadline = Instant::now() + Duration::from_millis(APP_START_TIMEOUT_MS);
        while Instant::now() < deadline {
            if !self.is_alive() {
                break;
            }
            let answers = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok();
            if answers && self.listens_itself().await && self.is_alive() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(LISTEN_POLL_MS)).await;
        }
        // A process its memory limit stopped says so: the operator's next
        // step is the limit or the app, not the network.
        if let Some(kills) = self.isolation.oom_kills().filter(|&k| k > 0) {
            return Err(SuperviseError::OverMemoryLimit {
                release: self.spec.release,
                applied: self.isolation.applied.to_string(),
                kills,
            });
        }
        Err(SuperviseError::NotListening {
            release: self.spec.release,
        })
    }

    /// Whether the socket listening on the port is the child's (or a
    /// descendant's); true where `/proc` cannot tell.
    async fn listens_itself(&self) -> bool {
        let (pid, port) = (self.child.id(), self.port);
        let owned =
            tokio::task::spawn_blocking(move || pid.and_then(|p| listener_owned_by(p, port)));
        owned.await.ok().flatten().unwrap_or(true)
    }

    /// The supervised child's process id, while it has one.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Time since the current process started.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// What the supervisor sees of the process now, for route observations.
    pub fn sample(&mut self) -> ProcessSample {
        let running = self.is_alive();
        ProcessSample {
            running,
            // A dead process has no uptime; the time since it was started
            // would read as if it were still up.
            uptime_ms: if running {
                u64::try_from(self.uptime().as_millis()).unwrap_or(u64::MAX)
            } else {
                0
            },
            restarts: self.restart_count,
        }
    }

    /// This instance replaces `dead`, an earlier instance of the same release
    /// that could not be kept alive: starting it again is one more restart,
    /// and the earlier ones still count (a loop must not hide behind a fresh
    /// start).
    pub fn carry_restarts_from(&mut self, dead: &Instance) {
        self.restart_count = dead.restart_count.saturating_add(1);
    }

    /// Restart the process if it died, within the restart bound. Returns
    /// whether it is (now) running.
    pub async fn keep_alive(&mut self) -> bool {
        if self.is_alive() {
            return true;
        }
        if let Some(kills) = self.isolation.oom_kills().filter(|&k| k > 0) {
            tracing::warn!(
                release = %self.spec.release,
                kills,
                "app stopped by its memory limit ({})",
                self.isolation.applied
            );
        }
        if self.looping {
            return false;
        }
        let now = Instant::now();
        let window = Duration::from_millis(RESTART_WINDOW_MS);
        self.restarts.retain(|t| now.duration_since(*t) < window);
        if self.restarts.len() as u32 >= RESTARTS_MAX {
            tracing::warn!(release = %self.spec.release, "restart loop: leaving the app down");
            self.looping = true;
            return false;
        }
        self.restarts.push(now);
        self.restart_count += 1;
        match spawn(&self.spec, self.port, &self.isolation) {
            Ok(child) => {
                self.child = child;
                self.started = Instant::now();
                self.wait_listening().await.is_ok()
            }
            Err(e) => {
                tracing::warn!("restart failed: {e}");
                false
            }
        }
    }

    /// Stop the process (SIGKILL) and wait for it.
    pub async fn stop(&mut self) {
        let _ = self.child.kill().await;
        self.isolation.release();
    }

    /// Retire an instance the route no longer forwards to (issue #24 item
    /// 3): wait until `in_flight` says its requests are done (at most
    /// [`DRAIN_GRACE_MS`]), then SIGTERM, then SIGKILL if it is still up
    /// after [`STOP_GRACE_MS`]. Returns how it ended, for the log.
    pub async fn retire(mut self, in_flight: impl Fn(u16) -> usize) -> Retired {
        let poll = Duration::from_millis(RETIRE_POLL_MS);
        let drain_until = Instant::now() + Duration::from_millis(DRAIN_GRACE_MS);
        let mut left = in_flight(self.port);
        while left > 0 && Instant::now() < drain_until {
            tokio::time::sleep(poll).await;
            left = in_flight(self.port);
        }
        let Some(pid) = self.child.id().and_then(|p| libc::pid_t::try_from(p).ok()) else {
            return Retired::AlreadyGone;
        };
        // SAFETY: kill(2) on our own child's pid, which `child` has not
        // reaped yet (`id()` is `Some`), so the pid cannot name another
        // process.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let stop_until = Instant::now() + Duration::from_millis(STOP_GRACE_MS);
        while Instant::now() < stop_until {
            if !self.is_alive() {
                self.isolation.release();
                return Retired::Terminated { cut_short: left };
            }
            tokio::time::sleep(poll).await;
        }
        self.stop().await;
        Retired::Killed { cut_short: left }
    }
}

/// How a retired instance ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retired {
    /// It had exited already.
    AlreadyGone,
    /// It exited on SIGTERM; `cut_short` requests were still in flight
    /// when the drain grace ran out (0: all finished).
    Terminated { cut_short: usize },
    /// It ignored SIGTERM for [`STOP_GRACE_MS`] and was killed.
    Killed { cut_short: usize },
}

/// One look at a supervised process, recorded with a route observation
/// (process uptime and restart count, SPEC §6). Never evidence of serving:
/// the rules do not read it (S11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessSample {
    /// Whether the process is running.
    pub running: bool,
    /// Milliseconds since the current process started; 0 when not running.
    pub uptime_ms: u64,
    /// [`Instance::restart_count`].
    pub restarts: u32,
}

/// The process behind the route: a sample of the instance of the release
/// the route forwards to, or `None` when the route forwards nowhere or no
/// instance of that release is supervised.
pub fn route_process(
    current: Option<crate::proxy::Backend>,
    instances: &mut HashMap<Digest, Instance>,
) -> Option<ProcessSample> {
    current
        .and_then(|b| instances.get_mut(&b.release))
        .map(Instance::sample)
}

/// How often [`Instance::start`] tries a fresh port before giving up.
pub const START_ATTEMPTS_MAX: u32 = 3;

/// Whether process `pid` or one of its descendants (a run command may be a
/// wrapper that forks) holds a TCP socket listening on `port`: `None` when
/// `/proc` cannot tell (not Linux, or not readable), so the caller falls
/// back to connecting.
fn listener_owned_by(pid: u32, port: u16) -> Option<bool> {
    // Netlink names the listeners alone; the `/proc` tables list every
    // socket of the namespace, so they are read only when netlink cannot
    // answer or finds none (a caller asks once something answered).
    let listening = match crate::listeners::listening_inodes(port) {
        Some(inodes) if !inodes.is_empty() => inodes
            .iter()
            .map(|inode| format!("socket:[{inode}]"))
            .collect(),
        _ => listening_in_proc_tables(port)?,
    };
    if listening.is_empty() {
        return Some(false);
    }
    let holds = |p: u32| {
        std::fs::read_dir(format!("/proc/{p}/fd")).is_ok_and(|fds| {
            fds.flatten().any(|fd| {
                std::fs::read_link(fd.path())
                    .is_ok_and(|target| listening.iter().any(|l| target.as_os_str() == l.as_str()))
            })
        })
    };
    Some(family_of(pid).into_iter().any(holds))
}

/// The `socket:[inode]` names of the sockets listening on `port`, from
/// `/proc/net/tcp{,6}`; `None` when neither table is readable.
pub(crate) fn listening_in_proc_tables(port: u16) -> Option<Vec<String>> {
    // Inodes of sockets in LISTEN state (0A) on `port`, IPv4 and IPv6.
    let mut listening = Vec::new();
    let mut readable = false;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        readable = true;
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) =
                (fields.get(1), fields.get(3), fields.get(9))
            else {
                continue;
            };
            let local_port = local
                .rsplit(':')
                .next()
                .and_then(|hex| u16::from_str_radix(hex, 16).ok());
            if *state == "0A" && local_port == Some(port) {
                listening.push(format!("socket:[{inode}]"));
            }
        }
    }
    readable.then_some(listening)
}

/// `pid` and its descendants, from the parent ids in `/proc/*/stat`.
fn family_of(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(child) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            // "pid (comm) state ppid ...": comm may hold spaces, so read
            // after the last ')'.
            let ppid = std::fs::read_to_string(entry.path().join("stat"))
                .ok()
                .and_then(|stat| {
                    let rest = stat.rsplit_once(')')?.1.to_string();
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                });
            if let Some(ppid) = ppid {
                parents.push((child, ppid));
            }
        }
    }
    let mut family = vec![pid];
    let mut i = 0;
    while i < family.len() {
        let parent = family[i];
        family.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    family
}

fn free_port(release: Digest) -> Result<u16, SuperviseError> {
    // Bind port 0, read the port the kernel chose, release it for the app.
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .map_err(|source| SuperviseError::Port { release, source })?;
    let port = listener
        .local_addr()
        .map_err(|source| SuperviseError::Port { release, source })?
        .port();
    Ok(port)
}

/// The release's limits prepared for the instance on `port`, and logged
/// as applied (the proof's process row says the same).
pub(crate) fn isolate(
    spec: &AppSpec,
    port: u16,
) -> Result<crate::isolation::Prepared, SuperviseError> {
    if spec.limits.is_empty() {
        return Ok(crate::isolation::Prepared::default());
    }
    let name = format!("{}-{port}", &spec.release.to_hex()[..12]);
    let found = if spec.cgroups {
        crate::isolation::Hierarchies::detect()
    } else {
        crate::isolation::Hierarchies::default()
    };
    let prepared = crate::isolation::prepare(&spec.limits, &name, &found).map_err(|source| {
        SuperviseError::Isolation {
            release: spec.release,
            source,
        }
    })?;
    tracing::info!(release = %spec.release, port, isolation = %prepared.applied, "limits applied");
    Ok(prepared)
}

fn spawn(
    spec: &AppSpec,
    port: u16,
    isolation: &std::sync::Arc<crate::isolation::Prepared>,
) -> Result<Child, SuperviseError> {
    let (program, args) = spec.run.split_first().ok_or(SuperviseError::EmptyCommand {
        release: spec.release,
    })?;
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(&spec.dir)
        .env("PORT", port.to_string())
        .env("FLEETWEFT_RELEASE", spec.code.to_hex())
        .envs(spec.data.iter().map(|d| ("FLEETWEFT_DATA_DIR", d)))
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe; it makes the
    // kernel kill the app when the agent dies (even by SIGKILL), so a
    // restarted agent never finds orphaned instances squatting ports.
    // The limits follow (cgroups joined, rlimits set, the user taken
    // last): `Prepared::in_child` only makes syscalls on memory prepared
    // before the fork.
    let isolation = std::sync::Arc::clone(isolation);
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            isolation.in_child()
        });
    }
    command.spawn().map_err(|source| SuperviseError::Spawn {
        release: spec.release,
        program: program.clone(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An instance retired while a request is in flight waits for it, then
    /// stops on SIGTERM (a Python server exits on it), well before the
    /// SIGKILL bound.
    #[tokio::test]
    async fn a_retired_instance_drains_then_stops_on_sigterm() {
        let dir = tempfile::tempdir().expect("temp");
        let spec = AppSpec {
            release: Digest::repeat(9),
            code: Digest::repeat(9),
            dir: dir.path().to_path_buf(),
            run: [
                "sh",
                "-c",
                "exec python3 -m http.server --bind 127.0.0.1 $PORT",
            ]
            .map(String::from)
            .to_vec(),
            env: Vec::new(),
            limits: Default::default(),
            cgroups: true,
            data: None,
        };
        let mut instance = Instance::start(spec).await.expect("starts");
        assert!(instance.is_alive());
        let pid = instance.child.id().expect("pid");
        let begun = Instant::now();
        let held = Duration::from_millis(300);
        let in_flight = move |_port: u16| usize::from(begun.elapsed() < held);
        let ended = instance.retire(in_flight).await;
        assert!(begun.elapsed() >= held, "stopped before its request ended");
        assert!(
            begun.elapsed() < Duration::from_millis(STOP_GRACE_MS),
            "needed SIGKILL"
        );
        assert_eq!(ended, Retired::Terminated { cut_short: 0 });
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "reaped"
        );
    }

    /// A listener is told apart by who holds it: this is what keeps a start
    /// from mistaking another process's socket on the chosen port for the
    /// app's.
    #[test]
    fn a_listener_belongs_to_the_process_that_holds_it() {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind");
        let port = listener.local_addr().expect("addr").port();
        assert_eq!(listener_owned_by(std::process::id(), port), Some(true));
        let mut other = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("spawn sleep");
        assert_eq!(listener_owned_by(other.id(), port), Some(false));
        let _ = other.kill();
        let _ = other.wait();
        drop(listener);
        assert_eq!(listener_owned_by(std::process::id(), port), Some(false));
    }
}
