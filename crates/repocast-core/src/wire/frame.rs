//! Length-prefixed framing for the TCP request connection.
//!
//! A frame is a big-endian u32 length followed by that many bytes of one
//! control message. [`FrameDecoder`] accumulates stream bytes and yields whole
//! frames, refusing any frame longer than [`MAX_FRAME_LEN`] before buffering it.

use super::WireError;

/// Largest control frame accepted (a manifest of 2^20 block hashes fits).
pub const MAX_FRAME_LEN: usize = 40 << 20;

/// Appends `msg` as one frame to `out`.
pub fn encode_frame(msg: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    out.extend_from_slice(msg);
}

/// Reassembles frames from a byte stream.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Where the next frame starts in `buf` (bytes before it are consumed;
    /// they are dropped in one move when more arrive, so many small frames
    /// in one read cost linear time, not quadratic).
    start: usize,
}

impl FrameDecoder {
    /// Adds bytes read from the stream.
    pub fn extend(&mut self, bytes: &[u8]) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held: read from the stream and not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next whole frame, `Ok(None)` if more bytes are needed, or an error
    /// (the connection should then be closed) if the length is over the limit.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, WireError> {
        let b = &self.buf[self.start..];
        if b.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
        if len > MAX_FRAME_LEN {
            return Err(WireError::OutOfRange {
                field: "frame length",
                value: len as u64,
            });
        }
        if b.len() < 4 + len {
            return Ok(None);
        }
        let frame = b[4..4 + len].to_vec();
        self.start += 4 + len;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        Ok(Some(frame))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_anywhere_reassemble_and_oversize_is_refused() {
        let mut out = Vec::new();
        encode_frame(b"hello", &mut out);
        encode_frame(b"", &mut out);
        encode_frame(b"world!", &mut out);
        let mut d = FrameDecoder::default();
        let mut got = Vec::new();
        for b in out.chunks(3) {
            d.extend(b);
            while let Some(f) = d.next_frame().expect("valid") {
                got.push(f);
            }
        }
        assert_eq!(got, vec![b"hello".to_vec(), vec![], b"world!".to_vec()]);
        let mut d = FrameDecoder::default();
        d.extend(&(MAX_FRAME_LEN as u32 + 1).to_be_bytes());
        assert!(d.next_frame().is_err());
    }
}
