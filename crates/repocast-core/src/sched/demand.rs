//! The demand table: which clients wait for which items, kept so that a
//! scheduler decision costs one pass over the items with demand.
//!
//! Per item it keeps its waiters (R is their number), the multiset of their
//! Q keys (outstanding items, or outstanding items over fill rate; Q_i is
//! the smallest), the waiters ordered by request time, and when the item
//! was last sent. A client's key changes when its outstanding count or fill
//! changes; the table then moves one count between two keys under each
//! item it waits for (with count keys there are only a few distinct ones,
//! so that is cheap: it runs for every item a client is served).

use crate::hash::FastMap;
use crate::{ClientId, Instant, ItemId};
use std::collections::BTreeSet;

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
    /// Items waited for, with the time each was requested, sorted by item
    /// (a client waits for a handful: a packed vector beats a hash map,
    /// and re-filing walks it for every item a client is served).
    waiting: Vec<(ItemId, Instant)>,
    fill: f64,
    key: u64,
}

impl ClientDemand {
    fn find(&self, item: ItemId) -> Result<usize, usize> {
        self.waiting.binary_search_by_key(&item, |e| e.0)
    }
}

#[derive(Debug, Default, Clone)]
struct ItemDemand {
    waiters: BTreeSet<ClientId>,
    /// The waiters' keys with how many waiters have each, ascending (few
    /// distinct keys with count keys: a sorted vector beats a tree).
    keys: Vec<(u64, u32)>,
    by_time: BTreeSet<(Instant, ClientId)>,
    last_sent: Option<u64>,
}

impl ItemDemand {
    fn add_key(&mut self, key: u64) {
        match self.keys.binary_search_by_key(&key, |e| e.0) {
            Ok(i) => self.keys[i].1 += 1,
            Err(i) => self.keys.insert(i, (key, 1)),
        }
    }

    fn remove_key(&mut self, key: u64) {
        if let Ok(i) = self.keys.binary_search_by_key(&key, |e| e.0) {
            self.keys[i].1 -= 1;
            if self.keys[i].1 == 0 {
                self.keys.remove(i);
            }
        }
    }
}

/// Who waits for what.
#[derive(Debug)]
pub struct DemandTable {
    mode: QKey,
    clients: FastMap<ClientId, ClientDemand>,
    items: Vec<ItemDemand>,
    active: BTreeSet<ItemId>,
    /// Waiting items the batching hold keeps back for now (`super::hold`).
    held: BTreeSet<ItemId>,
    /// Bumped whenever somebody starts or stops waiting for something.
    changes: u64,
    transmissions: u64,
    /// Each item's size in symbols, for breaking ties (empty: by id only).
    sizes: Vec<u64>,
    /// The latest request time any wait was recorded with: no item's
    /// oldest request is later.
    latest_wait: Option<Instant>,
}

impl DemandTable {
    /// A table over a catalogue of `items` items.
    pub fn new(items: u32, mode: QKey) -> Self {
        DemandTable {
            mode,
            clients: Default::default(),
            items: vec![ItemDemand::default(); items as usize],
            active: BTreeSet::new(),
            held: BTreeSet::new(),
            changes: 0,
            transmissions: 0,
            sizes: Vec::new(),
            latest_wait: None,
        }
    }

    /// Breaks schedulers' ties by size from now on: of equal scores, the
    /// item of the fewest `sizes` (symbols, by item id) goes first.
    pub fn set_sizes(&mut self, sizes: Vec<u64>) {
        self.sizes = sizes;
    }

    /// The size ties are broken by (0 for all without sizes).
    pub fn tie_size(&self, item: ItemId) -> u64 {
        self.sizes.get(item.0 as usize).copied().unwrap_or(0)
    }

    /// Items in the catalogue.
    pub fn item_count(&self) -> u32 {
        self.items.len() as u32
    }

