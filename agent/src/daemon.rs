//! The agent daemon: the `model::agent` core driven by real effects.
//!
//! The driver loop (`driver.rs`, shared with the fleet simulator) runs
//! handle → journal (fsync) → act, in that order: a record is durable
//! before the agent does anything on its account. The daemon holds no rule
//! of its own: what a command means, and whether staging retries, resumes
//! or stops (the recovery table), is `agent_step`'s to decide; the journal
//! is the core's events. The daemon is the loop's [`Host`]: it performs
//! the effects (route switches, probes, and fetching, verifying and
//! staging, `staging.rs`) and finds the leading controller between
//! sessions (`dial.rs`).

use crate::config::{AgentConfig, HoldPoint};
use crate::dial::{self, Dials, Ended};
use crate::driver::{self, Driver, Host};
use crate::journal::{Journal, Record, Stage};
use crate::liveness::{self, LinkHistory, Watch};
use crate::mirror::{self, Mirrors};
use crate::probe::{probe, ProbeExpect};
use crate::proxy::{self, Backend, Route};
use crate::staging::tree as tree_staging;
use crate::staging::{self, Installed, Release, StageError};
use crate::supervisor::{route_process, AppSpec, Instance};
use anyhow::Context;
use ed25519_dalek::VerifyingKey;
use model::agent::{AgentEvent, AgentInput, AgentOp, AgentStage, AgentState};
use model::recovery::{Observed, StageFailure};
use model::{Digest, ToAgent, ToController};
use protocol::frame::FrameBody;
use protocol::quic::{AgentConnection, Backoff};
use protocol::tls::ClientIdentity;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often the supervisor looks at app processes.
pub const SUPERVISE_MS: u64 = 1_000;
/// Upper bound on commands queued from the controller.
pub const INBOX_MAX: usize = driver::INBOX_MAX;

/// The running agent: the driver loop over the real node, and what the
/// sessions so far showed of the controllers.
pub struct Agent {
    driver: Driver<Node>,
    /// What the sessions so far showed of the links to the controllers:
    /// sets how long a controller may stay silent, and a dial's timeout
    /// (`liveness.rs`).
    link: LinkHistory,
    /// Per configured controller address, how many dials of it in a row
    /// timed out (its next dial gets longer, `liveness::dial_timeout`).
    dials_timed_out: Vec<u32>,
}

/// The real node: journal, releases on disk, app instances, the public
/// route. The driver loop's [`Host`].
struct Node {
    cfg: AgentConfig,
    allow_faults: bool,
    key: VerifyingKey,
    journal: Journal,
    releases: HashMap<Digest, Release>,
    instances: HashMap<Digest, Instance>,
    route: Route,
    /// Whether the configured fault hold already happened (once per process).
    held: bool,
    /// Why the latest staging attempt or observation failed, in words, for
    /// the stop message (the journal keeps the typed class).
    last_failure: Option<String>,
    /// What earlier read-backs of tree releases verified (memory only).
    read_backs: std::sync::Arc<staging::tree::ReadBacks>,
    /// The latest mirror list the controller sent, and the release it is
    /// for (memory only: a restart fetches from the controller until the
    /// grant is sent again).
    mirrors: Option<(Digest, Vec<String>)>,
    /// Where the chunks of the latest staging came from, sent to the
    /// controller before the next message (its commit request or report).
    sources: Option<FrameBody>,
}

impl Agent {
    /// Open the journal, bring up the public route, and reconstruct what
    /// actually serves before anything is reported.
    pub async fn start(cfg: AgentConfig, allow_faults: bool) -> anyhow::Result<Agent> {
        if allow_faults && cfg.faults.any() {
            tracing::warn!("FAULT INJECTION ENABLED on {}: {:?}", cfg.node, cfg.faults);
        } else if cfg.faults.any() {
            tracing::warn!(
                "[faults] present but ignored: start with --allow-fault-injection to use it"
            );
        }
        let key = protocol::bundle::load_verifying_key(&cfg.bundles.pubkey).with_context(|| {
            format!("loading bundle public key {}", cfg.bundles.pubkey.display())
        })?;
        let journal_dir = cfg.data_dir.join(crate::journal::JOURNAL_DIR);
        let mut journal = Journal::open(&journal_dir)
            .with_context(|| format!("opening the journal in {}", journal_dir.display()))?;
        // A restart is a new attempt of the op that was live, never a new op.
        if let Some(op) = journal.state.op {
            if !matches!(op.stage, AgentStage::Reporting(..)) {
                let attempt_id = journal.next_attempt_id();
                journal.append(vec![Record::Resumed {
                    op: op.id,
                    attempt_id,
                }])?;
                tracing::info!(
                    "restarted with {} live: resuming as attempt {attempt_id}",
                    op.id
                );
            }
        }
        let public = std::net::SocketAddr::new(cfg.public_ip, cfg.public_port);
        let listener = tokio::net::TcpListener::bind(public)
            .await
            .with_context(|| format!("binding the public route {public}"))?;
        let route = Route::default();
        tokio::spawn(proxy::serve(listener, route.clone()));
        let node = Node {
            cfg,
            allow_faults,
            key,
            journal,
            releases: HashMap::new(),
            instances: HashMap::new(),
            route,
            held: false,
            last_failure: None,
            read_backs: Default::default(),
            mirrors: None,
            sources: None,
        };
        let mut agent = Agent {
            driver: Driver::new(node),
            link: LinkHistory::default(),
            dials_timed_out: Vec::new(),
        };
        agent.reconstruct().await?;
        Ok(agent)
    }

    /// Bring back what the journal says the route serves, then tell the core
    /// what the route *actually* forwards to.
    async fn reconstruct(&mut self) -> anyhow::Result<()> {
        let node = &mut self.driver.host;
        if let Some(serving) = node.journal.state.serving {
            match node.ready(serving).await {
                Ok(backend) => node.route.switch(Some(backend)),
                Err(e) => tracing::warn!("cannot bring back {serving}: {e}"),
            }
        }
        let serving = node.route.current().map(|b| b.release);
        let (observation, _) = node.probe_route().await;
        tracing::info!(node = %node.cfg.node, ?serving, %observation, "reconstructed what serves");
        // The node never halts (`Host::halts` is not overridden).
        let _ = self.driver.restarted(serving).await?;
        Ok(())
    }

