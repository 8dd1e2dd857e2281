//! The controller daemon: `fleetweft controller --config controller.toml`.
//! One core task owns the durable controller; agent connections, the
//! operator API and deadlines only send it inputs.

pub mod ahead;
pub mod api;
pub mod bundles;
pub mod config;
pub mod core;
pub mod dashboard;
pub mod deadlines;
pub mod ha;
pub mod http;
pub mod identity;
pub mod links;
pub mod openapi;
pub mod rate;
pub mod readback;
pub mod stream;
pub mod verify;
pub mod view;
pub mod webhooks;

use anyhow::Context;
use config::ControllerConfig;
use std::future::IntoFuture;
use std::sync::Arc;

/// The event log's directory inside the controller's data directory (where
/// `run` opens it; `fleetweft log --data` looks for it there).
pub const LOG_DIR: &str = "log";

/// How long an orderly stop waits for open API connections (event
/// streams, keep-alive clients) before it closes them.
pub const SHUTDOWN_GRACE_MS: u64 = 2_000;

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
    api: http::Api,
    api_listener: tokio::net::TcpListener,
}

/// Open the log, bind QUIC and the API, start the core and accept agents.
pub async fn start(cfg: ControllerConfig, allow_faults: bool) -> anyhow::Result<Daemon> {
    let bundle_dir = cfg.data_dir.join("bundles");
    let (bundle_dir, _removed) = bundles::BundleDir::open(bundle_dir.clone())
        .with_context(|| format!("opening the bundle directory {}", bundle_dir.display()))?;
    let (controller, history) = open_log(&cfg).await?;
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
    let hooks = webhooks::prepare(&cfg).context("loading the [[webhooks]] secrets")?;
    let log_end = controller.last_sequence();
    let cfg = Arc::new(cfg);
    let core = core::spawn(controller, history, (*cfg).clone(), allow_faults, deny);
    // Before bootstrap: a fresh controller's webhooks see its enrollments.
    webhooks::spawn_all(hooks, &core, log_end)?;
    let bundles = Arc::new(bundle_dir);
    bootstrap(&cfg, &core).await?;
    tokio::spawn(links::serve(endpoint, core.clone(), bundles.clone()));
    let api = http::Api {
        cfg: cfg.clone(),
        core: core.clone(),
        token: Arc::new(token),
        bundles,
        key: Arc::new(key),
        streams: Default::default(),
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

/// Opens the log the config names. sled: the directory under `data_dir`.
/// etcd: campaign until elected (a cold standby waits here, serving
/// nothing), then the fenced log ([`ha`]). A corrupt log stops the daemon
/// here, naming the sequence: never repaired.
async fn open_log(cfg: &ControllerConfig) -> anyhow::Result<ha::Elected> {
    let (elected, source) = match cfg.storage.etcd_config() {
        None => {
            let log_dir = cfg.data_dir.join(LOG_DIR);
            let opened = crate::controller::Controller::open_with_events(&log_dir)
                .with_context(|| format!("opening the event log in {}", log_dir.display()))?;
            (opened, log_dir.display().to_string())
        }
        Some(etcd) => {
            let candidate = format!("controller quic={} api={}", cfg.listen, cfg.api.listen);
            let source = format!("etcd {} at {}", etcd.endpoints.join(","), etcd.prefix);
            let opened =
                tokio::task::spawn_blocking(move || ha::campaign_and_open(&etcd, &candidate))
                    .await
                    .context("the campaign task")?
                    .with_context(|| format!("opening the event log on {source}"))?;
            (opened, source)
        }
    };
    tracing::info!(
        events = elected.1.len(),
        "event log replayed; state rebuilt from {source}"
    );
    Ok(elected)
}

/// Enroll each `[[nodes]]` entry of the config whose name is not enrolled
/// yet, in file order, through the core like any input: the config is a
/// bootstrap, not the roster. A node already enrolled keeps its id, name,
/// labels and route whatever the file says now, so a reordered or
/// shortened list changes nothing. On a log written before enrollment
/// existed the roster is empty and the entries take ids 0, 1, … in file
/// order: the positions that log already used.
pub async fn bootstrap(cfg: &ControllerConfig, core: &core::CoreHandle) -> anyhow::Result<()> {
    let missing: Vec<&config::NodeEntry> = {
        let roster = core.roster();
        cfg.nodes
            .iter()
            .filter(|n| roster.id(&n.name).is_none())
            .collect()
    };
    if missing.is_empty() {
        return Ok(());
    }
    tracing::info!(
        "enrolling {} node(s) of controller.toml's [[nodes]] not enrolled yet",
        missing.len()
    );
    let inputs = missing
        .iter()
        .map(|entry| model::controller::Input::EnrollNode {
            name: entry.name.clone(),
            labels: entry.labels.clone(),
            public: entry.public.to_string(),
        });
    let outcomes = core.submit_all(inputs).await;
    for (entry, outcome) in missing.iter().zip(outcomes) {
        outcome.with_context(|| format!("enrolling node {} from [[nodes]]", entry.name))?;
    }
    Ok(())
}

impl Daemon {
    /// Serve the API until SIGTERM or SIGINT: then answer the requests in
    /// flight, stop, and return Ok (exit 0). Every log append is durable
    /// before it is answered, so nothing is left to flush.
    pub async fn serve(self) -> anyhow::Result<()> {
        let (stopping, stopped) = tokio::sync::oneshot::channel::<()>();
        let stop = async move {
            match agent::shutdown_signal().await {
                Ok(name) => tracing::info!("{name}: stopping (the event log is durable)"),
                Err(e) => {
                    tracing::error!("cannot install the stop-signal handlers: {e}");
                    std::future::pending::<()>().await
                }
            }
            let _ = stopping.send(());
        };
        let server = axum::serve(self.api_listener, http::router(self.api))
            .with_graceful_shutdown(stop)
            .into_future();
        // A graceful shutdown waits for every open connection, and an
        // event stream never ends by itself: after the grace period the
        // stop goes on without them (a `watch` reconnects elsewhere).
        let grace = async {
            if stopped.await.is_ok() {
                tokio::time::sleep(std::time::Duration::from_millis(SHUTDOWN_GRACE_MS)).await;
            } else {
                std::future::pending::<()>().await
            }
        };
        tokio::select! {
            served = server => served.context("serving the API")?,
            () = grace => tracing::info!(
                "open API connections (event streams) closed after {SHUTDOWN_GRACE_MS} ms"
            ),
        }
        Ok(())
    }
}
