//! Which items a client endpoint still wants, kept as manifests and
//! outcomes come in, so asking costs the items still wanted, not the whole
//! request: a request for 20,000 files asked it after every file, and the
//! scans it replaced took minutes of CPU.
//!
//! Part of [`super::ClientEndpoint`], which keeps each id's name and each
//! name's outcome and tells this what changed; the driver reads it through
//! [`super::ClientEndpoint::wanted_items`] (a kernel socket filter).

use crate::ItemId;
use std::collections::{BTreeSet, HashMap};

/// Item ids by requested name, and those whose name has no outcome yet.
#[derive(Debug, Default)]
pub(super) struct Wanted {
    /// Every item id a manifest gave each name (a new catalogue version
    /// may give a name another id, and an id another name).
    ids: HashMap<String, Vec<ItemId>>,
    /// Item ids with a manifest whose name has no outcome.
    open: BTreeSet<ItemId>,
    /// Requested names with an id or an outcome.
    resolved: usize,
}

impl Wanted {
    /// A manifest gave the requested `name` the id `item`. `previous`: the
    /// name the id had before, if any; `settled`: `name` has an outcome.
    pub(super) fn manifest(
        &mut self,
        item: ItemId,
        name: &str,
        previous: Option<&str>,
        settled: bool,
    ) {
        if let Some(old) = previous {
            if let Some(v) = self.ids.get_mut(old) {
                v.retain(|i| *i != item);
            }
            self.open.remove(&item);
        }
        let ids = match self.ids.get_mut(name) {
            Some(v) => v,
            None => {
                if !settled {
                    self.resolved += 1;
                }
                self.ids.entry(name.to_owned()).or_default()
            }
        };
        ids.push(item);
        if !settled {
            self.open.insert(item);
        }
    }

    /// The requested `name` has its first outcome.
    pub(super) fn settle(&mut self, name: &str) {
        match self.ids.get(name) {
            Some(ids) => {
                for i in ids {
                    self.open.remove(i);
                }
            }
            None => self.resolved += 1,
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
        w.manifest(ItemId(3), "a", None, false);
        assert_eq!(w.items(2, false, 10), None, "b has no id yet");
        w.settle("b");
        assert_eq!(w.items(2, false, 10), Some(vec![ItemId(3)]));
        w.manifest(ItemId(1), "c", None, false);
        assert_eq!(w.items(3, false, 10), Some(vec![ItemId(1), ItemId(3)]));
        assert_eq!(w.items(3, false, 1), None, "more than the bound");
        w.settle("a");
        assert_eq!(w.items(3, false, 10), Some(vec![ItemId(1)]));
        assert_eq!(w.id_of("a"), Some(ItemId(3)));
        assert_eq!(w.id_of("b"), None);
    }

    #[test]
    fn an_id_given_to_another_name_follows_it() {
        let mut w = Wanted::default();
        w.manifest(ItemId(1), "a", None, false);
        w.settle("a");
        // A new version gives id 1 to "b" and "a" id 2.
        w.manifest(ItemId(1), "b", Some("a"), false);
        w.manifest(ItemId(2), "a", None, true);
        assert_eq!(w.items(2, false, 10), Some(vec![ItemId(1)]));
        assert_eq!(w.id_of("a"), Some(ItemId(2)));
        w.settle("b");
        assert_eq!(w.items(2, false, 10), Some(vec![]));
    }

    #[test]
    fn a_settled_name_given_an_id_is_resolved_once_and_not_wanted() {
        let mut w = Wanted::default();
        w.settle("a");
        w.manifest(ItemId(1), "a", None, true);
        assert_eq!(w.items(1, false, 10), Some(vec![]));
        assert_eq!(w.items(2, false, 10), None, "one of two resolved");
        assert_eq!(w.items(2, true, 10), Some(vec![]), "ended");
    }
}
