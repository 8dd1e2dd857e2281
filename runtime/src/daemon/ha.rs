//! The controller on etcd (issue #14): campaign for the log's leadership,
//! open the fenced log once elected, and stop acting the moment the
//! leadership is gone.
//!
//! A controller that is not elected is a **cold standby**: it waits in the
//! campaign and binds neither the agents' endpoint nor the API, so agents
//! (`[controller] addrs`) move on to the next address. Once elected it reads
//! the whole log (chain verified, history checked) and starts like a
//! restarted controller: a takeover is a restart of the same rollout (SPEC
//! §3), stored decisions are replayed, deadlines of every op holding a slot
//! are armed again.
//!
//! Stopping is exiting: a deposed controller (its lease expired or revoked,
//! or an append fenced) exits with [`EXIT_DEPOSED`] before it releases any
//! effect, which closes every agent link and the API at once; its
//! supervisor (systemd `Restart=always`) starts it again as a standby.

use crate::controller::{Controller, ControllerError};
use crate::log::{EtcdClient, EtcdConfig, EtcdStorage, Leadership, StorageError};
use model::controller::Event;
use std::sync::Arc;
use std::time::Duration;

/// Exit code of a controller that lost the log's leadership.
pub const EXIT_DEPOSED: i32 = 4;

/// How long one campaign round waits before the standby logs who leads
/// and campaigns again.
const CAMPAIGN_ROUND_MS: u64 = 10_000;

/// A controller elected on etcd: the controller, its replayed history.
pub type Elected = (Controller, Vec<(u64, Event)>);

/// Campaigns as `candidate` until elected, then opens the fenced log and
/// starts the lease watch. Blocks (run it off the async runtime).
pub fn campaign_and_open(etcd: &EtcdConfig, candidate: &str) -> anyhow::Result<Elected> {
    let client = EtcdClient::connect(etcd)?;
    let leadership = loop {
        let round = Duration::from_millis(CAMPAIGN_ROUND_MS);
        match Leadership::campaign(&client, etcd, candidate, round) {
            Ok(won) => break won,
            Err(StorageError::LeaderElsewhere { holder, .. }) => {
                tracing::info!(leader = %holder, "standby: another controller leads the log; waiting");
            }
            Err(err) => return Err(err.into()),
        }
    };
    tracing::info!(
        lease = leadership.lease_id(),
        ttl_s = leadership.ttl().as_secs(),
        "elected: this controller leads the log at {}",
        etcd.prefix
    );
    let storage = EtcdStorage::open(&client, etcd, &leadership)?;
    let elected = Controller::open_on_storage(Box::new(storage))?;
    watch_lease(Arc::new(leadership));
    Ok(elected)
}

/// Exits with [`EXIT_DEPOSED`] once the lease is lost, checking four times
/// per TTL: within one TTL of the loss nothing more is sent. The thread
/// owns the leadership, so it is never dropped (which would revoke it).
fn watch_lease(leadership: Arc<Leadership>) {
    let every = (leadership.ttl() / 4).max(Duration::from_millis(100));
    std::thread::spawn(move || loop {
        std::thread::sleep(every);
        if leadership.is_lost() {
            deposed("the leadership lease was lost");
        }
    });
}

/// Stops the process as a deposed leader: nothing more is released.
pub fn deposed(why: &str) -> ! {
    tracing::error!(
        "deposed ({why}): another controller may lead the log; stopping without acting"
    );
    std::process::exit(EXIT_DEPOSED)
}

/// Whether a controller failure means this controller was deposed.
pub fn is_deposed(err: &ControllerError) -> bool {
    matches!(err, ControllerError::Log(log) if log.is_fencing())
}
