//! Agent connections: authenticate (node id from the certificate, never from
//! a message), pipe frames to and from the core, serve bundles.

use super::config::ControllerConfig;
use super::core::{Command, CoreHandle, LINK_QUEUE_MAX};
use model::controller::Input;
use model::Digest;
use protocol::frame::FrameBody;
use protocol::quic::{BundleStore, ControllerEndpoint};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Accepted bundles on disk, `<dir>/<digest hex>.bundle`.
pub struct BundleDir {
    /// The directory.
    pub dir: PathBuf,
}

impl BundleDir {
    /// Where the bundle with `digest` lives.
    pub fn path(&self, digest: Digest) -> PathBuf {
        self.dir.join(format!("{}.bundle", digest.to_hex()))
    }
}

impl BundleStore for BundleDir {
    fn get(&self, digest: Digest) -> Option<Vec<u8>> {
        let path = self.path(digest);
        let bytes = std::fs::read(&path).ok()?;
        // Serve only what still hashes to its name; say so when it does not.
        let actual = protocol::bundle::bundle_digest(&bytes);
        if actual != digest {
            tracing::warn!(
                "{} hashes to {actual}, not its name: refusing to serve it (tampered or damaged)",
                path.display()
            );
            return None;
        }
        Some(bytes)
    }
}

static LINK_IDS: AtomicU64 = AtomicU64::new(1);

/// Accept agents until the endpoint closes.
pub async fn serve(
    endpoint: ControllerEndpoint,
    cfg: Arc<ControllerConfig>,
    core: CoreHandle,
    bundles: Arc<BundleDir>,
) {
    while let Some(accepted) = endpoint.accept().await {
        match accepted {
            Err(e) => tracing::warn!("refused a connection: {e}"),
            Ok(link) => {
                let cfg = cfg.clone();
                let core = core.clone();
                let bundles = bundles.clone();
                tokio::spawn(async move { handle(link, cfg, core, bundles).await });
            }
        }
    }
}

async fn handle(
    link: protocol::quic::AgentLink,
    cfg: Arc<ControllerConfig>,
    core: CoreHandle,
    bundles: Arc<BundleDir>,
) {
    let Some(node) = cfg.node_id(&link.node) else {
        tracing::warn!(
            "certificate names {} which is not in the fleet; closing",
            link.node
        );
        link.conn.close(3u32.into(), b"unknown node");
        return;
    };
    let control = match link.control().await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("{}: no control stream: {e}", link.node);
            return;
        }
    };
    tracing::info!("{} connected", link.node);
    let (mut sender, mut receiver) = control.split();
    let (tx, mut rx) = tokio::sync::mpsc::channel(LINK_QUEUE_MAX);
    let id = LINK_IDS.fetch_add(1, Ordering::Relaxed);
    core.send(Command::Attach {
        node,
        link: id,
        tx,
        conn: link.conn.clone(),
    })
    .await;
    let writer = tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            if let Err(e) = sender.send(&FrameBody::ToAgent(msg)).await {
                tracing::info!("send failed: {e}");
                return;
            }
        }
    });
    let serving = {
        let conn = link.conn.clone();
        let node = link.node.clone();
        tokio::spawn(async move {
            let agent = protocol::quic::AgentLink { node, conn };
            agent.serve_bundles(bundles).await
        })
    };
    loop {
        match receiver.recv().await {
            Ok(FrameBody::ToController(msg)) => {
                core.send(Command::Input {
                    input: Input::FromAgent { node, msg },
                    reply: None,
                })
                .await;
            }
            Ok(other) => {
                tracing::warn!("{}: unexpected frame {other:?}; closing", link.node);
                link.conn.close(2u32.into(), b"unexpected frame");
                break;
            }
            Err(e) => {
                tracing::info!("{} disconnected: {e}", link.node);
                break;
            }
        }
    }
    writer.abort();
    serving.abort();
    core.send(Command::Detach { node, link: id }).await;
}
