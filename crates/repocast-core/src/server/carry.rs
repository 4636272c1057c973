//! A pusher's next catalogue version going on where the last one was, for
//! the items it keeps (the same bytes and layout): each block's symbol ids
//! from the first one not yet sent (a pass cut short by the new version
//! leaves the ids it had not reached fresh: a listener's partly received
//! blocks, which it carries over, stay useful and no id repeats in a run),
//! and MAD's clock with each kept item's last send, so the items new to
//! the version, never sent, go first and the others keep their rhythm.
//! `PushEndpoint::replace` pairs the items; this moves their state.

use super::Server;
use crate::ItemId;

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
    /// layout: their symbol ids, and MAD's clock with their last sends. A
    /// pair whose block counts differ is left alone.
    pub fn go_on_from(&mut self, older: &Server, kept: &[(ItemId, ItemId)]) {
        self.demand.set_slots(older.demand.slots());
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
            }
        }
    }
}
