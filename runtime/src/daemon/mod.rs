//! The controller daemon: `fleetweft controller --config controller.toml`.
//! One core task owns the durable controller; agent connections, the
//! operator API and deadlines only send it inputs.

pub mod api;
pub mod bundles;
pub mod config;
pub mod core;
pub mod dashboard;
pub mod identity;
pub mod links;
pub mod openapi;
pub mod rate;
pub mod readback;
pub mod verify;

use anyhow::Context;
use config::ControllerConfig;
use std::sync::Arc;

/// The event log's directory inside the controller's data directory (where
/// `run` opens it; `fleetweft log --data` looks for it there).
pub const LOG_DIR: &str = "log";

/// Run the controller until the process is stopped.
pub async fn run(cfg: ControllerConfig, allow_faults: bool) -> anyhow::Result<()> {
    start(cfg, allow_faults).await?.serve().await
}

/// A controller daemon whose log is open, whose agents' endpoint accepts
/// connections, and whose API is bound but not yet served. In-process
/// tests hold one to reach its [`core::CoreHandle`].
pub struct Daemon {
    /// The core: what the API and the agent connections send commands to.
    pub core: core::CoreHandle,
    api: api::Api,
    api_listener: tokio::net::TcpListener,
}

/// Open the log, bind QUIC and the API, start the core and accept agents.
pub async fn start(cfg: ControllerConfig, allow_faults: bool) -> anyhow::Result<Daemon> {
    let log_dir = cfg.data_dir.join("log");
    let bundle_dir = cfg.data_dir.join("bundles");
    let (bundle_dir, _removed) = bundles::BundleDir::open(bundle_dir.clone())
        .with_context(|| format!("opening the bundle directory {}", bundle_dir.display()))?;
    // A corrupt log stops the daemon here, naming the sequence: never repaired.
    let (controller, history) = crate::controller::Controller::open_with_events(&log_dir)
        .with_context(|| format!("opening the event log in {}", log_dir.display()))?;
    tracing::info!(
        events = history.len(),
        "event log replayed; state rebuilt from {}",
        log_dir.display()
    );
    let token = protocol::pki::load_operator_token(&cfg.tls.operator_token)
        .context("loading the operator token")?;
    let key = protocol::bundle::load_verifying_key(&cfg.bundles.pubkey)
        .context("loading the bundle public key")?;
    // The handshake refuses revoked certificates; the core fills the list
    // from the log before the endpoint accepts anyone.
    let deny = protocol::tls::DenyList::default();
    let identity =
        protocol::tls::ServerIdentity::from_pem_files(&cfg.tls.ca, &cfg.tls.cert, &cfg.tls.key)
            .context("loading the controller's TLS identity")?
            .with_deny_list(deny.clone());
    let endpoint = protocol::quic::ControllerEndpoint::bind(cfg.listen, identity)
        .with_context(|| format!("binding QUIC on {}", cfg.listen))?;
    let api_listener = tokio::net::TcpListener::bind(cfg.api.listen)
        .await
        .with_context(|| format!("binding the API on {}", cfg.api.listen))?;
    let cfg = Arc::new(cfg);
    let core = core::spawn(controller, history, (*cfg).clone(), allow_faults, deny);
    let bundles = Arc::new(bundle_dir);
    tokio::spawn(links::serve(
        endpoint,
        cfg.clone(),
        core.clone(),
        bundles.clone(),
    ));
    let api = api::Api {
        cfg: cfg.clone(),
        core: core.clone(),
        token: Arc::new(token),
        bundles,
        key: Arc::new(key),
    };
    if cfg.verify.every_s > 0 {
        tracing::info!(
            "periodic verification on: every connected node read back every {} s",
            cfg.verify.every_s
        );
        tokio::spawn(verify::verify_forever(api.clone(), cfg.verify.every_s));
    }
    tracing::info!(
        "controller up: agents on {}, API on http://{}",
        cfg.listen,
        cfg.api.listen
    );
    Ok(Daemon {
        core,
        api,
        api_listener,
    })
}

impl Daemon {
    /// Serve the API until the process is stopped.
    pub async fn serve(self) -> anyhow::Result<()> {
        axum::serve(self.api_listener, api::router(self.api))
            .await
            .context("serving the API")?;
        Ok(())
    }
}
