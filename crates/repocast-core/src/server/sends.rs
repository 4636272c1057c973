//! Starting transmissions: which item goes next (or which repair), how
//! many symbols of which ids each block gets, and the announcement that
//! opens it. Part of [`super::Server`]; the policies behind the counts are
//! in [`crate::policy`], the schedulers in [`crate::sched`].

use super::transmission::{self, Esis, Segment, Transmission};
use super::{ClientState, RepairJob, Server, ServerEvent, Transmit, encoders};
use crate::policy::FecPolicy;
use crate::sched::hold;
use crate::wire::{AnnounceKind, AnnounceRepr};
use crate::{ClientId, Instant, ItemId, TransmissionId};
use std::time::Duration;

/// How many waiters [`Server::spare_link`] looks at, in all, to find the
/// waiting items only a send's own receivers wait for (a bound on its work
/// per send however many groups of items and receivers wait).
const SPARE_LINK_CHECKS: usize = 4096;

impl Server {
    /// `count` fresh symbol ids of `block` of `item`, from its next one on.
    pub(super) fn alloc(&mut self, item: ItemId, block: u32, count: u32) -> Esis {
        let st = &mut self.items[item.0 as usize];
        let k = st.layout.block_symbols(block);
        let space = self.cfg.code.symbol_space(k);
        let start = st.next_esi[block as usize];
        st.next_esi[block as usize] = ((start as u64 + count as u64) % space.max(1) as u64) as u32;
        Esis::Range {
            start,
            count,
            space,
        }
    }

    /// The next thing to send if it is an announcement, at `now` (what
    /// [`Server::poll_transmit`] would return next, a transmission started
    /// if one is due), so that the endpoint carries announcements due
    /// together in one datagram: a transmission's end and the next one's
    /// start. Anything else stays for [`Server::poll_transmit`].
    pub fn poll_announce(&mut self, now: Instant) -> Option<AnnounceRepr> {
        if self.outbox.is_empty() && self.current.is_none() {
            self.start_next(now);
        }
        match self.outbox.front() {
            Some(Transmit::Announce(_)) => match self.outbox.pop_front() {
                Some(Transmit::Announce(a)) => Some(a),
                _ => None,
            },
            _ => None,
        }
    }

    /// The link is free: the batching hold decides what may go, then the
    /// next scheduled send or repair starts.
    pub(super) fn start_next(&mut self, now: Instant) {
        self.hold_until = None;
        // An interrupted send goes on first.
        if self.resume(now) {
            return;
        }
        // Nobody waiting for a send, a repair or a report: the busy
        // period is over.
        let loaded = self.demand.active().next().is_some()
            || !self.repairs.is_empty()
            || !self.awaiting.is_empty();
        self.loaded_since = loaded.then(|| self.loaded_since.unwrap_or(now));
        let gate_open = self
            .loaded_since
            .is_some_and(|t| now.saturating_since(t) >= self.cfg.batch_hold_after);
        if let Some(cap) = self
            .cfg
            .batch_hold
            .filter(|_| gate_open && !self.cfg.scheduler.is_push())
        {
            let wake = hold::apply(&mut self.demand, cap, now);
            self.hold_until = wake.map(|w| (w, self.demand.changes()));
            // Unless the hold may idle the link, every waiting item held
            // means none is: the scheduler's best goes now.
            if !self.cfg.batch_hold_idle && self.demand.eligible().next().is_none() {
                self.demand.set_held(Default::default());
                self.hold_until = None;
            }
        } else {
            self.demand.set_held(Default::default());
        }
        self.start_scheduled_or_repair(now);
        // Account for the link time the hold leaves idle.
        if self.current.is_some() || self.hold_until.is_none() {
            if let Some(since) = self.held_since.take() {
                self.stats.hold_idle_us += now.saturating_since(since).as_micros() as u64;
            }
        } else if self.held_since.is_none() {
            self.held_since = Some(now);
            self.stats.holds += 1;
        }
    }

    fn start_scheduled_or_repair(&mut self, now: Instant) {
        // With shared repairs, a repair after a repair waits for a
        // scheduled send if anybody is waiting for one.
        let new_turn =
            self.cfg.share_repairs && self.last_was_repair && self.demand.active().next().is_some();
        if !new_turn {
            if let Some(job) = self.repairs.pop_front() {
                return self.start_repair(now, job);
            }
        }
        let Some(item) = self.scheduler.select(&self.demand, now) else {
            if let Some(job) = self.repairs.pop_front() {
                self.start_repair(now, job);
            }
            return;
        };
        self.start_scheduled(now, item);
    }

