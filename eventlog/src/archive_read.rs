//! Reading the whole history: the archive's segments in order, then the
//! live log, as one verified chain ([`HistoryReader`]), and
//! [`verify_with_archive`] on top of it. Reading only: nothing is written,
//! to the archive or to the storage.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use super::archive::{
    decode_header, decode_index, decompress_frame, decompress_prefix, list_segments,
    read_segment_file, split_entries, ArchiveError, FrameIndex, SegmentFault, SegmentInfo,
};
use super::envelope::{genesis_hash, hash_bytes, EnvelopeFault, Hash};
use super::storage::{LiveStart, LogStorage, RawEntry, StorageError};
use super::verify::{
    check_entry_bytes, check_scan_end, check_stored_entry, EntryFault, VerifyError, VerifyReport,
};

/// One verified entry of the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// Its sequence.
    pub sequence: u64,
    /// Its payload (decode with [`decode_payload`](super::decode_payload)).
    pub payload: Vec<u8>,
    /// Whether it was read from the archive (else from the live log).
    pub archived: bool,
    /// The hash of its encoded bytes (the next entry's `prev_hash`).
    pub hash: Hash,
}

/// What [`verify_with_archive`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryReport {
    /// The segments verified, in order.
    pub segments: Vec<SegmentInfo>,
    /// The sequence after the archive's last entry (0 without one).
    pub archive_end: u64,
    /// The whole chain: `entries` is the log's length, `first_live` the
    /// live start, `head_hash` the head after the last live entry,
    /// `entry_bytes` the encoded bytes of every entry read, archived ones
    /// included.
    pub log: VerifyReport,
}

/// A segment being read: its bytes, frames, and the next frame.
struct OpenSegment {
    path: PathBuf,
    bytes: Vec<u8>,
    frames: Vec<FrameIndex>,
    next: usize,
    last_hash: Hash,
    to: u64,
}

/// Reads the history in order, archive first, verifying every entry as
/// [`verify`](super::verify) does (checksum, sequence, link to the one
/// before) across segment boundaries and into the live log. Yields
/// entries from `from` on; an `Err` is the first problem, after which it
/// yields nothing more.
///
/// Segments entirely below `from` are skipped unread (their headers'
/// chain is still checked when listed); a full verification starts at 0.
pub struct HistoryReader<'a, S: LogStorage + ?Sized> {
    storage: &'a S,
    from: u64,
    segments: std::vec::IntoIter<SegmentInfo>,
    listed: Vec<SegmentInfo>,
    current: Option<OpenSegment>,
    queue: VecDeque<HistoryEntry>,
    /// An error found after the entries in `queue`: reported after them.
    pending: Option<ArchiveError>,
    expected: u64,
    head: Hash,
    start: LiveStart,
    /// The chain head at the live start, seen while reading the archive.
    head_at_start: Option<Hash>,
    live: Option<Live<'a>>,
    entry_bytes: u64,
    done: bool,
}

/// The live part of a read.
struct Live<'a> {
    entries: Box<dyn Iterator<Item = Result<RawEntry, StorageError>> + 'a>,
    /// Entries below this are archived too (a re-run was cut short): read
    /// and checked, not yielded.
    archive_end: u64,
    archive_head: Hash,
}

impl<'a, S: LogStorage + ?Sized> HistoryReader<'a, S> {
    /// Lists the segments in `dir` (see [`list_segments`]) and reads the
    /// live start of `storage`; entries are read as the reader is pulled.
    pub fn open(dir: &Path, storage: &'a S, from: u64) -> Result<Self, ArchiveError> {
        let listed = list_segments(dir)?;
        let start = storage.live_start()?;
        Ok(HistoryReader {
            storage,
            from,
            segments: listed.clone().into_iter(),
            listed,
            current: None,
            queue: VecDeque::new(),
            pending: None,
            expected: 0,
            head: genesis_hash(),
            start,
            head_at_start: (start.sequence == 0).then(genesis_hash),
            live: None,
            entry_bytes: 0,
            done: false,
        })
    }

    /// The segments this reader reads, in order.
    pub fn segments(&self) -> &[SegmentInfo] {
        &self.listed
    }

