//! Announcements and the transmission a client listens to: which
//! announcements bear on it, when it starts listening to a transmission of
//! an item it receives, when the channel has moved on, and when a
//! transmission ends and the item's report falls due (drawn from the NAK
//! window the server announced). Part of [`super::Client`].

use super::item::{ItemPhase, Listening};
use super::{Client, LOSS_REPORT_AFTER, reopen};
use crate::wire::{AnnounceKind, AnnounceRepr, BlockNeed, ClientMsg, NakRepr};
use crate::{Instant, ItemId, TransmissionId};
use std::time::Duration;

impl Client {
    /// Whether announcement `a` bears on this client: it waits for the
    /// item's manifest or data, or has names without item ids yet (the
    /// item may be one of them), or `a` would end a transmission it
    /// listens to. Only these need the server's signature checked; the
    /// rest change nothing ([`Client::handle_stray_announce`]).
    pub fn wants_announce(&self, a: &AnnounceRepr) -> bool {
        let item = match self.items.get(&a.item) {
            Some(it) => matches!(it.phase, ItemPhase::Requested | ItemPhase::Receiving),
            None => self.pending_names > 0,
        };
        item || self.listening_before(a.transmission).next().is_some()
    }

    /// The items whose transmission it listens to (not ended) is older
    /// than `t`.
    fn listening_before(&self, t: TransmissionId) -> impl Iterator<Item = ItemId> + '_ {
        (self.timed.iter())
            .filter(move |e| {
                (self.items.at(e.1))
                    .and_then(|i| i.listening.as_ref())
                    .is_some_and(|l| !l.ended && l.id < t)
            })
            .map(|e| e.0)
    }

    /// An announcement from the announcement channel.
    pub fn handle_announce(&mut self, now: Instant, a: &AnnounceRepr) {
        self.flush_replay(now);
        if self.session.is_some_and(|s| s != a.session) {
            self.stats.useless += 1;
            return;
        }
        self.nak_window = (
            Duration::from_micros(a.nak_window_min_us as u64),
            Duration::from_micros(a.nak_window_max_us.max(a.nak_window_min_us) as u64),
        );
        self.last_announce = Some(a.clone());
        self.channel_moved_on(now, a);
        match a.kind {
            AnnounceKind::End => {
                let Some(it) = self.items.get(&a.item) else {
                    return;
                };
                let heard = it.listening.as_ref().map(|l| l.id);
                if heard == Some(a.transmission) {
                    self.end_listening(now, a.item, None);
                } else if it.listens_to(a.transmission)
                    && heard.is_none_or(|t| t < a.transmission)
                    && !self.push
                {
                    self.missed_start(now, a);
                }
            }
            _ => {
                if (self.items.get(&a.item)).is_some_and(|i| i.listens_to(a.transmission)) {
                    self.listen(now, a);
                }
            }
        }
    }

    /// The end of a transmission of an item it receives of which it heard
    /// neither the start nor any data (one packet of which would have
    /// joined it, `receive`): every copy of the start lost, or its one
    /// copy (the server sends a short transmission's announcement once,
    /// `endpoint::server`), and the data too. It reports on it as on any
    /// other it listened to, a NAK delay from now, rather than leave the
    /// item to the server's report timeout. Nothing of it was counted, so
    /// the report carries no loss sample (received and expected both 0),
    /// which would otherwise read as all of it lost.
    fn missed_start(&mut self, now: Instant, a: &AnnounceRepr) {
        self.listen(now, a);
        if let Some(l) = (self.items.get_mut(&a.item))
            .and_then(|i| i.listening.as_mut())
            .filter(|l| l.id == a.transmission)
        {
            l.first_seq = Some(a.total_packets.max(1));
            self.stats.missed_starts += 1;
        }
        self.end_listening(now, a.item, None);
    }

    /// An announcement that does not bear on this client
    /// ([`Client::wants_announce`]), whose signature the endpoint left
    /// unchecked: nothing is taken from it, not even the NAK window it
    /// carries (the announcements of this client's own items carry it).
    pub fn handle_stray_announce(&mut self, now: Instant, a: &AnnounceRepr) {
        self.flush_replay(now);
        if self.session.is_some_and(|s| s != a.session) {
            self.stats.useless += 1;
            return;
        }
        // Not ours: no manifest to come can be of this transmission.
        self.last_announce = None;
    }

    /// The channel moved on: whatever we listened to has ended. Only a
    /// newer transmission says so: announcements travel on their own
    /// socket, so a late copy of an older one (most are sent three times)
    /// can be read after data of the next has arrived.
    fn channel_moved_on(&mut self, now: Instant, a: &AnnounceRepr) {
        let ended: Vec<ItemId> = self.listening_before(a.transmission).collect();
        for id in ended {
            self.end_listening(now, id, Some(reopen::REOPEN_LEFT));
        }
    }

    pub(super) fn listen(&mut self, now: Instant, a: &AnnounceRepr) {
        let grace = self.cfg.end_grace;
        let Some(slot) = self.items.slot(&a.item) else {
            return;
        };
        let Some(it) = self.items.at_mut(slot) else {
            return;
        };
        // Already on it: a repeated announcement, which says how long the
        // transmission now is (the server may grow or trim one on early
        // loss reports; never below what was heard of it).
        if let Some(l) = it.listening.as_mut().filter(|l| l.id == a.transmission) {
            let per = Duration::from_micros(a.duration_us) / a.total_packets.max(1);
            let total = a.total_packets.max(l.last_seq.saturating_add(1));
            if total != l.total && l.total > 0 {
                l.deadline = match total > l.total {
                    true => l.deadline + per * (total - l.total),
                    false => l.deadline.saturating_sub(per * (l.total - total)),
                };
                l.total = total;
                self.deadline.set(None);
            }
            // Announced again after we stopped hearing it: it resumes.
            if l.ended {
                let left = a.total_packets.saturating_sub(l.last_seq.saturating_add(1));
                self.reopen(now, a.item, a.transmission, None, per * left);
            }
            return;
        }
        // On a newer one: a stale announcement.
        if it.listening.as_ref().is_some_and(|l| l.id > a.transmission) {
            return;
        }
        // A newer transmission supersedes a NAK not yet sent (and the
        // recheck of one sent: its report will say what is needed).
        it.report_due = None;
        it.recheck = None;
        self.deadline.set(None);
        if let Err(at) = self.timed.binary_search_by_key(&a.item, |e| e.0) {
            self.timed.insert(at, (a.item, slot));
        }
        it.listening = Some(Listening {
            id: a.transmission,
            total: a.total_packets,
            first_seq: None,
            last_seq: 0,
            received: 0,
            last_heard: now,
            deadline: now + Duration::from_micros(a.duration_us) + grace,
            ended: false,
            reopen_left: None,
            next_report: LOSS_REPORT_AFTER,
            run: (0, 0),
            hinted: (0, Vec::new()),
        });
    }

    /// A report's delay after the event it answers, drawn from the NAK
    /// window the server announced (so reports spread out).
    pub(super) fn nak_delay(&mut self) -> Duration {
        let (lo, hi) = self.nak_window;
        Duration::from_micros(
            self.rng
                .range_u64(lo.as_micros() as u64, hi.as_micros() as u64),
        )
    }

    /// A NAK on `transmission` without packet counts: for a block back
    /// failed after the transmission's report, which gave them, or for an
    /// item still being put in place, whose done report will.
    pub(super) fn late_nak(
        &mut self,
        item: ItemId,
        transmission: TransmissionId,
        needs: Vec<BlockNeed>,
    ) {
        self.stats.naks += 1;
        self.outbox.push_back(ClientMsg::Nak(NakRepr {
            transmission,
            item,
            received: 0,
            expected: 0,
            needs,
        }));
    }

    /// Stops hearing `item`'s transmission and owes its report after a
    /// NAK delay; `reopen_left`: as [`item::Listening::reopen_left`].
    pub(super) fn end_listening(&mut self, now: Instant, item: ItemId, reopen_left: Option<u32>) {
        let delay = self.nak_delay();
        let Some(it) = self.items.get_mut(&item) else {
            return;
        };
        let Some(l) = it.listening.as_mut() else {
            return;
        };
        if l.ended {
            // Its end announcement after all: it is over.
            if reopen_left.is_none() {
                l.reopen_left = None;
            }
            return;
        }
        l.ended = true;
        l.reopen_left = reopen_left;
        self.deadline.set(None);
        if it.phase == ItemPhase::Receiving && !self.push {
            it.report_due = Some((now + delay, l.id));
        }
    }
}