    /// Items that some client waits for, ascending.
    pub fn active(&self) -> impl Iterator<Item = ItemId> + '_ {
        self.active.iter().copied()
    }

    /// Waiting items a request-mode scheduler may choose from: all of
    /// [`DemandTable::active`] but those the batching hold keeps back.
    pub fn eligible(&self) -> impl Iterator<Item = ItemId> + '_ {
        self.active.difference(&self.held).copied()
    }

    /// Sets the items the batching hold keeps back (`super::hold::apply`).
    pub fn set_held(&mut self, held: BTreeSet<ItemId>) {
        self.held = held;
    }

    /// A counter that moves whenever a wait starts or ends, so a decision
    /// taken on the table (a hold's end) can tell it is out of date.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// R_i: clients waiting for `item`.
    pub fn r(&self, item: ItemId) -> u32 {
        self.items
            .get(item.0 as usize)
            .map_or(0, |d| d.waiters.len() as u32)
    }

    /// Q_i as the table's key (smallest among the waiters), if any waits.
    pub fn q(&self, item: ItemId) -> Option<f64> {
        let d = self.items.get(item.0 as usize)?;
        d.keys.first().map(|(k, _)| f64::from_bits(*k))
    }

    /// No waiting item's oldest request is later than this (`None`: nobody
    /// has waited yet). O(1), where [`Self::oldest_request`] is per item.
    pub fn latest_request(&self) -> Option<Instant> {
        self.latest_wait
    }

    /// When the oldest outstanding request for `item` was made.
    pub fn oldest_request(&self, item: ItemId) -> Option<Instant> {
        let d = self.items.get(item.0 as usize)?;
        d.by_time.first().map(|(t, _)| *t)
    }

    /// Packet slots of all transmissions started so far (MAD's clock).
    pub fn slots(&self) -> u64 {
        self.transmissions
    }

    /// Sets the slot clock (a pusher's next version going on from the
    /// last one's: `server::carry`).
    pub fn set_slots(&mut self, slots: u64) {
        self.transmissions = slots;
    }

    /// The slot clock when `item` was last sent (None: never).
    pub fn last_sent(&self, item: ItemId) -> Option<u64> {
        self.items.get(item.0 as usize)?.last_sent
    }

    /// Sets when `item` was last sent, on the slot clock.
    pub fn set_last_sent(&mut self, item: ItemId, at: Option<u64>) {
        if let Some(d) = self.items.get_mut(item.0 as usize) {
            d.last_sent = at.map(|s| s.min(self.transmissions));
        }
    }

    /// Time since `item` was last sent, in packet slots: the packets of
    /// every transmission started since (and of its own last one).
    /// `None`: never sent.
    pub fn since_sent(&self, item: ItemId) -> Option<u64> {
        let d = self.items.get(item.0 as usize)?;
        d.last_sent.map(|s| self.transmissions - s)
    }

    /// Clients waiting for `item`, ascending by id.
    pub fn waiters(&self, item: ItemId) -> Vec<ClientId> {
        self.items
            .get(item.0 as usize)
            .map(|d| d.waiters.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Whether every client waiting for `item` is one of `clients`
    /// (ascending by id, as [`Self::waiters`] gives them), looking at no
    /// more than `budget` waiters (spent from it; `false` once it would
    /// run out), so a caller asking this of many items does bounded work.
    pub fn waited_only_by(&self, item: ItemId, clients: &[ClientId], budget: &mut usize) -> bool {
        let Some(d) = self.items.get(item.0 as usize) else {
            return false;
        };
        let n = d.waiters.len();
        if n > clients.len() || n > *budget {
            return false;
        }
        *budget -= n;
        d.waiters.iter().all(|c| clients.binary_search(c).is_ok())
    }

    /// Whether `client` waits for `item`.
    pub fn is_waiting(&self, client: ClientId, item: ItemId) -> bool {
        self.clients
            .get(&client)
            .is_some_and(|c| c.find(item).is_ok())
    }

    /// Items `client` waits for.
    pub fn outstanding(&self, client: ClientId) -> u32 {
        self.clients
            .get(&client)
            .map_or(0, |c| c.waiting.len() as u32)
    }

    fn key_of(mode: QKey, c: &ClientDemand) -> u64 {
        let n = c.waiting.len() as f64;
        match mode {
            QKey::Count => n.to_bits(),
            QKey::CountOverFill => (n / c.fill.max(1e-3)).to_bits(),
        }
    }

    /// Re-files `client` under each of its items after its key changed.
    fn refile(&mut self, client: ClientId) {
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        let new_key = Self::key_of(self.mode, c);
        let old_key = c.key;
        if new_key == old_key {
            return;
        }
        c.key = new_key;
        for (it, _) in &c.waiting {
            if let Some(d) = self.items.get_mut(it.0 as usize) {
                d.remove_key(old_key);
                d.add_key(new_key);
            }
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
        self.add_waits(client, &[item], since);
    }

    /// Records that `client` (now) waits for each of `items`, re-filing it
    /// once (a whole request at a time). Unknown items are ignored.
    pub fn add_waits(&mut self, client: ClientId, items: &[ItemId], since: Instant) {
        let c = self.clients.entry(client).or_insert_with(|| ClientDemand {
            fill: 1.0,
            ..Default::default()
        });
        let key = c.key;
        for &item in items {
            let Some(d) = self.items.get_mut(item.0 as usize) else {
                continue;
            };
            // Already waiting: it keeps its first request time.
            let Err(at) = c.find(item) else {
                continue;
            };
            c.waiting.insert(at, (item, since));
            self.changes += 1;
            d.waiters.insert(client);
            d.add_key(key);
            d.by_time.insert((since, client));
            self.latest_wait = Some(self.latest_wait.map_or(since, |l| l.max(since)));
            self.active.insert(item);
        }
        self.refile(client);
    }

    /// Records that `client` no longer waits for `item` (sent to it, or done).
    pub fn remove_wait(&mut self, client: ClientId, item: ItemId) {
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        let Ok(at) = c.find(item) else {
            return;
        };
        let (_, since) = c.waiting.remove(at);
        self.changes += 1;
        let key = c.key;
        if let Some(d) = self.items.get_mut(item.0 as usize) {
            d.waiters.remove(&client);
            d.remove_key(key);
            d.by_time.remove(&(since, client));
            if d.waiters.is_empty() {
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
            .map(|c| c.waiting.iter().map(|e| e.0).collect())
            .unwrap_or_default();
        for it in items {
            self.remove_wait(client, it);
        }
        self.clients.remove(&client);
    }

    /// Records that a transmission of `item`, `packets` long, has just
    /// started (for MAD's s_i, measured in packet slots).
    pub fn mark_sent(&mut self, item: ItemId, packets: u64) {
        self.transmissions += packets.max(1);
        if let Some(d) = self.items.get_mut(item.0 as usize) {
            d.last_sent = Some(self.transmissions);
        }
    }
}
