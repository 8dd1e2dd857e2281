//! The controller daemon: `fleetweft controller --config controller.toml`.
//! One core task owns the durable controller; agent connections, the
//! operator API and deadlines only send it inputs.

pub mod ahead;
pub mod annex;
pub mod api;
pub mod bundles;
pub mod config;
pub mod config_api;
pub mod configuration;
pub mod console;
pub mod core;
pub mod error;
pub mod explore;
pub mod fatal;
pub mod ha;
pub mod housekeeping;
pub mod http;
pub mod link_msg;
pub mod links;
pub mod mirrors;
pub mod openapi;
pub mod operators_api;
pub mod probe;
pub mod rate;
pub mod readback;
pub mod release_api;
pub mod release_gc;
pub mod release_store;
pub mod sessions;
pub mod state;
pub mod stream;
pub mod verify;
pub mod webhooks;

/// The view layer and the role live in `api`, what clients share.
pub use ::api::{role, view};
/// The console's old name: the overview was `daemon::dashboard`.
pub use console as dashboard;

use anyhow::Context;
use config::ControllerConfig;
use std::future::IntoFuture;
use std::sync::Arc;

/// The event log's directory inside the controller's data directory (where
/// `run` opens it; `fleetweft log --data` looks for it there).
pub const LOG_DIR: &str = ::api::LOG_DIR;

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

/// The fleet's configuration key (issue #24 item 1), when it has one, and
/// the deployment documents' index, kept following the core's state.
fn configuration_state(
    cfg: &ControllerConfig,
    core: &core::CoreHandle,
) -> anyhow::Result<(
    Option<Arc<configuration::ConfigKey>>,
    Arc<configuration::Deployments>,
)> {
    let config_key = configuration::ConfigKey::load(&cfg.tls.config_key_path())
        .context("loading the configuration key")?
        .map(Arc::new);
    let deployments = Arc::new(configuration::Deployments::default());
    configuration::follow(core.clone(), deployments.clone(), config_key.clone());
    Ok((config_key, deployments))
}

