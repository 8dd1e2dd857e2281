//! The durable watermark: a lower bound on how many entries are durable,
//! kept outside sled so that sled losing entries is noticed.
//!
//! Why: sled 0.34.7's recovery treats damage inside its segment file (a
//! flipped byte, say) like a torn write and silently drops everything after
//! it. A shortened log still has a valid hash chain, so only an outside
//! record of "this many entries were durable" can reveal the loss.
//!
//! After each successful flush the storage writes the flushed end here. The
//! write is not fsynced (that would double the cost of a commit): the value
//! may lag after a power loss, but it never exceeds what was durable in sled
//! when written, so it never raises a false alarm.
//!
//! Format: 64 bytes, two 32-byte slots written alternately, so a torn write
//! damages at most the slot being written. A slot is magic `FWWM`, a
//! generation (u64 LE), the durable end (u64 LE) and the first 12 bytes of
//! the SHA-256 of those 20 bytes. The valid slot with the highest generation
//! wins.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use sha2::{Digest, Sha256};

/// File name inside the log directory.
pub(super) const WATERMARK_FILE: &str = "fleetweft-durable";

const MAGIC: &[u8; 4] = b"FWWM";
const SLOT_BYTES: usize = 32;
const FILE_BYTES: u64 = 2 * SLOT_BYTES as u64;

/// An open watermark file and the last value written to it.
pub(super) struct Watermark {
    file: File,
    generation: u64,
    durable_end: u64,
}

impl Watermark {
    /// Creates the file with both slots at zero and fsyncs it; the caller
    /// syncs the directory.
    pub(super) fn create(dir: &Path) -> io::Result<()> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(WATERMARK_FILE))?;
        file.write_all_at(&encode_slot(0, 0), 0)?;
        file.write_all_at(&encode_slot(1, 0), SLOT_BYTES as u64)?;
        file.sync_all()
    }

    /// Opens the file and reads the watermark. `Ok(None)` means the file is
    /// missing or neither slot is valid: the caller reports that as damage.
    pub(super) fn open(dir: &Path) -> io::Result<Option<Self>> {
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.join(WATERMARK_FILE))
        {
            Ok(file) => file,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err),
        };
        if file.metadata()?.len() != FILE_BYTES {
            return Ok(None);
        }
        let mut bytes = [0u8; 2 * SLOT_BYTES];
        file.read_exact_at(&mut bytes, 0)?;
        let slots: Vec<Option<(u64, u64)>> =
            bytes.chunks_exact(SLOT_BYTES).map(decode_slot).collect();
        let Some((generation, durable_end)) = slots
            .iter()
            .flatten()
            .copied()
            .max_by_key(|&(generation, _)| generation)
        else {
            return Ok(None);
        };
        let generation = if slots.iter().any(Option::is_none) {
            repair(&file, generation, durable_end)?
        } else {
            generation
        };
        Ok(Some(Watermark {
            file,
            generation,
            durable_end,
        }))
    }

    /// The recorded lower bound on durable entries.
    pub(super) fn durable_end(&self) -> u64 {
        self.durable_end
    }

    /// Records `durable_end` if it is higher than the current value.
    /// Call only after the entries below it are durable.
    pub(super) fn advance(&mut self, durable_end: u64) -> io::Result<()> {
        if durable_end <= self.durable_end {
            return Ok(());
        }
        let generation = self.generation + 1;
        let offset = (generation % 2) * SLOT_BYTES as u64;
        self.file
            .write_all_at(&encode_slot(generation, durable_end), offset)?;
        self.generation = generation;
        self.durable_end = durable_end;
        Ok(())
    }
}

/// Rewrites both slots from the surviving value and fsyncs them.
///
/// Advances are never fsynced, so a power cut may tear the slot being
/// written (the powercut campaign's lazy filesystem zeroes it). Left as it
/// is, that slot would stay damaged on disk while later unsynced advances
/// go to both slots, and the next cut could tear the other one: no valid
/// slot, and a sound log refused as corrupt (found by
/// `fleetweft-powercut` at its third cut). One fsync at open restores the
/// invariant the format relies on: at most the slot being written is torn.
/// Returns the generation now newest on disk.
fn repair(file: &File, generation: u64, durable_end: u64) -> io::Result<u64> {
    let newest = generation.saturating_add(1);
    for g in [generation, newest] {
        let offset = (g % 2) * SLOT_BYTES as u64;
        file.write_all_at(&encode_slot(g, durable_end), offset)?;
    }
    file.sync_all()?;
    Ok(newest)
}

