//! The operator commands that talk to a running controller's API
//! (`fleetweft status|proof|unresolved|rollout`). Each returns the text to
//! print and the exit code, so the binary stays thin and tests can call them.
//!
//! Exit codes: [`EXIT_OK`] (0), [`EXIT_BAD_NEWS`] (1: a proof that is not
//! `verified`, a non-empty handover report, a command or bundle refused by
//! the controller, a controller that cannot be reached), [`EXIT_USAGE`]
//! (2: usage: bad arguments, no or a wrong token, an unknown name).

pub use crate::outcome::{json_text, Failure, Output, EXIT_BAD_NEWS, EXIT_OK, EXIT_USAGE};
use api::client::ApiClient;
use api::report::Unresolved;
use api::view::{
    ClaimRequest, Empty, EnrollRequest, LabelRequest, NodeDto, ObservationBody, ObserveDto, OpDto,
    Page, ResolveRequest, RevokeRequest, StartRollout, StatusDto, UploadReply, WriteReply,
};
use proof::{NodeProof, RolloutProof, Verdict};
use std::path::Path;

/// The default API address.
pub use api::client::DEFAULT_CONTROLLER;
/// The environment variable holding the operator token.
pub const TOKEN_ENV: &str = "FLEETWEFT_TOKEN";

/// The operator token, first found wins: `--token-file FILE`, else
/// `--pki DIR` (the PKI directory's operator token, `DIR/operator-token`, as
/// `fleetweft pki init` wrote it), else `FLEETWEFT_TOKEN`, else none (reads
/// need no token). An explicit file beats a directory, which beats the
/// environment, so a flag on the command line always overrides a token
/// exported in the shell. A given file or directory that does not hold a
/// valid token is a usage error naming the file; it never falls back to the
/// next source, which would act with a token the operator did not choose.
pub fn load_token(
    token_file: Option<&Path>,
    pki_dir: Option<&Path>,
) -> Result<Option<String>, Failure> {
    if let Some(path) = token_file {
        return read_token(path, "--token-file");
    }
    if let Some(dir) = pki_dir {
        let pki = protocol::pki::FleetPki {
            dir: dir.to_path_buf(),
            // Only the token's path is needed; no node list.
            nodes: Vec::new(),
        };
        return read_token(&pki.operator_token(), "--pki");
    }
    Ok(std::env::var(TOKEN_ENV)
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty()))
}

fn read_token(path: &Path, flag: &str) -> Result<Option<String>, Failure> {
    protocol::pki::load_operator_token(path)
        .map(Some)
        .map_err(|e| Failure {
            // Every `PkiError` of a token read starts with the file's path.
            message: format!("reading the operator token given by {flag}: {e}"),
            code: EXIT_USAGE,
        })
}

pub use api::table::table;

pub use api::view::short;

fn opt(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "-".to_string())
}

/// What a list command asks for: the page and its filters.
#[derive(Clone, Debug, Default)]
pub struct PageArgs {
    /// Items in the page (the API's default when `None`).
    pub limit: Option<usize>,
    /// The cursor: the last item of the previous page (its `next`).
    pub after: Option<String>,
}

