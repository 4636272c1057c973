//! Fuzz target: `ServerMsg::parse` never panics, and what it accepts re-emits
//! to bytes that parse to the same value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use repocast_core::wire::ServerMsg;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = ServerMsg::parse(data) {
        let mut out = Vec::new();
        m.emit(&mut out);
        assert_eq!(ServerMsg::parse(&out).ok(), Some(m));
    }
});
