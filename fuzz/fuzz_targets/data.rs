//! Fuzz target: `DataRepr::parse` never panics, and what it accepts re-emits
//! to bytes that parse to the same value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use repocast_core::wire::DataRepr;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = DataRepr::parse(data) {
        let mut out = Vec::new();
        m.emit(&mut out);
        assert_eq!(DataRepr::parse(&out).ok(), Some(m));
    }
});
