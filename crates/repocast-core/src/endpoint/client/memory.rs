//! The client endpoint's memory bound: partly received blocks beyond
//! [`super::ClientEndpointConfig::memory_budget`] go to the store's spill,
//! least recently fed first, and come back just before the symbol that
//! can complete them (the state machine's side is `crate::client::spill`).
//! A run that stops short moves every partly received block to the spill
//! and has the store keep it ([`ClientEndpoint::suspend`]), so the next
//! run on the same folder goes on with those symbols, not only with the
//! blocks it had verified. Part of [`super::ClientEndpoint`].

use super::ClientEndpoint;
use crate::client::Client;
use crate::endpoint::store::BlockStore;
use crate::hash::FastMap;
use crate::wire::DataRepr;
use crate::{Instant, ItemId};

/// Data packets between checks of the memory budget.
const EVICT_EVERY: u64 = 256;
/// Symbols of spilled blocks written to the store at a time.
const SPILL_BATCH: usize = 256;

impl<S: BlockStore> ClientEndpoint<S> {
    /// A data packet that passed its checks: a spilled block it can
    /// complete comes back first; symbols the state machine defers go to
    /// the spill in batches; every [`EVICT_EVERY`] useful packets the
    /// budget is checked.
    pub(super) fn on_data(&mut self, now: Instant, p: &DataRepr) {
        let key = (p.item, p.block.0);
        if self.store.is_spilled(key.0, key.1) && self.client.completes_evicted(key.0, key.1) {
            // This symbol can complete the block: it comes back first.
            let mut syms = match self.store.unspill(key.0, key.1) {
                Ok(syms) => syms,
                Err(e) => return self.client.abandon(key.0, e.to_string()),
            };
            syms.extend(self.spill_batch.remove(&key).unwrap_or_default());
            self.client.restore(key.0, key.1, syms);
            self.stats.restored_blocks += 1;
            self.lru.insert(key, self.tick);
        }
        let useful = self.client.handle_data(now, p);
        for (item, block, esi, bytes) in self.client.take_deferred() {
            self.spill_batch
                .entry((item, block))
                .or_default()
                .push((esi, bytes));
            self.batched += 1;
        }
        if self.batched >= SPILL_BATCH {
            self.flush_spill();
        }
        if useful {
            self.last_heard = now;
            self.tick += 1;
            if !self.client.is_evicted(key.0, key.1) {
                self.lru.insert(key, self.tick);
            }
            if self.tick % EVICT_EVERY == 0 {
                self.evict();
            }
        }
    }

    /// The run stops short of what it wants (the driver stops it, the idle
    /// timeout, the server gone): every partly received block still in
    /// memory goes to the store's spill, and the store keeps the spill of
    /// every item still being received for a later run
    /// ([`BlockStore::keep_spilled`]). Blocks out as decode jobs are not
    /// here: after the run's end they are kept as they come back
    /// ([`ClientEndpoint::decoded`]). Harmless twice.
    pub fn suspend(&mut self) {
        for (item, block) in self.client.blocks_in_memory() {
            let Some(syms) = self.client.evict(item, block) else {
                continue;
            };
            self.lru.remove(&(item, block));
            if self.store.spill(item, block, &syms).is_err() {
                // Stopping: the symbols are lost, nothing else.
                self.stats.keep_failures += 1;
            }
        }
        self.keep_spilled();
    }

    /// Has the store keep what it holds spilled of every item still being
    /// received (the blocks in memory stay: a new catalogue version
    /// carries those itself).
    pub fn keep_spilled(&mut self) {
        self.flush_spill();
        let items: Vec<ItemId> = (self.sizes.iter())
            .filter(|(_, (name, _))| !self.outcomes.contains_key(name))
            .map(|(i, _)| *i)
            .collect();
        for item in items {
            if self.store.keep_spilled(item).is_err() {
                self.stats.keep_failures += 1;
            }
        }
    }

    /// Blocks of an item just opened whose symbols an earlier run kept:
    /// spilled blocks of this run (see [`Client::resume_spilled`]).
    pub(super) fn find_kept(&mut self, item: ItemId) {
        for (block, held) in self.store.spilled_counts(item) {
            self.client.resume_spilled(item, block, held);
            if self.client.is_evicted(item, block) {
                self.stats.kept_blocks_found += 1;
                self.stats.kept_symbols_found += held as u64;
            }
        }
    }

    /// Writes the batched symbols of spilled blocks to the store, a
    /// block's at a time.
    fn flush_spill(&mut self) {
        self.batched = 0;
        for ((item, block), syms) in std::mem::take(&mut self.spill_batch) {
            // A block given back, or an item ended since: nothing to keep.
            if !self.client.is_evicted(item, block) {
                continue;
            }
            if let Err(e) = self.store.spill(item, block, &syms) {
                self.client.abandon(item, e.to_string());
            }
        }
    }

    /// Keeps partly received blocks within the memory budget: when over,
    /// moves the least recently fed to the store's spill until half the
    /// budget is in use. A block that cannot leave (its decoder has begun)
    /// stays counted.
    fn evict(&mut self) {
        let held = |c: &Client, sizes: &FastMap<ItemId, u64>, (i, b): (ItemId, u32)| {
            c.held_symbols(i, b) as u64 * sizes.get(&i).copied().unwrap_or(0)
        };
        let budget = self.cfg.memory_budget;
        let mut total: u64 = (self.lru.keys())
            .map(|k| held(&self.client, &self.symbol_sizes, *k))
            .sum();
        self.stats.peak_held_bytes = self.stats.peak_held_bytes.max(total);
        if total <= budget {
            return;
        }
        let mut order: Vec<((ItemId, u32), u64)> = self.lru.iter().map(|(k, v)| (*k, *v)).collect();
        order.sort_by_key(|(_, t)| *t);
        for (key, _) in order {
            if total <= budget / 2 {
                break;
            }
            let bytes = held(&self.client, &self.symbol_sizes, key);
            if bytes == 0 {
                self.lru.remove(&key);
                continue;
            }
            if let Some(syms) = self.client.evict(key.0, key.1) {
                self.lru.remove(&key);
                if let Err(e) = self.store.spill(key.0, key.1, &syms) {
                    self.client.abandon(key.0, e.to_string());
                    continue;
                }
                total = total.saturating_sub(bytes);
                self.stats.spilled_blocks += 1;
            }
        }
    }
}
