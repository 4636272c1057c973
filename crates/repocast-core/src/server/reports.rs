//! The server's side of the request connection: hello, catalogue, requests
//! (with `+notify`), and the reports clients send after each transmission:
//! NAKs (answered by repair or rescheduling, per the retransmission policy)
//! and item-done; and the repair budget, which bounds what one client may
//! cost per item, in what its NAKs ask for and in sends it leaves without
//! a report (past it, the item fails for that client alone).

use super::transmission::{Esis, Segment};
use super::{RepairJob, Server, ServerEvent, Transmit};
use crate::wire::control::{MAX_CATALOGUE_ENTRIES, bitmap_holds};
use crate::wire::{AnnounceKind, ClientMsg, ItemSel, NakRepr, ServerMsg};
use crate::{ClientId, Instant, ItemId, TransmissionId};
use std::collections::BTreeMap;

impl Server {
    /// A control message from `client` (parsed by the driver).
    pub fn handle_client_msg(&mut self, now: Instant, client: ClientId, msg: ClientMsg) {
        if !self.clients.contains_key(&client) {
            self.stats.bad_requests += 1;
            return;
        }
        match msg {
            ClientMsg::Hello { .. } => {
                let items = self.items.len() as u32;
                self.send(
                    client,
                    ServerMsg::Welcome {
                        session: self.cfg.session,
                        items,
                        channels: self.cfg.channels,
                        session_key: self.cfg.session_key.as_ref().map(|k| k.to_bytes()),
                        signed_symbols: self.cfg.sign_symbols,
                    },
                );
                if let Some(c) = self.clients.get_mut(&client) {
                    c.welcomed = true;
                }
                self.send_next_key(client);
            }
            ClientMsg::ListCatalogue => {
                let all = self.catalogue();
                let pages: Vec<_> = all
                    .chunks(MAX_CATALOGUE_ENTRIES as usize)
                    .map(<[_]>::to_vec)
                    .collect();
                if pages.is_empty() {
                    self.send(
                        client,
                        ServerMsg::Catalogue {
                            entries: vec![],
                            more: false,
                        },
                    );
                }
                let n = pages.len();
                for (i, entries) in pages.into_iter().enumerate() {
                    self.send(
                        client,
                        ServerMsg::Catalogue {
                            entries,
                            more: i + 1 < n,
                        },
                    );
                }
            }
            ClientMsg::Request { items } => self.on_request(now, client, items),
            ClientMsg::LossReport {
                transmission,
                item,
                received,
                expected,
            } => self.on_loss_report(client, transmission, item, received, expected),
            ClientMsg::Nak(nak) => self.on_nak(now, client, nak),
            ClientMsg::ItemDone {
                item,
                transmission,
                received,
                expected,
            } => self.on_done(now, client, item, transmission, received, expected),
            ClientMsg::ArmNak {
                transmission,
                item,
                want_maxseq,
                echo_timestamp_us,
                hold_us,
            } => {
                let cur = self
                    .current
                    .as_mut()
                    .filter(|t| t.id == transmission && t.item == item);
                // A late ARM NAK, for a transmission that has ended, is harmless.
                if let Some(arm) = cur.and_then(|t| t.arm.as_mut()) {
                    self.stats.naks += 1;
                    let rtt = (echo_timestamp_us <= now.as_micros()).then(|| {
                        let us =
                            crate::policy::arm::rtt_us(echo_timestamp_us, hold_us, now.as_micros());
                        std::time::Duration::from_micros(us)
                    });
                    arm.on_nak(want_maxseq, rtt);
                }
            }
            ClientMsg::Bye => self.handle_disconnect(now, client),
            ClientMsg::Have { name, hash, held } => self.on_have(client, &name, hash, held),
        }
    }

    pub(super) fn send(&mut self, client: ClientId, msg: ServerMsg) {
        self.outbox.push_back(Transmit::Control(client, msg));
    }

    /// Records what a resuming client holds of an item it will request.
    /// Bounded: one bitmap per catalogue item, no longer than the item
    /// has blocks; anything else is a bad request.
    fn on_have(&mut self, client: ClientId, name: &str, hash: [u8; 32], held: Vec<u8>) {
        let Some(&item) = self.names.get(name) else {
            self.stats.bad_requests += 1;
            return;
        };
        let blocks = self.items[item.0 as usize].layout.blocks() as usize;
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        if held.len() > blocks.div_ceil(8) || c.requested.contains(&item) {
            self.stats.bad_requests += 1;
            return;
        }
        c.haves.insert(item, (hash, held));
    }

