//! The one error type of the crate: every variant names what was wrong
//! (which path, which limit, which chunk).

use std::path::PathBuf;

/// Why a path of a release was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathProblem {
    /// The path is empty.
    #[error("the path is empty")]
    Empty,
    /// The path starts with `/`.
    #[error("an absolute path is refused (paths are relative to the tree)")]
    Absolute,
    /// A component is `..`.
    #[error("a `..` component is refused")]
    DotDot,
    /// A component is `.`.
    #[error("a `.` component is refused")]
    Dot,
    /// Two separators in a row, or one at the end.
    #[error("an empty component (`//` or a trailing `/`) is refused")]
    EmptyComponent,
    /// A NUL, another control character or a backslash.
    #[error("control characters and backslashes are refused")]
    BadCharacter,
    /// The name is not UTF-8.
    #[error("the name is not UTF-8")]
    NotUtf8,
    /// The whole path is too long.
    #[error("the path is {len} bytes, over the limit of {max}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// [`crate::limits::PATH_BYTES_MAX`].
        max: usize,
    },
    /// One component is too long.
    #[error("a component is {len} bytes, over the limit of {max}")]
    ComponentTooLong {
        /// Its length in bytes.
        len: usize,
        /// [`crate::limits::PATH_COMPONENT_BYTES_MAX`].
        max: usize,
    },
    /// Too many components.
    #[error("the path has {depth} components, over the limit of {max}")]
    TooDeep {
        /// Its number of components.
        depth: usize,
        /// [`crate::limits::PATH_DEPTH_MAX`].
        max: usize,
    },
}

