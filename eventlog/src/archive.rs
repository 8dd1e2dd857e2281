//! Archived history (issue #26 item 2): the oldest entries of a log moved
//! out of the live storage into compressed, checksummed segment files.
//!
//! **What is archived.** Entries `[from, to)`, raw: each entry's encoded
//! envelope byte for byte as the storage held it, so every checksum and
//! every link of the hash chain still verifies, across segments and into
//! the live log. [`EventLog::archive_to`](super::EventLog::archive_to)
//! archives, records where the live log now starts
//! ([`LiveStart`](super::LiveStart)), then deletes the archived entries.
//!
//! **A segment file** is named
//! `<from:020>-<to:020>-<prev:16 hex>-<last:16 hex>.fwseg`: the sequence
//! range `[from, to)`, and the first 8 bytes of the hash it continues (of
//! entry `from - 1`, or the genesis hash) and of the hash of its last
//! entry (`to - 1`). Names sort in log order. Its layout (version
//! [`SEGMENT_FORMAT_VERSION`]):
//! - header: magic `FWAS`, version (u16 LE), `from` and `to` (u64 BE), the
//!   full prev hash and last hash (32 bytes each), the frame count (u32
//!   LE), and a SHA-256 over all of these;
//! - frame index: per frame its first sequence (u64 BE), entry count, raw
//!   and compressed lengths (u32 LE each) and the SHA-256 of its
//!   compressed bytes; then a SHA-256 over the whole index;
//! - the frames: each an independent zstd frame of at most
//!   [`FRAME_RAW_BYTES_MAX`] raw bytes, holding its entries as a u32 LE
//!   length and the entry's bytes.
//!
//! Every byte of a segment is under a checksum, and a damaged frame still
//! names its entries: the frame is decompressed anyway and the first entry
//! whose own checksum or link fails is named by sequence (else the frame's
//! range is). A file is at most its configured `segment_bytes_max`.
//!
//! **Durability** (the bundle store's discipline): a segment is written to
//! a temporary file in the archive directory, fsynced, renamed to its name,
//! and the directory is fsynced; only then is it counted as written. A
//! segment whose name exists already is compared byte for byte: identical
//! is a no-op (a re-run after a crash), different is refused
//! ([`ArchiveError::SegmentExists`]); nothing is ever overwritten. On a
//! mounted object store, durability is what its fsync and rename promise.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::envelope::{genesis_hash, Hash, ENTRY_BYTES_MAX};
use super::storage::{LogStorage, StorageError};
use super::verify::{check_stored_entry, EntryFault, VerifyError};

/// Version of the segment layout written by this build; others are refused.
pub const SEGMENT_FORMAT_VERSION: u16 = 1;

/// Default bound on one segment file, in bytes (64 MiB): small enough to
/// copy, upload or read back in one piece, large enough that 20 million
/// events make some hundreds of files, not millions.
pub const SEGMENT_BYTES_MAX_DEFAULT: u64 = 64 << 20;

/// Largest `segment_bytes_max` accepted, and largest segment file read
/// (1 GiB): a reader holds one segment in memory.
pub const SEGMENT_BYTES_MAX_LIMIT: u64 = 1 << 30;

/// Most raw bytes (length prefixes and entries) in one compressed frame
/// (64 KiB, about as much as one entry may be): large enough for zstd to
/// find the repetition between entries, small enough that a frame that no
/// longer decompresses loses few entries to the reader, whose first it
/// names.
pub const FRAME_RAW_BYTES_MAX: usize = 64 << 10;

/// zstd's level unless configured otherwise: its default, fast to write.
pub const ZSTD_LEVEL_DEFAULT: i32 = 3;

/// Upper bound of a compressed frame: zstd's `ZSTD_COMPRESSBOUND` for
/// [`FRAME_RAW_BYTES_MAX`] (input + input/256, + (128 KiB - input)/2048
/// below 128 KiB) and margin for the frame header.
const FRAME_COMPRESSED_BYTES_MAX: usize = FRAME_RAW_BYTES_MAX
    + (FRAME_RAW_BYTES_MAX >> 8)
    + ((128 << 10) - FRAME_RAW_BYTES_MAX) / 2048
    + 512;

const MAGIC: [u8; 4] = *b"FWAS";

/// Header fields before their checksum: magic, version, from, to, prev
/// hash, last hash, frame count.
const HEADER_FIELDS_BYTES: usize = 4 + 2 + 8 + 8 + 32 + 32 + 4;

/// The header with its checksum.
pub(super) const HEADER_BYTES: usize = HEADER_FIELDS_BYTES + 32;