/// `text` as a query string value: every byte but unreserved ones
/// percent-encoded, so a label's `=` or a stray `&` stays inside it.
pub fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A query string from `(parameter, value)` pairs, values encoded.
fn query(pairs: &[(&str, String)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", query_value(v)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

fn page_pairs(page: &PageArgs) -> Vec<(&'static str, String)> {
    let mut pairs = Vec::new();
    if let Some(limit) = page.limit {
        pairs.push(("limit", limit.to_string()));
    }
    if let Some(after) = &page.after {
        pairs.push(("after", after.clone()));
    }
    pairs
}

/// Nodes shown by `fleetweft status` unless `--limit` says otherwise.
pub const STATUS_NODES_DEFAULT: usize = 20;

/// `fleetweft status [--limit N] [--after NODE]`: the summary, and one page
/// of nodes. `--json` prints the API's summary (`/api/status`) alone.
pub async fn status(client: &ApiClient, page: &PageArgs, json: bool) -> Result<Output, Failure> {
    let dto: StatusDto = client.get("/api/status").await?;
    let text = if json {
        json_text(&dto)
    } else {
        let page = PageArgs {
            limit: Some(page.limit.unwrap_or(STATUS_NODES_DEFAULT)),
            ..page.clone()
        };
        let nodes: Page<NodeDto> = client
            .get(&format!("/api/nodes{}", query(&page_pairs(&page))))
            .await?;
        let mut out = render_status(&dto);
        out.push_str("\nNODES\n");
        out.push_str(&render_nodes(&nodes));
        out
    };
    Ok(Output {
        text,
        code: EXIT_OK,
    })
}

/// `fleetweft nodes [--label K=V]... [--state S] [--limit N] [--after NODE]`.
pub async fn nodes(
    client: &ApiClient,
    labels: &[String],
    state: Option<&str>,
    page: &PageArgs,
    json: bool,
) -> Result<Output, Failure> {
    let mut pairs: Vec<(&str, String)> = labels.iter().map(|l| ("label", l.clone())).collect();
    pairs.extend(state.map(|s| ("state", s.to_string())));
    pairs.extend(page_pairs(page));
    let dto: Page<NodeDto> = client.get(&format!("/api/nodes{}", query(&pairs))).await?;
    let text = if json {
        json_text(&dto)
    } else {
        render_nodes(&dto)
    };
    Ok(Output {
        text,
        code: EXIT_OK,
    })
}

/// `fleetweft ops [--rollout ID] [--state S] [--limit N] [--after OP]`.
pub async fn ops(
    client: &ApiClient,
    rollout: Option<&str>,
    state: Option<&str>,
    page: &PageArgs,
    json: bool,
) -> Result<Output, Failure> {
    let mut pairs: Vec<(&str, String)> = Vec::new();
    pairs.extend(rollout.map(|r| ("rollout", r.to_string())));
    pairs.extend(state.map(|s| ("state", s.to_string())));
    pairs.extend(page_pairs(page));
    let dto: Page<OpDto> = client.get(&format!("/api/ops{}", query(&pairs))).await?;
    let text = if json {
        json_text(&dto)
    } else {
        render_ops(&dto.items, dto.next.as_deref(), dto.total)
    };
    Ok(Output {
        text,
        code: EXIT_OK,
    })
}

/// The summary as text: counts, the latest rollouts with their progress,
/// and the UNKNOWN ops it lists.
pub fn render_status(dto: &StatusDto) -> String {
    let n = &dto.nodes;
    let o = &dto.ops;
    let mut out = format!(
        "last sequence: {}  generation: {}\n\
         nodes: {} enrolled, {} connected, {} retired, {} quarantined\n\
         ops: {} granted, {} holding a slot, {} UNKNOWN, {} settled ({} passed, {} not), {} failed, {} archived\n\
         unresolved: {} (fleetweft unresolved)\n",
        dto.last_sequence
            .map_or_else(|| "none".to_string(), |s| s.to_string()),
        dto.generation,
        n.enrolled,
        n.connected,
        n.retired,
        n.quarantined,
        o.granted,
        o.holding_slot,
        o.unknown,
        o.settled,
        o.passed,
        o.settled_not_passed,
        o.failed,
        o.archived,
        dto.unresolved,
    );
    // The log behind the fleet puts every line below in doubt: say it
    // under the counts, before the rollouts and the nodes.
    for a in &dto.ahead_of_log {
        out.push_str(&format!("{}\n", a.warning));
    }
    if dto.nodes_ahead_of_log > dto.ahead_of_log.len() {
        out.push_str(&format!(
            "({} nodes ahead of the log in all: fleetweft unresolved)\n",
            dto.nodes_ahead_of_log
        ));
    }
    if let Some(warning) = dto.storage.as_ref().and_then(|s| s.warning.as_ref()) {
        out.push_str(&format!("{warning}\n"));
    }
    out.push_str("\nROLLOUTS\n");
    out.push_str(&rollout_table(&dto.rollouts));
    if dto.rollouts_total > dto.rollouts.len() {
        out.push_str(&format!(
            "(the latest {} of {} rollouts)\n",
            dto.rollouts.len(),
            dto.rollouts_total
        ));
    }
    if !dto.unknown_ops.is_empty() {
        out.push_str("\nUNKNOWN OPS\n");
        let more = (o.unknown > dto.unknown_ops.len()).then_some("fleetweft ops --state unknown");
        out.push_str(&render_ops(&dto.unknown_ops, more, None));
    }
    out
}

/// [`render_status`]'s rollouts, one row each.
fn rollout_table(rollouts: &[api::view::RolloutDto]) -> String {
    let rows: Vec<Vec<String>> = rollouts
        .iter()
        .map(|r| {
            let c = &r.counts;
            vec![
                r.id.clone(),
                short(&r.release),
                match &r.paused_reason {
                    Some(p) => format!("{} ({p})", r.status),
                    None => r.status.clone(),
                },
                format!("{}/{}", r.slots_occupied, r.slots_max),
                format!(
                    "{}/{} settled, {} passed",
                    c.settled, c.plan_nodes, c.passed
                ),
                format!("{}/{}", c.current_wave, c.waves),
                c.unknown.to_string(),
                r.canary.clone(),
            ]
        })
        .collect();
    table(
        &[
            "ROLLOUT", "RELEASE", "STATUS", "SLOTS", "PROGRESS", "WAVE", "UNKNOWN", "CANARY",
        ],
        &rows,
    )
}

/// A page of nodes as a table, with the command for the next page.
pub fn render_nodes(page: &Page<NodeDto>) -> String {
    let rows: Vec<Vec<String>> = page
        .items
        .iter()
        .map(|n| {
            vec![
                n.name.clone(),
                n.state.clone(),
                n.arch.clone().unwrap_or_else(|| "?".into()),
                if n.connected { "yes" } else { "no" }.to_string(),
                n.confirmed.as_deref().map_or("-".into(), short),
                n.reported_serving.as_deref().map_or("-".into(), short),
                opt(&n.live_op),
                match (&n.observed, n.drifted) {
                    (Some(seen), true) => format!("DRIFTED: {} ({})", seen.result, seen.source),
                    _ => "-".into(),
                },
            ]
        })
        .collect();
    let mut out = table(
        &[
            "NODE",
            "STATE",
            "ARCH",
            "CONNECTED",
            "CONFIRMED",
            "REPORTED",
            "LIVE OP",
            "DRIFT",
        ],
        &rows,
    );
    out.push_str(&page_footer(
        page.items.len(),
        page.total,
        page.next.as_deref(),
    ));
    out
}

/// Ops as a table; `next` is the cursor (or command) for more.
fn render_ops(ops: &[OpDto], next: Option<&str>, total: Option<usize>) -> String {
    let rows: Vec<Vec<String>> = ops
        .iter()
        .map(|o| {
            vec![
                o.id.clone(),
                o.rollout.clone(),
                o.node.clone(),
                o.phase.clone(),
                opt(&o.outcome),
                o.unknown
                    .as_ref()
                    .map_or("-".into(), |u| format!("UNKNOWN ({u})")),
            ]
        })
        .collect();
    let mut out = table(
        &["OP", "ROLLOUT", "NODE", "PHASE", "OUTCOME", "UNKNOWN"],
        &rows,
    );
    out.push_str(&sources_lines(ops));
    out.push_str(&page_footer(ops.len(), total, next));
    out
}

/// One line per op whose agent reported where its chunks came from:
/// `op3 chunks from: mirror[0] cache:8080 12 (50331648 bytes, 1 failed);
/// controller 1 (300 bytes)`.
fn sources_lines(ops: &[OpDto]) -> String {
    let mut out = String::new();
    for o in ops.iter().filter(|o| !o.sources.is_empty()) {
        let parts: Vec<String> = o
            .sources
            .iter()
            .map(|s| {
                let failed = if s.failures > 0 {
                    format!(", {} failed", s.failures)
                } else {
                    String::new()
                };
                format!("{} {} ({} bytes{failed})", s.source, s.chunks, s.bytes)
            })
            .collect();
        out.push_str(&format!("{} chunks from: {}\n", o.id, parts.join("; ")));
    }
    out
}

fn page_footer(shown: usize, total: Option<usize>, next: Option<&str>) -> String {
    let of = total.map_or_else(String::new, |t| format!(" of {t}"));
    match next {
        Some(n) if n.starts_with("fleetweft ") => format!("({shown}{of} shown; more: {n})\n"),
        Some(n) => format!("({shown}{of} shown; next page: --after {n})\n"),
        None if total.is_some_and(|t| t > shown) || shown > 0 => format!("({shown}{of} shown)\n"),
        None => String::new(),
    }
}

fn verdict_code(v: Verdict) -> u8 {
    if v == Verdict::Verified {
        EXIT_OK
    } else {
        EXIT_BAD_NEWS
    }
}

/// How `fleetweft proof` gathers its evidence.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProofHow {
    /// Judge what was recorded instead of reading back now.
    pub cached: bool,
    /// Record the fresh observation too (a write).
    pub record: bool,
}

/// `fleetweft proof NODE [--cached | --record]`.
pub async fn node_proof(
    client: &ApiClient,
    node: &str,
    how: ProofHow,
    json: bool,
) -> Result<Output, Failure> {
    let (proof, recorded) = if how.record {
        let dto: ObserveDto = client
            .post_json(&format!("/api/nodes/{node}/observe"), &body(&Empty {})?)
            .await?;
        let mut lines: Vec<String> = dto
            .recorded
            .iter()
            .map(|l| format!("recorded {l}"))
            .collect();
        lines.extend(
            dto.not_recorded
                .iter()
                .map(|why| format!("not recorded: {why}")),
        );
        (dto.proof, lines)
    } else {
        let query = if how.cached { "?cached=true" } else { "" };
        let proof: NodeProof = client
            .get(&format!("/api/nodes/{node}/proof{query}"))
            .await?;
        (proof, Vec::new())
    };
    let text = if json {
        json_text(&proof)
    } else {
        let mut out = render_node_proof(&proof, now_ms());
        for line in recorded {
            out.push_str(&format!("{line}\n"));
        }
        out
    };
    Ok(Output {
        text,
        code: verdict_code(proof.verdict),
    })
}

/// `fleetweft proof --rollout ID [--cached]`.
pub async fn rollout_proof(
    client: &ApiClient,
    id: &str,
    how: ProofHow,
    json: bool,
) -> Result<Output, Failure> {
    let query = if how.cached { "?cached=true" } else { "" };
    let proof: RolloutProof = client
        .get(&format!("/api/rollouts/{id}/proof{query}"))
        .await?;
    let text = if json {
        json_text(&proof)
    } else {
        let mut out = format!("rollout {}: {}\n", proof.rollout, proof.verdict);
        for node in &proof.nodes {
            out.push('\n');
            out.push_str(&render_node_proof(node, now_ms()));
        }
        out
    };
    Ok(Output {
        text,
        code: verdict_code(proof.verdict),
    })
}

fn now_ms() -> u64 {
    api::report::epoch_ms(std::time::SystemTime::now())
}

/// When an evidence item was observed, and how long ago by `now_ms`.
fn observed_when(at_ms: Option<u64>, now_ms: u64) -> String {
    match at_ms {
        Some(at) => format!(
            "{} ({} ago)",
            api::report::format_epoch_ms(at),
            proof::view_uptime_text(now_ms.saturating_sub(at))
        ),
        None => "time not in the log (recorded with the op)".to_string(),
    }
}

fn reason_text<T: serde::Serialize>(r: &Option<T>) -> String {
    r.as_ref()
        .and_then(|r| serde_json::to_value(r).ok())
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "-".to_string())
}

