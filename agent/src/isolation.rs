//! Applying a release's limits and user to its app process (issue #24
//! item 4), as far as this node can, and saying exactly how far.
//!
//! Three ways, best first, chosen per limit:
//! - **cgroup v2** (a unified hierarchy whose `cgroup.controllers` lists
//!   the controller): `memory.max`, `cpu.max`, `pids.max` in a cgroup of
//!   the instance's own;
//! - **cgroup v1** (a writable `memory`, `cpu` or `pids` hierarchy):
//!   `memory.limit_in_bytes`, `cpu.cfs_quota_us`, `pids.max`;
//! - **rlimits** for what no cgroup can take: open files always
//!   (`RLIMIT_NOFILE`), memory as address space (`RLIMIT_AS`, virtual, not
//!   resident: the app sees failed allocations instead of a kill),
//!   processes as `RLIMIT_NPROC` (per user, and not binding on root).
//!
//! A limit the node cannot apply is reported as not applied ([`Applied`]),
//! never left out: nobody may mistake a signature for a sandbox. systemd
//! transient units are not used (this agent does not require systemd; see
//! docs/operations.md, "Limits and isolation").
//!
//! The child joins its cgroups itself, before `exec`, by writing `0` to
//! each `cgroup.procs` (the kernel reads 0 as "the writer"): no moment
//! runs outside them, and nothing but async-signal-safe syscalls runs
//! between `fork` and `exec`.

use releases::AppLimits;
use std::ffi::CString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The period of a cgroup CPU quota, in microseconds (the kernel's
/// default `cfs_period_us`).
const CPU_PERIOD_US: u64 = 100_000;
/// Where cgroup hierarchies are mounted.
const CGROUP_MOUNT: &str = "/sys/fs/cgroup";
/// Directory name prefix of an instance's cgroup.
const CGROUP_PREFIX: &str = "fleetweft-";

/// The cgroup hierarchies this node offers, found once per instance start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hierarchies {
    /// A cgroup v2 directory the agent may create children in, and the
    /// controllers its `cgroup.subtree_control` enables.
    pub v2: Option<(PathBuf, Vec<String>)>,
    /// cgroup v1 directories (the agent's own cgroup in each) by
    /// controller: `memory`, `cpu`, `pids`.
    pub v1: Vec<(&'static str, PathBuf)>,
}

impl Hierarchies {
    /// What this process can use: the agent's own cgroup in each mounted
    /// hierarchy (from `/proc/self/cgroup`), kept when writable.
    pub fn detect() -> Hierarchies {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        Hierarchies::from_proc(Path::new(CGROUP_MOUNT), &own)
    }

    /// [`Hierarchies::detect`] over a given mount point and
    /// `/proc/self/cgroup` text (tests use a directory of their own).
    pub fn from_proc(mount: &Path, own: &str) -> Hierarchies {
        let mut found = Hierarchies::default();
        for line in own.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_), Some(controllers), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let rel = path.trim_start_matches('/');
            if controllers.is_empty() {
                found.v2 = v2_at(mount, rel);
                continue;
            }
            for name in ["memory", "cpu", "pids"] {
                if controllers.split(',').any(|c| c == name) {
                    let dir = mount.join(name).join(rel);
                    if writable(&dir) {
                        found.v1.push((name, dir));
                    }
                }
            }
        }
        found
    }

    fn v1_dir(&self, controller: &str) -> Option<&Path> {
        let found = self.v1.iter().find(|(name, _)| *name == controller);
        found.map(|(_, dir)| dir.as_path())
    }

    fn v2_has(&self, controller: &str) -> Option<&Path> {
        let (dir, enabled) = self.v2.as_ref()?;
        enabled
            .iter()
            .any(|c| c == controller)
            .then_some(dir.as_path())
    }
}

/// The unified hierarchy's directory for `rel`, with the controllers a
/// child of it may use; `None` when it is absent, read-only or enables no
/// controller. (The pure-v2 mount is `mount` itself; a hybrid system
/// mounts it at `mount/unified`.)
fn v2_at(mount: &Path, rel: &str) -> Option<(PathBuf, Vec<String>)> {
    for base in [mount.to_path_buf(), mount.join("unified")] {
        let dir = base.join(rel);
        let Ok(enabled) = std::fs::read_to_string(dir.join("cgroup.subtree_control")) else {
            continue;
        };
        let enabled: Vec<String> = enabled.split_whitespace().map(str::to_string).collect();
        if !enabled.is_empty() && writable(&dir) {
            return Some((dir, enabled));
        }
    }
    None
}

