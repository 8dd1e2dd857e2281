//! Namespace operations on the current view. Each one changes only the
//! in-memory `children` maps: the backing directory changes at fsyncdir.

use crate::state::{is_reserved, DirNode, Errno, FileNode, Kind, Meta, Node, Res, State, ROOT_INO};
use std::ffi::OsStr;

/// `renameat2` flags (linux/fs.h).
const RENAME_NOREPLACE: u32 = 1;
const RENAME_EXCHANGE: u32 = 2;

impl State {
    /// The inode of `name` in directory `parent`.
    pub(crate) fn lookup(&self, parent: u64, name: &OsStr) -> Res<u64> {
        self.dir(parent)?
            .children
            .get(name)
            .copied()
            .ok_or(Errno(libc::ENOENT))
    }

    /// Checks that `name` can be added to `parent` (a live directory).
    fn check_new_name(&self, parent: u64, name: &OsStr) -> Res<()> {
        let node = self.node(parent)?;
        let Kind::Dir(dir) = &node.kind else {
            return Err(Errno(libc::ENOTDIR));
        };
        if !node.linked {
            return Err(Errno(libc::ENOENT));
        }
        if parent == ROOT_INO && is_reserved(name) {
            return Err(Errno(libc::EPERM));
        }
        if dir.children.contains_key(name) {
            return Err(Errno(libc::EEXIST));
        }
        Ok(())
    }

    fn add_node(&mut self, parent: u64, name: &OsStr, meta: Meta, kind: Kind) -> Res<u64> {
        self.check_new_name(parent, name)?;
        let ino = self.alloc_ino();
        let node = Node {
            parent,
            name: name.to_os_string(),
            linked: true,
            meta,
            kind,
        };
        self.nodes.insert(ino, node);
        self.dir_mut(parent)?
            .children
            .insert(name.to_os_string(), ino);
        Ok(ino)
    }

    /// A pending create: an empty file that exists only in memory.
    pub(crate) fn create(&mut self, parent: u64, name: &OsStr, meta: Meta) -> Res<u64> {
        let file = FileNode {
            pending: Some(Vec::new()),
            ..FileNode::default()
        };
        self.add_node(parent, name, meta, Kind::File(file))
    }

    /// A pending mkdir: the directory has no backing directory yet.
    pub(crate) fn mkdir(&mut self, parent: u64, name: &OsStr, meta: Meta) -> Res<u64> {
        self.add_node(parent, name, meta, Kind::Dir(DirNode::default()))
    }

    /// A pending unlink (`want_dir` = rmdir).
    pub(crate) fn remove(&mut self, parent: u64, name: &OsStr, want_dir: bool) -> Res<()> {
        let ino = self.lookup(parent, name)?;
        match (&self.node(ino)?.kind, want_dir) {
            (Kind::Dir(d), true) if !d.children.is_empty() => return Err(Errno(libc::ENOTEMPTY)),
            (Kind::Dir(_), false) => return Err(Errno(libc::EISDIR)),
            (Kind::File(_), true) => return Err(Errno(libc::ENOTDIR)),
            _ => {}
        }
        self.dir_mut(parent)?.children.remove(name);
        self.node_mut(ino)?.linked = false;
        Ok(())
    }

    /// A pending rename. Moving a directory to another parent is refused with
    /// EXDEV (callers such as `mv` fall back to copying): a directory has one
    /// backing location, so its move could not be made durable one parent at
    /// a time.
    pub(crate) fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
    ) -> Res<()> {
        if flags & RENAME_EXCHANGE != 0 || flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE) != 0 {
            return Err(Errno(libc::EINVAL));
        }
        let ino = self.lookup(parent, name)?;
        let src_is_dir = matches!(self.node(ino)?.kind, Kind::Dir(_));
        if src_is_dir && parent != newparent {
            return Err(Errno(libc::EXDEV));
        }
        if newparent == ROOT_INO && is_reserved(newname) {
            return Err(Errno(libc::EPERM));
        }
        if !self.node(newparent)?.linked {
            return Err(Errno(libc::ENOENT));
        }
        match self.lookup(newparent, newname) {
            Ok(existing) if existing == ino => return Ok(()),
            Ok(_) if flags & RENAME_NOREPLACE != 0 => return Err(Errno(libc::EEXIST)),
            Ok(existing) => self.check_replace(src_is_dir, existing)?,
            Err(Errno(libc::ENOENT)) => {}
            Err(e) => return Err(e),
        }
        if let Ok(existing) = self.lookup(newparent, newname) {
            self.node_mut(existing)?.linked = false;
        }
        self.dir_mut(parent)?.children.remove(name);
        self.dir_mut(newparent)?
            .children
            .insert(newname.to_os_string(), ino);
        let node = self.node_mut(ino)?;
        node.parent = newparent;
        node.name = newname.to_os_string();
        Ok(())
    }

    /// POSIX rules for renaming over an existing name.
    fn check_replace(&self, src_is_dir: bool, existing: u64) -> Res<()> {
        match (&self.node(existing)?.kind, src_is_dir) {
            (Kind::Dir(d), true) if !d.children.is_empty() => Err(Errno(libc::ENOTEMPTY)),
            (Kind::Dir(_), false) => Err(Errno(libc::EISDIR)),
            (Kind::File(_), true) => Err(Errno(libc::ENOTDIR)),
            _ => Ok(()),
        }
    }

    /// The current entries of a directory, `.` and `..` first.
    pub(crate) fn list(&self, ino: u64) -> Res<Vec<(u64, bool, std::ffi::OsString)>> {
        let node = self.node(ino)?;
        let Kind::Dir(dir) = &node.kind else {
            return Err(Errno(libc::ENOTDIR));
        };
        let mut out = vec![(ino, true, ".".into()), (node.parent, true, "..".into())];
        for (name, child) in &dir.children {
            let is_dir = matches!(self.nodes.get(child).map(|n| &n.kind), Some(Kind::Dir(_)));
            out.push((*child, is_dir, name.clone()));
        }
        Ok(out)
    }
}
