//! Pre-emption: a short repair interrupts a long scheduled send, which
//! then resumes where it stopped. Part of [`super::Server`]
//! (`ServerConfig::preempt`, on under `serve`).
//!
//! One transmission is on air at a time, and without this a receiver that
//! missed a few symbols of a small item waits for the whole of whatever
//! long send started after it (a 32 MiB file is 2.7 s at 100 Mbit/s)
//! before its repair of a few packets goes. The rule is Smith's (shortest
//! weighted processing time first): the repair goes first when its packets
//! times the send's receivers are fewer than the send's packets left times
//! the repair's receivers, so the waiting it saves exceeds the waiting it
//! costs. Bounded: all the repairs that interrupt one send take at most
//! [`BUDGET`] of its packets, a send with fewer than [`MIN_LEFT`] packets
//! left runs on, and a repair never interrupts a repair, a push pass, an
//! ARM transmission or a send of its own item.
//!
//! Receivers see the repair's announcement (a newer transmission) as the
//! end of the send they were hearing, and take it back up when its
//! announcement comes again on resumption or its data does
//! (`client::Client`); a NAK that went out meanwhile is for a
//! transmission still on air, and the server waits for the report at its
//! end instead.

use super::{Server, Transmit};
use crate::wire::AnnounceKind;
use crate::{Instant, TransmissionId};

/// The share of a scheduled send's packets that repairs may interrupt it
/// for, in all.
pub const BUDGET: f64 = 0.25;

/// Fewest packets a scheduled send must have left to be interrupted: near
/// its end it finishes first (and a receiver takes a send back up from
/// its data only while this much of it is left to come).
pub const MIN_LEFT: u32 = 128;

impl Server {
    /// Before the next packet of the send on air: if a waiting repair
    /// should go first, puts the send aside and starts the repair.
    /// Returns whether it did.
    pub(super) fn maybe_preempt(&mut self, now: Instant) -> bool {
        if !self.cfg.preempt || self.suspended.is_some() || self.repairs.is_empty() {
            return false;
        }
        let Some(t) = self.current.as_ref() else {
            return false;
        };
        let plain = t.kind == AnnounceKind::First && t.arm.is_none() && t.encoders().is_none();
        let left = t.total.saturating_sub(t.sent());
        if !plain || left < MIN_LEFT || self.cfg.scheduler.is_push() {
            return false;
        }
        let budget = (t.total as f64 * BUDGET) as u64;
        let waiting = |item: crate::ItemId| {
            (self.items.get(item.0 as usize)).map_or(0, |s| s.in_flight.len() as u64)
        };
        let on_air = waiting(t.item).max(1);
        let lists = self.cfg.code == crate::fec::CodeKind::Exact;
        let pick = self.repairs.iter().position(|j| {
            let n = j.packets(lists);
            j.item != t.item
                && n > 0
                && t.preempted + n <= budget
                && n * on_air < left as u64 * waiting(j.item)
        });
        let Some(job) = pick.and_then(|i| self.repairs.remove(i)) else {
            return false;
        };
        let mut t = self.current.take();
        if let Some(t) = t.as_mut() {
            t.preempted += job.packets(lists);
        }
        self.suspended = t;
        self.stats.preemptions += 1;
        self.start_repair(now, job);
        true
    }

    /// The link is free and a send was interrupted: it resumes, announced
    /// again so its receivers take it back up. Returns whether it did.
    pub(super) fn resume(&mut self, now: Instant) -> bool {
        let Some(t) = self.suspended.take() else {
            return false;
        };
        self.last_was_repair = false;
        // Cancelled meanwhile (nobody left for it): it just ends.
        if !t.finished() {
            let a = self.announce(&t, t.kind);
            self.outbox.push_back(Transmit::Announce(a));
        }
        self.current = Some(t);
        self.pacer.start(now);
        true
    }

    /// Whether `tid` is on air or interrupted (a NAK for it is early: its
    /// receiver reports again at its end).
    pub(super) fn unfinished(&self, tid: TransmissionId) -> bool {
        [self.current.as_ref(), self.suspended.as_ref()]
            .into_iter()
            .flatten()
            .any(|t| t.id == tid)
    }
}
