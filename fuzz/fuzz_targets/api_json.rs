//! The operator API's request bodies (`controller::daemon::api::parse_*`, the
//! functions the axum handlers call): any bytes a client posts. Each parser
//! either refuses with a message naming the field or returns a request whose
//! checked parts hold.
#![no_main]

use controller::daemon::api::{parse_claim, parse_resolve, parse_roll_back, parse_start_rollout};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for refusal in [
        parse_start_rollout(data).err(),
        parse_resolve(data).err(),
        parse_roll_back(data).err(),
        parse_claim(data).err(),
    ]
    .into_iter()
    .flatten()
    {
        assert!(!refusal.is_empty(), "a refusal says why");
    }
    if let Ok((request, release)) = parse_start_rollout(data) {
        // The digest is the hex the client sent, whatever its case.
        assert_eq!(
            release.to_hex(),
            request.release.trim().to_ascii_lowercase()
        );
    }
    if let Ok(claim) = parse_claim(data) {
        if let Some(owner) = &claim.owner {
            assert_eq!(owner, owner.trim());
        }
        assert_eq!(claim.review_by, claim.review_by.trim());
    }
    if let Ok(resolve) = parse_resolve(data) {
        if let Some(observation) = resolve.observation {
            assert_eq!(observation.artifact, None, "an operator reads no artifact");
        }
    }
});
