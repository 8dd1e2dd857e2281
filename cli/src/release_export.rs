//! `fleetweft bundle export RELEASE --out DIR`: lays a format-2 release
//! out for a plain HTTP mirror (issue #23 item 5).
//!
//! The layout, which any static server (nginx, `python3 -m http.server`,
//! an object store) serves as is:
//!
//! - `DIR/chunks/<sha256>`: every distinct chunk of the release, named by
//!   the lowercase hex SHA-256 of its bytes (what agents GET at
//!   `BASE/chunks/<sha256>`);
//! - `DIR/<digest>.release`: the signed manifest, `<digest>` the release
//!   digest in hex. Agents never read it from a mirror (they take the
//!   manifest from the controller); it is there so the export can be
//!   checked where it lies (`fleetweft bundle verify --pubkey PUB
//!   DIR/<digest>.release` verifies every chunk beside it) and so one
//!   directory can hold several releases, sharing their chunks.
//!
//! Every chunk is read from the release directory, verified, and written
//! durably (temporary file, fsync, rename, fsync of the directory:
//! [`releases::ChunkStore`]). A chunk already in `DIR/chunks` is re-read
//! and re-hashed: kept when it verifies, replaced when it does not. So an
//! interrupted export is resumed by running it again, and running it
//! twice changes nothing. The manifest is written last: its presence means
//! every chunk of the release is in place. Memory holds one chunk.

use crate::outcome::{json_text, Failure, Output, EXIT_BAD_NEWS, EXIT_OK, EXIT_USAGE};
use releases::{ChunkStore, ReleaseError, VerifiedRelease, EXPORT_CHUNKS_DIR};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Extension of an exported signed manifest: `DIR/<digest>.release`.
pub const EXPORTED_MANIFEST_EXTENSION: &str = "release";

/// What an export did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExportStats {
    /// The release digest (hex).
    pub digest: String,
    /// Distinct chunks the release names.
    pub chunks: usize,
    /// Chunks written now.
    pub written: usize,
    /// Bytes written now (chunk bytes).
    pub bytes_written: u64,
    /// Chunks already there and verified, kept.
    pub kept: usize,
    /// Chunks that were there but damaged, written again.
    pub replaced: usize,
    /// Where the signed manifest is.
    pub manifest: PathBuf,
}

/// `fleetweft bundle export RELEASE --out DIR [--pubkey PUB] [--json]`.
pub fn export(
    release: &Path,
    out: &Path,
    pubkey: Option<&Path>,
    json: bool,
) -> Result<Output, Failure> {
    let stats = export_release(release, out, pubkey, &mut |line| eprintln!("{line}"))?;
    let text = if json {
        json_text(&stats)
    } else {
        format!(
            "exported {} to {}: {} of {} chunks written ({} bytes), {} already there, {} replaced; manifest {}\n",
            stats.digest,
            out.display(),
            stats.written,
            stats.chunks,
            stats.bytes_written,
            stats.kept,
            stats.replaced,
            stats.manifest.display()
        )
    };
    Ok(Output {
        text,
        code: EXIT_OK,
    })
}

/// Exports the release at `release` (its directory or manifest, as `bundle
/// sign --dir` wrote it) into `out`; `progress` gets a line per chunk.
pub fn export_release(
    release: &Path,
    out: &Path,
    pubkey: Option<&Path>,
    progress: &mut dyn FnMut(String),
) -> Result<ExportStats, Failure> {
    let (bytes, verified, source) = read_release(release, pubkey)?;
    let source = ChunkStore::open_read_only(&source).map_err(|e| usage(release, e))?;
    std::fs::create_dir_all(out).map_err(|e| bad_news(out, e))?;
    let (target, _) =
        ChunkStore::open(&out.join(EXPORT_CHUNKS_DIR)).map_err(|e| bad_news(out, e))?;
    let digest = verified.digest.to_hex();
    let mut stats = ExportStats {
        digest: digest.clone(),
        ..ExportStats::default()
    };
    let chunks = verified.manifest.unique_chunks();
    stats.chunks = chunks.len();
    for (i, chunk) in chunks.iter().enumerate() {
        let what = export_chunk(&source, &target, chunk, &mut stats)?;
        progress(format!(
            "chunk {}/{} {what} {}",
            i + 1,
            stats.chunks,
            chunk.hex()
        ));
    }
    let manifest = out.join(format!("{digest}.{EXPORTED_MANIFEST_EXTENSION}"));
    write_durably(out, &manifest, &bytes)?;
    stats.manifest = manifest;
    Ok(stats)
}

