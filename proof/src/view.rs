//! The evidence a proof judges, wherever it came from: read back now
//! ([`Fresh`]), recorded of the node (`NodeObserved`), or recorded with the
//! op. One [`View`] shape so the checks are written once.

use super::{judge_route, EvidenceCheck, ReasonCode, RouteJudgement};
use model::controller::{EvidenceSource, NodeObservation, ObservationSource, Op};
use model::{ArtifactRead, Digest, ProbeVerdict, ReportKind, RouteObservation};
use serde::{Deserialize, Serialize};

/// Where an evidence item's observation came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// The agent answered a readback: it re-hashed what is on disk behind
    /// the route and read the process's uptime and restart count.
    AgentReadBack,
    /// The controller probed the node's public route itself.
    ControllerProbe,
    /// An agent's report about an op, recorded in the log.
    AgentReport,
    /// An operator recorded what they saw.
    Operator,
}

impl Origin {
    /// The operator's words for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::AgentReadBack => "agent readback",
            Origin::ControllerProbe => "controller probe",
            Origin::AgentReport => "agent report",
            Origin::Operator => "operator",
        }
    }
}

/// Whether a proof read its evidence back now or took what was recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProofMode {
    /// Judged on evidence read back when the proof was asked for.
    Live,
    /// Judged on recorded evidence (`--cached`): a memory, not a readback.
    Recorded,
}

/// Evidence read back when a proof is asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fresh {
    /// The controller's probe of the node's public route, judged by the
    /// probe spec of the release the node should serve.
    pub route: RouteObservation,
    /// When the controller probed, in ms since the Unix epoch.
    pub route_at_ms: u64,
    /// The agent's readback and when it arrived (ms since the Unix epoch),
    /// or why there is none (in the operator's words).
    pub agent: Result<(RouteObservation, u64), String>,
    /// The limits the agent says it applied to the instance serving the
    /// route (issue #24 item 4), in its words; `None` when the agent
    /// answered without any (the release declares none) or did not answer.
    pub isolation: Option<String>,
    /// The release the agent's readback found running in place of the one
    /// the route was judged as, as the controller knows it (issue #24 item
    /// 1); `None` when the readback names no other release, or names one
    /// the controller does not hold.
    pub older: Option<KnownRelease>,
    /// The configuration fingerprint the process serving the route was
    /// started with, as the agent read it from that process's environment
    /// (issue #24 item 1): `None` when the route serves no configured
    /// deployment (or the agent did not answer), `Some(None)` when the
    /// process has none or it could not be read.
    pub configuration: Option<Option<Digest>>,
}

/// A release the agent's readback names as what really runs behind the
/// route ([`ArtifactRead::other_release`]: another bundle, or an app file
/// that is another release's signed app), as the controller knows it from
/// its store. Gathered by the controller, judged here: the proof calls the
/// node `stale` only when this release is one the node had before and its
/// answer passes this release's own probe spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownRelease {
    /// The release the readback names.
    pub release: Digest,
    /// Its version, as its signed manifest says.
    pub version: String,
    /// The route's answer judged by this release's own probe spec (the
    /// answer the controller's probe got, asked again when that spec probes
    /// another path).
    pub answer: ProbeVerdict,
}

/// The one observation a readback amounts to, and who made it: what
/// `NodeObserved` records. The route (answer, identity) is the
/// controller's own probe — what users get; the artifact and the process
/// are the agent's readback. Without a readback they are not observed:
/// an older value is never carried over.
pub fn merge_readback(fresh: &Fresh) -> (RouteObservation, ObservationSource) {
    let route = fresh.route;
    match &fresh.agent {
        Ok((agent, _)) => (
            RouteObservation {
                process_healthy: agent.process_healthy,
                process_uptime_ms: agent.process_uptime_ms,
                process_restarts: agent.process_restarts,
                artifact: agent.artifact,
                ..route
            },
            ObservationSource::ReadBack,
        ),
        Err(_) => (
            RouteObservation {
                process_uptime_ms: None,
                process_restarts: None,
                artifact: None,
                ..route
            },
            ObservationSource::ControllerProbe,
        ),
    }
}

