//! The etcd client on its own thread: a synchronous façade over async
//! `etcd-client`, pinned to one member at a time, failing over to the next.
//!
//! [`LogStorage`](super::LogStorage) is synchronous and the daemon calls it
//! from inside its tokio runtime, where `Runtime::block_on` panics. So the
//! client lives on a dedicated thread running a current-thread runtime; a
//! caller sends it a job (a closure producing a future) over a channel and
//! waits on a one-shot reply, with timeouts both inside the runtime
//! (`tokio::time::timeout`) and on the caller's side (`recv_timeout`), so
//! no caller ever waits unbounded.
//!
//! **One client per member, pinned, with failover.** `etcd-client` puts
//! every endpoint behind one tonic balanced channel (tower's p2c). A member
//! that is down is not taken out of it: tonic's `Reconnect` answers
//! `poll_ready` with "ready" after a failed reconnect and returns the
//! connection error from `call`, so the balancer keeps choosing the dead
//! member for a share of the requests, and each such request fails. So
//! this thread keeps one `Client` per endpoint, sends every request to the
//! *pinned* member, and on a failure that says "this member cannot serve"
//! (a transport error, gRPC `Unavailable`, an attempt that timed out) pins
//! the next member; idempotent requests are then retried there, within the
//! operation's budget (`EtcdConfig::request_timeout_ms`). Appends, whose
//! outcome is unknown after such a failure, are resolved by
//! `etcd_storage.rs`, not blindly retried here.
//!
//! The thread ends when the last [`EtcdClient`] clone is dropped (the job
//! channel closes), which also stops background tasks such as lease
//! keep-alives.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions};
use tokio::sync::mpsc;

use super::etcd_config::EtcdConfig;
use super::storage::StorageError;

/// Longest connecting to the cluster may take.
pub const CONNECT_TIMEOUT_MS: u64 = 5_000;

/// Longest one attempt of a retried request may take before the member is
/// presumed unable to answer and the next one is tried. A request a member
/// forwarded to a raft leader that then died is never answered (etcd 3.4
/// waits out its own 5 s + 2 election timeouts), so an attempt must give
/// up well before the operation's budget for a retry to fit; 1.5 s leaves
/// room for etcd's default 1 s election timeout plus a commit.
pub const ATTEMPT_TIMEOUT_MS: u64 = 1_500;

/// Most attempts one retried request makes (so with every member down an
/// operation fails after this many quick refusals, not a busy loop).
pub const ATTEMPTS_MAX: u32 = 6;

/// Pause before retrying on the next member, so an election can progress
/// and a cluster that refuses at once is not hammered.
pub const RETRY_PAUSE_MS: u64 = 100;

/// How tonic words a failed TCP connect (refused, unreachable): no TLS
/// setting is to blame then.
const TCP_CONNECT_FAILED: &str = "tcp connect error";

/// Extra time the caller waits beyond the budget for the reply to cross
/// the channel (the runtime thread enforces the real timeout).
const REPLY_SLACK_MS: u64 = 1_000;

/// Largest gRPC response the client decodes (tonic's default is 4 MiB). A
/// scan page holds at most `SCAN_PAGE_ENTRIES` entries of at most
/// `ENTRY_BYTES_MAX` (64 KiB) each, 16 MiB; this leaves room for headers.
pub(super) const DECODE_BYTES_MAX: usize = 32 << 20;

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;
type Job = Box<dyn FnOnce(Members) -> BoxFuture + Send>;

/// One client per configured member and which one requests go to. Lives
/// on the client thread (jobs receive a clone).
#[derive(Clone)]
pub(super) struct Members {
    clients: Arc<[Client]>,
    pinned: Arc<AtomicUsize>,
}

impl Members {
    /// The pinned member's index and client.
    pub(super) fn pinned(&self) -> (usize, Client) {
        let index = self.pinned.load(Ordering::Acquire) % self.clients.len();
        (index, self.clients[index].clone())
    }

