//! `fleetweft bundle sign --dir`, `bundle inspect` and `bundle verify` of a
//! format-2 release (a tree of chunks, issue #23 item 1).
//!
//! A release directory is the export layout: `OUT/manifest` (the signed
//! release manifest) and `OUT/chunks/<sha256>` (one file per chunk), so
//! any plain HTTP server can serve the chunks at `BASE/chunks/<sha256>`.
//! A format-1 bundle file is inspected as a tree of one file.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use protocol::bundle::{self, ProbeSpec};
use releases::manifest::{self, Manifest, VerifiedRelease};
use releases::tree::{sign_dir_arches, store_sink, verify_dir, verify_store};
use releases::{ChunkStore, ReleaseFields, EXPORT_CHUNKS_DIR, EXPORT_MANIFEST_FILE};

/// Bytes read to tell a format-1 bundle from a format-2 release.
const MAGIC_PROBE_BYTES: usize = 32;

/// Signs the directory `dir` into the release directory `out` (which must
/// not exist): chunks streamed into `out/chunks`, the signed manifest in
/// `out/manifest`. Written under a temporary name and renamed, so `out`
/// is whole or absent. Returns the release digest.
pub fn sign_tree(
    key_path: &Path,
    dir: &Path,
    fields: ReleaseFields,
    out: &Path,
) -> anyhow::Result<model::Digest> {
    sign_tree_arches(key_path, dir, &[], fields, out)
}

/// [`sign_tree`] with a tree per architecture beside the common `dir`
/// (`arch_dirs`: architecture, its directory): a format-3 release when
/// there is any, else exactly [`sign_tree`]'s format 2.
pub fn sign_tree_arches(
    key_path: &Path,
    dir: &Path,
    arch_dirs: &[(model::platform::Arch, PathBuf)],
    fields: ReleaseFields,
    out: &Path,
) -> anyhow::Result<model::Digest> {
    if out.symlink_metadata().is_ok() {
        bail!("{} already exists; refusing to overwrite", out.display());
    }
    let name = out
        .file_name()
        .with_context(|| format!("{}: not a directory path", out.display()))?;
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let staging = parent.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let signed = write_release_dir(key_path, dir, arch_dirs, fields, &staging).and_then(|digest| {
        fs::rename(&staging, out).with_context(|| format!("renaming to {}", out.display()))?;
        File::open(parent)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("syncing {}", parent.display()))?;
        Ok(digest)
    });
    if signed.is_err() {
        // Best effort: a failed sign leaves only a temporary name behind.
        let _ = fs::remove_dir_all(&staging);
    }
    signed
}