/// One node's proof as text; ages are counted to `now_ms`.
pub fn render_node_proof(p: &NodeProof, now_ms: u64) -> String {
    let mut out = format!(
        "{}: {} (reason {}, op {}, intended {})\n{}\n",
        p.node,
        p.verdict,
        reason_text(&p.reason),
        p.op.as_deref().unwrap_or("-"),
        p.intended_release.as_deref().map_or("-".into(), short),
        p.summary
    );
    out.push_str(match p.mode {
        proof::ProofMode::Live => "read back now (controller probe + agent readback)\n",
        proof::ProofMode::Recorded => {
            "RECORDED evidence (--cached): a memory, not a readback; ages below\n"
        }
    });
    if p.drifted {
        out.push_str("DRIFTED: the node's latest observation contradicts its confirmed release\n");
    }
    if !p.checks.is_empty() {
        let rows: Vec<Vec<String>> = p
            .checks
            .iter()
            .map(|c| {
                vec![
                    c.item.clone(),
                    opt(&c.expected),
                    opt(&c.observed),
                    match c.ok {
                        Some(true) => "ok",
                        Some(false) => "CONTRADICTS",
                        None => "could not read",
                    }
                    .to_string(),
                    reason_text(&c.reason),
                    c.origin.as_str().to_string(),
                    observed_when(c.observed_at_ms, now_ms),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "EVIDENCE",
                "EXPECTED",
                "OBSERVED",
                "RESULT",
                "REASON",
                "SOURCE",
                "OBSERVED AT",
            ],
            &rows,
        ));
    }
    out
}

