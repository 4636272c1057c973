//! One block's received symbols, in arrival order and in chunks: how the
//! RaptorQ and Reed-Solomon decoders keep them until the block decodes
//! (or is spilled, [`super::BlockDecoder::take_symbols`]).

/// Symbols in a chunk of [`Symbols`], at most.
const CHUNK_SYMBOLS: usize = 64;

/// One block's symbols in arrival order, copied into chunks of up to
/// [`CHUNK_SYMBOLS`] (never more than the block's K), so a symbol costs a
/// copy and no allocation of its own: a listener takes thousands a second.
pub(super) struct Symbols {
    /// Bytes per symbol (at least 1).
    t: usize,
    /// Symbols per chunk.
    per: usize,
    ids: Vec<u32>,
    chunks: Vec<Vec<u8>>,
}

impl Symbols {
    /// None yet, for a block of `k` symbols of `t` bytes.
    pub(super) fn new(k: u32, t: usize) -> Self {
        Symbols {
            t: t.max(1),
            per: CHUNK_SYMBOLS.min(k as usize).max(1),
            ids: Vec::new(),
            chunks: Vec::new(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }

    /// Adds `p`, a whole symbol (the caller checked its length).
    pub(super) fn push(&mut self, esi: u32, p: &[u8]) {
        if self.ids.len() % self.per == 0 {
            self.chunks.push(Vec::with_capacity(self.per * self.t));
        }
        if let Some(c) = self.chunks.last_mut() {
            c.extend_from_slice(p);
            self.ids.push(esi);
        }
    }

    /// Every symbol (id, bytes) in arrival order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, &[u8])> {
        let bytes = (self.chunks.iter()).flat_map(|c| c.chunks_exact(self.t));
        self.ids.iter().copied().zip(bytes)
    }

    /// Hands over every symbol (id, bytes) in arrival order, each in a
    /// vector of its own (for the spill), and keeps none.
    pub(super) fn take_pairs(&mut self) -> Vec<(u32, Vec<u8>)> {
        let pairs = self.iter().map(|(e, b)| (e, b.to_vec())).collect();
        self.ids = Vec::new();
        self.chunks = Vec::new();
        pairs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Symbols are kept in chunks of at most K (or 64), in arrival order,
    /// past K too (a screening block holds more).
    #[test]
    fn symbols_keep_their_order_across_chunks() {
        let (k, t) = (3u32, 4usize);
        let mut s = Symbols::new(k, t);
        let sym = |i: u32| vec![i as u8; t];
        for i in 0..8 {
            s.push(100 - i, &sym(i));
        }
        assert_eq!(s.len(), 8);
        assert_eq!(s.chunks.len(), 3);
        // Chunks of K, not of 64 symbols.
        let small =
            |c: &Vec<u8>| c.capacity() >= k as usize * t && c.capacity() < CHUNK_SYMBOLS * t;
        assert!(s.chunks.iter().all(small));
        let want: Vec<(u32, Vec<u8>)> = (0..8).map(|i| (100 - i, sym(i))).collect();
        assert_eq!(s.take_pairs(), want);
        assert_eq!(s.len(), 0);
        // A large block's chunks hold 64 symbols each.
        let mut big = Symbols::new(1000, t);
        for i in 0..65 {
            big.push(i, &sym(i));
        }
        assert_eq!(big.chunks.len(), 2);
        assert_eq!(big.chunks[0].len(), CHUNK_SYMBOLS * t);
    }
}
