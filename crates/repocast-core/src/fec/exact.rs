//! No erasure code: the exact-packet baseline (MFTP, plain carousel).
//!
//! A block is a run of source packets and only those packets exist: ids
//! wrap at k, so "repair" resends the very packets that were lost, and a NAK
//! helps only the clients that lost the same packets.

use super::{BlockDecoder, BlockEncoder, IdSet};

/// Encoder that hands out source symbols only.
pub struct ExactEncoder {
    k: u32,
    symbol_size: usize,
    data: Vec<u8>,
}

impl ExactEncoder {
    /// An encoder over `data` (exactly `k * symbol_size` bytes).
    pub fn new(k: u32, symbol_size: u16, data: Vec<u8>) -> Self {
        ExactEncoder {
            k: k.max(1),
            symbol_size: symbol_size as usize,
            data,
        }
    }
}

impl BlockEncoder for ExactEncoder {
    fn symbol(&mut self, esi: u32, out: &mut Vec<u8>) {
        out.clear();
        let s = (esi % self.k) as usize * self.symbol_size;
        out.extend_from_slice(&self.data[s..s + self.symbol_size]);
    }
}

/// Collects source packets until all are present.
pub struct ExactDecoder {
    k: u32,
    symbol_size: usize,
    held: IdSet,
    buf: Vec<u8>,
    decoded: bool,
}

impl ExactDecoder {
    /// A decoder for a block of `k` symbols.
    pub fn new(k: u32, symbol_size: u16) -> Self {
        let k = k.max(1);
        ExactDecoder {
            k,
            symbol_size: symbol_size as usize,
            held: IdSet::default(),
            buf: Vec::new(),
            decoded: false,
        }
    }
}

impl BlockDecoder for ExactDecoder {
    fn add(&mut self, esi: u32, payload: Option<&[u8]>) -> bool {
        let Some(p) = payload
            .filter(|_| !self.decoded && super::admissible(esi, self.k, payload, self.symbol_size))
        else {
            return false;
        };
        if !self.held.insert(esi) {
            return false;
        }
        let t = self.symbol_size;
        if self.buf.is_empty() {
            self.buf = vec![0; self.k as usize * t];
        }
        self.buf[esi as usize * t..(esi as usize + 1) * t].copy_from_slice(p);
        true
    }

    fn needed(&self) -> u32 {
        if self.decoded {
            0
        } else {
            self.k - self.held.len()
        }
    }

    fn missing(&self) -> Vec<u32> {
        self.held.missing_below(self.k)
    }

    fn try_decode(&mut self) -> Option<Vec<u8>> {
        if self.decoded || self.held.len() < self.k {
            return None;
        }
        self.decoded = true;
        Some(std::mem::take(&mut self.buf))
    }
}
