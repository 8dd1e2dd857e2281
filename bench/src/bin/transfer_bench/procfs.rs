//! Resident memory of a process, read from `/proc/PID/status`, and its
//! peak reset through `/proc/PID/clear_refs` (Linux 4.0 and later; our own
//! children and this process only).

use anyhow::{bail, Context};

/// One mebibyte, in KiB (what `/proc` counts in).
const KIB_PER_MIB: f64 = 1024.0;

/// A field of `/proc/PID/status` counted in kB (`VmRSS`, `VmHWM`), in MiB.
pub fn status_mib(pid: u32, field: &str) -> anyhow::Result<f64> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(field).and_then(|r| r.strip_prefix(':')) else {
            continue;
        };
        let kib: u64 = rest
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .with_context(|| format!("{path}: {field} is {rest:?}"))?;
        return Ok(kib as f64 / KIB_PER_MIB);
    }
    bail!("{path} has no {field}")
}

/// Resident now, in MiB.
pub fn rss_mib(pid: u32) -> anyhow::Result<f64> {
    status_mib(pid, "VmRSS")
}

/// Peak resident since the start or the last [`reset_peak`], in MiB.
pub fn peak_mib(pid: u32) -> anyhow::Result<f64> {
    status_mib(pid, "VmHWM")
}

/// Resets the peak to what is resident now, so the next [`peak_mib`]
/// covers one phase only.
pub fn reset_peak(pid: u32) -> anyhow::Result<()> {
    let path = format!("/proc/{pid}/clear_refs");
    std::fs::write(&path, "5").with_context(|| format!("writing {path}"))
}

/// Bytes of the regular files directly in `dir` whose names do not start
/// with `.` (a chunk store's complete chunks, not its temporary files).
/// 0 when `dir` does not exist yet.
pub fn dir_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}
