//! A pusher's next catalogue version going on where the last one was, for
//! the items it keeps (the same bytes and layout): each block's symbol ids
//! from the first one not yet sent (a pass cut short by the new version
//! leaves the ids it had not reached fresh: a listener's partly received
//! blocks, which it carries over, stay useful and no id repeats in a run),
//! MAD's clock with each kept item's last send, so the items new to the
//! version, never sent, go first and the others keep their rhythm, and
//! the encoders kept for them (a pass of repair symbols would otherwise
//! prepare every block again in its first round: 0.13 s a version for a
//! 64 MiB file at 100 Mbit/s on loopback, measured).
//! `PushEndpoint::replace` pairs the items; this moves their state.

use super::Server;
use crate::ItemId;
use std::collections::BTreeMap;

impl Server {
    /// Each block's next symbol id of `item` not yet sent: the fresh ids,
    /// except that a push pass in progress has sent its planned ids only
    /// so far.
    pub fn unsent_ids(&self, item: ItemId) -> Option<Vec<u32>> {
        let mut ids = self.items.get(item.0 as usize)?.next_esi.clone();
        if let Some(t) = self.current.as_ref().filter(|t| t.item == item) {
            for (b, id) in t.unsent_ids() {
                if let Some(x) = ids.get_mut(b as usize) {
                    *x = id;
                }
            }
        }
        Some(ids)
    }

    /// Goes on from `older` (the server of the version before) for each
    /// (item here, item there) of `kept`, items of the same content and
    /// layout: their symbol ids, MAD's clock with their last sends, and
    /// the encoders `older` kept for them (its other state is dropped with
    /// it). A pair whose block counts differ is left alone.
    pub fn go_on_from(&mut self, older: &mut Server, kept: &[(ItemId, ItemId)]) {
        self.demand.set_slots(older.demand.slots());
        let mut map = BTreeMap::new();
        for &(here, there) in kept {
            let Some(ids) = older.unsent_ids(there) else {
                continue;
            };
            let Some(st) = self.items.get_mut(here.0 as usize) else {
                continue;
            };
            if st.next_esi.len() == ids.len() {
                st.next_esi.copy_from_slice(&ids);
                let last = older.demand.last_sent(there);
                self.demand.set_last_sent(here, last);
                map.insert(there, here);
            }
        }
        let cache = (older.current.as_mut())
            .and_then(|t| t.take_encoders())
            .or_else(|| older.push_encoders.take());
        if let (Some(c), true) = (cache, self.cfg.scheduler.is_push()) {
            self.push_encoders = Some(c.carried(&map, self.cfg.session.0 as u64));
        }
    }
}
