//! Wire frames (`protocol::frame`): any bytes a peer sends. Decoding never
//! panics, and whatever decodes re-encodes to a frame that decodes to the
//! same body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use protocol::frame::{decode, decode_body, encode, LENGTH_PREFIX_BYTES};

fuzz_target!(|data: &[u8]| {
    // As a whole frame (length prefix and body) ...
    if let Ok(body) = decode(data) {
        let again = encode(&body).expect("a decoded frame body re-encodes");
        assert_eq!(decode(&again).expect("a re-encoded frame decodes"), body);
    }
    // ... and as a body after a prefix that was already read off a stream.
    if let Ok(body) = decode_body(data) {
        let again = encode(&body).expect("a decoded frame body re-encodes");
        let decoded = decode_body(&again[LENGTH_PREFIX_BYTES..]).expect("re-encoded body decodes");
        assert_eq!(decoded, body);
        // The `Display`-free parts a controller reads of every frame.
        let _ = format!("{body:?}");
    }
});