    /// Find the leader, serve the session, back off, forever.
    pub async fn run(mut self) -> anyhow::Result<()> {
        let cfg = self.driver.host.cfg.clone();
        let mut backoff = Backoff::for_node(
            &cfg.node,
            cfg.timing.backoff_base_ms,
            cfg.timing.backoff_max_ms,
        );
        let addrs = cfg.controller.addresses();
        assert!(!addrs.is_empty(), "the config check requires an address");
        loop {
            // Read each round, so a renewed certificate is picked up.
            let identity = ClientIdentity::from_pem_files(&cfg.tls.ca, &cfg.tls.cert, &cfg.tls.key)
                .context("loading the node's TLS identity")?;
            let config = protocol::quic::quinn_agent_client_config(&identity)
                .context("the node's QUIC client configuration")?;
            let floor = Duration::from_millis(cfg.timing.handshake_timeout_ms);
            self.dials_timed_out.resize(addrs.len(), 0);
            let timeouts = self
                .dials_timed_out
                .iter()
                .map(|&n| liveness::dial_timeout(floor, self.link.rtt, n))
                .collect();
            let mut dials = Dials::start(&addrs, &cfg.controller.server_name, config, timeouts);
            let served = self.round(&addrs, &mut dials).await;
            for (n, ended) in self.dials_timed_out.iter_mut().zip(dials.ended()) {
                match ended {
                    Some(Ended::Up) => *n = 0,
                    Some(Ended::TimedOut) => *n = n.saturating_add(1),
                    Some(Ended::Failed) | None => {}
                }
            }
            drop(dials);
            if served {
                backoff.reset();
            }
            // Jittered, and growing while no controller takes the agent:
            // a fleet that lost its leader at one instant does not dial
            // the standbys in lockstep.
            tokio::time::sleep(backoff.next_delay()).await;
        }
    }

    /// One round over `dials` (see `dial.rs`): sessions on the controllers
    /// up, the one a standby names first, until one is not a standby's
    /// refusal or none is left. Whether a session ran (it was not sent
    /// away): the backoff starts over.
    async fn round(&mut self, addrs: &[std::net::SocketAddr], dials: &mut Dials) -> bool {
        // The controller a standby named, and that standby (dialed again:
        // it holds the agent until it leads, should the named one be down).
        let (mut named, mut namer) = (None, None);
        loop {
            let mut picked = None;
            for at in [named.take(), namer.take()].into_iter().flatten() {
                if picked.is_none() {
                    picked = dials.take(at).await.map(|conn| (at, conn));
                }
            }
            if picked.is_none() {
                picked = dials.take_any().await;
            }
            let Some((at, conn)) = picked else {
                return false;
            };
            let addr = addrs[at];
            tracing::info!(%addr, "connected to the controller");
            match self.session(conn).await {
                Ok(driver::Ended::Redirected { leader }) => {
                    let hint = dial::hinted(addrs, at, leader.as_deref());
                    tracing::info!(
                        %addr,
                        leader = leader.as_deref().unwrap_or("(unknown)"),
                        "a standby: not the leader; trying the next"
                    );
                    if !hint.is_some_and(|h| dials.is_ready(h)) {
                        dials.redial(at);
                        namer = Some(at);
                    }
                    named = hint;
                }
                // The node never halts (`Host::halts` is not overridden).
                Ok(driver::Ended::Halted) => return true,
                Err(e) => {
                    tracing::warn!("session ended: {e:#}");
                    return true;
                }
            }
        }
    }

    /// One session of the driver loop, watched for a silent controller,
    /// with the controller's own reason when it closed the connection (a
    /// refused certificate reads "invalid peer certificate" there, not
    /// just "connection lost").
    async fn session(&mut self, conn: AgentConnection) -> anyhow::Result<driver::Ended> {
        let watched = conn.connection().clone();
        let mut watch = Watch::new(watched.clone(), self.link, Instant::now());
        let result = self.driver.session(conn, Some(&mut watch)).await;
        self.link = watch.history();
        tracing::info!(
            intervals = self.link.intervals,
            silent = self.link.silent,
            rtt_ms = self.link.rtt.map(|r| r.as_millis()),
            "keep-alive intervals watched so far"
        );
        result.map_err(|e| match watched.close_reason() {
            Some(reason) => e.context(format!("the controller closed the connection: {reason}")),
            None => e,
        })
    }
}

impl Host for Node {
    fn node(&self) -> &str {
        &self.cfg.node
    }

    fn state(&self) -> &AgentState {
        &self.journal.state
    }

    fn journal(&mut self, events: &[AgentEvent]) -> anyhow::Result<()> {
        self.journal
            .append(events.iter().copied().map(Record::Core).collect())
            .context("journal append (fatal: cannot act without a durable record)")
    }

    async fn enact(&mut self, before: &AgentState, event: &AgentEvent) {
        // `journal_records`: how many records are durable now; a power cut
        // must never leave fewer (fleetweft-powercut).
        tracing::info!(node = %self.cfg.node, journal_records = self.journal.records, "{event}");
        self.enact_event(before, event).await;
    }

    async fn probe(&mut self, events: &[AgentEvent]) -> model::RouteObservation {
        let restoring = events
            .iter()
            .any(|e| matches!(e, AgentEvent::Restored { .. }));
        let switching = events
            .iter()
            .any(|e| matches!(e, AgentEvent::Switched { .. }));
        if restoring {
            self.hold(HoldPoint::RestoreProbe).await;
        } else if switching {
            self.hold(HoldPoint::Probe).await;
        }
        let (observation, answer) = self.probe_route().await;
        tracing::info!(%observation, ?answer, "route probe");
        observation
    }

    fn observe_staged(&mut self) -> Option<AgentInput> {
        self.observe_staged_release()
    }

    async fn stage(&mut self, conn: &quinn::Connection) -> Option<AgentInput> {
        self.stage_attempt(conn).await
    }

    fn platform(&self) -> model::platform::Platform {
        self.cfg.platform
    }

    fn migration(&mut self) -> Option<model::agent::MigrationKind> {
        let release = self.journal.state.op?.release;
        let declared = self.releases.get(&release)?.migration.as_ref()?;
        Some(if declared.irreversible {
            model::agent::MigrationKind::Irreversible
        } else {
            model::agent::MigrationKind::Reversible
        })
    }

