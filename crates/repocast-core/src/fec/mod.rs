//! Erasure codes behind one trait, and the block layout they share.
//!
//! An item of `size` bytes is cut into symbols of `symbol_size` bytes (the
//! last one zero-padded) and grouped into source blocks ([`layout`]). Each
//! code turns a block's source symbols into encoding symbols numbered by an
//! encoding symbol id (ESI): ids `0..k` are the source symbols themselves,
//! higher ids are repair. The same [`BlockDecoder`] runs with payloads (real
//! decoding) or without them (symbol accounting for the simulator: which ids
//! are held and whether the code could decode from them).
//!
//! Codes: [`raptorq`] (RFC 6330, default), [`reed_solomon`] (Fcast-style
//! blocks), [`xor`] (MFTP/EC parity groups) and [`exact`] (no code). The
//! first two keep a block's symbols in `held`, which screens them when
//! the bytes they solve to fail the block's hash.

pub mod accounting;
pub mod exact;
mod held;
pub mod layout;
pub mod raptorq;
pub mod reed_solomon;
mod symbols;
pub mod xor;

use crate::rng::Rng;

/// Which erasure code an item uses (in settings files: its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum CodeKind {
    /// RaptorQ fountain code (RFC 6330): unlimited fresh repair symbols.
    RaptorQ,
    /// Reed-Solomon (n, k) blocks, GF(2^16) via `reed-solomon-simd`.
    ReedSolomon,
    /// XOR parity over groups of k packets (MFTP/EC).
    Xor,
    /// No code: repair resends the very packets that were lost.
    Exact,
}

impl TryFrom<String> for CodeKind {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        CodeKind::from_name(&s)
            .ok_or_else(|| format!("unknown code {s:?} (raptorq, rs, xor, exact)"))
    }
}

impl CodeKind {
    /// Every code, in a fixed order.
    pub const ALL: [CodeKind; 4] = [
        CodeKind::RaptorQ,
        CodeKind::ReedSolomon,
        CodeKind::Xor,
        CodeKind::Exact,
    ];

    /// Wire value.
    pub fn to_u8(self) -> u8 {
        match self {
            CodeKind::RaptorQ => 0,
            CodeKind::ReedSolomon => 1,
            CodeKind::Xor => 2,
            CodeKind::Exact => 3,
        }
    }

    /// From a wire value.
    pub fn from_u8(v: u8) -> Option<Self> {
        CodeKind::ALL.get(v as usize).copied()
    }

    /// The name used in configs and the scheme notation.
    pub fn name(self) -> &'static str {
        match self {
            CodeKind::RaptorQ => "raptorq",
            CodeKind::ReedSolomon => "rs",
            CodeKind::Xor => "xor",
            CodeKind::Exact => "exact",
        }
    }

    /// Parses [`CodeKind::name`].
    pub fn from_name(s: &str) -> Option<Self> {
        CodeKind::ALL.into_iter().find(|c| c.name() == s)
    }

    /// About the bytes a prepared encoder of a block of `k` symbols of
    /// `t` bytes holds: the block, and with RaptorQ its intermediate
    /// symbols (K' + S + H of them, S + H at most 4 sqrt(K') + 10 over RFC
    /// 6330's table). For a block of a few symbols that is many times the
    /// block: one symbol pads to K' = 10 and needs 27 intermediate ones.
    pub fn encoder_bytes(self, k: u32, t: u16) -> u64 {
        let block = k as u64 * t as u64;
        match self {
            CodeKind::RaptorQ => {
                let kp =
                    ::raptorq::extended_source_block_symbols(k.clamp(1, raptorq::MAX_K)) as u64;
                let sh = 4 * (kp as f64).sqrt().ceil() as u64 + 10;
                block + (kp + sh) * t as u64
            }
            CodeKind::ReedSolomon | CodeKind::Xor | CodeKind::Exact => 2 * block,
        }
    }

    /// Largest source block this code accepts, in symbols.
    pub fn max_block_symbols(self) -> u32 {
        match self {
            CodeKind::RaptorQ => raptorq::MAX_K,
            CodeKind::ReedSolomon => reed_solomon::MAX_K,
            CodeKind::Xor => xor::MAX_K,
            CodeKind::Exact => 1 << 20,
        }
    }

    /// The block size used unless configured otherwise.
    pub fn default_block_symbols(self) -> u32 {
        match self {
            CodeKind::RaptorQ => 1000,
            CodeKind::ReedSolomon => 32,
            CodeKind::Xor => 16,
            CodeKind::Exact => 1000,
        }
    }

    /// Number of distinct encoding symbol ids a block of `k` symbols has;
    /// the server wraps around past it (only RaptorQ never needs to).
    pub fn symbol_space(self, k: u32) -> u32 {
        match self {
            CodeKind::RaptorQ => crate::wire::data::MAX_SYMBOL_ID,
            CodeKind::ReedSolomon => k + reed_solomon::repair_count(k),
            CodeKind::Xor => crate::wire::data::MAX_SYMBOL_ID,
            CodeKind::Exact => k,
        }
    }

    /// Whether a NAK for this code lists the missing source ids.
    pub fn naks_list_ids(self) -> bool {
        matches!(self, CodeKind::Exact | CodeKind::Xor)
    }

    /// An encoder for one block's source bytes (`k * symbol_size` bytes).
    pub fn encoder(
        self,
        k: u32,
        symbol_size: u16,
        data: Vec<u8>,
    ) -> Result<Box<dyn BlockEncoder>, FecError> {
        if data.len() != k as usize * symbol_size as usize || k == 0 {
            return Err(FecError::BadBlock { k, len: data.len() });
        }
        Ok(match self {
            CodeKind::RaptorQ => Box::new(raptorq::RaptorQEncoder::new(k, symbol_size, data)),
            CodeKind::ReedSolomon => Box::new(reed_solomon::RsEncoder::new(k, symbol_size, data)?),
            CodeKind::Xor => Box::new(xor::XorEncoder::new(k, symbol_size, data)),
            CodeKind::Exact => Box::new(exact::ExactEncoder::new(k, symbol_size, data)),
        })
    }

    /// A decoder for one block of `k` symbols. `payloads` chooses real
    /// decoding or the accounting codec ([`accounting`]); `rng` draws the
    /// accounting model's decode failures (RaptorQ only).
    pub fn decoder(
        self,
        k: u32,
        symbol_size: u16,
        payloads: bool,
        rng: &mut Rng,
    ) -> Box<dyn BlockDecoder> {
        match (self, payloads) {
            (CodeKind::Xor, false) => Box::new(xor::XorDecoder::counting(k)),
            (_, false) => Box::new(accounting::AccountingDecoder::new(self, k, rng)),
            (CodeKind::RaptorQ, true) => Box::new(raptorq::RaptorQDecoder::new(k, symbol_size)),
            (CodeKind::ReedSolomon, true) => Box::new(reed_solomon::RsDecoder::new(k, symbol_size)),
            (CodeKind::Xor, true) => Box::new(xor::XorDecoder::new(k, symbol_size)),
            (CodeKind::Exact, true) => Box::new(exact::ExactDecoder::new(k, symbol_size)),
        }
    }
}

