//! The client's data path: each data packet through its block decoder,
//! ARM probes, verified blocks, and early data replayed after a manifest.
use super::item::ItemPhase;
use super::item::ItemRx;
use super::spill;
use super::{
    Client, ClientEvent, ClientMsg, EARLY_PACKETS, HINT_BLOCKS, HINT_RUN, LOSS_REPORT_MIN_TOTAL,
    max_hints,
};
use crate::wire::{AnnounceKind, AnnounceRepr, BlockNeed, DataRepr, NakRepr};
use crate::{Instant, ItemId};
use std::collections::{BTreeSet, VecDeque};

impl Client {
    /// Feeds early data held for items whose manifest has come, in the
    /// order it came, in one pass over what is held (a pass per item made
    /// a request of thousands of small files, whose manifests come a few
    /// at a time while up to [`super::EARLY_PACKETS`] wait, spend a tenth
    /// of its receiver's time here).
    pub(super) fn flush_replay(&mut self, now: Instant) {
        if self.replay.is_empty() {
            return;
        }
        let items: BTreeSet<ItemId> = std::mem::take(&mut self.replay).into_iter().collect();
        let (replay, keep): (VecDeque<DataRepr>, VecDeque<DataRepr>) =
            std::mem::take(&mut self.early)
                .into_iter()
                .partition(|p| items.contains(&p.item));
        self.early = keep;
        for p in replay {
            self.handle_data(now, &p);
        }
    }

    /// A data packet. Returns true if it was useful.
    pub fn handle_data(&mut self, now: Instant, p: &DataRepr) -> bool {
        if !self.replay.is_empty() {
            self.flush_replay(now);
        }
        // One transmission is on air at a time: a packet of a later one
        // ends the one we were hearing (its end announcement may be lost).
        if self.session.is_none_or(|s| s == p.session) {
            if let Some((item, tid)) = self.on_air.filter(|(_, t)| p.transmission > *t) {
                let hearing = self
                    .items
                    .get(&item)
                    .and_then(|i| i.listening.as_ref())
                    .is_some_and(|l| l.id == tid && !l.ended);
                if hearing {
                    self.end_listening(now, item, Some(super::reopen::REOPEN_LEFT));
                }
            }
            if self.on_air.is_none_or(|(_, t)| p.transmission >= t) {
                self.on_air = Some((p.item, p.transmission));
            }
        }
        let useful = self.data(now, p);
        if let Some(probe) = p.probe {
            self.on_probe(p, probe);
        }
        if useful {
            self.stats.useful += 1;
        } else {
            self.stats.useless += 1;
        }
        useful
    }

    fn data(&mut self, now: Instant, p: &DataRepr) -> bool {
        if self.session.is_some_and(|s| s != p.session) {
            return false;
        }
        self.reopen_on_data(now, p.item, p.transmission, p.seq);
        let payloads = self.cfg.payloads;
        let loss_reports = self.cfg.loss_reports;
        let pending_names = self.pending_names;
        let (waiting_manifest, it) = match self.items.get_mut(&p.item) {
            Some(it) => (it.phase == ItemPhase::Requested, Some(it)),
            None => (pending_names > 0, None),
        };
        if waiting_manifest {
            if self.early.len() >= EARLY_PACKETS {
                self.early.pop_front();
            }
            self.early.push_back(p.clone());
            return false;
        }
        let Some(it) = it.filter(|it| it.phase == ItemPhase::Receiving) else {
            return false;
        };
        // A newer transmission of a wanted item whose announcement we did not
        // hear (announcements travel on lossy multicast too): join it.
        let newer = it.listening.as_ref().is_none_or(|l| l.id < p.transmission);
        let it = if newer && it.listens_to(p.transmission) {
            let a = AnnounceRepr {
                session: p.session,
                transmission: p.transmission,
                item: p.item,
                kind: AnnounceKind::First,
                first_block: 0,
                block_count: 0,
                total_packets: 0,
                duration_us: 0,
                nak_window_min_us: 0,
                nak_window_max_us: 0,
            };
            self.listen(now, &a);
            match self.items.get_mut(&p.item) {
                Some(it) => it,
                None => return false,
            }
        } else {
            it
        };
        let Some(l) = it.listening.as_mut().filter(|l| l.id == p.transmission) else {
            return false;
        };
        l.received = l.received.saturating_add(1);
        l.last_heard = now;
        l.first_seq = Some(l.first_seq.map_or(p.seq, |f| f.min(p.seq)));
        l.last_seq = l.last_seq.max(p.seq);
        // A transmission joined by its data (every copy of its
        // announcement lost: one in eight at 50% loss) has no known length:
        // it reports too, or the server never learns this receiver's loss
        // before its NAK.
        let long = l.total >= LOSS_REPORT_MIN_TOTAL || l.total == 0;
        if loss_reports && long {
            let seen = (l.last_seq.saturating_add(1)).saturating_sub(l.first_seq.unwrap_or(0));
            // u32::MAX: no more reports on this one (a server's sequence
            // numbers that run to the top of the range must not make every
            // packet a report).
            if l.next_report != u32::MAX && seen >= l.next_report {
                l.next_report = seen.saturating_mul(2);
                self.outbox.push_back(ClientMsg::LossReport {
                    transmission: l.id,
                    item: p.item,
                    received: l.received.min(seen),
                    expected: seen,
                });
            }
        }
        let b = p.block.0;
        if let Some(nak) = short_block_hint(it, p.item, b, loss_reports && long) {
            self.stats.hints += 1;
            self.outbox.push_back(ClientMsg::Nak(nak));
        }
        if it.decoded.get(b as usize).is_none_or(|d| *d) || it.decoding.contains_key(&b) {
            return false;
        }
        if payloads && it.decoders.get(b as usize).is_some_and(Option::is_none) {
            if let Some(d) = spill::defer(it, p) {
                self.deferred.push(d);
                return true;
            }
        }
        let payload = payloads.then_some(p.payload.as_slice());
        let Some(dec) = it.decoder(b, payloads, &mut self.rng) else {
            return false;
        };
        if !dec.add(p.symbol, payload) {
            return false;
        }
        if !dec.ready() {
            return true;
        }
        if let Some(dec) = it.decoders[b as usize].take() {
            if let Err(dec) = self.offer_decode(p.item, b, dec) {
                self.decode_in_place(p.item, b, dec);
            }
        }
        true
    }