/// One frame's index entry: first, count, raw length, compressed length,
/// checksum.
const INDEX_ENTRY_BYTES: usize = 8 + 4 + 4 + 4 + 32;

/// The index's own checksum.
const INDEX_CHECKSUM_BYTES: usize = 32;

/// Smallest `segment_bytes_max` accepted: one frame of the largest size.
pub const SEGMENT_BYTES_MIN: u64 =
    (HEADER_BYTES + INDEX_ENTRY_BYTES + INDEX_CHECKSUM_BYTES + FRAME_COMPRESSED_BYTES_MAX) as u64;

/// File name suffix of a segment.
const SEGMENT_SUFFIX: &str = ".fwseg";

/// Hash bytes a segment's name shows (as hex) of each of its two hashes.
const NAME_HASH_BYTES: usize = 8;

/// How segments are cut and compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveConfig {
    /// Largest segment file, in bytes, between [`SEGMENT_BYTES_MIN`] and
    /// [`SEGMENT_BYTES_MAX_LIMIT`].
    pub segment_bytes_max: u64,
    /// zstd compression level (1..=22; 3 is zstd's default).
    pub zstd_level: i32,
}

impl Default for ArchiveConfig {
    fn default() -> Self {
        ArchiveConfig {
            segment_bytes_max: SEGMENT_BYTES_MAX_DEFAULT,
            zstd_level: ZSTD_LEVEL_DEFAULT,
        }
    }
}

impl ArchiveConfig {
    /// Refuses a segment bound outside its range or a level zstd lacks.
    pub fn validate(&self) -> Result<(), ArchiveError> {
        if !(SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX_LIMIT).contains(&self.segment_bytes_max) {
            return Err(ArchiveError::SegmentBytesOutOfRange {
                value: self.segment_bytes_max,
                min: SEGMENT_BYTES_MIN,
                max: SEGMENT_BYTES_MAX_LIMIT,
            });
        }
        if !(1..=22).contains(&self.zstd_level) {
            return Err(ArchiveError::ZstdLevelOutOfRange {
                level: self.zstd_level,
            });
        }
        Ok(())
    }
}

/// One segment, as its file name and verified header describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    /// The segment file.
    pub path: PathBuf,
    /// Its first sequence.
    pub from: u64,
    /// The sequence after its last entry.
    pub to: u64,
    /// The hash it continues: of entry `from - 1` (genesis for 0).
    pub prev_hash: Hash,
    /// The hash of its last entry (`to - 1`).
    pub last_hash: Hash,
    /// The file's size in bytes.
    pub bytes: u64,
}

/// What writing one segment did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentWrite {
    /// The segment.
    pub segment: SegmentInfo,
    /// An identical segment was there already (a re-run): nothing written.
    pub already_present: bool,
}

/// What is wrong with a segment file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SegmentFault {
    /// Shorter than its header and index say it must be.
    #[error("the file has {len} bytes, fewer than its header and index need")]
    TooShort {
        /// Bytes found.
        len: u64,
    },
    /// Larger than [`SEGMENT_BYTES_MAX_LIMIT`] or than its frames add up to.
    #[error("the file has {len} bytes, {expected} expected from its header and index")]
    SizeMismatch {
        /// Bytes found.
        len: u64,
        /// Bytes the header and index account for.
        expected: u64,
    },
    /// Not a segment at all.
    #[error("the file does not start with the segment magic")]
    WrongMagic,
    /// Written by another layout version.
    #[error(
        "segment version {found} is not supported (this build reads version \
         {SEGMENT_FORMAT_VERSION})"
    )]
    UnsupportedVersion {
        /// The version found.
        found: u16,
    },
    /// The header's checksum does not match: the header was altered.
    #[error("the segment header is damaged (checksum mismatch)")]
    HeaderChecksum,
    /// The header's range or hashes disagree with the file name.
    #[error("the header names the range {from}..{to}, which disagrees with the file name")]
    NameMismatch {
        /// The header's first sequence.
        from: u64,
        /// The header's end.
        to: u64,
    },
    /// The frame index's checksum does not match, or the index is not
    /// consistent with the header (counts, ranges, lengths).
    #[error("the segment's frame index is damaged: {detail}")]
    IndexDamaged {
        /// What is inconsistent.
        detail: String,
    },
    /// A frame's bytes were altered; no single entry could be named (the
    /// frame does not decompress, or its entries still verify).
    #[error("the frame holding sequences {first}..{end} is damaged: {detail}")]
    FrameDamaged {
        /// Its first sequence.
        first: u64,
        /// The sequence after its last.
        end: u64,
        /// What was found.
        detail: String,
    },
    /// An archived entry is bad (named by the error's sequence).
    #[error(transparent)]
    Entry(#[from] EntryFault),
    /// The segment does not continue the chain where the one before ends.
    #[error("the segment does not continue the chain: its prev hash is not the hash of entry {sequence}")]
    Unlinked {
        /// The entry it should continue.
        sequence: u64,
    },
}