    async fn migrate(&mut self) -> AgentInput {
        match self.run_migration().await {
            Ok(()) => AgentInput::Migrated,
            Err(e) => {
                tracing::warn!("migration failed, data put back: {e:#}");
                AgentInput::MigrationFailed
            }
        }
    }

    fn before_send(&mut self, _msg: &ToController) -> Option<FrameBody> {
        self.sources.take()
    }

    fn on_command(&mut self, cmd: &ToAgent) {
        tracing::info!(?cmd, "command");
    }

    fn on_mirrors(&mut self, release: Digest, mirrors: Vec<String>) {
        tracing::info!("{} mirror(s) for {release}", mirrors.len());
        self.mirrors = Some((release, mirrors));
    }

    fn isolation(&mut self) -> Option<(Digest, String)> {
        let release = self.route.current()?.release;
        let instance = self.instances.get(&release)?;
        (!instance.spec.limits.is_empty())
            .then(|| (release, instance.isolation.applied.to_string()))
    }

    async fn configuration(&mut self) -> Option<(Digest, Option<Digest>)> {
        let backend = self.route.current()?;
        // Whether it is a deployment is read from disk, not from memory.
        if !staging::deployment::is_installed(&self.cfg.data_dir, backend.release) {
            return None;
        }
        let child = self.instances.get(&backend.release).and_then(Instance::pid);
        let port = backend.port;
        let read =
            tokio::task::spawn_blocking(move || crate::serving::serving_fingerprint(port, child))
                .await;
        let fingerprint = read.unwrap_or_else(|e| {
            tracing::warn!("reading the serving process's configuration failed to run: {e}");
            None
        });
        tracing::info!(deployment = %backend.release, ?fingerprint, "configuration read back");
        Some((backend.release, fingerprint))
    }

    /// Probes the route and re-reads its artifact now.
    async fn read_back(&mut self) -> (model::RouteObservation, Option<Digest>) {
        let serving = self.route.current().map(|b| b.release);
        let (observation, _) = self.probe_route().await;
        tracing::info!(?serving, %observation, artifact = ?observation.artifact, "readback");
        (observation, serving)
    }

    fn retry_every(&self) -> Duration {
        Duration::from_millis(self.cfg.timing.retry_ms)
    }

    fn supervise_every(&self) -> Option<Duration> {
        Some(Duration::from_millis(SUPERVISE_MS))
    }

    async fn supervise(&mut self) {
        for instance in self.instances.values_mut() {
            if !instance.keep_alive().await {
                tracing::warn!(release = %instance.spec.release, "app instance is down");
            }
        }
    }
}

impl Node {
    /// The architecture this agent declares (and stages trees for).
    fn arch(&self) -> model::platform::Arch {
        self.cfg.platform.arch
    }

    /// Make a journaled event true in the world.
    async fn enact_event(&mut self, before: &AgentState, event: &AgentEvent) {
        match *event {
            AgentEvent::Switched { op, .. } => {
                let Some(current) = self.journal.state.op.filter(|o| o.id == op) else {
                    return;
                };
                self.hold(HoldPoint::Switch).await;
                match self.ready(current.release).await {
                    Ok(backend) => {
                        // Probe the new instance directly before users see it;
                        // the route probe after the switch is the evidence.
                        if let Some(release) = self.releases.get(&current.release) {
                            let process = self
                                .instances
                                .get_mut(&current.release)
                                .map(Instance::sample);
                            let (direct, _) =
                                probe(backend.port, &release.probe_expect(), process).await;
                            tracing::info!(%direct, "direct probe of the new instance");
                        }
                        self.route.switch(Some(backend));
                    }
                    Err(e) => {
                        tracing::warn!("cannot start {}: {e:#}", current.release);
                        self.route.switch(None);
                    }
                }
            }
            AgentEvent::Refused { op, reason } => {
                let detail = self.last_failure.take().unwrap_or_default();
                tracing::warn!(op = %op, "stopping: {reason}: {detail}");
            }
            AgentEvent::Restored { op, .. } => {
                let baseline = before.op.filter(|o| o.id == op).and_then(|o| o.baseline);
                // Code and data together: the data's snapshot back first,
                // so the baseline serves what it left.
                if let Some(o) = before.op.filter(|o| o.id == op && o.migration.is_some()) {
                    self.restore_data(o.release, baseline);
                }
                match baseline {
                    Some(b) => match self.ready(b).await {
                        Ok(backend) => self.route.switch(Some(backend)),
                        Err(e) => {
                            tracing::warn!("cannot restore {b}: {e:#}");
                            self.route.switch(None);
                        }
                    },
                    None => self.route.switch(None),
                }
            }
            AgentEvent::Closed { op } => {
                if let Some(o) = before.op.filter(|o| o.id == op && o.migration.is_some()) {
                    self.discard_snapshot(o.release);
                }
                self.retire_idle_instances();
            }
            _ => {}
        }
    }

    /// `AgentEffect::RunMigration`: the current op's release's migration,
    /// with the data snapshotted first and put back on failure
    /// ([`crate::migration::run`]).
    async fn run_migration(&mut self) -> anyhow::Result<()> {
        let op = self.journal.state.op.context("no op")?;
        self.load(op.release)?;
        let migration = self.releases[&op.release]
            .migration
            .clone()
            .context("the release declares no migration")?;
        let spec = self.app_spec(op.release);
        crate::migration::run(
            &spec,
            &migration.command,
            crate::app_data::DATA_SNAPSHOT_BYTES_MAX,
            Duration::from_millis(crate::migration::MIGRATE_TIMEOUT_MS),
        )
        .await?;
        Ok(())
    }

    /// A roll back of `release`'s op: its app's data snapshot put back (if
    /// the migration left one), and the baseline's instance, which had the
    /// data changed under it, started again on the restored data.
    fn restore_data(&mut self, release: Digest, baseline: Option<Digest>) {
        if let Err(e) = self.load(release) {
            tracing::warn!(%release, "its data directory is unknown (release not loaded): {e:#}");
        }
        let Some(data) = self.releases.get(&release).map(|r| self.data_dir_of(r)) else {
            return;
        };
        match crate::app_data::restore(&data, &crate::app_data::snapshot_for(&data)) {
            Ok(true) => {
                tracing::info!(%release, "the data's snapshot is back");
                if let Some(instance) = baseline.and_then(|b| self.instances.remove(&b)) {
                    let route = self.route.clone();
                    tokio::spawn(async move {
                        let _ = instance.retire(|port| route.in_flight(port)).await;
                    });
                }
            }
            Ok(false) => tracing::info!(%release, "no data snapshot to put back"),
            Err(e) => tracing::warn!(%release, "the data's snapshot could not be put back: {e}"),
        }
    }

