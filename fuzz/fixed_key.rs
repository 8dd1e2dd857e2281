// Shared by the fuzz targets (`fuzz/fuzz_targets/*.rs`) and the seed
// generator (`runtime/tests/it/fuzz_seeds.rs`) with `include!`, so the corpus's
// bundles are signed by the key the `bundle` target trusts.

/// The seed of the Ed25519 key the fuzz corpus's bundles are signed with. A
/// fixed test key: it is public, so it must never be trusted outside fuzzing.
pub const FUZZ_SIGNING_KEY_SEED: [u8; 32] = *b"fleetweft-fuzz-test-key-not-real";
