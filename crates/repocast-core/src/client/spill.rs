//! Memory-bounded receiving: a driver may take partially received blocks
//! out of the client (to keep their symbols on disk). A symbol for such a
//! block that cannot complete it is handed to the driver to keep with
//! the others ([`Client::take_deferred`]); the driver gives the block back
//! ([`Client::restore`]) just before the symbol that can complete it
//! ([`Client::completes_evicted`]). So memory holds only blocks being fed,
//! and a spilled block is read back once, not once per symbol.
use super::Client;
use super::item::{ItemPhase, ItemRx};
use crate::ItemId;
use crate::wire::DataRepr;

/// A symbol of an evicted block for the driver's spill: item, block,
/// symbol id, bytes.
pub type Deferred = (ItemId, u32, u32, Vec<u8>);

/// `p`'s symbol for the spill, when its block (of `it`, receiving, not
/// decoded) is evicted and the symbol cannot complete it; the count of
/// symbols held off memory goes up by one.
pub(super) fn defer(it: &mut ItemRx, p: &DataRepr) -> Option<Deferred> {
    let b = p.block.0;
    let (layout, m) = (it.layout?, it.manifest.as_ref()?);
    let k = layout.block_symbols(b);
    let held = it.evicted.get_mut(&b)?;
    let space = m.fec.code.symbol_space(k).saturating_add(1);
    let fits = crate::fec::admissible(
        p.symbol,
        space,
        Some(&p.payload),
        layout.symbol_size() as usize,
    );
    if held.saturating_add(1) >= k || !fits {
        return None;
    }
    *held += 1;
    Some((p.item, b, p.symbol, p.payload.clone()))
}

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
            (Some(d), Some(l)) => {
                (d.held()).unwrap_or_else(|| l.block_symbols(block).saturating_sub(d.needed()))
            }
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

    /// Whether block `block` of `item` (still receiving) has symbols
    /// evicted to the driver.
    pub fn is_evicted(&self, item: ItemId, block: u32) -> bool {
        self.items
            .get(&item)
            .is_some_and(|i| i.phase == ItemPhase::Receiving && i.evicted.contains_key(&block))
    }

    /// Whether the next symbol of evicted block `block` of `item` can
    /// complete it: the driver then gives the block back first.
    pub fn completes_evicted(&self, item: ItemId, block: u32) -> bool {
        let Some(it) = self.items.get(&item) else {
            return true;
        };
        match (it.evicted.get(&block), it.layout) {
            (Some(&held), Some(l)) => held.saturating_add(1) >= l.block_symbols(block),
            _ => true,
        }
    }

    /// Symbols of evicted blocks the last calls received, for the
    /// driver's spill.
    pub fn take_deferred(&mut self) -> Vec<Deferred> {
        std::mem::take(&mut self.deferred)
    }

    /// Blocks whose symbols an earlier run kept on disk (the driver's
    /// store found `held` of them when the item opened): they count as
    /// evicted, so they come back before the symbol that can complete
    /// them, and NAKs ask only for the rest. A block verified, begun in
    /// memory or out as a decode job is left as it is; a count of K or
    /// more (the store's word, not checked here) counts as K - 1, so the
    /// next symbol brings the block back.
    pub fn resume_spilled(&mut self, item: ItemId, block: u32, held: u32) {
        let Some(it) = self.items.get_mut(&item) else {
            return;
        };
        let Some(k) = it.layout.map(|l| l.block_symbols(block)) else {
            return;
        };
        let free = it.phase == ItemPhase::Receiving
            && it.decoded.get(block as usize) == Some(&false)
            && it.decoders.get(block as usize).is_some_and(Option::is_none)
            && !it.decoding.contains_key(&block)
            && !it.evicted.contains_key(&block);
        if free && held > 0 {
            it.evicted.insert(block, held.min(k.saturating_sub(1)));
        }
    }

    /// Blocks holding symbols in memory (begun, not decoded, not out as a
    /// decode job) of items still being received: what a driver moves to
    /// its store when the run stops short ([`Client::evict`]).
    pub fn blocks_in_memory(&self) -> Vec<(ItemId, u32)> {
        let mut out = Vec::new();
        for it in self.items.values() {
            let Some(item) = (it.manifest.as_ref())
                .filter(|_| it.phase == ItemPhase::Receiving)
                .map(|m| m.item)
            else {
                continue;
            };
            for (b, slot) in (0u32..).zip(it.decoders.iter()) {
                let done = it.decoded.get(b as usize).is_none_or(|d| *d);
                if slot.is_some() && !done && !it.decoding.contains_key(&b) {
                    out.push((item, b));
                }
            }
        }
        out
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
        let Some(dec) = it.decoder(block, payloads, &mut self.rng) else {
            return;
        };
        for (esi, bytes) in &symbols {
            dec.add(*esi, Some(bytes));
        }
        if !dec.ready() {
            return;
        }
        if let Some(dec) = it.decoders.get_mut(block as usize).and_then(Option::take) {
            self.decode_in_place(item, block, dec);
        }
    }
}