    /// Starts a scheduled send of `item` to everyone waiting for it.
    pub(super) fn start_scheduled(&mut self, now: Instant, item: ItemId) {
        self.last_was_repair = false;
        let push = self.cfg.scheduler.is_push();
        let listeners = if push {
            Vec::new()
        } else {
            let mut l = self.demand.waiters(item);
            l.extend(self.join_from_backlogs(item));
            l
        };
        if !push {
            self.restart_ids_if_unheard(item, &listeners);
        }
        let blocks = self.items[item.0 as usize].layout.blocks();
        if self.cfg.scheme.is_arm() && !push {
            self.begin_arm(now, item, &listeners);
            return;
        }
        let n = listeners.len() as u32;
        let (max_loss, first_loss) = self.loss_tiers(&listeners, 0.0, None, n);
        let needs: Vec<u32> = (0..blocks)
            .map(|b| self.block_need(item, b, &listeners))
            .collect();
        // The odds are the item's: each of its G blocks gets the G-th root.
        let g = needs.iter().filter(|&&d| d > 0).count().max(1) as f64;
        let idle_odds = (self.cfg.idle_fec)
            .filter(|f| !push && self.spare_link(item, f.backlog))
            .map(|f| f.odds.powf(g.recip()));
        // The whole send takes them if they cost less than a NAK round; a
        // first tier always does (its receivers, short of a block, would
        // wait for the tail).
        let tail_odds = idle_odds
            .filter(|&q| self.odds_worth_a_round(item, &needs, n, max_loss, q, listeners.len()));
        let first_odds = if first_loss.is_some() {
            idle_odds
        } else {
            tail_odds
        };
        // A push pass: sized for its listeners at the pass's loss.
        let (max_loss, tail_odds, first_odds) = match self.pass_odds.filter(|_| push) {
            Some((q, loss)) => (loss, Some(q), Some(q)),
            None => (max_loss, tail_odds, first_odds),
        };
        let (mut first, mut tail) = (Vec::new(), Vec::new());
        for (b, &need) in (0u32..).zip(&needs) {
            if need == 0 {
                continue;
            }
            let count = self.send_count(need, n, max_loss, tail_odds);
            let early = first_loss.map_or(count, |l| self.send_count(need, n, l, first_odds));
            let early = early.min(count);
            let esis = self.alloc(item, b, early);
            first.push(Segment { block: b, esis });
            let esis = self.alloc(item, b, count - early);
            tail.push(Segment { block: b, esis });
        }
        for c in &listeners {
            self.demand.remove_wait(*c, item);
            self.items[item.0 as usize].in_flight.insert(*c);
        }
        let kind = if push {
            AnnounceKind::Carousel
        } else {
            AnnounceKind::First
        };
        let growth = matches!(self.cfg.scheme.fec, FecPolicy::MaxLoss(_)) && !push;
        let id = TransmissionId(self.next_tid);
        self.start(now, Transmission::tiered(id, item, kind, first, tail));
        if push {
            self.interleave_current(item);
        }
        if let Some(t) = self.current.as_mut().filter(|t| growth && t.item == item) {
            t.growth = Some(transmission::Growth {
                listeners: n,
                max_loss,
                first_loss,
                needs,
                odds: first_odds,
                tail_odds,
            });
        }
    }

    /// Symbols a scheduled send gives a block of `need` for `receivers`
    /// whose largest loss is `loss`: the FEC policy's count, raised to
    /// `odds` of decoding when the link has time to spare.
    pub(super) fn send_count(
        &self,
        need: u32,
        receivers: u32,
        loss: f64,
        odds: Option<f64>,
    ) -> u32 {
        let count = self.cfg.scheme.fec.symbols(need, receivers, loss);
        odds.map_or(count, |q| {
            crate::policy::odds::symbols_for_odds(need, loss, q, count)
        })
    }

