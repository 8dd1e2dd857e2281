//! Data that outlives releases (issue #24 item 2, its first part): each
//! app has a directory under the agent's data directory, kept across
//! releases and rollbacks, handed to every instance as
//! `FLEETWEFT_DATA_DIR`. Keyed by the release's name, so v1, v2 and a
//! rollback to v1 of one app share it; a release under another name is
//! another app.
//!
//! Not yet: a release's `migrate` command, the snapshot before it and the
//! restore of code and data together on a failed migration or rollback
//! (the rest of item 2). Until then a rollback restores code only, and
//! the data directory stays as the newer release left it.

use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};

/// The agent data directory's subdirectory holding every app's data.
pub const APP_DATA_DIR: &str = "app-data";
/// Longest app name used as a directory name as it is, in bytes.
const NAME_AS_DIR_BYTES_MAX: usize = 64;

/// `DATA/app-data/<name>`: the name itself when it is a plain file name
/// (letters, digits, `.`, `_`, `-`, not starting with `.` or `-`), else
/// `app-` and 16 hex digits of its SHA-256 (a release name may hold `/`
/// or `..`, which must never pick a directory elsewhere).
pub fn dir_for(data_dir: &Path, name: &str) -> PathBuf {
    data_dir.join(APP_DATA_DIR).join(dir_name(name))
}

fn dir_name(name: &str) -> String {
    let plain = !name.is_empty()
        && name.len() <= NAME_AS_DIR_BYTES_MAX
        && !name.starts_with(['.', '-'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if plain {
        return name.to_string();
    }
    let digest = Sha256::digest(name.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("app-{hex}")
}

/// Creates `dir` (mode 0700) if it is missing and, when the app runs as
/// another user, gives it to that user: the app may write its data, other
/// users may not read it.
pub fn ensure(dir: &Path, owner: Option<(u32, u32)>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(dir, Some(uid), Some(gid))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_name_is_its_own_directory_and_any_other_is_hashed() {
        let root = Path::new("/data");
        assert_eq!(
            dir_for(root, "shop-web_2.x"),
            root.join("app-data/shop-web_2.x")
        );
        for odd in [
            "../etc",
            "a/b",
            ".hidden",
            "-rf",
            "",
            "naïve",
            &"n".repeat(65),
        ] {
            let dir = dir_for(root, odd);
            assert_eq!(
                dir.parent(),
                Some(root.join("app-data").as_path()),
                "{odd:?}"
            );
            let leaf = dir
                .file_name()
                .expect("leaf")
                .to_string_lossy()
                .into_owned();
            assert!(
                leaf.starts_with("app-") && leaf.len() == 20,
                "{odd:?}: {leaf}"
            );
        }
        assert_ne!(dir_name("a/b"), dir_name("a/c"));
    }

    #[test]
    fn the_directory_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().expect("temp");
        let dir = dir_for(root.path(), "shop");
        ensure(&dir, None).expect("made");
        ensure(&dir, None).expect("kept");
        let mode = std::fs::metadata(&dir).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}
