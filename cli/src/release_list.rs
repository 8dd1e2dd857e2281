//! `fleetweft bundle list` and `fleetweft bundle rm`: the releases the
//! controller stores, what names each (the model's rule, worded by
//! `api::view::releases`), and removing one nothing names, with the chunks
//! no other release needs (issue #23 item 6).

use crate::outcome::{json_text, Failure, Output, EXIT_OK, EXIT_USAGE};
use api::client::ApiClient;
use api::table::table;
use api::view::{ReleaseDto, ReleaseList, RemoveReply};
use releases::limits::bytes_text;

/// Fewest hex digits a digest prefix given to `bundle rm` may have.
pub const DIGEST_PREFIX_DIGITS_MIN: usize = 6;

/// `fleetweft bundle list`.
pub async fn list(client: &ApiClient, json: bool) -> Result<Output, Failure> {
    let listed: ReleaseList = client.get("/api/releases").await?;
    let text = if json {
        json_text(&listed)
    } else {
        render_list(&listed)
    };
    Ok(Output {
        text,
        code: EXIT_OK,
    })
}

/// The list as a table, then the chunk store's totals.
pub fn render_list(listed: &ReleaseList) -> String {
    let rows: Vec<Vec<String>> = listed.releases.iter().map(row).collect();
    let mut out = table(
        &[
            "DIGEST", "FORMAT", "NAME", "VERSION", "SIZE", "CHUNKS", "IN USE",
        ],
        &rows,
    );
    out.push_str(&format!(
        "{} release(s); chunk store: {} chunk(s), {}\n",
        listed.releases.len(),
        listed.chunks,
        bytes_text(listed.chunk_bytes)
    ));
    out
}

fn row(r: &ReleaseDto) -> Vec<String> {
    let in_use = match (&r.problem, &r.in_use) {
        (_, Some(uses)) => uses.text.clone(),
        (Some(problem), None) => format!("no (NOT SERVED: {problem})"),
        (None, None) => "no".to_string(),
    };
    vec![
        r.digest.get(..12).unwrap_or(&r.digest).to_string(),
        r.format.to_string(),
        dash(&r.name),
        dash(&r.version),
        bytes_text(r.content_bytes),
        r.chunks.to_string(),
        in_use,
    ]
}

fn dash(text: &str) -> String {
    if text.is_empty() {
        "-".into()
    } else {
        text.into()
    }
}

/// `fleetweft bundle rm DIGEST`: `digest` is the whole digest or a prefix
/// of at least [`DIGEST_PREFIX_DIGITS_MIN`] hex digits naming one stored
/// release.
pub async fn remove(client: &ApiClient, digest: &str, json: bool) -> Result<Output, Failure> {
    let digest = resolve(client, digest).await?;
    let reply: RemoveReply = client.delete(&format!("/api/releases/{digest}")).await?;
    let text = if json {
        json_text(&reply)
    } else {
        render_removed(&reply)
    };
    Ok(Output {
        text,
        code: EXIT_OK,
    })
}

/// What a removal freed, in one paragraph.
pub fn render_removed(r: &RemoveReply) -> String {
    let release = &r.release;
    let mut out = format!(
        "removed {} {} ({}): {} chunk(s), {} freed; {} orphan chunk(s), {} freed\n",
        dash(&release.name),
        dash(&release.version),
        release.digest,
        r.chunks_removed,
        bytes_text(r.chunk_bytes_freed),
        r.orphans_removed,
        bytes_text(r.orphan_bytes_freed),
    );
    if let Some(problem) = &r.sweep_problem {
        out.push_str(&format!(
            "chunks kept (a later removal sweeps them): {problem}\n"
        ));
    }
    out
}

/// The whole digest a prefix names among the stored releases.
async fn resolve(client: &ApiClient, given: &str) -> Result<String, Failure> {
    let hex = given.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex || given.len() < DIGEST_PREFIX_DIGITS_MIN || given.len() > 64 {
        return Err(usage(format!(
            "`{given}` is not a release digest: give 64 hex digits or a prefix of at least {DIGEST_PREFIX_DIGITS_MIN}"
        )));
    }
    let given = given.to_ascii_lowercase();
    if given.len() == 64 {
        return Ok(given);
    }
    let listed: ReleaseList = client.get("/api/releases").await?;
    let matching: Vec<&str> = listed
        .releases
        .iter()
        .map(|r| r.digest.as_str())
        .filter(|d| d.starts_with(&given))
        .collect();
    match matching.as_slice() {
        [one] => Ok(one.to_string()),
        [] => Err(usage(format!(
            "no stored release has a digest starting {given}"
        ))),
        many => Err(usage(format!(
            "{} stored releases have a digest starting {given}: give more digits",
            many.len()
        ))),
    }
}

fn usage(message: String) -> Failure {
    Failure {
        message,
        code: EXIT_USAGE,
    }
}