fn write_release_dir(
    key_path: &Path,
    dir: &Path,
    arch_dirs: &[(model::platform::Arch, PathBuf)],
    fields: ReleaseFields,
    staging: &Path,
) -> anyhow::Result<model::Digest> {
    let key = bundle::load_signing_key(key_path)?;
    fs::create_dir(staging).with_context(|| format!("creating {}", staging.display()))?;
    let (store, _) = ChunkStore::open(&staging.join(EXPORT_CHUNKS_DIR))?;
    let bytes = sign_dir_arches(&key, fields, dir, arch_dirs, &mut store_sink(&store))
        .with_context(|| format!("signing {}", dir.display()))?;
    let manifest_path = staging.join(EXPORT_MANIFEST_FILE);
    let mut file = File::create(&manifest_path)
        .with_context(|| format!("creating {}", manifest_path.display()))?;
    file.write_all(&bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", manifest_path.display()))?;
    File::open(staging)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", staging.display()))?;
    Ok(manifest::release_digest(&bytes))
}

/// What `path` names: a format-1 bundle file, or a format-2 release (a
/// release directory, or a manifest file inside one).
enum Target {
    /// A format-1 bundle file.
    Bundle(PathBuf),
    /// A format-2 manifest file and the chunk directory beside it.
    Release {
        /// The signed manifest.
        manifest: PathBuf,
        /// `chunks/` next to it.
        chunks: PathBuf,
    },
}

fn target(path: &Path) -> anyhow::Result<Target> {
    let manifest = if path.is_dir() {
        path.join(EXPORT_MANIFEST_FILE)
    } else {
        path.to_path_buf()
    };
    let mut head = Vec::with_capacity(MAGIC_PROBE_BYTES);
    File::open(&manifest)
        .and_then(|f| f.take(MAGIC_PROBE_BYTES as u64).read_to_end(&mut head))
        .with_context(|| format!("reading {}", manifest.display()))?;
    if head.starts_with(manifest::MAGIC) {
        let dir = manifest.parent().unwrap_or(Path::new("."));
        return Ok(Target::Release {
            chunks: dir.join(EXPORT_CHUNKS_DIR),
            manifest,
        });
    }
    if head.starts_with(bundle::MAGIC) {
        return Ok(Target::Bundle(manifest));
    }
    bail!(
        "{}: neither a format-1 bundle nor a format-2 release manifest",
        manifest.display()
    )
}

/// A release or bundle read as a tree: verified against `pubkey` when
/// given, else read with the signature unchecked (`false`).
fn read_tree(path: &Path, pubkey: Option<&Path>) -> anyhow::Result<(VerifiedRelease, bool)> {
    let key = pubkey.map(bundle::load_verifying_key).transpose()?;
    match target(path)? {
        Target::Bundle(file) => {
            let bytes = bundle::read_bundle(&file)?;
            let verified = match &key {
                Some(key) => bundle::verify(key, &bytes),
                None => bundle::read_unverified(&bytes),
            }
            .with_context(|| format!("bundle {} refused", file.display()))?;
            let tree = releases::v1::tree_of_bundle(&verified)?;
            Ok((tree.release, key.is_some()))
        }
        Target::Release { manifest: file, .. } => {
            let bytes = manifest::read_release_file(&file)?;
            let verified = match &key {
                Some(key) => manifest::verify(key, &bytes),
                None => manifest::read_unverified(&bytes),
            }
            .with_context(|| format!("release {} refused", file.display()))?;
            Ok((verified, key.is_some()))
        }
    }
}

fn mode_text(mode: releases::Mode) -> &'static str {
    match mode {
        releases::Mode::File => "0644",
        releases::Mode::Executable => "0755",
    }
}

fn probe_text(probe: &ProbeSpec) -> String {
    format!(
        "GET {} -> {} {}",
        probe.path,
        probe.expect_status,
        probe.expected_body_text()
    )
}

