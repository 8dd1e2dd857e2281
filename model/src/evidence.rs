//! What a probe of a node's public route observed. This is the only kind of
//! evidence the rules accept: a running process is not evidence, a 200 from the
//! wrong release is not evidence.

use crate::ids::Digest;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The functional verdict of one probe against the probe spec of the bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ProbeVerdict {
    /// Expected status and expected body.
    Pass,
    /// The service answered, but not what the probe spec expects (wrong body
    /// or wrong status) — possibly while the process looks perfectly healthy.
    WrongAnswer,
    /// No answer: connection refused, timeout, or a 5xx from the proxy.
    Unreachable,
}

/// The agent supervisor's restart bound for one app instance: once it has
/// restarted the process this often within its window, the next exit leaves
/// the process down. A proof calls a recorded restart count above it a restart
/// loop. The rules never read it (S11: they never settle anything on process
/// health).
pub const PROCESS_RESTARTS_MAX: u32 = 3;

/// One observation of a node's public route, with what the observer could see
/// of the app process behind it.
///
/// The process fields are recorded for operators and shown in proofs; the
/// rules never settle anything on them (S11). `None` means "not observed",
/// which is different from 0: the controller's own probe of a public route
/// and an operator's typed observation cannot see the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RouteObservation {
    /// What the functional probe concluded.
    pub verdict: ProbeVerdict,
    /// The `X-Fleetweft-Release` identity the route answered with, if any.
    pub identity: Option<Digest>,
    /// Whether the supervised process looked alive. Recorded for operators;
    /// the rules never settle anything on it (S11).
    pub process_healthy: bool,
    /// How long the app process behind the route had been running when the
    /// route was observed, in milliseconds; `Some(0)` when it was not
    /// running, `None` when the observer could not see the process.
    pub process_uptime_ms: Option<u64>,
    /// How often the agent's supervisor had restarted the release's process
    /// since the agent first started it; `None` when not observed.
    pub process_restarts: Option<u32>,
    /// What the observer read back of the artifact behind the route (the
    /// agent re-hashes the installed bundle file and compares the app file
    /// that runs with the app inside it when it probes). `None`:
    /// not observed (the controller's probe, an operator), so a proof falls
    /// back to what the agent's report claims it put in place. Recorded,
    /// never judged on by the rules.
    pub artifact: Option<ArtifactRead>,
}

/// An artifact read back from disk behind a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ArtifactRead {
    /// The SHA-256 of what is on disk (the release identity it really is).
    Digest(Digest),
    /// The observer tried and could not read it (missing, unreadable).
    Unreadable,
    /// The installed bundle hashes to this digest, but the app file that is
    /// started from it differs from the app inside the bundle: read, and
    /// something else would run. Appended last so older encodings decode.
    AppFileAltered(Digest),
    /// The installed bundle hashes to `installed`, but the app file that is
    /// started from it is, byte for byte, the signed app of another release
    /// the observer holds, `release` (for a tree release: the whole tree is
    /// that release's tree): read, and what would run is that release (an
    /// older release swapped in behind the route, issue #24 item 1).
    /// Appended last so older encodings decode.
    AppFileOf {
        /// What the installed bundle hashes to (the release behind the
        /// route).
        installed: Digest,
        /// The release whose signed app the app file is.
        release: Digest,
    },
}

impl ArtifactRead {
    /// The release this read shows would run, when it is not `expected`:
    /// another bundle's digest, or the release whose app the app file is.
    /// `None` for a read of `expected` itself, an altered app file that is
    /// no release's, or nothing read.
    pub fn other_release(self, expected: Digest) -> Option<Digest> {
        match self {
            ArtifactRead::Digest(d) if d != expected => Some(d),
            ArtifactRead::AppFileOf { release, .. } if release != expected => Some(release),
            _ => None,
        }
    }
}

impl RouteObservation {
    /// True when this observation proves that `release` is what users get:
    /// the functional probe passed *and* the route identified as `release`.
    pub fn proves_serving(&self, release: Digest) -> bool {
        self.verdict == ProbeVerdict::Pass && self.identity == Some(release)
    }

    /// A passing observation of `release`, for tests and models.
    pub fn passing(release: Digest) -> Self {
        RouteObservation {
            verdict: ProbeVerdict::Pass,
            identity: Some(release),
            process_healthy: true,
            process_uptime_ms: None,
            process_restarts: None,
            artifact: None,
        }
    }

    /// An observation without process evidence (uptime and restarts not
    /// observed): what an observer that cannot see the process (the
    /// controller's own probe, an operator) records.
    pub fn new(verdict: ProbeVerdict, identity: Option<Digest>, process_healthy: bool) -> Self {
        RouteObservation {
            verdict,
            identity,
            process_healthy,
            process_uptime_ms: None,
            process_restarts: None,
            artifact: None,
        }
    }
}

impl fmt::Display for RouteObservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = crate::words::verdict(self.verdict);
        match self.identity {
            Some(id) => write!(f, "{verdict} from {id}"),
            None => write!(f, "{verdict}, no identity"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_release_names_only_another_release_read_back() {
        let (v1, v2) = (Digest::repeat(1), Digest::repeat(2));
        let app_of_v1 = ArtifactRead::AppFileOf {
            installed: v2,
            release: v1,
        };
        assert_eq!(app_of_v1.other_release(v2), Some(v1));
        assert_eq!(ArtifactRead::Digest(v1).other_release(v2), Some(v1));
        assert_eq!(ArtifactRead::Digest(v2).other_release(v2), None);
        assert_eq!(ArtifactRead::AppFileAltered(v2).other_release(v2), None);
        assert_eq!(ArtifactRead::Unreadable.other_release(v2), None);
        assert_eq!(app_of_v1.other_release(v1), None);
    }
}