fn encode_slot(generation: u64, durable_end: u64) -> [u8; SLOT_BYTES] {
    let mut slot = [0u8; SLOT_BYTES];
    slot[..4].copy_from_slice(MAGIC);
    slot[4..12].copy_from_slice(&generation.to_le_bytes());
    slot[12..20].copy_from_slice(&durable_end.to_le_bytes());
    let digest = Sha256::digest(&slot[..20]);
    slot[20..].copy_from_slice(&digest[..12]);
    slot
}

/// `(generation, durable_end)` of a valid slot.
fn decode_slot(slot: &[u8]) -> Option<(u64, u64)> {
    let digest = Sha256::digest(&slot[..20]);
    if &slot[..4] != MAGIC || slot[20..] != digest[..12] {
        return None;
    }
    let generation = u64::from_le_bytes(slot[4..12].try_into().ok()?);
    let durable_end = u64::from_le_bytes(slot[12..20].try_into().ok()?);
    Some((generation, durable_end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_and_survives_a_torn_slot() {
        let dir = tempfile::tempdir().expect("temp dir");
        Watermark::create(dir.path()).expect("create");
        let mut mark = Watermark::open(dir.path()).expect("open").expect("valid");
        assert_eq!(mark.durable_end(), 0);
        mark.advance(5).expect("advance");
        mark.advance(9).expect("advance");
        mark.advance(7).expect("never moves back");
        drop(mark);
        let mark = Watermark::open(dir.path()).expect("open").expect("valid");
        assert_eq!(mark.durable_end(), 9);
        // Tear the newest slot (generation 3 lives in slot 1): the older
        // slot still gives a lower bound.
        let file = OpenOptions::new()
            .write(true)
            .open(dir.path().join(WATERMARK_FILE))
            .expect("open file");
        file.write_all_at(&[0xAA; 8], SLOT_BYTES as u64 + 8)
            .expect("tear");
        let mark = Watermark::open(dir.path()).expect("open").expect("valid");
        assert_eq!(mark.durable_end(), 5);
    }

    /// Zeroes one slot, as a power cut tears an unsynced advance.
    fn zero_slot(dir: &Path, slot: u64) {
        let file = OpenOptions::new()
            .write(true)
            .open(dir.join(WATERMARK_FILE))
            .expect("open file");
        file.write_all_at(&[0; SLOT_BYTES], slot * SLOT_BYTES as u64)
            .expect("tear");
    }

    #[test]
    fn a_torn_slot_of_a_new_watermark_is_repaired_too() {
        let dir = tempfile::tempdir().expect("temp dir");
        Watermark::create(dir.path()).expect("create");
        zero_slot(dir.path(), 1); // generation 1 torn: generation 0 is best
        Watermark::open(dir.path()).expect("open").expect("valid");
        let bytes = std::fs::read(dir.path().join(WATERMARK_FILE)).expect("read");
        assert!(
            bytes
                .chunks_exact(SLOT_BYTES)
                .all(|s| decode_slot(s).is_some()),
            "both slots valid after the repair"
        );
    }

    #[test]
    fn a_torn_slot_is_repaired_at_open_so_a_second_cut_leaves_a_valid_one() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(WATERMARK_FILE);
        Watermark::create(dir.path()).expect("create");
        let mut mark = Watermark::open(dir.path()).expect("open").expect("valid");
        mark.advance(5).expect("advance"); // generation 2, slot 0
        drop(mark);
        zero_slot(dir.path(), 1); // the first cut tears slot 1
        let mut mark = Watermark::open(dir.path()).expect("open").expect("valid");
        assert_eq!(mark.durable_end(), 5);
        // What the open left on disk is all a second cut can count on:
        // the advances below are never fsynced.
        let durable = std::fs::read(&path).expect("read");
        mark.advance(9).expect("advance");
        mark.advance(12).expect("advance");
        let last_slot = mark.generation % 2;
        drop(mark);
        // The second cut: unsynced writes dropped, the last one torn.
        std::fs::write(&path, &durable).expect("back to the durable bytes");
        zero_slot(dir.path(), last_slot);
        let mark = Watermark::open(dir.path())
            .expect("open")
            .expect("a valid slot survives two cuts");
        assert_eq!(mark.durable_end(), 5);
    }
}
