//! The demand table: which clients wait for which items, kept so that a
//! scheduler decision costs one pass over the items with demand.
//!
//! Per item it keeps R (clients waiting), the waiters ordered by the
//! client's Q key (outstanding items, or outstanding items over fill rate),
//! the waiters ordered by request time, and when the item was last sent.
//! A client's key changes when its outstanding count or fill changes; the
//! table then re-files the client under each item it waits for.

use crate::{ClientId, Instant, ItemId};
use std::collections::{BTreeSet, HashMap};

/// What a client's Q is for the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QKey {
    /// Number of items the client still waits for.
    Count,
    /// That number divided by the client's fill rate (expected time).
    CountOverFill,
}

#[derive(Debug, Default)]
struct ClientDemand {
    /// Items waited for, with the time each was requested.
    waiting: HashMap<ItemId, Instant>,
    fill: f64,
    key: u64,
}

#[derive(Debug, Default, Clone)]
struct ItemDemand {
    by_key: BTreeSet<(u64, ClientId)>,
    by_time: BTreeSet<(Instant, ClientId)>,
    last_sent: Option<u64>,
}

/// Who waits for what.
#[derive(Debug)]
pub struct DemandTable {
    mode: QKey,
    clients: crate::hash::FastMap<ClientId, ClientDemand>,
    items: Vec<ItemDemand>,
    active: BTreeSet<ItemId>,
    transmissions: u64,
}

impl DemandTable {
    /// A table over a catalogue of `items` items.
    pub fn new(items: u32, mode: QKey) -> Self {
        DemandTable {
            mode,
            clients: Default::default(),
            items: vec![ItemDemand::default(); items as usize],
            active: BTreeSet::new(),
            transmissions: 0,
        }
    }

    /// Items in the catalogue.
    pub fn item_count(&self) -> u32 {
        self.items.len() as u32
    }

    /// Items that some client waits for, ascending.
    pub fn active(&self) -> impl Iterator<Item = ItemId> + '_ {
        self.active.iter().copied()
    }

    /// R_i: clients waiting for `item`.
    pub fn r(&self, item: ItemId) -> u32 {
        self.items
            .get(item.0 as usize)
            .map_or(0, |d| d.by_key.len() as u32)
    }

    /// Q_i as the table's key (smallest among the waiters), if any waits.
    pub fn q(&self, item: ItemId) -> Option<f64> {
        let d = self.items.get(item.0 as usize)?;
        d.by_key.first().map(|(k, _)| f64::from_bits(*k))
    }

    /// When the oldest outstanding request for `item` was made.
    pub fn oldest_request(&self, item: ItemId) -> Option<Instant> {
        let d = self.items.get(item.0 as usize)?;
        d.by_time.first().map(|(t, _)| *t)
    }

    /// Transmissions since `item` was last sent (`None`: never sent).
    pub fn since_sent(&self, item: ItemId) -> Option<u64> {
        let d = self.items.get(item.0 as usize)?;
        d.last_sent.map(|s| self.transmissions - s)
    }

    /// Clients waiting for `item`, ascending by id.
    pub fn waiters(&self, item: ItemId) -> Vec<ClientId> {
        let mut v: Vec<ClientId> = self
            .items
            .get(item.0 as usize)
            .map(|d| d.by_key.iter().map(|(_, c)| *c).collect())
            .unwrap_or_default();
        v.sort_unstable();
        v
    }

    /// Whether `client` waits for `item`.
    pub fn is_waiting(&self, client: ClientId, item: ItemId) -> bool {
        self.clients
            .get(&client)
            .is_some_and(|c| c.waiting.contains_key(&item))
    }

    /// Items `client` waits for.
    pub fn outstanding(&self, client: ClientId) -> u32 {
        self.clients
            .get(&client)
            .map_or(0, |c| c.waiting.len() as u32)
    }

    fn key_of(&self, c: &ClientDemand) -> u64 {
        let n = c.waiting.len() as f64;
        match self.mode {
            QKey::Count => n.to_bits(),
            QKey::CountOverFill => (n / c.fill.max(1e-3)).to_bits(),
        }
    }

    /// Re-files `client` under each of its items after its key changed.
    fn refile(&mut self, client: ClientId) {
        let Some(c) = self.clients.get(&client) else {
            return;
        };
        let new_key = self.key_of(c);
        let old_key = c.key;
        if new_key == old_key {
            return;
        }
        let items: Vec<ItemId> = c.waiting.keys().copied().collect();
        for it in items {
            if let Some(d) = self.items.get_mut(it.0 as usize) {
                d.by_key.remove(&(old_key, client));
                d.by_key.insert((new_key, client));
            }
        }
        if let Some(c) = self.clients.get_mut(&client) {
            c.key = new_key;
        }
    }

    /// Sets `client`'s fill rate (fraction of packets it receives).
    pub fn set_fill(&mut self, client: ClientId, fill: f64) {
        if let Some(c) = self.clients.get_mut(&client) {
            c.fill = fill.clamp(1e-3, 1.0);
            self.refile(client);
        }
    }

    /// Records that `client` (now) waits for `item`. Unknown items are ignored.
    pub fn add_wait(&mut self, client: ClientId, item: ItemId, since: Instant) {
        if item.0 as usize >= self.items.len() {
            return;
        }
        let c = self.clients.entry(client).or_insert_with(|| ClientDemand {
            fill: 1.0,
            ..Default::default()
        });
        if c.waiting.insert(item, since).is_some() {
            return;
        }
        let key = c.key;
        let d = &mut self.items[item.0 as usize];
        d.by_key.insert((key, client));
        d.by_time.insert((since, client));
        self.active.insert(item);
        self.refile(client);
    }

    /// Records that `client` no longer waits for `item` (sent to it, or done).
    pub fn remove_wait(&mut self, client: ClientId, item: ItemId) {
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        let Some(since) = c.waiting.remove(&item) else {
            return;
        };
        let key = c.key;
        if let Some(d) = self.items.get_mut(item.0 as usize) {
            d.by_key.remove(&(key, client));
            d.by_time.remove(&(since, client));
            if d.by_key.is_empty() {
                self.active.remove(&item);
            }
        }
        self.refile(client);
    }

    /// Forgets `client` entirely.
    pub fn remove_client(&mut self, client: ClientId) {
        let items: Vec<ItemId> = self
            .clients
            .get(&client)
            .map(|c| c.waiting.keys().copied().collect())
            .unwrap_or_default();
        for it in items {
            self.remove_wait(client, it);
        }
        self.clients.remove(&client);
    }

    /// Records that `item` was just transmitted (for MAD's s_i).
    pub fn mark_sent(&mut self, item: ItemId) {
        self.transmissions += 1;
        if let Some(d) = self.items.get_mut(item.0 as usize) {
            d.last_sent = Some(self.transmissions);
        }
    }
}