/// Why a release, a tree, a chunk or a store operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A path in the tree or the manifest is invalid.
    #[error("path {path:?}: {problem}")]
    BadPath {
        /// The path as given (lossy if not UTF-8).
        path: String,
        /// What is wrong with it.
        problem: PathProblem,
    },
    /// Something other than a regular file or a directory is in the tree.
    #[error("{path:?} is a {kind}: only regular files and directories are released")]
    NotRegular {
        /// The path, relative to the tree.
        path: String,
        /// `symlink`, `fifo`, `socket`, `block device`, `char device`.
        kind: &'static str,
    },
    /// The same path twice in a manifest.
    #[error("path {path:?} appears twice")]
    DuplicatePath {
        /// The path.
        path: String,
    },
    /// Manifest entries out of byte order (the encoding is canonical).
    #[error("entry {path:?} is out of order: entries are sorted by path bytes")]
    Unsorted {
        /// The first entry out of order.
        path: String,
    },
    /// A path is a file and also the directory of another entry.
    #[error("{path:?} is a file and also a directory of another entry")]
    FileIsDirectory {
        /// The path.
        path: String,
    },
    /// Over a count or size limit.
    #[error("{what} is {value}, over the limit of {max}")]
    OverLimit {
        /// What: `entries`, `release bytes`, `manifest bytes`, `chunks`, ...
        what: &'static str,
        /// The value found.
        value: u64,
        /// The limit.
        max: u64,
    },
    /// A chunk is empty or over [`crate::limits::CHUNK_BYTES_MAX`].
    #[error("entry {path:?}: a chunk of {len} bytes (chunks are 1 to {max} bytes)")]
    BadChunkLength {
        /// The entry.
        path: String,
        /// The chunk's length.
        len: u64,
        /// [`crate::limits::CHUNK_BYTES_MAX`].
        max: u64,
    },
    /// A declared app limit is out of its bounds or malformed
    /// ([`crate::app_limits`]).
    #[error("app limit {field}: {problem}")]
    BadAppLimit {
        /// The field: `memory_bytes_max`, `cpu_percent_max`, `open_files_max`,
        /// `processes_max` or `user`.
        field: &'static str,
        /// What is wrong, with the value and the bounds.
        problem: String,
    },
    /// A declared migration is malformed or out of its bounds, or the
    /// format and the migration disagree ([`crate::app_migration`]).
    #[error("migration: {0}")]
    BadMigration(String),
    /// An entry's chunks do not add up to its size.
    #[error("entry {path:?}: size {size} but its chunks add up to {chunks}")]
    SizeMismatch {
        /// The entry.
        path: String,
        /// The size in the manifest.
        size: u64,
        /// The sum of its chunk lengths.
        chunks: u64,
    },
    /// A file changed while it was being signed.
    #[error("{path}: changed while it was read ({before} bytes before, {read} read)")]
    ChangedWhileRead {
        /// The file.
        path: PathBuf,
        /// Its size before reading.
        before: u64,
        /// How many bytes were read.
        read: u64,
    },
    /// The manifest does not decode or a field is invalid.
    #[error("malformed manifest: {0}")]
    Malformed(String),
    /// A field shared with format 1 (name, version, run, probe) is invalid.
    #[error(transparent)]
    Field(#[from] protocol::bundle::BundleError),
    /// The bytes do not start with the release magic.
    #[error("not a Fleetweft format-2 release manifest (bad magic)")]
    NotARelease,
    /// The release file ends before a part it announces.
    #[error("release manifest is truncated: the {what} is cut short")]
    Truncated {
        /// The part cut short.
        what: &'static str,
    },
    /// Bytes follow the signature, or the encoded manifest.
    #[error("{0} unexpected bytes after the {1}")]
    TrailingBytes(u64, &'static str),
    /// A manifest format this code does not read.
    #[error("unsupported manifest format {0} (this code reads formats 2 and 3)")]
    UnsupportedFormat(u16),
    /// The signature is all zeros.
    #[error("release manifest is unsigned")]
    Unsigned,
    /// Signed by a key other than the trusted one.
    #[error("release is signed by unknown key {found}; the trusted key is {expected}")]
    UnknownKey {
        /// The key id in the manifest (hex).
        found: String,
        /// The trusted key's id (hex).
        expected: String,
    },
    /// The signature does not verify.
    #[error("bad signature: the manifest was not signed by the trusted key or was altered")]
    BadSignature,
    /// Bytes do not hash to the chunk digest they were asked for.
    #[error("chunk {expected}: the bytes hash to {actual}")]
    ChunkMismatch {
        /// The digest asked for (hex).
        expected: String,
        /// What the bytes hash to (hex).
        actual: String,
    },
    /// A chunk file in the store is damaged (torn write, bit rot); it was
    /// removed and must be fetched again.
    #[error("chunk file {path} is damaged ({reason}): never used, fetch it again")]
    TornChunk {
        /// The chunk file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// A chunk the manifest names is not in the store.
    #[error("chunk {digest} (of {path:?}) is not in the store")]
    MissingChunk {
        /// The chunk digest (hex).
        digest: String,
        /// The entry naming it.
        path: String,
    },
    /// A file's content differs from its entry.
    #[error("{path:?}: {reason}")]
    FileMismatch {
        /// The entry.
        path: String,
        /// What differs.
        reason: String,
    },
    /// A file in the directory is not in the manifest.
    #[error("{path:?} is in the directory but not in the release")]
    Unexpected {
        /// The path, relative to the tree.
        path: String,
    },
    /// The destination already exists.
    #[error("{0} already exists; refusing to replace it")]
    Exists(PathBuf),
    /// The per-architecture trees break a rule (format 3): none, one for
    /// an architecture no tree can be for, out of order or twice, or a
    /// format that does not match whether there are any.
    #[error("architecture trees: {0}")]
    BadArchTrees(String),
    /// The release carries trees for some architectures, not this one.
    #[error("the release has no tree for {arch} (it has trees for {has})")]
    NoTreeForArch {
        /// The architecture asked for.
        arch: model::platform::Arch,
        /// The architectures it has trees for.
        has: model::platform::ArchSet,
    },
}

/// Shorthand: an I/O error on `path`.
pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> ReleaseError + '_ {
    move |source| ReleaseError::Io {
        path: path.to_path_buf(),
        source,
    }
}