    /// The op of `release` settled: its data snapshot is no longer needed.
    fn discard_snapshot(&mut self, release: Digest) {
        if let Err(e) = self.load(release) {
            tracing::warn!(%release, "its data directory is unknown (release not loaded): {e:#}");
        }
        let Some(data) = self.releases.get(&release).map(|r| self.data_dir_of(r)) else {
            return;
        };
        if let Err(e) = crate::app_data::discard(&crate::app_data::snapshot_for(&data)) {
            tracing::warn!(%release, "the data snapshot could not be removed: {e}");
        }
    }

    /// The app data directory of `release`.
    fn data_dir_of(&self, release: &Release) -> std::path::PathBuf {
        crate::app_data::dir_for(&self.cfg.data_dir, &release.name)
    }

    /// `release` verified from disk into [`Node::releases`], if not there.
    fn load(&mut self, release: Digest) -> anyhow::Result<()> {
        if !self.releases.contains_key(&release) {
            let loaded = staging::load(&self.cfg.data_dir, &self.key, self.arch(), release)?;
            self.releases.insert(release, loaded);
        }
        Ok(())
    }

    /// How an instance of the loaded `release` runs (and its migration).
    fn app_spec(&self, release: Digest) -> AppSpec {
        let r = &self.releases[&release];
        // A deployment's configuration first; the agent's own variables
        // after it (a configuration key can never name one anyway).
        let mut env = r.config_env();
        // The manifest's version, so one app file signed as v1 and as
        // v2 (`bundle sign --version`) answers as the release it is.
        env.push(("FLEETWEFT_VERSION".to_string(), r.version.clone()));
        if self.allow_faults && self.cfg.faults.answer_wrongly.contains(&release.to_hex()) {
            env.push(("HELLO_ANSWER_WRONGLY".to_string(), "1".to_string()));
        }
        if self.allow_faults && self.cfg.faults.crash_on_start.contains(&release.to_hex()) {
            env.push(("HELLO_CRASH_ON_START".to_string(), "1".to_string()));
        }
        AppSpec {
            release,
            code: r.code,
            dir: r.dir.clone(),
            run: r.run.clone(),
            env,
            limits: r.limits.clone(),
            cgroups: self.cfg.isolation.cgroups,
            data: Some(self.data_dir_of(r)),
        }
    }

    /// Once an op is closed, the instances of releases the model no longer
    /// names (`AgentState::releases_in_use`) and the route does not
    /// forward to are drained and stopped in the background
    /// ([`Instance::retire`]): without it every release ever run kept a
    /// process up until the disk budget removed the release. A later op of
    /// such a release starts it again.
    fn retire_idle_instances(&mut self) {
        let mut keep: std::collections::BTreeSet<Digest> =
            self.journal.state.releases_in_use().collect();
        keep.extend(self.route.current().map(|b| b.release));
        let idle: Vec<Digest> = self
            .instances
            .keys()
            .filter(|r| !keep.contains(r))
            .copied()
            .collect();
        for release in idle {
            let Some(instance) = self.instances.remove(&release) else {
                continue;
            };
            let route = self.route.clone();
            tokio::spawn(async move {
                let ended = instance.retire(|port| route.in_flight(port)).await;
                tracing::info!("retired the instance of {release}: {ended:?}");
            });
        }
    }

    /// A running instance of `release` (verified from disk if needed).
    async fn ready(&mut self, release: Digest) -> anyhow::Result<Backend> {
        self.load(release)?;
        let spec = self.app_spec(release);
        let mut dead = None;
        if let Some(instance) = self.instances.get_mut(&release) {
            if instance.keep_alive().await {
                return Ok(Backend {
                    port: instance.port,
                    release,
                });
            }
            dead = self.instances.remove(&release);
        }
        let mut instance = Instance::start(spec).await?;
        if let Some(dead) = &dead {
            instance.carry_restarts_from(dead);
        }
        let backend = Backend {
            port: instance.port,
            release,
        };
        self.instances.insert(release, instance);
        Ok(backend)
    }

    /// `AgentEffect::StageArtifact`: fetch, verify and stage the current
    /// op's release. The core already journaled the attempt (its
    /// `Recovery` retry reserved the budget, the `pending_stage`
    /// checkpoint); the result goes back to it as `Staged` or a classified
    /// `StageFailed`. Without a connection nothing can be fetched: the
    /// reserved attempt waits, and the core asks again on reconnection.
    ///
    /// The op's digest names a release, or a deployment (code plus
    /// configuration, issue #24 item 1): then its code is staged as any
    /// release, and the deployment installed once the code is.
    async fn stage_attempt(&mut self, conn: &quinn::Connection) -> Option<AgentInput> {
        let op = self.journal.state.op?;
        self.hold(HoldPoint::Fetch).await;
        let (code, document) = match self.fetch_code(conn, &op).await {
            Ok(fetched) => fetched,
            Err(failed) => return Some(failed),
        };
        let staged = match code {
            Code::Installed(release) => Ok(*release),
            Code::Signed(digest, bytes) if tree_staging::is_tree_release(&bytes) => {
                self.stage_tree(&op, digest, conn, bytes).await
            }
            Code::Signed(digest, bytes) => self.stage_bundle(&op, digest, &bytes).await,
        };
        let mut release = match staged {
            Ok(release) => release,
            Err(failed) => return Some(failed),
        };
        if let Some(document) = document {
            release = match self.install_deployment(&op, release, &document) {
                Ok(release) => release,
                Err(failed) => return Some(*failed),
            };
        }
        tracing::info!(
            "staged {} ({} {}, code {})",
            op.release,
            release.name,
            release.version,
            release.code
        );
        self.releases.insert(op.release, release);
        // Installed, not yet journaled as staged: a SIGKILL here leaves a
        // whole artifact the table must re-verify.
        self.hold(HoldPoint::Stage).await;
        Some(AgentInput::Staged)
    }

