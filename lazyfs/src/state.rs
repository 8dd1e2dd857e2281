//! The in-memory model: the current (pending-inclusive) namespace and file
//! contents, and how syncs move them into the backing directory.
//!
//! The backing directory IS the durable state. Every file that has a backing
//! inode is hard-linked at `STORE_NAME/<ino>` so its durable content has one
//! stable handle whatever happens to its durable names; a durable name is one
//! more hard link to it. A directory's backing location is its durable path,
//! or `STORE_NAME/d<ino>` while it has no durable name (it was fsynced before
//! its parent, or its old name was removed by a sync). The store is not part
//! of the durable state: it is emptied at mount, at every cut and at unmount.

use crate::{LazyConfig, TearMode};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;
use tracing::{error, info, warn};

/// Name of the control file at the mount root: write `cut` to it to cut;
/// read it for the counters. It is not listed by `readdir`.
pub const CTL_NAME: &str = ".lazyfs-ctl";
/// Name of the hidden store directory at the backing root (see module docs).
pub const STORE_NAME: &str = ".lazyfs-store";
/// Largest file (in bytes) whose pending content is kept in memory; writes
/// or truncates beyond it fail with `EFBIG`.
pub const PENDING_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// Inode number of the mount root (FUSE's fixed root id).
pub(crate) const ROOT_INO: u64 = 1;
/// Inode number of the control file.
pub(crate) const CTL_INO: u64 = 2;
/// First inode number handed to real nodes.
const FIRST_INO: u64 = 3;
/// Deepest directory chain followed when computing a backing path (guards
/// against a cycle that would be a bug).
const MAX_DEPTH: usize = 4096;
/// Seed mixed into the garbage stream of `TearMode::Garbage`.
const GARBAGE_SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// An errno to answer the kernel with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Errno(pub i32);

impl From<io::Error> for Errno {
    fn from(err: io::Error) -> Errno {
        Errno(err.raw_os_error().unwrap_or(libc::EIO))
    }
}

pub(crate) type Res<T> = Result<T, Errno>;

/// What cuts dropped, and how many syncs and cuts there were.
///
/// [`crate::LazyMount::report`] gives the totals since the mount;
/// [`crate::LazyMount::cut`] gives what that one cut dropped (with `cuts`
/// = 1 and `syncs` = the syncs since the previous cut).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CutReport {
    /// `fsync`/`fsyncdir` calls seen (including one that triggered a cut).
    pub syncs: u64,
    /// Cuts performed.
    pub cuts: u64,
    /// Files whose pending data was dropped (written or truncated since their
    /// last fsync).
    pub dropped_files: u64,
    /// Bytes written since the last fsync of their file and dropped.
    pub dropped_bytes: u64,
    /// Directory entry changes (an added, removed or replaced name) dropped.
    pub dropped_entries: u64,
    /// Pending writes that were torn instead of dropped.
    pub torn_writes: u64,
    /// One line per dropped thing: `data PATH (N bytes)`, `entry +PATH`
    /// (a name that vanishes), `entry -PATH` (a name that comes back),
    /// `torn PATH`.
    pub details: Vec<String>,
}

impl CutReport {
    /// Adds a cut's counts to the totals (syncs are counted as they happen).
    fn add_cut(&mut self, other: &CutReport) {
        self.cuts += other.cuts;
        self.dropped_files += other.dropped_files;
        self.dropped_bytes += other.dropped_bytes;
        self.dropped_entries += other.dropped_entries;
        self.torn_writes += other.torn_writes;
        self.details.extend(other.details.iter().cloned());
    }

    /// The counters as `key value` lines (what reading the control file gives).
    pub fn to_text(&self) -> String {
        format!(
            "syncs {}\ncuts {}\ndropped_files {}\ndropped_bytes {}\ndropped_entries {}\ntorn_writes {}\n",
            self.syncs,
            self.cuts,
            self.dropped_files,
            self.dropped_bytes,
            self.dropped_entries,
            self.torn_writes
        )
    }
}

/// Ownership, permission bits and times of a node (kept in memory; the
/// permission bits reach the backing file at fsync).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Meta {
    pub perm: u16,
    pub uid: u32,
    pub gid: u32,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
}

impl Meta {
    pub(crate) fn new(perm: u16, uid: u32, gid: u32) -> Meta {
        let now = SystemTime::now();
        Meta {
            perm,
            uid,
            gid,
            atime: now,
            mtime: now,
            ctime: now,
        }
    }

