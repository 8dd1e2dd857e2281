//! Splitting content into chunks, streaming: memory is one chunk buffer
//! ([`CHUNK_BYTES_MAX`]) whatever the file's size.
//!
//! Releases use content-defined chunking (FastCDC 2020, normalisation
//! level 1) with [`CHUNK_BYTES_MIN`], [`CHUNK_BYTES_AVG`] and [`CHUNK_BYTES_MAX`]:
//! boundaries depend on the bytes around them, so an insertion moves only
//! the boundaries near it and the rest of the file keeps its chunks. The
//! measurement behind the choice is `fleetweft-chunk-bench`
//! (docs/performance.md, "Release chunking"). Fixed-size chunking is kept
//! for that comparison only.

use std::io::Read;
use std::path::Path;

use sha2::{Digest as _, Sha256};

use crate::error::{io_err, ReleaseError};
use crate::limits::{CHUNK_BYTES_AVG, CHUNK_BYTES_MAX, CHUNK_BYTES_MIN};
use crate::manifest::{ChunkRef, Sha256Bytes};

/// How content is cut into chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunking {
    /// FastCDC 2020 with these minimum, average and maximum sizes (bytes).
    Cdc {
        /// Smallest chunk but a file's last.
        min: u32,
        /// Target average.
        avg: u32,
        /// Largest chunk.
        max: u32,
    },
    /// Every chunk but the last exactly this many bytes.
    Fixed(u32),
}

impl Chunking {
    /// The chunking of format-2 releases.
    pub const RELEASE: Chunking = Chunking::Cdc {
        min: CHUNK_BYTES_MIN,
        avg: CHUNK_BYTES_AVG,
        max: CHUNK_BYTES_MAX,
    };

    /// The largest chunk this chunking produces, in bytes.
    pub fn max_chunk(self) -> u32 {
        match self {
            Chunking::Cdc { max, .. } => max,
            Chunking::Fixed(size) => size,
        }
    }
}

/// A file's content as chunked: size, whole-file SHA-256 and chunks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunked {
    /// Bytes read.
    pub size: u64,
    /// SHA-256 of all of them.
    pub sha256: Sha256Bytes,
    /// The chunks, in order.
    pub chunks: Vec<ChunkRef>,
}

/// What receives each chunk's bytes as it is cut (a store, an export
/// directory, or nothing).
pub type Sink<'a> = dyn FnMut(&ChunkRef, &[u8]) -> Result<(), ReleaseError> + 'a;

/// Cuts `reader` into chunks with `chunking`, handing each to `sink`;
/// `path` names the source in errors.
pub fn chunk_reader<R: Read>(
    reader: R,
    chunking: Chunking,
    path: &Path,
    sink: &mut Sink<'_>,
) -> Result<Chunked, ReleaseError> {
    let mut whole = Sha256::new();
    let mut chunks = Vec::new();
    let mut size: u64 = 0;
    let mut each = |data: &[u8]| -> Result<(), ReleaseError> {
        whole.update(data);
        // Lossless: a chunk is at most the chunking's max, a u32.
        let chunk = ChunkRef {
            sha256: Sha256::digest(data).into(),
            len: data.len() as u32,
        };
        sink(&chunk, data)?;
        size += data.len() as u64;
        chunks.push(chunk);
        Ok(())
    };
    match chunking {
        Chunking::Cdc { min, avg, max } => {
            let cdc = fastcdc::v2020::StreamCDC::new(reader, min, avg, max);
            for chunk in cdc {
                let chunk = chunk.map_err(|e| cdc_error(path, e))?;
                each(&chunk.data)?;
            }
        }
        Chunking::Fixed(len) => fixed(reader, len, path, &mut each)?,
    }
    Ok(Chunked {
        size,
        sha256: whole.finalize().into(),
        chunks,
    })
}

fn fixed<R: Read>(
    mut reader: R,
    len: u32,
    path: &Path,
    each: &mut dyn FnMut(&[u8]) -> Result<(), ReleaseError>,
) -> Result<(), ReleaseError> {
    let mut buffer = vec![0u8; len as usize];
    loop {
        let mut filled = 0;
        while filled < buffer.len() {
            match reader.read(&mut buffer[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(path)(e)),
            }
        }
        if filled == 0 {
            return Ok(());
        }
        each(&buffer[..filled])?;
        if filled < buffer.len() {
            return Ok(());
        }
    }
}

fn cdc_error(path: &Path, error: fastcdc::v2020::Error) -> ReleaseError {
    let source = match error {
        fastcdc::v2020::Error::IoError(e) => e,
        other => std::io::Error::other(other.to_string()),
    };
    io_err(path)(source)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(len: usize, seed: u64) -> Vec<u8> {
        let mut state = seed;
        (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 33) as u8
            })
            .collect()
    }

    fn cut(data: &[u8], chunking: Chunking) -> Chunked {
        chunk_reader(data, chunking, Path::new("t"), &mut |_, _| Ok(())).expect("chunk")
    }

    #[test]
    fn chunks_cover_the_content_within_bounds() {
        let data = bytes(9 * 1024 * 1024 + 17, 1);
        let chunked = cut(&data, Chunking::RELEASE);
        assert_eq!(chunked.size, data.len() as u64);
        assert_eq!(chunked.sha256, <[u8; 32]>::from(Sha256::digest(&data)));
        let (last, rest) = chunked.chunks.split_last().expect("chunks");
        for c in rest {
            assert!(
                (CHUNK_BYTES_MIN..=CHUNK_BYTES_MAX).contains(&c.len),
                "{}",
                c.len
            );
        }
        assert!(last.len <= CHUNK_BYTES_MAX);
        let sum: u64 = chunked.chunks.iter().map(|c| u64::from(c.len)).sum();
        assert_eq!(sum, data.len() as u64);
    }

    #[test]
    fn an_insertion_keeps_the_later_chunks() {
        let data = bytes(8 * 1024 * 1024, 2);
        let mut shifted = data.clone();
        shifted.splice(100_000..100_000, *b"inserted");
        let before = cut(&data, Chunking::RELEASE).chunks;
        let after = cut(&shifted, Chunking::RELEASE).chunks;
        let new = after.iter().filter(|c| !before.contains(c)).count();
        assert!(new <= 2, "{new} of {} chunks changed", after.len());
        assert!(cut(b"", Chunking::RELEASE).chunks.is_empty());
        assert_eq!(cut(&data, Chunking::Fixed(1 << 20)).chunks.len(), 8);
    }
}
