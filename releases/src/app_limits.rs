//! What a release may use on a node and who it runs as (issue #24 item 4):
//! memory, CPU, open files, processes and a user, declared by the signer
//! inside the signed manifest (format 4), so a node applies exactly what
//! was signed and nobody can loosen it on the way.
//!
//! The node applies what its kernel lets it (cgroup v2, cgroup v1 or
//! rlimits only) and says which in the proof: a signature is not a
//! sandbox, and a limit the node could not apply is reported as not
//! applied, never as applied.

use serde::{Deserialize, Serialize};

use crate::error::ReleaseError;
use crate::limits::{GIB, MIB};

/// Smallest memory limit a release may declare, in bytes: below it no
/// interpreter starts, and a limit that kills every start is a typo.
pub const MEMORY_BYTES_MIN: u64 = 8 * MIB;
/// Largest memory limit a release may declare, in bytes.
pub const MEMORY_BYTES_MAX: u64 = 1024 * GIB;
/// Largest CPU quota, in percent of one core (100 = one core).
pub const CPU_PERCENT_MAX: u32 = 100 * 1024;
/// Smallest open-files limit: stdin, stdout, stderr and a listener, with
/// room for the runtime's own.
pub const OPEN_FILES_MIN: u32 = 16;
/// Largest open-files limit.
pub const OPEN_FILES_MAX: u32 = 1 << 20;
/// Largest processes (tasks) limit.
pub const PROCESSES_MAX: u32 = 1 << 16;
/// Longest user name, in bytes (`LOGIN_NAME_MAX` - 1 on Linux is 255;
/// useradd's default is 32).
pub const USER_BYTES_MAX: usize = 32;

/// The limits a release declares. `None`: not limited by the release (the
/// node's own defaults apply).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppLimits {
    /// Most resident memory the app's processes may use together, in
    /// bytes; over it the kernel stops the app (a failed probe follows).
    pub memory_bytes_max: Option<u64>,
    /// CPU quota in percent of one core (150 = one and a half cores).
    pub cpu_percent_max: Option<u32>,
    /// Most open file descriptors per process.
    pub open_files_max: Option<u32>,
    /// Most processes and threads the app may run together.
    pub processes_max: Option<u32>,
    /// The user the app runs as (a name on the node); `None`: the agent's.
    pub user: Option<String>,
}

impl AppLimits {
    /// Whether the release declares nothing (written as format 2 or 3,
    /// byte for byte as before limits existed).
    pub fn is_empty(&self) -> bool {
        *self == AppLimits::default()
    }

    /// Checks each declared value against its bounds; the error names the
    /// field, the value and the bound.
    pub fn validate(&self) -> Result<(), ReleaseError> {
        if let Some(bytes) = self.memory_bytes_max {
            in_range(
                "memory_bytes_max",
                bytes,
                MEMORY_BYTES_MIN,
                MEMORY_BYTES_MAX,
            )?;
        }
        if let Some(percent) = self.cpu_percent_max {
            in_range("cpu_percent_max", percent.into(), 1, CPU_PERCENT_MAX.into())?;
        }
        if let Some(files) = self.open_files_max {
            in_range(
                "open_files_max",
                files.into(),
                OPEN_FILES_MIN.into(),
                OPEN_FILES_MAX.into(),
            )?;
        }
        if let Some(processes) = self.processes_max {
            in_range("processes_max", processes.into(), 1, PROCESSES_MAX.into())?;
        }
        if let Some(user) = &self.user {
            check_user(user)?;
        }
        Ok(())
    }
}

fn in_range(field: &'static str, value: u64, min: u64, max: u64) -> Result<(), ReleaseError> {
    if value < min || value > max {
        return Err(ReleaseError::BadAppLimit {
            field,
            problem: format!("{value} is outside {min} to {max}"),
        });
    }
    Ok(())
}

/// A portable user name (POSIX's portable filename characters, not
/// starting with `-`, at most [`USER_BYTES_MAX`] bytes): what `useradd`
/// accepts by default, and nothing a shell or a unit file would read as
/// more than a name.
fn check_user(user: &str) -> Result<(), ReleaseError> {
    let bad = |problem: String| ReleaseError::BadAppLimit {
        field: "user",
        problem,
    };
    if user.is_empty() || user.len() > USER_BYTES_MAX {
        return Err(bad(format!("{user:?} must be 1 to {USER_BYTES_MAX} bytes")));
    }
    if user.starts_with('-') {
        return Err(bad(format!("{user:?} starts with '-'")));
    }
    let portable = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if let Some(c) = user.chars().find(|&c| !portable(c)) {
        return Err(bad(format!(
            "{user:?} has {c:?} (letters, digits, '_', '-' and '.' only)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bound_is_checked_at_and_past_its_value() {
        let ok = |l: AppLimits| l.validate().is_ok();
        let mem = |b| AppLimits {
            memory_bytes_max: Some(b),
            ..AppLimits::default()
        };
        assert!(ok(mem(MEMORY_BYTES_MIN)) && ok(mem(MEMORY_BYTES_MAX)));
        assert!(!ok(mem(MEMORY_BYTES_MIN - 1)) && !ok(mem(MEMORY_BYTES_MAX + 1)));
        let cpu = |p| AppLimits {
            cpu_percent_max: Some(p),
            ..AppLimits::default()
        };
        assert!(ok(cpu(1)) && ok(cpu(CPU_PERCENT_MAX)));
        assert!(!ok(cpu(0)) && !ok(cpu(CPU_PERCENT_MAX + 1)));
        let files = |n| AppLimits {
            open_files_max: Some(n),
            ..AppLimits::default()
        };
        assert!(ok(files(OPEN_FILES_MIN)) && !ok(files(OPEN_FILES_MIN - 1)));
        assert!(!ok(files(OPEN_FILES_MAX + 1)));
        let procs = |n| AppLimits {
            processes_max: Some(n),
            ..AppLimits::default()
        };
        assert!(ok(procs(1)) && !ok(procs(0)) && !ok(procs(PROCESSES_MAX + 1)));
    }

    #[test]
    fn a_user_is_a_portable_name() {
        let user = |u: &str| AppLimits {
            user: Some(u.into()),
            ..AppLimits::default()
        };
        assert!(user("app").validate().is_ok());
        assert!(user("svc_web-1.x").validate().is_ok());
        for bad in [
            "",
            "-rf",
            "a b",
            "root;id",
            "a/b",
            &"u".repeat(USER_BYTES_MAX + 1),
        ] {
            let err = user(bad).validate().expect_err(bad);
            assert!(err.to_string().contains("user"), "{err}");
        }
    }

    #[test]
    fn nothing_declared_is_empty() {
        assert!(AppLimits::default().is_empty());
        let one = AppLimits {
            processes_max: Some(4),
            ..AppLimits::default()
        };
        assert!(!one.is_empty());
    }
}