/// Why archiving, or reading or verifying the archive, failed.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// A file operation on the archive failed.
    #[error("archive I/O on {path} while {action}: {source}")]
    Io {
        /// File or directory.
        path: PathBuf,
        /// What was being done, e.g. "renaming a segment into place".
        action: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A segment is damaged; `sequence` is the first damaged one when it
    /// can be named (else the fault names the header, index or frame).
    #[error(
        "archive segment {}{}: {fault}",
        segment.display(),
        match sequence { Some(s) => format!(", sequence {s}"), None => String::new() }
    )]
    Segment {
        /// The segment file.
        segment: PathBuf,
        /// The first damaged sequence, when known.
        sequence: Option<u64>,
        /// What is wrong.
        fault: SegmentFault,
    },
    /// A segment of that name exists with other bytes: never replaced.
    #[error(
        "archive segment {} already exists with other contents; refusing to replace it",
        segment.display()
    )]
    SegmentExists {
        /// The existing file.
        segment: PathBuf,
    },
    /// A file in the archive directory that is not a segment (nor a
    /// temporary file of one being written).
    #[error("{} in the archive directory is not an archive segment", path.display())]
    ForeignFile {
        /// The file.
        path: PathBuf,
    },
    /// The segments do not cover one contiguous range from sequence 0.
    #[error(
        "the archive in {} has no segment starting at sequence {expected}{}",
        dir.display(),
        match found { Some(f) => format!(" (the next one starts at {f})"), None => String::new() }
    )]
    Gap {
        /// The archive directory.
        dir: PathBuf,
        /// The sequence a segment should start at.
        expected: u64,
        /// Where the next segment starts instead, if there is one.
        found: Option<u64>,
    },
    /// The archive and the live log do not meet: entries between them are
    /// missing (archived elsewhere), or the live log's recorded start does
    /// not continue the archive's chain.
    #[error(
        "the archive ends at sequence {archive_end} but the live log starts at {first_live}{}",
        if *unlinked { " with another chain head" } else { "" }
    )]
    Boundary {
        /// The sequence after the archive's last entry.
        archive_end: u64,
        /// The live log's first sequence.
        first_live: u64,
        /// The ranges meet but the hashes differ.
        unlinked: bool,
    },
    /// Entries both archived and still live (a re-run was cut short)
    /// differ: the live chain reaches another hash at `sequence`.
    #[error("sequence {sequence} is both archived and live, and the two differ")]
    OverlapDiffers {
        /// The last overlapping sequence.
        sequence: u64,
    },
    /// The live log ended before the range to archive did.
    #[error("the live log ends at sequence {end}, before {to}, the end of the range to archive")]
    LiveEnded {
        /// Where the live log ended.
        end: u64,
        /// The requested end.
        to: u64,
    },
    /// The live log failed verification (or its storage failed).
    #[error(transparent)]
    Live(#[from] VerifyError),
    /// `segment_bytes_max` outside its range.
    #[error("segment_bytes_max = {value} is outside {min}..={max}")]
    SegmentBytesOutOfRange {
        /// The configured value.
        value: u64,
        /// Smallest accepted.
        min: u64,
        /// Largest accepted.
        max: u64,
    },
    /// A zstd level outside 1..=22.
    #[error("zstd level {level} is outside 1..=22")]
    ZstdLevelOutOfRange {
        /// The configured level.
        level: i32,
    },
}

impl From<StorageError> for ArchiveError {
    fn from(err: StorageError) -> Self {
        ArchiveError::Live(err.into())
    }
}

pub(super) fn io_error(path: &Path, action: &'static str, source: io::Error) -> ArchiveError {
    ArchiveError::Io {
        path: path.to_path_buf(),
        action,
        source,
    }
}

/// One compressed frame and what it holds.
struct Frame {
    first: u64,
    count: u32,
    raw_len: u32,
    /// The chain head before its first entry, and after its last.
    prev_hash: Hash,
    last_hash: Hash,
    bytes: Vec<u8>,
}

/// Cuts verified entries into frames and frames into segments.
struct SegmentBuilder<'a> {
    dir: &'a Path,
    config: ArchiveConfig,
    /// Raw bytes of the frame being filled, its first sequence and count.
    raw: Vec<u8>,
    raw_first: u64,
    raw_count: u32,
    /// The chain head before `raw_first`.
    raw_prev: Hash,
    /// The chain head after the last pushed entry.
    head: Hash,
    /// Sealed frames of the segment being filled.
    frames: Vec<Frame>,
    written: Vec<SegmentWrite>,
}

