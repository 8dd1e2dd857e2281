//! The controller on etcd (issue #14): follow the log as a hot standby,
//! campaign for its leadership, take over from the followed state once
//! elected, and stop acting the moment the leadership is gone.
//!
//! A controller that is not elected is a **hot standby**: it opens the log
//! read-only (reads need no lease), replays it (chain verified, history
//! checked, as a restart does), and its core follows the log from there
//! (`core::FOLLOW_POLL_MS`), verifying and rule-checking every new event.
//! It binds the API (reads served from its state, marked as a standby's
//! view; writes answered 503 naming the leader) and the agents' endpoint
//! (a hello is answered "not the leader, try X"). Once elected it swaps in
//! the fenced storage, reads to the tail and leads like a restarted
//! controller: a takeover is a restart of the same rollout (SPEC §3),
//! stored decisions are replayed, deadlines of every op holding a slot are
//! armed again; only what was appended after its last poll is read.
//!
//! **Where the leader is.** The leader key's value is the leader's
//! [`Advert`] (`controller agents=HOST:PORT api=URL`), written when it is
//! elected; a standby reads it on every campaign round
//! ([`CAMPAIGN_ROUND_MS`]) and keeps it in the core's role cell.
//!
//! Stopping is exiting: a deposed controller (its lease expired or revoked,
//! or an append fenced) exits with [`EXIT_DEPOSED`] before it releases any
//! effect, which closes every agent link and the API at once; its
//! supervisor (systemd `Restart=always`) starts it again as a standby.

use super::core::{Command, CoreHandle};
use super::role::Advert;
use crate::driver::{Controller, ControllerError};
use eventlog::{EtcdClient, EtcdConfig, EtcdStorage, Leadership, LimitsProbed, StorageError};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Exit code of a controller that lost the log's leadership.
pub const EXIT_DEPOSED: i32 = api::exit::DEPOSED;

/// How long one campaign round waits before the standby reads again who
/// leads (and where), then campaigns again.
pub const CAMPAIGN_ROUND_MS: u64 = 1_000;

/// How long a standby waits after a failed etcd request before it
/// campaigns again (a standby outlives a short etcd outage).
const CAMPAIGN_RETRY_MS: u64 = 1_000;

/// A controller on the log, started from its newest usable snapshot and
/// the events after it.
pub type Elected = crate::driver::Started<super::annex::Derived>;

/// A hot standby's log: the etcd client (shared with the campaign) and the
/// controller replayed from the read-only log.
pub struct Follower {
    /// The connection the campaign reuses.
    pub client: EtcdClient,
    /// The controller over the read-only log, and its replayed history.
    pub opened: Elected,
    /// The cluster's limits, probed before campaigning: the takeover
    /// skips the probe (issue #26 item 6).
    pub probed: LimitsProbed,
}

/// Connects, probes the cluster's limits (a standby refuses to start on a
/// cluster it could not lead, rather than fail once elected) and opens the
/// log read-only: replayed, chain verified, history checked. Blocks (run
/// it off the async runtime).
pub fn open_follower(etcd: &EtcdConfig) -> anyhow::Result<Follower> {
    let client = EtcdClient::connect(etcd)?;
    let probed = EtcdStorage::probe(&client, etcd)?;
    let storage = EtcdStorage::open_read_only(&client, etcd)?;
    let opened = Controller::start_on_storage(Box::new(storage), super::annex::Derived::decode)?;
    Ok(Follower {
        client,
        opened,
        probed,
    })
}

/// Campaigns on a thread of its own as `advert` until elected, keeping the
/// leader's advert in the core's role cell meanwhile; once elected, opens
/// the fenced log, has the core take over ([`Command::Promote`]), starts
/// the lease watch, and fires the returned receiver.
/// `hold` is the fault injection `[faults] hold_in_snapshot_write`
/// (already checked against `--allow-fault-injection`).
pub fn spawn_campaign(
    (client, probed): (EtcdClient, LimitsProbed),
    etcd: EtcdConfig,
    (advert, hold): (Advert, Option<PathBuf>),
    core: CoreHandle,
) -> tokio::sync::oneshot::Receiver<()> {
    let (elected, fired) = tokio::sync::oneshot::channel();
    let runtime = tokio::runtime::Handle::current();
    std::thread::spawn(move || {
        let leadership = campaign(&client, &etcd, &advert, &core);
        let opened = EtcdStorage::open_probed(&client, &etcd, &leadership, &probed);
        let mut storage = match opened {
            Ok(storage) => storage,
            Err(err) if err.is_fencing() => deposed(&err.to_string()),
            Err(err) => {
                tracing::error!("elected, but opening the fenced log failed, stopping: {err}");
                std::process::exit(3);
            }
        };
        if let Some(file) = hold {
            storage.hold_before_manifest(hold_in_snapshot_write(file));
        }
        core.role().set_leader_advert(Some(advert));
        let (reply, promoted) = tokio::sync::oneshot::channel();
        runtime.block_on(core.send(Command::Promote {
            storage: Box::new(storage),
            reply,
        }));
        if runtime.block_on(promoted).is_err() {
            deposed("the core stopped while taking over");
        }
        watch_lease(Arc::new(leadership));
        let _ = elected.send(());
    });
    fired
}