    /// Next entry, or `None` at the end (after the end's cross-check).
    fn step(&mut self) -> Result<Option<HistoryEntry>, ArchiveError> {
        loop {
            if let Some(entry) = self.queue.pop_front() {
                return Ok(Some(entry));
            }
            if let Some(err) = self.pending.take() {
                return Err(err);
            }
            if self.current.is_some() {
                self.next_frame();
                continue;
            }
            if let Some(segment) = self.segments.next() {
                self.open_segment(segment)?;
                continue;
            }
            return self.next_live();
        }
    }

    /// Opens `segment` (header and index checked) or, when it lies
    /// entirely below `from`, steps over it on its header's word.
    fn open_segment(&mut self, segment: SegmentInfo) -> Result<(), ArchiveError> {
        let fault = |fault: SegmentFault| ArchiveError::Segment {
            segment: segment.path.clone(),
            sequence: None,
            fault,
        };
        if segment.from != self.expected || segment.prev_hash != self.head {
            return Err(fault(SegmentFault::Unlinked {
                sequence: segment.from.saturating_sub(1),
            }));
        }
        let inside = |s: u64| (segment.from..segment.to).contains(&s);
        if segment.to <= self.from && !inside(self.start.sequence) {
            self.expected = segment.to;
            self.head = segment.last_hash;
            return Ok(());
        }
        let bytes = read_segment_file(&segment.path)?;
        let header = decode_header(&bytes).map_err(fault)?;
        if header.from != segment.from || header.to != segment.to {
            let (from, to) = (header.from, header.to);
            return Err(fault(SegmentFault::NameMismatch { from, to }));
        }
        let frames = decode_index(&bytes, &header).map_err(fault)?;
        self.current = Some(OpenSegment {
            path: segment.path,
            bytes,
            frames,
            next: 0,
            last_hash: header.last_hash,
            to: header.to,
        });
        Ok(())
    }

    /// Decodes the current segment's next frame into `queue` (and a
    /// damage into `pending`), or closes the segment after its last.
    fn next_frame(&mut self) {
        let Some(segment) = self.current.as_mut() else {
            return;
        };
        let Some(frame) = segment.frames.get(segment.next).copied() else {
            let (path, to, last_hash) = (segment.path.clone(), segment.to, segment.last_hash);
            self.current = None;
            if self.expected != to || self.head != last_hash {
                self.pending = Some(ArchiveError::Segment {
                    segment: path,
                    sequence: Some(to.saturating_sub(1)),
                    fault: SegmentFault::Entry(EntryFault::BrokenChain),
                });
            }
            return;
        };
        segment.next += 1;
        let path = segment.path.clone();
        let bytes = &segment.bytes[frame.offset..frame.offset + frame.len];
        let intact = hash_bytes(bytes) == frame.checksum;
        let damage = match decompress_frame(bytes, frame.raw_len) {
            Ok(raw) => self.take_entries(&raw, &frame, intact),
            Err(err) => {
                // Check what still decompresses, so the damage is named
                // by the first entry lost rather than by the frame.
                let prefix = decompress_prefix(bytes, frame.raw_len);
                match self.take_entries(&prefix, &frame, false) {
                    Some((sequence, SegmentFault::Entry(fault))) => {
                        Some((sequence, SegmentFault::Entry(fault)))
                    }
                    _ => Some((
                        self.expected,
                        SegmentFault::Entry(EntryFault::Envelope(EnvelopeFault::Undecodable {
                            detail: format!(
                                "its compressed frame ({}..{}) is damaged: {err}",
                                frame.first,
                                frame.first + u64::from(frame.count)
                            ),
                        })),
                    )),
                }
            }
        };
        if let Some((sequence, fault)) = damage {
            self.pending = Some(ArchiveError::Segment {
                segment: path,
                sequence: Some(sequence),
                fault,
            });
            self.current = None;
        }
    }