impl<'a> SegmentBuilder<'a> {
    fn new(dir: &'a Path, config: ArchiveConfig, from: u64, prev_hash: Hash) -> Self {
        SegmentBuilder {
            dir,
            config,
            raw: Vec::with_capacity(FRAME_RAW_BYTES_MAX),
            raw_first: from,
            raw_count: 0,
            raw_prev: prev_hash,
            head: prev_hash,
            frames: Vec::new(),
            written: Vec::new(),
        }
    }

    /// Adds the verified entry `sequence` (encoded bytes `value`, hashing
    /// to `hash`), sealing the frame first when it would overflow.
    fn push(&mut self, sequence: u64, value: &[u8], hash: Hash) -> Result<(), ArchiveError> {
        if self.raw.len() + 4 + value.len() > FRAME_RAW_BYTES_MAX {
            self.seal_frame()?;
        }
        if self.raw_count == 0 {
            self.raw_first = sequence;
            self.raw_prev = self.head;
        }
        // Verified before: an entry is at most ENTRY_BYTES_MAX, far below
        // a frame, so the length fits its u32 prefix.
        assert!(value.len() <= ENTRY_BYTES_MAX);
        let len = value.len() as u32;
        self.raw.extend_from_slice(&len.to_le_bytes());
        self.raw.extend_from_slice(value);
        assert!(self.raw.len() <= FRAME_RAW_BYTES_MAX);
        self.raw_count += 1;
        self.head = hash;
        Ok(())
    }

    /// Compresses the frame being filled and adds it to the segment,
    /// writing the segment first if the frame would not fit in it.
    fn seal_frame(&mut self) -> Result<(), ArchiveError> {
        if self.raw_count == 0 {
            return Ok(());
        }
        let bytes = zstd::bulk::compress(&self.raw, self.config.zstd_level)
            .map_err(|err| io_error(self.dir, "compressing a frame", err))?;
        assert!(bytes.len() <= FRAME_COMPRESSED_BYTES_MAX);
        let frame = Frame {
            first: self.raw_first,
            count: self.raw_count,
            raw_len: self.raw.len() as u32,
            prev_hash: self.raw_prev,
            last_hash: self.head,
            bytes,
        };
        self.raw.clear();
        self.raw_count = 0;
        let body: usize = self.frames.iter().map(|f| f.bytes.len()).sum();
        let grown = segment_bytes(self.frames.len() + 1, body + frame.bytes.len());
        if !self.frames.is_empty() && grown > self.config.segment_bytes_max {
            self.write_segment()?;
        }
        self.frames.push(frame);
        Ok(())
    }

