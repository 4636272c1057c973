//! The encoders a push-mode server keeps between passes of its items.
//!
//! A fountain encoder's first repair symbol costs the block's whole
//! intermediate-symbol computation (about 6 ms for 1,000 symbols of 1,280
//! bytes). Built afresh each pass, every block of an item would pay it in
//! the same round, and the sender would stall for the sum. The cache keeps
//! encoders across passes, up to a budget of block bytes (least recently
//! used out first), and [`EncoderCache::prepare_one`] lets the Fcast order
//! ([`super::fcast`]) do that work one block at a time, spread over a pass
//! of source symbols, where pacing leaves the time for it.

use super::transmission::ReadFailed;
use crate::ItemId;
use crate::fec::BlockEncoder;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

struct Kept {
    encoder: Box<dyn BlockEncoder>,
    bytes: u64,
    used: u64,
    prepared: bool,
}

/// Encoders by (item, block), bounded by the bytes of their blocks.
pub struct EncoderCache {
    kept: BTreeMap<(ItemId, u32), Kept>,
    /// The same keys by last use, oldest first.
    by_use: BTreeMap<u64, (ItemId, u32)>,
    bytes: u64,
    budget: u64,
    tick: u64,
}

impl EncoderCache {
    /// An empty cache holding at most `budget` bytes of blocks (one block
    /// is always kept, whatever its size).
    pub fn new(budget: u64) -> Self {
        EncoderCache {
            kept: BTreeMap::new(),
            by_use: BTreeMap::new(),
            bytes: 0,
            budget,
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
        let mut c = EncoderCache::new(300);
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
        let mut c = EncoderCache::new(1 << 20);
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
