//! Memory-bounded receiving: a driver may take partially received blocks
//! out of the client (to keep their symbols on disk) and give them back
//! before new symbols of the block arrive.
use super::Client;
use super::item::ItemPhase;
use crate::ItemId;

impl Client {
    /// Symbols block `block` of `item` holds in memory (0 if decoded,
    /// evicted or not started): a driver's measure of memory in use.
    pub fn held_symbols(&self, item: ItemId, block: u32) -> u32 {
        let Some(it) = self.items.get(&item) else {
            return 0;
        };
        match (
            it.decoders.get(block as usize).and_then(|d| d.as_ref()),
            it.layout,
        ) {
            (Some(d), Some(l)) => l.block_symbols(block).saturating_sub(d.needed()),
            _ => 0,
        }
    }

    /// Takes a partially received block out of memory: returns its symbols
    /// (id, bytes) for the driver to keep on disk, remembering how many it
    /// held so NAKs stay right. `None` if the block cannot be evicted (no
    /// partial decoder, a baseline code, accounting mode).
    pub fn evict(&mut self, item: ItemId, block: u32) -> Option<Vec<(u32, Vec<u8>)>> {
        let it = self.items.get_mut(&item)?;
        let slot = it.decoders.get_mut(block as usize)?;
        let symbols = slot.as_mut()?.take_symbols()?;
        *slot = None;
        *it.evicted.entry(block).or_insert(0) += symbols.len() as u32;
        Some(symbols)
    }

    /// Whether block `block` of `item` has symbols evicted to the driver.
    pub fn is_evicted(&self, item: ItemId, block: u32) -> bool {
        self.items
            .get(&item)
            .is_some_and(|i| i.evicted.contains_key(&block))
    }

    /// Gives back the symbols of an evicted block (before new ones for it).
    pub fn restore(&mut self, item: ItemId, block: u32, symbols: Vec<(u32, Vec<u8>)>) {
        let payloads = self.cfg.payloads;
        let Some(it) = self.items.get_mut(&item) else {
            return;
        };
        it.evicted.remove(&block);
        if it.phase != ItemPhase::Receiving || it.decoded.get(block as usize).is_none_or(|d| *d) {
            return;
        }
        let mut decoded = None;
        if let Some(dec) = it.decoder(block, payloads, &mut self.rng) {
            for (esi, bytes) in &symbols {
                dec.add(*esi, Some(bytes));
            }
            decoded = dec.try_decode();
        }
        if let Some(bytes) = decoded {
            self.block_decoded(item, block, bytes);
        }
    }
}
