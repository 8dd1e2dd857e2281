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

/// One observation of a node's public route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RouteObservation {
    /// What the functional probe concluded.
    pub verdict: ProbeVerdict,
    /// The `X-Fleetweft-Release` identity the route answered with, if any.
    pub identity: Option<Digest>,
    /// Whether the supervised process looked alive. Recorded for operators;
    /// the rules never settle anything on it (S11).
    pub process_healthy: bool,
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
        }
    }
}

impl fmt::Display for RouteObservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = match self.verdict {
            ProbeVerdict::Pass => "pass",
            ProbeVerdict::WrongAnswer => "wrong answer",
            ProbeVerdict::Unreachable => "unreachable",
        };
        match self.identity {
            Some(id) => write!(f, "{verdict} from {id}"),
            None => write!(f, "{verdict}, no identity"),
        }
    }
}
