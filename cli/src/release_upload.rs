//! `fleetweft bundle upload`: a format-1 bundle is posted whole; a
//! format-2 release directory (what `bundle sign --dir` wrote) is uploaded
//! chunk by chunk, resumable: each chunk is asked for (`HEAD
//! /api/chunks/<sha256>`) and only the missing ones are sent, one at a time
//! from disk, then the signed manifest is posted (`POST /api/releases`).
//! An interrupted upload is resumed by running the command again.

use crate::outcome::{json_text, Failure, Output, EXIT_BAD_NEWS, EXIT_OK, EXIT_USAGE};
use api::client::{ApiClient, ClientError};
use api::view::{ChunkReply, UploadReply};
use releases::limits::CHUNK_BYTES_MAX;
use releases::ChunkRef;
use std::io::Read;
use std::path::Path;

/// What an upload did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct UploadStats {
    /// Distinct chunks the release names.
    pub chunks: usize,
    /// Chunks sent now.
    pub sent: usize,
    /// Bytes sent now (chunk bytes, not the manifest).
    pub bytes_sent: u64,
    /// Chunks the controller already held, not sent again.
    pub skipped: usize,
}

/// What `bundle upload --json` prints.
#[derive(serde::Serialize)]
struct Uploaded<'a> {
    release: &'a UploadReply,
    upload: &'a UploadStats,
}

/// `fleetweft bundle upload PATH`: a release directory or manifest is
/// uploaded as a tree, any other file as a format-1 bundle.
pub async fn upload(client: &ApiClient, path: &Path, json: bool) -> Result<Output, Failure> {
    if !crate::release_tree::is_release(path) {
        let bytes = protocol::bundle::read_bundle(path).map_err(|e| usage(path, e))?;
        let reply: UploadReply = client.post_bytes("/api/bundles", bytes).await?;
        let text = if json {
            json_text(&reply)
        } else {
            format!(
                "uploaded {} {} as {}\n",
                reply.name, reply.version, reply.digest
            )
        };
        return Ok(Output {
            text,
            code: EXIT_OK,
        });
    }
    let (reply, stats) = upload_tree(client, path, &mut |line| eprintln!("{line}")).await?;
    let text = if json {
        json_text(&Uploaded {
            release: &reply,
            upload: &stats,
        })
    } else {
        format!(
            "uploaded {} {} as {}: {} of {} chunks sent ({} bytes), {} already held\n",
            reply.name,
            reply.version,
            reply.digest,
            stats.sent,
            stats.chunks,
            stats.bytes_sent,
            stats.skipped
        )
    };
    Ok(Output {
        text,
        code: EXIT_OK,
    })
}

/// Uploads the release at `path` (its directory or manifest): the missing
/// chunks, then the manifest. `progress` gets one line per chunk. Memory
/// is bounded by one chunk ([`CHUNK_BYTES_MAX`]).
pub async fn upload_tree(
    client: &ApiClient,
    path: &Path,
    progress: &mut dyn FnMut(String),
) -> Result<(UploadReply, UploadStats), Failure> {
    let base = if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(Path::new("."))
    };
    let manifest_path = base.join(releases::EXPORT_MANIFEST_FILE);
    let manifest = releases::manifest::read_release_file(&manifest_path)
        .map_err(|e| usage(&manifest_path, e))?;
    let release = releases::read_unverified(&manifest).map_err(|e| usage(&manifest_path, e))?;
    let chunks = release.manifest.unique_chunks();
    let chunk_dir = base.join(releases::EXPORT_CHUNKS_DIR);
    let mut stats = UploadStats {
        chunks: chunks.len(),
        ..UploadStats::default()
    };
    for (i, chunk) in chunks.iter().enumerate() {
        let sent = send_chunk(client, &chunk_dir, chunk, progress).await?;
        let what = match sent {
            Some(bytes) => {
                stats.sent += 1;
                stats.bytes_sent += bytes;
                "sent"
            }
            None => {
                stats.skipped += 1;
                "held"
            }
        };
        progress(format!(
            "chunk {}/{} {what} {} ({} bytes sent, {} held)",
            i + 1,
            stats.chunks,
            chunk.hex(),
            stats.bytes_sent,
            stats.skipped
        ));
    }
    let reply: UploadReply = client.post_bytes("/api/releases", manifest).await?;
    Ok((reply, stats))
}