/// `fleetweft unresolved`.
pub async fn unresolved(client: &ApiClient, json: bool) -> Result<Output, Failure> {
    let entries: Vec<Unresolved> = client.get("/api/unresolved").await?;
    let text = if json {
        json_text(&entries)
    } else if entries.is_empty() {
        "nothing unresolved\n".to_string()
    } else {
        render_unresolved(&entries)
    };
    Ok(Output {
        text,
        code: if entries.is_empty() {
            EXIT_OK
        } else {
            EXIT_BAD_NEWS
        },
    })
}

/// `fleetweft probe NODE`: the controller probes the node's public route now
/// and asks its agent for a readback, records what it saw, and prints it.
/// Exit 1 unless the route answered rightly *as the release it should
/// serve* (`proof::judge_route`: a right answer with another identity is
/// `wrong identity`, with none `no identity`).
pub async fn probe(client: &ApiClient, node: &str, json: bool) -> Result<Output, Failure> {
    let dto: ObserveDto = client
        .post_json(&format!("/api/nodes/{node}/probe"), &body(&Empty {})?)
        .await?;
    let passed = dto.judgement.passed();
    let text = if json {
        json_text(&dto)
    } else {
        let mut out = format!(
            "{}: GET {} expecting {} {} from release {}\n",
            dto.node,
            dto.expect.path,
            dto.expect.expect_status,
            dto.expect.expected_body_text(),
            short(&dto.release)
        );
        match &dto.answer {
            Some(a) => out.push_str(&format!(
                "  answered {} {:?} as release {}\n",
                a.status,
                a.body,
                a.identity.as_deref().map_or("(none)".to_string(), short)
            )),
            None => out.push_str("  nothing answered\n"),
        }
        out.push_str(&format!("  verdict: {}\n", dto.judgement.as_str()));
        // The process as the agent read it back, or why it could not be.
        match &dto.readback {
            Ok(o) => out.push_str(&format!(
                "  process (agent readback): {}\n",
                proof::observation_process_text(o)
            )),
            Err(why) => out.push_str(&format!("  process: not read back ({why})\n")),
        }
        for line in &dto.recorded {
            out.push_str(&format!("  recorded {line}\n"));
        }
        if let Some(why) = &dto.not_recorded {
            out.push_str(&format!("  not recorded: {why}\n"));
        }
        out
    };
    Ok(Output {
        text,
        code: if passed { EXIT_OK } else { EXIT_BAD_NEWS },
    })
}

