//! Fuzz target: announcement datagrams (one, or a bundle) never panic the
//! parser, and what it accepts re-emits to bytes that parse to the same
//! value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use repocast_core::wire::{AnnounceRepr, emit_announcements, parse_announcements};

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = AnnounceRepr::parse(data) {
        let mut out = Vec::new();
        m.emit(&mut out);
        assert_eq!(AnnounceRepr::parse(&out).ok(), Some(m));
    }
    if let Ok(list) = parse_announcements(data) {
        let mut out = Vec::new();
        emit_announcements(&list, &mut out);
        assert_eq!(parse_announcements(&out).ok(), Some(list));
    }
});