    /// Member `index` failed: pin the next one, unless another request
    /// already moved the pin (so concurrent failures skip no member).
    pub(super) fn fail_over(&self, index: usize) {
        let next = (index + 1) % self.clients.len();
        let _ = self
            .pinned
            .compare_exchange(index, next, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// How [`EtcdClient::call`] treats a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Retry {
    /// Idempotent (reads, a lease revoke, a probe whose compare always
    /// fails): retried on the next member after a failure that says the
    /// member cannot serve, each attempt at most [`ATTEMPT_TIMEOUT_MS`],
    /// at most [`ATTEMPTS_MAX`] attempts, all within the budget.
    Idempotent,
    /// Idempotent but slow by design (the limit probe's transactions of up
    /// to 10 MiB): retried on the next member like `Idempotent`, but each
    /// attempt may use all the budget left.
    Patient,
    /// One attempt with the whole budget (a write whose repetition would
    /// not be harmless). A failure still moves the pin for later calls.
    Once,
}

/// A connected etcd client usable from synchronous code, also from inside
/// a tokio runtime. Cheap to clone; all clones share one thread.
#[derive(Clone)]
pub struct EtcdClient {
    jobs: mpsc::UnboundedSender<Job>,
    timeout: Duration,
    /// Endpoints and prefix, for error messages.
    target: Arc<str>,
    /// Appended to a connection failure's message: what TLS setting may
    /// be missing (a refused handshake only says "broken pipe").
    tls_hint: &'static str,
}

impl EtcdClient {
    /// Makes one client per endpoint in `config.endpoints` on a new thread
    /// (with TLS when configured). Connections are made on first use; a
    /// member that is down then fails over to the next.
    pub fn connect(config: &EtcdConfig) -> Result<Self, StorageError> {
        config.validate()?;
        let target: Arc<str> = config.target().into();
        let fail = |detail: String| StorageError::Etcd {
            target: target.to_string(),
            action: "connecting",
            detail,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| fail(format!("cannot start the client runtime: {err}")))?;
        let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
        let (ready_tx, ready_rx) = std_mpsc::sync_channel(1);
        let endpoints = config.endpoints.clone();
        let timeout = Duration::from_millis(config.request_timeout_ms);
        let mut options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS))
            .with_timeout(timeout);
        if let Some(tls) = &config.tls {
            options = options.with_tls(tls.load()?);
        }
        let tls_hint = match &config.tls {
            None => " (if the members serve https, set the TLS `ca_file`)",
            Some(tls) if tls.cert_file.is_none() => {
                " (if the members require client certificates, set `cert_file` and `key_file`)"
            }
            Some(_) => "",
        };
        thread::Builder::new()
            .name("fleetweft-etcd".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let members = match connect_each(&endpoints, options).await {
                        Ok(members) => members,
                        Err(err) => {
                            let _ = ready_tx.send(Err(err));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    while let Some(job) = queue.recv().await {
                        tokio::spawn(job(members.clone()));
                    }
                });
            })
            .map_err(|err| fail(format!("cannot start the client thread: {err}")))?;
        let wait = Duration::from_millis(CONNECT_TIMEOUT_MS + REPLY_SLACK_MS);
        match ready_rx.recv_timeout(wait) {
            Ok(Ok(())) => Ok(EtcdClient {
                jobs,
                timeout,
                target,
                tls_hint,
            }),
            Ok(Err(detail)) => Err(fail(detail)),
            Err(_) => Err(fail(format!(
                "no connection within {CONNECT_TIMEOUT_MS} ms"
            ))),
        }
    }

    /// Endpoints and prefix, as named in errors.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The budget of one operation, retries included.
    pub(super) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs `request` on the pinned member and waits for its result, at
    /// most the budget; with [`Retry::Idempotent`], retries it on the next
    /// member after a failure that says the member cannot serve. Turn a
    /// failure into a [`StorageError`] with [`EtcdClient::error`].
    pub(super) fn call<T, F, Fut>(&self, retry: Retry, request: F) -> Result<T, CallError>
    where
        T: Send + 'static,
        F: Fn(Client) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
    {
        let budget = self.timeout;
        self.run(budget, move |members| async move {
            let deadline = Instant::now() + budget;
            let mut attempt = 1;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let limit = match retry {
                    Retry::Idempotent if attempt < ATTEMPTS_MAX => {
                        left.min(Duration::from_millis(ATTEMPT_TIMEOUT_MS))
                    }
                    _ => left,
                };
                let outcome = attempt_on(&members, limit, &request).await;
                let left = deadline.saturating_duration_since(Instant::now());
                match outcome {
                    Err(err)
                        if retry != Retry::Once
                            && err.is_unavailable()
                            && attempt < ATTEMPTS_MAX
                            && left > Duration::from_millis(RETRY_PAUSE_MS) =>
                    {
                        tokio::time::sleep(Duration::from_millis(RETRY_PAUSE_MS)).await;
                        attempt += 1;
                    }
                    outcome => return outcome,
                }
            }
        })
    }

    /// One attempt of `request` on the pinned member, at most `limit`; a
    /// failure that says the member cannot serve moves the pin. For
    /// requests whose retry the caller decides (appends).
    pub(super) fn attempt<T, F, Fut>(&self, limit: Duration, request: F) -> Result<T, CallError>
    where
        T: Send + 'static,
        F: Fn(Client) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
    {
        self.run(limit, move |members| async move {
            attempt_on(&members, limit, &request).await
        })
    }

    /// Runs `job` on the client thread and waits for its reply, at most
    /// `budget` plus the channel slack.
    fn run<T, J, Fut>(&self, budget: Duration, job: J) -> Result<T, CallError>
    where
        T: Send + 'static,
        J: FnOnce(Members) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, CallError>> + Send + 'static,
    {
        let (reply_tx, reply_rx) = std_mpsc::sync_channel(1);
        let job: Job = Box::new(move |members| {
            Box::pin(async move {
                let _ = reply_tx.send(job(members).await);
            })
        });
        if self.jobs.send(job).is_err() {
            return Err(CallError::Gone);
        }
        let wait = budget + Duration::from_millis(REPLY_SLACK_MS);
        match reply_rx.recv_timeout(wait) {
            Ok(outcome) => outcome,
            Err(std_mpsc::RecvTimeoutError::Timeout) => Err(CallError::TimedOut),
            Err(std_mpsc::RecvTimeoutError::Disconnected) => Err(CallError::Gone),
        }
    }

    /// Starts `task` on the client thread without waiting for it (e.g. a
    /// lease keep-alive loop). It stops when the thread does.
    pub(super) fn spawn<F, Fut>(&self, task: F) -> Result<(), CallError>
    where
        F: FnOnce(Members) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let job: Job = Box::new(move |members| Box::pin(task(members)));
        self.jobs.send(job).map_err(|_| CallError::Gone)
    }

    /// Turns a failed call into a [`StorageError::Etcd`] naming `action`.
    pub(super) fn error(&self, action: &'static str, err: CallError) -> StorageError {
        let mut detail = err.describe(self.timeout);
        // Not when nothing listens: a TLS setting would not change that.
        if err.is_connection_failure() && !detail.contains(TCP_CONNECT_FAILED) {
            detail.push_str(self.tls_hint);
        }
        StorageError::Etcd {
            target: self.target.to_string(),
            action,
            detail,
        }
    }
}