    /// The code of the op's release: its signed file (a format-1 bundle or
    /// a format-2 manifest; the bytes tell which) when the controller has
    /// it by that digest. When it answers missing, the digest may name a
    /// deployment: its document is asked for (only then, so a controller
    /// that knows no deployments never sees the request unless a bundle
    /// is really missing), checked against the digest, and its code
    /// fetched, or taken from disk when already staged (a
    /// configuration-only change). With the document's bytes, if any.
    async fn fetch_code(
        &mut self,
        conn: &quinn::Connection,
        op: &AgentOp,
    ) -> Result<(Code, Option<Vec<u8>>), AgentInput> {
        let max = protocol::quic::SIGNED_FILE_BYTES_MAX;
        let missing = match protocol::quic::fetch_signed(conn, op.release, max).await {
            Ok(bytes) => return Ok((Code::Signed(op.release, bytes), None)),
            Err(e @ protocol::quic::TransportError::BundleMissing(_)) => e,
            Err(e) => return Err(self.failed(op, Stage::Fetch, fetch_failure(&e), e)),
        };
        let document = self.fetch_document(conn, op, missing).await?;
        self.hold(HoldPoint::Verify).await;
        let doc = staging::deployment::decode(&document, op.release)
            .map_err(|e| self.failed(op, Stage::Verify, stage_failure(&e), e))?;
        let code = doc.release;
        let (data_dir, arch) = (&self.cfg.data_dir, self.arch());
        if let Ok(release) = staging::load_code(data_dir, &self.key, arch, code) {
            tracing::info!(
                "deployment {}: its code {code} is staged already",
                op.release
            );
            return Ok((Code::Installed(Box::new(release)), Some(document)));
        }
        match protocol::quic::fetch_signed(conn, code, max).await {
            Ok(bytes) => Ok((Code::Signed(code, bytes), Some(document))),
            Err(e) => Err(self.failed(op, Stage::Fetch, fetch_failure(&e), e)),
        }
    }

    /// The deployment document of the op's digest, after the controller
    /// answered `missing` for it as a release. Not a deployment either:
    /// the release is missing, classified as before. A transfer that
    /// fails is classified as the missing release was (an older
    /// controller closes the connection on the request: the attempt is
    /// retried as a missing bundle always was), except an answer outside
    /// the protocol, which is no evidence.
    async fn fetch_document(
        &mut self,
        conn: &quinn::Connection,
        op: &AgentOp,
        missing: protocol::quic::TransportError,
    ) -> Result<Vec<u8>, AgentInput> {
        use protocol::quic::TransportError as E;
        match protocol::quic::fetch_deployment(conn, op.release).await {
            Ok(Some(document)) => Ok(document),
            Ok(None) => Err(self.failed(op, Stage::Fetch, fetch_failure(&missing), missing)),
            Err(e @ (E::BadFrame(_) | E::UnexpectedFrame { .. })) => {
                Err(self.failed(op, Stage::Fetch, fetch_failure(&e), e))
            }
            Err(e) => {
                let failure = fetch_failure(&missing);
                let reason = format!("{missing}; asked as a deployment: {e}");
                Err(self.failed(op, Stage::Fetch, failure, reason))
            }
        }
    }

    /// Installs the deployment document `document` of the op's digest
    /// over its staged `code` (`DATA/deployments/<digest>/`).
    fn install_deployment(
        &mut self,
        op: &AgentOp,
        code: Release,
        document: &[u8],
    ) -> Result<Release, Box<AgentInput>> {
        let data_dir = self.cfg.data_dir.clone();
        let doc = staging::deployment::install(&data_dir, op.release, document)
            .map_err(|e| Box::new(self.failed(op, Stage::Stage, stage_failure(&e), e)))?;
        let configured = staging::deployment::Configured::of(&data_dir, op.release, &doc);
        tracing::info!(
            "deployment {}: configuration {} revision {} ({} variable(s), {} file(s)), fingerprint {}",
            op.release,
            doc.config.app,
            doc.config.revision,
            doc.config.env.len(),
            doc.config.files.len(),
            configured.fingerprint
        );
        Ok(code.deployed(op.release, configured))
    }

    /// Verifies and installs the format-1 bundle `bytes` of release `code`
    /// (the op's release, or its deployment's code).
    async fn stage_bundle(
        &mut self,
        op: &AgentOp,
        code: Digest,
        bytes: &[u8],
    ) -> Result<Release, AgentInput> {
        self.hold(HoldPoint::Verify).await;
        if let Err(e) = staging::verify(&self.key, code, bytes) {
            return Err(self.failed(op, Stage::Verify, stage_failure(&e), e));
        }
        // The bundle file and the app file inside it.
        let needed_bytes = 2 * bytes.len() as u64;
        if let Err(e) = self.make_room(code, needed_bytes, Default::default()).await {
            return Err(self.failed(op, Stage::Stage, stage_failure(&e), e));
        }
        staging::install(&self.cfg.data_dir, &self.key, code, bytes)
            .map_err(|e| self.failed(op, Stage::Stage, stage_failure(&e), e))
    }

    /// Stages the format-2 release `code` (the op's release or its
    /// deployment's code) whose signed manifest is
    /// `bytes`: verify it (permanent on failure), fetch the chunks the
    /// agent's store lacks (held ones re-hashed first), assemble the tree.
    /// Disk work runs off the async threads.
    async fn stage_tree(
        &mut self,
        op: &AgentOp,
        code: Digest,
        conn: &quinn::Connection,
        bytes: Vec<u8>,
    ) -> Result<Release, AgentInput> {
        let staging = self.prepare_tree(op, code, &bytes).await?;
        self.fetch_tree(op, conn, &staging).await?;
        self.install_tree(op, staging, bytes).await
    }

    /// A tree's staging up to its fetch: the manifest verified, room made
    /// for what it needs beyond the chunks held, the chunk store and the
    /// partial chunks open. `Err`: the failure, classified.
    async fn prepare_tree(
        &mut self,
        op: &AgentOp,
        code: Digest,
        bytes: &[u8],
    ) -> Result<TreeStaging, AgentInput> {
        self.hold(HoldPoint::Verify).await;
        let release = tree_staging::verify(&self.key, self.arch(), code, bytes)
            .map_err(|e| self.failed(op, Stage::Verify, stage_failure(&e), e))?;
        let data_dir = self.cfg.data_dir.clone();
        let store = tree_staging::open_store(&data_dir, code)
            .map(std::sync::Arc::new)
            .map_err(|e| self.failed(op, Stage::Fetch, stage_failure(&e), e))?;
        let needed_bytes = tree_staging::bytes_to_stage(&release, bytes.len(), &store);
        let chunks = release
            .manifest
            .unique_chunks()
            .iter()
            .map(|c| c.sha256)
            .collect();
        if let Err(e) = self.make_room(code, needed_bytes, chunks).await {
            return Err(self.failed(op, Stage::Fetch, stage_failure(&e), e));
        }
        let partials = tree_staging::open_partials(&data_dir, code)
            .map(std::sync::Arc::new)
            .map_err(|e| self.failed(op, Stage::Fetch, stage_failure(&e), e))?;
        Ok(TreeStaging {
            release,
            store,
            partials,
        })
    }

