//! The server state machine: catalogue, demand, scheduling, transmissions,
//! NAK handling and per-client loss estimates, with no I/O.
//!
//! Call order for a driver (the simulator, the tokio layer, the harness):
//! feed inputs with [`Server::handle_connect`], [`Server::handle_client_msg`]
//! and [`Server::handle_disconnect`], then drain [`Server::poll_transmit`]
//! until it returns `None`, read [`Server::poll_event`], and wake up again
//! at [`Server::poll_timeout`] (pacing) to drain once more. Block bytes come
//! from the driver's [`BlockSource`] only while a block is being sent.

mod carry;
pub use carry::ResumePoint;
pub mod config;
mod early;
pub mod encoders;
mod fcast;
mod hosts;
mod inspect;
mod jobs;
pub mod lag;
mod pacing;
pub mod preempt;
mod rekey;
mod reports;
mod sends;
pub mod spool;
pub mod transmission;
mod window;

pub use config::{
    BlockSource, ClientSummary, IdleFec, ItemInfo, NoPayload, ServerConfig, ServerEvent,
    ServerStats, SourceError, Transmit,
};

use crate::fec::layout::Layout;
use crate::hash::FastMap;
use crate::sched::{DemandTable, Scheduler};
use crate::wire::{AnnounceKind, AnnounceRepr, FecParams, ServerMsg};
use crate::{ClientId, Instant, ItemId, TransmissionId};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Duration;
use transmission::Transmission;

/// Errors building a server: each names the setting or item at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerError {
    /// The symbol size is odd or out of range.
    #[error("symbol size {0} must be even, 16..=9000")]
    SymbolSize(u16),
    /// The largest block is zero or beyond what the code can encode.
    #[error("block size {got} out of 1..={max} for {code}")]
    BlockSize {
        /// Asked for.
        got: u32,
        /// The code's limit.
        max: u32,
        /// The code.
        code: &'static str,
    },
    /// The NAK window's lower bound is above its upper bound.
    #[error("NAK window lower bound above upper")]
    NakWindow,
    /// The data rate is zero, or too small or large to pace packets by.
    #[error("rate {0} bit/s cannot pace packets (need 8 kbit/s to 1 Tbit/s)")]
    Rate(u64),
    /// An item's size cannot be laid out in blocks.
    #[error("{name}: {source}")]
    Layout {
        /// The item.
        name: String,
        /// Why.
        source: crate::fec::layout::LayoutError,
    },
    /// An item's block hashes do not match its layout.
    #[error("{0}: needs one hash per block")]
    BlockHashes(String),
    /// A push pack's members could not be read to hash it (the read
    /// error's text: this enum is compared and cloned, an I/O error is
    /// neither).
    #[error("packing small files: {0}")]
    Pack(String),
    /// More items than one push catalogue can name.
    #[error("{got} files: a push catalogue names at most {max}")]
    TooManyItems {
        /// Items offered.
        got: usize,
        /// The catalogue's limit.
        max: u32,
    },
    /// A catalogue too large for its pieces to be counted on the wire.
    #[error("the catalogue takes {got} pieces: at most {max}")]
    TooManyPieces {
        /// Pieces it takes.
        got: usize,
        /// The wire's limit.
        max: u32,
    },
}

struct ItemState {
    info: ItemInfo,
    /// The item's FEC parameters ([`ServerConfig::item_fec`]).
    fec: FecParams,
    layout: Layout,
    /// Next fresh symbol id per block.
    next_esi: Vec<u32>,
    /// Transmissions of the item started so far (scheduled and repair):
    /// a client asked for it at `starts == n` has heard none started since.
    starts: u64,
    /// Clients that were sent the item and have not reported it done.
    in_flight: BTreeSet<ClientId>,
    /// Clients that asked for it and wait for room in their request
    /// window ([`window`]).
    queued: BTreeSet<ClientId>,
    failed: Option<String>,
}

