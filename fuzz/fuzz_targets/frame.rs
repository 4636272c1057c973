//! Fuzz target: the frame decoder never panics or buffers past its limit.
#![no_main]
use libfuzzer_sys::fuzz_target;
use repocast_core::wire::frame::{FrameDecoder, MAX_FRAME_LEN};

fuzz_target!(|data: &[u8]| {
    let mut d = FrameDecoder::default();
    for chunk in data.chunks(7) {
        d.extend(chunk);
        while let Ok(Some(f)) = d.next_frame() {
            assert!(f.len() <= MAX_FRAME_LEN);
        }
    }
});
