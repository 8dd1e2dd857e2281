//! Leader election with fencing for an etcd-backed log.
//!
//! A controller campaigns by creating the leader key `P/leader` (only if it
//! does not exist) attached to a fresh lease of `lease_ttl_ms`, and keeps the
//! lease alive from the client thread (a renewal every third of the TTL).
//! The key's create revision and the lease id form the [`Fence`] every
//! append compares (see `etcd_storage.rs`): once the lease expires or is
//! revoked etcd deletes the key, a new leader's key has another create
//! revision and lease, and the old leader's appends fail with
//! [`StorageError::Deposed`] without writing anything. The fence does not
//! depend on this process noticing anything: it is evaluated by etcd,
//! linearizably, inside the append's own transaction.
//!
//! [`Leadership::is_lost`] is an early warning (the keep-alive could not
//! renew within a TTL); a caller should stop acting when it turns true, but
//! correctness rests on the compare, not on it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};

use super::etcd_storage::{EtcdConfig, Keys};
use super::etcd_thread::{CallError, EtcdClient, Retry, RETRY_PAUSE_MS};
use super::storage::StorageError;

/// Leadership lease TTL unless configured: a few seconds, so a standby takes
/// over soon after a leader dies, while a leader survives a short stall.
pub const LEASE_TTL_MS_DEFAULT: u64 = 5_000;

/// How often a waiting candidate looks whether the leader key is gone.
const CAMPAIGN_POLL_MS: u64 = 200;

/// What an append compares: the leader key's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// `P/leader`.
    pub(super) leader_key: Vec<u8>,
    /// The revision at which this controller created the leader key.
    pub(super) create_revision: i64,
    /// This controller's lease, to which the leader key is attached.
    pub(super) lease_id: i64,
    /// The lease's TTL: an append's retries stay within it.
    pub(super) lease_ttl: Duration,
}

/// This controller leads the log under one prefix, for as long as its lease
/// lives. Dropping it revokes the lease (best effort), deposing itself.
pub struct Leadership {
    client: EtcdClient,
    fence: Fence,
    ttl: Duration,
    lost: Arc<AtomicBool>,
}

impl Leadership {
    /// Campaigns as `candidate` (its name, stored as the leader key's value)
    /// and returns once elected, or [`StorageError::LeaderElsewhere`] when
    /// another controller still leads after `wait_max`.
    pub fn campaign(
        client: &EtcdClient,
        config: &EtcdConfig,
        candidate: &str,
        wait_max: Duration,
    ) -> Result<Self, StorageError> {
        config.validate()?;
        let keys = Keys::new(config.clean_prefix());
        let ttl_secs = config.lease_ttl_ms.div_ceil(1_000);
        let ttl = Duration::from_secs(ttl_secs);
        let started = Instant::now();
        loop {
            match try_once(client, &keys, candidate, ttl_secs)? {
                Attempt::Won(fence) => {
                    let lost = Arc::new(AtomicBool::new(false));
                    start_keep_alive(client, fence.lease_id, ttl, Arc::clone(&lost))
                        .map_err(|err| client.error("starting the lease keep-alive", err))?;
                    return Ok(Leadership {
                        client: client.clone(),
                        fence,
                        ttl,
                        lost,
                    });
                }
                Attempt::Held(holder) if started.elapsed() >= wait_max => {
                    return Err(StorageError::LeaderElsewhere {
                        target: client.target().to_string(),
                        holder,
                        waited_ms: started.elapsed().as_millis() as u64,
                    });
                }
                Attempt::Held(_) => std::thread::sleep(Duration::from_millis(CAMPAIGN_POLL_MS)),
            }
        }
    }

    /// What appends compare.
    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// The lease id (for diagnostics).
    pub fn lease_id(&self) -> i64 {
        self.fence.lease_id
    }

    /// The lease TTL as granted (whole seconds).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// True once the keep-alive could not renew the lease within one TTL,
    /// or etcd reported it expired: assume deposed and stop acting.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// Revokes the lease now: etcd deletes the leader key, this controller's
    /// appends fail from here on, and a standby can be elected at once.
    pub fn resign(self) -> Result<(), StorageError> {
        self.revoke()
    }

    /// Stops renewing the lease without revoking it, as a crashed
    /// controller would: the leadership ends when etcd expires the lease,
    /// one TTL later. For tests and drills of the expiry path.
    pub fn abandon(self) {
        // Marked lost first, so `Drop` does not revoke.
        self.lost.store(true, Ordering::Release);
    }

    fn revoke(&self) -> Result<(), StorageError> {
        self.lost.store(true, Ordering::Release);
        let lease = self.fence.lease_id;
        self.client
            .call(Retry::Idempotent, move |mut client| async move {
                client.lease_revoke(lease).await
            })
            .map(|_| ())
            .map_err(|err| self.client.error("revoking the lease", err))
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        if !self.lost.load(Ordering::Acquire) {
            // Best effort: if it fails the lease simply expires after its TTL.
            let _ = self.revoke();
        }
    }
}