    fn from_disk(md: &fs::Metadata) -> Meta {
        let time = |t: io::Result<SystemTime>| t.unwrap_or(SystemTime::UNIX_EPOCH);
        Meta {
            // Permission bits only: the mask makes the cast lossless.
            perm: (md.mode() & 0o7777) as u16,
            uid: md.uid(),
            gid: md.gid(),
            atime: time(md.accessed()),
            mtime: time(md.modified()),
            ctime: time(md.modified()),
        }
    }
}

/// The last pending write of a file, kept so a cut can tear it.
#[derive(Debug, Clone)]
pub(crate) struct LastWrite {
    pub offset: u64,
    pub data: Vec<u8>,
}

#[derive(Debug, Default)]
pub(crate) struct FileNode {
    /// `STORE_NAME/<ino>` exists and holds the durable content.
    pub stored: bool,
    /// Length of the durable content.
    pub durable_size: u64,
    /// The full current content when it differs from the durable one.
    pub pending: Option<Vec<u8>>,
    /// Bytes written since the last fsync (for the report).
    pub pending_written: u64,
    pub last_write: Option<LastWrite>,
}

impl FileNode {
    pub(crate) fn size(&self) -> u64 {
        match &self.pending {
            Some(buf) => buf.len() as u64,
            None => self.durable_size,
        }
    }
}

/// Where a directory's backing directory is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Loc {
    Root,
    Store,
    Under(u64, OsString),
}

#[derive(Debug, Default)]
pub(crate) struct DirNode {
    /// Current entries.
    pub children: BTreeMap<OsString, u64>,
    /// Entries as the backing directory has them (as of the last fsyncdir).
    pub durable: BTreeMap<OsString, u64>,
    /// None until the directory has a backing directory.
    pub loc: Option<Loc>,
}

#[derive(Debug)]
pub(crate) enum Kind {
    File(FileNode),
    Dir(DirNode),
}

#[derive(Debug)]
pub(crate) struct Node {
    /// Current parent and name (the last ones, once unlinked).
    pub parent: u64,
    pub name: OsString,
    /// Whether the node currently has a name.
    pub linked: bool,
    pub meta: Meta,
    pub kind: Kind,
}

/// The whole filesystem state, behind one mutex shared by the FUSE session
/// and [`crate::LazyMount`].
#[derive(Debug)]
pub(crate) struct State {
    pub backing: PathBuf,
    pub tear: TearMode,
    pub block_bytes: u64,
    pub cut_at_sync: Option<u64>,
    pub nodes: HashMap<u64, Node>,
    /// Never reused, not even across cuts, so the kernel's stale inode
    /// numbers after a cut answer ENOENT/ESTALE instead of another file.
    next_ino: u64,
    /// Syncs since the mount (for `cut_at_sync`).
    total_syncs: u64,
    /// Syncs since the last cut.
    syncs_since_cut: u64,
    pub totals: CutReport,
}

impl State {
    /// Loads the durable state from the backing directory.
    pub(crate) fn load(config: &LazyConfig) -> io::Result<State> {
        let mut state = State {
            backing: config.backing.clone(),
            tear: config.tear,
            block_bytes: config.block_bytes,
            cut_at_sync: config.cut_at_sync,
            nodes: HashMap::new(),
            next_ino: FIRST_INO,
            total_syncs: 0,
            syncs_since_cut: 0,
            totals: CutReport::default(),
        };
        state.rebuild()?;
        Ok(state)
    }

    pub(crate) fn store_dir(&self) -> PathBuf {
        self.backing.join(STORE_NAME)
    }

    fn store_file(&self, ino: u64) -> PathBuf {
        self.store_dir().join(ino.to_string())
    }

    fn store_subdir(&self, ino: u64) -> PathBuf {
        self.store_dir().join(format!("d{ino}"))
    }

    pub(crate) fn alloc_ino(&mut self) -> u64 {
        let ino = self.next_ino;
        self.next_ino += 1;
        ino
    }

    /// Empties the store: nothing in it is durable (see module docs).
    pub(crate) fn clean_store(&self) -> io::Result<()> {
        let store = self.store_dir();
        match fs::remove_dir_all(&store) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        fs::create_dir(&store)
    }