/// The handover report as text: a table, then each entry's details.
pub fn render_unresolved(entries: &[Unresolved]) -> String {
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|u| {
            vec![
                u.node.clone(),
                u.op.clone(),
                u.rollout.clone(),
                short(&u.release),
                u.generation.to_string(),
                u.phase.clone(),
                u.unknown_reason
                    .as_ref()
                    .map_or("-".into(), |r| format!("UNKNOWN ({r})")),
                u.owner_or_unowned().to_string(),
            ]
        })
        .collect();
    let mut out = table(
        &[
            "NODE", "OP", "ROLLOUT", "RELEASE", "GEN", "PHASE", "UNKNOWN", "OWNER",
        ],
        &rows,
    );
    for u in entries {
        out.push_str(&format!("\n{} on {} ({}):\n", u.op, u.node, u.rollout));
        out.push_str(&format!(
            "  since: {}\n  last confirmed release: {}\n  last serving result:    {}\n  owner: {}  review by: {}\n",
            u.since,
            u.last_confirmed_release.as_deref().map_or("-".into(), short),
            opt(&u.last_serving_result),
            u.owner_or_unowned(),
            u.review_by.as_deref().unwrap_or("not scheduled"),
        ));
        for m in &u.missing_evidence {
            out.push_str(&format!("  missing: {m}\n"));
        }
        for o in &u.options {
            out.push_str(&format!("  option:  {o}\n"));
        }
        out.push_str(&format!("  check:   {}\n", u.check_command));
    }
    out
}

/// The release `fleetweft rollout start` uploads first.
#[derive(Debug, Clone)]
pub enum ReleaseSource {
    /// A format-1 bundle's bytes, posted whole.
    Bundle(Vec<u8>),
    /// A format-2 release directory (or its manifest), uploaded chunk by
    /// chunk, resumably ([`crate::release_upload::upload_tree`]).
    Tree(std::path::PathBuf),
}

/// What `fleetweft rollout start` asks for.
#[derive(Debug, Clone)]
pub struct StartRequest {
    /// The release to upload and roll out.
    pub bundle: ReleaseSource,
    /// Canary node (with `select`, the first selected node when `None`).
    pub canary: Option<String>,
    /// Followers in order.
    pub followers: Vec<String>,
    /// `--select k=v,...`: the followers are the enrolled nodes whose
    /// labels hold every pair, resolved once by the controller.
    pub select: Option<model::controller::Labels>,
    /// Slot budget.
    pub slots: u16,
    /// Wait for approval after the canary.
    pub approve_after_canary: bool,
    /// `--waves`, `--approve-between-waves`, `--max-failed`,
    /// `--max-unknown`, as typed (the controller parses them).
    pub waves: Option<String>,
    /// Approve before each wave after the first.
    pub approve_between_waves: bool,
    /// Failed follower ops allowed.
    pub max_failed: Option<String>,
    /// UNKNOWN ops at once that pause the rollout.
    pub max_unknown: Option<String>,
}

/// `fleetweft rollout start`: upload the bundle, then start the rollout.
pub async fn rollout_start(
    client: &ApiClient,
    request: StartRequest,
    json: bool,
) -> Result<Output, Failure> {
    let uploaded: UploadReply = match request.bundle {
        ReleaseSource::Bundle(bytes) => client.post_bytes("/api/bundles", bytes).await?,
        ReleaseSource::Tree(path) => {
            let progress = &mut |line: String| eprintln!("{line}");
            crate::release_upload::upload_tree(client, &path, progress)
                .await?
                .0
        }
    };
    let digest = uploaded.digest.clone();
    let body = StartRollout {
        release: digest.clone(),
        canary: request.canary,
        followers: request.followers,
        select: request.select,
        slots: request.slots,
        approve_after_canary: request.approve_after_canary,
        waves: request.waves,
        approve_between_waves: request.approve_between_waves,
        max_failed: request.max_failed,
        max_unknown: request.max_unknown,
    };
    let body = serde_json::to_value(&body).map_err(|e| Failure {
        message: e.to_string(),
        code: EXIT_USAGE,
    })?;
    let answer: WriteReply = client.post_json("/api/rollouts", &body).await?;
    let text = if json {
        /// What `rollout start --json` prints: both answers.
        #[derive(serde::Serialize)]
        struct Started<'a> {
            bundle: &'a UploadReply,
            rollout: &'a WriteReply,
        }
        json_text(&Started {
            bundle: &uploaded,
            rollout: &answer,
        })
    } else {
        let mut out = format!(
            "uploaded {} {} as {}\n",
            uploaded.name, uploaded.version, digest
        );
        out.push_str(&events_text(&answer));
        out
    };
    Ok(Output {
        text,
        code: EXIT_OK,
    })
}

fn events_text(answer: &WriteReply) -> String {
    let mut out = String::new();
    for e in &answer.events {
        out.push_str(&format!("#{} {}\n", e.sequence, e.text));
    }
    out
}