/// Errors of the FEC layer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FecError {
    /// The block's bytes do not match `k * symbol_size`, or `k` is zero.
    #[error("block of {k} symbols cannot have {len} bytes")]
    BadBlock {
        /// Symbols in the block.
        k: u32,
        /// Bytes supplied.
        len: usize,
    },
    /// The block is larger than the code can encode.
    #[error("block of {k} symbols over the code's {max}")]
    BlockTooLarge {
        /// Symbols in the block.
        k: u32,
        /// The code's largest block.
        max: u32,
    },
}

/// Produces encoding symbols for one source block.
pub trait BlockEncoder: Send {
    /// Writes the symbol with id `esi` into `out` (cleared first). Ids past
    /// the code's symbol space wrap around.
    fn symbol(&mut self, esi: u32, out: &mut Vec<u8>);
    /// Does now the work repair symbols need before the first one (a
    /// fountain code's intermediate symbols), so it is not done on the
    /// sending path. Returns whether there was any to do.
    fn prepare(&mut self) -> bool {
        false
    }
    /// Whether [`BlockEncoder::prepare`] still has work to do (the first
    /// repair symbol would do it on the sending path).
    fn needs_prepare(&self) -> bool {
        false
    }
    /// A fresh encoder over the same block, for [`BlockEncoder::prepare`]
    /// on another thread (it gives the same symbols); `None` for a code
    /// with no such work.
    fn spare(&self) -> Option<Box<dyn BlockEncoder>> {
        None
    }
}

/// Collects encoding symbols of one block until it can be decoded.
pub trait BlockDecoder: Send {
    /// Adds a symbol. `payload` must be `Some` (of exactly the symbol size)
    /// for a real decoder and is ignored by the accounting codec. Returns false if the
    /// symbol was a duplicate or otherwise useless.
    fn add(&mut self, esi: u32, payload: Option<&[u8]>) -> bool;
    /// Further symbols needed before decoding is expected to succeed.
    fn needed(&self) -> u32;
    /// Missing source ids (meaningful for the exact and XOR codes).
    fn missing(&self) -> Vec<u32>;
    /// Decodes if possible: `Some(block bytes)` in payload mode, `Some(empty)`
    /// in accounting mode; `None` while more symbols are needed. This is
    /// where a real code's decoding work is done, so a driver can do it
    /// off its receiving path (`client::decode`).
    fn try_decode(&mut self) -> Option<Vec<u8>>;
    /// Whether [`BlockDecoder::try_decode`] has something to try: enough
    /// symbols held, and (a fountain code) something new since a failed
    /// attempt.
    fn ready(&self) -> bool {
        self.needed() == 0
    }
    /// Symbols held in memory, if the decoder counts them (a screening
    /// decoder holds more than K); otherwise K less
    /// [`BlockDecoder::needed`] is the measure.
    fn held(&self) -> Option<u32> {
        None
    }
    /// The bytes [`BlockDecoder::try_decode`] gave last failed their check
    /// (a forged or corrupt symbol among those held): what the decoder
    /// does about it. The default gives up (the caller starts the block
    /// over), as any decoder does unless `screen`; RaptorQ and
    /// Reed-Solomon keep their symbols and screen them
    /// ([`Rejected::Collect`], then [`Rejected::Retry`]; module `held`).
    fn reject(&mut self, _screen: bool) -> Rejected {
        Rejected::GiveUp
    }
    /// Whether it is screening (its last bytes were rejected): bytes it
    /// gives now come from its symbols with a share left out.
    fn screening(&self) -> bool {
        false
    }
    /// Hands over the symbols held so far (id, bytes) and forgets them, so a
    /// driver can keep them on disk; `None` if this decoder cannot (the
    /// XOR and exact baselines, accounting mode, or a block about to decode).
    fn take_symbols(&mut self) -> Option<Vec<(u32, Vec<u8>)>> {
        None
    }
}

