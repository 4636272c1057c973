//! Early loss reports: a receiver says, a thousand packets into a long
//! transmission and again on twice as many each time, how many it has
//! heard; under `FEC(maxloss+x)` the server then resizes the blocks of
//! that scheduled send not yet sent to the loss it now knows (in loss
//! tiers, `crate::policy::tiers`), and announces the new length. It grows
//! them as soon as any receiver reports more loss than the send was sized
//! for, and trims them once every receiver has reported less: a send sized
//! on estimates from a few hundred packets (the small items a request
//! started with) carries the noise of the largest of them, 1-2 points
//! above the receivers' loss, on every block.
//!
//! Without it a first transmission to new receivers carries only x of
//! redundancy (no loss is known yet), every block ends short, and all of
//! them are decoded at once during the repair that follows: a NAK round
//! and a burst of decoding at the end. With it only the first blocks do.
//! Receivers send these only when their driver turns them on (`repocast
//! get` does; the simulator's receivers report only at the end, as in the
//! study).
//!
//! Short-block hints (a NAK on a send still on air): a send sent block
//! after block has left a block short for a receiver. If the send still
//! carries more of that block (a loss tier's tail for lossier receivers,
//! or symbols a coalesced NAK appended), and the receiver is not one the
//! tail is for, up to what it lacks of them moves to right after the
//! segment on air
//! ([`Transmission::hasten`]): the same packets, sooner, so the receiver
//! need not wait out the tail. Nothing is added, so a hint costs no
//! bandwidth; a client gets at most [`max_hints`] per send, on at most
//! [`HINT_BLOCKS`] blocks each.

use super::transmission::Transmission;
use super::{Server, Transmit};
use crate::policy::FecPolicy;
use crate::wire::AnnounceKind;
use crate::wire::NakRepr;
use crate::{ClientId, ItemId, TransmissionId};

/// Most short-block hints a client's NAKs give one send of an item of
/// `blocks` blocks: twice what a receiver sends
/// ([`crate::client::max_hints`]).
pub fn max_hints(blocks: u32) -> u32 {
    crate::client::max_hints(blocks).saturating_mul(2)
}
/// Most blocks one hint moves (what a receiver names).
pub const HINT_BLOCKS: usize = crate::client::HINT_BLOCKS;

impl Server {
    pub(super) fn on_loss_report(
        &mut self,
        client: ClientId,
        transmission: TransmissionId,
        item: ItemId,
        received: u32,
        expected: u32,
    ) {
        // The sends a report can resize: on air, or put aside by a repair.
        let live = [self.current.as_ref(), self.suspended.as_ref()];
        let live_ids = live.map(|t| t.map(|t| t.id));
        // Packets the reported send has put out so far, if it is live.
        let sent = (live.into_iter().flatten())
            .find(|t| t.id == transmission)
            .map(Transmission::sent);
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        let known = c.requested.contains(&item) && !c.done.contains(&item);
        // A receiver reports on twice the packets each time
        // (`crate::client`), never on more than were sent. Any other report
        // on a live send is not a receiver's: each one could resize the
        // send and announce it again, as often as a peer cares to write.
        c.live_reports.retain(|(t, _)| live_ids.contains(&Some(*t)));
        let too_soon = (c.live_reports.iter())
            .any(|&(t, e)| t == transmission && u64::from(expected) < 2 * u64::from(e));
        if !known
            || expected == 0
            || received > expected
            || transmission.0 >= self.next_tid
            || too_soon
            || sent.is_some_and(|s| expected > s)
        {
            self.stats.bad_requests += 1;
            return;
        }
        if sent.is_some() {
            c.live_reports.retain(|(t, _)| *t != transmission);
            c.live_reports.push((transmission, expected));
        }
        c.early = Some((transmission, received, expected));
        self.resize_current(transmission);
    }

    /// Grows (or trims) the scheduled send `tid`, if it is on air and
    /// sized by `FEC(maxloss+x)`, to the largest loss now estimated among
    /// its receivers: each block gets what the policy sends at that loss, a
    /// block still to be sent on its own segment, one sent already at the
    /// end of the first tier (so its receivers need no NAK round for it);
    /// only blocks not yet begun shrink.
    /// With loss tiers ([`crate::policy::tiers`]) the first tier grows only
    /// to the lower tier's loss and the rest goes to the tail, so one lossy
    /// receiver does not hold back the others.
    fn resize_current(&mut self, tid: TransmissionId) {
        let FecPolicy::MaxLoss(_) = self.cfg.scheme.fec else {
            return;
        };
        // On air, or put aside by a repair (`super::preempt`): it grows
        // all the same, and its resumption announces the new length.
        let on_air = self.current.as_ref().is_some_and(|t| t.id == tid);
        let slot = match on_air {
            true => &mut self.current,
            false => &mut self.suspended,
        };
        let Some(mut t) = slot.take_if(|t| t.id == tid) else {
            return;
        };
        let (grown, trimmed) = self.resize(&mut t);
        self.stats.grown_packets += grown;
        self.stats.trimmed_packets += trimmed;
        if grown + trimmed > 0 && on_air {
            let a = self.announce(&t, AnnounceKind::First);
            self.outbox.push_back(Transmit::Announce(a));
        }
        match on_air {
            true => self.current = Some(t),
            false => self.suspended = Some(t),
        }
    }

