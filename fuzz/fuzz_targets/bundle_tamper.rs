//! Sign, then tamper (`protocol::bundle::{sign, verify}`), structured input.
//! Whatever fields and app the fuzzer picks: signing either refuses them or
//! gives a bundle that verifies to the same fields and app (round trip);
//! the same bundle with any byte changed, cut short or extended never
//! verifies; and another key never accepts it.
#![no_main]

use arbitrary::Arbitrary;
use ed25519_dalek::SigningKey;
use libfuzzer_sys::fuzz_target;
use protocol::bundle::{sign, verify, JsonField, ManifestFields, ProbeSpec};

include!("../fixed_key.rs");

/// What the signer chooses, and how the bundle is then damaged.
#[derive(Arbitrary, Debug)]
struct Input {
    name: String,
    version: String,
    app_file_name: String,
    run: Vec<String>,
    probe_path: String,
    expect_status: u16,
    expect_body: String,
    /// A JSON pointer and a JSON text for `expect_json`, if any.
    expect_json: Option<(String, String)>,
    app: Vec<u8>,
    /// (offset, xor) pairs; an xor of 0 is made 1 so every flip changes a byte.
    flips: Vec<(u32, u8)>,
    /// Cut this many bytes off the end (0: none).
    cut: u16,
    /// Bytes appended to the end.
    extra: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let key = SigningKey::from_bytes(&FUZZ_SIGNING_KEY_SEED);
    let expect_json = input.expect_json.and_then(|(pointer, value)| {
        Some(JsonField {
            pointer,
            equals: serde_json::from_str(&value).ok()?,
        })
    });
    let chosen = ManifestFields {
        name: input.name,
        version: input.version,
        app_file_name: input.app_file_name,
        run: input.run,
        probe: ProbeSpec {
            path: input.probe_path,
            expect_status: input.expect_status,
            expect_body: input.expect_body,
            expect_json,
        },
    };
    // Fields the signer refuses still give a bundle to tamper with: the
    // sample's own, so every input reaches the tamper checks (the `bundle`
    // and `manifest` targets fuzz the field checks themselves).
    let (fields, bundle) = match sign(&key, &input.app, chosen.clone()) {
        Ok(bundle) => (chosen, bundle),
        Err(_) => {
            let sample = sample_fields();
            let bundle = sign(&key, &input.app, sample.clone()).expect("the sample fields sign");
            (sample, bundle)
        }
    };
    let verified = verify(&key.verifying_key(), &bundle).expect("a freshly signed bundle verifies");
    assert_eq!(verified.app, input.app);
    assert_eq!(verified.manifest.name, fields.name);
    assert_eq!(verified.manifest.version, fields.version);
    assert_eq!(verified.manifest.app_file_name, fields.app_file_name);
    assert_eq!(verified.manifest.run, fields.run);
    assert_eq!(verified.manifest.probe, fields.probe);

    let other = SigningKey::from_bytes(&[0x42; 32]);
    assert!(
        verify(&other.verifying_key(), &bundle).is_err(),
        "another key accepted the bundle"
    );

    let mut tampered = bundle.clone();
    for (offset, xor) in &input.flips {
        let index = *offset as usize % tampered.len();
        tampered[index] ^= (*xor).max(1);
    }
    let keep = tampered.len().saturating_sub(usize::from(input.cut));
    tampered.truncate(keep);
    tampered.extend_from_slice(&input.extra);
    if tampered != bundle {
        assert!(
            verify(&key.verifying_key(), &tampered).is_err(),
            "a tampered bundle verified ({} flips, cut {}, {} extra bytes)",
            input.flips.len(),
            input.cut,
            input.extra.len()
        );
    }
});

/// Valid fields, used when the fuzzer's are refused.
fn sample_fields() -> ManifestFields {
    ManifestFields {
        name: "hello".into(),
        version: "v1".into(),
        app_file_name: "app.py".into(),
        run: vec!["python3".into(), "app.py".into()],
        probe: ProbeSpec {
            path: "/hello".into(),
            expect_status: 200,
            expect_body: "hello from v1".into(),
            expect_json: None,
        },
    }
}
