//! RaptorQ (RFC 6330) through the `raptorq` crate's block-level API.
//!
//! repocast numbers blocks itself (u32), so every raptorq block is built with
//! source block number 0 and never sees our block ids; encoding plans are
//! cached per K. Symbols reach raptorq only after validation here (right
//! length, id in range, block size within [`MAX_K`]): it panics otherwise.
//!
//! The decode failure odds measured on this crate ([`FAIL_AT_K`],
//! [`FAIL_AT_K1`]; see `docs/benchmarks.md`) drive the accounting codec's
//! model of it ([`super::accounting`]).

use super::held::Held;
use super::{BlockDecoder, BlockEncoder, Rejected};
use raptorq::{
    EncodingPacket, ObjectTransmissionInformation, PayloadId, SourceBlockDecoder,
    SourceBlockEncoder, SourceBlockEncodingPlan,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Largest RaptorQ source block (RFC 6330 K'max).
pub const MAX_K: u32 = 56_403;
/// Measured probability that K received symbols do not decode (111 of
/// 24,000 trials, K from 10 to 1,000).
pub const FAIL_AT_K: f64 = 0.0046;
/// Probability that K + 1 received symbols do not decode: none failed in
/// 24,000 trials, so this is the measurement's upper bound (1/24,000).
pub const FAIL_AT_K1: f64 = 0.00004;

fn oti(k: u32, symbol_size: u16) -> ObjectTransmissionInformation {
    ObjectTransmissionInformation::new(k as u64 * symbol_size as u64, symbol_size, 1, 1, 1)
}

/// Encoding plans kept, at most (as raptorq's own cache). A plan is per
/// block size, about 1 MB at k = 1,000, and block sizes come from every
/// file's size (a file's blocks split it evenly) and every catalogue's
/// piece count: a pusher of 1,000 files of other sizes kept about 1 GB
/// of them before this bound. Making one again costs about 3.6 ms at
/// k = 1,000.
const PLANS_KEPT: usize = 64;

type Plans = HashMap<u32, Arc<SourceBlockEncodingPlan>>;

fn plans() -> std::sync::MutexGuard<'static, Plans> {
    static PLANS: OnceLock<Mutex<Plans>> = OnceLock::new();
    let map = PLANS.get_or_init(|| Mutex::new(HashMap::new()));
    match map.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

fn plan(k: u32) -> Arc<SourceBlockEncodingPlan> {
    let mut guard = plans();
    if guard.len() >= PLANS_KEPT && !guard.contains_key(&k) {
        // Any one goes (a plan is made again when next needed).
        if let Some(old) = guard.keys().next().copied() {
            guard.remove(&old);
        }
    }
    guard
        .entry(k)
        .or_insert_with(|| Arc::new(SourceBlockEncodingPlan::generate(k as u16)))
        .clone()
}

/// RaptorQ encoder for one block.
pub struct RaptorQEncoder {
    k: u32,
    symbol_size: usize,
    data: Vec<u8>,
    inner: Option<SourceBlockEncoder>,
}

impl RaptorQEncoder {
    /// An encoder over `data` (exactly `k * symbol_size` bytes, k <= MAX_K,
    /// checked by [`super::CodeKind::encoder`]). Intermediate symbols are
    /// computed on the first repair request.
    pub fn new(k: u32, symbol_size: u16, data: Vec<u8>) -> Self {
        RaptorQEncoder {
            k: k.min(MAX_K),
            symbol_size: symbol_size as usize,
            data,
            inner: None,
        }
    }
}

impl BlockEncoder for RaptorQEncoder {
    fn symbol(&mut self, esi: u32, out: &mut Vec<u8>) {
        out.clear();
        let esi = esi.min(crate::wire::data::MAX_SYMBOL_ID);
        if esi < self.k {
            let s = esi as usize * self.symbol_size;
            out.extend_from_slice(&self.data[s..s + self.symbol_size]);
            return;
        }
        self.prepare();
        if let Some(p) = (self.inner.as_ref())
            .and_then(|enc| enc.repair_packets(esi - self.k, 1).into_iter().next())
        {
            out.extend_from_slice(p.data());
        }
    }

    fn prepare(&mut self) -> bool {
        if self.inner.is_some() {
            return false;
        }
        let (k, t) = (self.k, self.symbol_size as u16);
        self.inner = Some(SourceBlockEncoder::with_encoding_plan(
            0,
            &oti(k, t),
            &self.data,
            &plan(k),
        ));
        true
    }

    fn needs_prepare(&self) -> bool {
        self.inner.is_none()
    }

    fn spare(&self) -> Option<Box<dyn BlockEncoder>> {
        let t = self.symbol_size as u16;
        Some(Box::new(RaptorQEncoder::new(self.k, t, self.data.clone())))
    }
}

/// Shares a rejected block's symbols are screened in (module `held`).
pub use super::held::SCREEN_SHARES;

/// RaptorQ decoder for one block.
pub struct RaptorQDecoder {
    /// The symbols, what was tried with them, and their screening: each
    /// solve builds raptorq's decoder from copies, so one that fails (short
    /// of rank, or bytes that fail their hash) keeps them.
    held: Held,
}

impl RaptorQDecoder {
    /// A decoder for a block of `k` symbols.
    pub fn new(k: u32, symbol_size: u16) -> Self {
        RaptorQDecoder {
            held: Held::new(k.clamp(1, MAX_K), symbol_size as usize),
        }
    }
}

/// Solves a block of `k` symbols of `t` bytes from `symbols`.
fn solve(k: u32, t: u16, symbols: &mut dyn Iterator<Item = (u32, &[u8])>) -> Option<Vec<u8>> {
    let mut dec = SourceBlockDecoder::new(0, &oti(k, t), k as u64 * t as u64);
    // Every symbol is validated (length, id range, fresh id), so
    // raptorq's asserts cannot fire.
    dec.decode(symbols.map(|(e, b)| EncodingPacket::new(PayloadId::new(0, e), b.to_vec())))
}

impl BlockDecoder for RaptorQDecoder {
    fn add(&mut self, esi: u32, payload: Option<&[u8]>) -> bool {
        (self.held).add(esi, crate::wire::data::MAX_SYMBOL_ID + 1, payload)
    }

    fn needed(&self) -> u32 {
        let h = &self.held;
        (h.screen_needed())
            .unwrap_or_else(|| super::fountain_needed(h.decoded(), h.distinct(), h.k()))
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

    /// Solves once K symbols are held (the work of a decode, a few
    /// milliseconds a block); after a failed attempt, again with each
    /// symbol added since; screening, with a share left out
    /// (`Held::try_decode`).
    fn try_decode(&mut self) -> Option<Vec<u8>> {
        let (k, t) = (self.held.k(), self.held.symbol_size() as u16);
        self.held.try_decode(|s| solve(k, t, s))
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
    use crate::rng::Rng;

    /// What a decoder takes back from its chunks is what it was given.
    #[test]
    fn taken_symbols_are_those_given() {
        let (k, t) = (3u32, 4usize);
        let sym = |i: u32| vec![i as u8; t];
        let mut dec = RaptorQDecoder::new(k, t as u16);
        for i in 0..2 {
            assert!(dec.add(7 + i, Some(&sym(i))));
        }
        let taken = dec.take_symbols().expect("not tried yet");
        assert_eq!(taken, vec![(7, sym(0)), (8, sym(1))]);
        assert_eq!(dec.held(), Some(0));
    }

    /// Encoders of more block sizes than the plan cache keeps leave it at
    /// its bound, and each still gives the symbols of its block.
    #[test]
    fn the_plan_cache_stays_bounded() {
        let t = 8u16;
        for k in 2000..2000 + PLANS_KEPT as u32 + 10 {
            let data: Vec<u8> = (0..k as usize * t as usize).map(|i| i as u8).collect();
            let mut enc = RaptorQEncoder::new(k, t, data.clone());
            let mut dec = RaptorQDecoder::new(k, t);
            let (mut s, mut got) = (Vec::new(), None);
            // All repair symbols: the block is the code's to rebuild.
            for esi in k..2 * k + 2 {
                enc.symbol(esi, &mut s);
                dec.add(esi, Some(&s));
                if dec.ready() {
                    got = dec.try_decode();
                    if got.is_some() {
                        break;
                    }
                }
            }
            assert_eq!(got, Some(data), "k {k}");
            assert!(plans().len() <= PLANS_KEPT);
        }
    }

    /// Measures raptorq's decode failure rate at exactly K and K+1 random
    /// symbols (a mix of source and repair). Run with --ignored; the
    /// figures feed FAIL_AT_K and FAIL_AT_K1.
    #[test]
    #[ignore]
    fn measure_decode_failure_odds() {
        let mut rng = Rng::new(42);
        let t = 16u16;
        let (mut fail_k, mut fail_k1, mut n) = (0, 0, 0);
        for k in [10u32, 50, 100, 200, 500, 1000] {
            for _ in 0..4000 {
                let data: Vec<u8> = (0..k as usize * t as usize)
                    .map(|_| rng.next_u64() as u8)
                    .collect();
                let mut enc = RaptorQEncoder::new(k, t, data);
                let mut ids: Vec<u32> = (0..2 * k).collect();
                rng.shuffle(&mut ids);
                let mut dec = RaptorQDecoder::new(k, t);
                let mut out = Vec::new();
                for (i, &esi) in ids.iter().take(k as usize + 1).enumerate() {
                    enc.symbol(esi, &mut out);
                    dec.add(esi, Some(&out));
                    if i + 1 == k as usize && !dec.held.decoded() {
                        fail_k += 1;
                    }
                }
                if !dec.held.decoded() {
                    fail_k1 += 1;
                }
                n += 1;
            }
        }
        println!("trials {n}: fail at K {fail_k}, fail at K+1 {fail_k1}");
    }
}
