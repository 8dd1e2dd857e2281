//! Mounting and unmounting.

use crate::fs::{lock, LazyFs};
use crate::state::State;
use crate::{CutReport, LazyConfig, LazyError, TearMode};
use fuser::{BackgroundSession, MountOption};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::{info, warn};

/// How long `Drop` waits for the FUSE session thread after unmounting.
const JOIN_TIMEOUT: Duration = Duration::from_secs(10);

/// A mounted lazy filesystem. Dropping it unmounts it; pending state is
/// then dropped too (the backing directory keeps only the durable state).
pub struct LazyMount {
    mountpoint: PathBuf,
    state: Arc<Mutex<State>>,
    /// Syncs held since power failed ([`crate::PowerLine`]).
    held: Arc<Mutex<Vec<fuser::ReplyEmpty>>>,
    session: Option<BackgroundSession>,
}

impl std::fmt::Debug for LazyMount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyMount")
            .field("mountpoint", &self.mountpoint)
            .finish_non_exhaustive()
    }
}

impl LazyMount {
    /// Mounts `config.backing` lazily at `mountpoint` (both must exist).
    pub fn mount(mountpoint: &Path, config: LazyConfig) -> Result<LazyMount, LazyError> {
        if config.tear != TearMode::None && config.block_bytes == 0 {
            return Err(LazyError::Config("block_bytes must be > 0 to tear".into()));
        }
        let backing_err = |source| LazyError::Backing {
            path: config.backing.clone(),
            source,
        };
        let backing = config.backing.canonicalize().map_err(backing_err)?;
        let config = LazyConfig { backing, ..config };
        let state = State::load(&config).map_err(backing_err)?;
        let state = Arc::new(Mutex::new(state));
        let mount_err = |source| LazyError::Mount {
            path: mountpoint.to_path_buf(),
            source,
        };
        let mountpoint = mountpoint.canonicalize().map_err(mount_err)?;
        let held = Arc::new(Mutex::new(Vec::new()));
        let fs = LazyFs {
            state: Arc::clone(&state),
            power: config.power.clone(),
            held: Arc::clone(&held),
        };
        let options = [
            MountOption::FSName("lazyfs".into()),
            MountOption::Subtype("lazyfs".into()),
        ];
        let session = match fuser::spawn_mount2(fs, &mountpoint, &options) {
            Ok(session) => session,
            Err(e) => {
                // Leave no store behind in the backing directory.
                let _ = lock(&state).remove_store();
                return Err(mount_err(e));
            }
        };
        info!(mountpoint = %mountpoint.display(), backing = %config.backing.display(), "lazyfs: mounted");
        Ok(LazyMount {
            mountpoint,
            state,
            held,
            session: Some(session),
        })
    }

    /// Drops all pending state now and reports what was dropped by this cut.
    pub fn cut(&self) -> CutReport {
        let report = lock(&self.state).cut();
        // Syncs held because power failed never happened: their callers
        // (dead by now, in a power-cut harness) learn only that they failed.
        let held: Vec<_> = self
            .held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .drain(..)
            .collect();
        for reply in held {
            reply.error(libc::EIO);
        }
        report
    }

    /// Syncs held unanswered right now because the power line tripped.
    pub fn held_syncs(&self) -> usize {
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .len()
    }

    /// Totals since the mount: syncs, cuts and everything cuts dropped.
    pub fn report(&self) -> CutReport {
        lock(&self.state).totals.clone()
    }

    /// The (canonical) mountpoint.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// False once the session has ended (e.g. someone ran `umount`).
    pub fn is_alive(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| !s.guard.is_finished())
    }

    /// Detaches the mount if fuser's own (non-lazy) unmount left it there
    /// because it was busy, so Drop never hangs on a busy mount.
    fn detach_if_mounted(&self) {
        let Ok(path) = CString::new(self.mountpoint.as_os_str().as_bytes()) else {
            return;
        };
        // SAFETY: `path` is a valid NUL-terminated string for the call.
        let rc = unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
        let err = std::io::Error::last_os_error();
        // EINVAL: not a mountpoint any more, the normal case.
        if rc != 0 && err.raw_os_error() != Some(libc::EINVAL) {
            warn!(mountpoint = %self.mountpoint.display(), error = %err, "lazyfs: unmount failed");
        }
    }
}

impl Drop for LazyMount {
    fn drop(&mut self) {
        for reply in self
            .held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .drain(..)
        {
            reply.error(libc::EIO);
        }
        let Some(session) = self.session.take() else {
            return;
        };
        // Moving the guard out drops the rest of the session, whose mount
        // guard unmounts, at the end of this block.
        let guard = {
            let session = session;
            session.guard
        };
        self.detach_if_mounted();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(guard.join());
        });
        match rx.recv_timeout(JOIN_TIMEOUT) {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => warn!(error = %e, "lazyfs: session ended with an error"),
            Ok(Err(_)) => warn!("lazyfs: session thread panicked"),
            Err(_) => warn!("lazyfs: session thread did not end after unmount"),
        }
        // Nothing in the store is durable (see the state module's docs).
        if let Err(e) = lock(&self.state).remove_store() {
            warn!(error = %e, "lazyfs: removing the store at unmount failed");
        }
        info!(mountpoint = %self.mountpoint.display(), "lazyfs: unmounted");
    }
}
