//! Relative paths of a release tree.
//!
//! A path is UTF-8, `/`-separated, relative to the tree's root, and names a
//! file: no `..`, no `.`, no absolute path, no empty component, no control
//! character or backslash, within [`PATH_BYTES_MAX`],
//! [`PATH_COMPONENT_BYTES_MAX`] and [`PATH_DEPTH_MAX`]. The same rule is
//! applied when a directory is signed and when a manifest is decoded, so a
//! path the agent writes can never leave the release directory.

use crate::error::{PathProblem, ReleaseError};
use crate::limits::{PATH_BYTES_MAX, PATH_COMPONENT_BYTES_MAX, PATH_DEPTH_MAX};

/// Checks one relative path; the error names the path and the problem.
pub fn validate_path(path: &str) -> Result<(), ReleaseError> {
    check(path).map_err(|problem| ReleaseError::BadPath {
        path: path.to_string(),
        problem,
    })
}

fn check(path: &str) -> Result<(), PathProblem> {
    if path.is_empty() {
        return Err(PathProblem::Empty);
    }
    if path.len() > PATH_BYTES_MAX {
        return Err(PathProblem::TooLong {
            len: path.len(),
            max: PATH_BYTES_MAX,
        });
    }
    if path.starts_with('/') {
        return Err(PathProblem::Absolute);
    }
    if path.chars().any(|c| c.is_control() || c == '\\') {
        return Err(PathProblem::BadCharacter);
    }
    let mut depth = 0;
    for component in path.split('/') {
        depth += 1;
        check_component(component)?;
    }
    if depth > PATH_DEPTH_MAX {
        return Err(PathProblem::TooDeep {
            depth,
            max: PATH_DEPTH_MAX,
        });
    }
    Ok(())
}

fn check_component(component: &str) -> Result<(), PathProblem> {
    match component {
        "" => Err(PathProblem::EmptyComponent),
        "." => Err(PathProblem::Dot),
        ".." => Err(PathProblem::DotDot),
        c if c.len() > PATH_COMPONENT_BYTES_MAX => Err(PathProblem::ComponentTooLong {
            len: c.len(),
            max: PATH_COMPONENT_BYTES_MAX,
        }),
        _ => Ok(()),
    }
}

/// Checks a list of paths as a tree: each valid, strictly ascending by
/// bytes (so no duplicate), and no path both a file and the directory of
/// another. Returns the first problem found.
pub fn validate_tree_paths<'a>(
    paths: impl IntoIterator<Item = &'a str>,
) -> Result<(), ReleaseError> {
    let mut files = std::collections::HashSet::new();
    let mut dirs = std::collections::HashSet::new();
    let mut previous: Option<&str> = None;
    for path in paths {
        validate_path(path)?;
        if let Some(prev) = previous {
            if prev == path {
                return Err(ReleaseError::DuplicatePath { path: path.into() });
            }
            if prev.as_bytes() > path.as_bytes() {
                return Err(ReleaseError::Unsorted { path: path.into() });
            }
        }
        previous = Some(path);
        if dirs.contains(path) {
            return Err(ReleaseError::FileIsDirectory { path: path.into() });
        }
        for (at, _) in path.match_indices('/') {
            let dir = &path[..at];
            if files.contains(dir) {
                return Err(ReleaseError::FileIsDirectory { path: dir.into() });
            }
            dirs.insert(dir);
        }
        files.insert(path);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(path: &str) -> PathProblem {
        match validate_path(path) {
            Err(ReleaseError::BadPath { problem, path: p }) => {
                assert_eq!(p, path);
                problem
            }
            other => panic!("{path:?}: {other:?}"),
        }
    }

    #[test]
    fn good_paths_pass() {
        for p in ["app.py", "lib/mod.py", ".env", "a/.hidden/b", "x..y", "é/ü"] {
            validate_path(p).expect(p);
        }
    }

    #[test]
    fn bad_paths_name_their_problem() {
        assert_eq!(problem(""), PathProblem::Empty);
        assert_eq!(problem("/etc/passwd"), PathProblem::Absolute);
        assert_eq!(problem("../x"), PathProblem::DotDot);
        assert_eq!(problem("a/../../x"), PathProblem::DotDot);
        assert_eq!(problem("a/./b"), PathProblem::Dot);
        assert_eq!(problem("a//b"), PathProblem::EmptyComponent);
        assert_eq!(problem("a/"), PathProblem::EmptyComponent);
        assert_eq!(problem("a\0b"), PathProblem::BadCharacter);
        assert_eq!(problem("a\\..\\b"), PathProblem::BadCharacter);
        assert_eq!(problem("a\nb"), PathProblem::BadCharacter);
    }

    #[test]
    fn path_limits_at_and_one_past() {
        // Whole path: 1024 bytes passes, 1025 is refused.
        let at = format!("{}/{}", vec!["a".repeat(200); 5].join("/"), "c".repeat(19));
        assert_eq!(at.len(), PATH_BYTES_MAX);
        validate_path(&at).expect("at the limit");
        let over = format!("{at}c");
        assert!(matches!(
            problem(&over),
            PathProblem::TooLong {
                len: 1025,
                max: 1024
            }
        ));
        // Component: 255 passes, 256 is refused.
        validate_path(&"n".repeat(PATH_COMPONENT_BYTES_MAX)).expect("255");
        assert!(matches!(
            problem(&"n".repeat(PATH_COMPONENT_BYTES_MAX + 1)),
            PathProblem::ComponentTooLong { len: 256, max: 255 }
        ));
        // Depth: 64 components pass, 65 are refused.
        let deep = vec!["d"; PATH_DEPTH_MAX].join("/");
        validate_path(&deep).expect("64 deep");
        let deeper = format!("{deep}/d");
        assert!(matches!(
            problem(&deeper),
            PathProblem::TooDeep { depth: 65, max: 64 }
        ));
    }

    #[test]
    fn tree_rules() {
        validate_tree_paths(["a", "a-b", "b/c", "b/d"]).expect("fine");
        let dup = validate_tree_paths(["a", "a"]).unwrap_err();
        assert!(
            matches!(dup, ReleaseError::DuplicatePath { ref path } if path == "a"),
            "{dup}"
        );
        let unsorted = validate_tree_paths(["b", "a"]).unwrap_err();
        assert!(matches!(unsorted, ReleaseError::Unsorted { ref path } if path == "a"));
        // "a" is a file and the directory of "a/b", with "a-b" in between.
        let both = validate_tree_paths(["a", "a-b", "a/b"]).unwrap_err();
        assert!(
            matches!(both, ReleaseError::FileIsDirectory { ref path } if path == "a"),
            "{both}"
        );
    }
}