    /// Checks the entries of one decompressed frame, queueing the good
    /// ones; returns the first damage and the sequence it names: a bad
    /// entry, the first entry its broken framing lost, or (the frame's
    /// checksum failed yet every entry verifies) the frame's first.
    fn take_entries(
        &mut self,
        raw: &[u8],
        frame: &FrameIndex,
        intact: bool,
    ) -> Option<(u64, SegmentFault)> {
        let (entries, framed) = split_entries(raw);
        for value in &entries {
            let sequence = self.expected;
            if sequence == self.start.sequence {
                self.head_at_start = Some(self.head);
            }
            let envelope = match check_entry_bytes(sequence, &self.head, value) {
                Ok(envelope) => envelope,
                Err(fault) => return Some((sequence, SegmentFault::Entry(fault))),
            };
            self.head = hash_bytes(value);
            self.entry_bytes += value.len() as u64;
            self.expected += 1;
            if sequence >= self.from {
                self.queue.push_back(HistoryEntry {
                    sequence,
                    payload: envelope.payload,
                    archived: true,
                    hash: self.head,
                });
            }
        }
        let counted = entries.len() as u64 == u64::from(frame.count);
        let (first, end) = (frame.first, frame.first + u64::from(frame.count));
        let damaged = |detail: &str| SegmentFault::FrameDamaged {
            first,
            end,
            detail: detail.to_string(),
        };
        match (intact, framed && counted) {
            (true, true) => None,
            (_, false) => Some((self.expected, damaged("its entries' framing is broken"))),
            (false, true) => Some((
                first,
                damaged("checksum mismatch (its entries still verify)"),
            )),
        }
    }

    /// The next live entry; at the first call, checks that the live log
    /// continues the archive.
    fn next_live(&mut self) -> Result<Option<HistoryEntry>, ArchiveError> {
        if self.live.is_none() {
            self.live = Some(self.join_live()?);
        }
        loop {
            let Some(live) = self.live.as_mut() else {
                return Ok(None);
            };
            let Some(item) = live.entries.next() else {
                return self.end_live();
            };
            let raw = item?;
            let sequence = self.expected;
            let envelope = check_stored_entry(sequence, &self.head, &raw)?;
            self.head = hash_bytes(&raw.value);
            self.expected += 1;
            if sequence < live.archive_end {
                // Archived and still live: the same chain must reach the
                // same head where the archive ends.
                if self.expected == live.archive_end && self.head != live.archive_head {
                    return Err(ArchiveError::OverlapDiffers { sequence });
                }
                continue;
            }
            self.entry_bytes += raw.value.len() as u64;
            if sequence >= self.from {
                return Ok(Some(HistoryEntry {
                    sequence,
                    payload: envelope.payload,
                    archived: false,
                    hash: self.head,
                }));
            }
        }
    }

    /// Where the live log joins the archive: at its end, or (after a cut
    /// short re-run) inside it, at the same chain head.
    fn join_live(&mut self) -> Result<Live<'a>, ArchiveError> {
        let (archive_end, archive_head) = (self.expected, self.head);
        let first_live = self.start.sequence;
        let boundary = |unlinked| ArchiveError::Boundary {
            archive_end,
            first_live,
            unlinked,
        };
        if first_live > archive_end {
            return Err(boundary(false));
        }
        let head_at_start = if first_live == archive_end {
            Some(archive_head)
        } else {
            self.head_at_start
        };
        if head_at_start != Some(self.start.prev_hash) {
            return Err(boundary(true));
        }
        self.expected = first_live;
        self.head = self.start.prev_hash;
        Ok(Live {
            entries: self.storage.read_from(first_live),
            archive_end,
            archive_head,
        })
    }

    /// The end of the live log: it must reach the archive's end and agree
    /// with the engine's last key.
    fn end_live(&mut self) -> Result<Option<HistoryEntry>, ArchiveError> {
        let archive_end = self.live.as_ref().map_or(0, |live| live.archive_end);
        self.live = None;
        self.done = true;
        if self.expected < archive_end {
            return Err(ArchiveError::LiveEnded {
                end: self.expected,
                to: archive_end,
            });
        }
        check_scan_end(self.storage, &self.start, self.expected)?;
        Ok(None)
    }

    /// The report once the reader ended without an error (before that,
    /// it describes what was read so far).
    pub fn report(&self) -> HistoryReport {
        HistoryReport {
            segments: self.listed.clone(),
            archive_end: self.listed.last().map_or(0, |s| s.to),
            log: VerifyReport {
                entries: self.expected,
                first_live: self.start.sequence,
                last_sequence: self.expected.checked_sub(1),
                head_hash: self.head,
                entry_bytes: self.entry_bytes,
            },
        }
    }
}