/// A request body as the JSON the client sends.
fn body<T: serde::Serialize>(request: &T) -> Result<serde_json::Value, Failure> {
    serde_json::to_value(request).map_err(|e| Failure {
        message: format!("encoding the request: {e}"),
        code: EXIT_USAGE,
    })
}

/// `fleetweft rollout pause|resume|approve ID`.
pub async fn rollout_command(
    client: &ApiClient,
    verb: &str,
    id: &str,
    json: bool,
) -> Result<Output, Failure> {
    let answer: WriteReply = client
        .post_json(&format!("/api/rollouts/{id}/{verb}"), &body(&Empty {})?)
        .await?;
    let text = if json {
        json_text(&answer)
    } else {
        events_text(&answer)
    };
    Ok(Output {
        text,
        code: EXIT_OK,
    })
}

/// `fleetweft resolve OP`: settle an op by hand. `observation` is `None` for
/// `--probe` (the controller probes the node now and uses what it sees).
pub async fn resolve(
    client: &ApiClient,
    op: &str,
    resolution: &str,
    observation: Option<ObservationBody>,
    json: bool,
) -> Result<Output, Failure> {
    let request = ResolveRequest {
        resolution: resolution.to_string(),
        probe: observation.is_none().then_some(true),
        observation,
    };
    op_write(client, op, "resolve", &body(&request)?, json).await
}

/// `fleetweft rollback OP`.
pub async fn roll_back(client: &ApiClient, op: &str, json: bool) -> Result<Output, Failure> {
    op_write(client, op, "rollback", &body(&Empty {})?, json).await
}

/// POST `body` to `/api/ops/{op}/{action}` and print the events it
/// recorded (or the answer as JSON).
async fn op_write(
    client: &ApiClient,
    op: &str,
    action: &str,
    body: &serde_json::Value,
    json: bool,
) -> Result<Output, Failure> {
    let answer: WriteReply = client
        .post_json(&format!("/api/ops/{op}/{action}"), body)
        .await?;
    Ok(Output {
        text: if json {
            json_text(&answer)
        } else {
            events_text(&answer)
        },
        code: EXIT_OK,
    })
}

/// `fleetweft claim OP [--owner NAME] --review-by TIME`: the owner is the
/// operator whose credential makes the claim (another name is refused).
pub async fn claim(
    client: &ApiClient,
    op: &str,
    owner: Option<&str>,
    review_by: &str,
    json: bool,
) -> Result<Output, Failure> {
    let request = ClaimRequest {
        owner: owner.map(str::to_string),
        review_by: review_by.to_string(),
    };
    op_write(client, op, "claim", &body(&request)?, json).await
}

/// `fleetweft node release NODE`: lift a quarantine.
pub async fn node_release(client: &ApiClient, node: &str, json: bool) -> Result<Output, Failure> {
    node_write(client, node, "release", &body(&Empty {})?, json).await
}

/// `fleetweft node revoke-cert NODE [--cert FILE]`: `fingerprint` is the
/// hex SHA-256 of the certificate given, `None` for the one the node last
/// presented.
pub async fn node_revoke_cert(
    client: &ApiClient,
    node: &str,
    fingerprint: Option<&str>,
    json: bool,
) -> Result<Output, Failure> {
    let request = RevokeRequest {
        fingerprint: fingerprint.map(str::to_string),
    };
    node_write(client, node, "revoke-cert", &body(&request)?, json).await
}

/// POST `body` to `/api/nodes/{node}/{action}` and print the events it
/// recorded (or the answer as JSON).
async fn node_write(
    client: &ApiClient,
    node: &str,
    action: &str,
    body: &serde_json::Value,
    json: bool,
) -> Result<Output, Failure> {
    let answer: WriteReply = client
        .post_json(&format!("/api/nodes/{node}/{action}"), body)
        .await?;
    Ok(Output {
        text: if json {
            json_text(&answer)
        } else {
            events_text(&answer)
        },
        code: EXIT_OK,
    })
}

/// Parses `k=v` pairs (`--label k=v`, `--select k=v,k2=v2`) into labels;
/// the error names the pair that is not `key=value`. The controller checks
/// the limits (characters, lengths, count).
pub fn parse_pairs<'a>(
    pairs: impl IntoIterator<Item = &'a str>,
) -> Result<model::controller::Labels, String> {
    let mut labels = model::controller::Labels::new();
    for pair in pairs {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(format!("{pair:?} is not key=value"));
        };
        if labels.insert(k.to_string(), v.to_string()).is_some() {
            return Err(format!("label {k} is given twice"));
        }
    }
    Ok(labels)
}

/// `fleetweft node add NAME --label k=v --public ADDR`: enroll a node.
pub async fn node_add(
    client: &ApiClient,
    name: &str,
    labels: &model::controller::Labels,
    public: &str,
    json: bool,
) -> Result<Output, Failure> {
    let request = EnrollRequest {
        name: name.to_string(),
        labels: labels.clone(),
        public: public.to_string(),
    };
    let answer: WriteReply = client.post_json("/api/nodes", &body(&request)?).await?;
    Ok(Output {
        text: if json {
            json_text(&answer)
        } else {
            events_text(&answer)
        },
        code: EXIT_OK,
    })
}

