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

use super::symbols::Symbols;
use super::{BlockDecoder, BlockEncoder, IdSet, Rejected};
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

/// Shares a rejected block's symbols are screened in
/// ([`RaptorQDecoder::reject`]): each try leaves one out, so one forged
/// symbol among them is found with an eighth more symbols than K and at
/// most eight more decodes.
pub const SCREEN_SHARES: usize = 8;

/// RaptorQ decoder for one block.
pub struct RaptorQDecoder {
    k: u32,
    symbol_size: usize,
    held: IdSet,
    /// Every symbol held, in arrival order, until the block's bytes are
    /// taken: each decode builds raptorq's decoder from copies, so one
    /// that fails (short of rank, or bytes that fail their hash) keeps
    /// them. Until a decode is tried the block can be evicted (spilled to
    /// disk).
    symbols: Symbols,
    /// Symbols held at the last try without a screen (one that came
    /// short, or whose bytes were then rejected): the next waits for more.
    /// Zero until a decode is tried, and again once the block starts over.
    tried: usize,
    decoded: bool,
    /// After bytes failed their check: the share of the symbols (those
    /// whose arrival index is this modulo [`SCREEN_SHARES`]) the next try
    /// leaves out.
    screen: Option<usize>,
}

impl RaptorQDecoder {
    /// A decoder for a block of `k` symbols.
    pub fn new(k: u32, symbol_size: u16) -> Self {
        let k = k.clamp(1, MAX_K);
        RaptorQDecoder {
            k,
            symbol_size: symbol_size as usize,
            held: IdSet::default(),
            symbols: Symbols::new(k, symbol_size as usize),
            tried: 0,
            decoded: false,
            screen: None,
        }
    }

    /// Symbols a screening needs: with any one share left out, K + 1
    /// (which fails about once in 24,000 decodes).
    fn screen_needs(&self) -> usize {
        let k = self.k as usize + 1;
        let mut n = (k * SCREEN_SHARES).div_ceil(SCREEN_SHARES - 1);
        while n - n.div_ceil(SCREEN_SHARES) < k {
            n += 1;
        }
        n
    }

    /// Solves from the symbols held but those of share `out`.
    fn solve(&self, out: Option<usize>) -> Option<Vec<u8>> {
        let (k, t) = (self.k, self.symbol_size as u16);
        let mut dec = SourceBlockDecoder::new(0, &oti(k, t), k as u64 * t as u64);
        // Every symbol is validated (length, id range, fresh id), so
        // raptorq's asserts cannot fire.
        let pkts = (self.symbols.iter().enumerate())
            .filter(|(i, _)| out != Some(i % SCREEN_SHARES))
            .map(|(_, (e, b))| EncodingPacket::new(PayloadId::new(0, e), b.to_vec()));
        dec.decode(pkts)
    }

    /// Forgets every symbol: the block starts over.
    fn start_over(&mut self) {
        *self = RaptorQDecoder::new(self.k, self.symbol_size as u16);
    }
}

impl BlockDecoder for RaptorQDecoder {
    fn add(&mut self, esi: u32, payload: Option<&[u8]>) -> bool {
        let space = crate::wire::data::MAX_SYMBOL_ID + 1;
        let Some(p) = payload
            .filter(|_| !self.decoded && super::admissible(esi, space, payload, self.symbol_size))
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
        if self.screen.is_some() && !self.decoded {
            let n = self.screen_needs().max(self.tried + 1);
            return n.saturating_sub(self.symbols.len()) as u32;
        }
        super::fountain_needed(self.decoded, self.held.len(), self.k)
    }

    fn missing(&self) -> Vec<u32> {
        self.held.missing_below(self.k)
    }

    fn held(&self) -> Option<u32> {
        Some(self.symbols.len() as u32)
    }

    fn ready(&self) -> bool {
        let n = self.symbols.len();
        let enough = match self.screen {
            Some(_) => n >= self.screen_needs(),
            None => self.held.len() >= self.k,
        };
        !self.decoded && enough && n > self.tried
    }

    /// Solves once K symbols are held (the work of a decode, a few
    /// milliseconds a block); after a failed attempt, again with each
    /// symbol added since. Screening, each share left out in turn until
    /// one solves (if none does, the block starts over).
    fn try_decode(&mut self) -> Option<Vec<u8>> {
        if !self.ready() {
            return None;
        }
        let Some(first) = self.screen else {
            let bytes = self.solve(None);
            self.decoded = bytes.is_some();
            self.tried = self.symbols.len();
            return bytes;
        };
        for out in first..SCREEN_SHARES {
            if let Some(b) = self.solve(Some(out)) {
                self.screen = Some(out);
                self.decoded = true;
                return Some(b);
            }
        }
        self.start_over();
        None
    }

    /// Bytes that failed their check: the first time (if `screen`; if not,
    /// the block starts over, [`Rejected::GiveUp`]), the symbols are kept
    /// and more collected ([`Rejected::Collect`]); then each try
    /// leaves out the next share ([`Rejected::Retry`]) until none is left
    /// ([`Rejected::Exhausted`], the symbols forgotten).
    fn reject(&mut self, screen: bool) -> Rejected {
        self.decoded = false;
        match self.screen {
            None if !screen => {
                self.start_over();
                Rejected::GiveUp
            }
            None => {
                self.screen = Some(0);
                Rejected::Collect
            }
            Some(out) if out + 1 < SCREEN_SHARES => {
                self.screen = Some(out + 1);
                Rejected::Retry
            }
            Some(_) => {
                self.start_over();
                Rejected::Exhausted
            }
        }
    }

    fn screening(&self) -> bool {
        self.screen.is_some()
    }

    fn take_symbols(&mut self) -> Option<Vec<(u32, Vec<u8>)>> {
        // Only before a decode was tried (a decoded or screening decoder
        // has tried one).
        if self.tried > 0 {
            return None;
        }
        self.held = IdSet::default();
        Some(self.symbols.take_pairs())
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
                    if i + 1 == k as usize && !dec.decoded {
                        fail_k += 1;
                    }
                }
                if !dec.decoded {
                    fail_k1 += 1;
                }
                n += 1;
            }
        }
        println!("trials {n}: fail at K {fail_k}, fail at K+1 {fail_k1}");
    }
}
