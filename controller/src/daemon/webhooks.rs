//! `[[webhooks]]`: each durable event POSTed to a receiver, signed, in log
//! order, with a durable delivery cursor (issue 13).
//!
//! One task per webhook reads the log from its cursor page by page
//! (bounded reads through the core), POSTs each event of the kinds it
//! wants as the JSON `GET /api/events` returns for it, and waits on the
//! core's appends when it is at the end. Headers: `X-Fleetweft-Signature:
//! sha256=<hex HMAC-SHA256(secret, body)>`, `X-Fleetweft-Sequence`,
//! `X-Fleetweft-Event` (the kind word). A delivery is retried with
//! exponential backoff until the receiver answers 2xx: an event is never
//! skipped, and the next one waits for it.
//!
//! The cursor (last sequence acknowledged) is a small file per webhook in
//! `data_dir/webhooks/`, replaced atomically (temp file, fsync, rename,
//! fsync of the directory) after every acknowledged delivery, so a restart
//! resumes right after the last acknowledged event: an orderly restart
//! neither loses nor repeats one. A crash between a receiver's 2xx and the
//! cursor write repeats that one event (at-least-once): receivers dedupe
//! on `X-Fleetweft-Sequence`. A webhook seen for the first time starts
//! after the log's last event at start (it does not replay history).

use super::config::{ControllerConfig, WebhookEntry};
use super::core::CoreHandle;
use super::view::words;
use anyhow::Context;
use bytes::Bytes;
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use model::controller::Event;
use sha2::{Digest as _, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The cursors' directory inside the controller's data directory.
pub const CURSOR_DIR: &str = "webhooks";
/// How long one delivery attempt may take (connect, send, answer).
pub const WEBHOOK_TIMEOUT_MS: u64 = 5_000;
/// The first retry's delay; each further retry doubles it.
pub const WEBHOOK_BACKOFF_BASE_MS: u64 = 250;
/// The longest delay between two attempts.
pub const WEBHOOK_BACKOFF_MAX_MS: u64 = 30_000;
/// Events read from the log per page.
pub const WEBHOOK_PAGE_EVENTS: usize = 256;
/// Most of a receiver's answer read (and then ignored) per delivery.
pub const WEBHOOK_ANSWER_BYTES_MAX: usize = 64 * 1024;
/// Upper bound on a cursor file.
pub const CURSOR_BYTES_MAX: u64 = 4 * 1024;

/// The signature header's value for `body`: `sha256=<hex HMAC-SHA256>`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    // HMAC takes keys of any length: `new_from_slice` cannot fail here.
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of every length"),
    };
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// One configured webhook, its secret loaded.
pub struct Webhook {
    /// The receiver (`http://...`).
    pub url: hyper::Uri,
    /// Kinds delivered; empty is every kind.
    pub events: Vec<String>,
    secret: Vec<u8>,
    /// Its cursor file.
    pub cursor: PathBuf,
}

impl Webhook {
    fn wants(&self, event: &Event) -> bool {
        self.events.is_empty() || self.events.iter().any(|k| k == words::event_kind(event))
    }
}

/// The cursor file of the webhook at `url`, named by the URL's hash so a
/// reordered `[[webhooks]]` list keeps each cursor.
pub fn cursor_path(data_dir: &Path, url: &str) -> PathBuf {
    let digest = Sha256::digest(url.as_bytes());
    data_dir
        .join(CURSOR_DIR)
        .join(format!("{}.cursor", hex::encode(&digest[..8])))
}

/// Load every webhook's secret; errors name the config key.
pub fn prepare(cfg: &ControllerConfig) -> anyhow::Result<Vec<Webhook>> {
    cfg.webhooks
        .iter()
        .enumerate()
        .map(|(i, entry)| prepare_one(cfg, i, entry))
        .collect()
}

