//! Where a push-mode server's symbols come from, between passes of its
//! items.
//!
//! A fountain encoder's first repair symbol costs the block's whole
//! intermediate-symbol computation (about 6 ms for 1,000 symbols of 1,280
//! bytes). Built afresh each pass, every block of an item would pay it in
//! the same round, and the sender would stall for the sum. So:
//!
//! - **An item whose blocks fit the budget** keeps its encoders across
//!   passes (least recently used out first), and
//!   [`EncoderCache::prepare_one`] lets the Fcast order ([`super::fcast`])
//!   do that work one block at a time, spread over a pass of source
//!   symbols, where pacing leaves the time for it.
//! - **A larger item is streamed**: its source symbols are read from the
//!   driver's source as they go out, and its repair symbols are made ahead,
//!   a batch per block at a time ([`EncoderCache::make_ahead`]: the block
//!   is read and encoded, the batch kept, the encoder dropped), so every
//!   round of a pass still takes a symbol of every block while the server
//!   holds about a budget of symbols, whatever the item's size. Each batch
//!   costs a read and encode of its block, so an item is streamed only
//!   while that work, estimated at the sending rate, stays under half a
//!   core ([`MAKE_NS_PER_BYTE`]). A source symbol read on its own is not
//!   checked against its block's hash as a whole block's read is: a file
//!   changed in place fails its item at the block's next batch, and
//!   listeners check every block against its signed hash anyway.
//! - **Otherwise** (a large item at a high rate) the pass takes the
//!   item's blocks in spans of the budget, every round of one span before
//!   the next ([`Fit::Spans`]): cheap for the sender, but a listener that
//!   needs a few more symbols of every block waits for the rest of a
//!   span's pass between them.

use super::config::BlockSource;
use super::transmission::{ReadFailed, load_encoder, read_source_symbol};
use crate::ItemId;
use crate::fec::layout::Layout;
use crate::fec::{BlockEncoder, CodeKind};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, VecDeque};

/// Fewest repair symbols a streamed item's block makes at a time (each
/// batch costs one read and encode of the block). Above budget / (64 x
/// symbol size) blocks (1 GiB of 1,440-byte symbols in 64 MiB), this
/// floor, not the budget, bounds the symbols held.
pub const MIN_AHEAD: u32 = 64;

/// Estimated sender CPU per byte of a block, to read, check and encode it
/// for a batch of repair symbols (3.1 ms for 971 symbols of 1,440 bytes
/// measured on the project machine: 2.2 ns, rounded up).
pub const MAKE_NS_PER_BYTE: u64 = 3;

/// How a pass of an item gets its symbols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// Its blocks fit the budget: encoders kept across passes.
    Kept,
    /// Streamed: repair symbols made ahead, every block in every round.
    Streamed,
    /// Too large to stream at the rate: spans of the budget.
    Spans,
}

/// One block's repair symbols made ahead.
#[derive(Default)]
struct Ahead {
    /// The id the next symbol made will have (`None`: the first repair id).
    next: Option<u32>,
    symbols: VecDeque<(u32, Vec<u8>)>,
}

/// The item being streamed and its blocks' symbols made ahead.
struct Stream {
    item: ItemId,
    /// Symbols a batch tops a block up to.
    per_block: u32,
    blocks: Vec<Ahead>,
}

struct Kept {
    encoder: Box<dyn BlockEncoder>,
    bytes: u64,
    used: u64,
    prepared: bool,
}

/// Encoders by (item, block), bounded by the bytes of their blocks, and
/// the symbols of the one item streamed (about one budget more, kept while
/// other items' passes come between, so its next pass starts made ahead).
pub struct EncoderCache {
    kept: BTreeMap<(ItemId, u32), Kept>,
    stream: Option<Stream>,
    /// The same keys by last use, oldest first.
    by_use: BTreeMap<u64, (ItemId, u32)>,
    bytes: u64,
    budget: u64,
    /// The sending rate, packets per second (what a stream must keep up
    /// with).
    packets_per_sec: u64,
    tick: u64,
}

impl EncoderCache {
    /// An empty cache holding at most `budget` bytes of blocks (one block
    /// is always kept, whatever its size), for a sender of
    /// `packets_per_sec`.
    pub fn new(budget: u64, packets_per_sec: u64) -> Self {
        EncoderCache {
            kept: BTreeMap::new(),
            stream: None,
            by_use: BTreeMap::new(),
            bytes: 0,
            budget,
            packets_per_sec,
            tick: 0,
        }
    }

