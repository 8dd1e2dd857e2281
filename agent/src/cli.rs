//! The agent's command line, in the library so `fleetweft completions`
//! and `fleetweft manpages` generate the agent's from the same definition.

use clap::Parser;

/// `fleetweft-agent`'s arguments.
#[derive(Parser, Debug)]
#[command(
    name = "fleetweft-agent",
    about = "Fleetweft node agent",
    after_help = "Exit codes: 2 if the config is unreadable or invalid, or its TLS identity fails \
                  the startup checks (key matches certificate, certificate names this node, is \
                  signed by the configured CA, is valid now); 1 if it cannot start \
                  (journal, bundle key, public port) or cannot load its TLS identity when \
                  reconnecting; 0 after SIGTERM or SIGINT (an orderly stop)."
)]
pub struct Args {
    /// Path to agent.toml.
    #[arg(long)]
    pub config: std::path::PathBuf,
    /// Honour the config's [faults] section (demos and tests only).
    #[arg(long)]
    pub allow_fault_injection: bool,
}