    /// The needs of a client that holds some blocks of `item` (from its
    /// `Have`, if it matches the item's current version): every block it
    /// lacks, in full. `None` when it said nothing usable.
    pub(super) fn held_needs(
        &mut self,
        client: ClientId,
        item: ItemId,
    ) -> Option<BTreeMap<u32, u32>> {
        let (hash, held) = self.clients.get_mut(&client)?.haves.remove(&item)?;
        let st = &self.items[item.0 as usize];
        if hash != st.info.hash {
            return None;
        }
        Some(
            (0..st.layout.blocks())
                .filter(|&b| !bitmap_holds(&held, b))
                .map(|b| (b, st.layout.block_symbols(b)))
                .collect(),
        )
    }

    fn on_request(&mut self, now: Instant, client: ClientId, sels: Vec<ItemSel>) {
        let mut waits = Vec::new();
        for sel in sels {
            let item = match &sel {
                ItemSel::Id(i) if (i.0 as usize) < self.items.len() => *i,
                ItemSel::Name(n) if self.names.contains_key(n) => self.names[n],
                other => {
                    self.stats.bad_requests += 1;
                    let name = match other {
                        ItemSel::Id(i) => format!("#{i}"),
                        ItemSel::Name(n) => n.clone(),
                    };
                    self.send(
                        client,
                        ServerMsg::Failed {
                            item: None,
                            name,
                            reason: "no such item".into(),
                        },
                    );
                    continue;
                }
            };
            let Some(c) = self.clients.get_mut(&client) else {
                return;
            };
            if !c.requested.insert(item) {
                continue;
            }
            let st = &self.items[item.0 as usize];
            if let Some(reason) = st.failed.clone() {
                let name = st.info.name.clone();
                self.send(
                    client,
                    ServerMsg::Failed {
                        item: Some(item),
                        name,
                        reason,
                    },
                );
                continue;
            }
            // In the order asked, as the client's window lets it in
            // ([`super::window`]).
            if let Some(c) = self.clients.get_mut(&client) {
                c.backlog.push_back(item);
                self.items[item.0 as usize].queued.insert(client);
            }
            self.release(client, &mut waits);
        }
        // One re-filing of the client for the whole request.
        self.demand.add_waits(client, &waits, now);
        self.maybe_complete(client);
    }

    fn account(&mut self, client: ClientId, t: TransmissionId, received: u32, expected: u32) {
        if let Some(c) = self.clients.get_mut(&client) {
            // The transmission's own report replaces its early one.
            if c.early.is_some_and(|(e, _, _)| e == t) {
                c.early = None;
            }
            c.received += received.min(expected) as u64;
            c.expected += expected as u64;
            let fill = 1.0 - c.loss();
            self.demand.set_fill(client, fill);
        }
    }

