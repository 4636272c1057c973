//! The demand table: which clients wait for which items, kept so that a
//! scheduler decision costs one pass over the groups of items with the
//! same waiters (`super::groups`), or over the items with demand.
//!
//! Per item it keeps its group (its waiters: R is their number; the
//! multiset of their Q keys, outstanding items or outstanding items over
//! fill rate, Q_i the smallest), its waiters ordered by request time, and
//! when it was last sent. A client's key changes when its outstanding count
//! or fill changes; the table then moves one count between two keys in each
//! group it is in.

use super::groups::{GroupId, Groups};
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
    /// The group of its waiters (`None`: nobody waits).
    group: Option<GroupId>,
    by_time: BTreeSet<(Instant, ClientId)>,
    last_sent: Option<u64>,
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
    /// Each item's one-copy link time in nanoseconds: its packets, each
    /// by its bytes on the wire at the server's rate (empty: unknown, all
    /// 0). Symbols fitted to a small item make its packets short, so its
    /// cost is its bytes, not its packet count.
    link_ns: Vec<u64>,
    /// Whether schedulers break ties by size (then id), not by id only.
    size_ties: bool,
    /// The waiting items grouped by their waiters.
    groups: Groups,
    /// The latest request time any wait was recorded with: no item's
    /// oldest request is later.
    latest_wait: Option<Instant>,
    /// Every waiting item by its oldest request (the batching hold looks
    /// only at the recent ones).
    by_oldest: BTreeSet<(Instant, ItemId)>,
    /// The link time of every waiting item, in all.
    active_link_ns: u64,
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
            link_ns: Vec::new(),
            size_ties: false,
            groups: Groups::default(),
            latest_wait: None,
            by_oldest: BTreeSet::new(),
            active_link_ns: 0,
        }
    }

    /// Sets each item's one-copy link time in nanoseconds (by item id),
    /// and whether schedulers break ties by it: of equal scores, the
    /// quickest item to send goes first (then the lowest id).
    pub fn set_link_times(&mut self, link_ns: Vec<u64>, ties: bool) {
        self.link_ns = link_ns;
        self.size_ties = ties;
        let mut groups = std::mem::take(&mut self.groups);
        groups.resize(|i| self.tie_size(i), |i| self.link_ns(i));
        self.groups = groups;
        self.active_link_ns =
            (self.active.iter()).fold(0, |a, &i| a.saturating_add(self.link_ns(i)));
    }

    /// `item`'s one-copy link time in nanoseconds (0 if unknown).
    pub fn link_ns(&self, item: ItemId) -> u64 {
        self.link_ns.get(item.0 as usize).copied().unwrap_or(0)
    }

    /// The size ties are broken by (0 for all without size ties).
    pub fn tie_size(&self, item: ItemId) -> u64 {
        if self.size_ties {
            self.link_ns(item)
        } else {
            0
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

    fn group_of(&self, item: ItemId) -> Option<&super::groups::Group> {
        let g = self.items.get(item.0 as usize)?.group?;
        self.groups.get(g)
    }

    /// R_i: clients waiting for `item`.
    pub fn r(&self, item: ItemId) -> u32 {
        self.group_of(item).map_or(0, |g| g.waiters.len() as u32)
    }

    /// Q_i as the table's key (smallest among the waiters), if any waits.
    pub fn q(&self, item: ItemId) -> Option<f64> {
        let g = self.group_of(item)?;
        g.keys.first().map(|(k, _)| f64::from_bits(*k))
    }

    /// One eligible item of each group of items with the same waiters: its
    /// first by [`Self::tie_size`], then id. A score that depends only on
    /// the waiters (R, Q) is the same for all of a group, so the best of
    /// these is the best of all ([`super::scores::best_of_groups`]).
    pub fn group_firsts(&self) -> impl Iterator<Item = ItemId> + '_ {
        (self.groups.iter()).filter_map(|(_, g)| {
            (g.items.iter())
                .map(|&(_, i)| i)
                .find(|i| self.held.is_empty() || !self.held.contains(i))
        })
    }

    /// No waiting item's oldest request is later than this (`None`: nobody
    /// has waited yet). O(1), where [`Self::oldest_request`] is per item.
    pub fn latest_request(&self) -> Option<Instant> {
        self.latest_wait
    }

    /// The waiting items whose oldest request was made at `since` or
    /// later, with that time, oldest first.
    pub fn requested_since(&self, since: Instant) -> impl Iterator<Item = (Instant, ItemId)> + '_ {
        self.by_oldest.range((since, ItemId(0))..).copied()
    }

    /// The one-copy link time of every waiting item, in all (ns).
    pub fn active_link_ns(&self) -> u64 {
        self.active_link_ns
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
        self.group_of(item)
            .map(|g| g.waiters.clone())
            .unwrap_or_default()
    }

    /// The link time (ns) of the waiting items besides `item` that a client not
    /// among `item`'s waiters waits for (items only they wait for do not
    /// count), counted until they reach `enough`; `None` if there are no
    /// such items. Looks at no more than `budget` waiters in all to tell
    /// (past it, every further group counts), so its work is bounded
    /// however many items and clients wait.
    pub fn link_time_waited_by_others(
        &self,
        item: ItemId,
        enough: u64,
        mut budget: usize,
    ) -> Option<u64> {
        let own = self.items.get(item.0 as usize).and_then(|d| d.group);
        let mine = self.group_of(item).map_or(&[][..], |g| &g.waiters[..]);
        let mut total: Option<u64> = None;
        for (id, g) in self.groups.iter() {
            if Some(id) == own {
                continue;
            }
            let n = g.waiters.len();
            if n <= mine.len() && n <= budget {
                budget -= n;
                if g.waiters.iter().all(|c| mine.binary_search(c).is_ok()) {
                    continue;
                }
            }
            let sum = total.unwrap_or(0).saturating_add(g.link_ns);
            total = Some(sum);
            if sum >= enough {
                break;
            }
        }
        total
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

    /// `item`'s oldest request moved from `was` to `now` (`None`: none).
    fn refile_oldest(&mut self, item: ItemId, was: Option<Instant>, now: Option<Instant>) {
        if let Some(w) = was {
            self.by_oldest.remove(&(w, item));
        }
        if let Some(n) = now {
            self.by_oldest.insert((n, item));
        }
    }

    /// Re-files `client` in each of its groups after its key changed.
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
        self.groups.rekey(client, old_key, new_key);
    }

    /// Moves `item` to the group of its waiters with `client` added
    /// (`join`) or taken out.
    fn regroup(&mut self, item: ItemId, client: ClientId, join: bool) {
        let (tie, link_ns) = (self.tie_size(item), self.link_ns(item));
        let Some(d) = self.items.get_mut(item.0 as usize) else {
            return;
        };
        let clients = &self.clients;
        let key = |c: ClientId| clients.get(&c).map_or(0, |c| c.key);
        d.group = (self.groups).change(d.group, item, tie, link_ns, client, join, key);
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
        self.clients.entry(client).or_insert_with(|| ClientDemand {
            fill: 1.0,
            ..Default::default()
        });
        for &item in items {
            let Some(c) = self.clients.get_mut(&client) else {
                return;
            };
            let Some(d) = self.items.get_mut(item.0 as usize) else {
                continue;
            };
            // Already waiting: it keeps its first request time.
            let Err(at) = c.find(item) else {
                continue;
            };
            c.waiting.insert(at, (item, since));
            self.changes += 1;
            let was = d.by_time.first().map(|e| e.0);
            d.by_time.insert((since, client));
            if was.is_none_or(|w| since < w) {
                self.refile_oldest(item, was, Some(since));
            }
            self.latest_wait = Some(self.latest_wait.map_or(since, |l| l.max(since)));
            if self.active.insert(item) {
                self.active_link_ns = self.active_link_ns.saturating_add(self.link_ns(item));
            }
            self.regroup(item, client, true);
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
        self.regroup(item, client, false);
        if let Some(d) = self.items.get_mut(item.0 as usize) {
            let was = d.by_time.first().map(|e| e.0);
            d.by_time.remove(&(since, client));
            let now = d.by_time.first().map(|e| e.0);
            let gone = d.group.is_none() && self.active.remove(&item);
            if was != now {
                self.refile_oldest(item, was, now);
            }
            if gone {
                self.active_link_ns = self.active_link_ns.saturating_sub(self.link_ns(item));
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