#[derive(Default)]
struct ClientState {
    requested: BTreeSet<ItemId>,
    done: BTreeSet<ItemId>,
    received: u64,
    expected: u64,
    naks: u64,
    /// Last known need per block, per item (from NAKs).
    needs: FastMap<ItemId, BTreeMap<u32, u32>>,
    complete: bool,
    /// An early loss report on a transmission still on air (received,
    /// expected so far), counted until that transmission's own report.
    early: Option<(TransmissionId, u32, u32)>,
    /// The packets its last early report on each live send (on air or put
    /// aside) rested on: at most two entries (`early::on_loss_report`).
    live_reports: Vec<(TransmissionId, u32)>,
    /// Short-block hints taken on a send ([`early::max_hints`]).
    hints: (TransmissionId, u32),
    /// Blocks held of items about to be requested (a resuming client's
    /// `Have`): the item's hash they belong to and the bitmap.
    haves: FastMap<ItemId, ([u8; 32], Vec<u8>)>,
    /// Symbols asked for in NAKs so far, per item (the repair budget).
    asked: FastMap<ItemId, u64>,
    /// Transmissions of an item in a row that ended without its report
    /// on any of them, per item (the repair budget's other half: what a
    /// silent client makes the server send again).
    unreported: FastMap<ItemId, u32>,
    /// It was welcomed (given the session key): only such clients are
    /// offered the next key.
    welcomed: bool,
    /// Its address, if the driver gave one, and what the server remembers
    /// of that host's loss ([`hosts`]).
    peer: Option<std::net::IpAddr>,
    prior: hosts::Tally,
    /// Items it asked for while they were not on air, with the item's
    /// [`ItemState::starts`] then: while that count has not moved, it
    /// cannot hold a symbol of the item.
    unheard: FastMap<ItemId, u64>,
    /// How late its reports come ([`lag`]).
    lag: lag::ReportLag,
    /// Items it asked for that wait for room in its window, in the order
    /// asked (an item that joined a send meanwhile is skipped: it is no
    /// longer in the item's `queued`), and the items in it ([`window`]).
    backlog: VecDeque<ItemId>,
    open: BTreeSet<ItemId>,
    /// Items it holds whole and is checking or putting in place: it said
    /// so with a NAK that needs nothing, and owes its done report (or a
    /// NAK for a block that failed). No report wait is set on it for
    /// them (`reports`, `client::placing`).
    settling: BTreeSet<ItemId>,
}

/// Packets behind a loss estimate before it may size a loss tier of its
/// own (at 5% loss, 256 packets put the estimate within about 1.4
/// points).
const TIER_SAMPLE: f64 = 256.0;

impl ClientState {
    /// Its estimated loss: its own reports, after its host's record.
    fn loss(&self) -> f64 {
        self.loss_sample().0
    }

    /// Its estimated loss and the packets behind the estimate.
    fn loss_sample(&self) -> (f64, f64) {
        let (r, e) = self.early.map_or((0, 0), |(_, r, e)| (r as u64, e as u64));
        let (received, expected) = (self.received + r, self.expected + e);
        let lost = self.prior.lost + expected.saturating_sub(received.min(expected)) as f64;
        let expected = self.prior.expected + expected as f64;
        if expected <= 0.0 {
            (0.0, 0.0)
        } else {
            ((lost / expected).clamp(0.0, 1.0), expected)
        }
    }

    /// Its loss for choosing loss tiers: `unknown` until an estimate
    /// rests on [`TIER_SAMPLE`] packets (a send's plan takes such a
    /// receiver at the lossiest tier, so it never sizes a tier for itself;
    /// early-report growth at the loss the send was sized for).
    fn tier_loss(&self, unknown: f64) -> f64 {
        match self.loss_sample() {
            (p, n) if n >= TIER_SAMPLE => p,
            _ => unknown,
        }
    }
}

/// A repair waiting for the channel.
struct RepairJob {
    item: ItemId,
    counts: BTreeMap<u32, u32>,
    missing: BTreeMap<u32, BTreeSet<u32>>,
    /// Each client's (block, symbols) asked for, its last NAK's: the
    /// repair sends the smaller needs first ([`Transmission::hasten`]).
    wants: Vec<(ClientId, Vec<(u32, u32)>)>,
}