    fn on_nak(&mut self, now: Instant, client: ClientId, nak: NakRepr) {
        let item = nak.item;
        let known = self
            .clients
            .get(&client)
            .is_some_and(|c| c.requested.contains(&item) && !c.done.contains(&item));
        let Some(st) = self.items.get(item.0 as usize).filter(|_| known) else {
            self.stats.bad_requests += 1;
            return;
        };
        if st.failed.is_some() {
            return;
        }
        // Needs must name real blocks and ask for no more than a block
        // can need (its k symbols: a receiver needs at most all of them);
        // a forged NAK cannot grow a repair past that.
        let blocks = st.layout.blocks();
        let bad = nak
            .needs
            .iter()
            .any(|n| n.block.0 >= blocks || n.count > st.layout.block_symbols(n.block.0));
        if bad || nak.transmission.0 >= self.next_tid {
            self.stats.bad_requests += 1;
            return;
        }
        // A NAK that needs nothing: the client holds what it needs of the
        // item (its blocks out being decoded, or the item whole and being
        // put in place) and owes its done report, or a NAK for a block
        // that failed. Until then no report is waited on from it for the
        // item, on this transmission or a later one.
        let settling = nak.needs.is_empty();
        let was_settling = match self.clients.get_mut(&client) {
            Some(c) if settling => !c.settling.insert(item),
            Some(c) => c.settling.remove(&item),
            None => false,
        };
        // For a transmission still on air or interrupted: its receiver
        // stopped hearing it (another transmission interrupted it, or it
        // ran late), takes it back up when more of it comes, and reports
        // again at its end; or the send left a block short for it (a
        // short-block hint). Repaired now, the rest of it would go twice;
        // what the send still carries of those blocks may go sooner.
        if self.unfinished(nak.transmission) {
            if settling {
                // Nothing to hasten: the transmission's end sets no wait
                // on it.
                self.stats.empty_naks += 1;
                return;
            }
            self.stats.early_naks += 1;
            self.on_hint(client, &nak);
            return;
        }
        // The repair budget: a client that keeps asking past what any
        // receiver could need is refused, and the item fails for it.
        if let (Some(mult), Some(c)) = (self.cfg.repair_budget, self.clients.get_mut(&client)) {
            let asked = c.asked.entry(item).or_insert(0);
            *asked = asked.saturating_add(nak.total_needed());
            if *asked > st.layout.symbols().saturating_mul(mult as u64) {
                self.stats.over_budget += 1;
                let reason = format!("asked for more than {mult} times the item in repairs");
                self.refuse(now, client, item, reason);
                return;
            }
        }
        self.stats.naks += 1;
        self.naks_this_round += 1;
        self.observe_report(now, client, nak.transmission);
        if let Some(c) = self.clients.get_mut(&client) {
            c.unreported.remove(&item);
        }
        self.awaiting.remove(&(client, item));
        self.account(client, nak.transmission, nak.received, nak.expected);
        let in_flight = self.items[item.0 as usize].in_flight.contains(&client);
        if let Some(c) = self.clients.get_mut(&client) {
            c.naks += 1;
            c.needs.insert(
                item,
                nak.needs.iter().map(|n| (n.block.0, n.count)).collect(),
            );
        }
        if nak.needs.is_empty() {
            // A report that needs nothing: its blocks are being decoded.
            // Its done report follows, or a NAK for what a block that
            // failed needs; sending the item again would help no one.
            self.stats.empty_naks += 1;
            if !in_flight {
                // Its wait for a new send (after a report timeout) would
                // send it what it holds.
                self.demand.remove_wait(client, item);
            }
            return;
        }
        if !in_flight {
            // It was waiting anyway (it listened to a repair meant for
            // others); its new need is recorded. One that had said it
            // held the item waits again.
            if was_settling && !self.demand.is_waiting(client, item) {
                self.demand.add_wait(client, item, now);
            }
            return;
        }
        // Optionally sized so this client finishes in one round with high
        // probability, given the share of packets it receives.
        let loss = self.clients.get(&client).map_or(0.0, |c| c.loss());
        let aware = self.cfg.loss_aware_repairs;
        let wants: Vec<(u32, u32)> = nak
            .needs
            .iter()
            .map(|n| {
                let want = if aware {
                    crate::policy::retransmit::repair_size(n.count, loss)
                } else {
                    n.count
                };
                (n.block.0, want)
            })
            .collect();
        // A long NAK (more than `repair_share` of the item, and not a short
        // transmission) goes back to the scheduler's queue: repairs go
        // before any scheduled send, so they stay short.
        let need = nak.total_needed();
        let symbols = self.items[item.0 as usize].layout.symbols() as f64;
        let long = need >= u64::from(super::preempt::MIN_LEFT)
            && (self.cfg.repair_share).is_some_and(|f| need as f64 > f * symbols);
        let repairs = self.cfg.scheme.retransmit.repairs(need) && !long;
        // A newer transmission of this item is on air: the client listens to
        // it. A scheduled send supersedes the NAK (the client reports again
        // after it); a running repair takes the NAK in: whatever this client
        // still needs beyond what the repair plans is appended to it.
        let newer = self
            .current
            .as_ref()
            .filter(|t| t.item == item && t.id.0 > nak.transmission.0);
        let interrupted = (self.suspended.as_ref())
            .is_some_and(|t| t.item == item && t.id.0 > nak.transmission.0);
        if interrupted {
            return;
        }
        if let Some(t) = newer {
            if t.kind != AnnounceKind::Repair || t.arm.is_some() || !repairs {
                return;
            }
            let lists_ids = self.cfg.code == crate::fec::CodeKind::Exact;
            let mut extra = Vec::new();
            for (n, &(block, want)) in nak.needs.iter().zip(&wants) {
                let planned = self.current.as_ref().map_or(0, |t| t.planned(block));
                if lists_ids {
                    // Exact packets: the ids this client lacks that the
                    // repair does not already carry (MFTP's union).
                    let cur = self.current.as_ref();
                    let ids: Vec<u32> = (n.missing.iter().copied())
                        .filter(|&id| !cur.is_some_and(|t| t.lists(block, id)))
                        .collect();
                    if !ids.is_empty() {
                        extra.push(Segment {
                            block,
                            esis: Esis::List(ids),
                        });
                    }
                } else if want > planned {
                    let esis = self.alloc(item, block, want - planned);
                    extra.push(Segment { block, esis });
                }
            }
            if let Some(t) = self.current.as_mut() {
                for seg in extra {
                    t.append(seg);
                }
                // What this client lacks goes next, lowest block first:
                // it need not wait while the repair goes through every
                // block for a lossier receiver.
                if !lists_ids && self.cfg.hasten {
                    t.hasten_in_order(&wants);
                }
            }
            return;
        }
        if repairs {
            let job = match self.repairs.iter_mut().position(|j| j.item == item) {
                Some(i) => &mut self.repairs[i],
                None => {
                    self.repairs.push_back(RepairJob {
                        item,
                        counts: Default::default(),
                        missing: Default::default(),
                        wants: Vec::new(),
                    });
                    let last = self.repairs.len() - 1;
                    &mut self.repairs[last]
                }
            };
            job.wants.retain(|(c, _)| *c != client);
            job.wants.push((client, wants.clone()));
            for (n, &(block, want)) in nak.needs.iter().zip(&wants) {
                let e = job.counts.entry(block).or_insert(0);
                *e = (*e).max(want);
                job.missing
                    .entry(block)
                    .or_default()
                    .extend(n.missing.iter().copied());
            }
        } else {
            self.stats.rescheduled += 1;
            self.items[item.0 as usize].in_flight.remove(&client);
            // Requested now, for FIFO/RxW: the rescheduled request is new.
            self.demand.add_wait(client, item, now);
        }
    }