/// What is known of the artifact behind the route.
#[derive(Clone, Debug)]
pub(crate) enum ArtifactSeen {
    /// Read back from disk.
    Read(ArtifactRead),
    /// Not read back; the agent's report claims it put this in place.
    Claim(Option<Digest>),
    /// Not read: why (a "could not read" reason) and, where there is more
    /// to say, in words.
    NotRead(ReasonCode, Option<String>),
}

/// What is known of the configuration the serving process runs with.
#[derive(Clone, Copy, Debug)]
enum ConfigSeen {
    /// A recorded proof: the log keeps no configuration readback, so it
    /// has no `configuration` row (the route identity, a deployment's
    /// digest, covers what the agent installed).
    NotLive,
    /// A live proof whose readback the agent did not answer.
    Unavailable,
    /// Read back now ([`Fresh::configuration`]).
    Read(Option<Option<Digest>>),
}

/// The evidence a proof judges.
#[derive(Clone, Debug)]
pub(crate) struct View {
    /// The observation judged: route answer and identity, process looks.
    pub obs: RouteObservation,
    artifact: ArtifactSeen,
    /// The observation the uptime and restart count come from, and whether
    /// it is an earlier one than `obs`.
    numbers: Option<RouteObservation>,
    earlier: bool,
    /// Where and when the route was observed.
    route: (super::Origin, Option<u64>),
    /// Where and when the artifact and the process were observed.
    agent: (super::Origin, Option<u64>),
    /// What a live readback said of the limits applied to the process;
    /// `None` when it said none (no limits declared) or nothing was read
    /// back (a recorded proof, no answer).
    isolation: Option<String>,
    /// What the controller knows of the release a live readback found
    /// running instead ([`Fresh::older`]); `None` in a recorded proof,
    /// which has no answer judged by that release's probe spec.
    pub older: Option<KnownRelease>,
    /// The configuration the serving process runs with.
    configuration: ConfigSeen,
}

impl View {
    /// Evidence read back now.
    pub fn live(fresh: &Fresh) -> View {
        let (obs, _) = merge_readback(fresh);
        let route = (Origin::ControllerProbe, Some(fresh.route_at_ms));
        match &fresh.agent {
            Ok((agent, at_ms)) => View {
                obs,
                artifact: agent.artifact.map_or_else(
                    || {
                        ArtifactSeen::NotRead(
                            ReasonCode::DigestUnreadable,
                            Some("nothing installed behind the route".into()),
                        )
                    },
                    ArtifactSeen::Read,
                ),
                numbers: has_numbers(agent).then_some(*agent),
                earlier: false,
                route,
                agent: (Origin::AgentReadBack, Some(*at_ms)),
                isolation: fresh.isolation.clone(),
                older: fresh.older.clone(),
                configuration: ConfigSeen::Read(fresh.configuration),
            },
            Err(why) => View {
                obs,
                artifact: ArtifactSeen::NotRead(
                    ReasonCode::ReadbackUnavailable,
                    Some(format!("could not read: {why}")),
                ),
                numbers: None,
                earlier: false,
                route,
                agent: (Origin::AgentReadBack, Some(fresh.route_at_ms)),
                isolation: None,
                older: None,
                configuration: ConfigSeen::Unavailable,
            },
        }
    }

    /// The node's recorded observation.
    pub fn observed(seen: &NodeObservation) -> View {
        let origin = Origin::of_observation(seen.source);
        let o = seen.observation;
        let artifact = match (o.artifact, seen.source) {
            (Some(read), _) => ArtifactSeen::Read(read),
            (None, ObservationSource::ControllerProbe) => ArtifactSeen::NotRead(
                ReasonCode::ReadbackUnavailable,
                Some("the agent did not answer the readback".into()),
            ),
            (None, _) => ArtifactSeen::NotRead(ReasonCode::DigestUnreadable, None),
        };
        View {
            obs: o,
            artifact,
            numbers: has_numbers(&o).then_some(o),
            earlier: false,
            route: (origin, Some(seen.at_ms)),
            agent: (origin, Some(seen.at_ms)),
            isolation: None,
            older: None,
            configuration: ConfigSeen::NotLive,
        }
    }