/// `fleetweft bundle inspect`: the tree, sizes, chunk count and digest of
/// a format-2 release or a format-1 bundle.
pub fn inspect(path: &Path, pubkey: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    let (release, checked) = read_tree(path, pubkey)?;
    let m = &release.manifest;
    let probe = m.probe.to_spec()?;
    if json {
        println!("{}", inspect_json(&release, checked, &probe));
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = io::stdout().lock();
    writeln!(out, "format:    {}", m.format)?;
    writeln!(out, "name:      {}", m.name)?;
    writeln!(out, "version:   {}", m.version)?;
    writeln!(out, "digest:    {}", release.digest.to_hex())?;
    let signature = if checked {
        format!("verified (key {})", hex::encode(m.key_id))
    } else {
        format!("NOT checked (key {}; give --pubkey)", hex::encode(m.key_id))
    };
    writeln!(out, "signature: {signature}")?;
    writeln!(out, "run:       {}", m.run.join(" "))?;
    writeln!(out, "probe:     {}", probe_text(&probe))?;
    writeln!(out, "arches:    {}", arches_text(m))?;
    writeln!(
        out,
        "files:     {}, {} bytes",
        m.entries.len(),
        m.total_bytes()
    )?;
    let distinct = m.unique_chunks();
    let distinct_bytes: u64 = distinct.iter().map(|c| u64::from(c.len)).sum();
    writeln!(
        out,
        "chunks:    {} ({} distinct, {distinct_bytes} bytes)",
        m.chunk_count(),
        distinct.len()
    )?;
    writeln!(out, "{:<5} {:>12} {:>6}  PATH", "MODE", "SIZE", "CHUNKS")?;
    for e in &m.entries {
        let (mode, chunks) = (mode_text(e.mode), e.chunks.len());
        writeln!(out, "{mode:<5} {:>12} {chunks:>6}  {}", e.size, e.path)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn inspect_json(release: &VerifiedRelease, checked: bool, probe: &ProbeSpec) -> serde_json::Value {
    let m = &release.manifest;
    let entries: Vec<_> = m
        .entries
        .iter()
        .map(|e| {
            serde_json::json!({
                "path": e.path,
                "mode": mode_text(e.mode),
                "size": e.size,
                "sha256": hex::encode(e.sha256),
                "chunks": e.chunks.len(),
            })
        })
        .collect();
    serde_json::json!({
        "format": m.format,
        "name": m.name,
        "version": m.version,
        "digest": release.digest.to_hex(),
        "signature_checked": checked,
        "key_id": hex::encode(m.key_id),
        "run": m.run,
        "probe": probe,
        "files": m.entries.len(),
        "bytes": m.total_bytes(),
        "chunks": m.chunk_count(),
        "distinct_chunks": m.unique_chunks().len(),
        "entries": entries,
        "arches": arches_json(m),
    })
}

/// `any` for a release without architecture trees; else each tree's
/// architecture with its file count, e.g. `x86_64 (2 files), aarch64 (2 files)`.
fn arches_text(m: &Manifest) -> String {
    if m.arch_trees.is_empty() {
        return "any (no per-architecture trees)".into();
    }
    let trees: Vec<String> = m
        .arch_trees
        .iter()
        .map(|t| format!("{} ({} files)", t.arch, t.entries.len()))
        .collect();
    trees.join(", ")
}

/// The architecture trees as JSON: `null` when the release runs anywhere.
fn arches_json(m: &Manifest) -> serde_json::Value {
    if m.arch_trees.is_empty() {
        return serde_json::Value::Null;
    }
    m.arch_trees
        .iter()
        .map(|t| {
            serde_json::json!({
                "arch": t.arch.name(),
                "files": t.entries.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// Whether `path` is a format-2 release (so `bundle verify` takes the
/// tree path) rather than a format-1 bundle.
pub fn is_release(path: &Path) -> bool {
    matches!(target(path), Ok(Target::Release { .. }))
}

/// `fleetweft bundle verify` of a format-2 release: the manifest against
/// the key, then every chunk in its chunk directory (streaming, one chunk
/// in memory), and, with `tree`, an unpacked directory against it.
pub fn verify_release(
    pubkey: &Path,
    path: &Path,
    tree: Option<&Path>,
) -> anyhow::Result<(VerifiedRelease, &'static str)> {
    let key = bundle::load_verifying_key(pubkey)?;
    let Target::Release {
        manifest: file,
        chunks,
    } = target(path)?
    else {
        bail!("{}: not a format-2 release", path.display());
    };
    let bytes = manifest::read_release_file(&file)?;
    let verified = manifest::verify(&key, &bytes)
        .with_context(|| format!("release {} refused", file.display()))?;
    let checked = match tree {
        Some(dir) => {
            verify_unpacked(&verified.manifest, dir)
                .with_context(|| format!("tree {} refused", dir.display()))?;
            "tree"
        }
        None => {
            let store = ChunkStore::open_read_only(&chunks)?;
            verify_store(&verified.manifest, &store)
                .with_context(|| format!("chunks in {} refused", chunks.display()))?;
            "chunks"
        }
    };
    Ok((verified, checked))
}

/// Checks an unpacked tree `dir` against `manifest`: the whole tree of a
/// release without architecture trees; with them, the tree of one of its
/// architectures (the common files and that architecture's), whichever
/// matches (the error of the last one tried when none does).
fn verify_unpacked(manifest: &Manifest, dir: &Path) -> anyhow::Result<()> {
    let model::platform::ReleaseArches::Only(arches) = manifest.arches() else {
        return Ok(verify_dir(manifest, dir)?);
    };
    let mut last = None;
    for arch in arches.iter() {
        match verify_dir(&manifest.clone().into_arch(arch)?, dir) {
            Ok(()) => return Ok(()),
            Err(e) => last = Some(anyhow::anyhow!("as the {arch} tree: {e}")),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("the release has no architecture tree")))
}

/// The lines `bundle verify` prints for a verified release.
pub fn verified_lines(m: &Manifest, digest: &model::Digest, checked: &str) -> String {
    format!(
        "name:    {}\nversion: {}\ndigest:  {}\nformat:  2, {} files, {} bytes, {} chunks ({checked} verified)\n",
        m.name,
        m.version,
        digest.to_hex(),
        m.entries.len(),
        m.total_bytes(),
        m.chunk_count()
    )
}

/// `bundle sign --dir`'s limits (issue #24 item 4): what the app may use
/// on a node and who it runs as, signed into the manifest (format 4).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct LimitArgs {
    /// Most memory the app may use, e.g. `256M`, `1G` or bytes; over it
    /// the node's kernel stops the app and its probe fails.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, requires = "dir")]
    pub memory_max: Option<u64>,
    /// CPU quota in percent of one core (`150`: one and a half cores).
    #[arg(long, value_name = "PERCENT", requires = "dir")]
    pub cpu_percent_max: Option<u32>,
    /// Most open files per process.
    #[arg(long, value_name = "N", requires = "dir")]
    pub open_files_max: Option<u32>,
    /// Most processes and threads, together.
    #[arg(long, value_name = "N", requires = "dir")]
    pub processes_max: Option<u32>,
    /// The user the app runs as on the node (the agent's, when not given).
    #[arg(long, value_name = "NAME", requires = "dir")]
    pub user: Option<String>,
}

impl LimitArgs {
    /// The manifest's limits (checked when the release is signed).
    pub fn into_limits(self) -> releases::AppLimits {
        releases::AppLimits {
            memory_bytes_max: self.memory_max,
            cpu_percent_max: self.cpu_percent_max,
            open_files_max: self.open_files_max,
            processes_max: self.processes_max,
            user: self.user,
        }
    }
}

/// `bundle sign --dir`'s data migration (format 5, issue #24 item 2).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MigrationArgs {
    /// Command the node runs in the release directory after staging and
    /// before the route switch, with the app's data directory in
    /// `FLEETWEFT_DATA_DIR`, split on whitespace (e.g. `'python3
    /// migrate.py'`). The data directory is snapshotted first; a failure
    /// puts it back.
    #[arg(long, value_name = "CMD", requires = "dir")]
    pub migrate: Option<String>,
    /// A roll back after the migration does not put the old data back on
    /// its own: it waits for a person.
    #[arg(long, requires = "migrate")]
    pub migration_irreversible: bool,
}

impl MigrationArgs {
    /// The manifest's migration (checked when the release is signed).
    pub fn into_migration(self) -> Option<releases::AppMigration> {
        let command = self.migrate?;
        Some(releases::AppMigration {
            command: command.split_whitespace().map(str::to_string).collect(),
            irreversible: self.migration_irreversible,
        })
    }
}

/// A size as operators write it: bytes, or a number with `K`, `M`, `G`
/// or `T` (powers of 1024; `KiB`, `MiB`, ... also read).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: expected a size such as 256M, 1G or 1048576"))?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        "T" | "TiB" => 40,
        other => return Err(format!("{text:?}: unknown unit {other:?} (K, M, G or T)")),
    };
    number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{text:?}: too large"))
}

#[cfg(test)]
mod limit_tests {
    use super::{parse_size, MigrationArgs};

    #[test]
    fn a_migrate_command_is_split_on_whitespace() {
        let args = MigrationArgs {
            migrate: Some(" python3  migrate.py --to 2 ".into()),
            migration_irreversible: true,
        };
        let m = args.into_migration().expect("declared");
        assert_eq!(m.command, ["python3", "migrate.py", "--to", "2"]);
        assert!(m.irreversible);
        assert!(MigrationArgs::default().into_migration().is_none());
    }

    #[test]
    fn sizes_read_as_operators_write_them() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("2K"), Ok(2048));
        for bad in ["", "M", "12X", "-1M", "99999999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