    /// A report on transmission `t`, if it has ended, says how late this
    /// receiver's reports come ([`super::lag`]).
    fn observe_report(&mut self, now: Instant, client: ClientId, t: TransmissionId) {
        if let (Some(lag), Some(c)) = (self.ends.since(t, now), self.clients.get_mut(&client)) {
            c.lag.observe(lag);
        }
    }

    fn on_done(
        &mut self,
        now: Instant,
        client: ClientId,
        item: ItemId,
        t: TransmissionId,
        received: u32,
        expected: u32,
    ) {
        let ok = self
            .clients
            .get(&client)
            .is_some_and(|c| c.requested.contains(&item));
        if !ok || item.0 as usize >= self.items.len() {
            self.stats.bad_requests += 1;
            return;
        }
        self.account(client, t, received, expected);
        self.observe_report(now, client, t);
        self.stats.items_done += 1;
        self.close_in_window(now, client, item);
        self.awaiting.remove(&(client, item));
        self.items[item.0 as usize].in_flight.remove(&client);
        self.demand.remove_wait(client, item);
        // Receivers leave ARM transmissions as soon as they decode; when the
        // last has, the transmission stops.
        if self.items[item.0 as usize].in_flight.is_empty() {
            if let Some(t) = self.current.as_mut().filter(|t| t.item == item) {
                let sent = t.sent();
                if let Some(arm) = t.arm.as_mut() {
                    arm.stop(sent);
                }
            }
        }
        if let Some(c) = self.clients.get_mut(&client) {
            c.done.insert(item);
            c.settling.remove(&item);
            c.needs.remove(&item);
            c.unheard.remove(&item);
            c.unreported.remove(&item);
            let (d, t) = (c.done.len() as u32, c.requested.len() as u32);
            self.send(
                client,
                ServerMsg::Progress {
                    items_done: d,
                    items_total: t,
                },
            );
        }
        self.maybe_complete(client);
    }

    fn maybe_complete(&mut self, client: ClientId) {
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        // Only requested items are ever marked done (`on_done`), so
        // counting is enough: checking each item made every report cost
        // as much as the items done so far.
        let all = !c.requested.is_empty() && c.done.len() >= c.requested.len();
        if all && !c.complete {
            c.complete = true;
            self.send(client, ServerMsg::Done);
            self.events.push_back(ServerEvent::ClientComplete(client));
        }
    }

    /// Counts one more transmission of `item` that client `c` did not
    /// report on: at the repair budget's number of them in a row, the
    /// item is not sent again for it (an honest receiver reports on
    /// nearly every one, if late: [`lag`]), and the budget is returned.
    /// No budget, no limit.
    pub(super) fn unreported_past_budget(&mut self, c: ClientId, item: ItemId) -> Option<u32> {
        let budget = self.cfg.repair_budget?;
        let n = self
            .clients
            .get_mut(&c)?
            .unreported
            .entry(item)
            .or_insert(0);
        *n = n.saturating_add(1);
        (*n >= budget).then_some(budget)
    }

    /// The item fails for client `c` alone, with a reason: it no longer
    /// waits for it or listens to it, nor will once its turn comes.
    pub(super) fn refuse(&mut self, now: Instant, c: ClientId, item: ItemId, reason: String) {
        let Some(st) = self.items.get_mut(item.0 as usize) else {
            return;
        };
        st.in_flight.remove(&c);
        st.queued.remove(&c);
        let name = st.info.name.clone();
        self.awaiting.remove(&(c, item));
        if let Some(s) = self.clients.get_mut(&c) {
            s.settling.remove(&item);
        }
        self.demand.remove_wait(c, item);
        self.send(
            c,
            ServerMsg::Failed {
                item: Some(item),
                name,
                reason,
            },
        );
        self.close_in_window(now, c, item);
    }
}
