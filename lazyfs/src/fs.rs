//! The FUSE adapter: every request locks the shared [`State`] and answers
//! from it. Not modelled (answered with fuser's default `ENOSYS`, or `EPERM`
//! here): hard links, symlinks, special files, xattrs, locks, fallocate.

use crate::power::PowerLine;
use crate::state::{Errno, Kind, Meta, Res, State, CTL_INO, ROOT_INO};
use fuser::consts::FOPEN_DIRECT_IO;
use fuser::{
    FileAttr, FileType, Filesystem, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow,
};
use std::ffi::OsStr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};
use tracing::{debug, info, warn};

/// Attribute and entry cache lifetime: zero, so the kernel asks again after
/// every change and a cut is visible at once.
const TTL: Duration = Duration::ZERO;
/// Block size reported in `stat` (bytes).
const STAT_BLKSIZE: u32 = 4096;
/// Unit of `st_blocks` (bytes).
const STAT_BLOCK_UNIT: u64 = 512;
/// Permission bits of the control file.
const CTL_PERM: u16 = 0o600;
/// The control command that cuts.
const CTL_CUT: &str = "cut";

/// The FUSE filesystem; shares its state with the [`crate::LazyMount`].
pub(crate) struct LazyFs {
    pub state: Arc<Mutex<State>>,
    /// The power line this mount is on, if any.
    pub power: Option<PowerLine>,
    /// Syncs held unanswered because power failed; answered (`EIO`) by the
    /// next cut. Shared with the [`crate::LazyMount`].
    pub held: Arc<Mutex<Vec<ReplyEmpty>>>,
}

/// Locks the state; a panic in another request must not wedge the mount.
pub(crate) fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn attr_of(state: &State, ino: u64) -> Res<FileAttr> {
    if ino == CTL_INO {
        let root = state.node(ROOT_INO)?;
        return Ok(make_attr(
            ino,
            0,
            FileType::RegularFile,
            &Meta {
                perm: CTL_PERM,
                ..root.meta
            },
            1,
        ));
    }
    let node = state.node(ino)?;
    let (size, kind, nlink) = match &node.kind {
        Kind::File(f) => (f.size(), FileType::RegularFile, u32::from(node.linked)),
        Kind::Dir(_) => (0, FileType::Directory, 2),
    };
    Ok(make_attr(ino, size, kind, &node.meta, nlink))
}

fn make_attr(ino: u64, size: u64, kind: FileType, meta: &Meta, nlink: u32) -> FileAttr {
    FileAttr {
        ino,
        size,
        blocks: size.div_ceil(STAT_BLOCK_UNIT),
        atime: meta.atime,
        mtime: meta.mtime,
        ctime: meta.ctime,
        crtime: meta.ctime,
        kind,
        perm: meta.perm,
        nlink,
        uid: meta.uid,
        gid: meta.gid,
        rdev: 0,
        blksize: STAT_BLKSIZE,
        flags: 0,
    }
}

fn new_meta(req: &Request<'_>, mode: u32, umask: u32) -> Meta {
    // Permission bits only: the mask makes the cast lossless.
    Meta::new((mode & !umask & 0o7777) as u16, req.uid(), req.gid())
}

