//! Early loss reports: a receiver says, a thousand packets into a long
//! transmission, how many it has heard; under `FEC(maxloss+x)` the server
//! then grows the blocks of that scheduled send not yet sent to the loss it
//! now knows, and announces the new length.
//!
//! Without it a first transmission to new receivers carries only x of
//! redundancy (no loss is known yet), every block ends short, and all of
//! them are decoded at once during the repair that follows: a NAK round
//! and a burst of decoding at the end. With it only the first blocks do.
//! Receivers send these only when their driver turns them on (`repocast
//! get` does; the simulator's receivers report only at the end, as in the
//! study).

use super::{Server, Transmit};
use crate::policy::FecPolicy;
use crate::wire::AnnounceKind;
use crate::{ClientId, ItemId, TransmissionId};

impl Server {
    pub(super) fn on_loss_report(
        &mut self,
        client: ClientId,
        transmission: TransmissionId,
        item: ItemId,
        received: u32,
        expected: u32,
    ) {
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        let known = c.requested.contains(&item) && !c.done.contains(&item);
        if !known || expected == 0 || received > expected || transmission.0 >= self.next_tid {
            self.stats.bad_requests += 1;
            return;
        }
        c.early = Some((transmission, received, expected));
        self.grow_current(transmission);
    }

    /// Grows the scheduled send `tid`, if it is on air and sized by
    /// `FEC(maxloss+x)`, to the largest loss now estimated among its
    /// receivers.
    fn grow_current(&mut self, tid: TransmissionId) {
        let FecPolicy::MaxLoss(x) = self.cfg.scheme.fec else {
            return;
        };
        let Some(t) = self.current.as_ref().filter(|t| t.id == tid) else {
            return;
        };
        let Some(g) = t.growth.as_ref() else {
            return;
        };
        let item = t.item;
        let st = &self.items[item.0 as usize];
        let max_loss = (st.in_flight.iter())
            .filter_map(|c| self.clients.get(c))
            .map(super::ClientState::loss)
            .fold(g.max_loss, f64::max);
        if max_loss <= g.max_loss {
            return;
        }
        let policy = FecPolicy::MaxLoss(x);
        let adds: Vec<(usize, u32, u32)> = (t.unfinished_segments().into_iter())
            .filter_map(|(i, block, planned)| {
                let need = g.needs.get(block as usize).copied()?;
                let want = policy.symbols(need, g.listeners, max_loss);
                (want > planned).then(|| (i, block, want - planned))
            })
            .collect();
        let mut grown = 0;
        for (i, block, add) in adds {
            let extra = self.alloc(item, block, add);
            if let Some(t) = self.current.as_mut() {
                if t.extend_segment(i, &extra) {
                    grown += add;
                }
            }
        }
        if let Some(g) = self.current.as_mut().and_then(|t| t.growth.as_mut()) {
            g.max_loss = max_loss;
        }
        if grown > 0 {
            self.stats.grown_packets += grown as u64;
            if let Some(t) = self.current.as_ref() {
                let a = self.announce(t, AnnounceKind::First);
                self.outbox.push_back(Transmit::Announce(a));
            }
        }
    }
}
