//! The operator surfaces (the API handlers, the console's pages and metrics, the
//! OpenAPI document's module, the CLI's operations) depend on the view
//! layer (`daemon::view`) and the composition root (`daemon::http`), never
//! on each other (issue 13). A grep over their sources, comments skipped:
//! a `use` or a path naming another surface fails here.

use std::path::Path;

/// The console's names: its module, and the old name of its overview.
/// Its pages (one file each) name each other through `super::`, never
/// by these paths.
const CONSOLE: &[&str] = &[
    "super::console",
    "daemon::console",
    "super::dashboard",
    "daemon::dashboard",
];

/// Each surface: its file, and the module path words that name it.
const SURFACES: &[(&str, &[&str])] = &[
    (
        "../controller/src/daemon/api.rs",
        &["super::api", "daemon::api"],
    ),
    ("../controller/src/daemon/console/mod.rs", CONSOLE),
    ("../controller/src/daemon/console/main_page.rs", CONSOLE),
    ("../controller/src/daemon/console/metrics.rs", CONSOLE),
    ("../controller/src/daemon/console/fleet.rs", CONSOLE),
    ("../controller/src/daemon/console/rollout.rs", CONSOLE),
    ("../controller/src/daemon/console/node.rs", CONSOLE),
    ("../controller/src/daemon/console/op.rs", CONSOLE),
    ("../controller/src/daemon/console/handover.rs", CONSOLE),
    ("../controller/src/daemon/console/events.rs", CONSOLE),
    (
        "../controller/src/daemon/release_api.rs",
        &["super::release_api", "daemon::release_api"],
    ),
    (
        "../controller/src/daemon/openapi.rs",
        &["super::openapi", "daemon::openapi"],
    ),
    ("src/ops.rs", &["crate::ops", "cli::ops"]),
    (
        "../controller/src/daemon/stream.rs",
        &["super::stream", "daemon::stream"],
    ),
    (
        "../controller/src/daemon/webhooks.rs",
        &["super::webhooks", "daemon::webhooks"],
    ),
    ("src/watch.rs", &["crate::watch", "cli::watch"]),
];

/// The lines of `text` that name `path` (whole path segments only).
fn naming(text: &str, path: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .filter(|l| {
            l.match_indices(path).any(|(i, _)| {
                let next = l[i + path.len()..].chars().next();
                !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn no_surface_imports_another() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for (file, _) in SURFACES {
        let text = std::fs::read_to_string(root.join(file))
            .unwrap_or_else(|e| panic!("reading {file}: {e}"));
        for (other, paths) in SURFACES.iter().filter(|(o, _)| o != file) {
            for path in *paths {
                for line in naming(&text, path) {
                    found.push(format!("{file} names {other} ({path}): {}", line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "surfaces import each other:\n{}",
        found.join("\n")
    );
}

/// The check itself can fail: a line naming another surface is found.
#[test]
fn the_check_finds_an_import() {
    assert_eq!(naming("use super::api::Api;", "super::api").len(), 1);
    assert!(naming("use super::apis::X;", "super::api").is_empty());
    assert!(naming("// see super::api", "super::api").is_empty());
}