impl RepairJob {
    /// Packets it will send (`lists`: the exact code's listed ids).
    fn packets(&self, lists: bool) -> u64 {
        match lists {
            true => self.missing.values().map(|m| m.len() as u64).sum(),
            false => self.counts.values().map(|&c| c as u64).sum(),
        }
    }
}

/// The repository server's protocol state machine.
pub struct Server {
    cfg: ServerConfig,
    items: Vec<ItemState>,
    /// Push passes: the odds each block gets (the set's best odds,
    /// [`crate::policy::odds::best_set_odds`], G-th root), and the loss
    /// they are for.
    pass_odds: Option<(f64, f64)>,
    names: HashMap<String, ItemId>,
    clients: FastMap<ClientId, ClientState>,
    /// Loss reported by past connections, per address.
    hosts: hosts::HostLoss,
    next_client: u32,
    demand: DemandTable,
    scheduler: Box<dyn Scheduler>,
    repairs: VecDeque<RepairJob>,
    /// The last transmission started was a repair (for shared turns).
    last_was_repair: bool,
    current: Option<Transmission>,
    /// A scheduled send another transmission interrupted ([`preempt`]).
    suspended: Option<Transmission>,
    /// What [`preempt`] last weighed: the send on air, the demand's change
    /// count, the send's receivers, the NAKs and item-done reports so far
    /// and the repairs queued then.
    preempt_checked: Option<(TransmissionId, u64, usize, u64, u64, usize)>,
    /// Push mode: encoders kept between passes (handed to each pass).
    push_encoders: Option<encoders::EncoderCache>,
    /// Request mode: recent blocks' encoders, for every transmission
    /// ([`ServerConfig::encoder_cache_bytes`]; None: one at a time).
    encoders: Option<encoders::EncoderCache>,
    /// A session key offered to clients and not yet in use (its epoch).
    next_key: Option<(u8, crate::auth::SessionKey)>,
    next_tid: u32,
    outbox: VecDeque<Transmit>,
    events: VecDeque<ServerEvent>,
    pacer: pacing::Pacer,
    /// The batching hold keeps every waiting item back until this time,
    /// decided when the demand table's change counter had this value.
    hold_until: Option<(Instant, u64)>,
    /// Since when the link has been idle for the hold.
    held_since: Option<Instant>,
    /// Since when the server has had work without a break (the hold's
    /// gate, [`ServerConfig::batch_hold_after`]).
    loaded_since: Option<Instant>,
    nak_window_max: Duration,
    naks_this_round: u32,
    stats: ServerStats,
    /// Reports owed: (client, item) -> the transmission they answer.
    awaiting: FastMap<(ClientId, ItemId), TransmissionId>,
    report_deadlines: std::collections::BinaryHeap<
        std::cmp::Reverse<(Instant, ClientId, ItemId, TransmissionId)>,
    >,
    /// When recent transmissions ended, for the lateness of reports.
    ends: lag::Ends,
}

