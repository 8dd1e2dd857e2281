//! A process's CPU time and memory, read from `/proc/PID/stat` and
//! `/proc/PID/status` (Linux).

use std::path::PathBuf;

/// Why a process could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    /// The file could not be read (the process is gone?).
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file does not have the expected shape.
    #[error("{path}: {what}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What was missing.
        what: String,
    },
}

/// One reading of a process.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct ProcSample {
    /// User plus system CPU time, in seconds.
    pub cpu_s: f64,
    /// Resident set now, in KiB (`VmRSS`).
    pub rss_kib: u64,
    /// Peak resident set, in KiB (`VmHWM`).
    pub peak_rss_kib: u64,
}

/// Read process `pid` now.
pub fn sample(pid: u32) -> Result<ProcSample, ProcError> {
    let stat_path = PathBuf::from(format!("/proc/{pid}/stat"));
    let stat = read(&stat_path)?;
    let status_path = PathBuf::from(format!("/proc/{pid}/status"));
    let status = read(&status_path)?;
    let ticks = cpu_ticks(&stat).ok_or_else(|| ProcError::Malformed {
        path: stat_path,
        what: "no utime/stime fields".into(),
    })?;
    let field = |name: &str| {
        status_kib(&status, name).ok_or_else(|| ProcError::Malformed {
            path: status_path.clone(),
            what: format!("no {name} line"),
        })
    };
    Ok(ProcSample {
        cpu_s: ticks as f64 / clock_ticks_per_s(),
        rss_kib: field("VmRSS")?,
        peak_rss_kib: field("VmHWM")?,
    })
}

fn read(path: &PathBuf) -> Result<String, ProcError> {
    std::fs::read_to_string(path).map_err(|source| ProcError::Read {
        path: path.clone(),
        source,
    })
}

/// utime + stime (fields 14 and 15) of a `/proc/PID/stat` line. The
/// command name (field 2) may hold spaces and parentheses, so fields are
/// counted from the last `)`.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ")" comes field 3 (state): utime is field 14, index 11.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// A `Name:   1234 kB` line of `/proc/PID/status`, in KiB.
pub fn status_kib(status: &str, name: &str) -> Option<u64> {
    let line = status
        .lines()
        .find(|l| l.strip_prefix(name).is_some_and(|r| r.starts_with(':')))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_and_status() {
        let stat = "42 (a (weird) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0";
        assert_eq!(cpu_ticks(stat), Some(300));
        assert_eq!(cpu_ticks("42 (x) S 1"), None);
        let status = "Name:\tfleetweft\nVmHWM:\t  20480 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(status_kib(status, "VmHWM"), Some(20480));
        assert_eq!(status_kib(status, "VmRSS"), Some(10240));
        assert_eq!(status_kib(status, "VmSwap"), None);
        let me = sample(std::process::id()).expect("own process");
        assert!(me.rss_kib > 0 && me.peak_rss_kib >= me.rss_kib);
    }
}