    /// Encodes the sealed frames as one segment and persists it.
    fn write_segment(&mut self) -> Result<(), ArchiveError> {
        let frames = std::mem::take(&mut self.frames);
        let (Some(first), Some(last)) = (frames.first(), frames.last()) else {
            return Ok(());
        };
        let (from, to) = (first.first, last.first + u64::from(last.count));
        let (prev_hash, last_hash) = (first.prev_hash, last.last_hash);
        let bytes = encode_segment(from, to, &prev_hash, &last_hash, &frames);
        assert!(bytes.len() as u64 <= self.config.segment_bytes_max);
        let path = self
            .dir
            .join(segment_name(from, to, &prev_hash, &last_hash));
        let already_present = persist(self.dir, &path, &bytes)?;
        self.written.push(SegmentWrite {
            segment: SegmentInfo {
                path,
                from,
                to,
                prev_hash,
                last_hash,
                bytes: bytes.len() as u64,
            },
            already_present,
        });
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<SegmentWrite>, ArchiveError> {
        self.seal_frame()?;
        self.write_segment()?;
        Ok(self.written)
    }
}

/// Size of a segment of `frames` frames whose compressed bytes total `body`.
fn segment_bytes(frames: usize, body: usize) -> u64 {
    (HEADER_BYTES + frames * INDEX_ENTRY_BYTES + INDEX_CHECKSUM_BYTES + body) as u64
}

/// The segment file's bytes (module docs).
fn encode_segment(from: u64, to: u64, prev: &Hash, last: &Hash, frames: &[Frame]) -> Vec<u8> {
    let body: usize = frames.iter().map(|f| f.bytes.len()).sum();
    let mut out = Vec::with_capacity(segment_bytes(frames.len(), body) as usize);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&SEGMENT_FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&from.to_be_bytes());
    out.extend_from_slice(&to.to_be_bytes());
    out.extend_from_slice(prev);
    out.extend_from_slice(last);
    // Frames per segment are bounded by its size (over 50 bytes each).
    out.extend_from_slice(&(frames.len() as u32).to_le_bytes());
    let checksum = Sha256::digest(&out);
    out.extend_from_slice(&checksum);
    let index_start = out.len();
    for frame in frames {
        out.extend_from_slice(&frame.first.to_be_bytes());
        out.extend_from_slice(&frame.count.to_le_bytes());
        out.extend_from_slice(&frame.raw_len.to_le_bytes());
        out.extend_from_slice(&(frame.bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(&Sha256::digest(&frame.bytes));
    }
    let checksum = Sha256::digest(&out[index_start..]);
    out.extend_from_slice(&checksum);
    for frame in frames {
        out.extend_from_slice(&frame.bytes);
    }
    out
}

/// `<from>-<to>-<prev>-<last>.fwseg` (module docs).
pub fn segment_name(from: u64, to: u64, prev_hash: &Hash, last_hash: &Hash) -> String {
    format!(
        "{from:020}-{to:020}-{}-{}{SEGMENT_SUFFIX}",
        hex(&prev_hash[..NAME_HASH_BYTES]),
        hex(&last_hash[..NAME_HASH_BYTES])
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `bytes` as `path` durably: temporary file, fsync, rename, fsync
/// of the directory. An existing identical file is kept (`Ok(true)`); an
/// existing different one is refused.
fn persist(dir: &Path, path: &Path, bytes: &[u8]) -> Result<bool, ArchiveError> {
    match fs::read(path) {
        // Also fsync the directory: an earlier run may have failed between
        // its rename and its directory fsync.
        Ok(existing) if existing == bytes => return sync_dir(dir).map(|()| true),
        Ok(_) => {
            return Err(ArchiveError::SegmentExists {
                segment: path.to_path_buf(),
            })
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(io_error(path, "reading an existing segment", err)),
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let temp = dir.join(format!(".{}.tmp", name.unwrap_or_default()));
    let mut file = File::create(&temp).map_err(|e| io_error(&temp, "creating a segment", e))?;
    file.write_all(bytes)
        .map_err(|e| io_error(&temp, "writing a segment", e))?;
    file.sync_all()
        .map_err(|e| io_error(&temp, "syncing a segment", e))?;
    drop(file);
    fs::rename(&temp, path).map_err(|e| io_error(path, "renaming a segment into place", e))?;
    sync_dir(dir)?;
    Ok(false)
}

/// fsyncs a directory, so the names created or renamed in it are durable.
fn sync_dir(dir: &Path) -> Result<(), ArchiveError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, "syncing the archive directory", e))
}

/// Creates the archive directory if it is missing, durably (its parent is
/// fsynced so the new name survives a power cut).
fn ensure_dir(dir: &Path) -> Result<(), ArchiveError> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir).map_err(|e| io_error(dir, "creating the archive directory", e))?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        sync_dir(parent)?;
    }
    Ok(())
}

/// Writes the live entries `[from, to)` of `storage` as segments in `dir`
/// (created if missing), continuing the chain at `prev_hash` (the hash of
/// entry `from - 1`). Each entry is verified before it is archived (key,
/// envelope, checksum, link), so damage is never archived as history.
/// Returns the segments in order; segments present already and identical
/// are kept (`already_present`).
pub fn write_segments<S: LogStorage + ?Sized>(
    dir: &Path,
    storage: &S,
    from: u64,
    to: u64,
    prev_hash: Hash,
    config: &ArchiveConfig,
) -> Result<Vec<SegmentWrite>, ArchiveError> {
    config.validate()?;
    if from >= to {
        return Ok(Vec::new());
    }
    ensure_dir(dir)?;
    let mut builder = SegmentBuilder::new(dir, *config, from, prev_hash);
    let mut expected = from;
    let mut head = prev_hash;
    for item in storage.read_from(from) {
        if expected == to {
            break;
        }
        let raw = item?;
        check_stored_entry(expected, &head, &raw)?;
        head = super::envelope::hash_bytes(&raw.value);
        builder.push(expected, &raw.value, head)?;
        expected += 1;
    }
    if expected != to {
        return Err(ArchiveError::LiveEnded { end: expected, to });
    }
    builder.finish()
}

/// The range and hash prefixes a segment file name states.
struct NamedRange {
    from: u64,
    to: u64,
    prev: String,
    last: String,
}

