//! Groups of waiting items that exactly the same clients wait for.
//!
//! Part of the [`super::DemandTable`]. R and Q (the waiters' number and
//! their smallest key) are the same for every item of a group, so a
//! scheduler whose score depends on nothing else scores one item per group
//! (its first eligible one by size and id), and a client's key change
//! re-files it once per group it is in, not once per item it waits for.
//! One client asking for 20,000 files is one group: before groups, every
//! send scored all the items waiting and re-filed the client under each,
//! most of a server's CPU (docs/benchmarks.md, session 51).

use crate::hash::FastMap;
use crate::{ClientId, ItemId};
use std::collections::BTreeSet;

/// A group's place in [`Groups`] (reused once it is deleted).
pub(super) type GroupId = u32;

/// Items with the same waiters.
#[derive(Debug)]
pub(super) struct Group {
    /// The waiters, ascending.
    pub(super) waiters: Vec<ClientId>,
    /// Their hash: the sum of their [`mix`].
    hash: u64,
    /// The waiters' keys with how many waiters have each, ascending.
    pub(super) keys: Vec<(u64, u32)>,
    /// The items, by size (one-copy link time; 0 without size ties) then
    /// id.
    pub(super) items: BTreeSet<(u64, ItemId)>,
    /// Their one-copy link time in all (ns).
    pub(super) link_ns: u64,
}

impl Group {
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

/// Every group, by id, with each client's groups.
#[derive(Debug, Default)]
pub(super) struct Groups {
    /// A group of each hash in use (`Group::hash`), to find a group by its waiters
    /// without hashing them (a group whose hash another set has taken is
    /// left out: a second group of the same waiters may then be made,
    /// which costs a candidate more, never a wrong answer).
    ids: FastMap<u64, GroupId>,
    /// Each group at its id (`None`: a free place).
    groups: Vec<Option<Group>>,
    /// Free places, to reuse.
    free: Vec<GroupId>,
    /// The groups each client is a waiter of, ascending.
    member_of: FastMap<ClientId, Vec<GroupId>>,
    /// Room to build a set of waiters in (no allocation per change).
    scratch: Vec<ClientId>,
}

/// One client's share of a set of waiters' hash, the sum of its clients'
/// shares, so adding or taking out one client changes it in constant time
/// (splitmix64's finaliser).
fn mix(c: ClientId) -> u64 {
    let mut z = u64::from(c.0).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A set of waiters' hash, from scratch.
#[cfg(test)]
fn set_hash(waiters: &[ClientId]) -> u64 {
    (waiters.iter()).fold(0u64, |h, &c| h.wrapping_add(mix(c)))
}

/// Adds `client` to the ascending `waiters` (`join`) or takes it out;
/// whether that changed them.
fn edit(waiters: &mut Vec<ClientId>, client: ClientId, join: bool) -> bool {
    match (waiters.binary_search(&client), join) {
        (Err(at), true) => waiters.insert(at, client),
        (Ok(at), false) => {
            waiters.remove(at);
        }
        _ => return false,
    }
    true
}

impl Groups {
    pub(super) fn get(&self, id: GroupId) -> Option<&Group> {
        self.groups.get(id as usize)?.as_ref()
    }

    fn get_mut(&mut self, id: GroupId) -> Option<&mut Group> {
        self.groups.get_mut(id as usize)?.as_mut()
    }

    /// Every group, ascending by id.
    pub(super) fn iter(&self) -> impl Iterator<Item = (GroupId, &Group)> + '_ {
        (0..)
            .zip(&self.groups)
            .filter_map(|(id, g)| Some((id, g.as_ref()?)))
    }

    /// Takes `item` (`link_ns` long, ordered by `tie`) out of group `id`;
    /// a group left empty is deleted.
    pub(super) fn remove(&mut self, id: GroupId, item: ItemId, tie: u64, link_ns: u64) {
        let Some(g) = self.get_mut(id) else {
            return;
        };
        g.items.remove(&(tie, item));
        g.link_ns = g.link_ns.saturating_sub(link_ns);
        if !g.items.is_empty() {
            return;
        }
        if let Some(g) = self.groups.get_mut(id as usize).and_then(Option::take) {
            self.free.push(id);
            if self.ids.get(&g.hash) == Some(&id) {
                self.ids.remove(&g.hash);
            }
            for c in &g.waiters {
                if let Some(m) = self.member_of.get_mut(c) {
                    if let Ok(at) = m.binary_search(&id) {
                        m.remove(at);
                    }
                    if m.is_empty() {
                        self.member_of.remove(c);
                    }
                }
            }
        }
    }

    /// Puts `item` into the group of `waiters` (ascending, not empty;
    /// their hash `hash`), made with each waiter's current `key` if there
    /// is none; returns the group's id.
    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        waiters: &[ClientId],
        hash: u64,
        item: ItemId,
        tie: u64,
        link_ns: u64,
        key: impl Fn(ClientId) -> u64,
    ) -> GroupId {
        let id = match self.find(hash, waiters) {
            Some(id) => id,
            None => self.make(waiters, hash, key),
        };
        if let Some(g) = self.get_mut(id) {
            g.items.insert((tie, item));
            g.link_ns = g.link_ns.saturating_add(link_ns);
        }
        id
    }

