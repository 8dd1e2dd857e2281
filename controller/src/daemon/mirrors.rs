//! `[artifacts]` in `controller.toml`: the plain-HTTP mirrors agents may
//! fetch release chunks from (issue #23 item 5), for every node and per
//! node label (a site):
//!
//! ```toml
//! [artifacts]
//! mirrors = ["http://cdn.example/fleet"]      # every node
//!
//! [[artifacts.site]]
//! labels = { site = "berlin" }                # nodes holding every pair
//! mirrors = ["http://berlin-cache:8080"]
//! ```
//!
//! A node's list is the mirrors of every `[[artifacts.site]]` its labels
//! match (file order), then the global ones, without repeats, at most
//! [`MIRRORS_MAX`]; it is computed when a grant is sent (labels change
//! at run time) and sent just before it ([`FrameBody::Mirrors`]). Mirrors
//! are transport, never trust: the agent checks every chunk against the
//! signed manifest and falls back to the next mirror, then to the
//! controller.
//!
//! [`FrameBody::Mirrors`]: protocol::frame::FrameBody::Mirrors

use model::controller::Labels;
use model::{NodeId, OpId};
use protocol::frame::{SourceTally, MIRRORS_MAX, MIRROR_URL_BYTES_MAX};
use serde::Deserialize;

/// Most `[[artifacts.site]]` entries.
pub const SITES_MAX: usize = 1_000;

/// The `[artifacts]` section.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactsSection {
    /// Mirrors for every node, tried after the node's site mirrors.
    #[serde(default)]
    pub mirrors: Vec<String>,
    /// Mirrors for the nodes whose labels hold every pair of `labels`.
    #[serde(default)]
    pub site: Vec<SiteMirrors>,
}

/// One `[[artifacts.site]]` entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteMirrors {
    /// The label pairs a node must hold (all of them; not empty).
    pub labels: Labels,
    /// Mirror base URLs, tried in order before the global ones.
    pub mirrors: Vec<String>,
}

impl ArtifactsSection {
    /// Names the first unusable key.
    pub fn validate(&self) -> Result<(), String> {
        check_list("artifacts.mirrors", &self.mirrors)?;
        if self.site.len() > SITES_MAX {
            return Err(format!(
                "key `artifacts.site`: {} entries exceed the limit of {SITES_MAX}",
                self.site.len()
            ));
        }
        for (i, site) in self.site.iter().enumerate() {
            if site.labels.is_empty() {
                return Err(format!(
                    "key `artifacts.site[{i}].labels`: empty (it would match every node: use `artifacts.mirrors`)"
                ));
            }
            model::controller::roster::validate_labels(&site.labels)
                .map_err(|e| format!("key `artifacts.site[{i}].labels`: {e}"))?;
            check_list(&format!("artifacts.site[{i}].mirrors"), &site.mirrors)?;
        }
        Ok(())
    }

    /// The mirrors of a node with `labels`: its sites' (file order), then
    /// the global ones, without repeats, at most [`MIRRORS_MAX`].
    pub fn mirrors_for(&self, labels: &Labels) -> Vec<String> {
        let sites = self
            .site
            .iter()
            .filter(|s| s.labels.iter().all(|(k, v)| labels.get(k) == Some(v)))
            .flat_map(|s| s.mirrors.iter());
        let mut out: Vec<String> = Vec::new();
        for url in sites.chain(self.mirrors.iter()) {
            if out.len() == MIRRORS_MAX {
                break;
            }
            if !out.contains(url) {
                out.push(url.clone());
            }
        }
        out
    }
}

/// Checks one list of mirror URLs at `key`.
fn check_list(key: &str, urls: &[String]) -> Result<(), String> {
    if urls.len() > MIRRORS_MAX {
        return Err(format!(
            "key `{key}`: {} mirrors exceed the limit of {MIRRORS_MAX}",
            urls.len()
        ));
    }
    for (i, url) in urls.iter().enumerate() {
        check_url(url).map_err(|why| format!("key `{key}[{i}]`: {url:?} {why}"))?;
    }
    Ok(())
}

/// Whether `url` can be a mirror base: `http://HOST[:PORT][/PATH]`, no
/// query or fragment (`/chunks/<sha256>` is appended to it).
pub fn check_url(url: &str) -> Result<(), String> {
    if url.len() > MIRROR_URL_BYTES_MAX {
        return Err(format!("is longer than {MIRROR_URL_BYTES_MAX} bytes"));
    }
    let uri: axum::http::Uri = url.parse().map_err(|e| format!("is not a URL: {e}"))?;
    if uri.scheme_str() != Some("http") || uri.authority().is_none() {
        return Err("must be http://HOST[:PORT][/PATH] (https is not supported: trust comes from the signed manifest, not the transport)".into());
    }
    if uri.query().is_some() || url.contains('#') {
        return Err("must not have a query or fragment (`/chunks/<sha256>` is appended)".into());
    }
    Ok(())
}

/// Most ops whose chunk sources are remembered; past it the oldest op's
/// are forgotten (memory only, telemetry, never evidence).
pub const SOURCES_REMEMBERED_MAX: usize = 10_000;

/// Where each op's chunks came from, as its agent reported it
/// ([`protocol::frame::FrameBody::FetchSources`]). In memory only: a
/// controller restart forgets it (the proof never depends on it).
#[derive(Debug, Default)]
pub struct SourcesBook {
    by_op: std::sync::Mutex<std::collections::BTreeMap<OpId, Reported>>,
}

/// One op's report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reported {
    /// The node that reported it (a report naming another node's op is
    /// not shown for that op).
    pub node: NodeId,
    /// The tallies, as sent.
    pub sources: Vec<SourceTally>,
}

