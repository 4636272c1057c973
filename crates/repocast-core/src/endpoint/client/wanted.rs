//! Which items a client endpoint still wants, kept as manifests and
//! outcomes come in, so asking costs the items still wanted, not the whole
//! request: a request for 20,000 files asked it after every file, and the
//! scans it replaced took minutes of CPU.
//!
//! Part of [`super::ClientEndpoint`]; the driver reads it through
//! [`super::ClientEndpoint::wanted_items`] (a kernel socket filter).

use crate::ItemId;
use std::collections::{BTreeSet, HashMap};

/// Item ids by name, and those whose name has no outcome yet.
#[derive(Debug, Default)]
pub(super) struct Wanted {
    /// Every item id a manifest gave each name (a new catalogue version
    /// may give a name another id, and an id another name).
    ids: HashMap<String, Vec<ItemId>>,
    /// Each item id's name, as its latest manifest gave it.
    names: HashMap<ItemId, String>,
    /// Item ids with a manifest whose name has no outcome.
    open: BTreeSet<ItemId>,
    /// Names with an outcome.
    settled: std::collections::HashSet<String>,
    /// Requested names with an id or an outcome.
    resolved: usize,
}

impl Wanted {
    /// A manifest gave `name` the id `item`; `requested`: the name was
    /// asked for.
    pub(super) fn manifest(&mut self, item: ItemId, name: &str, requested: bool) {
        if let Some(old) = self.names.insert(item, name.to_owned()) {
            if let Some(v) = self.ids.get_mut(&old) {
                v.retain(|i| *i != item);
            }
            self.open.remove(&item);
        }
        let ids = match self.ids.get_mut(name) {
            Some(v) => v,
            None => {
                if requested && !self.settled.contains(name) {
                    self.resolved += 1;
                }
                self.ids.entry(name.to_owned()).or_default()
            }
        };
        ids.push(item);
        if !self.settled.contains(name) {
            self.open.insert(item);
        }
    }

    /// `name` has its outcome (the first one counts).
    pub(super) fn settle(&mut self, name: &str, requested: bool) {
        if !self.settled.insert(name.to_owned()) {
            return;
        }
        match self.ids.get(name) {
            Some(ids) => {
                for i in ids {
                    self.open.remove(i);
                }
            }
            None if requested => self.resolved += 1,
            None => {}
        }
    }

    /// The latest id a manifest gave `name`.
    pub(super) fn id_of(&self, name: &str) -> Option<ItemId> {
        self.ids.get(name).and_then(|v| v.last().copied())
    }

    /// The ids still wanted, sorted: `None` (take everything) while fewer
    /// than `requested` names are resolved (unless `ended`), or when more
    /// than `max` are wanted.
    pub(super) fn items(&self, requested: usize, ended: bool, max: usize) -> Option<Vec<ItemId>> {
        if self.resolved < requested && !ended || self.open.len() > max {
            return None;
        }
        Some(self.open.iter().copied().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_follow_manifests_and_outcomes() {
        let mut w = Wanted::default();
        w.manifest(ItemId(3), "a", true);
        assert_eq!(w.items(2, false, 10), None, "b has no id yet");
        w.settle("b", true);
        assert_eq!(w.items(2, false, 10), Some(vec![ItemId(3)]));
        w.manifest(ItemId(1), "c", true);
        assert_eq!(w.items(3, false, 10), Some(vec![ItemId(1), ItemId(3)]));
        assert_eq!(w.items(3, false, 1), None, "more than the bound");
        w.settle("a", true);
        w.settle("a", true);
        assert_eq!(w.items(3, false, 10), Some(vec![ItemId(1)]));
        assert_eq!(w.id_of("a"), Some(ItemId(3)));
        assert_eq!(w.id_of("b"), None);
    }

    #[test]
    fn an_id_given_to_another_name_follows_it() {
        let mut w = Wanted::default();
        w.manifest(ItemId(1), "a", true);
        w.settle("a", true);
        // A new version gives id 1 to "b" and "a" id 2.
        w.manifest(ItemId(1), "b", true);
        w.manifest(ItemId(2), "a", true);
        assert_eq!(w.items(2, false, 10), Some(vec![ItemId(1)]));
        assert_eq!(w.id_of("a"), Some(ItemId(2)));
        w.settle("b", true);
        assert_eq!(w.items(2, false, 10), Some(vec![]));
    }

    #[test]
    fn names_not_asked_for_do_not_count_as_resolved() {
        let mut w = Wanted::default();
        w.manifest(ItemId(1), "x", false);
        w.settle("y", false);
        assert_eq!(w.items(1, false, 10), None);
        assert_eq!(w.items(1, true, 10), Some(vec![ItemId(1)]), "ended");
    }
}
