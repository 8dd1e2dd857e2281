//! `fleetweft-agent --config agent.toml [--allow-fault-injection]`

use clap::Parser;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "fleetweft-agent", about = "Fleetweft node agent")]
struct Args {
    /// Path to agent.toml.
    #[arg(long)]
    config: std::path::PathBuf,
    /// Honour the config's [faults] section (demos and tests only).
    #[arg(long)]
    allow_fault_injection: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let cfg = match agent::config::AgentConfig::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fleetweft-agent: {e}");
            return ExitCode::from(2);
        }
    };
    let node = cfg.node.clone();
    let result = async {
        let agent = agent::daemon::Agent::start(cfg, args.allow_fault_injection).await?;
        agent.run().await
    }
    .await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fleetweft-agent {node}: {e:#}");
            ExitCode::from(1)
        }
    }
}