    /// Fetches the chunks of the tree `staging` lacks, from the mirrors
    /// the controller sent and then the controller; where they came from
    /// goes to the controller before the agent's next message.
    async fn fetch_tree(
        &mut self,
        op: &AgentOp,
        conn: &quinn::Connection,
        staging: &TreeStaging,
    ) -> Result<(), AgentInput> {
        let mirrors = std::sync::Arc::new(Mirrors::new(
            self.mirrors_for(op.release, staging.release.digest),
            mirror::Bounds::default(),
        ));
        let sources = ChunkSources {
            conn: conn.clone(),
            mirrors: mirrors.clone(),
            partials: staging.partials.clone(),
        };
        let fetched = fetch_tree_chunks(sources, &staging.release, staging.store.clone()).await;
        self.sources = Some(FrameBody::FetchSources {
            op: op.id,
            release: op.release,
            sources: mirrors.tally(),
        });
        let (fetched, held) = match fetched {
            Ok(counts) => counts,
            Err(ChunkFetchError::Transport(e)) => {
                return Err(self.failed(op, Stage::Fetch, fetch_failure(&e), e))
            }
            Err(ChunkFetchError::Stage(e)) => {
                return Err(self.failed(op, Stage::Fetch, stage_failure(&e), e))
            }
        };
        tracing::info!(
            "release {}: {fetched} chunk(s) fetched, {held} already held; sources: {}",
            staging.release.digest,
            sources_text(&mirrors.tally())
        );
        Ok(())
    }

    /// Assembles the fetched tree (off the async threads) and keeps the
    /// release it makes.
    async fn install_tree(
        &mut self,
        op: &AgentOp,
        staging: TreeStaging,
        bytes: Vec<u8>,
    ) -> Result<Release, AgentInput> {
        let TreeStaging {
            release,
            store,
            partials,
        } = staging;
        let (data_dir, key, arch) = (self.cfg.data_dir.clone(), self.key, self.arch());
        let installed = tokio::task::spawn_blocking(move || {
            tree_staging::install(&data_dir, &key, arch, &release, &bytes, &store)
        })
        .await;
        match installed {
            Ok(Ok(release)) => {
                // Whatever is left belongs to no fetch under way.
                partials.clear();
                Ok(release)
            }
            Ok(Err(e)) => Err(self.failed(op, Stage::Stage, stage_failure(&e), e)),
            Err(e) => Err(self.failed(
                op,
                Stage::Stage,
                StageFailure::Transient {
                    bundle_missing: false,
                },
                e,
            )),
        }
    }

    /// Makes room within `[storage] max_bytes` for `needed_bytes` of
    /// `release` (whose `chunks` already held are kept) before it is
    /// staged (`staging::disk::make_room`: the releases the model says are
    /// in use and the previous one are kept), off the async threads;
    /// stops and forgets the releases it removed.
    async fn make_room(
        &mut self,
        release: Digest,
        needed_bytes: u64,
        chunks: std::collections::BTreeSet<releases::manifest::Sha256Bytes>,
    ) -> Result<(), StageError> {
        // The code being staged too: for a deployment it is not what the
        // model names (that is the deployment's digest).
        let in_use: std::collections::BTreeSet<Digest> = self
            .journal
            .state
            .releases_in_use()
            .chain([release])
            .collect();
        let (data_dir, max_bytes) = (self.cfg.data_dir.clone(), self.cfg.storage.max_bytes);
        let done = tokio::task::spawn_blocking(move || {
            let incoming = staging::disk::Incoming {
                needed_bytes,
                chunks: &chunks,
            };
            staging::disk::make_room(&data_dir, &in_use, incoming, max_bytes)
        })
        .await
        .map_err(|e| join_error(release, e))??;
        self.forget_removed(&done).await;
        if !done.removed.is_empty() || done.chunks_removed > 0 {
            tracing::info!(
                "disk budget: removed {} release(s) ({}) and {} chunk(s), {} freed; {} kept of {}",
                done.removed.len(),
                done.removed
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                done.chunks_removed,
                staging::disk::bytes_text(done.freed_bytes),
                staging::disk::bytes_text(done.used_bytes),
                staging::disk::bytes_text(self.cfg.storage.max_bytes),
            );
        }
        Ok(())
    }

    /// Forgets (and stops the instances of) what housekeeping removed:
    /// its releases, the deployments of their code, its deployments.
    async fn forget_removed(&mut self, done: &staging::disk::Housekeeping) {
        let gone: Vec<Digest> = self
            .releases
            .iter()
            .filter(|(d, r)| done.removed.contains(&r.code) || done.removed.contains(d))
            .map(|(d, _)| *d)
            .chain(done.removed.iter().copied())
            .chain(done.deployments_removed.iter().copied())
            .collect();
        for digest in gone {
            self.releases.remove(&digest);
            if let Some(mut instance) = self.instances.remove(&digest) {
                instance.stop().await;
            }
        }
        if !done.deployments_removed.is_empty() {
            tracing::info!(
                "housekeeping: removed {} deployment(s) nothing names",
                done.deployments_removed.len()
            );
        }
    }

    /// The mirrors the controller sent for the op's `release` or for the
    /// `code` being staged for it (a deployment's; none for another).
    fn mirrors_for(&self, release: Digest, code: Digest) -> &[String] {
        match &self.mirrors {
            Some((r, list)) if *r == release || *r == code => list,
            _ => &[],
        }
    }