/// How often a held snapshot write looks again (it never goes on: the
/// scenario kills the process).
const HOLD_POLL_MS: u64 = 100;

/// Fault injection (`[faults] hold_in_snapshot_write`): once `armed_by`
/// exists, the snapshot write under way holds between its chunks and its
/// manifest until the process is killed.
fn hold_in_snapshot_write(armed_by: PathBuf) -> eventlog::ManifestHook {
    Arc::new(move |covers| {
        if !armed_by.exists() {
            return;
        }
        tracing::warn!(
            covers,
            "FAULT INJECTION: holding in the snapshot write covering {covers} entries (chunks stored, manifest not written) until killed"
        );
        loop {
            std::thread::sleep(Duration::from_millis(HOLD_POLL_MS));
        }
    })
}

/// Campaign rounds until elected; between rounds the standby records who
/// leads. An etcd failure is logged and the campaign goes on.
fn campaign(
    client: &EtcdClient,
    etcd: &EtcdConfig,
    advert: &Advert,
    core: &CoreHandle,
) -> Leadership {
    let candidate = advert.encode();
    loop {
        let round = Duration::from_millis(CAMPAIGN_ROUND_MS);
        match Leadership::campaign(client, etcd, &candidate, round) {
            Ok(won) => {
                tracing::info!(
                    lease = won.lease_id(),
                    ttl_s = won.ttl().as_secs(),
                    "elected: this controller leads the log at {}",
                    etcd.prefix
                );
                return won;
            }
            Err(StorageError::LeaderElsewhere { holder, .. }) => {
                let leader = Advert::parse(&holder);
                if core.role().set_leader_advert(leader) {
                    tracing::info!(leader = %holder, "standby: another controller leads the log; following it");
                }
            }
            Err(err) => {
                tracing::warn!("standby: campaign round failed, retrying: {err}");
                std::thread::sleep(Duration::from_millis(CAMPAIGN_RETRY_MS));
            }
        }
    }
}

/// Exits with [`EXIT_DEPOSED`] once the lease is lost: it sleeps until the
/// instant etcd could expire the lease unless renewed meanwhile
/// ([`Leadership::time_left`], counted from when the last renewal was
/// sent), and at most a quarter TTL (etcd may say the lease is gone
/// earlier). So the leader stops within one TTL of its last renewal,
/// before a standby can be elected. The thread owns the leadership, so it
/// is never dropped (which would revoke it).
fn watch_lease(leadership: Arc<Leadership>) {
    let every = (leadership.ttl() / 4).max(Duration::from_millis(100));
    std::thread::spawn(move || loop {
        let left = leadership.time_left();
        if left.is_zero() {
            deposed("the leadership lease was lost: not renewed within its TTL");
        }
        std::thread::sleep(left.min(every));
    });
}

/// How long a deposed controller waits, after closing its agents' links,
/// for the close to be sent before it exits.
const CLOSE_FLUSH_MS: u64 = 100;

/// The agents' endpoint, closed by [`deposed`].
static AGENT_ENDPOINT: std::sync::OnceLock<protocol::quic::ControllerEndpoint> =
    std::sync::OnceLock::new();

/// Have [`deposed`] close `endpoint`'s connections before it exits: an
/// exit alone sends nothing, and each agent found the link dead only after
/// QUIC's idle timeout (10 s; scenario 20), so it reached the new leader
/// that much later.
pub fn close_links_when_deposed(endpoint: protocol::quic::ControllerEndpoint) {
    let _ = AGENT_ENDPOINT.set(endpoint);
}

/// Stops the process as a deposed leader: nothing more is released. Every
/// agent link is closed first (a QUIC close, which carries nothing from the
/// log), so the agents look for the new leader at once.
pub fn deposed(why: &str) -> ! {
    tracing::error!(
        "deposed ({why}): another controller may lead the log; stopping without acting"
    );
    if let Some(endpoint) = AGENT_ENDPOINT.get() {
        endpoint.close();
        std::thread::sleep(Duration::from_millis(CLOSE_FLUSH_MS));
    }
    std::process::exit(EXIT_DEPOSED)
}

/// Whether a controller failure means this controller was deposed.
pub fn is_deposed(err: &ControllerError) -> bool {
    matches!(err, ControllerError::Log(log) if log.is_fencing())
}