fn prepare_one(cfg: &ControllerConfig, i: usize, entry: &WebhookEntry) -> anyhow::Result<Webhook> {
    let secret = match (&entry.secret, &entry.secret_file) {
        (Some(secret), _) => secret.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("webhooks[{i}].secret_file: reading {}", path.display()))?
            .trim()
            .to_string(),
        (None, None) => anyhow::bail!("webhooks[{i}]: no secret"),
    };
    if secret.is_empty() {
        anyhow::bail!("webhooks[{i}].secret_file: the file is empty");
    }
    let url = entry
        .url
        .parse()
        .with_context(|| format!("webhooks[{i}].url: {:?}", entry.url))?;
    Ok(Webhook {
        url,
        events: entry.events.clone(),
        secret: secret.into_bytes(),
        cursor: cursor_path(&cfg.data_dir, &entry.url),
    })
}

/// Why a cursor file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CursorError {
    /// Reading or writing it failed.
    #[error("webhook cursor {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It does not hold a cursor.
    #[error("webhook cursor {path}: {detail}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
}

/// A cursor file's content: the last acknowledged sequence (`None`: no
/// event yet, on an empty log).
#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq, Eq)]
struct CursorFile {
    url: String,
    last_delivered: Option<u64>,
}

/// Read `path`'s cursor; `Ok(None)` when there is no file yet.
pub fn read_cursor(path: &Path) -> Result<Option<Option<u64>>, CursorError> {
    let io = |source| CursorError::Io {
        path: path.to_path_buf(),
        source,
    };
    let len = match std::fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    if len > CURSOR_BYTES_MAX {
        return Err(CursorError::Invalid {
            path: path.to_path_buf(),
            detail: format!("larger than {CURSOR_BYTES_MAX} bytes"),
        });
    }
    let text = std::fs::read(path).map_err(io)?;
    let file: CursorFile = serde_json::from_slice(&text).map_err(|e| CursorError::Invalid {
        path: path.to_path_buf(),
        detail: format!("not a cursor ({e}); delete it to restart delivery after the log's end"),
    })?;
    Ok(Some(file.last_delivered))
}

/// Replace `path`'s cursor atomically: temp file, fsync, rename, fsync
/// of the directory.
pub fn write_cursor(path: &Path, url: &str, last: Option<u64>) -> Result<(), CursorError> {
    let io = |source| CursorError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(io)?;
        // The cursor directory is a new name in its parent: durable only
        // once the parent is synced. Without this a cursor written after
        // a delivery came back as no cursor after a power cut
        // (tests/it/power_loss.rs, found by the crash-point enumeration).
        let parent = dir.parent().unwrap_or(Path::new("."));
        std::fs::File::open(parent)
            .and_then(|d| d.sync_all())
            .map_err(io)?;
    }
    let temp = path.with_extension("cursor.tmp");
    let body = serde_json::to_vec(&CursorFile {
        url: url.to_string(),
        last_delivered: last,
    })
    .map_err(|e| io(std::io::Error::other(e)))?;
    let mut file = std::fs::File::create(&temp).map_err(io)?;
    file.write_all(&body).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&temp, path).map_err(io)?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io)
}

/// Start one delivery task per webhook. `log_end` is the log's last
/// sequence when the controller opened it: where a new webhook starts.
pub fn spawn_all(
    hooks: Vec<Webhook>,
    core: &CoreHandle,
    log_end: Option<u64>,
) -> Result<(), CursorError> {
    for hook in hooks {
        let url = hook.url.to_string();
        let last = match read_cursor(&hook.cursor)? {
            Some(last) => last,
            None => {
                write_cursor(&hook.cursor, &url, log_end)?;
                log_end
            }
        };
        tracing::info!(
            "webhook {url}: delivering after sequence {}",
            last.map_or("(none)".to_string(), |l| l.to_string())
        );
        tokio::spawn(deliver_forever(hook, core.clone(), last));
    }
    Ok(())
}