    /// The group of `waiters`, whose hash is `hash`, if there is one (and
    /// it is the one of its hash).
    fn find(&self, hash: u64, waiters: &[ClientId]) -> Option<GroupId> {
        let &id = self.ids.get(&hash)?;
        self.get(id)
            .is_some_and(|g| g.waiters == waiters)
            .then_some(id)
    }

    /// A new, empty group of `waiters`, with each one's current `key`.
    fn make(&mut self, waiters: &[ClientId], hash: u64, key: impl Fn(ClientId) -> u64) -> GroupId {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.groups.push(None);
                GroupId::try_from(self.groups.len() - 1).unwrap_or(GroupId::MAX)
            }
        };
        let mut g = Group {
            waiters: waiters.to_vec(),
            hash,
            keys: Vec::new(),
            items: BTreeSet::new(),
            link_ns: 0,
        };
        // Sorted at once: many waiters may all have keys apart.
        let mut keys: Vec<u64> = waiters.iter().map(|&c| key(c)).collect();
        keys.sort_unstable();
        for k in keys {
            match g.keys.last_mut() {
                Some((last, n)) if *last == k => *n += 1,
                _ => g.keys.push((k, 1)),
            }
        }
        for &c in waiters {
            let m = self.member_of.entry(c).or_default();
            if let Err(at) = m.binary_search(&id) {
                m.insert(at, id);
            }
        }
        if let Some(place) = self.groups.get_mut(id as usize) {
            *place = Some(g);
        }
        self.ids.entry(hash).or_insert(id);
        id
    }

    /// Moves `item` (`link_ns` long, ordered by `tie`) from its group
    /// `from` (`None`: nobody waits) to the group of its waiters with
    /// `client` added (`join`) or taken out, and returns that group
    /// (`None`: nobody waits now). `key`: each client's current key.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn change(
        &mut self,
        from: Option<GroupId>,
        item: ItemId,
        tie: u64,
        link_ns: u64,
        client: ClientId,
        join: bool,
        key: impl Fn(ClientId) -> u64,
    ) -> Option<GroupId> {
        let groups = &self.groups;
        let old = from.and_then(|g| groups.get(g as usize)?.as_ref());
        let (hash, alone) = old.map_or((0, false), |g| (g.hash, g.items.len() == 1));
        if old.is_some_and(|g| g.waiters.binary_search(&client).is_ok() == join) {
            return from;
        }
        let hash = match join {
            true => hash.wrapping_add(mix(client)),
            false => hash.wrapping_sub(mix(client)),
        };
        // The new waiters are built only if a group may have them.
        let mut waiters = std::mem::take(&mut self.scratch);
        waiters.clear();
        let known = self.ids.contains_key(&hash);
        if known || !alone {
            waiters.extend(old.iter().flat_map(|g| g.waiters.iter().copied()));
            edit(&mut waiters, client, join);
        }
        let to = match from {
            // Alone in its group, with no group of its new waiters: the
            // group becomes theirs, at the cost of the one waiter changed
            // however many wait (a popular item's waiters are most often
            // its own).
            Some(id) if alone && (!known || self.find(hash, &waiters).is_none()) => {
                self.rewait(id, hash, client, join, key(client))
            }
            _ => {
                if let Some(id) = from {
                    self.remove(id, item, tie, link_ns);
                }
                (!waiters.is_empty()).then(|| self.insert(&waiters, hash, item, tie, link_ns, &key))
            }
        };
        self.scratch = waiters;
        to
    }

    /// `client` (its key `key`) joined group `id`'s waiters (`join`) or
    /// left them, making their hash `hash`; the group, or `None`
    /// if nobody waits now (it is deleted).
    fn rewait(
        &mut self,
        id: GroupId,
        hash: u64,
        client: ClientId,
        join: bool,
        key: u64,
    ) -> Option<GroupId> {
        let g = self.groups.get_mut(id as usize).and_then(Option::as_mut)?;
        edit(&mut g.waiters, client, join);
        if self.ids.get(&g.hash) == Some(&id) {
            self.ids.remove(&g.hash);
        }
        g.hash = hash;
        match join {
            true => g.add_key(key),
            false => g.remove_key(key),
        }
        let m = self.member_of.entry(client).or_default();
        match (m.binary_search(&id), join) {
            (Err(at), true) => m.insert(at, id),
            (Ok(at), false) => {
                m.remove(at);
            }
            _ => {}
        }
        if m.is_empty() {
            self.member_of.remove(&client);
        }
        if g.waiters.is_empty() {
            if let Some(place) = self.groups.get_mut(id as usize) {
                *place = None;
                self.free.push(id);
            }
            return None;
        }
        self.ids.entry(hash).or_insert(id);
        Some(id)
    }

    /// `client`'s key changed from `old` to `new`: it is re-filed in each
    /// of its groups.
    pub(super) fn rekey(&mut self, client: ClientId, old: u64, new: u64) {
        for id in self.member_of.get(&client).into_iter().flatten() {
            if let Some(g) = self.groups.get_mut(*id as usize).and_then(Option::as_mut) {
                g.remove_key(old);
                g.add_key(new);
            }
        }
    }

    /// New sizes: every group's items re-sorted by their `tie` and their
    /// `link_ns` counted again.
    pub(super) fn resize(&mut self, tie: impl Fn(ItemId) -> u64, link_ns: impl Fn(ItemId) -> u64) {
        for g in self.groups.iter_mut().flatten() {
            g.items = g.items.iter().map(|&(_, i)| (tie(i), i)).collect();
            g.link_ns = (g.items.iter()).fold(0u64, |a, &(_, i)| a.saturating_add(link_ns(i)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use std::collections::BTreeMap;

    impl Groups {
        /// Every group's waiters, hash, keys, link time and members agree
        /// with `waiting` (each item's waiters and its group) and `key`.
        fn check(
            &self,
            waiting: &BTreeMap<ItemId, (Vec<ClientId>, GroupId)>,
            key: impl Fn(ClientId) -> u64,
            link_ns: impl Fn(ItemId) -> u64,
        ) {
            for (item, (waiters, id)) in waiting {
                let g = self.get(*id).expect("an item's group exists");
                assert_eq!(&g.waiters, waiters, "{item:?}");
                assert!(g.items.iter().any(|&(_, i)| i == *item));
            }
            for (id, g) in self.iter() {
                assert!(!g.items.is_empty(), "no empty group is kept");
                assert_eq!(g.hash, set_hash(&g.waiters));
                let mut keys: Vec<u64> = g.waiters.iter().map(|&c| key(c)).collect();
                keys.sort_unstable();
                let flat: Vec<u64> = (g.keys.iter())
                    .flat_map(|&(k, n)| std::iter::repeat_n(k, n as usize))
                    .collect();
                assert_eq!(flat, keys);
                let sum: u64 = g.items.iter().map(|&(_, i)| link_ns(i)).sum();
                assert_eq!(g.link_ns, sum);
                for c in &g.waiters {
                    assert!(self.member_of[c].binary_search(&id).is_ok());
                }
            }
            for (c, m) in &self.member_of {
                assert!(m.windows(2).all(|w| w[0] < w[1]));
                for id in m {
                    assert!(self.get(*id).is_some_and(|g| g.waiters.contains(c)));
                }
            }
        }
    }

    /// Random joins and leaves, checked against every item's waiters.
    #[test]
    fn random_changes_keep_every_group_true() {
        let key = |c: ClientId| u64::from(c.0 % 3);
        let link_ns = |i: ItemId| u64::from(i.0) + 1;
        for seed in 0..50 {
            let mut rng = Rng::new(seed);
            let mut g = Groups::default();
            let mut waiting: BTreeMap<ItemId, (Vec<ClientId>, GroupId)> = BTreeMap::new();
            for _ in 0..400 {
                let item = ItemId(rng.range_u64(0, 8) as u32);
                let client = ClientId(rng.range_u64(0, 5) as u32);
                let join = rng.chance(0.6);
                let from = waiting.get(&item).map(|w| w.1);
                let tie = link_ns(item);
                let to = g.change(from, item, tie, link_ns(item), client, join, key);
                let mut waiters = waiting.remove(&item).map(|w| w.0).unwrap_or_default();
                edit(&mut waiters, client, join);
                assert_eq!(to.is_some(), !waiters.is_empty());
                if let Some(to) = to {
                    waiting.insert(item, (waiters, to));
                }
                g.check(&waiting, key, link_ns);
            }
            // Items of the same waiters share a group.
            let mut by_set: BTreeMap<&Vec<ClientId>, GroupId> = BTreeMap::new();
            for (w, id) in waiting.values() {
                assert_eq!(*by_set.entry(w).or_insert(*id), *id, "seed {seed}");
            }
        }
    }

    #[test]
    fn an_item_alone_in_its_group_takes_the_group_along() {
        let mut g = Groups::default();
        let (a, b) = (ClientId(1), ClientId(2));
        let key = |c: ClientId| u64::from(c.0);
        let id = g
            .change(None, ItemId(0), 0, 5, a, true, key)
            .expect("a waits");
        // b joins: the group is now {a, b}, under the same id.
        assert_eq!(g.change(Some(id), ItemId(0), 0, 5, b, true, key), Some(id));
        assert_eq!(
            g.get(id).map(|x| (x.waiters.clone(), x.keys.clone())),
            Some((vec![a, b], vec![(1, 1), (2, 1)]))
        );
        // Joining again changes nothing.
        assert_eq!(g.change(Some(id), ItemId(0), 0, 5, b, true, key), Some(id));
        // Another item of a alone, then b joins it: it moves to {a, b}.
        let other = g
            .change(None, ItemId(1), 0, 3, a, true, key)
            .expect("a waits");
        assert_ne!(other, id);
        assert_eq!(
            g.change(Some(other), ItemId(1), 0, 3, b, true, key),
            Some(id)
        );
        assert!(g.get(other).is_none(), "left empty: deleted");
        assert_eq!(g.get(id).map(|x| x.link_ns), Some(8));
        // a's key moves in its group.
        g.rekey(a, 1, 2);
        assert_eq!(g.get(id).map(|x| x.keys.clone()), Some(vec![(2, 2)]));
        // a leaves item 1: it is not alone, so a group of b alone is made.
        let only_b = g
            .change(Some(id), ItemId(1), 0, 3, a, false, key)
            .expect("b waits");
        assert_eq!(g.get(only_b).map(|x| x.waiters.clone()), Some(vec![b]));
        // b leaves it: nobody waits.
        assert_eq!(g.change(Some(only_b), ItemId(1), 0, 3, b, false, key), None);
        assert!(g.get(only_b).is_none());
    }
}