    /// The largest loss estimated among `clients` (at least `floor`), and
    /// the loss a send to them has its first tier sized for (`None`: one
    /// tier; [`crate::policy::tiers`]). A receiver whose estimate is too
    /// thin to size a tier counts at `unknown`, or at the largest loss if
    /// that is `None`.
    pub(super) fn loss_tiers<'a>(
        &self,
        clients: impl IntoIterator<Item = &'a ClientId>,
        floor: f64,
        unknown: Option<f64>,
        receivers: u32,
    ) -> (f64, Option<f64>) {
        let states: Vec<&ClientState> = (clients.into_iter())
            .filter_map(|c| self.clients.get(c))
            .collect();
        let max = states.iter().map(|c| c.loss()).fold(floor, f64::max);
        if !self.cfg.loss_tiers || self.cfg.scheduler.is_push() {
            return (max, None);
        }
        let unknown = unknown.unwrap_or(max);
        let losses: Vec<f64> = states.iter().map(|c| c.tier_loss(unknown)).collect();
        let fec = self.cfg.scheme.fec;
        let first = crate::policy::tiers::first_tier(&losses, |p| fec.expansion(receivers, p));
        (max, first.filter(|&l| l < max))
    }

    /// Whether raising the blocks of `needs` from the FEC policy's counts
    /// to `odds` of decoding each, for receivers at `loss`, costs less time
    /// on the link than the NAK round it would save: the NAK window the
    /// send announces to `listeners` receivers (the round also needs a
    /// repair, but so do the odds, which only make it less likely). A
    /// small item's few extra symbols take far less than a round; the same
    /// odds spread over the many blocks of a large one buy a binomial
    /// margin on every block, which at 24 blocks of 1,000 symbols is about
    /// 2% more data than the policy's (tens of milliseconds at 100 Mbit/s)
    /// to save a round of 5-50 ms that the policy's margin already makes
    /// unlikely; at 50% loss the margin is 7% of the item, where a repair
    /// after the send gives the receiver exactly what it lacks.
    fn odds_worth_a_round(
        &self,
        item: ItemId,
        needs: &[u32],
        receivers: u32,
        loss: f64,
        odds: f64,
        listeners: usize,
    ) -> bool {
        let extra: u64 = (needs.iter().filter(|&&d| d > 0))
            .map(|&d| {
                let policy = self.send_count(d, receivers, loss, None);
                u64::from(self.send_count(d, receivers, loss, Some(odds)) - policy)
            })
            .sum();
        let round = self.nak_window_for(listeners).1;
        let symbol = self.items[item.0 as usize].layout.symbol_size();
        u128::from(self.pacer.link_ns(symbol, extra)) <= round.as_nanos()
    }

    /// Whether the link has time to spare besides `item`, sent to everyone
    /// waiting for it (its listeners): no repair queued (one that may
    /// interrupt the send, `ServerConfig::preempt`, does not wait for its
    /// extra symbols) and the other waiting items take less link time than
    /// `backlog` to send (counted until they do not). An item waited for
    /// only by its listeners does not count: they finish no sooner for it
    /// going first, as their requests end with this send either way, and
    /// the extra symbols spare them a repair round of it. At most
    /// [`SPARE_LINK_CHECKS`] waiters are looked at for that, once per group
    /// of items with the same waiters; past them a group counts.
    fn spare_link(&self, item: ItemId, backlog: Duration) -> bool {
        let budget = u64::try_from(backlog.as_nanos()).unwrap_or(u64::MAX);
        (self.repairs.is_empty() || self.cfg.preempt)
            && (self.demand)
                .link_time_waited_by_others(item, budget, SPARE_LINK_CHECKS)
                .is_none_or(|waiting| waiting < budget)
    }

    /// Sends `item` from its source symbols again (ids from 0 in every
    /// block) when no receiver can hold a symbol of it: nobody is in flight
    /// for it and every one of `listeners` asked for it after its last
    /// transmission. Source symbols need no encoding on this side (a
    /// fountain code's repair symbols do: intermediate symbols per block),
    /// and a receiver that gets all of them decodes nothing; fresh ids only
    /// matter to a receiver that may hold some.
    fn restart_ids_if_unheard(&mut self, item: ItemId, listeners: &[ClientId]) {
        let Some(st) = self.items.get(item.0 as usize) else {
            return;
        };
        let unheard = st.in_flight.is_empty()
            && !listeners.is_empty()
            && listeners.iter().all(|c| {
                (self.clients.get(c)).and_then(|s| s.unheard.get(&item)) == Some(&st.starts)
            });
        if unheard {
            self.items[item.0 as usize].next_esi.fill(0);
        }
    }

    /// Starts a repair transmission of `job`'s symbols, from fresh ids.
    pub(super) fn start_repair(&mut self, now: Instant, job: RepairJob) {
        self.last_was_repair = true;
        let mut plan = Vec::new();
        let lists_ids = self.cfg.code == crate::fec::CodeKind::Exact;
        for (&block, &count) in &job.counts {
            let esis = if lists_ids {
                Esis::List(
                    job.missing
                        .get(&block)
                        .map(|s| s.iter().copied().collect())
                        .unwrap_or_default(),
                )
            } else {
                self.alloc(job.item, block, count)
            };
            plan.push(Segment { block, esis });
        }
        self.begin(now, job.item, AnnounceKind::Repair, plan);
        // The plan goes block by block, sized for the neediest client;
        // every other client's needs go first, the smallest first, so
        // they finish without waiting for the whole of it. The same
        // symbols, in another order.
        let mut wants = job.wants;
        let total = |w: &[(u32, u32)]| w.iter().map(|&(_, n)| u64::from(n)).sum::<u64>();
        wants.sort_by_key(|(_, w)| std::cmp::Reverse(total(w)));
        let item = job.item;
        let ours = |t: &&mut Transmission| t.item == item && t.kind == AnnounceKind::Repair;
        let hasten = self.cfg.hasten && !lists_ids;
        if let Some(t) = self.current.as_mut().filter(ours).filter(|_| hasten) {
            for (_, w) in wants.iter().skip(1) {
                t.hasten_in_order(w);
            }
        }
    }

    /// The most any of `listeners` still needs of block `b`: k for a
    /// newcomer, its last NAK's count for one that holds symbols.
    fn block_need(&self, item: ItemId, b: u32, listeners: &[ClientId]) -> u32 {
        let k = self.items[item.0 as usize].layout.block_symbols(b);
        listeners
            .iter()
            .map(|c| {
                self.clients
                    .get(c)
                    .and_then(|s| s.needs.get(&item))
                    .map_or(k, |n| n.get(&b).copied().unwrap_or(0))
            })
            .max()
            .unwrap_or(k)
    }

    /// Starts an ARM transmission of `item`: K' = the item's rounds of
    /// interleaved symbols up front, grown by the receivers' ARM NAKs.
    fn begin_arm(&mut self, now: Instant, item: ItemId, listeners: &[ClientId]) {
        let st = &self.items[item.0 as usize];
        let (layout, blocks) = (st.layout, st.layout.blocks());
        let bases = st.next_esi.clone();
        let spaces: Vec<u32> = (0..blocks)
            .map(|b| self.cfg.code.symbol_space(layout.block_symbols(b)))
            .collect();
        // Rounds: what the neediest receiver lacks of its neediest block.
        let rounds = (0..blocks)
            .map(|b| self.block_need(item, b, listeners))
            .max()
            .unwrap_or(0);
        let maxseq = blocks * rounds;
        let arm = transmission::ArmTx::new(
            bases,
            spaces,
            maxseq,
            self.cfg.arm,
            self.cfg.arm_initial_rtt,
        );
        for c in listeners {
            self.demand.remove_wait(*c, item);
            self.items[item.0 as usize].in_flight.insert(*c);
        }
        let id = TransmissionId(self.next_tid);
        let t = Transmission::arm(id, item, blocks, arm);
        self.start(now, t);
    }

    /// A push pass goes out in Fcast order, shuffled afresh per pass.
    fn interleave_current(&mut self, item: ItemId) {
        let Some(t) = self.current.as_mut().filter(|t| t.item == item) else {
            return;
        };
        let Some(st) = self.items.get(item.0 as usize) else {
            return;
        };
        let seed = self.cfg.seed ^ (t.id.0 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let span = self.cfg.push_span_bytes;
        let pps = 1_000_000_000 / self.cfg.packet_interval.as_nanos().max(1) as u64;
        let spool = self.cfg.push_spool_bytes;
        let cache = (self.push_encoders.take()).unwrap_or_else(|| {
            encoders::EncoderCache::new(span, pps)
                .with_spool(spool)
                .offloading(self.cfg.prepare_jobs)
                .for_epoch(self.cfg.session.0 as u64)
        });
        t.interleave(&st.layout, span, crate::rng::Rng::new(seed), cache);
    }

    fn begin(&mut self, now: Instant, item: ItemId, kind: AnnounceKind, plan: Vec<Segment>) {
        let id = TransmissionId(self.next_tid);
        let t = Transmission::new(id, item, kind, plan);
        self.start(now, t);
    }

    fn start(&mut self, now: Instant, t: Transmission) {
        let (id, item, kind) = (t.id, t.item, t.kind);
        self.next_tid += 1;
        if let Some(st) = self.items.get_mut(item.0 as usize) {
            st.starts += 1;
        }
        if kind != AnnounceKind::Repair {
            self.demand.mark_sent(item, t.total as u64);
        }
        self.stats.transmissions += 1;
        if kind == AnnounceKind::Repair {
            self.stats.repair_transmissions += 1;
        }
        self.events.push_back(ServerEvent::TransmissionStarted {
            id,
            item,
            repair: kind == AnnounceKind::Repair,
            packets: t.total,
        });
        let a = self.announce(&t, kind);
        self.outbox.push_back(Transmit::Announce(a));
        if t.finished() {
            let end = self.announce(&t, AnnounceKind::End);
            self.outbox.push_back(Transmit::Announce(end));
        } else {
            self.current = Some(t);
        }
        // The pacing carries over from the last transmission unless the
        // link idled ([`pacing`]).
        self.pacer.start(now);
    }
}
