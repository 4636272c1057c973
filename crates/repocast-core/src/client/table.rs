//! The client's requested items by id: a sorted id index over items kept in
//! arrival order. A data packet looks up its item once per receiver, tens
//! of millions of times in a simulated day; a binary search over a few
//! packed ids beats walking B-tree nodes of 370-byte entries. Consecutive
//! packets are nearly always of the same item, so the last hit is tried
//! first.

use super::item::ItemRx;
use crate::ItemId;

/// Requested items by id (never removed: a client's request only grows).
#[derive(Default)]
pub struct ItemTable {
    /// (id, index into `rx`), sorted by id.
    index: Vec<(ItemId, u32)>,
    rx: Vec<ItemRx>,
    /// Position in `index` of the last lookup's hit.
    last: std::cell::Cell<usize>,
}

impl ItemTable {
    /// `remember`: make this the last hit (the data path does; timer and
    /// announcement scans over other items do not, so they leave it).
    fn find(&self, id: ItemId, remember: bool) -> Option<usize> {
        if let Some(&(hit, i)) = self.index.get(self.last.get()) {
            if hit == id {
                return Some(i as usize);
            }
        }
        let at = self.index.binary_search_by_key(&id, |e| e.0).ok()?;
        if remember {
            self.last.set(at);
        }
        Some(self.index[at].1 as usize)
    }

    /// The item `id`.
    pub fn get(&self, id: &ItemId) -> Option<&ItemRx> {
        self.find(*id, false).map(|i| &self.rx[i])
    }

    /// The item `id`, mutably.
    pub fn get_mut(&mut self, id: &ItemId) -> Option<&mut ItemRx> {
        self.find(*id, true).map(|i| &mut self.rx[i])
    }

    /// The item `id`, added in its first phase if new.
    pub fn get_or_insert(&mut self, id: ItemId) -> &mut ItemRx {
        let i = match self.index.binary_search_by_key(&id, |e| e.0) {
            Ok(at) => self.index[at].1 as usize,
            Err(at) => {
                self.index.insert(at, (id, self.rx.len() as u32));
                self.rx.push(ItemRx::new());
                self.rx.len() - 1
            }
        };
        &mut self.rx[i]
    }

    /// Where item `id` sits: a handle that stays valid (items are never
    /// removed), for lists that revisit an item often.
    pub fn slot(&self, id: &ItemId) -> Option<u32> {
        self.find(*id, false).map(|i| i as u32)
    }

    /// The item at `slot` (from [`ItemTable::slot`]).
    pub fn at(&self, slot: u32) -> Option<&ItemRx> {
        self.rx.get(slot as usize)
    }

    /// The item at `slot`, mutably.
    pub fn at_mut(&mut self, slot: u32) -> Option<&mut ItemRx> {
        self.rx.get_mut(slot as usize)
    }

    /// Makes room for `n` more items.
    pub fn reserve(&mut self, n: usize) {
        self.index.reserve(n);
        self.rx.reserve(n);
    }

    /// Items, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &ItemRx> {
        self.rx.iter()
    }

    /// Items, mutably, in no particular order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut ItemRx> {
        self.rx.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_up_by_id_whatever_the_insertion_order() {
        let mut t = ItemTable::default();
        for id in [7u32, 3, 9, 3, 0] {
            t.get_or_insert(ItemId(id)).corrupt_blocks += 1;
        }
        let ids: Vec<ItemId> = t.index.iter().map(|e| e.0).collect();
        assert_eq!(ids, [0, 3, 7, 9].map(ItemId).to_vec());
        assert_eq!(t.get(&ItemId(3)).map(|i| i.corrupt_blocks), Some(2));
        // The last-hit shortcut never answers for another id.
        assert_eq!(t.get(&ItemId(7)).map(|i| i.corrupt_blocks), Some(1));
        assert!(t.get(&ItemId(4)).is_none() && t.get_mut(&ItemId(10)).is_none());
        assert_eq!(t.values().count(), 4);
    }
}
