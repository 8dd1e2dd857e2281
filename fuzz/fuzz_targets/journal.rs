//! Agent journal records (`agent::journal::Record`, decoded with
//! `eventlog::decode_payload` as the agent and `fleetweft log --journal` do):
//! any bytes read back from an agent's disk. Decoding never panics; what
//! decodes re-encodes and decodes to itself; a record can be shown.
#![no_main]

use agent::journal::Record;
use eventlog::{decode_payload, encode_payload};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(record) = decode_payload::<Record>(data) else {
        return;
    };
    let again = encode_payload(&record).expect("a decoded record re-encodes");
    assert_eq!(
        decode_payload::<Record>(&again).expect("re-encoded record decodes"),
        record
    );
    let _ = record.to_string();
});
