//! The release tree's path rules (`releases::path::validate_path` and
//! `validate_tree_paths`, applied to every entry of a manifest and every
//! name found when a directory is signed). Never panics; an accepted path
//! joined to a root stays under it (only normal components), and an
//! accepted list has no duplicate and no file that is also a directory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use releases::limits::{PATH_BYTES_MAX, PATH_COMPONENT_BYTES_MAX, PATH_DEPTH_MAX};
use releases::path::{validate_path, validate_tree_paths};
use std::path::{Component, Path};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if validate_path(text).is_ok() {
        assert!(text.len() <= PATH_BYTES_MAX);
        let components: Vec<_> = Path::new(text).components().collect();
        assert!(components.len() <= PATH_DEPTH_MAX);
        assert!(
            components.iter().all(|c| matches!(c, Component::Normal(_))),
            "{text:?} escapes or is not plain: {components:?}"
        );
        assert!(text
            .split('/')
            .all(|c| !c.is_empty() && c.len() <= PATH_COMPONENT_BYTES_MAX));
        let joined = Path::new("/root").join(text);
        assert!(joined.starts_with("/root") && joined != Path::new("/root"));
    }
    // Lines as the entries of one tree.
    let paths: Vec<&str> = text.split('\n').collect();
    if validate_tree_paths(paths.iter().copied()).is_ok() {
        for pair in paths.windows(2) {
            assert!(pair[0].as_bytes() < pair[1].as_bytes());
            assert!(!pair[1].starts_with(&format!("{}/", pair[0])));
        }
    }
});