/// One chunk into `target`: kept when there and verified, else copied
/// from `source` (verified as it lands). Returns what happened.
fn export_chunk(
    source: &ChunkStore,
    target: &ChunkStore,
    chunk: &releases::ChunkRef,
    stats: &mut ExportStats,
) -> Result<&'static str, Failure> {
    let mut replaced = false;
    match target.get(&chunk.sha256) {
        Ok(Some(held)) if held.len() == chunk.len as usize => {
            stats.kept += 1;
            return Ok("kept");
        }
        // Hashes right but is not the manifest's length: cannot happen for
        // SHA-256, but the file is replaced rather than argued with.
        Ok(Some(_)) => {
            target
                .remove(&chunk.sha256)
                .map_err(|e| bad_news(target.dir(), e))?;
            replaced = true;
        }
        // `get` removed the damaged file already.
        Err(ReleaseError::TornChunk { .. }) => replaced = true,
        Ok(None) => {}
        Err(e) => return Err(bad_news(target.dir(), e)),
    }
    let bytes = match source.get(&chunk.sha256) {
        Ok(Some(bytes)) if bytes.len() == chunk.len as usize => bytes,
        Ok(_) => return Err(missing(source.dir(), chunk)),
        Err(e) => return Err(bad_news(source.dir(), e)),
    };
    let written = target
        .put_bytes(&chunk.sha256, &bytes)
        .map_err(|e| bad_news(target.dir(), e))?;
    stats.written += 1;
    stats.bytes_written += written;
    if replaced {
        stats.replaced += 1;
        Ok("replaced")
    } else {
        Ok("written")
    }
}

/// The signed bytes, the parsed release (verified against `pubkey` when
/// given) and the chunk directory beside the manifest.
fn read_release(
    path: &Path,
    pubkey: Option<&Path>,
) -> Result<(Vec<u8>, VerifiedRelease, PathBuf), Failure> {
    let base = if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(Path::new("."))
    };
    let file = if path.is_dir() {
        path.join(releases::EXPORT_MANIFEST_FILE)
    } else {
        path.to_path_buf()
    };
    let bytes = releases::manifest::read_release_file(&file).map_err(|e| usage(&file, e))?;
    let verified = match pubkey {
        Some(key_path) => {
            let key =
                protocol::bundle::load_verifying_key(key_path).map_err(|e| usage(key_path, e))?;
            releases::verify(&key, &bytes)
        }
        None => releases::read_unverified(&bytes),
    }
    .map_err(|e| usage(&file, e))?;
    Ok((bytes, verified, base.join(EXPORT_CHUNKS_DIR)))
}

/// Writes `bytes` to `path` in `dir`: temporary file, fsync, rename, fsync
/// of the directory; an identical file already there is left alone.
fn write_durably(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    if std::fs::read(path).is_ok_and(|held| held == bytes) {
        return Ok(());
    }
    let tmp = dir.join(format!(".export-manifest.tmp-{}", std::process::id()));
    let written = File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path))
        .and_then(|()| File::open(dir).and_then(|d| d.sync_all()));
    if let Err(e) = written {
        // Best effort: only a temporary name can be left behind.
        let _ = std::fs::remove_file(&tmp);
        return Err(bad_news(path, e));
    }
    Ok(())
}

fn usage(path: &Path, e: impl std::fmt::Display) -> Failure {
    Failure {
        message: format!("{}: {e}", path.display()),
        code: EXIT_USAGE,
    }
}

fn bad_news(path: &Path, e: impl std::fmt::Display) -> Failure {
    Failure {
        message: format!("{}: {e}", path.display()),
        code: EXIT_BAD_NEWS,
    }
}

