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
//! [`Leadership::is_lost`] is an early warning; a caller should stop acting
//! when it turns true, but correctness rests on the compare, not on it. It
//! turns true at the latest when etcd could expire the lease: one granted
//! TTL after the last renewal that succeeded was SENT (etcd counts the TTL
//! from when it handled the request, which is later), so a leader that
//! watches [`Leadership::time_left`] stops before a standby can be elected
//! (scenario 20 found it running up to 2 TTL after its last renewal when
//! this was counted from the answers, checked between renewals).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};

use super::etcd_config::{EtcdConfig, Keys};
use super::etcd_thread::{CallError, EtcdClient, Retry, RETRY_PAUSE_MS};
use super::storage::StorageError;

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
    /// When etcd could expire the lease, as ms after [`Expiry::origin`].
    expiry: Expiry,
}

/// The instant etcd could expire the lease, at the earliest: shared with
/// the keep-alive task, which moves it on every renewal.
#[derive(Clone)]
struct Expiry {
    origin: Instant,
    after_ms: Arc<AtomicU64>,
}

impl Expiry {
    /// `ttl` after `sent` (a grant or renewal request sent then).
    fn new(sent: Instant, ttl: Duration) -> Self {
        let expiry = Expiry {
            origin: sent,
            after_ms: Arc::new(AtomicU64::new(0)),
        };
        expiry.renewed(sent, ttl);
        expiry
    }

    /// A renewal sent at `sent` was granted `ttl`.
    fn renewed(&self, sent: Instant, ttl: Duration) {
        let at = sent.saturating_duration_since(self.origin) + ttl;
        let ms = u64::try_from(at.as_millis()).unwrap_or(u64::MAX);
        self.after_ms.store(ms, Ordering::Release);
    }

    /// How long until then (zero once passed).
    fn left(&self) -> Duration {
        let at = self.origin + Duration::from_millis(self.after_ms.load(Ordering::Acquire));
        at.saturating_duration_since(Instant::now())
    }
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
                Attempt::Won(fence, granted) => {
                    let lost = Arc::new(AtomicBool::new(false));
                    let expiry = Expiry::new(granted, ttl);
                    start_keep_alive(client, &fence, ttl, Arc::clone(&lost), expiry.clone())
                        .map_err(|err| client.error("starting the lease keep-alive", err))?;
                    return Ok(Leadership {
                        client: client.clone(),
                        fence,
                        ttl,
                        lost,
                        expiry,
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

    /// True once etcd could have expired the lease (one granted TTL after
    /// the last successful renewal was sent), or etcd reported it expired:
    /// assume deposed and stop acting.
    pub fn is_lost(&self) -> bool {
        self.time_left().is_zero()
    }

    /// How long this controller may still act as the leader unless the
    /// lease is renewed meanwhile: zero once [`Leadership::is_lost`].
    pub fn time_left(&self) -> Duration {
        if self.lost.load(Ordering::Acquire) {
            return Duration::ZERO;
        }
        self.expiry.left()
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
    /// Elected; the lease was requested at that instant.
    Won(Fence, Instant),
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
    let granted = Instant::now();
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
    Ok(Attempt::Won(
        Fence {
            leader_key: keys.leader.clone(),
            create_revision,
            lease_id: lease,
            lease_ttl: Duration::from_secs(ttl_secs),
        },
        granted,
    ))
}

/// Renews `lease` every third of `ttl` on the client thread, reopening the
/// keep-alive stream on the next member after an error, moves `expiry` on
/// every renewal a quorum confirms (from when it was sent), and sets `lost`
/// once no renewal succeeded for a whole TTL or etcd says the lease or the
/// leader key is gone. Stops when `lost` is set (also by `resign`).
fn start_keep_alive(
    client: &EtcdClient,
    fence: &Fence,
    ttl: Duration,
    lost: Arc<AtomicBool>,
    expiry: Expiry,
) -> Result<(), CallError> {
    let (lease, leader_key) = (fence.lease_id, fence.leader_key.clone());
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
                let sent = Instant::now();
                let renewed = tokio::time::timeout(request_timeout, async {
                    keeper.keep_alive().await?;
                    answers.message().await
                })
                .await;
                match renewed {
                    Ok(Ok(Some(answer))) if answer.ttl() > 0 => {
                        // etcd 3.4's raft leader renews from its own lessor
                        // even when cut off from its quorum (until it steps
                        // down), while the quorum may expire the lease: a
                        // renewal counts only once a linearizable read (a
                        // quorum round) shows the leader key still ours.
                        // Scenario 21 found a leader running 4 s after its
                        // quorum was gone, TTL 2 s.
                        let (index, mut reader) = members.pinned();
                        let read = tokio::time::timeout(
                            request_timeout,
                            reader.get(leader_key.clone(), None),
                        )
                        .await;
                        if !matches!(read, Ok(Ok(_))) {
                            members.fail_over(index);
                        }
                        match read {
                            Ok(Ok(found))
                                if found.kvs().first().is_some_and(|kv| kv.lease() == lease) =>
                            {
                                last_renewed = Instant::now();
                                let granted = Duration::from_secs(answer.ttl().unsigned_abs());
                                expiry.renewed(sent, granted);
                            }
                            // The key is gone or another's: deposed.
                            Ok(Ok(_)) => lost.store(true, Ordering::Release),
                            // No quorum answered: not renewed this round.
                            _ => {}
                        }
                    }
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
