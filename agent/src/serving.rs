//! What the process behind the route was really started with (issue #24
//! item 1): the configuration fingerprint read back from the environment
//! of the process that listens on the instance's port, found through the
//! kernel's socket tables, not remembered from the start. A person who
//! stops the app and starts it again by hand on that port, with another
//! configuration's environment, is seen.

use model::Digest;

/// The variable the agent hands every instance of a deployment.
pub const FINGERPRINT_VAR: &str = "FLEETWEFT_CONFIG_FINGERPRINT";
/// Longest `/proc/<pid>/environ` read: the kernel's own bound on the
/// arguments and environment of one exec is far smaller on any node the
/// agent runs on.
const ENVIRON_BYTES_MAX: u64 = 4 * 1024 * 1024;

/// The fingerprint the process listening on `port` was started with:
/// read from its `/proc/<pid>/environ` ([`FINGERPRINT_VAR`]). The
/// listener's owner is found from the socket tables (netlink, else
/// `/proc/net/tcp{,6}`) and every process's descriptors; when that finds
/// no one (not Linux, `/proc` hidden), `fallback` (the supervisor's child)
/// is read instead. `None` when the variable is absent, unparsable or the
/// environment unreadable. Blocking: reads `/proc`.
pub fn serving_fingerprint(port: u16, fallback: Option<u32>) -> Option<Digest> {
    let pid = listening_pid(port).or(fallback)?;
    let value = environ_var(pid, FINGERPRINT_VAR)?;
    crate::probe::parse_digest(&value)
}

/// The lowest process id holding a TCP socket that listens on `port`
/// (several hold it when an app forks its workers after binding; they
/// share the environment they were started with).
pub fn listening_pid(port: u16) -> Option<u32> {
    let sockets: Vec<String> = match crate::listeners::listening_inodes(port) {
        Some(inodes) if !inodes.is_empty() => inodes
            .iter()
            .map(|inode| format!("socket:[{inode}]"))
            .collect(),
        _ => crate::supervisor::listening_in_proc_tables(port)?,
    };
    if sockets.is_empty() {
        return None;
    }
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .collect();
    pids.sort_unstable();
    pids.into_iter().find(|pid| holds_any(*pid, &sockets))
}

/// Whether process `pid` has one of `sockets` (`socket:[inode]`) open.
fn holds_any(pid: u32, sockets: &[String]) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|target| sockets.iter().any(|s| target.as_os_str() == s.as_str()))
    })
}

/// The value of `name` in the environment process `pid` was started with.
pub fn environ_var(pid: u32, name: &str) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(format!("/proc/{pid}/environ")).ok()?;
    let mut bytes = Vec::new();
    file.take(ENVIRON_BYTES_MAX).read_to_end(&mut bytes).ok()?;
    value_in(&bytes, name)
}

/// The value of `name` in an environment block (`NAME=value` entries,
/// each ended by a NUL); the first entry wins, as `getenv` does.
fn value_in(environ: &[u8], name: &str) -> Option<String> {
    environ.split(|b| *b == 0).find_map(|entry| {
        let rest = entry.strip_prefix(name.as_bytes())?.strip_prefix(b"=")?;
        String::from_utf8(rest.to_vec()).ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variable_is_found_by_its_whole_name() {
        let env = b"FLEETWEFT_CONFIG_FINGERPRINT_X=1\0FLEETWEFT_CONFIG_FINGERPRINT=ab\0B=2\0";
        assert_eq!(value_in(env, FINGERPRINT_VAR).as_deref(), Some("ab"));
        assert_eq!(value_in(env, "B").as_deref(), Some("2"));
        assert_eq!(value_in(env, "C"), None);
        assert_eq!(value_in(b"", "C"), None);
    }

    /// The process listening on a port is found whoever started it, and
    /// its own environment is what is read: a process started by hand
    /// with another fingerprint is seen as such.
    #[test]
    fn the_listener_is_found_and_its_environment_read() {
        let fp = Digest::repeat(3);
        let script = "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\nprint(s.getsockname()[1],flush=True)\ntime.sleep(30)\n";
        let mut child = std::process::Command::new("python3")
            .args(["-c", script])
            .env(FINGERPRINT_VAR, fp.to_hex())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).expect("port");
        let port: u16 = line.trim().parse().expect("a port");
        assert_eq!(listening_pid(port), Some(child.id()));
        // The fallback is not consulted when the listener is found.
        assert_eq!(
            serving_fingerprint(port, Some(std::process::id())),
            Some(fp)
        );
        let _ = child.kill();
        let _ = child.wait();
        // Nobody listens: the fallback's environment is read (this test
        // process has no fingerprint).
        assert_eq!(listening_pid(port), None);
        assert_eq!(serving_fingerprint(port, Some(std::process::id())), None);
    }
}