/// One client per endpoint (each its own one-endpoint channel), pinned to
/// the first.
async fn connect_each(endpoints: &[String], options: ConnectOptions) -> Result<Members, String> {
    let mut clients = Vec::with_capacity(endpoints.len());
    for endpoint in endpoints {
        let client = Client::connect([endpoint], Some(options.clone()))
            .await
            .map_err(|err| format!("endpoint {endpoint}: {err}"))?;
        clients.push(client);
    }
    if clients.is_empty() {
        return Err("no endpoint configured".into());
    }
    Ok(Members {
        clients: clients.into(),
        pinned: Arc::new(AtomicUsize::new(0)),
    })
}

/// One attempt on the pinned member, at most `limit`; fails over when the
/// member could not serve.
async fn attempt_on<T, F, Fut>(
    members: &Members,
    limit: Duration,
    request: &F,
) -> Result<T, CallError>
where
    F: Fn(Client) -> Fut,
    Fut: Future<Output = Result<T, etcd_client::Error>>,
{
    let (index, client) = members.pinned();
    let outcome = match tokio::time::timeout(limit, request(client)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(CallError::Client(err)),
        Err(_) => Err(CallError::TimedOut),
    };
    if let Err(err) = &outcome {
        if err.is_unavailable() {
            members.fail_over(index);
        }
    }
    outcome
}

/// Why a call to the client thread failed.
#[derive(Debug)]
pub(super) enum CallError {
    /// The client or the server reported an error.
    Client(etcd_client::Error),
    /// No answer within the request timeout: the outcome is unknown.
    TimedOut,
    /// The client thread is gone (it failed to start or panicked).
    Gone,
}

/// gRPC status codes the backend tells apart (tonic's `Code` as i32).
pub(super) mod grpc_code {
    /// etcd's "too many operations in txn request", "request is too large".
    pub const INVALID_ARGUMENT: i32 = 3;
    /// gRPC's own "received message larger than max".
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    /// No connection to the member, or etcd's "no leader", "leader
    /// changed", "request timed out" (etcd 3.4 maps all of them here).
    pub const UNAVAILABLE: i32 = 14;
}

impl CallError {
    /// The gRPC status code, when the server answered with one.
    pub(super) fn grpc_code(&self) -> Option<i32> {
        match self {
            CallError::Client(etcd_client::Error::GRpcStatus(status)) => {
                Some(i32::from(status.code()))
            }
            _ => None,
        }
    }

    /// Whether the member could not serve the request (so another member
    /// may): no connection, "unavailable" (no leader, leader changed,
    /// timed out inside etcd), a raft proposal dropped for want of a
    /// leader, or no answer within the attempt's time. The outcome of a
    /// write that failed so is unknown.
    pub(super) fn is_unavailable(&self) -> bool {
        match self {
            CallError::TimedOut => true,
            CallError::Gone => false,
            CallError::Client(etcd_client::Error::TransportError(_)) => true,
            // A status with a source was made by tonic on this side from a
            // connection failure (often code Unknown, "transport error": a
            // reset, a broken pipe); one from the server has none.
            CallError::Client(etcd_client::Error::GRpcStatus(status)) => {
                i32::from(status.code()) == grpc_code::UNAVAILABLE
                    || status.message().contains("proposal dropped")
                    || std::error::Error::source(status).is_some()
            }
            CallError::Client(_) => false,
        }
    }

    /// Whether the connection itself failed (made on this side by tonic).
    fn is_connection_failure(&self) -> bool {
        match self {
            CallError::Client(etcd_client::Error::TransportError(_)) => true,
            CallError::Client(etcd_client::Error::GRpcStatus(status)) => {
                std::error::Error::source(status).is_some()
            }
            _ => false,
        }
    }

    fn describe(&self, timeout: Duration) -> String {
        match self {
            CallError::Client(err) => err.to_string(),
            CallError::TimedOut => format!(
                "no answer within {} ms from any member tried (the outcome is unknown)",
                timeout.as_millis()
            ),
            CallError::Gone => "the etcd client thread has stopped".into(),
        }
    }
}