    /// Grows (or trims) `t` as [`Self::resize_current`] says; returns the
    /// packets added and taken off.
    fn resize(&mut self, t: &mut Transmission) -> (u64, u64) {
        let Some(g) = t.growth.as_ref() else {
            return (0, 0);
        };
        let (item, receivers, needs) = (t.item, g.listeners, g.needs.clone());
        let (odds, tail_odds) = (g.odds, g.tail_odds);
        // A receiver not heard from yet is taken at the loss the send was
        // sized for (its report is due within this send, and the first
        // tier can still grow then): a lossy receiver reporting first
        // does not pull everyone's first tier up to its own loss.
        // Once every receiver has reported on this send, their estimates
        // (the early reports' packets added to what each had) replace the
        // one it was sized on, which may have rested on a few hundred
        // packets: the blocks not yet begun shrink as well as grow.
        let in_flight = &self.items[item.0 as usize].in_flight;
        let tid = t.id;
        let all_heard = !in_flight.is_empty()
            && in_flight.iter().all(|c| {
                (self.clients.get(c)).is_some_and(|s| s.early.is_some_and(|e| e.0 == tid))
            });
        let floor = if all_heard { 0.0 } else { g.max_loss };
        // A receiver whose estimate is too thin to tier on is still taken
        // at the loss the send was sized for.
        let (max_loss, first_loss) = self.loss_tiers(in_flight, floor, Some(g.max_loss), receivers);
        let (mut grown, mut trimmed) = (0u64, 0u64);
        for (b, need) in (0u32..).zip(needs) {
            if need == 0 {
                continue;
            }
            let before = t.planned(b);
            let planned = t.first_tier_planned(b);
            let want = self.send_count(need, receivers, max_loss, tail_odds);
            let first = first_loss.map_or(want, |l| self.send_count(need, receivers, l, odds));
            let first = first.min(want);
            if first > planned {
                let extra = self.alloc(item, b, first - planned);
                // What the first tier now carries, the tail need not.
                t.drop_tail(b, first - planned);
                t.grow_first_tier(b, extra);
            } else if first < planned {
                t.trim_first_tier(b, planned - first);
            }
            let planned = t.planned(b);
            if want > planned {
                let extra = self.alloc(item, b, want - planned);
                t.grow_tail(b, extra);
            } else if want < planned {
                t.drop_tail(b, planned - want);
            }
            // Counted by what the block's plan gained or lost in all
            // (symbols moved between its tiers are neither).
            let after = t.planned(b);
            grown += u64::from(after.saturating_sub(before));
            trimmed += u64::from(before.saturating_sub(after));
        }
        if let Some(g) = t.growth.as_mut() {
            g.max_loss = max_loss;
            g.first_loss = first_loss;
        }
        (grown, trimmed)
    }

    /// A NAK on `nak.transmission` while it is on air or put aside: a
    /// short-block hint (module doc). The NAK is already checked
    /// (its client asked for the item; its blocks and counts are real).
    pub(super) fn on_hint(&mut self, client: ClientId, nak: &NakRepr) {
        if !self.cfg.hasten {
            return;
        }
        let blocks = (self.items.get(nak.item.0 as usize)).map_or(0, |s| s.layout.blocks());
        let tid = nak.transmission;
        let tiers = (self.unfinished_sends().find(|t| t.id == tid))
            .and_then(|t| t.growth.as_ref())
            .and_then(|g| Some((g.first_loss?, g.max_loss)));
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        let loss = c.loss();
        // A receiver the tail is for lacks every block until the tail
        // comes: one block sooner would not make it finish sooner, and
        // would hold back the receivers the first tier is for.
        if tiers.is_some_and(|(first, max)| c.tier_loss(max) > first) {
            return;
        }
        if c.hints.0 != nak.transmission {
            c.hints = (nak.transmission, 0);
        }
        if c.hints.1 >= max_hints(blocks) {
            self.stats.bad_requests += 1;
            return;
        }
        c.hints.1 += 1;
        let aware = self.cfg.loss_aware_repairs;
        let live = [self.current.as_mut(), self.suspended.as_mut()];
        let Some(t) = live.into_iter().flatten().find(|t| t.id == tid) else {
            return;
        };
        for n in nak.needs.iter().take(HINT_BLOCKS) {
            let want = match aware {
                true => crate::policy::retransmit::repair_size(n.count, loss),
                false => n.count,
            };
            self.stats.hastened += u64::from(t.hasten(n.block.0, want));
        }
    }
}