    /// `AgentEffect::ObserveStaged`: what is on disk of the current op's
    /// release, re-read and re-verified (never its own claim): the table's
    /// third axis.
    fn observe_staged_release(&mut self) -> Option<AgentInput> {
        let op = self.journal.state.op?;
        let observed =
            match staging::observe(&self.cfg.data_dir, &self.key, self.arch(), op.release) {
                Installed::ReVerified(release) => {
                    self.releases.insert(op.release, *release);
                    Observed::ReVerified
                }
                Installed::Absent => Observed::Absent,
                Installed::Unknown(e) => {
                    tracing::warn!(op = %op.id, "the staged {} does not verify: {e}", op.release);
                    self.last_failure = Some(e.to_string());
                    Observed::Unknown
                }
            };
        Some(AgentInput::StageObserved(observed))
    }

    /// Log how an attempt failed (the reason stays in memory for the stop
    /// message; the journal keeps the typed class) and classify it.
    fn failed(
        &mut self,
        op: &AgentOp,
        stage: Stage,
        failure: StageFailure,
        error: impl std::fmt::Display,
    ) -> AgentInput {
        let reason = error.to_string();
        tracing::warn!(op = %op.id, ?stage, %failure, "stage failed: {reason}");
        self.last_failure = Some(reason);
        AgentInput::StageFailed(failure)
    }

    /// Fault injection: stop here once for `hold_ms` if configured, so a
    /// test can SIGKILL the agent inside this stage.
    async fn hold(&mut self, point: HoldPoint) {
        if !self.allow_faults || self.held || self.cfg.faults.hold_at != Some(point) {
            return;
        }
        self.held = true;
        tracing::warn!(
            "FAULT INJECTION: holding at {point} for {} ms",
            self.cfg.faults.hold_ms
        );
        tokio::time::sleep(Duration::from_millis(self.cfg.faults.hold_ms)).await;
    }

    async fn probe_route(&mut self) -> (model::RouteObservation, crate::probe::ProbeAnswer) {
        let current = self.route.current();
        let expect = current
            .and_then(|b| self.releases.get(&b.release))
            .map(Release::probe_expect)
            .unwrap_or(ProbeExpect {
                path: "/".into(),
                expect_status: 200,
                expect_body: String::new(),
                expect_json: None,
            });
        let process = route_process(current, &mut self.instances);
        let (mut observation, answer) = probe(self.cfg.public_port, &expect, process).await;
        // The artifact behind the route, re-read from disk: a proof compares
        // it with the intended release instead of trusting the report.
        if let Some(serving) = current {
            observation.artifact = Some(self.read_back_artifact(serving.release).await);
        }
        (observation, answer)
    }

    /// Re-reads the artifact of `release` from disk, off the session's
    /// thread: a tree's read-back lists and stats every file and hashes
    /// what changed plus a bounded share of the rest
    /// (`staging::tree::READBACK_REHASH_BYTES_MAX`), which on a large
    /// release is still longer than a keep-alive should wait.
    async fn read_back_artifact(&self, release: Digest) -> model::ArtifactRead {
        let (data_dir, key, arch) = (self.cfg.data_dir.clone(), self.key, self.arch());
        let caches = self.read_backs.clone();
        let read = tokio::task::spawn_blocking(move || {
            staging::read_back_cached(&data_dir, &key, arch, release, &caches)
        })
        .await;
        read.unwrap_or_else(|e| {
            tracing::warn!("the read-back of {release} failed to run: {e}");
            model::ArtifactRead::Unreadable
        })
    }
}

/// Most chunk requests an agent has in flight at once: each holds at most
/// one chunk (`CHUNK_BYTES_MAX`, 4 MiB) in memory, and each is a QUIC
/// stream, of which the controller allows `STREAMS_BIDI_MAX` (8) per agent,
/// the control stream included.
pub const CHUNK_FETCHES_IN_FLIGHT_MAX: usize = 4;

const _: () = assert!(CHUNK_FETCHES_IN_FLIGHT_MAX < protocol::quic::STREAMS_BIDI_MAX as usize);

/// Why fetching a tree's chunks failed.
#[derive(Debug)]
enum ChunkFetchError {
    /// The transfer of one chunk failed (typed by the transport).
    Transport(protocol::quic::TransportError),
    /// The agent's chunk store failed.
    Stage(StageError),
}

/// The code of an op's release, as fetched or found.
enum Code {
    /// The signed file of release `.0` (a bundle or a tree's manifest).
    Signed(Digest, Vec<u8>),
    /// A deployment's code, staged already and re-verified from disk.
    Installed(Box<Release>),
}

/// A tree release being staged: verified, its chunk store and partial
/// chunks open.
struct TreeStaging {
    release: releases::VerifiedRelease,
    store: std::sync::Arc<releases::ChunkStore>,
    partials: std::sync::Arc<releases::PartialChunks>,
}

/// Where one tree's chunks come from: the mirrors first, then the
/// controller, with the partly fetched chunks kept across a restart.
#[derive(Clone)]
struct ChunkSources {
    conn: quinn::Connection,
    mirrors: std::sync::Arc<Mirrors>,
    partials: std::sync::Arc<releases::PartialChunks>,
}

/// Fetches the chunks of `release` that `store` lacks (held ones are
/// re-hashed first, a torn one removed and fetched again), at most
/// [`CHUNK_FETCHES_IN_FLIGHT_MAX`] at once, each stored as it arrives.
/// Returns (chunks fetched, chunks already held).
async fn fetch_tree_chunks(
    sources: ChunkSources,
    release: &releases::VerifiedRelease,
    store: std::sync::Arc<releases::ChunkStore>,
) -> Result<(usize, usize), ChunkFetchError> {
    let digest = release.digest;
    let (rehash_release, rehash_store) = (release.clone(), store.clone());
    let missing = tokio::task::spawn_blocking(move || {
        tree_staging::missing_chunks(&rehash_release, &rehash_store)
    })
    .await
    .map_err(|e| ChunkFetchError::Stage(join_error(digest, e)))?
    .map_err(ChunkFetchError::Stage)?;
    let held = release.manifest.unique_chunks().len() - missing.len();
    let fetched = missing.len();
    let mut queue = missing.into_iter();
    let mut in_flight = tokio::task::JoinSet::new();
    loop {
        while in_flight.len() < CHUNK_FETCHES_IN_FLIGHT_MAX {
            let Some(chunk) = queue.next() else { break };
            in_flight.spawn(fetch_one_chunk(
                sources.clone(),
                store.clone(),
                digest,
                chunk,
            ));
        }
        match in_flight.join_next().await {
            None => return Ok((fetched, held)),
            Some(Ok(Ok(()))) => {}
            Some(Ok(Err(e))) => return Err(e),
            Some(Err(e)) => return Err(ChunkFetchError::Stage(join_error(digest, e))),
        }
    }
}

