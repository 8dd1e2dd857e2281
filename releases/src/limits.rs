//! Every limit of a format-2 release, with its unit in the name or the doc.
//!
//! A limit bounds what a decoder allocates, what a walk of a directory
//! accepts and what a node must be able to store; each is tested at the
//! limit and one past it (`tests/limits.rs`).

/// One mebibyte, in bytes.
pub const MIB: u64 = 1024 * 1024;
/// One gibibyte, in bytes.
pub const GIB: u64 = 1024 * MIB;

/// Most entries (files) in one release.
pub const ENTRIES_MAX: usize = 100_000;
/// Most content bytes in one release (the sum of its files' sizes).
pub const RELEASE_BYTES_MAX: u64 = 16 * GIB;
/// Longest relative path of an entry, in bytes (UTF-8), separators included.
pub const PATH_BYTES_MAX: usize = 1024;
/// Longest component (file or directory name) of a path, in bytes; the
/// `NAME_MAX` of common Linux filesystems.
pub const PATH_COMPONENT_BYTES_MAX: usize = 255;
/// Most components in one path (directory depth plus the file name).
pub const PATH_DEPTH_MAX: usize = 64;
/// Largest encoded manifest, in bytes. 100,000 one-chunk entries with
/// 200-byte paths plus 16 GiB in 1 MiB chunks encode to about 27 MiB; a
/// release within every other limit but with longer paths meets this one.
pub const MANIFEST_BYTES_MAX: usize = 32 * MIB as usize;
/// Most bytes the manifest decoder may allocate, as bincode counts them
/// (a claimed collection's length times its in-memory element size). An
/// entry takes at most 3 times its smallest encoding in memory (96 bytes
/// for 37), so a manifest within [`MANIFEST_BYTES_MAX`] decodes within
/// this, and a forged length claims no more.
pub const MANIFEST_DECODE_BYTES_MAX: usize = 4 * MANIFEST_BYTES_MAX;
/// Length of an Ed25519 signature, in bytes.
pub const SIGNATURE_BYTES: usize = 64;

/// Smallest content-defined chunk, in bytes (the last chunk of a file may
/// be shorter). See docs/performance.md, "Release chunking".
pub const CHUNK_BYTES_MIN: u32 = 256 * 1024;
/// Average (target) content-defined chunk, in bytes.
pub const CHUNK_BYTES_AVG: u32 = 1024 * 1024;
/// Largest chunk, in bytes: what a node buffers per chunk in flight, and
/// what a manifest may name.
pub const CHUNK_BYTES_MAX: u32 = 4 * 1024 * 1024;
/// Most chunks in one release: every chunk but a file's last is at least
/// [`CHUNK_BYTES_MIN`], so a release within [`RELEASE_BYTES_MAX`] and
/// [`ENTRIES_MAX`] never needs more.
pub const CHUNKS_MAX: usize = (RELEASE_BYTES_MAX / CHUNK_BYTES_MIN as u64) as usize + ENTRIES_MAX;

// The wire carries what the format allows: a chunk of the largest size the
// manifest may name fits the QUIC transfer's bound (`protocol::quic`), which
// cannot name this crate (the signed file's bound is asserted beside
// `manifest::RELEASE_FILE_BYTES_MAX`).
const _: () = assert!(CHUNK_BYTES_MAX as u64 == protocol::quic::CHUNK_BYTES_MAX);

/// `1.2 GiB`, `300 MiB`, `12 KiB`, `7 B`: sizes as operators read them.
pub fn bytes_text(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value < 10.0 {
        format!("{value:.1} {}", UNITS[unit])
    } else {
        format!("{value:.0} {}", UNITS[unit])
    }
}