/// Sends one chunk unless the controller holds it: `Some(bytes sent)`, or
/// `None` when held.
async fn send_chunk(
    client: &ApiClient,
    chunk_dir: &Path,
    chunk: &ChunkRef,
    progress: &mut dyn FnMut(String),
) -> Result<Option<u64>, Failure> {
    let url = format!("/api/chunks/{}", chunk.hex());
    let path = chunk_dir.join(chunk.hex());
    let mut attempt = 1;
    loop {
        let sent = async {
            if client.exists(&url).await? {
                return Ok(None);
            }
            let bytes = read_chunk(&path, chunk)?;
            let reply: ChunkReply = client.put_bytes(&url, bytes).await?;
            Ok(Some(reply.bytes))
        }
        .await;
        match sent {
            // A chunk is named by its digest, so asking and sending again
            // is harmless: a dropped connection costs a retry, not the
            // upload (the controller stores a chunk only whole and verified).
            Err(Retry::Transport(e)) if attempt < CHUNK_SEND_ATTEMPTS_MAX => {
                progress(format!("chunk {}: {e}; trying again", chunk.hex()));
                tokio::time::sleep(std::time::Duration::from_millis(CHUNK_RETRY_PAUSE_MS)).await;
                attempt += 1;
            }
            Err(Retry::Transport(e)) => return Err(e.into()),
            Err(Retry::Final(failure)) => return Err(failure),
            Ok(sent) => return Ok(sent),
        }
    }
}

/// Tries at one chunk before the upload stops (each asks whether the
/// controller holds it, then sends it); the upload resumes from there
/// when run again.
const CHUNK_SEND_ATTEMPTS_MAX: u32 = 3;
/// Pause before trying a chunk again, in milliseconds.
const CHUNK_RETRY_PAUSE_MS: u64 = 250;

/// Why one try at a chunk failed: the connection (worth another try), or
/// anything else (the controller's answer, the chunk file).
enum Retry {
    Transport(ClientError),
    Final(Failure),
}

impl From<ClientError> for Retry {
    fn from(e: ClientError) -> Retry {
        match e {
            ClientError::Unreachable { .. } => Retry::Transport(e),
            other => Retry::Final(other.into()),
        }
    }
}

impl From<Failure> for Retry {
    fn from(f: Failure) -> Retry {
        Retry::Final(f)
    }
}

/// Reads a chunk file, at most [`CHUNK_BYTES_MAX`] bytes, refusing one
/// whose length is not the manifest's.
fn read_chunk(path: &Path, chunk: &ChunkRef) -> Result<Vec<u8>, Failure> {
    let file = std::fs::File::open(path).map_err(|e| bad_news(path, e))?;
    let mut bytes = Vec::with_capacity(chunk.len as usize);
    file.take(u64::from(CHUNK_BYTES_MAX) + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad_news(path, e))?;
    if bytes.len() != chunk.len as usize {
        let why = format!("{} bytes, the manifest says {}", bytes.len(), chunk.len);
        return Err(bad_news(path, why));
    }
    Ok(bytes)
}

fn usage(path: &Path, e: impl std::fmt::Display) -> Failure {
    Failure {
        message: format!("reading {}: {e}", path.display()),
        code: EXIT_USAGE,
    }
}

fn bad_news(path: &Path, e: impl std::fmt::Display) -> Failure {
    Failure {
        message: format!("chunk {}: {e}", path.display()),
        code: EXIT_BAD_NEWS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a connection that failed is worth another try at a chunk: the
    /// controller's answer (a refusal, a wrong digest) is final.
    #[test]
    fn only_a_failed_connection_is_tried_again() {
        let dropped = ClientError::Unreachable {
            method: "PUT".into(),
            url: "http://c/api/chunks/ab".into(),
            detail: "client error (SendRequest)".into(),
        };
        assert!(matches!(Retry::from(dropped), Retry::Transport(_)));
        let refused = ClientError::Status {
            method: "PUT".into(),
            url: "http://c/api/chunks/ab".into(),
            status: 400,
            body: "the bytes hash to another digest".into(),
        };
        assert!(matches!(Retry::from(refused), Retry::Final(_)));
    }
}
