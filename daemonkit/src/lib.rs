//! What both Fleetweft daemons, the controller and the node agent, need
//! from their process: the stop signal they exit 0 on, the rule for
//! colour in their logs and the watch that logs a stalled runtime (the
//! fleet simulator uses it too). Moved out of the agent so the controller no
//! longer depends on the agent crate.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

/// Whether daemon logs on stderr may carry ANSI colour: only on a terminal
/// and without `NO_COLOR` (<https://no-color.org>), so log files and
/// journald get plain text. Used by the agent and the controller.
pub fn log_colour() -> bool {
    use std::io::IsTerminal;
    colour_allowed(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

/// [`log_colour`]'s rule: a terminal, and `NO_COLOR` unset or empty.
pub fn colour_allowed(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Wait for SIGTERM (service managers, `kill`) or SIGINT (Ctrl-C) and name
/// it: the daemons stop in order on either and exit 0, instead of dying by
/// the signal (exit 143). An error when the handlers cannot be installed.
pub async fn shutdown_signal() -> std::io::Result<&'static str> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    })
}

/// How often [`StallWatch`] wakes, in milliseconds.
pub const STALL_TICK_MS: u64 = 100;
/// How late a wake must be before [`StallWatch`] reports it, in
/// milliseconds: a tenth of a connection's 10 s idle timeout, far above
/// the scheduler's ordinary jitter.
pub const STALL_REPORT_MS: u64 = 1_000;

/// Notices when the async runtime stops running its tasks: a timer of
/// [`STALL_TICK_MS`] that fires [`STALL_REPORT_MS`] or more late means
/// every worker was busy (or the process was off the CPU) for that long,
/// and no connection was served meanwhile. With 100,000 QUIC connections a
/// stall of a few seconds times connections out; this tells which process
/// stalled (issue #22 item 5).
#[derive(Debug, Default)]
pub struct StallWatch {
    stalls: u64,
}

impl StallWatch {
    /// Waits for the next stall and returns how late the timer fired.
    pub async fn next_stall(&mut self) -> std::time::Duration {
        let tick = std::time::Duration::from_millis(STALL_TICK_MS);
        let report = std::time::Duration::from_millis(STALL_REPORT_MS);
        loop {
            let asked = tokio::time::Instant::now() + tick;
            tokio::time::sleep_until(asked).await;
            let late = tokio::time::Instant::now().saturating_duration_since(asked);
            if late >= report {
                self.stalls += 1;
                return late;
            }
        }
    }

    /// Stalls seen so far.
    pub fn stalls(&self) -> u64 {
        self.stalls
    }
}

/// Spawns a task that logs every stall of the runtime it runs on (a
/// warning naming `process` and how late the timer fired).
pub fn spawn_stall_log(process: &'static str) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut watch = StallWatch::default();
        loop {
            let late = watch.next_stall().await;
            tracing::warn!(
                "{process}: the async runtime ran no timer for {} ms (stall {})",
                late.as_millis() + u128::from(STALL_TICK_MS),
                watch.stalls()
            );
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour_allowed(true, None));
        assert!(colour_allowed(true, Some(OsStr::new(""))));
        assert!(!colour_allowed(true, Some(OsStr::new("1"))));
        assert!(!colour_allowed(false, None));
    }

    /// A worker blocked for 1.3 s is seen as a stall of at least a second;
    /// an idle runtime shows none.
    #[test]
    fn a_blocked_runtime_is_reported_and_an_idle_one_is_not() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let mut idle = StallWatch::default();
            let quiet =
                tokio::time::timeout(std::time::Duration::from_millis(600), idle.next_stall())
                    .await;
            assert!(quiet.is_err(), "an idle runtime reported {quiet:?}");
            let watched = tokio::spawn(async {
                let mut watch = StallWatch::default();
                (watch.next_stall().await, watch.stalls())
            });
            // Let the watch arm its timer, then hold the only worker.
            tokio::task::yield_now().await;
            std::thread::sleep(std::time::Duration::from_millis(1_300));
            let (late, stalls) = watched.await.expect("the watch");
            assert!(
                late >= std::time::Duration::from_millis(STALL_REPORT_MS),
                "{late:?}"
            );
            assert_eq!(stalls, 1);
        });
    }
}
