//! Fuzz target: a pusher's record of symbol ids (`ResumePoint::decode_all`,
//! read from a folder we do not own) never panics, and what it accepts
//! re-encodes to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use repocast_core::server::ResumePoint;

fuzz_target!(|data: &[u8]| {
    if let Ok(points) = ResumePoint::decode_all(data) {
        assert_eq!(ResumePoint::encode_all(&points), data);
    }
});
