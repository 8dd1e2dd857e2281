//! Bundle files (`protocol::bundle::verify`) under a fixed trusted key: any
//! bytes an upload or a fetch delivers. Verifying never panics, and a bundle
//! it accepts is exactly one the key holder signed: signing the accepted
//! manifest fields and app again with that key gives back the input bytes
//! (Ed25519 signatures are deterministic, and the signer writes the
//! manifest's JSON one way). The fuzzer cannot sign, so anything it changes
//! in a seed bundle must be refused.
#![no_main]

use ed25519_dalek::SigningKey;
use libfuzzer_sys::fuzz_target;
use protocol::bundle::{bundle_digest, sign, verify, ManifestFields};
use sha2::{Digest as _, Sha256};

include!("../fixed_key.rs");

fuzz_target!(|data: &[u8]| {
    let key = SigningKey::from_bytes(&FUZZ_SIGNING_KEY_SEED);
    let Ok(verified) = verify(&key.verifying_key(), data) else {
        return;
    };
    let manifest = &verified.manifest;
    assert_eq!(verified.digest, bundle_digest(data));
    assert_eq!(
        <[u8; 32]>::from(Sha256::digest(&verified.app)),
        manifest.app_sha256
    );
    let fields = ManifestFields {
        name: manifest.name.clone(),
        version: manifest.version.clone(),
        app_file_name: manifest.app_file_name.clone(),
        run: manifest.run.clone(),
        probe: manifest.probe.clone(),
    };
    let resigned = sign(&key, &verified.app, fields).expect("an accepted manifest signs again");
    assert!(
        resigned == data,
        "verify accepted {} bytes that are not what the key holder signed",
        data.len()
    );
});