/// Parses `<from>-<to>-<prev>-<last>.fwseg`; `None` for any other name.
fn parse_name(name: &str) -> Option<NamedRange> {
    let stem = name.strip_suffix(SEGMENT_SUFFIX)?;
    let mut parts = stem.split('-');
    let (from, to, prev, last) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex_ok =
        |s: &str| s.len() == 2 * NAME_HASH_BYTES && s.bytes().all(|b| b.is_ascii_hexdigit());
    if parts.next().is_some()
        || from.len() != 20
        || to.len() != 20
        || !hex_ok(prev)
        || !hex_ok(last)
    {
        return None;
    }
    Some(NamedRange {
        from: from.parse().ok()?,
        to: to.parse().ok()?,
        prev: prev.to_ascii_lowercase(),
        last: last.to_ascii_lowercase(),
    })
}

/// Whether `name` is a temporary file of a segment being written (left
/// by a crash before its rename; never read, overwritten by the next try).
fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

/// The decoded header of a segment.
pub(super) struct Header {
    pub(super) from: u64,
    pub(super) to: u64,
    pub(super) prev_hash: Hash,
    pub(super) last_hash: Hash,
    pub(super) frames: u32,
}

/// Decodes and checks a header (magic, version, checksum).
pub(super) fn decode_header(bytes: &[u8]) -> Result<Header, SegmentFault> {
    if bytes.len() < HEADER_BYTES {
        return Err(SegmentFault::TooShort {
            len: bytes.len() as u64,
        });
    }
    if bytes[..4] != MAGIC {
        return Err(SegmentFault::WrongMagic);
    }
    let found = u16::from_le_bytes([bytes[4], bytes[5]]);
    if found != SEGMENT_FORMAT_VERSION {
        return Err(SegmentFault::UnsupportedVersion { found });
    }
    let (fields, checksum) = bytes[..HEADER_BYTES].split_at(HEADER_FIELDS_BYTES);
    if Sha256::digest(fields).as_slice() != checksum {
        return Err(SegmentFault::HeaderChecksum);
    }
    let mut u64_at = [0u8; 8];
    let hash_at = |at: usize| -> Hash {
        let mut hash = [0u8; 32];
        hash.copy_from_slice(&fields[at..at + 32]);
        hash
    };
    let (prev_hash, last_hash) = (hash_at(22), hash_at(54));
    u64_at.copy_from_slice(&fields[6..14]);
    let from = u64::from_be_bytes(u64_at);
    u64_at.copy_from_slice(&fields[14..22]);
    let to = u64::from_be_bytes(u64_at);
    let frames = u32::from_le_bytes([fields[86], fields[87], fields[88], fields[89]]);
    Ok(Header {
        from,
        to,
        prev_hash,
        last_hash,
        frames,
    })
}

