//! Taking a transmission back up: a receiver stops hearing a transmission
//! when a newer one begins or its deadline passes, but a short repair or
//! send may have interrupted it (`server::preempt`), and a late server may still
//! be sending it. When more of it comes (its announcement again, or its
//! data with enough left), the receiver hears it again and drops the
//! report it owed: the report goes at the transmission's real end. Part of
//! [`super::Client`].

use super::Client;
use crate::{Instant, ItemId, TransmissionId};
use std::time::Duration;

/// Fewest packets still to come for data alone to take a transmission
/// back up after a newer one began: fewer are stragglers read late, not a
/// resumed send (the server interrupts none with fewer than
/// `server::preempt::MIN_LEFT` left).
pub const REOPEN_LEFT: u32 = crate::server::preempt::MIN_LEFT / 4;

impl Client {
    /// More of transmission `tid` of `item` came after the client stopped
    /// hearing it without its end announcement: `left` packets still to
    /// come (`None`: not known), over about `rest`. Hears it again if it
    /// may.
    pub(super) fn reopen(
        &mut self,
        now: Instant,
        item: ItemId,
        tid: TransmissionId,
        left: Option<u32>,
        rest: Duration,
    ) {
        let grace = self.cfg.end_grace;
        let Some(slot) = self.items.slot(&item) else {
            return;
        };
        let Some(it) = self.items.at_mut(slot) else {
            return;
        };
        let Some(l) = it.listening.as_mut().filter(|l| l.id == tid && l.ended) else {
            return;
        };
        let Some(min) = l.reopen_left else {
            return;
        };
        if left.is_some_and(|n| n < min) {
            return;
        }
        l.ended = false;
        l.reopen_left = None;
        l.deadline = l.deadline.max(now + rest + grace);
        if it.report_due.is_some_and(|r| r.1 == tid) {
            it.report_due = None;
        }
        self.stats.reopened += 1;
        self.deadline.set(None);
        if let Err(at) = self.timed.binary_search_by_key(&item, |e| e.0) {
            self.timed.insert(at, (item, slot));
        }
    }

    /// The data packet `seq` of `tid` of `item`: takes the transmission
    /// back up if the client had stopped hearing it.
    pub(super) fn reopen_on_data(
        &mut self,
        now: Instant,
        item: ItemId,
        tid: TransmissionId,
        seq: u32,
    ) {
        let stopped = (self.items.get(&item))
            .and_then(|i| i.listening.as_ref())
            .filter(|l| l.id == tid && l.ended && l.reopen_left.is_some())
            .map(|l| l.total);
        if let Some(total) = stopped {
            let left = (total > 0).then(|| total.saturating_sub(seq.saturating_add(1)));
            self.reopen(now, item, tid, left, Duration::ZERO);
        }
    }
}
