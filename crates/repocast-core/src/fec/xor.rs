//! XOR parity over groups of k packets (the MFTP/EC baseline).
//!
//! A block is a group of k <= 32 source packets. Repair id k is the classic
//! parity, the XOR of the whole group; each further repair id is the XOR of a
//! pseudo-random subset fixed by the id, so a later round's parity is not a
//! useless copy of the first. The decoder does Gaussian elimination over
//! GF(2) on u32 masks, which also gives the accounting model its exact rank.

use super::{BlockDecoder, BlockEncoder, IdSet};

/// Largest group (masks are u32).
pub const MAX_K: u32 = 32;

fn full(k: u32) -> u32 {
    if k >= 32 { u32::MAX } else { (1u32 << k) - 1 }
}

/// Which source symbols symbol `esi` of a group of `k` combines.
pub fn mask(esi: u32, k: u32) -> u32 {
    let k = k.clamp(1, MAX_K);
    if esi < k {
        return 1 << esi;
    }
    if esi == k {
        return full(k);
    }
    let mut z = (esi as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    // Any non-empty subset: a singleton is a resend of that source packet,
    // which keeps tiny groups (k = 2) from seeing only the full parity.
    let m = (z ^ (z >> 29)) as u32 & full(k);
    if m == 0 { full(k) } else { m }
}

/// XOR-parity encoder for one group.
pub struct XorEncoder {
    k: u32,
    symbol_size: usize,
    data: Vec<u8>,
}

impl XorEncoder {
    /// An encoder over `data` (exactly `k * symbol_size` bytes, k <= 32).
    pub fn new(k: u32, symbol_size: u16, data: Vec<u8>) -> Self {
        XorEncoder {
            k: k.clamp(1, MAX_K),
            symbol_size: symbol_size as usize,
            data,
        }
    }
}

impl BlockEncoder for XorEncoder {
    fn symbol(&mut self, esi: u32, out: &mut Vec<u8>) {
        out.clear();
        out.resize(self.symbol_size, 0);
        let m = mask(esi, self.k);
        for i in 0..self.k {
            if m & (1 << i) != 0 {
                let s =
                    &self.data[i as usize * self.symbol_size..(i as usize + 1) * self.symbol_size];
                xor_into(out, s);
            }
        }
    }
}

fn xor_into(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= s;
    }
}

/// XOR-parity decoder for one group; [`XorDecoder::counting`] tracks rank
/// alone (the accounting codec's XOR model).
pub struct XorDecoder {
    k: u32,
    symbol_size: usize,
    payloads: bool,
    /// Row with pivot i (its lowest set bit) at index i.
    basis: Vec<Option<(u32, Vec<u8>)>>,
    rank: u32,
    sources: IdSet,
    decoded: bool,
}

impl XorDecoder {
    /// A decoder for a group of `k` symbols.
    pub fn new(k: u32, symbol_size: u16) -> Self {
        Self::build(k, symbol_size, true)
    }

    /// A decoder without bytes: parity masks and rank only.
    pub fn counting(k: u32) -> Self {
        Self::build(k, 0, false)
    }

    fn build(k: u32, symbol_size: u16, payloads: bool) -> Self {
        let k = k.clamp(1, MAX_K);
        XorDecoder {
            k,
            symbol_size: symbol_size as usize,
            payloads,
            basis: vec![None; k as usize],
            rank: 0,
            sources: IdSet::default(),
            decoded: false,
        }
    }
}

impl BlockDecoder for XorDecoder {
    fn add(&mut self, esi: u32, payload: Option<&[u8]>) -> bool {
        let space = crate::wire::data::MAX_SYMBOL_ID + 1;
        let ok = if self.payloads {
            super::admissible(esi, space, payload, self.symbol_size)
        } else {
            esi < space
        };
        if self.decoded || !ok {
            return false;
        }
        let mut m = mask(esi, self.k);
        let mut row = if self.payloads {
            payload.unwrap_or_default().to_vec()
        } else {
            Vec::new()
        };
        while m != 0 {
            let b = m.trailing_zeros() as usize;
            match &self.basis[b] {
                Some((bm, bp)) => {
                    m ^= bm;
                    xor_into(&mut row, bp);
                }
                None => {
                    self.basis[b] = Some((m, row));
                    self.rank += 1;
                    if esi < self.k {
                        self.sources.insert(esi);
                    }
                    return true;
                }
            }
        }
        false
    }

    fn needed(&self) -> u32 {
        if self.decoded { 0 } else { self.k - self.rank }
    }

    fn missing(&self) -> Vec<u32> {
        self.sources.missing_below(self.k)
    }

    fn try_decode(&mut self) -> Option<Vec<u8>> {
        if self.decoded || self.rank < self.k {
            return None;
        }
        self.decoded = true;
        if !self.payloads {
            return Some(Vec::new());
        }
        // Back-substitute from the highest pivot: row p then holds source p.
        let k = self.k as usize;
        for p in (0..k).rev() {
            let (mut m, mut row) = self.basis[p].take()?;
            for q in p + 1..k {
                if m & (1 << q) != 0 {
                    let (_, solved) = self.basis[q].as_ref()?;
                    xor_into(&mut row, solved);
                    m ^= 1 << q;
                }
            }
            self.basis[p] = Some((m, row));
        }
        let mut out = Vec::with_capacity(k * self.symbol_size);
        for slot in &self.basis {
            out.extend_from_slice(&slot.as_ref()?.1);
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repair_ids_reach_full_rank_for_every_group_size() {
        for k in 1..=MAX_K {
            // A receiver that lost every source symbol gets repair only.
            let mut d = XorDecoder::counting(k);
            let mut esi = k;
            while d.try_decode().is_none() {
                d.add(esi, None);
                esi += 1;
                assert!(esi < k + 40 * k + 100, "k {k} stuck at rank {}", d.rank);
            }
        }
    }
}