    /// ARM (SPEC 3.5): predicts whether the rest of the transmission will
    /// be enough, and if not asks for a larger maxseqno.
    fn on_probe(&mut self, p: &DataRepr, probe: crate::wire::Probe) {
        let Some(it) = self
            .items
            .get(&p.item)
            .filter(|i| i.phase == ItemPhase::Receiving)
        else {
            return;
        };
        let Some(l) = it.listening.as_ref().filter(|l| l.id == p.transmission) else {
            return;
        };
        let first = l.first_seq.unwrap_or(p.seq);
        let span = p.seq.saturating_sub(first).saturating_add(1);
        let more: u32 = it.needs().iter().map(|n| n.count).sum();
        let wanted = l.received.saturating_add(more);
        if let Some(want) =
            crate::policy::arm::receiver_request(probe.pts, span, l.received, wanted)
        {
            self.outbox.push_back(ClientMsg::ArmNak {
                transmission: p.transmission,
                item: p.item,
                want_maxseq: first.saturating_add(want),
                echo_timestamp_us: probe.timestamp_us,
                hold_us: 0,
            });
        }
    }

    /// Block `b` of `item` decoded and matching its hash (here or in a
    /// job): out to the driver, and the item assembled once all are in.
    pub(super) fn block_verified(&mut self, item: ItemId, b: u32, bytes: Vec<u8>) {
        let payloads = self.cfg.payloads;
        let Some(it) = self.items.get_mut(&item) else {
            return;
        };
        let Some(layout) = it.layout else {
            return;
        };
        it.decoded[b as usize] = true;
        it.decoders[b as usize] = None;
        it.blocks_left -= 1;
        if payloads {
            self.events.push_back(ClientEvent::BlockVerified {
                item,
                block: b,
                offset: layout.block_offset(b),
                data: bytes,
            });
        }
        if it.blocks_left == 0 {
            self.assembled(item);
        }
    }
}

/// Follows the block a send is on (`b`, of the packet just heard). When a
/// send sent block after block has left a block short (or a block an
/// earlier hint was for: what it brought may have been lost too), returns
/// the short-block hint to send while `enabled`: a NAK on the send still
/// on air, naming that block and any earlier-hinted block still short, at
/// most [`HINT_BLOCKS`]. If the send still carries more of them (a loss
/// tier's tail for lossier receivers), the server sends those sooner
/// (`server::early`). At most [`max_hints`] per send.
fn short_block_hint(it: &mut ItemRx, item: ItemId, b: u32, enabled: bool) -> Option<NakRepr> {
    let l = it.listening.as_mut()?;
    if l.run.0 == b {
        l.run.1 = l.run.1.saturating_add(1);
        return None;
    }
    let (left, run) = std::mem::replace(&mut l.run, (b, 1));
    let moved_on = run >= HINT_RUN || l.hinted.1.contains(&left);
    let blocks = it.layout.map_or(0, |l| l.blocks());
    if !enabled || !moved_on || l.hinted.0 >= max_hints(blocks) {
        return None;
    }
    let earlier = l.hinted.1.iter().copied().filter(|&h| h != left);
    let blocks: Vec<u32> = std::iter::once(left).chain(earlier).collect();
    let needs: Vec<BlockNeed> = (blocks.into_iter())
        .filter_map(|x| it.block_need(x).filter(|n| n.count > 0))
        .take(HINT_BLOCKS)
        .collect();
    let first = needs.first()?.block.0;
    let l = it.listening.as_mut()?;
    l.hinted.0 += 1;
    if !l.hinted.1.contains(&first) {
        l.hinted.1.push(first);
    }
    Some(NakRepr {
        transmission: l.id,
        item,
        received: l.received,
        expected: l.expected(),
        needs,
    })
}