fn missing(dir: &Path, chunk: &releases::ChunkRef) -> Failure {
    Failure {
        message: format!(
            "{}: chunk {} of the release is missing or not {} bytes",
            dir.display(),
            chunk.hex(),
            chunk.len
        ),
        code: EXIT_BAD_NEWS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::bundle::ProbeSpec;

    /// A release directory (`OUT/manifest`, `OUT/chunks`) of three files,
    /// signed; returns its path and the public key file.
    fn release(root: &Path) -> (PathBuf, PathBuf) {
        let tree = root.join("tree");
        std::fs::create_dir_all(tree.join("static")).expect("tree");
        std::fs::write(tree.join("app.py"), b"print('hi')").expect("app");
        std::fs::write(tree.join("static/a.css"), b"body{}").expect("css");
        std::fs::write(tree.join("data.bin"), vec![7u8; 10_000]).expect("data");
        let out = root.join("signed");
        let (store, _) = ChunkStore::open(&out.join(EXPORT_CHUNKS_DIR)).expect("store");
        let (signing, verifying) = protocol::bundle::keygen();
        let fields = releases::ReleaseFields {
            name: "t".into(),
            version: "v1".into(),
            run: vec!["python3".into(), "app.py".into()],
            probe: ProbeSpec {
                path: "/".into(),
                expect_status: 200,
                expect_body: "hi".into(),
                expect_json: None,
            },
            limits: Default::default(),
            migration: None,
        };
        let mut sink = releases::tree::store_sink(&store);
        let bytes = releases::tree::sign_dir(&signing, fields, &tree, &mut sink).expect("sign");
        std::fs::write(out.join(releases::EXPORT_MANIFEST_FILE), bytes).expect("manifest");
        let pubkey = root.join("key.pub");
        protocol::bundle::save_verifying_key(&pubkey, &verifying).expect("pubkey");
        (out, pubkey)
    }

    fn quiet() -> impl FnMut(String) {
        |_| {}
    }

    #[test]
    fn an_export_is_the_mirror_layout_and_resumes_verified() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (signed, pubkey) = release(dir.path());
        let out = dir.path().join("mirror");
        let first = export_release(&signed, &out, Some(&pubkey), &mut quiet()).expect("export");
        assert_eq!(first.chunks, 3);
        assert_eq!((first.written, first.kept, first.replaced), (3, 0, 0));
        assert_eq!(
            first.manifest,
            out.join(format!("{}.release", first.digest))
        );
        // The export verifies where it lies, as `bundle verify` does it.
        let (verified, checked) =
            crate::release_tree::verify_release(&pubkey, &first.manifest, None).expect("verifies");
        assert_eq!(
            (verified.digest.to_hex(), checked),
            (first.digest.clone(), "chunks")
        );

        // Again: nothing written. A damaged chunk and a missing one are
        // written again; nothing else is touched.
        let again = export_release(&signed, &out, None, &mut quiet()).expect("again");
        assert_eq!((again.written, again.kept), (0, 3));
        let chunks = ChunkStore::open_read_only(&out.join(EXPORT_CHUNKS_DIR)).expect("store");
        let mut names: Vec<PathBuf> = std::fs::read_dir(chunks.dir())
            .expect("chunks")
            .map(|e| e.expect("entry").path())
            .collect();
        names.sort();
        std::fs::write(&names[0], b"damaged").expect("damage");
        std::fs::remove_file(&names[1]).expect("remove");
        let mended = export_release(&signed, &out, None, &mut quiet()).expect("mend");
        assert_eq!((mended.written, mended.kept, mended.replaced), (2, 1, 1));
        crate::release_tree::verify_release(&pubkey, &mended.manifest, None).expect("whole");
        let temp_left = std::fs::read_dir(&out).expect("out").any(|e| {
            e.expect("entry")
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        });
        assert!(!temp_left, "no temporary file is left in the mirror");
    }

    #[test]
    fn an_export_refuses_a_foreign_signature_and_a_missing_chunk() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (signed, _) = release(dir.path());
        let (_, stranger) = protocol::bundle::keygen();
        let foreign = dir.path().join("foreign.pub");
        protocol::bundle::save_verifying_key(&foreign, &stranger).expect("pubkey");
        let out = dir.path().join("mirror");
        let e = export_release(&signed, &out, Some(&foreign), &mut quiet()).expect_err("foreign");
        assert_eq!(e.code, EXIT_USAGE, "{}", e.message);
        assert!(!out.exists(), "nothing is written for a refused release");
        let source = signed.join(EXPORT_CHUNKS_DIR);
        let first = std::fs::read_dir(&source)
            .expect("chunks")
            .next()
            .expect("a chunk")
            .expect("entry");
        std::fs::remove_file(first.path()).expect("remove");
        let e = export_release(&signed, &out, None, &mut quiet()).expect_err("missing chunk");
        assert_eq!(e.code, EXIT_BAD_NEWS, "{}", e.message);
        let manifests = std::fs::read_dir(&out)
            .expect("out")
            .filter(|e| {
                let name = e.as_ref().expect("entry").file_name();
                name.to_string_lossy().ends_with(".release")
            })
            .count();
        assert_eq!(
            manifests, 0,
            "the manifest is written only when every chunk is"
        );
    }
}
