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
    /// Declare this CPU architecture instead of the machine's own
    /// (`x86_64` or `aarch64`; `amd64`, `arm64` also read): the controller
    /// records it as the node's `arch` label and the agent stages that
    /// architecture's tree of a release. For simulating a mixed fleet on
    /// one machine; a node that declares another architecture than it has
    /// stages binaries it may not be able to run.
    #[arg(long, value_name = "ARCH", value_parser = parse_arch)]
    pub arch: Option<model::platform::Arch>,
    /// Declare this operating system instead of the machine's own
    /// (`linux`, `macos`; anything else reads as `other`).
    #[arg(long, value_name = "OS")]
    pub os: Option<String>,
}

impl Args {
    /// The platform the agent declares: the machine's own, overridden by
    /// `--arch` and `--os`.
    pub fn platform(&self) -> model::platform::Platform {
        let mut platform = model::platform::Platform::current();
        if let Some(arch) = self.arch {
            platform.arch = arch;
        }
        if let Some(os) = &self.os {
            platform.os = model::platform::Os::from_name(os);
        }
        platform
    }
}

/// `--arch`'s value: an architecture a release can carry a tree for.
pub fn parse_arch(text: &str) -> Result<model::platform::Arch, String> {
    model::platform::Arch::parse_tree_arch(text)
        .ok_or_else(|| format!("{text:?} is not x86_64 or aarch64 (nor amd64, arm64)"))
}
