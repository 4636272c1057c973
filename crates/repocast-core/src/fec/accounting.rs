//! Accounting mode as a codec: the one place that models decoding without
//! bytes, for the simulator's runs. A block decodes once it holds `k +
//! overhead` distinct symbol ids below its code's symbol space (RaptorQ:
//! the overhead drawn from the measured failure odds, see
//! [`super::raptorq::FAIL_AT_K`]; Reed-Solomon and exact packets: none),
//! or once it holds all `k` source symbols (every code is systematic:
//! those are the block).
//! XOR parity is not a counting code (a parity packet may repeat what the
//! others say): its decoder tracks rank without rows instead
//! ([`super::xor::XorDecoder::counting`]).

use super::{BlockDecoder, CodeKind, IdSet};
use crate::rng::Rng;

/// A decoder that counts symbols.
pub struct AccountingDecoder {
    k: u32,
    space: u32,
    overhead: u32,
    held: IdSet,
    /// Source symbols (ids below `k`) held.
    sources: u32,
    decoded: bool,
    reported: bool,
}

impl AccountingDecoder {
    /// The model of `code`'s decoder for a block of `k` symbols (the code
    /// must count: not XOR). RaptorQ draws its overhead from `rng`.
    pub fn new(code: CodeKind, k: u32, rng: &mut Rng) -> Self {
        let k = k.clamp(1, code.max_block_symbols());
        let overhead = match code {
            CodeKind::RaptorQ => {
                let u = rng.next_f64();
                if u < super::raptorq::FAIL_AT_K1 {
                    2
                } else if u < super::raptorq::FAIL_AT_K {
                    1
                } else {
                    0
                }
            }
            _ => 0,
        };
        let space = match code {
            CodeKind::RaptorQ | CodeKind::Xor => crate::wire::data::MAX_SYMBOL_ID + 1,
            c => c.symbol_space(k),
        };
        AccountingDecoder {
            k,
            space,
            overhead,
            held: IdSet::default(),
            sources: 0,
            decoded: false,
            reported: false,
        }
    }
}

impl BlockDecoder for AccountingDecoder {
    fn add(&mut self, esi: u32, _payload: Option<&[u8]>) -> bool {
        if self.decoded || esi >= self.space || !self.held.insert(esi) {
            return false;
        }
        if esi < self.k {
            self.sources += 1;
        }
        self.decoded = self.held.len() >= self.k + self.overhead || self.sources == self.k;
        true
    }

    fn needed(&self) -> u32 {
        super::fountain_needed(self.decoded, self.held.len(), self.k)
    }

    fn missing(&self) -> Vec<u32> {
        self.held.missing_below(self.k)
    }

    fn try_decode(&mut self) -> Option<Vec<u8>> {
        (self.decoded && !std::mem::replace(&mut self.reported, true)).then(Vec::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RaptorQ's model: K source symbols always decode (raptorq returns
    /// them without solving), K symbols with repair among them fail at
    /// the measured odds, so over many blocks some need one more.
    #[test]
    fn all_source_symbols_always_decode_a_raptorq_block() {
        let mut rng = Rng::new(7);
        let k = 20;
        let (mut source_fails, mut mixed_fails) = (0, 0);
        for _ in 0..5_000 {
            let mut d = AccountingDecoder::new(CodeKind::RaptorQ, k, &mut rng);
            (0..k).for_each(|id| {
                d.add(id, None);
            });
            source_fails += u32::from(d.try_decode().is_none());
            let mut d = AccountingDecoder::new(CodeKind::RaptorQ, k, &mut rng);
            (1..=k).for_each(|id| {
                d.add(id, None);
            });
            mixed_fails += u32::from(d.try_decode().is_none());
        }
        assert_eq!(source_fails, 0);
        assert!(
            mixed_fails > 5,
            "{mixed_fails} of 5,000 at K with a repair symbol"
        );
    }
}