/// Fetches one chunk and stores it (verified again as it lands), then
/// forgets its partial bytes.
async fn fetch_one_chunk(
    sources: ChunkSources,
    store: std::sync::Arc<releases::ChunkStore>,
    release: Digest,
    chunk: releases::ChunkRef,
) -> Result<(), ChunkFetchError> {
    let bytes = chunk_bytes(&sources, &chunk).await?;
    let partials = sources.partials.clone();
    tokio::task::spawn_blocking(move || {
        let stored = store.put_bytes(&chunk.sha256, &bytes);
        if stored.is_ok() {
            partials.remove(&chunk);
        }
        stored
    })
    .await
    .map_err(|e| ChunkFetchError::Stage(join_error(release, e)))?
    .map_err(|source| {
        ChunkFetchError::Stage(StageError::Tree {
            digest: release,
            source,
        })
    })?;
    Ok(())
}

/// The verified bytes of one chunk: the mirrors first, then the
/// controller. Bytes kept from an attempt a crash cut short
/// (`DATA/chunks-partial`) are resumed after: a mirror is asked for the
/// rest with `Range` (one that ignores it sends the whole chunk), the
/// controller with `FetchChunkFrom`. A kept prefix that makes the hash
/// wrong is thrown away and the chunk fetched whole.
async fn chunk_bytes(
    sources: &ChunkSources,
    chunk: &releases::ChunkRef,
) -> Result<Vec<u8>, ChunkFetchError> {
    use protocol::quic::TransportError;
    let mut prefix = sources.partials.prefix(chunk);
    if !prefix.is_empty() {
        tracing::info!(
            "chunk {}: resuming after {} kept bytes",
            chunk.hex(),
            prefix.len()
        );
    }
    let mirrored = sources
        .mirrors
        .fetch(chunk, &mut prefix, &sources.partials)
        .await;
    if let Some(bytes) = mirrored {
        return Ok(bytes);
    }
    if !prefix.is_empty() {
        let kept = prefix.len();
        match from_controller(sources, chunk, prefix).await {
            Err(e @ TransportError::ChunkDigestMismatch { .. }) => {
                tracing::warn!("chunk {}: {kept} kept bytes and the rest do not verify ({e}): fetching it whole", chunk.hex());
                sources.partials.remove(chunk);
            }
            result => return result.map_err(ChunkFetchError::Transport),
        }
    }
    from_controller(sources, chunk, Vec::new())
        .await
        .map_err(ChunkFetchError::Transport)
}

/// The chunk from the controller, after the `prefix` already held; each
/// piece appended to the chunk's partial file as it arrives (a file that
/// cannot be written only costs a longer refetch after another cut).
async fn from_controller(
    sources: &ChunkSources,
    chunk: &releases::ChunkRef,
    prefix: Vec<u8>,
) -> Result<Vec<u8>, protocol::quic::TransportError> {
    let kept = prefix.len() as u64;
    let mut writer = match sources.partials.writer(chunk, kept) {
        Ok(writer) => Some(writer),
        Err(e) => {
            tracing::warn!("not keeping partial bytes: {e}");
            None
        }
    };
    let keep = |piece: &[u8]| {
        if let Some(Err(e)) = writer.as_mut().map(|w| w.append(piece)) {
            tracing::warn!("not keeping more partial bytes: {e}");
            writer = None;
        }
    };
    let bytes =
        protocol::quic::fetch_chunk_resumed(&sources.conn, Digest(chunk.sha256), prefix, keep)
            .await?;
    sources
        .mirrors
        .served_by_controller(bytes.len() as u64 - kept);
    Ok(bytes)
}

/// A tally as one log line: `SOURCE: N chunks, B bytes, F failed; ...`.
fn sources_text(tally: &[protocol::frame::SourceTally]) -> String {
    tally
        .iter()
        .map(|t| {
            format!(
                "{}: {} chunks, {} bytes, {} failed",
                t.source, t.chunks, t.bytes, t.failures
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A blocking task that panicked or was cancelled, as a staging error.
fn join_error(digest: Digest, e: tokio::task::JoinError) -> StageError {
    StageError::Tree {
        digest,
        source: releases::ReleaseError::Malformed(format!("staging task failed: {e}")),
    }
}

/// The table's error class of a staging error (SPEC §5's second axis).
fn stage_failure(error: &StageError) -> StageFailure {
    if error.permanent() {
        StageFailure::Permanent
    } else {
        StageFailure::Transient {
            bundle_missing: false,
        }
    }
}

/// The class of a failed fetch. The network and the controller's store
/// can both get better: transient, retried while the budget lasts. An
/// answer outside the protocol is no evidence either way: the table stops.
fn fetch_failure(error: &protocol::quic::TransportError) -> StageFailure {
    use protocol::quic::TransportError as E;
    match error {
        E::BadFrame(_) | E::UnexpectedFrame { .. } => StageFailure::MissingEvidence,
        E::BundleMissing(_) | E::ChunkMissing(_) => StageFailure::Transient {
            bundle_missing: true,
        },
        _ => StageFailure::Transient {
            bundle_missing: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A standby's hint is followed only to another address of the
    /// agent's own list; otherwise (unknown, unparsable, foreign, itself)
    /// the first controller up.
    #[test]
    fn a_redirect_follows_a_listed_hint_only() {
        let addrs: Vec<std::net::SocketAddr> = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
            .iter()
            .map(|a| a.parse().expect("addr"))
            .collect();
        assert_eq!(dial::hinted(&addrs, 0, Some("127.0.0.1:3")), Some(2));
        assert_eq!(dial::hinted(&addrs, 2, Some("127.0.0.1:2")), Some(1));
        assert_eq!(dial::hinted(&addrs, 0, None), None);
        assert_eq!(dial::hinted(&addrs, 0, Some("10.9.9.9:3")), None);
        assert_eq!(dial::hinted(&addrs, 0, Some("0.0.0.0:3")), None);
        assert_eq!(dial::hinted(&addrs, 1, Some("not an address")), None);
        assert_eq!(dial::hinted(&addrs, 1, Some("127.0.0.1:2")), None);
    }
}
