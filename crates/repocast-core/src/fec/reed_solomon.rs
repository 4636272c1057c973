//! Reed-Solomon (n, k) blocks via `reed-solomon-simd` (GF(2^16), so k and
//! n are not limited to 255), with Fcast's block sizing from [`super::layout`].
//!
//! A block of k source symbols has [`repair_count`]`(k)` repair symbols; the
//! server wraps symbol ids past n = k + repair, so (unlike RaptorQ) a long
//! repair history can repeat symbols. Any k distinct symbols decode.

use super::held::Held;
use super::{BlockDecoder, BlockEncoder, FecError, Rejected};
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
    /// Symbols in the block's code: k source and the repair ids after.
    n: u32,
    /// The symbols, and their screening when the bytes fail their hash
    /// (any k distinct symbols solve, a forged one among them too).
    held: Held,
}

impl RsDecoder {
    /// A decoder for a block of `k` symbols.
    pub fn new(k: u32, symbol_size: u16) -> Self {
        let k = k.clamp(1, MAX_K);
        RsDecoder {
            n: k + repair_count(k),
            held: Held::new(k, symbol_size as usize),
        }
    }
}

/// Solves a block of `k` symbols of `t` bytes and `n - k` repair ids from
/// `symbols` (distinct, below n: [`Held::add`]).
fn solve(
    k: u32,
    n: u32,
    t: usize,
    symbols: &mut dyn Iterator<Item = (u32, &[u8])>,
) -> Option<Vec<u8>> {
    let kk = k as usize;
    let mut out = vec![0u8; kk * t];
    let mut have = vec![false; kk];
    let mut repair = Vec::new();
    for (id, s) in symbols {
        match have.get_mut(id as usize) {
            Some(h) => {
                let at = id as usize * t;
                out[at..at + t].copy_from_slice(s);
                *h = true;
            }
            None => repair.push((id - k, s)),
        }
    }
    if have.iter().all(|h| *h) {
        return Some(out);
    }
    let mut dec = ReedSolomonDecoder::new(kk, (n - k) as usize, t).ok()?;
    for (i, s) in out.chunks_exact(t).enumerate() {
        if have[i] {
            dec.add_original_shard(i, s).ok()?;
        }
    }
    for (i, s) in repair {
        dec.add_recovery_shard(i as usize, s).ok()?;
    }
    let res = dec.decode().ok()?;
    for (i, s) in res.restored_original_iter() {
        if let Some(o) = out.get_mut(i * t..(i + 1) * t) {
            o.copy_from_slice(s);
        }
    }
    Some(out)
}

impl BlockDecoder for RsDecoder {
    fn add(&mut self, esi: u32, payload: Option<&[u8]>) -> bool {
        self.held.add(esi, self.n, payload)
    }

    fn needed(&self) -> u32 {
        let h = &self.held;
        h.screen_needed().unwrap_or_else(|| {
            if h.decoded() {
                0
            } else {
                h.k().saturating_sub(h.distinct())
            }
        })
    }

    fn missing(&self) -> Vec<u32> {
        self.held.missing()
    }

    fn held(&self) -> Option<u32> {
        Some(self.held.len() as u32)
    }

    fn ready(&self) -> bool {
        self.held.ready()
    }

    fn try_decode(&mut self) -> Option<Vec<u8>> {
        let (k, n, t) = (self.held.k(), self.n, self.held.symbol_size());
        self.held.try_decode(|s| solve(k, n, t, s))
    }

    fn reject(&mut self, screen: bool) -> Rejected {
        self.held.reject(screen)
    }

    fn screening(&self) -> bool {
        self.held.screening()
    }

    fn take_symbols(&mut self) -> Option<Vec<(u32, Vec<u8>)>> {
        self.held.take_symbols()
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
