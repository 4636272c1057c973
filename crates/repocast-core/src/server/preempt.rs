//! Pre-emption: a short repair, or a short scheduled send, interrupts a
//! long scheduled send, which then resumes where it stopped. Part of
//! [`super::Server`] (`ServerConfig::preempt`, on under `serve`).
//!
//! One transmission is on air at a time, and without this a receiver that
//! missed a few symbols of a small item waits for the whole of whatever
//! long send started after it (a 32 MiB file is 2.7 s at 100 Mbit/s)
//! before its repair of a few packets goes; and a receiver that asked for
//! a small item just after its send waits for a long send's tail, which
//! only its lossiest receivers still need (`crate::policy::tiers`). The
//! rule is Smith's (shortest weighted processing time first): the other
//! work goes first when its link time times the send's receivers still in
//! flight is less than the link time of the send's packets left times the
//! receivers it serves that are not also waiting for the rest of the send
//! (those finish with the send either way), so the waiting it saves
//! exceeds the waiting it costs. Link time counts each packet by its bytes
//! on the wire (`Pacer::slot`), so a small item's short packets (symbols
//! fitted to it) weigh what they take. Both are weighed whenever the demand, the NAKs, the
//! repair queue or the send's receivers change. Bounded: whatever interrupts one send takes at most [`BUDGET`]
//! of its packets in all, a send with fewer than [`MIN_LEFT`] packets
//! left runs on, only one send is put aside at a time, and nothing
//! interrupts a repair, a push pass, an ARM transmission, or a send of its
//! own item.
//!
//! Receivers see the other transmission's announcement (a newer one) as
//! the end of the send they were hearing, and take it back up when its
//! announcement comes again on resumption or its data does
//! (`client/reopen.rs`); a NAK that went out meanwhile is for a
//! transmission still on air, and the server waits for the report at its
//! end instead.

use super::transmission::Transmission;
use super::{Server, Transmit};
use crate::wire::AnnounceKind;
use crate::{Instant, TransmissionId};

/// The share of a scheduled send's packets that other transmissions may
/// interrupt it for, in all.
pub const BUDGET: f64 = 0.25;

/// Fewest packets a scheduled send must have left to be interrupted: near
/// its end it finishes first (and a receiver takes a send back up from
/// its data only while this much of it is left to come).
pub const MIN_LEFT: u32 = 128;

impl Server {
    /// Before the next packet of the send on air: if a waiting repair, or
    /// else the item the scheduler would send next, should go first, puts
    /// the send aside and starts that. Returns whether it did.
    pub(super) fn maybe_preempt(&mut self, now: Instant) -> bool {
        if !self.cfg.preempt || self.suspended.is_some() || self.cfg.scheduler.is_push() {
            return false;
        }
        let Some(t) = self.current.as_ref() else {
            return false;
        };
        let plain = t.kind == AnnounceKind::First
            && t.arm.is_none()
            && t.encoders().is_none()
            && !t.finished();
        let left = t.total.saturating_sub(t.sent());
        if !plain || left < MIN_LEFT {
            return false;
        }
        let budget = ((t.total as f64 * BUDGET) as u64).saturating_sub(t.preempted);
        let cur = t.item;
        let Some((on_air, cur_symbol)) =
            (self.items.get(cur.0 as usize)).map(|s| (&s.in_flight, s.layout.symbol_size()))
        else {
            return false;
        };
        // Weighed in link time: a small item's packets (its symbols fitted
        // to it) are short.
        let pacer = &self.pacer;
        let (budget_ns, left_ns) = (
            u128::from(pacer.link_ns(cur_symbol, budget)),
            u128::from(pacer.link_ns(cur_symbol, u64::from(left))),
        );
        // What interrupts the send counts against its budget as that many
        // of its own packets.
        let cur_slot = pacer.link_ns(cur_symbol, 1).max(1);
        // Smith's rule. Only receivers not also waiting for the rest of
        // the send on air gain: the others finish with it either way.
        let worth = |ns: u64, gain: u64| {
            let ns = u128::from(ns);
            ns > 0
                && ns <= budget_ns
                && ns * u128::from((on_air.len() as u64).max(1)) < left_ns * u128::from(gain)
        };
        let cost = |item: crate::ItemId, packets: u64| {
            let symbol = self
                .items
                .get(item.0 as usize)
                .map_or(cur_symbol, |s| s.layout.symbol_size());
            pacer.link_ns(symbol, packets)
        };
        let gain = |clients: &mut dyn Iterator<Item = &crate::ClientId>| {
            clients.filter(|c| !on_air.contains(c)).count() as u64
        };
        // Weighed again only when something it depends on has changed,
        // not for every packet (fewer packets left never tips the rule).
        let key = (
            t.id,
            self.demand.changes(),
            on_air.len(),
            self.stats.naks,
            self.stats.items_done,
            self.repairs.len(),
        );
        if self.preempt_checked == Some(key) {
            return false;
        }
        self.preempt_checked = Some(key);
        let lists = self.cfg.code == crate::fec::CodeKind::Exact;
        let repair = self.repairs.iter().position(|j| {
            let waiting = (self.items.get(j.item.0 as usize)).map(|s| &s.in_flight);
            let ns = cost(j.item, j.packets(lists));
            j.item != cur && waiting.is_some_and(|w| worth(ns, gain(&mut w.iter())))
        });
        if let Some(job) = repair.and_then(|i| self.repairs.remove(i)) {
            let ns = cost(job.item, job.packets(lists));
            self.put_aside(ns.div_ceil(cur_slot));
            self.start_repair(now, job);
            return true;
        }
        // Else the scheduler's choice.
        let Some(item) = self
            .scheduler
            .select(&self.demand, now)
            .filter(|&i| i != cur)
        else {
            return false;
        };
        // Its whole one-copy link time, as the demand table keeps it.
        let ns = self.demand.link_ns(item);
        let waiters = self.demand.waiters(item);
        if !worth(ns, gain(&mut waiters.iter())) {
            return false;
        }
        self.put_aside(ns.div_ceil(cur_slot));
        self.start_scheduled(now, item);
        true
    }

    /// Puts the send on air aside for `packets` of its own worth of
    /// something else.
    fn put_aside(&mut self, packets: u64) {
        let mut t = self.current.take();
        if let Some(t) = t.as_mut() {
            t.preempted += packets;
        }
        self.suspended = t;
        self.stats.preemptions += 1;
    }

    /// The link is free and a send was interrupted: it resumes, announced
    /// again so its receivers take it back up. Returns whether it did.
    pub(super) fn resume(&mut self, now: Instant) -> bool {
        let Some(t) = self.suspended.take() else {
            return false;
        };
        self.last_was_repair = false;
        self.current = Some(t);
        // More that should go first goes now, with no resumption between.
        if self.maybe_preempt(now) {
            return true;
        }
        // Cancelled meanwhile (nobody left for it), it just ends.
        if let Some(t) = self.current.as_ref().filter(|t| !t.finished()) {
            let a = self.announce(t, t.kind);
            self.outbox.push_back(Transmit::Announce(a));
        }
        self.pacer.start(now);
        true
    }

    /// Whether `tid` is on air or interrupted (a NAK for it is early: its
    /// receiver reports again at its end).
    pub(super) fn unfinished(&self, tid: TransmissionId) -> bool {
        self.unfinished_sends().any(|t| t.id == tid)
    }

    /// The transmission on air and the one put aside, if any.
    pub(super) fn unfinished_sends(&self) -> impl Iterator<Item = &Transmission> {
        [self.current.as_ref(), self.suspended.as_ref()]
            .into_iter()
            .flatten()
    }
}
