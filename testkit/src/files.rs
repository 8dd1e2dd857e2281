//! Directory trees read whole, for byte-for-byte checks of what a test
//! left on disk (the agent's data snapshots and restores).

use std::path::{Path, PathBuf};

/// Every file under `dir`, by its path relative to `dir`, with its bytes,
/// sorted by path. Panics on a read error: this is a test's assertion.
pub fn contents(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(at) = todo.pop() {
        for entry in std::fs::read_dir(&at).expect("read") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let rel = path.strip_prefix(dir).expect("under").to_path_buf();
                out.push((rel, std::fs::read(&path).expect("file")));
            }
        }
    }
    out.sort();
    out
}