/// Reads and checks the header of the segment at `path`, against its name.
fn read_info(path: &Path, named: &NamedRange) -> Result<SegmentInfo, ArchiveError> {
    let fault = |fault: SegmentFault| ArchiveError::Segment {
        segment: path.to_path_buf(),
        sequence: None,
        fault,
    };
    let mut file = File::open(path).map_err(|e| io_error(path, "opening a segment", e))?;
    let bytes = file
        .metadata()
        .map_err(|e| io_error(path, "reading a segment's size", e))?
        .len();
    let mut head = Vec::with_capacity(HEADER_BYTES);
    (&mut file)
        .take(HEADER_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(|e| io_error(path, "reading a segment header", e))?;
    let header = decode_header(&head).map_err(fault)?;
    let agrees = header.from == named.from
        && header.to == named.to
        && header.from < header.to
        && hex(&header.prev_hash[..NAME_HASH_BYTES]) == named.prev
        && hex(&header.last_hash[..NAME_HASH_BYTES]) == named.last;
    if !agrees {
        return Err(fault(SegmentFault::NameMismatch {
            from: header.from,
            to: header.to,
        }));
    }
    Ok(SegmentInfo {
        path: path.to_path_buf(),
        from: header.from,
        to: header.to,
        prev_hash: header.prev_hash,
        last_hash: header.last_hash,
        bytes,
    })
}

/// The segments in `dir`, in order, after checking that they form one
/// chain from sequence 0: each header verifies and agrees with its name,
/// each segment starts where the one before ends and continues its hash.
/// Reads headers only (a full check is
/// [`verify_with_archive`](super::verify_with_archive)). A missing
/// directory is an empty archive; temporary files are skipped; any other
/// file is refused as [`ArchiveError::ForeignFile`].
pub fn list_segments(dir: &Path) -> Result<Vec<SegmentInfo>, ArchiveError> {
    let listing = match fs::read_dir(dir) {
        Ok(listing) => listing,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(io_error(dir, "listing the archive", err)),
    };
    let mut segments = Vec::new();
    for item in listing {
        let item = item.map_err(|e| io_error(dir, "listing the archive", e))?;
        let name = item.file_name().to_string_lossy().into_owned();
        if is_temp_name(&name) {
            continue;
        }
        let Some(named) = parse_name(&name) else {
            return Err(ArchiveError::ForeignFile { path: item.path() });
        };
        segments.push(read_info(&item.path(), &named)?);
    }
    segments.sort_by_key(|segment| segment.from);
    check_contiguous(dir, &segments)?;
    Ok(segments)
}

/// Refuses segments that are not one chain from sequence 0.
fn check_contiguous(dir: &Path, segments: &[SegmentInfo]) -> Result<(), ArchiveError> {
    let mut expected = 0;
    let mut head = genesis_hash();
    for segment in segments {
        if segment.from != expected {
            return Err(ArchiveError::Gap {
                dir: dir.to_path_buf(),
                expected,
                found: Some(segment.from),
            });
        }
        if segment.prev_hash != head {
            return Err(ArchiveError::Segment {
                segment: segment.path.clone(),
                sequence: Some(segment.from),
                fault: SegmentFault::Unlinked {
                    sequence: segment.from.saturating_sub(1),
                },
            });
        }
        expected = segment.to;
        head = segment.last_hash;
    }
    Ok(())
}

/// A frame's index entry.
#[derive(Debug, Clone, Copy)]
pub(super) struct FrameIndex {
    pub(super) first: u64,
    pub(super) count: u32,
    pub(super) raw_len: u32,
    pub(super) offset: usize,
    pub(super) len: usize,
    pub(super) checksum: Hash,
}

/// Parses and checks the frame index of a whole segment file `bytes`
/// whose header is `header`: the index checksum, the frames' ranges
/// (contiguous, covering the header's range), lengths within bounds, and
/// the file's size equal to what the index accounts for.
pub(super) fn decode_index(bytes: &[u8], header: &Header) -> Result<Vec<FrameIndex>, SegmentFault> {
    let frames = header.frames as usize;
    let index_end = HEADER_BYTES + frames * INDEX_ENTRY_BYTES;
    let body_start = index_end + INDEX_CHECKSUM_BYTES;
    if bytes.len() < body_start {
        return Err(SegmentFault::TooShort {
            len: bytes.len() as u64,
        });
    }
    let index = &bytes[HEADER_BYTES..index_end];
    if Sha256::digest(index).as_slice() != &bytes[index_end..body_start] {
        return Err(SegmentFault::IndexDamaged {
            detail: "checksum mismatch".into(),
        });
    }
    let bad = |detail: String| SegmentFault::IndexDamaged { detail };
    let mut out = Vec::with_capacity(frames);
    let (mut expected, mut offset) = (header.from, body_start);
    for entry in index.chunks_exact(INDEX_ENTRY_BYTES) {
        let first = u64::from_be_bytes(entry[..8].try_into().unwrap_or_default());
        let u32_at =
            |at: usize| u32::from_le_bytes(entry[at..at + 4].try_into().unwrap_or_default());
        let (count, raw_len, len) = (u32_at(8), u32_at(12), u32_at(16) as usize);
        if first != expected || count == 0 {
            return Err(bad(format!(
                "a frame starts at {first}, {expected} expected"
            )));
        }
        if raw_len as usize > FRAME_RAW_BYTES_MAX || len > FRAME_COMPRESSED_BYTES_MAX {
            return Err(bad(format!(
                "the frame at {first} is over the frame size limit"
            )));
        }
        let mut checksum = [0u8; 32];
        checksum.copy_from_slice(&entry[20..52]);
        out.push(FrameIndex {
            first,
            count,
            raw_len,
            offset,
            len,
            checksum,
        });
        expected = first.saturating_add(u64::from(count));
        offset += len;
    }
    if expected != header.to {
        return Err(bad(format!(
            "the frames end at {expected}, the header says {}",
            header.to
        )));
    }
    if offset != bytes.len() {
        return Err(SegmentFault::SizeMismatch {
            len: bytes.len() as u64,
            expected: offset as u64,
        });
    }
    Ok(out)
}

/// Reads a whole segment file, refusing one over
/// [`SEGMENT_BYTES_MAX_LIMIT`] before reading it.
pub(super) fn read_segment_file(path: &Path) -> Result<Vec<u8>, ArchiveError> {
    let mut file = File::open(path).map_err(|e| io_error(path, "opening a segment", e))?;
    let len = file
        .metadata()
        .map_err(|e| io_error(path, "reading a segment's size", e))?
        .len();
    if len > SEGMENT_BYTES_MAX_LIMIT {
        return Err(ArchiveError::Segment {
            segment: path.to_path_buf(),
            sequence: None,
            fault: SegmentFault::SizeMismatch {
                len,
                expected: SEGMENT_BYTES_MAX_LIMIT,
            },
        });
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.read_to_end(&mut bytes)
        .map_err(|e| io_error(path, "reading a segment", e))?;
    Ok(bytes)
}

/// Decompresses one frame into at most its stated raw length.
pub(super) fn decompress_frame(bytes: &[u8], raw_len: u32) -> io::Result<Vec<u8>> {
    let raw = zstd::bulk::decompress(bytes, raw_len as usize)?;
    if raw.len() != raw_len as usize {
        return Err(io::Error::other(format!(
            "{} raw bytes, {raw_len} stated",
            raw.len()
        )));
    }
    Ok(raw)
}

/// What a damaged frame still yields: its bytes decompressed as far as
/// zstd goes before it detects the damage (block by block), at most
/// `raw_len` bytes. The entries in it can still be checked one by one, so
/// the first one lost is named.
pub(super) fn decompress_prefix(bytes: &[u8], raw_len: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let Ok(decoder) = zstd::stream::read::Decoder::with_buffer(bytes) else {
        return out;
    };
    let _ = decoder
        .single_frame()
        .take(u64::from(raw_len))
        .read_to_end(&mut out);
    out
}

/// Splits a frame's raw bytes into its entries (length-prefixed), and
/// whether the framing held to the end (else the entries before the
/// break).
pub(super) fn split_entries(raw: &[u8]) -> (Vec<&[u8]>, bool) {
    let mut entries = Vec::new();
    let mut rest = raw;
    while !rest.is_empty() {
        let Some((len, tail)) = rest.split_at_checked(4) else {
            return (entries, false);
        };
        let len = u32::from_le_bytes(len.try_into().unwrap_or_default()) as usize;
        let Some((entry, tail)) = tail.split_at_checked(len) else {
            return (entries, false);
        };
        entries.push(entry);
        rest = tail;
    }
    (entries, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::hash_bytes;

    #[test]
    fn a_segment_name_round_trips_and_other_names_are_not_segments() {
        let (prev, last) = (hash_bytes(b"prev"), hash_bytes(b"last"));
        let name = segment_name(7, 1_234, &prev, &last);
        assert_eq!(
            name.len(),
            20 + 1 + 20 + 1 + 16 + 1 + 16 + SEGMENT_SUFFIX.len()
        );
        let named = parse_name(&name).expect("parses");
        assert_eq!((named.from, named.to), (7, 1_234));
        assert_eq!(named.prev, hex(&prev[..NAME_HASH_BYTES]));
        assert_eq!(named.last, hex(&last[..NAME_HASH_BYTES]));
        for other in ["notes.txt", "7-1234.fwseg", &name.replace(".fwseg", ".zst")] {
            assert!(parse_name(other).is_none(), "{other}");
        }
        assert!(is_temp_name(&format!(".{name}.tmp")));
        assert!(!is_temp_name(&name));
    }

    #[test]
    fn every_flipped_byte_of_a_header_is_refused() {
        let (prev, last) = (hash_bytes(b"prev"), hash_bytes(b"last"));
        let frame = Frame {
            first: 10,
            count: 1,
            raw_len: 4,
            prev_hash: prev,
            last_hash: last,
            bytes: vec![1, 2, 3],
        };
        let bytes = encode_segment(10, 11, &prev, &last, &[frame]);
        let header = decode_header(&bytes).expect("decodes");
        assert_eq!((header.from, header.to, header.frames), (10, 11, 1));
        assert_eq!((header.prev_hash, header.last_hash), (prev, last));
        assert_eq!(decode_index(&bytes, &header).expect("index").len(), 1);
        for at in 0..HEADER_BYTES {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x01;
            assert!(decode_header(&damaged).is_err(), "byte {at}");
        }
        for at in HEADER_BYTES..bytes.len() - 3 {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x01;
            assert!(decode_index(&damaged, &header).is_err(), "byte {at}");
        }
    }

    #[test]
    fn the_configured_bounds_are_checked() {
        assert!(ArchiveConfig::default().validate().is_ok());
        let small = ArchiveConfig {
            segment_bytes_max: SEGMENT_BYTES_MIN - 1,
            ..ArchiveConfig::default()
        };
        assert!(matches!(
            small.validate(),
            Err(ArchiveError::SegmentBytesOutOfRange { .. })
        ));
        let level = ArchiveConfig {
            zstd_level: 0,
            ..ArchiveConfig::default()
        };
        assert!(matches!(
            level.validate(),
            Err(ArchiveError::ZstdLevelOutOfRange { level: 0 })
        ));
    }
}