fn writable(dir: &Path) -> bool {
    let Ok(path) = CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: `path` is a valid NUL-terminated string for the call.
    unsafe { libc::access(path.as_ptr(), libc::W_OK) == 0 }
}

/// What was applied to an instance, worded for the proof's process row:
/// each limit with where it was applied, or that it was not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// One phrase per limit, in the order memory, cpu, processes, open
    /// files, user.
    pub phrases: Vec<String>,
}

impl std::fmt::Display for Applied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.phrases.is_empty() {
            return f.write_str("no limits declared");
        }
        f.write_str(&self.phrases.join("; "))
    }
}

/// Why a release's limits could not be prepared; the instance is not
/// started (a limit that cannot be honoured where it could be is an
/// error, not a silent downgrade).
#[derive(Debug, thiserror::Error)]
pub enum IsolationError {
    /// A cgroup could not be created or written.
    #[error("cgroup {path}: {source}")]
    Cgroup {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The release names a user this node does not have.
    #[error("user {0:?} does not exist on this node")]
    NoSuchUser(String),
}

/// What the child does between `fork` and `exec`, prepared in the parent.
#[derive(Debug, Default)]
pub struct Prepared {
    /// `cgroup.procs` files the child joins.
    procs: Vec<CString>,
    /// `(resource, limit)` pairs the child sets, soft and hard alike.
    rlimits: Vec<(libc::__rlimit_resource_t, u64)>,
    /// `(uid, gid)` the child switches to, last.
    user: Option<(libc::uid_t, libc::gid_t)>,
    /// The cgroups made for the instance, removed by [`Prepared::release`].
    pub cgroups: Vec<PathBuf>,
    /// What the proof says was applied.
    pub applied: Applied,
}

/// Prepares `limits` for one instance named `name` (unique per running
/// instance: the release and its port).
pub fn prepare(
    limits: &AppLimits,
    name: &str,
    found: &Hierarchies,
) -> Result<Prepared, IsolationError> {
    let mut p = Prepared::default();
    let dir_name = format!("{CGROUP_PREFIX}{name}");
    if let Some(bytes) = limits.memory_bytes_max {
        memory(&mut p, bytes, &dir_name, found)?;
    }
    if let Some(percent) = limits.cpu_percent_max {
        cpu(&mut p, percent, &dir_name, found)?;
    }
    if let Some(max) = limits.processes_max {
        processes(&mut p, max, &dir_name, found)?;
    }
    if let Some(files) = limits.open_files_max {
        p.rlimits.push((libc::RLIMIT_NOFILE, files.into()));
        p.say(format!("open files {files} (rlimit RLIMIT_NOFILE)"));
    }
    if let Some(user) = &limits.user {
        let ids = lookup_user(user)?;
        p.user = Some(ids);
        p.say(format!("user {user} (uid {}, gid {})", ids.0, ids.1));
    }
    Ok(p)
}

impl Prepared {
    fn say(&mut self, phrase: String) {
        self.applied.phrases.push(phrase);
    }

    /// A cgroup `dir_name` under `parent`, with `file` set to `value`,
    /// joined by the child.
    fn cgroup(
        &mut self,
        parent: &Path,
        dir_name: &str,
        file: &str,
        value: &str,
    ) -> Result<(), IsolationError> {
        let dir = parent.join(dir_name);
        let err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| IsolationError::Cgroup { path, source }
        };
        if !self.cgroups.contains(&dir) {
            match std::fs::create_dir(&dir) {
                Ok(()) => {}
                // Left by an instance whose agent was killed: reused.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(err(&dir)(e)),
            }
            self.cgroups.push(dir.clone());
            let procs = dir.join("cgroup.procs");
            let procs = CString::new(procs.as_os_str().as_encoded_bytes()).map_err(|_| {
                IsolationError::Cgroup {
                    path: procs.clone(),
                    source: std::io::Error::other("path holds a NUL byte"),
                }
            })?;
            self.procs.push(procs);
        }
        let path = dir.join(file);
        std::fs::write(&path, value).map_err(err(&path))
    }

    /// The `(uid, gid)` the app runs as when the release names a user.
    pub fn owner(&self) -> Option<(u32, u32)> {
        self.user
    }