/// Follow the log from after `last`, delivering every wanted event.
async fn deliver_forever(hook: Webhook, core: CoreHandle, mut last: Option<u64>) {
    // Subscribed before the first read: an append after any read wakes us.
    let mut appended = core.subscribe();
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let url = hook.url.to_string();
    loop {
        let from = last.map_or(0, |l| l + 1);
        let page = core.events(from, WEBHOOK_PAGE_EVENTS).await;
        if page.is_empty() {
            // Woken by any append (or a lag, which only means "read
            // the log"); a closed channel means the core is gone.
            if let Err(tokio::sync::broadcast::error::RecvError::Closed) = appended.recv().await {
                return;
            }
            continue;
        }
        let mut unsaved = false;
        for (sequence, event) in page.into_iter().filter(|(s, _)| *s >= from) {
            if hook.wants(&event) {
                let body = {
                    let roster = core.roster();
                    super::view::event_dto(&roster, sequence, event.clone())
                };
                let body = match serde_json::to_vec(&body) {
                    Ok(body) => Bytes::from(body),
                    Err(e) => {
                        tracing::error!("webhook {url}: encoding event {sequence}: {e}; skipped");
                        continue;
                    }
                };
                deliver(&client, &hook, sequence, words::event_kind(&event), body).await;
            }
            last = Some(sequence);
            unsaved = true;
            if hook.wants(&event) {
                save(&hook, &url, last);
                unsaved = false;
            }
        }
        if unsaved {
            save(&hook, &url, last);
        }
    }
}

fn save(hook: &Webhook, url: &str, last: Option<u64>) {
    if let Err(e) = write_cursor(&hook.cursor, url, last) {
        // Delivery goes on; a restart before the next good write repeats
        // what was delivered since (at-least-once), never loses it.
        tracing::error!("{e}");
    }
}

/// POST one event until the receiver answers 2xx, backing off between
/// attempts from [`WEBHOOK_BACKOFF_BASE_MS`] up to [`WEBHOOK_BACKOFF_MAX_MS`].
async fn deliver(
    client: &Client<HttpConnector, Full<Bytes>>,
    hook: &Webhook,
    sequence: u64,
    kind: &str,
    body: Bytes,
) {
    let signed = signature(&hook.secret, &body);
    let mut delay_ms = WEBHOOK_BACKOFF_BASE_MS;
    for attempt in 1u64.. {
        match attempt_once(client, hook, sequence, kind, &signed, body.clone()).await {
            Ok(()) => return,
            Err(why) => tracing::warn!(
                "webhook {}: event {sequence} attempt {attempt} failed ({why}); retrying in {delay_ms} ms",
                hook.url
            ),
        }
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        delay_ms = (delay_ms * 2).min(WEBHOOK_BACKOFF_MAX_MS);
    }
}

async fn attempt_once(
    client: &Client<HttpConnector, Full<Bytes>>,
    hook: &Webhook,
    sequence: u64,
    kind: &str,
    signed: &str,
    body: Bytes,
) -> Result<(), String> {
    let request = hyper::Request::post(hook.url.clone())
        .header("content-type", "application/json")
        .header("x-fleetweft-signature", signed)
        .header("x-fleetweft-sequence", sequence.to_string())
        .header("x-fleetweft-event", kind)
        .body(Full::new(body))
        .map_err(|e| e.to_string())?;
    let timeout = Duration::from_millis(WEBHOOK_TIMEOUT_MS);
    let answer = tokio::time::timeout(timeout, async {
        let answer = client.request(request).await.map_err(|e| e.to_string())?;
        let status = answer.status();
        // Read (bounded) so the connection can be reused.
        let _ = http_body_util::Limited::new(answer.into_body(), WEBHOOK_ANSWER_BYTES_MAX)
            .collect()
            .await;
        Ok::<_, String>(status)
    })
    .await
    .map_err(|_| format!("no answer within {WEBHOOK_TIMEOUT_MS} ms"))??;
    if answer.is_success() {
        Ok(())
    } else {
        Err(format!("answered {answer}"))
    }
}