impl Server {
    /// A server over `items` (item ids are their indices).
    pub fn new(mut cfg: ServerConfig, items: Vec<ItemInfo>) -> Result<Server, ServerError> {
        cfg.repace()?;
        if cfg.symbol_size < crate::wire::manifest::MIN_SYMBOL_SIZE
            || cfg.symbol_size % 2 != 0
            || cfg.symbol_size as usize > crate::wire::data::MAX_SYMBOL_SIZE
        {
            return Err(ServerError::SymbolSize(cfg.symbol_size));
        }
        if cfg.max_block_symbols == 0 || cfg.max_block_symbols > cfg.code.max_block_symbols() {
            return Err(ServerError::BlockSize {
                got: cfg.max_block_symbols,
                max: cfg.code.max_block_symbols(),
                code: cfg.code.name(),
            });
        }
        if cfg.nak_window.0 > cfg.nak_window.1 {
            return Err(ServerError::NakWindow);
        }
        if cfg.packet_interval.is_zero() {
            return Err(ServerError::Rate(0));
        }
        let mut states = Vec::with_capacity(items.len());
        let mut names = HashMap::new();
        for (i, info) in items.into_iter().enumerate() {
            let fec = cfg.item_fec(info.size);
            let layout = Layout::new(info.size, &fec).map_err(|source| ServerError::Layout {
                name: info.name.clone(),
                source,
            })?;
            if cfg.payloads && info.block_hashes.len() != layout.blocks() as usize {
                return Err(ServerError::BlockHashes(info.name.clone()));
            }
            names.insert(info.name.clone(), ItemId(i as u32));
            states.push(ItemState {
                next_esi: vec![0; layout.blocks() as usize],
                starts: 0,
                info,
                fec,
                layout,
                in_flight: BTreeSet::new(),
                queued: BTreeSet::new(),
                failed: None,
            });
        }
        let pass_odds = cfg
            .push_pass_odds
            .filter(|_| cfg.scheduler.is_push())
            .map(|p| {
                let mut sizes: BTreeMap<u32, u64> = BTreeMap::new();
                for s in &states {
                    for b in 0..s.layout.blocks() {
                        *sizes.entry(s.layout.block_symbols(b)).or_default() += 1;
                    }
                }
                let g: u64 = sizes.values().sum();
                let sizes: Vec<(u32, u64)> = sizes.into_iter().collect();
                let q = crate::policy::odds::best_set_odds(&sizes, p.loss, p.odds);
                (q.powf((g.max(1) as f64).recip()), p.loss)
            });
        let scheduler = cfg.scheduler.build();
        let mut demand = DemandTable::new(states.len() as u32, scheduler.q_key());
        let ties = cfg.size_ties && !cfg.scheduler.is_push();
        let pacer = pacing::Pacer::new(&cfg);
        // Each item's one-copy link time: its packets by their bytes.
        let link = |s: &ItemState| pacer.link_ns(s.layout.symbol_size(), s.layout.symbols());
        demand.set_link_times(states.iter().map(link).collect(), ties);
        Ok(Server {
            nak_window_max: cfg.nak_window.1,
            items: states,
            pass_odds,
            names,
            clients: FastMap::default(),
            hosts: Default::default(),
            next_client: 0,
            demand,
            scheduler,
            repairs: VecDeque::new(),
            last_was_repair: false,
            current: None,
            suspended: None,
            preempt_checked: None,
            push_encoders: None,
            encoders: (cfg.encoder_cache_bytes > 0 && !cfg.scheduler.is_push()).then(|| {
                encoders::EncoderCache::new(cfg.encoder_cache_bytes, 0)
                    .offloading(cfg.prepare_jobs)
                    .for_epoch(cfg.session.0 as u64)
            }),
            next_key: None,
            next_tid: 1,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            pacer,
            hold_until: None,
            held_since: None,
            loaded_since: None,
            naks_this_round: 0,
            stats: ServerStats::default(),
            awaiting: FastMap::default(),
            report_deadlines: Default::default(),
            ends: Default::default(),
            cfg,
        })
    }

    /// A new request connection opened; returns the id for its messages.
    pub fn handle_connect(&mut self, now: Instant) -> ClientId {
        self.handle_connect_from(now, None)
    }

    /// A new request connection opened from `peer`: its loss estimate
    /// starts from what connections from that address reported before
    /// (`hosts`).
    pub fn handle_connect_from(
        &mut self,
        _now: Instant,
        peer: Option<std::net::IpAddr>,
    ) -> ClientId {
        let id = ClientId(self.next_client);
        self.next_client += 1;
        let state = ClientState {
            peer,
            prior: self.hosts.prior(peer),
            ..ClientState::default()
        };
        self.clients.insert(id, state);
        id
    }