    /// The evidence recorded with `op` (latest last); `None` without any.
    pub fn of_op(op: &Op) -> Option<View> {
        let last = op.evidence.last()?;
        let obs = last.observation;
        let latest_read = op
            .evidence
            .iter()
            .rev()
            .find_map(|e| e.observation.artifact);
        let claim = op.evidence.iter().rev().find_map(|e| match e.source {
            EvidenceSource::Agent(ReportKind::Switched) => Some(Some(op.release)),
            EvidenceSource::Agent(
                ReportKind::Restored | ReportKind::NotApplied | ReportKind::Refused(_),
            ) => Some(op.baseline),
            _ => None,
        });
        let artifact = match (latest_read, claim) {
            (Some(read), _) => ArtifactSeen::Read(read),
            (None, Some(claim)) => ArtifactSeen::Claim(claim),
            (None, None) => ArtifactSeen::NotRead(ReasonCode::DigestUnreadable, None),
        };
        let numbers = op
            .evidence
            .iter()
            .rev()
            .map(|e| e.observation)
            .find(has_numbers);
        let origin = Origin::of_evidence(last.source);
        Some(View {
            obs,
            artifact,
            numbers,
            earlier: numbers.is_some_and(|o| o != obs),
            route: (origin, None),
            agent: (origin, None),
            isolation: None,
            older: None,
            configuration: ConfigSeen::NotLive,
        })
    }

    /// What was read back from disk behind the route, if anything was
    /// (not a report's claim).
    pub fn read_back(&self) -> Option<ArtifactRead> {
        match self.artifact {
            ArtifactSeen::Read(read) => Some(read),
            ArtifactSeen::Claim(_) | ArtifactSeen::NotRead(..) => None,
        }
    }

    /// The evidence items, judged against `intended` and, when the intended
    /// rollout deploys a configuration, its `fingerprint`: the four of every
    /// proof, and `configuration` where there is something to say of it.
    pub fn checks(&self, intended: Digest, fingerprint: Option<Digest>) -> Vec<EvidenceCheck> {
        let mut checks = vec![
            self.artifact_check(intended),
            self.process_check(),
            self.health_check(intended),
            self.identity_check(intended),
        ];
        checks.extend(self.configuration_check(fingerprint));
        checks
    }

    /// The `configuration` row (issue #24 item 1): the fingerprint the
    /// intended deployment carries against the one the serving process was
    /// started with. Present when a configuration is intended or one was
    /// read back now; a recorded proof has none to judge.
    fn configuration_check(&self, expected: Option<Digest>) -> Option<EvidenceCheck> {
        use ReasonCode as R;
        let (observed, ok, reason) = match (self.configuration, expected) {
            (ConfigSeen::NotLive, _) | (ConfigSeen::Unavailable | ConfigSeen::Read(None), None) => {
                return None
            }
            (ConfigSeen::Unavailable, Some(_)) => (
                "not read back (the agent did not answer)".to_string(),
                None,
                Some(R::ReadbackUnavailable),
            ),
            (ConfigSeen::Read(None), Some(_)) => (
                "none: the route serves no configured deployment".to_string(),
                Some(false),
                Some(R::ConfigurationFingerprintMismatch),
            ),
            (ConfigSeen::Read(Some(None)), _) => (
                "none read from the serving process's environment".to_string(),
                None,
                Some(R::ConfigurationUnreadable),
            ),
            (ConfigSeen::Read(Some(Some(seen))), _) => {
                let ok = expected == Some(seen);
                (
                    seen.to_hex(),
                    Some(ok),
                    (!ok).then_some(R::ConfigurationFingerprintMismatch),
                )
            }
        };
        let expected = expected.map_or_else(|| "no configuration".to_string(), |d| d.to_hex());
        Some(self.agent_item("configuration", Some(expected), Some(observed), ok, reason))
    }

