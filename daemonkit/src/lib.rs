//! What both Fleetweft daemons, the controller and the node agent, need
//! from their process: the stop signal they exit 0 on and the rule for
//! colour in their logs. Moved out of the agent so the controller no
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

#[cfg(test)]
mod tests {
    use super::colour_allowed;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour_allowed(true, None));
        assert!(colour_allowed(true, Some(OsStr::new(""))));
        assert!(!colour_allowed(true, Some(OsStr::new("1"))));
        assert!(!colour_allowed(false, None));
    }
}