impl<S: LogStorage + ?Sized> Iterator for HistoryReader<'_, S> {
    type Item = Result<HistoryEntry, ArchiveError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(entry)) => Some(Ok(entry)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(err) => {
                self.done = true;
                Some(Err(err))
            }
        }
    }
}

/// Verifies the whole history: every segment in `dir` in order (header,
/// index, every frame's checksum, every entry's checksum, sequence and
/// link), then the live log in `storage` from its recorded start, which
/// must continue the archive's chain. Passes each payload, in order, to
/// `check` (as [`verify_with`](super::verify_with) does); its first `Err`
/// stops verification at that sequence.
///
/// A damaged segment is named with the first damaged sequence
/// ([`ArchiveError::Segment`]). Reading only: nothing is written.
pub fn verify_with_archive<S: LogStorage + ?Sized>(
    dir: &Path,
    storage: &S,
    mut check: impl FnMut(u64, &[u8]) -> Result<(), String>,
) -> Result<HistoryReport, ArchiveError> {
    let mut reader = HistoryReader::open(dir, storage, 0)?;
    for entry in reader.by_ref() {
        let entry = entry?;
        if let Err(reason) = check(entry.sequence, &entry.payload) {
            let fault = EntryFault::Rejected { reason };
            return Err(VerifyError::Entry {
                sequence: entry.sequence,
                fault,
            }
            .into());
        }
    }
    Ok(reader.report())
}

/// [`verify_snapshots`](super::verify_snapshots) across the archive in
/// `dir` and the live log (`log verify --deep --archive`): the whole
/// history is verified as [`verify_with_archive`] does, folded into `acc`
/// from genesis with `fold`, and every stored snapshot is judged when the
/// fold has taken exactly its `covers` entries (record, link to the chain,
/// `compare`). A `fold` error refuses the history; a snapshot that fails
/// is reported in `first_difference`. Reads only.
pub fn verify_snapshots_with_archive<S: LogStorage + ?Sized, A>(
    dir: &Path,
    storage: &S,
    acc: &mut A,
    mut fold: impl FnMut(&mut A, u64, &[u8]) -> Result<(), String>,
    mut compare: impl FnMut(&A, u64, &[u8]) -> Result<(), String>,
) -> Result<(super::SnapshotsReport, HistoryReport), ArchiveError> {
    let mut pending: Vec<u64> = storage.snapshot_sequences()?;
    pending.sort_unstable();
    let mut pending = pending.into_iter().peekable();
    let mut agreeing = Vec::new();
    let mut first_difference: Option<(u64, String)> = None;
    let mut judge = |acc: &A, at: u64, head: &Hash, first: &mut Option<(u64, String)>| {
        while let Some(&covers) = pending.peek() {
            if covers > at || first.is_some() {
                break;
            }
            pending.next();
            if covers < at {
                // Below the first entry this pass judged: cannot be.
                continue;
            }
            match super::snapshot::judge_snapshot(storage, covers, head, |state| {
                compare(acc, covers, state)
            }) {
                Ok(()) => agreeing.push(covers),
                Err(reason) => *first = Some((covers, reason)),
            }
        }
    };
    let mut reader = HistoryReader::open(dir, storage, 0)?;
    let mut head = genesis_hash();
    for entry in reader.by_ref() {
        let entry = entry?;
        judge(acc, entry.sequence, &head, &mut first_difference);
        if let Err(reason) = fold(acc, entry.sequence, &entry.payload) {
            let fault = EntryFault::Rejected { reason };
            return Err(VerifyError::Entry {
                sequence: entry.sequence,
                fault,
            }
            .into());
        }
        head = entry.hash;
    }
    let history = reader.report();
    judge(acc, history.log.entries, &head, &mut first_difference);
    if first_difference.is_none() {
        if let Some(covers) = pending.next() {
            let beyond = super::SnapshotSkip::BeyondEnd {
                covers,
                end: history.log.entries,
            };
            first_difference = Some((covers, beyond.to_string()));
        }
    }
    let snapshots = super::SnapshotsReport {
        log: history.log.clone(),
        agreeing,
        first_difference,
    };
    Ok((snapshots, history))
}