    /// The encoder of `block` of `item`, built by `load` (`bytes` of block
    /// data) unless kept.
    pub fn get_or_load(
        &mut self,
        item: ItemId,
        block: u32,
        bytes: u64,
        load: impl FnOnce() -> Result<Box<dyn BlockEncoder>, ReadFailed>,
    ) -> Result<&mut Box<dyn BlockEncoder>, ReadFailed> {
        self.tick += 1;
        let key = (item, block);
        if !self.kept.contains_key(&key) {
            while self.bytes + bytes > self.budget && self.evict() {}
        }
        let kept = match self.kept.entry(key) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let encoder = load()?;
                self.bytes += bytes;
                e.insert(Kept {
                    encoder,
                    bytes,
                    used: 0,
                    prepared: false,
                })
            }
        };
        self.by_use.remove(&kept.used);
        kept.used = self.tick;
        self.by_use.insert(self.tick, key);
        Ok(&mut kept.encoder)
    }

    /// How `item` (laid out by `layout`) is sent: kept if its blocks fit
    /// the budget; else streamed (its symbols made ahead kept if it already
    /// was) while making them ahead costs under half a core at the rate;
    /// else in spans.
    pub fn fit(&mut self, item: ItemId, layout: &Layout) -> Fit {
        let (g, total) = (layout.blocks(), layout.size());
        if total <= self.budget {
            return Fit::Kept;
        }
        if self.stream.as_ref().is_some_and(|s| s.item == item) {
            return Fit::Streamed;
        }
        let t = layout.symbol_size().max(1) as u64;
        let per_block =
            (self.budget / (g.max(1) as u64 * t)).clamp(MIN_AHEAD as u64, u32::MAX as u64) as u32;
        // A batch tops a block up from under half to full: about 3/4 of
        // a batch per read and encode of the block.
        let block = total / g.max(1) as u64;
        let ns_per_sec =
            (self.packets_per_sec as u128 * block as u128 * 4 * MAKE_NS_PER_BYTE as u128)
                / (3 * per_block as u128);
        if ns_per_sec > 500_000_000 {
            return Fit::Spans;
        }
        // Its blocks do not fit, so neither do kept encoders beside them.
        while self.evict() {}
        self.stream = Some(Stream {
            item,
            per_block,
            blocks: (0..g).map(|_| Ahead::default()).collect(),
        });
        Fit::Streamed
    }

    /// Packets between two [`EncoderCache::make_ahead`] calls for a
    /// streamed item (each tops up one block by at least half a batch, so
    /// making keeps ahead of sending), `None` if `item` is not streamed.
    pub fn ahead_gap(&self, item: ItemId) -> Option<u64> {
        let s = self.stream.as_ref().filter(|s| s.item == item)?;
        Some((s.per_block as u64 / 4).max(1))
    }

    /// Writes symbol `esi` of `block` of `item` into `out`: from its kept
    /// encoder (loaded from `src` if need be), or for a streamed item, a
    /// source symbol read from `src` or a repair symbol made ahead (made
    /// now, with a batch after it, if it was not).
    #[allow(clippy::too_many_arguments)]
    pub fn symbol(
        &mut self,
        item: ItemId,
        block: u32,
        esi: u32,
        layout: &Layout,
        code: CodeKind,
        src: &mut dyn BlockSource,
        out: &mut Vec<u8>,
    ) -> Result<(), ReadFailed> {
        let Some(stream) = self.stream.as_mut().filter(|s| s.item == item) else {
            let len = layout.block_len(block);
            let enc = self.get_or_load(item, block, len, || {
                load_encoder(item, block, layout, code, src)
            })?;
            enc.symbol(esi, out);
            return Ok(());
        };
        if esi < layout.block_symbols(block) {
            return read_source_symbol(item, block, esi, layout, src, out);
        }
        let Some(ahead) = stream.blocks.get_mut(block as usize) else {
            out.clear();
            return Ok(());
        };
        // Ids go out in order; one not made ahead (a plan that jumped)
        // starts the batch afresh from it.
        while ahead.symbols.front().is_some_and(|(id, _)| *id != esi) {
            ahead.symbols.pop_front();
        }
        if ahead.symbols.is_empty() {
            ahead.next = Some(esi);
            make(stream, item, block, layout, code, src)?;
        }
        match stream
            .blocks
            .get_mut(block as usize)
            .and_then(|a| a.symbols.pop_front())
        {
            Some((_, bytes)) => *out = bytes,
            None => out.clear(),
        }
        Ok(())
    }

    /// Tops up the block of streamed `item` with the fewest repair symbols
    /// made ahead, if it holds under half a batch; returns whether it did.
    pub fn make_ahead(
        &mut self,
        item: ItemId,
        layout: &Layout,
        code: CodeKind,
        src: &mut dyn BlockSource,
    ) -> Result<bool, ReadFailed> {
        let Some(stream) = self.stream.as_mut().filter(|s| s.item == item) else {
            return Ok(false);
        };
        let lowest = (stream.blocks.iter().enumerate())
            .min_by_key(|(_, a)| a.symbols.len())
            .map(|(b, a)| (b as u32, a.symbols.len() as u32));
        match lowest {
            Some((b, held)) if held < stream.per_block / 2 => {
                make(stream, item, b, layout, code, src)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Repair symbols made ahead for the streamed item, if any.
    pub fn ahead_symbols(&self) -> usize {
        (self.stream.iter().flat_map(|s| &s.blocks))
            .map(|a| a.symbols.len())
            .sum()
    }

    /// Drops the least recently used encoder; false if none is left.
    fn evict(&mut self) -> bool {
        let Some((_, key)) = self.by_use.pop_first() else {
            return false;
        };
        if let Some(k) = self.kept.remove(&key) {
            self.bytes -= k.bytes;
        }
        true
    }

    /// Prepares one kept encoder of `item` that has not been (lowest block
    /// first); returns whether one did any work.
    pub fn prepare_one(&mut self, item: ItemId) -> bool {
        let range = (item, 0)..=(item, u32::MAX);
        for (_, k) in self.kept.range_mut(range).filter(|(_, k)| !k.prepared) {
            k.prepared = true;
            if k.encoder.prepare() {
                return true;
            }
        }
        false
    }

    /// Bytes of blocks kept.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Encoders kept.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

/// Reads and encodes `block` of the streamed item and tops its symbols
/// made ahead up to a batch, from the block's next id on (wrapping at the
/// code's symbol space).
fn make(
    stream: &mut Stream,
    item: ItemId,
    block: u32,
    layout: &Layout,
    code: CodeKind,
    src: &mut dyn BlockSource,
) -> Result<(), ReadFailed> {
    let k = layout.block_symbols(block);
    let space = code.symbol_space(k).max(1) as u64;
    let Some(ahead) = stream.blocks.get_mut(block as usize) else {
        return Ok(());
    };
    let want = (stream.per_block as usize).saturating_sub(ahead.symbols.len());
    if want == 0 {
        return Ok(());
    }
    let mut enc = load_encoder(item, block, layout, code, src)?;
    let mut id = ahead.next.unwrap_or(k);
    for _ in 0..want {
        let mut bytes = Vec::new();
        enc.symbol(id, &mut bytes);
        ahead.symbols.push_back((id, bytes));
        id = ((id as u64 + 1) % space) as u32;
    }
    ahead.next = Some(id);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fec::CodeKind;

    fn load(k: u32) -> Result<Box<dyn BlockEncoder>, ReadFailed> {
        CodeKind::RaptorQ
            .encoder(k, 16, vec![7; k as usize * 16])
            .map_err(|e| ReadFailed(e.into()))
    }

    #[test]
    fn the_least_recently_used_goes_first_and_the_budget_holds() {
        let mut c = EncoderCache::new(300, 10_000);
        for b in 0..3 {
            c.get_or_load(ItemId(0), b, 100, || load(4)).expect("load");
        }
        // Touch block 0; block 1 is now the oldest.
        c.get_or_load(ItemId(0), 0, 100, || panic!("kept"))
            .expect("kept");
        c.get_or_load(ItemId(1), 0, 100, || load(4)).expect("load");
        assert_eq!((c.len(), c.bytes()), (3, 300));
        let mut reloaded = false;
        c.get_or_load(ItemId(0), 1, 100, || {
            reloaded = true;
            load(4)
        })
        .expect("load");
        assert!(reloaded, "block 1 should have been evicted");
        // One block larger than the budget is still kept, alone.
        c.get_or_load(ItemId(2), 0, 1000, || load(4)).expect("load");
        assert_eq!((c.len(), c.bytes()), (1, 1000));
    }

    #[test]
    fn prepare_one_works_through_an_items_blocks_once_each() {
        let mut c = EncoderCache::new(1 << 20, 10_000);
        for b in 0..3 {
            c.get_or_load(ItemId(0), b, 100, || load(10)).expect("load");
        }
        c.get_or_load(ItemId(1), 0, 100, || load(10)).expect("load");
        assert!(c.prepare_one(ItemId(0)));
        assert!(c.prepare_one(ItemId(0)));
        assert!(c.prepare_one(ItemId(0)));
        assert!(!c.prepare_one(ItemId(0)), "item 0 is all prepared");
        assert!(c.prepare_one(ItemId(1)));
        // A prepared encoder still gives the same repair symbols.
        let mut fresh = load(10).expect("load");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        fresh.symbol(12, &mut a);
        c.get_or_load(ItemId(0), 0, 100, || panic!("kept"))
            .expect("kept")
            .symbol(12, &mut b);
        assert_eq!(a, b);
    }
}
