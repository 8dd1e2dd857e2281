//! Deterministic sample trees for the benchmarks (`fleetweft-chunk-bench`,
//! `fleetweft-transfer-bench`): issue #23's realistic release, a few large
//! files, forty 10 MiB ones and small files of mixed sizes, filled with
//! pseudo-random bytes (as compiled and compressed files are). The same
//! seed always gives the same bytes, so two runs, or two benches, measure
//! the same tree.

use std::io::Read;

use crate::limits::{GIB, MIB};

/// Size of the file a realistic change rewrites, in bytes.
pub const CHANGED_FILE_BYTES: u64 = 10 * MIB;
/// Index (in [`tree_sizes`]'s list) of the file that changes: a 10 MiB one.
pub const CHANGED_FILE_INDEX: usize = 5;

/// Deterministic pseudo-random bytes (SplitMix64), as a reader of `len`
/// bytes. The byte stream does not depend on how the reader is called.
pub struct Noise {
    state: u64,
    left: u64,
    word: [u8; 8],
    used: usize,
}

impl Noise {
    /// `len` bytes of the stream seeded by `seed`.
    pub fn new(seed: u64, len: u64) -> Noise {
        Noise {
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03,
            left: len,
            word: [0; 8],
            used: 8,
        }
    }

    /// The next word of the stream (does not count against `len`).
    pub fn next_word(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl Read for Noise {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (buf.len() as u64).min(self.left) as usize;
        for byte in &mut buf[..n] {
            if self.used == 8 {
                self.word = self.next_word().to_le_bytes();
                self.used = 0;
            }
            *byte = self.word[self.used];
            self.used += 1;
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// The file sizes of a tree of `total` bytes (at most 1 GiB is meant:
/// see [`tree_sizes_scaled`]): large files (200, 150, 100, 64 and 30 MiB),
/// forty [`CHANGED_FILE_BYTES`] files, then small files of 1 KiB to
/// 512 KiB until the total. Below 944 MiB: five 1 MiB files and one
/// 10 MiB file (index [`CHANGED_FILE_INDEX`]), then small files.
pub fn tree_sizes(total: u64) -> Vec<u64> {
    let mut sizes = vec![200 * MIB, 150 * MIB, 100 * MIB, 64 * MIB, 30 * MIB];
    sizes.extend(std::iter::repeat_n(CHANGED_FILE_BYTES, 40));
    let mut sum: u64 = sizes.iter().sum();
    if sum > total {
        sizes = vec![MIB, MIB, MIB, MIB, MIB, CHANGED_FILE_BYTES];
        sum = sizes.iter().sum();
    }
    let mut noise = Noise::new(99, u64::MAX);
    while sum < total {
        let size = (1024 << (noise.next_word() % 10)) + noise.next_word() % 1024;
        let size = size.min(total - sum);
        sizes.push(size);
        sum += size;
    }
    sizes
}

/// The file sizes of a tree of `total` bytes of any size: the 1 GiB tree
/// of [`tree_sizes`] once per whole GiB, then [`tree_sizes`] of the rest,
/// so a 4 GiB release is four times the realistic 1 GiB one (and not 3 GiB
/// of small files). [`CHANGED_FILE_INDEX`] stays a 10 MiB file.
pub fn tree_sizes_scaled(total: u64) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut left = total;
    while left >= GIB {
        sizes.extend(tree_sizes(GIB));
        left -= GIB;
    }
    if left > 0 || sizes.is_empty() {
        sizes.extend(tree_sizes(left));
    }
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_trees_add_up_and_keep_the_changed_file() {
        for total in [0, 20 * MIB, 256 * MIB, GIB, 2 * GIB + 300 * MIB] {
            let sizes = tree_sizes_scaled(total);
            assert_eq!(sizes.iter().sum::<u64>(), total.max(15 * MIB), "{total}");
            assert_eq!(sizes[CHANGED_FILE_INDEX], CHANGED_FILE_BYTES, "{total}");
        }
        let mut a = Vec::new();
        Noise::new(3, 100).read_to_end(&mut a).expect("noise");
        let mut b = vec![0u8; 100];
        let mut noise = Noise::new(3, 100);
        noise.read_exact(&mut b[..7]).expect("noise");
        noise.read_exact(&mut b[7..]).expect("noise");
        assert_eq!(a, b, "the bytes do not depend on how the reader is called");
        assert_ne!(a, {
            let mut c = Vec::new();
            Noise::new(4, 100).read_to_end(&mut c).expect("noise");
            c
        });
    }
}
