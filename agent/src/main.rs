//! `fleetweft-agent --config agent.toml [--allow-fault-injection]`
//!
//! Exit codes: 2 for an unreadable or invalid config, or an identity that
//! fails its startup checks (key/certificate mismatch, another node's
//! certificate, a foreign CA, expired or not yet valid), 1 if it cannot start
//! or cannot load its TLS identity when reconnecting; 0 after SIGTERM or
//! SIGINT (`docs/operations.md`, "Exit codes").
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use agent::cli::Args;
use clap::Parser;
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(agent::log_colour())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let cfg = match agent::config::AgentConfig::load(&args.config) {
        Ok(c) => agent::config::AgentConfig {
            platform: args.platform(),
            ..c
        },
        Err(e) => {
            eprintln!("fleetweft-agent: {e}");
            return ExitCode::from(2);
        }
    };
    // Checked before anything else: an identity that can never complete a
    // handshake, or that would connect as another node, is refused here,
    // naming the files, instead of being retried on every reconnect.
    match agent::config::check_identity(&cfg) {
        Ok(identity) => tracing::info!(
            node = %identity.node,
            fingerprint = %hex::encode(identity.fingerprint),
            "TLS identity checked"
        ),
        Err(e) => {
            eprintln!(
                "fleetweft-agent: {}: identity refused: {e}",
                args.config.display()
            );
            return ExitCode::from(2);
        }
    }
    let node = cfg.node.clone();
    let run = async {
        let agent = agent::daemon::Agent::start(cfg, args.allow_fault_injection).await?;
        agent.run().await
    };
    // On a stop signal the agent is dropped where it is: every step is
    // journaled (fsynced) before it acts, so this is as safe as a crash,
    // and dropping kills the app instances (kill_on_drop) and the
    // connection with it.
    let result = tokio::select! {
        result = run => result,
        signal = agent::shutdown_signal() => match signal {
            Ok(name) => {
                tracing::info!("{name}: stopping (journal is durable; apps stopped)");
                Ok(())
            }
            Err(e) => Err(anyhow::Error::new(e).context("installing the stop-signal handlers")),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fleetweft-agent {node}: {e:#}");
            ExitCode::from(1)
        }
    }
}