    fn artifact_check(&self, intended: Digest) -> EvidenceCheck {
        use ReasonCode as R;
        let (observed, ok, reason) = match &self.artifact {
            // The bundle is right but what would run from it is not: its own
            // code, never mistaken for "could not read".
            ArtifactSeen::Read(ArtifactRead::AppFileAltered(d)) => {
                (Some(d.to_hex()), Some(false), Some(R::AppFileMismatch))
            }
            // The app file is another release's signed app: named, with
            // its version where the controller knows it.
            ArtifactSeen::Read(ArtifactRead::AppFileOf { installed, release }) => {
                let version = self
                    .older
                    .as_ref()
                    .filter(|o| o.release == *release)
                    .map_or_else(String::new, |o| format!(" ({})", o.version));
                let observed = format!(
                    "{} with the app file of {}{version}",
                    installed.to_hex(),
                    release.to_hex()
                );
                (Some(observed), Some(false), Some(R::AppFileMismatch))
            }
            ArtifactSeen::Read(ArtifactRead::Digest(d)) | ArtifactSeen::Claim(Some(d)) => {
                // A claim is told apart by its origin (`agent-report`).
                let ok = *d == intended;
                (
                    Some(d.to_hex()),
                    Some(ok),
                    (!ok).then_some(R::DigestMismatch),
                )
            }
            ArtifactSeen::Read(ArtifactRead::Unreadable) => (None, None, Some(R::DigestUnreadable)),
            ArtifactSeen::Claim(None) => (None, None, Some(R::DigestUnreadable)),
            ArtifactSeen::NotRead(reason, why) => (why.clone(), None, Some(*reason)),
        };
        self.agent_item(
            "artifact digest",
            Some(intended.to_hex()),
            observed,
            ok,
            reason,
        )
    }

    fn process_check(&self) -> EvidenceCheck {
        let obs = self.obs;
        let answered = obs.verdict != ProbeVerdict::Unreachable;
        let looping = self
            .numbers
            .and_then(|o| o.process_restarts)
            .is_some_and(|n| n > model::evidence::PROCESS_RESTARTS_MAX);
        let unread = matches!(
            self.artifact,
            ArtifactSeen::NotRead(ReasonCode::ReadbackUnavailable, _)
        );
        let (ok, reason) = match (obs.process_healthy, answered, looping) {
            (_, _, true) | (false, false, _) => (Some(false), Some(ReasonCode::RestartLoop)),
            (true, _, false) => (Some(true), None),
            (false, true, false) => (Some(false), Some(ReasonCode::ProcessUnhealthy)),
        };
        // Without a readback the process itself was not observed: the
        // route's answer (judged by the health probe) says only that
        // something runs there.
        let (ok, reason, observed) = if unread {
            (
                None,
                Some(ReasonCode::ReadbackUnavailable),
                "not read back (the agent did not answer)".to_string(),
            )
        } else {
            let mut text = process_text(obs.process_healthy, self.numbers, self.earlier);
            // What confines the process, as the agent applied it: a
            // signature is not a sandbox (issue #24 item 4).
            if let Some(applied) = &self.isolation {
                text.push_str(&format!("; limits: {applied}"));
            }
            (ok, reason, text)
        };
        self.agent_item(
            "process",
            Some(format!(
                "running, at most {}",
                restarts_text(model::evidence::PROCESS_RESTARTS_MAX)
            )),
            Some(observed),
            ok,
            reason,
        )
    }