    /// Removes the store entirely (at unmount, or when mounting failed).
    pub(crate) fn remove_store(&self) -> io::Result<()> {
        match fs::remove_dir_all(self.store_dir()) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Forgets every node and reads the durable state from the backing dir.
    fn rebuild(&mut self) -> io::Result<()> {
        self.nodes.clear();
        self.clean_store()?;
        let md = fs::metadata(&self.backing)?;
        let root = Node {
            parent: ROOT_INO,
            name: OsString::new(),
            linked: true,
            meta: Meta::from_disk(&md),
            kind: Kind::Dir(DirNode {
                loc: Some(Loc::Root),
                ..DirNode::default()
            }),
        };
        self.nodes.insert(ROOT_INO, root);
        let backing = self.backing.clone();
        self.scan_dir(ROOT_INO, &backing)
    }

    /// Adds the entries of the backing directory `path` under `dir_ino`.
    fn scan_dir(&mut self, dir_ino: u64, path: &Path) -> io::Result<()> {
        let mut entries = BTreeMap::new();
        for entry in fs::read_dir(path)? {
            let entry = entry?;
            let name = entry.file_name();
            if dir_ino == ROOT_INO && is_reserved(&name) {
                continue;
            }
            let md = entry.metadata()?;
            let ino = self.alloc_ino();
            let kind = if md.is_dir() {
                Kind::Dir(DirNode {
                    loc: Some(Loc::Under(dir_ino, name.clone())),
                    ..DirNode::default()
                })
            } else if md.is_file() {
                // The store link is the stable handle of the durable content.
                fs::hard_link(entry.path(), self.store_file(ino))?;
                Kind::File(FileNode {
                    stored: true,
                    durable_size: md.len(),
                    ..FileNode::default()
                })
            } else {
                warn!(path = %entry.path().display(), "lazyfs: not a file or directory, not shown");
                continue;
            };
            let node = Node {
                parent: dir_ino,
                name: name.clone(),
                linked: true,
                meta: Meta::from_disk(&md),
                kind,
            };
            let is_dir = matches!(node.kind, Kind::Dir(_));
            self.nodes.insert(ino, node);
            entries.insert(name.clone(), ino);
            if is_dir {
                self.scan_dir(ino, &entry.path())?;
            }
        }
        if let Some(Kind::Dir(dir)) = self.nodes.get_mut(&dir_ino).map(|n| &mut n.kind) {
            dir.durable = entries.clone();
            dir.children = entries;
        }
        Ok(())
    }

    pub(crate) fn node(&self, ino: u64) -> Res<&Node> {
        self.nodes.get(&ino).ok_or(Errno(libc::ESTALE))
    }

    pub(crate) fn node_mut(&mut self, ino: u64) -> Res<&mut Node> {
        self.nodes.get_mut(&ino).ok_or(Errno(libc::ESTALE))
    }

    pub(crate) fn dir(&self, ino: u64) -> Res<&DirNode> {
        match &self.node(ino)?.kind {
            Kind::Dir(d) => Ok(d),
            Kind::File(_) => Err(Errno(libc::ENOTDIR)),
        }
    }

    pub(crate) fn dir_mut(&mut self, ino: u64) -> Res<&mut DirNode> {
        match &mut self.node_mut(ino)?.kind {
            Kind::Dir(d) => Ok(d),
            Kind::File(_) => Err(Errno(libc::ENOTDIR)),
        }
    }

    pub(crate) fn file_mut(&mut self, ino: u64) -> Res<&mut FileNode> {
        match &mut self.node_mut(ino)?.kind {
            Kind::File(f) => Ok(f),
            Kind::Dir(_) => Err(Errno(libc::EISDIR)),
        }
    }

    /// The current path of a node inside the mount, for logs and reports.
    pub(crate) fn display_path(&self, ino: u64) -> String {
        let mut parts = Vec::new();
        let mut cur = ino;
        for _ in 0..MAX_DEPTH {
            if cur == ROOT_INO {
                break;
            }
            let Some(node) = self.nodes.get(&cur) else {
                break;
            };
            parts.push(node.name.to_string_lossy().into_owned());
            if !node.linked {
                parts.push("<unlinked>".to_string());
                break;
            }
            cur = node.parent;
        }
        parts.reverse();
        format!("/{}", parts.join("/"))
    }

    /// Where a directory's backing directory is now, if it has one.
    fn backing_dir(&self, ino: u64) -> Option<PathBuf> {
        let mut names = Vec::new();
        let mut cur = ino;
        for _ in 0..MAX_DEPTH {
            let Kind::Dir(dir) = &self.nodes.get(&cur)?.kind else {
                return None;
            };
            match dir.loc.as_ref()? {
                Loc::Root => return Some(join_rev(self.backing.clone(), names)),
                Loc::Store => return Some(join_rev(self.store_subdir(cur), names)),
                Loc::Under(parent, name) => {
                    names.push(name.clone());
                    cur = *parent;
                }
            }
        }
        error!(ino, "lazyfs: directory chain too deep (a cycle?)");
        None
    }

    /// Reads the current content of a file (pending or durable).
    pub(crate) fn read(&mut self, ino: u64, offset: u64, size: u32) -> Res<Vec<u8>> {
        let store = self.store_file(ino);
        let file = self.file_mut(ino)?;
        if let Some(buf) = &file.pending {
            let start = usize::try_from(offset).unwrap_or(usize::MAX).min(buf.len());
            let end = start.saturating_add(size as usize).min(buf.len());
            return Ok(buf[start..end].to_vec());
        }
        if !file.stored || offset >= file.durable_size {
            return Ok(Vec::new());
        }
        let len = (file.durable_size - offset).min(u64::from(size));
        let mut out = vec![0u8; len as usize];
        let n = File::open(store)?.read_at(&mut out, offset)?;
        out.truncate(n);
        Ok(out)
    }

    /// Makes sure the file has an in-memory pending copy and returns it.
    fn pending_mut(&mut self, ino: u64) -> Res<&mut FileNode> {
        let store = self.store_file(ino);
        let path = self.display_path(ino);
        let file = self.file_mut(ino)?;
        if file.pending.is_none() {
            if file.durable_size > PENDING_BYTES_MAX {
                warn!(%path, size = file.durable_size, "lazyfs: file larger than PENDING_BYTES_MAX, refusing change");
                return Err(Errno(libc::EFBIG));
            }
            let content = if file.stored {
                fs::read(store)?
            } else {
                Vec::new()
            };
            file.durable_size = content.len() as u64;
            file.pending = Some(content);
        }
        Ok(file)
    }

    /// A pending write: only the in-memory copy changes.
    pub(crate) fn write(&mut self, ino: u64, offset: u64, data: &[u8]) -> Res<u32> {
        let end = offset.saturating_add(data.len() as u64);
        if end > PENDING_BYTES_MAX {
            warn!(path = %self.display_path(ino), end, "lazyfs: write beyond PENDING_BYTES_MAX");
            return Err(Errno(libc::EFBIG));
        }
        let file = self.pending_mut(ino)?;
        let buf = file.pending.get_or_insert_with(Vec::new);
        // Both fit in usize: they are at most PENDING_BYTES_MAX.
        let (start, end) = (offset as usize, end as usize);
        if buf.len() < end {
            buf.resize(end, 0);
        }
        buf[start..end].copy_from_slice(data);
        file.pending_written += data.len() as u64;
        file.last_write = Some(LastWrite {
            offset,
            data: data.to_vec(),
        });
        let node = self.node_mut(ino)?;
        node.meta.mtime = SystemTime::now();
        node.meta.ctime = node.meta.mtime;
        u32::try_from(data.len()).map_err(|_| Errno(libc::EINVAL))
    }

    /// A pending truncate (or extension with zeros).
    pub(crate) fn truncate(&mut self, ino: u64, size: u64) -> Res<()> {
        if size > PENDING_BYTES_MAX {
            warn!(path = %self.display_path(ino), size, "lazyfs: truncate beyond PENDING_BYTES_MAX");
            return Err(Errno(libc::EFBIG));
        }
        let file = self.pending_mut(ino)?;
        if let Some(buf) = file.pending.as_mut() {
            buf.resize(size as usize, 0);
        }
        // The last write is no longer the last change: tearing it would
        // resurrect data the truncate removed.
        file.last_write = None;
        Ok(())
    }

    /// Counts a sync; true when this one must cut instead (`cut_at_sync`).
    pub(crate) fn count_sync(&mut self) -> bool {
        self.total_syncs += 1;
        self.syncs_since_cut += 1;
        self.totals.syncs += 1;
        self.cut_at_sync == Some(self.total_syncs)
    }

    /// fsync: the file's current content becomes its durable content.
    pub(crate) fn sync_file(&mut self, ino: u64) -> Res<()> {
        let store = self.store_file(ino);
        let perm = self.node(ino)?.meta.perm;
        let file = self.file_mut(ino)?;
        let handle = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&store)?;
        file.stored = true;
        if let Some(buf) = &file.pending {
            handle.set_len(buf.len() as u64)?;
            handle.write_all_at(buf, 0)?;
            file.durable_size = buf.len() as u64;
        }
        handle.set_permissions(fs::Permissions::from_mode(u32::from(perm)))?;
        handle.sync_all()?;
        file.pending = None;
        file.pending_written = 0;
        file.last_write = None;
        Ok(())
    }

