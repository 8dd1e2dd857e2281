//! A release's data migration on the node (issue #24 item 2): snapshot the
//! app's data directory, run the release's `migrate` command in the
//! release directory as the app runs (its environment with
//! `FLEETWEFT_DATA_DIR`, its limits and user), and put the snapshot back
//! when it fails. The core journaled the migration's start before this
//! runs (`model::agent::AgentEvent::MigrationStarted`), so a crash in the
//! middle is known after the restart, and the recovery table stops there.
//!
//! The baseline's instance keeps serving while the migration runs (the
//! route moves only once it succeeded): a migration must leave the data
//! readable by the release it replaces, or the app must tolerate the
//! change, for that time (`docs/operations.md`, "Data and migrations").

use crate::app_data::{self, SnapshotError};
use crate::supervisor::AppSpec;
use std::path::Path;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// How long a migration may run before it is killed and counted failed,
/// in milliseconds.
pub const MIGRATE_TIMEOUT_MS: u64 = 600_000;
/// How much of the command's standard error the failure keeps, in bytes
/// (its last bytes).
pub const MIGRATE_STDERR_BYTES_MAX: usize = 4096;

/// Why a migration failed. Whatever it is, the data is as it was before:
/// refused before anything changed, or put back from the snapshot.
#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    /// The app has no data directory (a release the agent runs without one).
    #[error("release {release}: no data directory to migrate")]
    NoDataDir { release: model::Digest },
    /// The snapshot could not be taken (over its bound, or IO): nothing
    /// was changed and the command did not run.
    #[error("release {release}: {source}")]
    Snapshot {
        release: model::Digest,
        #[source]
        source: SnapshotError,
    },
    /// The command could not start (its limits, its program).
    #[error("release {release}: cannot start the migration: {detail}")]
    Start {
        release: model::Digest,
        detail: String,
    },
    /// The command exited non-zero (or was killed).
    #[error("release {release}: the migration exited with {status}: {stderr}")]
    Exited {
        release: model::Digest,
        status: std::process::ExitStatus,
        stderr: String,
    },
    /// The command ran past its timeout and was killed.
    #[error("release {release}: the migration ran past {timeout_ms} ms and was killed")]
    TimedOut {
        release: model::Digest,
        timeout_ms: u64,
    },
    /// The command failed and its snapshot could not be put back: the
    /// data directory may hold what the command left (a person must
    /// look; the snapshot is kept where it was).
    #[error("release {release}: {failure}; and the snapshot could not be put back: {source}")]
    NotRestored {
        release: model::Digest,
        failure: String,
        #[source]
        source: SnapshotError,
    },
}

/// Runs `command` as the migration of the app `spec` describes: snapshot
/// (within `bytes_max`), command (within `timeout`), and on failure the
/// snapshot put back. On success the snapshot stays for a roll back; the
/// daemon discards it once the op settles.
pub async fn run(
    spec: &AppSpec,
    command: &[String],
    bytes_max: u64,
    timeout: Duration,
) -> Result<(), MigrationError> {
    let release = spec.release;
    let data = spec
        .data
        .clone()
        .ok_or(MigrationError::NoDataDir { release })?;
    let isolation = crate::supervisor::isolate(spec, 0).map_err(|e| MigrationError::Start {
        release,
        detail: e.to_string(),
    })?;
    let snapshot_error = |source| MigrationError::Snapshot { release, source };
    app_data::ensure(&data, isolation.owner()).map_err(|source| {
        snapshot_error(SnapshotError::Io {
            what: "creating",
            path: data.clone(),
            source,
        })
    })?;
    let snapshot = app_data::snapshot_for(&data);
    let bytes = app_data::snapshot(&data, &snapshot, bytes_max).map_err(snapshot_error)?;
    tracing::info!(%release, bytes, snapshot = %snapshot.display(), "data snapshotted; migrating");
    let isolation = std::sync::Arc::new(isolation);
    let ran = execute(spec, command, &data, &isolation, timeout).await;
    isolation.release();
    let Err(failure) = ran else {
        return Ok(());
    };
    match app_data::restore(&data, &snapshot) {
        Ok(_) => Err(failure),
        Err(source) => Err(MigrationError::NotRestored {
            release,
            failure: failure.to_string(),
            source,
        }),
    }
}

/// The command itself, as the app would run: in its release directory,
/// with its environment and its limits, killed with the agent.
async fn execute(
    spec: &AppSpec,
    command: &[String],
    data: &Path,
    isolation: &std::sync::Arc<crate::isolation::Prepared>,
    timeout: Duration,
) -> Result<(), MigrationError> {
    let release = spec.release;
    let start = |detail: String| MigrationError::Start { release, detail };
    let (program, args) = command
        .split_first()
        .ok_or_else(|| start("the migrate command is empty".into()))?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(&spec.dir)
        .env("FLEETWEFT_RELEASE", spec.code.to_hex())
        .env("FLEETWEFT_DATA_DIR", data)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let isolation = std::sync::Arc::clone(isolation);
    // SAFETY: as for an app instance (`supervisor::spawn`): prctl is
    // async-signal-safe, and `in_child` only makes syscalls on memory
    // prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            isolation.in_child()
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| start(format!("{program:?}: {e}")))?;
    let mut stderr = child.stderr.take();
    let waited = tokio::time::timeout(timeout, async {
        let tail = match stderr.as_mut() {
            Some(err) => tail_of(err).await,
            None => Vec::new(),
        };
        (child.wait().await, tail)
    })
    .await;
    let Ok((status, tail)) = waited else {
        let _ = child.kill().await;
        return Err(MigrationError::TimedOut {
            release,
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        });
    };
    let status = status.map_err(|e| start(format!("waiting for {program:?}: {e}")))?;
    if status.success() {
        return Ok(());
    }
    Err(MigrationError::Exited {
        release,
        status,
        stderr: String::from_utf8_lossy(&tail).trim().to_string(),
    })
}

/// The last [`MIGRATE_STDERR_BYTES_MAX`] bytes `from` gives until its end:
/// a chatty migration cannot fill the agent's memory.
async fn tail_of(from: &mut (impl tokio::io::AsyncRead + Unpin)) -> Vec<u8> {
    let mut tail = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 2 * MIGRATE_STDERR_BYTES_MAX {
            tail.drain(..tail.len() - MIGRATE_STDERR_BYTES_MAX);
        }
    }
    let from = tail.len().saturating_sub(MIGRATE_STDERR_BYTES_MAX);
    tail.split_off(from)
}