enum Attempt {
    Won(Fence),
    /// The leader key exists; its value.
    Held(String),
}

/// One election attempt: if nobody holds the leader key, grant a lease and
/// create the key under it in a transaction that fails if someone else
/// created it meanwhile.
fn try_once(
    client: &EtcdClient,
    keys: &Keys,
    candidate: &str,
    ttl_secs: u64,
) -> Result<Attempt, StorageError> {
    let leader = keys.leader.clone();
    let current = client
        .call(Retry::Idempotent, move |mut client| {
            let leader = leader.clone();
            async move { client.get(leader, None).await }
        })
        .map_err(|err| client.error("reading the leader key", err))?;
    if let Some(kv) = current.kvs().first() {
        return Ok(Attempt::Held(
            String::from_utf8_lossy(kv.value()).into_owned(),
        ));
    }
    let ttl = i64::try_from(ttl_secs)
        .map_err(|_| StorageError::EtcdConfig(format!("lease TTL {ttl_secs} s is too large")))?;
    let lease = client
        // A retried grant may leave an unused lease behind: it expires.
        .call(Retry::Idempotent, move |mut client| async move {
            client.lease_grant(ttl, None).await
        })
        .map_err(|err| client.error("granting the leadership lease", err))?
        .id();
    let txn = Txn::new()
        .when([Compare::create_revision(
            keys.leader.clone(),
            CompareOp::Equal,
            0,
        )])
        .and_then([TxnOp::put(
            keys.leader.clone(),
            candidate.as_bytes().to_vec(),
            Some(PutOptions::new().with_lease(lease)),
        )]);
    let response = client
        // Once: a retry after an unknown outcome would meet our own key and
        // report the election lost; the next campaign round sorts it out.
        .call(Retry::Once, move |mut client| {
            let txn = txn.clone();
            async move { client.txn(txn).await }
        })
        .map_err(|err| client.error("creating the leader key", err))?;
    if !response.succeeded() {
        let _ = client.call(Retry::Idempotent, move |mut client| async move {
            client.lease_revoke(lease).await
        });
        return Ok(Attempt::Held("another candidate (raced)".into()));
    }
    // The put is the transaction's only write: its revision is the key's
    // create revision.
    let Some(create_revision) = response.header().map(|header| header.revision()) else {
        return Err(client.error(
            "creating the leader key",
            CallError::Client(etcd_client::Error::Internal(
                "the transaction's answer has no header".into(),
            )),
        ));
    };
    Ok(Attempt::Won(Fence {
        leader_key: keys.leader.clone(),
        create_revision,
        lease_id: lease,
        lease_ttl: Duration::from_secs(ttl_secs),
    }))
}

/// Renews `lease` every third of `ttl` on the client thread, reopening the
/// keep-alive stream on the next member after an error, and sets
/// `lost` once no renewal succeeded for a whole TTL or etcd says the lease
/// is gone. Stops when `lost` is set (also by `resign`).
fn start_keep_alive(
    client: &EtcdClient,
    lease: i64,
    ttl: Duration,
    lost: Arc<AtomicBool>,
) -> Result<(), CallError> {
    let period = ttl / 3;
    let request_timeout = client.timeout().min(period);
    client.spawn(move |members| async move {
        let mut last_renewed = Instant::now();
        let mut stream = None;
        // The member the stream is open on.
        let mut on = 0;
        while !lost.load(Ordering::Acquire) {
            if stream.is_none() {
                let (index, mut client) = members.pinned();
                on = index;
                stream = tokio::time::timeout(request_timeout, client.lease_keep_alive(lease))
                    .await
                    .ok()
                    .and_then(Result::ok);
                if stream.is_none() {
                    members.fail_over(on);
                }
            }
            if let Some((keeper, answers)) = stream.as_mut() {
                let renewed = tokio::time::timeout(request_timeout, async {
                    keeper.keep_alive().await?;
                    answers.message().await
                })
                .await;
                match renewed {
                    Ok(Ok(Some(answer))) if answer.ttl() > 0 => last_renewed = Instant::now(),
                    // TTL 0: etcd says the lease expired or was revoked.
                    Ok(Ok(Some(_))) => lost.store(true, Ordering::Release),
                    _ => {
                        stream = None;
                        members.fail_over(on);
                    }
                }
            }
            if last_renewed.elapsed() >= ttl {
                lost.store(true, Ordering::Release);
            }
            // After a failure, try the next member soon, not a period later.
            let pause = match stream {
                Some(_) => period,
                None => Duration::from_millis(RETRY_PAUSE_MS),
            };
            tokio::time::sleep(pause).await;
        }
    })
}