    /// fsyncdir: the directory's current entries become its durable entries.
    pub(crate) fn sync_dir(&mut self, ino: u64) -> Res<()> {
        if self.dir(ino)?.loc.is_none() {
            // Fsynced before its parent: its entries are durable but it has
            // no durable name yet; the parent's sync will move it in place.
            fs::create_dir(self.store_subdir(ino))?;
            self.dir_mut(ino)?.loc = Some(Loc::Store);
        }
        let dpath = self.backing_dir(ino).ok_or(Errno(libc::EIO))?;
        let dir = self.dir(ino)?;
        let (children, durable) = (dir.children.clone(), dir.durable.clone());
        for (name, child) in &durable {
            if children.get(name) != Some(child) {
                self.detach(&dpath, name, *child)?;
            }
        }
        for (name, child) in &children {
            if durable.get(name) != Some(child) {
                self.attach(&dpath, ino, name, *child)?;
            }
        }
        self.dir_mut(ino)?.durable = children;
        File::open(&dpath)?.sync_all()?;
        Ok(())
    }

    /// Removes a durable entry from the backing directory `dpath`.
    fn detach(&mut self, dpath: &Path, name: &OsStr, child: u64) -> Res<()> {
        let target = dpath.join(name);
        let is_dir = matches!(self.node(child)?.kind, Kind::Dir(_));
        if is_dir {
            // Parked in the store: it may get a new name in this same sync.
            fs::rename(&target, self.store_subdir(child))?;
            self.dir_mut(child)?.loc = Some(Loc::Store);
        } else {
            // The store link keeps the content for the file's other names.
            match fs::remove_file(&target) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Adds the current entry `name -> child` of `parent` to `dpath`.
    fn attach(&mut self, dpath: &Path, parent: u64, name: &OsStr, child: u64) -> Res<()> {
        let target = dpath.join(name);
        let is_dir = matches!(self.node(child)?.kind, Kind::Dir(_));
        if is_dir {
            match self.backing_dir(child) {
                Some(from) => fs::rename(from, &target)?,
                None => fs::create_dir(&target)?,
            }
            self.dir_mut(child)?.loc = Some(Loc::Under(parent, name.to_os_string()));
        } else {
            let store = self.store_file(child);
            let file = self.file_mut(child)?;
            if !file.stored {
                // The name is durable before any data: an empty file.
                File::create(&store)?;
                file.stored = true;
                file.durable_size = 0;
            }
            fs::hard_link(&store, &target)?;
        }
        Ok(())
    }

    /// Drops everything pending: the state reverts to the backing directory.
    pub(crate) fn cut(&mut self) -> CutReport {
        let mut report = self.account_dropped();
        report.cuts = 1;
        report.syncs = self.syncs_since_cut;
        self.syncs_since_cut = 0;
        if self.tear != TearMode::None {
            self.tear_writes(&mut report);
        }
        for line in &report.details {
            info!("lazyfs cut dropped: {line}");
        }
        if let Err(e) = self.rebuild() {
            error!(error = %e, "lazyfs: reloading the durable state after a cut failed");
        }
        info!(
            files = report.dropped_files,
            bytes = report.dropped_bytes,
            entries = report.dropped_entries,
            torn = report.torn_writes,
            "lazyfs: cut"
        );
        self.totals.add_cut(&report);
        report
    }

    /// Lists what a cut now would drop.
    fn account_dropped(&self) -> CutReport {
        let mut report = CutReport::default();
        let mut inos: Vec<u64> = self.nodes.keys().copied().collect();
        inos.sort_unstable();
        for ino in inos {
            let Some(node) = self.nodes.get(&ino) else {
                continue;
            };
            match &node.kind {
                Kind::File(f) if f.pending.is_some() => {
                    report.dropped_files += 1;
                    report.dropped_bytes += f.pending_written;
                    let path = self.display_path(ino);
                    report
                        .details
                        .push(format!("data {path} ({} bytes)", f.pending_written));
                }
                Kind::File(_) => {}
                Kind::Dir(d) => self.account_entries(ino, d, &mut report),
            }
        }
        report
    }

    fn account_entries(&self, ino: u64, dir: &DirNode, report: &mut CutReport) {
        let base = self.display_path(ino);
        let base = base.trim_end_matches('/');
        for (name, child) in &dir.children {
            if dir.durable.get(name) != Some(child) {
                report.dropped_entries += 1;
                report
                    .details
                    .push(format!("entry +{base}/{}", name.to_string_lossy()));
            }
        }
        for (name, child) in &dir.durable {
            if dir.children.get(name) != Some(child) {
                report.dropped_entries += 1;
                report
                    .details
                    .push(format!("entry -{base}/{}", name.to_string_lossy()));
            }
        }
    }

    /// Applies a torn version of each file's last pending write to its
    /// durable content (see [`TearMode`]).
    fn tear_writes(&self, report: &mut CutReport) {
        let block = self.block_bytes.max(1);
        let mut inos: Vec<u64> = self.nodes.keys().copied().collect();
        inos.sort_unstable();
        for ino in inos {
            let Some(Kind::File(file)) = self.nodes.get(&ino).map(|n| &n.kind) else {
                continue;
            };
            let (Some(last), true) = (&file.last_write, file.stored) else {
                continue;
            };
            let torn = torn_bytes(&last.data, last.offset, block, self.tear);
            let path = self.display_path(ino);
            let res = OpenOptions::new()
                .write(true)
                .open(self.store_file(ino))
                .and_then(|h| {
                    h.write_all_at(&torn, last.offset)
                        .and_then(|()| h.sync_all())
                });
            match res {
                Ok(()) => {
                    report.torn_writes += 1;
                    report.details.push(format!("torn {path}"));
                }
                Err(e) => error!(%path, error = %e, "lazyfs: tearing a write failed"),
            }
        }
    }
}

/// The bytes a torn write leaves: the first `floor(whole_blocks / 2)` whole
/// blocks of `data`, then zeros or garbage up to `data.len()`. Deterministic
/// so tests can check the exact outcome.
pub(crate) fn torn_bytes(data: &[u8], offset: u64, block: u64, mode: TearMode) -> Vec<u8> {
    let whole_blocks = data.len() as u64 / block;
    let keep = usize::try_from(whole_blocks / 2 * block).unwrap_or(0);
    let mut out = data[..keep.min(data.len())].to_vec();
    let rest = data.len() - out.len();
    match mode {
        TearMode::Garbage => {
            let mut x = GARBAGE_SEED ^ offset;
            out.extend((0..rest).map(|_| {
                // xorshift64: cheap, deterministic, never stuck at zero.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 56) as u8
            }));
        }
        TearMode::Zero | TearMode::None => out.resize(data.len(), 0),
    }
    out
}

fn join_rev(base: PathBuf, names: Vec<OsString>) -> PathBuf {
    names.into_iter().rev().fold(base, |p, n| p.join(n))
}

/// Names at the mount root that belong to lazyfs itself.
pub(crate) fn is_reserved(name: &OsStr) -> bool {
    name == CTL_NAME || name == STORE_NAME
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_zero_keeps_half_the_whole_blocks() {
        let data: Vec<u8> = (0..3 * 4096).map(|i| (i % 251) as u8 + 1).collect();
        let torn = torn_bytes(&data, 0, 4096, TearMode::Zero);
        assert_eq!(torn.len(), data.len());
        assert_eq!(&torn[..4096], &data[..4096]);
        assert!(torn[4096..].iter().all(|&b| b == 0));
    }

    #[test]
    fn torn_garbage_is_deterministic_and_not_the_data() {
        let data = vec![7u8; 2 * 4096 + 10];
        let a = torn_bytes(&data, 5, 4096, TearMode::Garbage);
        let b = torn_bytes(&data, 5, 4096, TearMode::Garbage);
        assert_eq!(a, b);
        assert_eq!(&a[..4096], &data[..4096]);
        assert_ne!(&a[4096..], &data[4096..]);
    }
}