    /// The client's connection closed: forget its demand (its loss goes
    /// to its host's record).
    pub fn handle_disconnect(&mut self, _now: Instant, client: ClientId) {
        if let Some(c) = self.clients.remove(&client) {
            self.hosts.record(c.peer, c.received, c.expected);
            for item in c.backlog {
                self.items[item.0 as usize].queued.remove(&client);
            }
        }
        self.demand.remove_client(client);
        for it in &mut self.items {
            it.in_flight.remove(&client);
        }
        if self.cfg.scheduler.is_push() || !self.cfg.drop_orphans {
            return;
        }
        // Work for nobody is dropped: repairs of items no connected client
        // is receiving, and a transmission nobody listens to or waits for.
        let before = self.repairs.len();
        let items = &self.items;
        self.repairs
            .retain(|j| !items[j.item.0 as usize].in_flight.is_empty());
        self.stats.cancelled += (before - self.repairs.len()) as u64;
        for t in [self.current.as_mut(), self.suspended.as_mut()]
            .into_iter()
            .flatten()
        {
            let idle =
                self.items[t.item.0 as usize].in_flight.is_empty() && self.demand.r(t.item) == 0;
            if idle && !t.finished() {
                t.cancel();
                self.stats.cancelled += 1;
            }
        }
    }

    /// The NAK window a transmission announces to `waiting` receivers:
    /// the whole window from [`ServerConfig::nak_spread_listeners`] of
    /// them on, a share of it from the same start for fewer.
    fn nak_window_for(&self, waiting: usize) -> (Duration, Duration) {
        let (lo, mut hi) = (self.cfg.nak_window.0, self.nak_window_max);
        if let Some(n) = self.cfg.nak_spread_listeners.filter(|n| *n > 0) {
            let share = (waiting.max(1) as f64 / n as f64).min(1.0);
            hi = lo + hi.saturating_sub(lo).mul_f64(share);
        }
        (lo, hi)
    }

    fn announce(&self, t: &Transmission, kind: AnnounceKind) -> AnnounceRepr {
        let item = self.items.get(t.item.0 as usize);
        let waiting = item.map_or(0, |i| i.in_flight.len());
        let symbol = item.map_or(usize::MAX, |i| usize::from(i.layout.symbol_size()));
        let (lo, hi) = self.nak_window_for(waiting);
        AnnounceRepr {
            session: self.cfg.session,
            transmission: t.id,
            item: t.item,
            kind,
            first_block: t.first_block,
            block_count: t.block_count,
            total_packets: t.total,
            duration_us: (self.pacer.slot(symbol) * t.total)
                .as_micros()
                .min(u64::MAX as u128) as u64,
            nak_window_min_us: lo.as_micros().min(u32::MAX as u128) as u32,
            nak_window_max_us: hi.as_micros().min(u32::MAX as u128) as u32,
        }
    }

