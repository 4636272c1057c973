//! Reed-Solomon (n, k) blocks via `reed-solomon-simd` (GF(2^16), so k and
//! n are not limited to 255), with Fcast's block sizing from [`super::layout`].
//!
//! A block of k source symbols has [`repair_count`]`(k)` repair symbols; the
//! server wraps symbol ids past n = k + repair, so (unlike RaptorQ) a long
//! repair history can repeat symbols. Any k distinct symbols decode.

use super::{BlockDecoder, BlockEncoder, FecError, IdSet};
use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};
use std::collections::BTreeMap;

/// Largest Reed-Solomon source block.
pub const MAX_K: u32 = 8192;

/// Repair symbols per block of `k` source symbols: 2k (at least 16), as many
/// as the library supports.
pub fn repair_count(k: u32) -> u32 {
    let k = k.clamp(1, MAX_K);
    let mut r = (2 * k).max(16);
    while r > 1 && !ReedSolomonEncoder::supports(k as usize, r as usize) {
        r -= 1;
    }
    r
}

/// Reed-Solomon encoder for one block.
pub struct RsEncoder {
    k: u32,
    symbol_size: usize,
    data: Vec<u8>,
    recovery: Vec<u8>,
}

impl RsEncoder {
    /// An encoder over `data` (exactly `k * symbol_size` bytes).
    pub fn new(k: u32, symbol_size: u16, data: Vec<u8>) -> Result<Self, FecError> {
        if k > MAX_K {
            return Err(FecError::BlockTooLarge { k, max: MAX_K });
        }
        Ok(RsEncoder {
            k,
            symbol_size: symbol_size as usize,
            data,
            recovery: Vec::new(),
        })
    }

    fn encode_recovery(&mut self) -> Result<(), reed_solomon_simd::Error> {
        let r = repair_count(self.k) as usize;
        let mut enc = ReedSolomonEncoder::new(self.k as usize, r, self.symbol_size)?;
        for s in self.data.chunks(self.symbol_size) {
            enc.add_original_shard(s)?;
        }
        let res = enc.encode()?;
        self.recovery = res.recovery_iter().flatten().copied().collect();
        Ok(())
    }
}

impl BlockEncoder for RsEncoder {
    fn symbol(&mut self, esi: u32, out: &mut Vec<u8>) {
        out.clear();
        let esi = esi % (self.k + repair_count(self.k));
        let t = self.symbol_size;
        if esi < self.k {
            let s = esi as usize * t;
            out.extend_from_slice(&self.data[s..s + t]);
            return;
        }
        if self.recovery.is_empty() && self.encode_recovery().is_err() {
            out.resize(t, 0);
            return;
        }
        let s = (esi - self.k) as usize * t;
        if let Some(sym) = self.recovery.get(s..s + t) {
            out.extend_from_slice(sym);
        }
    }

    fn prepare(&mut self) -> bool {
        self.recovery.is_empty() && self.encode_recovery().is_ok()
    }

    fn needs_prepare(&self) -> bool {
        self.recovery.is_empty()
    }

    fn spare(&self) -> Option<Box<dyn BlockEncoder>> {
        Some(Box::new(RsEncoder {
            k: self.k,
            symbol_size: self.symbol_size,
            data: self.data.clone(),
            recovery: Vec::new(),
        }))
    }
}

/// Reed-Solomon decoder for one block.
pub struct RsDecoder {
    k: u32,
    n: u32,
    symbol_size: usize,
    held: IdSet,
    symbols: BTreeMap<u32, Vec<u8>>,
    decoded: bool,
}

impl RsDecoder {
    /// A decoder for a block of `k` symbols.
    pub fn new(k: u32, symbol_size: u16) -> Self {
        let k = k.clamp(1, MAX_K);
        RsDecoder {
            k,
            n: k + repair_count(k),
            symbol_size: symbol_size as usize,
            held: IdSet::default(),
            symbols: BTreeMap::new(),
            decoded: false,
        }
    }

    fn decode_bytes(&self) -> Option<Vec<u8>> {
        let (k, t) = (self.k as usize, self.symbol_size);
        let mut out = vec![0u8; k * t];
        let mut missing = false;
        for i in 0..k {
            match self.symbols.get(&(i as u32)) {
                Some(s) => out[i * t..(i + 1) * t].copy_from_slice(s),
                None => missing = true,
            }
        }
        if !missing {
            return Some(out);
        }
        let r = (self.n - self.k) as usize;
        let mut dec = ReedSolomonDecoder::new(k, r, t).ok()?;
        for (&id, s) in &self.symbols {
            if id < self.k {
                dec.add_original_shard(id as usize, s).ok()?;
            } else {
                dec.add_recovery_shard((id - self.k) as usize, s).ok()?;
            }
        }
        let res = dec.decode().ok()?;
        for i in 0..k {
            if let Some(s) = res.restored_original(i) {
                out[i * t..(i + 1) * t].copy_from_slice(s);
            }
        }
        Some(out)
    }
}

impl BlockDecoder for RsDecoder {
    fn add(&mut self, esi: u32, payload: Option<&[u8]>) -> bool {
        let Some(p) = payload
            .filter(|_| !self.decoded && super::admissible(esi, self.n, payload, self.symbol_size))
        else {
            return false;
        };
        if !self.held.insert(esi) {
            return false;
        }
        self.symbols.insert(esi, p.to_vec());
        true
    }

    fn needed(&self) -> u32 {
        if self.decoded {
            0
        } else {
            self.k.saturating_sub(self.held.len())
        }
    }

    fn missing(&self) -> Vec<u32> {
        self.held.missing_below(self.k)
    }

    fn try_decode(&mut self) -> Option<Vec<u8>> {
        if self.decoded || self.held.len() < self.k {
            return None;
        }
        let out = self.decode_bytes()?;
        self.decoded = true;
        self.symbols.clear();
        Some(out)
    }

    fn take_symbols(&mut self) -> Option<Vec<(u32, Vec<u8>)>> {
        if self.decoded {
            return None;
        }
        self.held = IdSet::default();
        Some(std::mem::take(&mut self.symbols).into_iter().collect())
    }
}