/// `fleetweft node label NAME k=v ... key-`: set labels (`k=v`) and drop
/// them (`key-`).
pub async fn node_label(
    client: &ApiClient,
    name: &str,
    set: &model::controller::Labels,
    remove: &[String],
    json: bool,
) -> Result<Output, Failure> {
    let request = LabelRequest {
        set: set.clone(),
        remove: remove.to_vec(),
    };
    node_write(client, name, "labels", &body(&request)?, json).await
}

/// `fleetweft node retire NAME`: refused while the node holds a live op.
pub async fn node_retire(client: &ApiClient, name: &str, json: bool) -> Result<Output, Failure> {
    node_write(client, name, "retire", &body(&Empty {})?, json).await
}

/// The request `fleetweft config set` sends: `KEY=VALUE` values, `NAME=PATH`
/// files read now (base64), the secret keys; the error names what is wrong.
pub fn config_request(
    values: &[String],
    files: &[String],
    secrets: &[String],
) -> Result<api::view::config::ConfigSetRequest, Failure> {
    use base64::Engine as _;
    let usage = |message: String| Failure {
        message,
        code: EXIT_USAGE,
    };
    let mut request = api::view::config::ConfigSetRequest::default();
    for pair in values {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| usage(format!("{pair:?} is not KEY=VALUE")))?;
        if request
            .env
            .insert(key.to_string(), value.to_string())
            .is_some()
        {
            return Err(usage(format!("key {key:?} is given twice")));
        }
    }
    for pair in files {
        let (name, path) = pair
            .split_once('=')
            .ok_or_else(|| usage(format!("--file {pair:?} is not NAME=PATH")))?;
        let bytes =
            std::fs::read(path).map_err(|e| usage(format!("--file {name}: {path}: {e}")))?;
        let text = base64::engine::general_purpose::STANDARD.encode(bytes);
        if request.files.insert(name.to_string(), text).is_some() {
            return Err(usage(format!("file {name:?} is given twice")));
        }
    }
    for key in secrets {
        if !request.env.contains_key(key) {
            return Err(usage(format!(
                "--secret {key}: no value KEY=VALUE names it"
            )));
        }
        request.secrets.push(key.clone());
    }
    Ok(request)
}

/// `fleetweft config set`: the recorded revision, a secret only by its
/// fingerprint.
pub async fn config_set(
    client: &ApiClient,
    app: &str,
    request: &api::view::config::ConfigSetRequest,
    json: bool,
) -> Result<Output, Failure> {
    let view: api::view::config::ConfigView = client
        .post_json(&format!("/api/configs/{app}"), &body(request)?)
        .await?;
    Ok(config_output(&view, json, "recorded"))
}

/// `fleetweft config show`.
pub async fn config_show(client: &ApiClient, app: &str, json: bool) -> Result<Output, Failure> {
    let view: api::view::config::ConfigView = client.get(&format!("/api/configs/{app}")).await?;
    Ok(config_output(&view, json, "latest"))
}

fn config_output(view: &api::view::config::ConfigView, json: bool, what: &str) -> Output {
    let text = if json {
        json_text(view)
    } else {
        let mut lines = view.lines();
        lines[0] = format!("{what}: {}", lines[0]);
        lines.join("\n") + "\n"
    };
    Output {
        text,
        code: EXIT_OK,
    }
}

/// `fleetweft operator add NAME --role ROLE [--write FILE]` (issue #28
/// item 2): the credential is printed once, or written to FILE (0600).
pub async fn operator_add(
    client: &ApiClient,
    name: &str,
    role: &str,
    write: Option<&std::path::Path>,
    json: bool,
) -> Result<Output, Failure> {
    let request = api::view::AddOperatorRequest {
        name: name.to_string(),
        role: role.to_string(),
    };
    let reply: api::view::CredentialReply =
        client.post_json("/api/operators", &body(&request)?).await?;
    credential_output(&reply, write, json, "recorded")
}

/// `fleetweft operator rotate NAME [--write FILE]`.
pub async fn operator_rotate(
    client: &ApiClient,
    name: &str,
    write: Option<&std::path::Path>,
    json: bool,
) -> Result<Output, Failure> {
    let reply: api::view::CredentialReply = client
        .post_json(&format!("/api/operators/{name}/rotate"), &body(&Empty {})?)
        .await?;
    credential_output(&reply, write, json, "rotated")
}

/// `fleetweft operator revoke NAME`.
pub async fn operator_revoke(
    client: &ApiClient,
    name: &str,
    json: bool,
) -> Result<Output, Failure> {
    let answer: WriteReply = client
        .post_json(&format!("/api/operators/{name}/revoke"), &body(&Empty {})?)
        .await?;
    let text = if json {
        json_text(&answer)
    } else {
        events_text(&answer)
    };
    Ok(Output {
        text,
        code: EXIT_OK,
    })
}

