//! An item held whole while its file is put in place: its report to the
//! server says so if the placing runs late.
//!
//! `get` puts a verified item's file in place on another thread (an fsync,
//! the whole file's hash, a rename: `crate::endpoint::finish`), and only
//! then reports the item done. A receiver with thousands of small files
//! queues those jobs behind each other, and on a busy disk the done report
//! came up to a second after the transmission's end, past the server's
//! report wait. The server then counted the report missing and sent the
//! item again, to every receiver of it, which put every receiver further
//! behind (session 62, eight hosts asking for the same 2,000 files: a job
//! took up to 0.1-0.9 s from queued to back, and 1,023 of one run's 1,095
//! report timeouts were reports that came, a median of 967 ms late).
//!
//! So an item whose placing is out owes a report, due as a NAK would be
//! (after a delay drawn from the NAK window). If its job is back first,
//! the done report goes instead and nothing else is sent. If not, a NAK
//! that needs nothing goes: the server stops waiting on this receiver for
//! the item, sends it nothing more, and keeps it open until the done
//! report (`server::reports`, "settling"). Part of [`super::Client`].

use super::Client;
use super::item::ItemPhase;
use crate::wire::ClientMsg;
use crate::{Instant, ItemId, TransmissionId};

impl Client {
    /// `item`, assembled, is being put in place off the receiving path:
    /// its report falls due after a NAK delay unless its verdict
    /// ([`Client::confirm_item`]) comes first. Push listeners report
    /// nothing.
    pub fn placing(&mut self, now: Instant, item: ItemId) {
        if self.push {
            return;
        }
        let delay = self.nak_delay();
        let Some(slot) = self.items.slot(&item) else {
            return;
        };
        let Some(it) = self.items.at_mut(slot) else {
            return;
        };
        let Some(ClientMsg::ItemDone { transmission, .. }) = it.done_report else {
            return;
        };
        if it.phase != ItemPhase::Assembled {
            return;
        }
        it.report_due = Some((now + delay, transmission));
        self.deadline.set(None);
        if let Err(at) = self.timed.binary_search_by_key(&item, |e| e.0) {
            self.timed.insert(at, (item, slot));
        }
    }

    /// The report of an item still being put in place when its report
    /// fell due: it needs nothing (its done report follows).
    pub(super) fn placing_report(&mut self, item: ItemId, transmission: TransmissionId) {
        self.stats.placing_reports += 1;
        self.late_nak(item, transmission, Vec::new());
    }
}