    /// The next thing to send, if any is due at `now`. Call until `None`
    /// after every `handle_*` call and at every [`Server::poll_timeout`].
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        source: &mut dyn BlockSource,
    ) -> Option<Transmit> {
        if let Some(t) = self.outbox.pop_front() {
            return Some(t);
        }
        if self.current.is_none() {
            self.start_next(now);
            if let Some(t) = self.outbox.pop_front() {
                return Some(t);
            }
            // Nothing to send at `now`: the link idles.
            if self.current.is_none() {
                self.pacer.set_idle();
            }
        }
        if !self.pacer.ready(now) {
            return None;
        }
        if self.maybe_preempt(now) {
            if let Some(t) = self.outbox.pop_front() {
                return Some(t);
            }
        }
        let cur = self.current.as_mut()?;
        let st = self.items.get(cur.item.0 as usize)?;
        let mut checked = CheckedSource {
            inner: source,
            layout: &st.layout,
            hashes: &st.info.block_hashes,
        };
        let src = if self.cfg.payloads {
            Some(&mut checked as &mut dyn BlockSource)
        } else {
            None
        };
        let iv = self.cfg.packet_interval;
        let symbol_len = usize::from(st.layout.symbol_size());
        let kept = self.encoders.as_mut();
        let next = cur.next(
            now,
            iv,
            self.cfg.session,
            &st.layout,
            self.cfg.code,
            src,
            kept,
        );
        match next {
            Ok(Some(pkt)) => {
                self.pacer.take_symbol(now, symbol_len);
                self.stats.data_packets += 1;
                self.stats.symbol_bytes += symbol_len as u64;
                if cur.kind == AnnounceKind::Repair {
                    self.stats.repair_packets += 1;
                }
                if cur.finished() {
                    self.finish_current(now);
                }
                Some(Transmit::Data(pkt))
            }
            Ok(None) => {
                self.finish_current(now);
                self.outbox.pop_front()
            }
            Err(e) => {
                let item = cur.item;
                self.finish_current(now);
                self.fail_item(now, item, e.0.to_string());
                self.outbox.pop_front()
            }
        }
    }

    /// Moves the pacing on by one packet slot: for each data packet, and
    /// for each datagram the endpoint adds to the data channel (a signed
    /// symbol batch), so the configured rate holds for all of them.
    pub fn take_slot(&mut self, now: Instant) {
        self.pacer.take(now);
    }

    /// When the server next wants [`Server::poll_transmit`] called (pacing),
    /// or `None` when it has nothing to send until an input arrives.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.outbox.is_empty() {
            return Some(Instant::ZERO);
        }
        let busy = self.current.is_some()
            || self.suspended.is_some()
            || !self.repairs.is_empty()
            || self.demand.active().next().is_some()
            || self.cfg.scheduler.is_push();
        let report = self.report_deadlines.peek().map(|r| r.0.0);
        // Held back: the next decision is due when the first hold ends,
        // unless somebody started or stopped waiting since.
        let send = match self.hold_until {
            Some((until, changes))
                if self.current.is_none()
                    && self.repairs.is_empty()
                    && changes == self.demand.changes() =>
            {
                until.max(self.pacer.next_send())
            }
            _ => self.pacer.next_send(),
        };
        [busy.then_some(send), report].into_iter().flatten().min()
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// Events not yet taken (a driver must take them: they are kept
    /// until it does).
    pub fn events_waiting(&self) -> usize {
        self.events.len()
    }

    /// Timers: pacing (handled by `poll_transmit`) and report deadlines. A
    /// receiver that has sent neither a NAK nor item-done for a transmission
    /// by its deadline (it may have missed the transmission altogether: the
    /// announcements are multicast too) gets the item rescheduled. An early
    /// or repeated call is a harmless no-op.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(std::cmp::Reverse((due, c, item, tid))) =
            self.report_deadlines.peek().copied()
        {
            if due > now {
                break;
            }
            self.report_deadlines.pop();
            if self.awaiting.get(&(c, item)) != Some(&tid) {
                continue;
            }
            // Its reports have come later since this wait was set (the
            // study's settings keep the wait set at the end).
            let recheck = self.cfg.report_timeout_max.is_some();
            let later = recheck.then(|| self.report_due(c, tid, now)).flatten();
            if let Some(later) = later.filter(|&d| d > now) {
                self.report_deadlines
                    .push(std::cmp::Reverse((later, c, item, tid)));
                continue;
            }
            // A newer transmission of the item is on air: the receiver
            // listens to it instead of reporting on this one, and owes its
            // report when that one ends.
            if self
                .unfinished_sends()
                .any(|t| t.item == item && t.id.0 > tid.0)
            {
                continue;
            }
            self.awaiting.remove(&(c, item));
            if self.items[item.0 as usize].in_flight.remove(&c) {
                self.stats.report_timeouts += 1;
                if let Some(sends) = self.unreported_past_budget(c, item) {
                    self.stats.unreported_failures += 1;
                    self.refuse(
                        now,
                        c,
                        item,
                        format!(
                            "sent {sends} times in a row with no report from this client \
                             (does the multicast group reach it?)"
                        ),
                    );
                } else {
                    self.demand.add_wait(c, item, now);
                }
            }
        }
    }

    fn finish_current(&mut self, now: Instant) {
        if let Some(mut t) = self.current.take() {
            // ARM allocates ids as it goes: the next transmission of the item
            // starts after the last round sent, so no id is repeated to a
            // receiver that may hold it ([`Self::restart_ids_if_unheard`]).
            if let Some(arm) = &t.arm {
                self.items[t.item.0 as usize].next_esi = arm.next_bases(t.sent());
            }
            // Every receiver still in flight owes a report for this item,
            // by the fixed wait or, if its reports have come later, its own.
            self.ends.ended(t.id, now);
            for &c in &self.items[t.item.0 as usize].in_flight {
                if (self.clients.get(&c)).is_some_and(|s| s.settling.contains(&t.item)) {
                    continue;
                }
                let due = self.report_due(c, t.id, now).unwrap_or(now);
                self.awaiting.insert((c, t.item), t.id);
                self.report_deadlines
                    .push(std::cmp::Reverse((due, c, t.item, t.id)));
            }
            // Adapt first: clients draw their NAK delay from the window the
            // end announcement carries.
            self.adapt_nak_window();
            let a = self.announce(&t, AnnounceKind::End);
            self.outbox.push_back(Transmit::Announce(a));
            if let Some(c) = t.take_encoders() {
                self.push_encoders = Some(c);
            }
        }
    }

    /// When client `c`'s report on ended transmission `t` is due: its end
    /// plus the NAK window and the report timeout, or later for a client
    /// whose reports come later ([`lag`]).
    fn report_due(&self, c: ClientId, t: TransmissionId, now: Instant) -> Option<Instant> {
        let floor = self.nak_window_max + self.cfg.report_timeout;
        let wait = (self.clients.get(&c))
            .map_or(floor, |s| s.lag.wait(floor, self.cfg.report_timeout_max));
        let since = self.ends.since(t, now)?;
        Some(now.saturating_sub(since) + wait)
    }

    /// Widens the NAK window when NAK load per transmission is high, and
    /// narrows it back towards the base case when it is low.
    fn adapt_nak_window(&mut self) {
        let base = self.cfg.nak_window.1;
        let th = self.cfg.nak_widen_threshold;
        if th > 0 && self.naks_this_round > th {
            self.nak_window_max = (self.nak_window_max * 2).min(self.cfg.nak_window_cap.max(base));
        } else if self.naks_this_round <= th / 2 {
            self.nak_window_max = (self.nak_window_max / 2).max(base);
        }
        self.naks_this_round = 0;
    }

    fn fail_item(&mut self, now: Instant, item: ItemId, reason: String) {
        let Some(st) = self.items.get_mut(item.0 as usize) else {
            return;
        };
        st.failed = Some(reason.clone());
        st.in_flight.clear();
        st.queued.clear();
        let name = st.info.name.clone();
        for c in self.demand.waiters(item) {
            self.demand.remove_wait(c, item);
        }
        for (id, c) in &mut self.clients {
            if c.requested.contains(&item) && !c.done.contains(&item) {
                self.outbox.push_back(Transmit::Control(
                    *id,
                    ServerMsg::Failed {
                        item: Some(item),
                        name: name.clone(),
                        reason: reason.clone(),
                    },
                ));
            }
        }
        self.repairs.retain(|r| r.item != item);
        self.events
            .push_back(ServerEvent::ItemFailed { item, reason });
        let open: Vec<ClientId> = (self.clients.iter())
            .filter(|(_, c)| c.open.contains(&item))
            .map(|(&id, _)| id)
            .collect();
        for c in open {
            self.close_in_window(now, c, item);
        }
    }
}

/// The driver's source with every whole block it reads checked against
/// the block's hash from the scan: a file changed on disk (in place, even
/// with its size and time restored) fails its item with a reason instead
/// of sending symbols no client can verify.
struct CheckedSource<'a> {
    inner: &'a mut dyn BlockSource,
    layout: &'a Layout,
    hashes: &'a [[u8; 32]],
}

impl BlockSource for CheckedSource<'_> {
    fn read(
        &mut self,
        item: ItemId,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), SourceError> {
        let start = out.len();
        self.inner.read(item, offset, len, out)?;
        let block = self.layout.block_of(offset);
        let whole =
            self.layout.block_offset(block) == offset && self.layout.block_len(block) == len as u64;
        match self.hashes.get(block as usize) {
            Some(h) if whole && out.len() >= start + len => {
                if blake3::hash(&out[start..start + len]).as_bytes() != h {
                    return Err(SourceError::Changed {
                        path: format!("item {} block {block}", item.0),
                    });
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn spool(&mut self) -> Option<&mut dyn spool::SymbolSpool> {
        self.inner.spool()
    }
}
