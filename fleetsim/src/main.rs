//! `fleetweft-fleetsim --agents N [...] [--json]`: see the crate docs.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use clap::Parser;
use fleetsim::options::Options;

fn main() -> std::process::ExitCode {
    let options = Options::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fleetsim: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let result = runtime.block_on(async {
        // The simulator's stalls are logged as the controller's are: either
        // side stalling for seconds times connections out.
        let _stall_log = daemonkit::spawn_stall_log("fleetsim");
        fleetsim::run::run(&options).await
    });
    // Agent tasks and the route server are still running: do not wait.
    runtime.shutdown_background();
    match result {
        Ok(report) => {
            if options.json {
                match serde_json::to_string_pretty(&report) {
                    Ok(text) => println!("{text}"),
                    Err(e) => eprintln!("fleetsim: cannot encode the report: {e}"),
                }
            } else {
                print!("{}", fleetsim::report::human(&report));
            }
            match &options.expect {
                Some(want) if *want != report.rollout.status => {
                    eprintln!(
                        "fleetsim: expected the rollout to end {want}, it is {}",
                        report.rollout.status
                    );
                    std::process::ExitCode::from(1)
                }
                _ => std::process::ExitCode::SUCCESS,
            }
        }
        Err(e) => {
            eprintln!("fleetsim: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