impl SourcesBook {
    /// Records `node`'s report for `op`, replacing an older one (a retry
    /// stages again).
    pub fn record(&self, op: OpId, node: NodeId, sources: Vec<SourceTally>) {
        let mut book = self.lock();
        book.insert(op, Reported { node, sources });
        while book.len() > SOURCES_REMEMBERED_MAX {
            book.pop_first();
        }
    }

    /// What `node` reported for `op`, if anything.
    pub fn of(&self, op: OpId, node: NodeId) -> Vec<SourceTally> {
        self.lock()
            .get(&op)
            .filter(|r| r.node == node)
            .map(|r| r.sources.clone())
            .unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<OpId, Reported>> {
        // A poisoned lock only means a link task panicked mid-insert.
        self.by_op.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The node mirrors ([`ArtifactsSection`]) and what agents reported of
/// them ([`SourcesBook`]): shared by the agent links and the API.
#[derive(Debug, Default)]
pub struct Mirrors {
    /// `[artifacts]` as configured.
    pub config: ArtifactsSection,
    /// The agents' reports.
    pub sources: SourcesBook,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn section(text: &str) -> Result<ArtifactsSection, String> {
        let s: ArtifactsSection = toml::from_str(text).map_err(|e| e.to_string())?;
        s.validate().map(|()| s)
    }

    #[test]
    fn a_node_gets_its_sites_mirrors_then_the_global_ones() {
        let s = section(
            r#"
            mirrors = ["http://cdn/fleet", "http://berlin:8080"]
            [[site]]
            labels = { site = "berlin" }
            mirrors = ["http://berlin:8080"]
            [[site]]
            labels = { site = "berlin", rack = "r1" }
            mirrors = ["http://r1:81"]
            "#,
        )
        .expect("valid");
        assert_eq!(
            s.mirrors_for(&labels(&[("site", "berlin"), ("rack", "r1")])),
            vec!["http://berlin:8080", "http://r1:81", "http://cdn/fleet"]
        );
        assert_eq!(
            s.mirrors_for(&labels(&[("site", "berlin")])),
            vec!["http://berlin:8080", "http://cdn/fleet"]
        );
        assert_eq!(
            s.mirrors_for(&labels(&[("site", "paris")])),
            vec!["http://cdn/fleet", "http://berlin:8080"]
        );
        assert!(ArtifactsSection::default()
            .mirrors_for(&labels(&[]))
            .is_empty());
    }

    #[test]
    fn a_node_never_gets_more_than_the_bound() {
        let many: Vec<String> = (0..MIRRORS_MAX).map(|i| format!("http://m{i}")).collect();
        let s = ArtifactsSection {
            mirrors: many.clone(),
            site: vec![SiteMirrors {
                labels: labels(&[("site", "x")]),
                mirrors: vec!["http://site".into()],
            }],
        };
        s.validate().expect("valid");
        let got = s.mirrors_for(&labels(&[("site", "x")]));
        assert_eq!(got.len(), MIRRORS_MAX);
        assert_eq!(got[0], "http://site");
    }

    #[test]
    fn the_sources_book_is_per_op_and_node_and_bounded() {
        let book = SourcesBook::default();
        let tally = |n: u64| {
            vec![SourceTally {
                source: "controller".into(),
                chunks: n,
                bytes: n,
                failures: 0,
            }]
        };
        book.record(OpId(1), NodeId(0), tally(1));
        book.record(OpId(1), NodeId(0), tally(2));
        assert_eq!(book.of(OpId(1), NodeId(0)), tally(2));
        assert!(book.of(OpId(1), NodeId(1)).is_empty(), "another node's op");
        assert!(book.of(OpId(2), NodeId(0)).is_empty());
        for i in 0..SOURCES_REMEMBERED_MAX as u32 {
            book.record(OpId(100 + i), NodeId(0), tally(1));
        }
        assert!(
            book.of(OpId(1), NodeId(0)).is_empty(),
            "the oldest is forgotten"
        );
        assert_eq!(book.lock().len(), SOURCES_REMEMBERED_MAX);
    }

    #[test]
    fn unusable_mirrors_are_refused_naming_the_key() {
        for (text, key) in [
            (r#"mirrors = ["https://cdn"]"#, "artifacts.mirrors[0]"),
            (r#"mirrors = ["cdn:80"]"#, "artifacts.mirrors[0]"),
            (
                r#"mirrors = ["http://cdn/?token=1"]"#,
                "artifacts.mirrors[0]",
            ),
            (
                "[[site]]\nlabels = {}\nmirrors = [\"http://a\"]",
                "artifacts.site[0].labels",
            ),
            (
                "[[site]]\nlabels = { site = \"B\" }\nmirrors = [\"http://a\"]",
                "artifacts.site[0].labels",
            ),
            (
                "[[site]]\nlabels = { site = \"b\" }\nmirrors = [\"ftp://a\"]",
                "artifacts.site[0].mirrors[0]",
            ),
        ] {
            let e = section(text).expect_err(text);
            assert!(e.contains(key), "{text}: {e}");
        }
        let too_many = format!(
            "mirrors = [{}]",
            (0..=MIRRORS_MAX)
                .map(|i| format!("\"http://m{i}\""))
                .collect::<Vec<_>>()
                .join(",")
        );
        assert!(section(&too_many).expect_err("too many").contains("limit"));
        let long = format!(
            "mirrors = [\"http://a/{}\"]",
            "x".repeat(MIRROR_URL_BYTES_MAX)
        );
        assert!(section(&long).expect_err("too long").contains("longer"));
    }
}