    fn health_check(&self, intended: Digest) -> EvidenceCheck {
        use ReasonCode as R;
        let (ok, reason) = match judge_route(&self.obs, intended) {
            RouteJudgement::Pass | RouteJudgement::WrongIdentity | RouteJudgement::NoIdentity => {
                (Some(true), None)
            }
            RouteJudgement::WrongAnswer => (Some(false), Some(R::ProbeWrongAnswer)),
            RouteJudgement::Non2xx => (Some(false), Some(R::ProbeNon2xx)),
            RouteJudgement::Unreachable => (None, Some(R::ProbeUnreachable)),
        };
        let word = model::words::verdict(self.obs.verdict);
        self.route_item(
            "health probe",
            Some(model::words::verdict(ProbeVerdict::Pass).into()),
            Some(word.into()),
            ok,
            reason,
        )
    }

    fn identity_check(&self, intended: Digest) -> EvidenceCheck {
        use ReasonCode as R;
        let answered = self.obs.verdict != ProbeVerdict::Unreachable;
        let (ok, reason) = match self.obs.identity {
            Some(d) if d == intended => (Some(true), None),
            Some(_) => (Some(false), Some(R::RouteIdentityMismatch)),
            None if !answered => (None, Some(R::ProbeUnreachable)),
            None => (None, Some(R::DigestUnreadable)),
        };
        let observed = self.obs.identity.map(|d| d.to_hex());
        self.route_item(
            "route identity",
            Some(intended.to_hex()),
            observed,
            ok,
            reason,
        )
    }

    fn agent_item(
        &self,
        item: &str,
        expected: Option<String>,
        observed: Option<String>,
        ok: Option<bool>,
        reason: Option<ReasonCode>,
    ) -> EvidenceCheck {
        item_at(self.agent, item, expected, observed, ok, reason)
    }

    fn route_item(
        &self,
        item: &str,
        expected: Option<String>,
        observed: Option<String>,
        ok: Option<bool>,
        reason: Option<ReasonCode>,
    ) -> EvidenceCheck {
        item_at(self.route, item, expected, observed, ok, reason)
    }
}

/// One check, observed by `origin` at `observed_at_ms`.
fn item_at(
    (origin, observed_at_ms): (Origin, Option<u64>),
    item: &str,
    expected: Option<String>,
    observed: Option<String>,
    ok: Option<bool>,
    reason: Option<ReasonCode>,
) -> EvidenceCheck {
    EvidenceCheck {
        item: item.into(),
        expected,
        observed,
        ok,
        reason,
        origin,
        observed_at_ms,
    }
}

fn has_numbers(o: &RouteObservation) -> bool {
    o.process_uptime_ms.is_some() || o.process_restarts.is_some()
}

/// What an observation says of the process, like `running, up 12 s, 0
/// restarts` or `running, uptime and restarts not observed`. `numbers` is the
/// observation the uptime and restart count come from; `earlier` says it is
/// not the one `running` comes from.
pub(crate) fn process_text(
    running: bool,
    numbers: Option<RouteObservation>,
    earlier: bool,
) -> String {
    let mut s = String::from(if running { "running" } else { "down" });
    let Some(n) = numbers else {
        s.push_str(", uptime and restarts not observed");
        return s;
    };
    // A stopped process has no uptime (it is recorded as 0).
    match n.process_uptime_ms {
        Some(ms) if n.process_healthy => s.push_str(&format!(", up {}", uptime_text(ms))),
        Some(_) => {}
        None => s.push_str(", uptime not observed"),
    }
    match n.process_restarts {
        Some(r) => s.push_str(&format!(", {}", restarts_text(r))),
        None => s.push_str(", restarts not observed"),
    }
    if earlier {
        s.push_str(" (uptime and restarts as of an earlier observation)");
    }
    s
}

fn restarts_text(n: u32) -> String {
    if n == 1 {
        "1 restart".into()
    } else {
        format!("{n} restarts")
    }
}

/// A duration in milliseconds in the two largest units that matter.
pub fn uptime_text(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms} ms"),
        1..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        3600..=86_399 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86_400, s % 86_400 / 3600),
    }
}
