//! Reed-Solomon (n, k) blocks via `reed-solomon-simd` (GF(2^16), so k and
//! n are not limited to 255), with Fcast's block sizing from [`super::layout`].
//!
//! A block of k source symbols has [`repair_count`]`(k)` repair symbols; the
//! server wraps symbol ids past n = k + repair, so (unlike RaptorQ) a long
//! repair history can repeat symbols. Any k distinct symbols decode.

use super::symbols::Symbols;
use super::{BlockDecoder, BlockEncoder, FecError, IdSet};
use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};

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
    symbols: Symbols,
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
            symbols: Symbols::new(k, symbol_size as usize),
            decoded: false,
        }
    }

    fn decode_bytes(&self) -> Option<Vec<u8>> {
        let (k, t) = (self.k as usize, self.symbol_size);
        let mut out = vec![0u8; k * t];
        // Ids are distinct (`held`) and below n (`admissible`).
        let mut originals = 0;
        for (id, s) in self.symbols.iter().filter(|(id, _)| *id < self.k) {
            let at = id as usize * t;
            out[at..at + t].copy_from_slice(s);
            originals += 1;
        }
        if originals == k {
            return Some(out);
        }
        let r = (self.n - self.k) as usize;
        let mut dec = ReedSolomonDecoder::new(k, r, t).ok()?;
        for (id, s) in self.symbols.iter() {
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
        self.symbols.push(esi, p);
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
        self.symbols = Symbols::new(self.k, self.symbol_size);
        Some(out)
    }

    fn take_symbols(&mut self) -> Option<Vec<(u32, Vec<u8>)>> {
        if self.decoded {
            return None;
        }
        self.held = IdSet::default();
        Some(self.symbols.take_pairs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Symbols handed over (a spill) and given back decode the block, with
    /// originals missing (the code's work) and with none missing.
    #[test]
    fn symbols_taken_and_given_back_decode() {
        let (k, t) = (5u32, 8u16);
        let data: Vec<u8> = (0..k as usize * t as usize).map(|i| i as u8).collect();
        let mut enc = RsEncoder::new(k, t, data.clone()).expect("valid");
        let mut s = Vec::new();
        for ids in [vec![6, 0, 3, 5, 1], vec![4, 2, 0, 1, 3]] {
            let mut dec = RsDecoder::new(k, t);
            for &id in &ids[..3] {
                enc.symbol(id, &mut s);
                assert!(dec.add(id, Some(&s)));
            }
            let taken = dec.take_symbols().expect("not decoded");
            assert_eq!(taken.iter().map(|p| p.0).collect::<Vec<_>>(), ids[..3]);
            let mut back = RsDecoder::new(k, t);
            for (id, p) in &taken {
                assert!(back.add(*id, Some(p)));
            }
            for &id in &ids[3..] {
                enc.symbol(id, &mut s);
                assert!(back.add(id, Some(&s)));
            }
            assert_eq!(back.try_decode(), Some(data.clone()), "{ids:?}");
        }
    }
}
