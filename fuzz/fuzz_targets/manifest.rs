//! The manifest and its probe spec (`protocol::bundle::parse_manifest`, the
//! verifier's parsing before the signature check; `JsonField::parse`, the
//! CLI's `--expect-json`; `ProbeSpec::judge`, which reads an app's answer).
//! Parsing never panics; an accepted manifest written back as JSON parses to
//! itself; judging any answer body never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use protocol::bundle::{parse_manifest, JsonField, ProbeSpec};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(manifest) = parse_manifest(data) {
        let json = serde_json::to_vec(&manifest).expect("a parsed manifest serializes");
        assert_eq!(
            parse_manifest(&json).expect("a written manifest parses"),
            manifest
        );
        judge_all(&manifest.probe, &text);
    }
    // A probe spec on its own, as the controller reads it back.
    if let Ok(spec) = serde_json::from_slice::<ProbeSpec>(data) {
        judge_all(&spec, &text);
    }
    if let Ok(field) = JsonField::parse(&text) {
        // The pointer and value came from `text`; the body is the text too.
        let _ = field.matches(&text);
    }
});

/// Judges `body` as every kind of answer a route can give.
fn judge_all(spec: &ProbeSpec, body: &str) {
    let _ = spec.expected_body_text();
    for status in [None, Some(spec.expect_status), Some(200), Some(503)] {
        let _ = spec.judge(status, body, None, true);
        let _ = spec.judge(status, body, Some(model::Digest([1; 32])), false);
    }
}