fn time_of(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl LazyFs {
    fn entry_reply(&self, reply: ReplyEntry, res: Res<u64>) {
        let state = lock(&self.state);
        match res.and_then(|ino| attr_of(&state, ino)) {
            Ok(attr) => reply.entry(&TTL, &attr, 0),
            Err(Errno(e)) => reply.error(e),
        }
    }

    /// Handles a write to the control file.
    fn control(&self, data: &[u8]) -> Res<()> {
        let cmd = String::from_utf8_lossy(data);
        match cmd.trim() {
            CTL_CUT => {
                info!("lazyfs: cut requested through {}", crate::CTL_NAME);
                lock(&self.state).cut();
                Ok(())
            }
            // `echo` through some shells sends an empty write on truncate.
            "" => Ok(()),
            other => {
                warn!(command = other, "lazyfs: unknown control command");
                Err(Errno(libc::EINVAL))
            }
        }
    }

    /// Power has failed (or fails at this sync): keep the request
    /// unanswered, so its caller never sees it complete. `Some(reply)`:
    /// go on and sync.
    fn hold_for_power(&self, ino: u64, reply: ReplyEmpty) -> Option<ReplyEmpty> {
        if ino == CTL_INO {
            return Some(reply);
        }
        match &self.power {
            Some(power) if !power.sync_may_complete() => {
                info!(
                    ino,
                    "lazyfs: power has failed, holding this sync until the cut"
                );
                self.held
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .push(reply);
                None
            }
            _ => Some(reply),
        }
    }

    /// fsync and fsyncdir: count, then sync or (at `cut_at_sync`) cut.
    fn sync(&self, ino: u64, sync: fn(&mut State, u64) -> Res<()>) -> Res<()> {
        if ino == CTL_INO {
            return Ok(());
        }
        let mut state = lock(&self.state);
        if state.count_sync() {
            info!(
                ino,
                "lazyfs: cut_at_sync reached, cutting instead of syncing"
            );
            state.cut();
            return Err(Errno(libc::EIO));
        }
        sync(&mut state, ino)
    }

    /// `ids` = mode, uid, gid. Ownership and times live in memory only.
    fn setattr_inner(
        &self,
        ino: u64,
        ids: [Option<u32>; 3],
        size: Option<u64>,
        times: [Option<TimeOrNow>; 2],
    ) -> Res<FileAttr> {
        let mut state = lock(&self.state);
        if ino == CTL_INO {
            return attr_of(&state, ino);
        }
        if let Some(size) = size {
            state.truncate(ino, size)?;
        }
        let node = state.node_mut(ino)?;
        let [mode, uid, gid] = ids;
        if let Some(mode) = mode {
            node.meta.perm = (mode & 0o7777) as u16;
        }
        node.meta.uid = uid.unwrap_or(node.meta.uid);
        node.meta.gid = gid.unwrap_or(node.meta.gid);
        let [atime, mtime] = times;
        if let Some(t) = atime {
            node.meta.atime = time_of(t);
        }
        if let Some(t) = mtime {
            node.meta.mtime = time_of(t);
        }
        node.meta.ctime = SystemTime::now();
        attr_of(&state, ino)
    }
}

impl Filesystem for LazyFs {
    fn destroy(&mut self) {
        if let Err(e) = lock(&self.state).remove_store() {
            warn!(error = %e, "lazyfs: cleaning the store at unmount failed");
        }
    }

    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        if parent == ROOT_INO && name == crate::CTL_NAME {
            return self.entry_reply(reply, Ok(CTL_INO));
        }
        let res = lock(&self.state).lookup(parent, name);
        self.entry_reply(reply, res);
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        match attr_of(&lock(&self.state), ino) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(Errno(e)) => reply.error(e),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        match self.setattr_inner(ino, [mode, uid, gid], size, [atime, mtime]) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(Errno(e)) => reply.error(e),
        }
    }

    fn mknod(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        if mode & libc::S_IFMT != libc::S_IFREG {
            return reply.error(libc::EPERM);
        }
        let res = lock(&self.state).create(parent, name, new_meta(req, mode, umask));
        self.entry_reply(reply, res);
    }

    fn mkdir(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let res = lock(&self.state).mkdir(parent, name, new_meta(req, mode, umask));
        self.entry_reply(reply, res);
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        match lock(&self.state).remove(parent, name, false) {
            Ok(()) => reply.ok(),
            Err(Errno(e)) => reply.error(e),
        }
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        match lock(&self.state).remove(parent, name, true) {
            Ok(()) => reply.ok(),
            Err(Errno(e)) => reply.error(e),
        }
    }

    fn symlink(
        &mut self,
        _req: &Request<'_>,
        _parent: u64,
        _name: &OsStr,
        _target: &Path,
        reply: ReplyEntry,
    ) {
        reply.error(libc::EPERM);
    }

    fn link(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _newparent: u64,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(libc::EPERM);
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        match lock(&self.state).rename(parent, name, newparent, newname, flags) {
            Ok(()) => reply.ok(),
            Err(Errno(e)) => reply.error(e),
        }
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        let state = lock(&self.state);
        let res = if ino == CTL_INO {
            Ok(())
        } else {
            state.node(ino).map(|_| ())
        };
        match res {
            // Direct I/O: the kernel keeps no page cache that could outlive a cut.
            Ok(()) => reply.opened(0, FOPEN_DIRECT_IO),
            Err(Errno(e)) => reply.error(e),
        }
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock: Option<u64>,
        reply: ReplyData,
    ) {
        let mut state = lock(&self.state);
        if ino == CTL_INO {
            let text = state.totals.to_text().into_bytes();
            let start = usize::try_from(offset).unwrap_or(0).min(text.len());
            let end = start.saturating_add(size as usize).min(text.len());
            return reply.data(&text[start..end]);
        }
        match state.read(ino, u64::try_from(offset).unwrap_or(0), size) {
            Ok(data) => reply.data(&data),
            Err(Errno(e)) => reply.error(e),
        }
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        data: &[u8],
        _wflags: u32,
        _flags: i32,
        _lock: Option<u64>,
        reply: ReplyWrite,
    ) {
        let res = if ino == CTL_INO {
            self.control(data).map(|()| data.len() as u32)
        } else {
            let Ok(offset) = u64::try_from(offset) else {
                return reply.error(libc::EINVAL);
            };
            lock(&self.state).write(ino, offset, data)
        };
        match res {
            Ok(n) => reply.written(n),
            Err(Errno(e)) => reply.error(e),
        }
    }

    fn flush(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _fh: u64,
        _lock_owner: u64,
        reply: ReplyEmpty,
    ) {
        // Close makes nothing durable.
        reply.ok();
    }

    fn fsync(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        debug!(ino, "lazyfs: fsync");
        let Some(reply) = self.hold_for_power(ino, reply) else {
            return;
        };
        match self.sync(ino, State::sync_file) {
            Ok(()) => reply.ok(),
            Err(Errno(e)) => reply.error(e),
        }
    }

    fn opendir(&mut self, _req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        match lock(&self.state).dir(ino) {
            Ok(_) => reply.opened(0, 0),
            Err(Errno(e)) => reply.error(e),
        }
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let entries = match lock(&self.state).list(ino) {
            Ok(entries) => entries,
            Err(Errno(e)) => return reply.error(e),
        };
        let skip = usize::try_from(offset).unwrap_or(0);
        for (i, (child, is_dir, name)) in entries.into_iter().enumerate().skip(skip) {
            let kind = if is_dir {
                FileType::Directory
            } else {
                FileType::RegularFile
            };
            // The offset is that of the next entry.
            if reply.add(child, (i + 1) as i64, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        debug!(ino, "lazyfs: fsyncdir");
        let Some(reply) = self.hold_for_power(ino, reply) else {
            return;
        };
        match self.sync(ino, State::sync_dir) {
            Ok(()) => reply.ok(),
            Err(Errno(e)) => reply.error(e),
        }
    }

    fn create(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let mut state = lock(&self.state);
        let res = state
            .create(parent, name, new_meta(req, mode, umask))
            .and_then(|ino| attr_of(&state, ino));
        match res {
            Ok(attr) => reply.created(&TTL, &attr, 0, 0, FOPEN_DIRECT_IO),
            Err(Errno(e)) => reply.error(e),
        }
    }

    // Extended attributes are not modelled. ENOSYS (without fuser's default
    // warning) makes the kernel stop asking and answer EOPNOTSUPP itself.
    fn getxattr(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        reply.error(libc::ENOSYS);
    }

    fn listxattr(&mut self, _req: &Request<'_>, _ino: u64, _size: u32, reply: ReplyXattr) {
        reply.error(libc::ENOSYS);
    }

    fn setxattr(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(libc::ENOSYS);
    }

    fn removexattr(&mut self, _req: &Request<'_>, _ino: u64, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(libc::ENOSYS);
    }

    /// The backing filesystem's numbers (pending data is not counted): some
    /// programs refuse to write to a filesystem that reports no free space.
    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        let backing = lock(&self.state).backing.clone();
        match backing_statvfs(&backing) {
            Ok(st) => reply.statfs(
                st.f_blocks,
                st.f_bfree,
                st.f_bavail,
                st.f_files,
                st.f_ffree,
                u32::try_from(st.f_bsize).unwrap_or(STAT_BLKSIZE),
                u32::try_from(st.f_namemax).unwrap_or(u32::MAX),
                u32::try_from(st.f_frsize).unwrap_or(STAT_BLKSIZE),
            ),
            Err(Errno(e)) => reply.error(e),
        }
    }
}

fn backing_statvfs(path: &Path) -> Res<libc::statvfs> {
    use std::os::unix::ffi::OsStrExt;
    let cpath =
        std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno(libc::EINVAL))?;
    // SAFETY: statvfs is plain data, filled by the call from a valid path.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(cpath.as_ptr(), &mut st) != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        Ok(st)
    }
}