/// `fleetweft operator list`.
pub async fn operator_list(client: &ApiClient, json: bool) -> Result<Output, Failure> {
    let list: Vec<api::view::OperatorDto> = client.get("/api/operators").await?;
    let text = if json {
        json_text(&list)
    } else {
        let mut out = String::from("operator  role  state\n");
        for o in &list {
            let state = if o.revoked { "revoked" } else { "active" };
            out.push_str(&format!("{}  {}  {state}\n", o.name, o.role));
        }
        out
    };
    Ok(Output {
        text,
        code: EXIT_OK,
    })
}

/// An issued credential: written to `write` (mode 0600, a token file
/// `--token-file` reads) and not printed, or printed once.
fn credential_output(
    reply: &api::view::CredentialReply,
    write: Option<&std::path::Path>,
    json: bool,
    what: &str,
) -> Result<Output, Failure> {
    let mut text = format!(
        "operator {} ({}) {what}\n{}",
        reply.operator,
        reply.role,
        events_text(&WriteReply {
            events: reply.events.clone(),
        })
    );
    match write {
        Some(path) => {
            write_secret(path, &reply.credential)?;
            text.push_str(&format!("credential written to {}\n", path.display()));
        }
        None if json => text = json_text(reply),
        None => text.push_str(&format!(
            "credential (shown this once; give it as --token-file, or to the console's login):\n{}\n",
            reply.credential
        )),
    }
    Ok(Output {
        text,
        code: EXIT_OK,
    })
}

/// `secret` and a newline into a new file at `path`, mode 0600 from its
/// creation (never readable by others, not even for a moment).
fn write_secret(path: &std::path::Path, secret: &str) -> Result<(), Failure> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |e: std::io::Error| Failure {
        message: format!(
            "writing the credential to {}: {e} (the credential was issued: rotate it)",
            path.display()
        ),
        code: EXIT_BAD_NEWS,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(failed)?;
    file.write_all(format!("{secret}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(failed)
}

#[cfg(test)]
mod tests {
    use api::view::fixture::fleet;
    use api::view::{node_page, status_dto, NodeQuery};

    /// `fleetweft status` prints the view's warning for a node ahead of the
    /// log, and nothing of the kind without one.
    #[test]
    fn status_says_the_log_is_behind() {
        let mut snap = fleet(2, 1, 0, 0);
        assert!(!super::render_status(&status_dto(&snap)).contains("LOG BEHIND"));
        let log = snap.state.generation.0;
        snap.ahead_of_log
            .insert(model::NodeId(0), model::Generation(log + 1));
        let text = super::render_status(&status_dto(&snap));
        let warning = api::view::ahead::sentence("n0", log + 1, log);
        assert!(text.contains(&format!("{warning}\n")), "{text}");
    }

    /// `fleetweft status` prints the storage warning at 80% of the quota,
    /// in the view layer's words, and nothing below it.
    #[test]
    fn status_says_the_storage_is_nearly_full() {
        let mut snap = fleet(2, 1, 0, 0);
        let quota = 1_000_000_000;
        snap.storage = Some(api::view::storage::StorageUse {
            bytes: quota * 79 / 100,
            quota_bytes: Some(quota),
        });
        assert!(!super::render_status(&status_dto(&snap)).contains("STORAGE NEARLY FULL"));
        snap.storage = Some(api::view::storage::StorageUse {
            bytes: quota * 4 / 5,
            quota_bytes: Some(quota),
        });
        let text = super::render_status(&status_dto(&snap));
        let warning = api::view::storage::sentence(quota * 4 / 5, quota);
        assert!(text.contains(&format!("{warning}\n")), "{text}");
    }

    /// The REPORTED column: the canary's verified op claimed v2, so it
    /// shows v2, not the v1 of the hello said before its op; a follower
    /// whose op was granted after its hello and not reported on shows
    /// nothing, not the old claim.
    #[test]
    fn reported_is_the_claim_for_the_current_op() {
        let snap = fleet(2, 1, 0, 0);
        let v1 = model::Digest::repeat(1).to_hex();
        let v2 = model::Digest::repeat(2).to_hex();
        let text = super::render_nodes(&node_page(
            &snap,
            &NodeQuery {
                limit: 10,
                ..NodeQuery::default()
            },
        ));
        let row = |name: &str| -> Vec<String> {
            text.lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("{name} in {text}"))
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        assert_eq!(row("n0")[4], super::short(&v2), "{text}");
        assert_eq!(row("n1")[4], "-", "{text}");
        assert!(
            !text.contains(&super::short(&v1)),
            "no stale v1 claim: {text}"
        );
    }

    /// A label filter's `=` and any stray `&` stay inside the value.
    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(super::query_value("region=eu"), "region%3Deu");
        assert_eq!(super::query_value("a&b c"), "a%26b%20c");
        assert_eq!(super::query_value("edge-7.x_y~"), "edge-7.x_y~");
    }
}
