//! Fuzz target: `ClientMsg::parse` never panics, and what it accepts re-emits
//! to bytes that parse to the same value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use repocast_core::wire::ClientMsg;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = ClientMsg::parse(data) {
        let mut out = Vec::new();
        m.emit(&mut out);
        assert_eq!(ClientMsg::parse(&out).ok(), Some(m));
    }
});
