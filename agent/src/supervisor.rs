//! Running app instances: one process per installed release, on a private
//! loopback port, restarted within a bound. A running process is not
//! evidence of anything; the route probe is. The supervisor only keeps
//! processes up and says how often it had to.

use model::Digest;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// How long a started app may take to accept connections.
pub const APP_START_TIMEOUT_MS: u64 = 10_000;
/// Restarts tolerated within [`RESTART_WINDOW_MS`] before the instance is
/// declared to be in a restart loop and left down.
pub const RESTARTS_MAX: u32 = 3;
/// The window over which restarts are counted.
pub const RESTART_WINDOW_MS: u64 = 30_000;

/// What to run for one release.
#[derive(Clone, Debug)]
pub struct AppSpec {
    pub release: Digest,
    /// The release's directory (holds the app file); the working directory.
    pub dir: PathBuf,
    /// argv, e.g. `["python3", "app.py"]`.
    pub run: Vec<String>,
    /// Extra environment (fault injection only, see the agent config).
    pub env: Vec<(String, String)>,
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
    /// Restarts since the instance was first started.
    pub restart_count: u32,
    /// Set once the restart bound was exceeded: the instance stays down.
    pub looping: bool,
}

impl Instance {
    /// Start an instance on a free private port and wait until it listens.
    pub async fn start(spec: AppSpec) -> Result<Instance, SuperviseError> {
        let port = free_port(spec.release)?;
        let child = spawn(&spec, port)?;
        let mut instance = Instance {
            spec,
            port,
            child,
            started: Instant::now(),
            restarts: Vec::new(),
            restart_count: 0,
            looping: false,
        };
        instance.wait_listening().await?;
        Ok(instance)
    }

    async fn wait_listening(&mut self) -> Result<(), SuperviseError> {
        let deadline = Instant::now() + Duration::from_millis(APP_START_TIMEOUT_MS);
        while Instant::now() < deadline {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return Ok(());
            }
            if !self.is_alive() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(SuperviseError::NotListening {
            release: self.spec.release,
        })
    }

    /// Whether the process is still running.
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Seconds since the current process started.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Restart the process if it died, within the restart bound. Returns
    /// whether it is (now) running.
    pub async fn keep_alive(&mut self) -> bool {
        if self.is_alive() {
            return true;
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
        match spawn(&self.spec, self.port) {
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
    }
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

fn spawn(spec: &AppSpec, port: u16) -> Result<Child, SuperviseError> {
    let (program, args) = spec.run.split_first().ok_or(SuperviseError::EmptyCommand {
        release: spec.release,
    })?;
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(&spec.dir)
        .env("PORT", port.to_string())
        .env("FLEETWEFT_RELEASE", spec.release.to_hex())
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe; it makes the
    // kernel kill the app when the agent dies (even by SIGKILL), so a
    // restarted agent never finds orphaned instances squatting ports.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.spawn().map_err(|source| SuperviseError::Spawn {
        release: spec.release,
        program: program.clone(),
        source,
    })
}