/// Open the log, bind QUIC and the API, start the core and accept agents.
/// On etcd the daemon starts as a hot standby ([`ha`]): it serves both
/// endpoints at once and leads once elected.
pub async fn start(cfg: ControllerConfig, allow_faults: bool) -> anyhow::Result<Daemon> {
    let (bundle_dir, releases) = open_stores(&cfg)?;
    let opened = open_log(&cfg).await?;
    let token = protocol::pki::load_operator_token(&cfg.tls.operator_token)
        .context("loading the operator token")?;
    let key = protocol::bundle::load_verifying_key(&cfg.bundles.pubkey)
        .context("loading the bundle public key")?;
    // The handshake refuses revoked certificates; the core fills the list
    // from the log before the endpoint accepts anyone.
    let deny = protocol::tls::DenyList::default();
    let endpoint = bind_agents(&cfg, deny.clone())?;
    let api_listener = tokio::net::TcpListener::bind(cfg.api.listen)
        .await
        .with_context(|| format!("binding the API on {}", cfg.api.listen))?;
    let hooks = webhooks::prepare(&cfg).context("loading the [[webhooks]] secrets")?;
    let cfg = Arc::new(cfg);
    let role = match opened.campaign {
        None => role::Role::Leader,
        Some(_) => role::Role::Standby,
    };
    let core = core::spawn(opened.log, (*cfg).clone(), allow_faults, deny, role);
    let bundles = Arc::new(bundle_dir);
    let releases = Arc::new(releases);
    let (config_key, deployments) = configuration_state(&cfg, &core)?;
    let artifacts = Arc::new(release_store::Artifacts {
        bundles: bundles.clone(),
        releases: releases.clone(),
        deployments: deployments.clone(),
    });
    ha::close_links_when_deposed(endpoint.clone());
    // Computed once: it warns when it would point nowhere.
    let me = opened.campaign.as_ref().map(|_| advert(&cfg));
    let own_agents = me.as_ref().map(|advert| advert.agents.clone());
    let mirrors = serve_agents(&cfg, endpoint, core.clone(), artifacts, own_agents);
    let api = http::Api {
        cfg: cfg.clone(),
        core: core.clone(),
        bootstrap_credential: state::credential_digest(&token),
        bundles,
        releases,
        key: Arc::new(key),
        streams: Default::default(),
        live_streams: state::StreamSlots::new(state::LIVE_STREAMS_MAX),
        mirrors,
        release_gate: Default::default(),
        config_key,
        deployments,
        sessions: Default::default(),
    };
    match opened.campaign {
        None => lead(api.clone(), hooks).await?,
        Some((client, etcd)) => {
            let advert = me.unwrap_or_else(|| advert(&cfg));
            let hold = snapshot_hold(&cfg, allow_faults);
            let elected = ha::spawn_campaign(client, etcd, (advert, hold), core.clone());
            lead_once_elected(elected, api.clone(), hooks);
            tracing::info!("hot standby: following the log, serving reads until elected");
        }
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

/// A standby: once `elected` fires, start leading (or stop the daemon,
/// through its fatal report, when that fails).
fn lead_once_elected(
    elected: tokio::sync::oneshot::Receiver<()>,
    api: http::Api,
    hooks: Vec<webhooks::Webhook>,
) {
    tokio::spawn(async move {
        if elected.await.is_ok() {
            if let Err(e) = lead(api.clone(), hooks).await {
                tracing::error!("starting to lead failed, stopping: {e:#}");
                let why = format!("starting to lead failed: {e:#}");
                api.core.fatal().report(fatal::Fatal::LogFailed(why));
            }
        }
    });
}

/// The bundle directory and the release store under `data_dir`.
fn open_stores(
    cfg: &ControllerConfig,
) -> anyhow::Result<(bundles::BundleDir, release_store::ReleaseStore)> {
    let bundle_dir = cfg.data_dir.join("bundles");
    let (bundle_dir, _removed) = bundles::BundleDir::open(bundle_dir.clone())
        .with_context(|| format!("opening the bundle directory {}", bundle_dir.display()))?;
    let releases = release_store::ReleaseStore::open(&cfg.data_dir)
        .context("opening the release store (data_dir/chunks, data_dir/releases)")?;
    Ok((bundle_dir, releases))
}

/// Accept agents on `endpoint` (a task); returns the mirrors the links and
/// the API share.
fn serve_agents(
    cfg: &ControllerConfig,
    endpoint: protocol::quic::ControllerEndpoint,
    core: core::CoreHandle,
    artifacts: Arc<release_store::Artifacts>,
    own_agents: links::OwnAdvert,
) -> Arc<mirrors::Mirrors> {
    let mirrors = Arc::new(mirrors::Mirrors {
        config: cfg.artifacts.clone(),
        sources: Default::default(),
    });
    tokio::spawn(links::serve(
        endpoint,
        core,
        artifacts,
        own_agents,
        mirrors.clone(),
    ));
    mirrors
}

/// The QUIC endpoint agents connect to, refusing the certificates in
/// `deny`.
fn bind_agents(
    cfg: &ControllerConfig,
    deny: protocol::tls::DenyList,
) -> anyhow::Result<protocol::quic::ControllerEndpoint> {
    let identity =
        protocol::tls::ServerIdentity::from_pem_files(&cfg.tls.ca, &cfg.tls.cert, &cfg.tls.key)
            .context("loading the controller's TLS identity")?
            .with_deny_list(deny);
    protocol::quic::ControllerEndpoint::bind(cfg.listen, identity)
        .with_context(|| format!("binding QUIC on {}", cfg.listen))
}

/// `[faults] hold_in_snapshot_write`, honoured only with
/// `--allow-fault-injection` (and then announced loudly).
fn snapshot_hold(cfg: &ControllerConfig, allow_faults: bool) -> Option<std::path::PathBuf> {
    let file = cfg.faults.hold_in_snapshot_write.clone()?;
    if !allow_faults {
        tracing::warn!(
            "[faults] present but ignored: start with --allow-fault-injection to use it"
        );
        return None;
    }
    tracing::warn!(
        "FAULT INJECTION ENABLED: once {} exists, the next snapshot write holds before its manifest until killed",
        file.display()
    );
    Some(file)
}

/// What only the leader runs, started when it starts leading (at once on
/// sled, once elected on etcd): webhooks (a fresh cursor starts at the log
/// as folded now), the `[[nodes]]` bootstrap, periodic verification.
async fn lead(api: http::Api, hooks: Vec<webhooks::Webhook>) -> anyhow::Result<()> {
    // Before bootstrap: a fresh controller's webhooks see its enrollments.
    webhooks::spawn_all(hooks, &api.core, api.core.role().log_sequence())?;
    // Nodes first: on a fresh log they enroll before any operator exists,
    // as they always did (one event each); on a later start they enroll
    // as controller.toml's doing.
    bootstrap(&api.cfg, &api.core).await?;
    bootstrap_admin(&api.core, api.bootstrap_credential).await?;
    if api.cfg.verify.every_s > 0 {
        tracing::info!(
            "periodic verification on: every connected node read back every {} s",
            api.cfg.verify.every_s
        );
        tokio::spawn(verify::verify_forever(api.clone(), api.cfg.verify.every_s));
    }
    Ok(())
}

/// Where this controller says it is once it leads: `[storage]
/// advertise_api` / `advertise_agents`, else its listen addresses (a
/// warning when those are unspecified, `0.0.0.0`: hints would point
/// nowhere).
fn advert(cfg: &ControllerConfig) -> role::Advert {
    let api = cfg
        .storage
        .advertise_api
        .clone()
        .unwrap_or_else(|| format!("http://{}", cfg.api.listen));
    let agents = cfg
        .storage
        .advertise_agents
        .clone()
        .unwrap_or_else(|| cfg.listen.to_string());
    for (key, addr, set) in [
        (
            "advertise_api",
            cfg.api.listen,
            cfg.storage.advertise_api.is_some(),
        ),
        (
            "advertise_agents",
            cfg.listen,
            cfg.storage.advertise_agents.is_some(),
        ),
    ] {
        if !set && addr.ip().is_unspecified() {
            tracing::warn!(
                "listening on {addr}: set `storage.{key}` so standbys can point agents and operators here"
            );
        }
    }
    role::Advert { api, agents }
}

/// An opened log: the controller and its history, and, on etcd, the
/// client and configuration the standby campaigns with.
struct Opened {
    log: ha::Elected,
    campaign: Option<(
        (eventlog::EtcdClient, eventlog::LimitsProbed),
        eventlog::EtcdConfig,
    )>,
}

/// Opens the log the config names. sled: the directory under `data_dir`.
/// etcd: read-only, as a hot standby ([`ha::open_follower`]); the fenced
/// log comes once elected. A corrupt log stops the daemon here, naming the
/// sequence: never repaired.
async fn open_log(cfg: &ControllerConfig) -> anyhow::Result<Opened> {
    let (opened, source) = match cfg.storage.etcd_config() {
        None => {
            let log_dir = cfg.data_dir.join(LOG_DIR);
            let log = crate::driver::Controller::start(&log_dir, annex::Derived::decode)
                .with_context(|| format!("opening the event log in {}", log_dir.display()))?;
            let source = log_dir.display().to_string();
            (
                Opened {
                    log,
                    campaign: None,
                },
                source,
            )
        }
        Some(etcd) => {
            let source = format!("etcd {} at {}", etcd.endpoints.join(","), etcd.prefix);
            let config = etcd.clone();
            let follower = tokio::task::spawn_blocking(move || ha::open_follower(&config))
                .await
                .context("opening the log")?
                .with_context(|| format!("opening the event log on {source} read-only"))?;
            let opened = Opened {
                log: follower.opened,
                campaign: Some(((follower.client, follower.probed), etcd)),
            };
            (opened, source)
        }
    };
    let started = &opened.log;
    match &started.snapshot {
        Some(snapshot) => tracing::info!(
            covers = snapshot.covers,
            events = started.tail.len(),
            "state rebuilt from {source}: a snapshot of the first {} entries, then {} event(s) replayed",
            snapshot.covers,
            started.tail.len()
        ),
        None => tracing::info!(
            events = started.tail.len(),
            "event log replayed; state rebuilt from {source}"
        ),
    }
    Ok(opened)
}

/// The name the first operator is recorded under: the admin whose
/// credential is `[tls] operator_token` (issue #28 item 2).
pub const BOOTSTRAP_OPERATOR: &str = "admin";

/// On a log with no operator yet (a new fleet, or a log written before
/// operators existed), record the first: [`BOOTSTRAP_OPERATOR`], an admin,
/// whose credential is the operator token file's. Later starts find
/// operators and record nothing, whatever the file holds then: the token
/// file is only the first admin's credential, and a rotation replaces it.
async fn bootstrap_admin(core: &core::CoreHandle, credential: model::Digest) -> anyhow::Result<()> {
    if !core.operators().is_empty() {
        return Ok(());
    }
    let input = model::controller::Input::AddOperator {
        name: BOOTSTRAP_OPERATOR.to_string(),
        role: model::controller::Role::Admin,
        credential,
    };
    core.submit(input)
        .await
        .context("recording the first operator (the operator token's admin)")?;
    tracing::info!(
        "recorded operator {BOOTSTRAP_OPERATOR} (admin), whose credential is the operator token file's"
    );
    Ok(())
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
    // Collected before the await: a lazy iterator's closure held across it
    // would make the future not `Send` for every lifetime (rustc #110338).
    let has_operators = !core.operators().is_empty();
    let mut inputs = Vec::with_capacity(missing.len());
    for entry in &missing {
        let enroll = model::controller::Input::EnrollNode {
            name: entry.name.clone(),
            labels: entry.labels.clone(),
            public: entry.public.to_string(),
        };
        // Once operators exist, recorded as controller.toml's doing (issue
        // #28 item 2); before, as every enrollment was.
        inputs.push(if has_operators {
            state::acting(model::controller::Actor::ControllerConfig, enroll)
        } else {
            enroll
        });
    }
    let outcomes = core.submit_all(inputs).await;
    for (entry, outcome) in missing.iter().zip(outcomes) {
        outcome.with_context(|| format!("enrolling node {} from [[nodes]]", entry.name))?;
    }
    Ok(())
}

impl Daemon {
    /// Serve the API until SIGTERM or SIGINT: then answer the requests in
    /// flight, stop, and return Ok (exit 0). Every log append is durable
    /// before it is answered, so nothing is left to flush. Returns a
    /// [`fatal::Fatal`] error at once when the daemon stops on its own
    /// (its log failed, it was deposed): `main` exits with its code.
    pub async fn serve(self) -> anyhow::Result<()> {
        let fatal = self.core.fatal().clone();
        // A stall of the runtime is logged: at 100,000 connections a few
        // seconds of it time connections out.
        let _stall_log = daemonkit::spawn_stall_log("controller");
        let (stopping, stopped) = tokio::sync::oneshot::channel::<()>();
        let stop = async move {
            match daemonkit::shutdown_signal().await {
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
            stopped = fatal.wait() => return Err(stopped.into()),
            () = grace => tracing::info!(
                "open API connections (event streams) closed after {SHUTDOWN_GRACE_MS} ms"
            ),
        }
        Ok(())
    }
}
