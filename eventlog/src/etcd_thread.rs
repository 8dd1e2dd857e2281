//! The etcd client on its own thread: a synchronous façade over async
//! `etcd-client`.
//!
//! [`LogStorage`](super::LogStorage) is synchronous and the daemon calls it
//! from inside its tokio runtime, where `Runtime::block_on` panics. So the
//! client lives on a dedicated thread running a current-thread runtime; a
//! caller sends it a job (a closure producing a future) over a channel and
//! waits on a one-shot reply with [`REQUEST_TIMEOUT_MS_DEFAULT`]-style
//! timeouts, both inside the runtime (`tokio::time::timeout`) and on the
//! caller's side (`recv_timeout`), so no caller ever waits unbounded.
//!
//! The thread ends when the last [`EtcdClient`] clone is dropped (the job
//! channel closes), which also stops background tasks such as lease
//! keep-alives.

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use tokio::sync::mpsc;

use super::etcd_storage::EtcdConfig;
use super::storage::StorageError;

/// Longest one etcd request may take by default before it counts as failed
/// (`EtcdConfig::request_timeout_ms`). A timed-out append has an unknown
/// outcome, so the log poisons itself.
pub const REQUEST_TIMEOUT_MS_DEFAULT: u64 = 5_000;

/// Longest connecting to the cluster may take.
pub const CONNECT_TIMEOUT_MS: u64 = 5_000;

/// Extra time the caller waits beyond the request timeout for the reply to
/// cross the channel (the runtime thread enforces the real timeout).
const REPLY_SLACK_MS: u64 = 1_000;

/// Largest gRPC response the client decodes (tonic's default is 4 MiB). A
/// scan page holds at most `SCAN_PAGE_ENTRIES` entries of at most
/// `ENTRY_BYTES_MAX` (64 KiB) each, 16 MiB; this leaves room for headers.
pub(super) const DECODE_BYTES_MAX: usize = 32 << 20;

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;
type Job = Box<dyn FnOnce(Client) -> BoxFuture + Send>;

/// A connected etcd client usable from synchronous code, also from inside
/// a tokio runtime. Cheap to clone; all clones share one thread.
#[derive(Clone)]
pub struct EtcdClient {
    jobs: mpsc::UnboundedSender<Job>,
    timeout: Duration,
    /// Endpoints and prefix, for error messages.
    target: Arc<str>,
}

impl EtcdClient {
    /// Connects to `config.endpoints` on a new thread and waits until the
    /// connection is up (or [`CONNECT_TIMEOUT_MS`] ran out).
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
        let options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS))
            .with_timeout(timeout);
        thread::Builder::new()
            .name("fleetweft-etcd".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let client = match Client::connect(&endpoints, Some(options)).await {
                        Ok(client) => client,
                        Err(err) => {
                            let _ = ready_tx.send(Err(err.to_string()));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    while let Some(job) = queue.recv().await {
                        tokio::spawn(job(client.clone()));
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

    /// The per-request timeout.
    pub(super) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs `request` on the client thread and waits for its result, at
    /// most the request timeout. Turn a failure into a [`StorageError`]
    /// with [`EtcdClient::error`].
    pub(super) fn call<T, F, Fut>(&self, request: F) -> Result<T, CallError>
    where
        T: Send + 'static,
        F: FnOnce(Client) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
    {
        let (reply_tx, reply_rx) = std_mpsc::sync_channel(1);
        let timeout = self.timeout;
        let job: Job = Box::new(move |client| {
            Box::pin(async move {
                let outcome = match tokio::time::timeout(timeout, request(client)).await {
                    Ok(Ok(value)) => Ok(value),
                    Ok(Err(err)) => Err(CallError::Client(err)),
                    Err(_) => Err(CallError::TimedOut),
                };
                let _ = reply_tx.send(outcome);
            })
        });
        if self.jobs.send(job).is_err() {
            return Err(CallError::Gone);
        }
        let wait = timeout + Duration::from_millis(REPLY_SLACK_MS);
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
        F: FnOnce(Client) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let job: Job = Box::new(move |client| Box::pin(task(client)));
        self.jobs.send(job).map_err(|_| CallError::Gone)
    }

    /// Turns a failed call into a [`StorageError::Etcd`] naming `action`.
    pub(super) fn error(&self, action: &'static str, err: CallError) -> StorageError {
        StorageError::Etcd {
            target: self.target.to_string(),
            action,
            detail: err.describe(self.timeout),
        }
    }
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

    fn describe(&self, timeout: Duration) -> String {
        match self {
            CallError::Client(err) => err.to_string(),
            CallError::TimedOut => format!(
                "no answer within {} ms (the outcome is unknown)",
                timeout.as_millis()
            ),
            CallError::Gone => "the etcd client thread has stopped".into(),
        }
    }
}