    /// How often the kernel killed a process of the instance for going
    /// over its memory limit (`oom_kill` in cgroup v2's `memory.events`
    /// or cgroup v1's `memory.oom_control`); `None` without a memory
    /// cgroup, or on a kernel that does not count.
    pub fn oom_kills(&self) -> Option<u64> {
        for dir in &self.cgroups {
            for file in ["memory.events", "memory.oom_control"] {
                let Ok(text) = std::fs::read_to_string(dir.join(file)) else {
                    continue;
                };
                let count = text.lines().find_map(|l| l.strip_prefix("oom_kill "));
                if let Some(count) = count.and_then(|n| n.trim().parse().ok()) {
                    return Some(count);
                }
            }
        }
        None
    }

    /// Removes the instance's cgroups once its processes are gone
    /// (best effort: a cgroup still holding a process stays, and is
    /// reused by the next instance of the same name).
    pub fn release(&self) {
        for dir in &self.cgroups {
            if let Err(e) = std::fs::remove_dir(dir) {
                tracing::warn!(cgroup = %dir.display(), "cgroup not removed: {e}");
            }
        }
    }

    /// What the child runs between `fork` and `exec`: join the cgroups,
    /// set the rlimits, drop to the user. Async-signal-safe: syscalls on
    /// memory prepared by the parent, no allocation.
    pub fn in_child(&self) -> std::io::Result<()> {
        for procs in &self.procs {
            join_cgroup(procs)?;
        }
        for &(resource, value) in &self.rlimits {
            let limit = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            // SAFETY: setrlimit reads `limit` only.
            if unsafe { libc::setrlimit(resource, &limit) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        if let Some((uid, gid)) = self.user {
            // SAFETY: plain syscalls; groups first, the uid last (after it
            // the process may no longer change its groups).
            unsafe {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }
}

/// Writes "0" to `procs`: the kernel moves the writer into the cgroup.
fn join_cgroup(procs: &CString) -> std::io::Result<()> {
    // SAFETY: open/write/close on a NUL-terminated path the parent built.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        let failed = written != 1;
        let error = std::io::Error::last_os_error();
        libc::close(fd);
        if failed {
            return Err(error);
        }
    }
    Ok(())
}

fn memory(
    p: &mut Prepared,
    bytes: u64,
    dir_name: &str,
    found: &Hierarchies,
) -> Result<(), IsolationError> {
    let size = releases::limits::bytes_text(bytes);
    if let Some(parent) = found.v2_has("memory") {
        p.cgroup(parent, dir_name, "memory.max", &bytes.to_string())?;
        // Without swap the limit is the app's whole footprint.
        let _ = p.cgroup(parent, dir_name, "memory.swap.max", "0");
        p.say(format!("memory {size} (cgroup v2 memory.max)"));
    } else if let Some(parent) = found.v1_dir("memory") {
        p.cgroup(
            parent,
            dir_name,
            "memory.limit_in_bytes",
            &bytes.to_string(),
        )?;
        p.say(format!("memory {size} (cgroup v1 memory.limit_in_bytes)"));
    } else {
        p.rlimits.push((libc::RLIMIT_AS, bytes));
        p.say(format!(
            "memory {size} as address space only (rlimit RLIMIT_AS: no memory cgroup on this node)"
        ));
    }
    Ok(())
}

fn cpu(
    p: &mut Prepared,
    percent: u32,
    dir_name: &str,
    found: &Hierarchies,
) -> Result<(), IsolationError> {
    let quota_us = u64::from(percent) * CPU_PERIOD_US / 100;
    if let Some(parent) = found.v2_has("cpu") {
        p.cgroup(
            parent,
            dir_name,
            "cpu.max",
            &format!("{quota_us} {CPU_PERIOD_US}"),
        )?;
        p.say(format!("cpu {percent}% (cgroup v2 cpu.max)"));
    } else if let Some(parent) = found.v1_dir("cpu") {
        p.cgroup(
            parent,
            dir_name,
            "cpu.cfs_period_us",
            &CPU_PERIOD_US.to_string(),
        )?;
        p.cgroup(parent, dir_name, "cpu.cfs_quota_us", &quota_us.to_string())?;
        p.say(format!("cpu {percent}% (cgroup v1 cpu.cfs_quota_us)"));
    } else {
        p.say(format!(
            "cpu {percent}% NOT applied (no cpu cgroup on this node)"
        ));
    }
    Ok(())
}

fn processes(
    p: &mut Prepared,
    max: u32,
    dir_name: &str,
    found: &Hierarchies,
) -> Result<(), IsolationError> {
    let parent = found.v2_has("pids").map(|d| (d, "v2"));
    let parent = parent.or_else(|| found.v1_dir("pids").map(|d| (d, "v1")));
    if let Some((parent, version)) = parent {
        p.cgroup(parent, dir_name, "pids.max", &max.to_string())?;
        p.say(format!("processes {max} (cgroup {version} pids.max)"));
        return Ok(());
    }
    p.rlimits.push((libc::RLIMIT_NPROC, max.into()));
    let mut phrase = format!("processes {max} (rlimit RLIMIT_NPROC, counted per user");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let _ = write!(phrase, "; NOT binding: the app runs as root");
    }
    phrase.push(')');
    p.say(phrase);
    Ok(())
}

/// The uid and gid of `user`, from the node's user database.
fn lookup_user(user: &str) -> Result<(libc::uid_t, libc::gid_t), IsolationError> {
    let missing = || IsolationError::NoSuchUser(user.to_string());
    let name = CString::new(user).map_err(|_| missing())?;
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; `buf` outlives it.
    let rc = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut entry,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() {
        return Err(missing());
    }
    Ok((entry.pw_uid, entry.pw_gid))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "9:name=systemd:/\n8:pids:/\n4:memory:/agent\n1:cpu:/\n0::/\n";

    fn mount_with(dirs: &[&str]) -> tempfile::TempDir {
        let root = tempfile::tempdir().expect("temp");
        for d in dirs {
            std::fs::create_dir_all(root.path().join(d)).expect("mkdir");
        }
        root
    }

    #[test]
    fn a_hybrid_node_offers_its_v1_hierarchies_and_no_unified_controller() {
        let root = mount_with(&["memory/agent", "pids", "cpu", "unified"]);
        std::fs::write(root.path().join("unified/cgroup.subtree_control"), "").expect("w");
        let found = Hierarchies::from_proc(root.path(), HYBRID);
        assert_eq!(found.v2, None);
        let names: Vec<_> = found.v1.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["pids", "memory", "cpu"]);
        assert_eq!(
            found.v1_dir("memory"),
            Some(root.path().join("memory/agent").as_path())
        );
    }

    #[test]
    fn a_unified_node_offers_the_controllers_its_subtree_enables() {
        let root = mount_with(&["agent"]);
        std::fs::write(
            root.path().join("agent/cgroup.subtree_control"),
            "memory pids\n",
        )
        .expect("w");
        let found = Hierarchies::from_proc(root.path(), "0::/agent\n");
        assert!(found.v2_has("memory").is_some() && found.v2_has("pids").is_some());
        assert!(found.v2_has("cpu").is_none());
    }

    #[test]
    fn limits_go_to_the_best_place_and_the_rest_is_said_not_applied() {
        let root = mount_with(&["agent"]);
        std::fs::write(root.path().join("agent/cgroup.subtree_control"), "memory\n").expect("w");
        let found = Hierarchies::from_proc(root.path(), "0::/agent\n");
        let limits = AppLimits {
            memory_bytes_max: Some(256 << 20),
            cpu_percent_max: Some(50),
            open_files_max: Some(64),
            ..AppLimits::default()
        };
        let p = prepare(&limits, "r-1", &found).expect("prepared");
        let dir = root.path().join("agent/fleetweft-r-1");
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.max")).expect("r"),
            "268435456"
        );
        let text = p.applied.to_string();
        assert!(
            text.contains("memory 256 MiB (cgroup v2 memory.max)"),
            "{text}"
        );
        assert!(text.contains("cpu 50% NOT applied"), "{text}");
        assert!(
            text.contains("open files 64 (rlimit RLIMIT_NOFILE)"),
            "{text}"
        );
        assert_eq!(p.cgroups, vec![dir]);
    }

    #[test]
    fn without_cgroups_memory_is_an_address_space_rlimit_and_says_so() {
        let found = Hierarchies::default();
        let limits = AppLimits {
            memory_bytes_max: Some(64 << 20),
            ..AppLimits::default()
        };
        let p = prepare(&limits, "r-2", &found).expect("prepared");
        assert_eq!(p.rlimits, vec![(libc::RLIMIT_AS, 64 << 20)]);
        assert!(p.applied.to_string().contains("address space only"));
        assert!(p.cgroups.is_empty());
    }

    #[test]
    fn an_unknown_user_is_refused_by_name() {
        let limits = AppLimits {
            user: Some("no-such-user-fw".into()),
            ..AppLimits::default()
        };
        let err = prepare(&limits, "r-3", &Hierarchies::default()).expect_err("refused");
        assert!(err.to_string().contains("no-such-user-fw"), "{err}");
    }
}
