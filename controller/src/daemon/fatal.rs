//! How the daemon stops on its own: an event log that failed (or refused
//! what a standby read or took over) and a lost leadership are [`Fatal`]
//! errors. The part of the daemon that meets one (the core, the campaign
//! and lease threads, housekeeping, the start of leading) reports it to
//! the daemon's [`FatalCell`] and stops acting there and then;
//! [`super::Daemon::serve`] returns it, and `main` exits with its code
//! (`docs/operations.md`, "Exit codes"). No daemon code exits the process.

use crate::driver::ControllerError;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Why the daemon stopped on its own.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Fatal {
    /// The event log failed while running, or the log a standby follows
    /// or takes over is refused: nothing more may be acknowledged.
    #[error("stopped: {0}")]
    LogFailed(String),
    /// The leadership is lost: another controller may lead the log.
    #[error("deposed: {0}")]
    Deposed(String),
}

impl Fatal {
    /// The process's exit code for it ([`api::exit`]): 3 for a failed log,
    /// 4 for a deposed leader.
    pub fn exit_code(&self) -> u8 {
        match self {
            Fatal::LogFailed(_) => api::exit::LOG_FAILED,
            Fatal::Deposed(_) => api::exit::DEPOSED as u8,
        }
    }
}

/// Where the daemon's first fatal error goes; cloned into everything the
/// daemon runs (it travels with the core's handle).
#[derive(Clone)]
pub struct FatalCell(Arc<watch::Sender<Option<Fatal>>>);

impl Default for FatalCell {
    fn default() -> Self {
        FatalCell(Arc::new(watch::channel(None).0))
    }
}

impl FatalCell {
    /// Record `fatal` (the first one wins) without stopping: for an async
    /// task that ends right after.
    pub fn report(&self, fatal: Fatal) {
        self.0.send_if_modified(|slot| {
            let first = slot.is_none();
            if first {
                *slot = Some(fatal);
            }
            first
        });
    }

    /// Record `fatal` if it is the first, without waking [`FatalCell::wait`]
    /// yet: the caller has something to finish first (a deposed leader
    /// closes its agents' links), and a later error met meanwhile must not
    /// replace the reason. [`FatalCell::hold_if_stopped`] already holds.
    fn claim_quietly(&self, fatal: Fatal) {
        self.0.send_if_modified(|slot| {
            if slot.is_none() {
                *slot = Some(fatal);
            }
            false
        });
    }

    /// Wake [`FatalCell::wait`] with the error recorded and stop the
    /// calling thread for good.
    fn announce_and_stop(&self) -> ! {
        self.0.send_modify(|_| {});
        park_forever()
    }

    /// Record `fatal` and stop the calling thread for good: nothing after
    /// it acts, and the process ends once `main` has the error.
    pub fn stop(&self, fatal: Fatal) -> ! {
        self.report(fatal);
        park_forever()
    }

    /// When the daemon has already stopped on a fatal error met elsewhere
    /// (the lease watch, the campaign), stop the calling thread too: the
    /// core calls it before it releases a batch's effects, so nothing
    /// leaves once the daemon is stopping.
    pub fn hold_if_stopped(&self) {
        if self.0.borrow().is_some() {
            park_forever()
        }
    }

    /// The first fatal error, once there is one.
    pub async fn wait(&self) -> Fatal {
        let mut seen = self.0.subscribe();
        // The sender lives in `self`: the channel never closes under us.
        let first = match seen.wait_for(Option::is_some).await {
            Ok(fatal) => fatal.clone(),
            Err(_) => None,
        };
        match first {
            Some(fatal) => fatal,
            None => std::future::pending().await,
        }
    }
}

/// Parks the calling thread for good; on a worker of the multi-threaded
/// runtime, first hands its other tasks to another worker (so the API
/// goes on and `Daemon::serve` sees the error).
fn park_forever() -> ! {
    fn park() -> ! {
        loop {
            std::thread::park();
        }
    }
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) if runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| park())
        }
        _ => park(),
    }
}

/// How long a deposed controller waits, after closing its agents' links,
/// for the close to be sent before it stops.
const CLOSE_FLUSH_MS: u64 = 100;

/// The agents' endpoint, closed by [`deposed`].
static AGENT_ENDPOINT: std::sync::OnceLock<protocol::quic::ControllerEndpoint> =
    std::sync::OnceLock::new();

/// Have [`deposed`] close `endpoint`'s connections before it stops: a
/// stop alone sends nothing, and each agent found the link dead only after
/// QUIC's idle timeout (10 s; scenario 20), so it reached the new leader
/// that much later.
pub fn close_links_when_deposed(endpoint: protocol::quic::ControllerEndpoint) {
    let _ = AGENT_ENDPOINT.set(endpoint);
}

/// Stops as a deposed leader ([`Fatal::Deposed`]): nothing more is
/// released. Every agent link is closed first (a QUIC close, which carries
/// nothing from the log), so the agents look for the new leader at once.
pub fn deposed(fatal: &FatalCell, why: &str) -> ! {
    tracing::error!(
        "deposed ({why}): another controller may lead the log; stopping without acting"
    );
    // Claimed before the links close: the lost quorum that cost the lease
    // also fails the core's next append within these milliseconds, and
    // that must not turn exit 4 (deposed) into exit 3 (scenario 21).
    fatal.claim_quietly(Fatal::Deposed(why.to_string()));
    if let Some(endpoint) = AGENT_ENDPOINT.get() {
        endpoint.close();
        std::thread::sleep(Duration::from_millis(CLOSE_FLUSH_MS));
    }
    fatal.announce_and_stop()
}

/// Whether a controller failure means this controller was deposed.
pub fn is_deposed(err: &ControllerError) -> bool {
    matches!(err, ControllerError::Log(log) if log.is_fencing())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fatal_error_has_its_documented_exit_code() {
        assert_eq!(Fatal::LogFailed("append".into()).exit_code(), 3);
        assert_eq!(Fatal::Deposed("lease lost".into()).exit_code(), 4);
        assert_eq!(
            i32::from(Fatal::Deposed(String::new()).exit_code()),
            super::super::ha::EXIT_DEPOSED
        );
    }

    #[tokio::test]
    async fn a_quiet_claim_wins_over_an_error_reported_before_it_is_announced() {
        let cell = FatalCell::default();
        cell.claim_quietly(Fatal::Deposed("lease lost".into()));
        cell.report(Fatal::LogFailed("append failed".into()));
        cell.0.send_modify(|_| {});
        assert_eq!(cell.wait().await, Fatal::Deposed("lease lost".into()));
    }

    #[tokio::test]
    async fn the_first_fatal_error_is_the_one_served() {
        let cell = FatalCell::default();
        let waiter = tokio::spawn({
            let cell = cell.clone();
            async move { cell.wait().await }
        });
        cell.report(Fatal::Deposed("first".into()));
        cell.report(Fatal::LogFailed("second".into()));
        let seen = waiter.await.expect("waiter");
        assert_eq!(seen, Fatal::Deposed("first".into()));
        assert_eq!(cell.wait().await, seen);
    }
}