/// What a decoder does after its bytes failed their check
/// ([`BlockDecoder::reject`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    /// Nothing: the caller drops it and starts the block over.
    GiveUp,
    /// It keeps its symbols and needs more before it tries again, each
    /// try leaving out another share of them.
    Collect,
    /// It has another share to leave out: try again now.
    Retry,
    /// Every share was left out in turn and none gave the block's bytes
    /// (more than one bad symbol): it has forgotten its symbols and the
    /// block starts over.
    Exhausted,
}

/// Symbols a fountain-code block still needs: none once decoded, `k -
/// held` below K, and one at a time once K or more are held without a
/// decode (RaptorQ, and the accounting codec's model of it).
pub(crate) fn fountain_needed(decoded: bool, held: u32, k: u32) -> u32 {
    if decoded {
        0
    } else if held >= k {
        1
    } else {
        k - held
    }
}

/// The checks every real decoder makes before taking a symbol: its id is
/// below `space` and it carries exactly `symbol_size` bytes.
pub(crate) fn admissible(esi: u32, space: u32, payload: Option<&[u8]>, symbol_size: usize) -> bool {
    esi < space && payload.is_some_and(|p| p.len() == symbol_size)
}

/// A set of symbol ids, as a growable bitmap starting at the word of the
/// lowest id seen (repair ids climb through a long run: a receiver that
/// joins late holds only high ids, and a bitmap from zero would cost it
/// kilobytes per block).
#[derive(Debug, Clone, Default)]
pub struct IdSet {
    /// Word index of `words[0]`.
    base: u32,
    words: Vec<u64>,
    len: u32,
}

impl IdSet {
    /// Inserts `id`; true if it was new.
    #[inline]
    pub fn insert(&mut self, id: u32) -> bool {
        let wi = id / 64;
        // Below `base` wraps to a huge index: both ways out of range take
        // the slow path, which widens the words (once per new word).
        let w = wi.wrapping_sub(self.base) as usize;
        let word = match self.words.get_mut(w) {
            Some(word) => word,
            None => self.widen(wi),
        };
        let bit = 1u64 << (id % 64);
        if *word & bit != 0 {
            return false;
        }
        *word |= bit;
        self.len += 1;
        true
    }

    /// Makes room for word `wi` (first word, below the lowest, or above the
    /// highest) and returns it.
    #[cold]
    fn widen(&mut self, wi: u32) -> &mut u64 {
        if self.words.is_empty() {
            self.base = wi;
        } else if wi < self.base {
            let shift = (self.base - wi) as usize;
            self.words.splice(0..0, std::iter::repeat_n(0, shift));
            self.base = wi;
        }
        let w = (wi - self.base) as usize;
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
        }
        &mut self.words[w]
    }

    /// Whether `id` is present.
    pub fn contains(&self, id: u32) -> bool {
        (id / 64)
            .checked_sub(self.base)
            .and_then(|w| self.words.get(w as usize))
            .is_some_and(|w| w & (1u64 << (id % 64)) != 0)
    }

    /// Number of ids present.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Ids below `k` that are absent, ascending (a word at a time).
    pub fn missing_below(&self, k: u32) -> Vec<u32> {
        let mut out = Vec::with_capacity((k - self.len.min(k)) as usize);
        for wi in 0..k.div_ceil(64) {
            let held = (wi.checked_sub(self.base))
                .and_then(|w| self.words.get(w as usize))
                .copied()
                .unwrap_or(0);
            let mut absent = !held;
            while absent != 0 {
                let id = wi * 64 + absent.trailing_zeros();
                if id >= k {
                    break;
                }
                out.push(id);
                absent &= absent - 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::IdSet;

    #[test]
    fn id_set_grows_both_ways_from_its_first_id() {
        let mut s = IdSet::default();
        let ids = [70_000u32, 70_063, 70_064, 5, 0, 1_000_000, 69_999];
        for &id in &ids {
            assert!(s.insert(id));
            assert!(!s.insert(id), "{id} inserted twice");
        }
        assert_eq!(s.len(), ids.len() as u32);
        for id in 0..1_000_100u32 {
            assert_eq!(s.contains(id), ids.contains(&id), "{id}");
        }
        assert_eq!(s.missing_below(7), vec![1, 2, 3, 4, 6]);
    }
}
