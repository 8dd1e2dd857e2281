//! Log entries (`eventlog::Envelope::decode`) and controller events in them
//! (`eventlog::decode_payload::<model::controller::Event>`): any bytes read
//! back from disk. Decoding never panics; what decodes re-encodes and
//! decodes to itself; a decoded event can be shown (`fleetweft log show`).
#![no_main]

use eventlog::{decode_payload, encode_payload, genesis_hash, Envelope};
use libfuzzer_sys::fuzz_target;
use model::controller::Event;

fuzz_target!(|data: &[u8]| {
    // As a stored entry.
    if let Ok(envelope) = Envelope::decode(data) {
        let again = envelope.encode().expect("a decoded envelope re-encodes");
        assert_eq!(
            Envelope::decode(&again).expect("re-encoded envelope decodes"),
            envelope
        );
        event(&envelope.payload);
    }
    // As a payload: the bytes inside an entry whose checksum holds.
    event(data);
    let sealed = Envelope::seal(1, genesis_hash(), data.to_vec());
    if let Ok(bytes) = sealed.encode() {
        assert_eq!(
            Envelope::decode(&bytes).expect("a sealed envelope decodes"),
            sealed
        );
    }
});

/// Decodes a payload as a controller event and checks the round trip.
fn event(payload: &[u8]) {
    let Ok(event) = decode_payload::<Event>(payload) else {
        return;
    };
    let again = encode_payload(&event).expect("a decoded event re-encodes");
    assert_eq!(
        decode_payload::<Event>(&again).expect("re-encoded event decodes"),
        event
    );
    let _ = event.to_string();
}
