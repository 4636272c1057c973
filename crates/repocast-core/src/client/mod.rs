//! The client state machine: request, listen, decode, verify, report.
//!
//! Call order for a driver: [`Client::request`] once, then feed every
//! control message ([`Client::handle_server_msg`]), announcement
//! ([`Client::handle_announce`]) and data packet ([`Client::handle_data`]);
//! after each call drain [`Client::poll_transmit`] (messages for the request
//! connection) and [`Client::poll_event`]; call [`Client::handle_timeout`]
//! at [`Client::poll_timeout`]. With payloads, each verified block comes out
//! as [`ClientEvent::BlockVerified`] (write it at its offset), and once all
//! are in, [`ClientEvent::ItemAssembled`] asks the driver to check the whole
//! item's hash and answer with [`Client::confirm_item`].
//!
//! In push mode ([`Client::subscribe`] instead of `request`) there is no
//! request connection: the client listens to the carousel, never NAKs, and
//! says [`ClientEvent::Done`] itself.
//!
//! This module holds the request, control and timer side; `listening` the
//! announcements and the transmission listened to; `receive` holds
//! the data path (decoders, ARM probes, verified blocks) and `spill` the
//! memory bound (drivers may evict partial blocks and restore them).

pub mod decode;
pub mod item;
mod listening;
mod placing;
mod push;
mod receive;
mod reopen;
pub mod spill;
mod table;

pub use push::Partial;

use crate::fec::layout::Layout;
use crate::rng::Rng;
use crate::wire::{AnnounceKind, AnnounceRepr, ClientMsg, DataRepr, ItemSel, NakRepr, ServerMsg};
use crate::{Instant, ItemId, SessionId, TransmissionId};
use item::ItemPhase;
use std::collections::VecDeque;
use std::time::Duration;

/// Client settings.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Seed for NAK delays and the accounting decode model.
    pub seed: u64,
    /// Whether packets carry payloads (false: accounting only).
    pub payloads: bool,
    /// Name sent in hello.
    pub name: String,
    /// Access token sent in hello, for a server that requires one
    /// (`serve --tokens`); it travels only inside the TLS connection.
    pub token: Option<String>,
    /// Extra wait past an announced transmission's expected end before the
    /// client treats it as over (its end announcement was lost).
    pub end_grace: Duration,
    /// Send early loss reports on long transmissions
    /// ([`ClientMsg::LossReport`], after [`LOSS_REPORT_AFTER`] packets of
    /// one at least [`LOSS_REPORT_MIN_TOTAL`] long, then on twice as many
    /// each time), so a server sizing redundancy by loss can resize the
    /// rest of it. Off by default: the simulator's receivers report only at
    /// the end, as in the study.
    pub loss_reports: bool,
    /// Most blocks out at once as decode jobs for the driver to run off
    /// its receiving path (`decode`); 0: every block is decoded where its
    /// last symbol arrives. A driver that sets it must run the jobs.
    pub decode_jobs: usize,
    /// Fail an item once more than [`corrupt_limit`] of its decoded blocks
    /// failed their hash (a listener that drops out: push has no repair
    /// budget to end it). Off: keep collecting (request mode, where the
    /// server's repair budget ends it; a satellite listener, which waits
    /// an attack out).
    pub fail_on_forgery: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            seed: 1,
            payloads: true,
            name: "client".into(),
            token: None,
            end_grace: Duration::from_millis(200),
            loss_reports: false,
            decode_jobs: 0,
            fail_on_forgery: false,
        }
    }
}

/// What the client tells its driver.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// The server's welcome: where its multicast channels are.
    Welcome(crate::wire::control::Channels),
    /// The manifest of a requested item arrived.
    Manifest(crate::wire::ManifestEntry),
    /// A block decoded and matched its hash: write `data` at `offset`.
    BlockVerified {
        item: ItemId,
        block: u32,
        offset: u64,
        data: Vec<u8>,
    },
    /// Every block is in: check the whole item, then call `confirm_item`.
    ItemAssembled(ItemId),
    /// The item is complete and verified.
    ItemComplete(ItemId),
    /// The item failed.
    ItemFailed {
        item: Option<ItemId>,
        name: String,
        reason: String,
    },
    /// The server confirmed the whole request complete.
    Done,
}

/// Counters for metrics and results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClientStats {
    /// Data packets received for items it listens to.
    pub useful: u64,
    /// Data packets it could not use (duplicates, finished blocks,
    /// unrequested items, other sessions, transmissions it skips).
    pub useless: u64,
    /// NAKs sent.
    pub naks: u64,
    /// Short-block hints sent (NAKs on a send still on air).
    pub hints: u64,
    /// Blocks whose decoded bytes failed their hash.
    pub corrupt_blocks: u64,
    /// Of those, blocks whose symbols were screened and verified with one
    /// share left out.
    pub screened_blocks: u64,
    /// And screenings in which no share left out gave the block (more
    /// than one bad symbol): started over.
    pub screens_failed: u64,
    /// Transmissions taken back up after they seemed to end (another
    /// transmission interrupted them: `reopen`).
    pub reopened: u64,
    /// Blocks decoded and verified in the driver's jobs (`decode`), off
    /// the receiving path.
    #[serde(default)]
    pub decode_jobs: u64,
    /// Of the NAKs, reports that needed nothing because the item was held
    /// whole and still being put in place (`placing`).
    #[serde(default)]
    pub placing_reports: u64,
    /// Transmissions of an item it receives whose end it heard but not
    /// their start: reported on from their end (`listening`).
    #[serde(default)]
    pub missed_starts: u64,
}

/// The client protocol state machine.
pub struct Client {
    cfg: ClientConfig,
    rng: Rng,
    session: Option<SessionId>,
    items: table::ItemTable,
    pending_names: usize,
    outbox: VecDeque<ClientMsg>,
    events: VecDeque<ClientEvent>,
    nak_window: (Duration, Duration),
    last_announce: Option<AnnounceRepr>,
    /// Data that arrived before the manifest that would make it useful
    /// (the announcement can overtake the manifest), replayed on arrival.
    early: VecDeque<DataRepr>,
    /// Items whose early data waits to be replayed.
    replay: Vec<ItemId>,
    /// Symbols of evicted blocks, for the driver's spill (see `spill`).
    deferred: Vec<spill::Deferred>,
    /// The transmission last heard on the data channel.
    on_air: Option<(ItemId, TransmissionId)>,
    stats: ClientStats,
    done: bool,
    /// Push mode: no back channel (see `push`).
    pub(crate) push: bool,
    /// Items that may hold a timer (a transmission listened to, or a NAK
    /// due), ascending: every item that does is here, so timers and
    /// announcements need not walk the whole request. With each, its slot
    /// in the item table (no search per visit).
    timed: Vec<(ItemId, u32)>,
    /// Cached earliest deadline; `None` when it must be recomputed. Every
    /// change to a listening or report timer clears it.
    deadline: std::cell::Cell<Option<Option<Instant>>>,
    /// Decode jobs not yet handed out (`decode`).
    decode_jobs: VecDeque<decode::DecodeJob>,
    /// Decode jobs away (queued or handed out), and the last job's id.
    jobs_away: usize,
    next_job: u64,
}

/// Most data packets held while waiting for manifests.
pub const EARLY_PACKETS: usize = 4096;

/// How many decoded blocks of an item of `blocks` blocks may fail their
/// hash before the item fails: 3 a block, and 8 more. Only forged (or
/// corrupt) symbols make a block fail its hash, and each failure throws
/// the block's symbols away, so a steady stream of forged symbols on the
/// data group (anyone can send them in push mode, any authorised client
/// in request mode, unless the sender signs its symbols) would otherwise
/// keep a receiver collecting for ever. Where one block's decode in three
/// comes out clean (one forged symbol in about a thousand, at k = 1,000),
/// an item still verifies with high odds within this.
pub fn corrupt_limit(blocks: u32) -> u32 {
    blocks.saturating_mul(3).saturating_add(8)
}
/// Packets of a transmission (sent since the first one heard) after which
/// an early loss report goes out: enough to estimate a loss of a few
/// percent to within one percentage point.
pub const LOSS_REPORT_AFTER: u32 = 1024;
/// Shortest transmission worth an early loss report (most of it must
/// still be ahead when the report arrives).
pub const LOSS_REPORT_MIN_TOTAL: u32 = 4 * LOSS_REPORT_AFTER;
/// Packets of one block in a row after which a send moving on to another
/// block has left it (sent block after block, not interleaved).
pub const HINT_RUN: u32 = 16;
/// Most short-block hints a receiver sends on one transmission of an
/// item of `blocks` blocks: about one per block (with loss in bursts most
/// blocks can end a tier short), never more than 256.
pub fn max_hints(blocks: u32) -> u32 {
    blocks.saturating_add(16).min(256)
}
/// Most blocks one short-block hint names.
pub const HINT_BLOCKS: usize = 4;

impl Client {
    /// A client that has not yet requested anything.
    pub fn new(cfg: ClientConfig) -> Self {
        Client {
            rng: Rng::new(cfg.seed),
            cfg,
            session: None,
            items: table::ItemTable::default(),
            pending_names: 0,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            nak_window: (Duration::from_millis(30), Duration::from_millis(210)),
            last_announce: None,
            early: VecDeque::new(),
            replay: Vec::new(),
            deferred: Vec::new(),
            on_air: None,
            stats: ClientStats::default(),
            done: false,
            push: false,
            timed: Vec::new(),
            deadline: std::cell::Cell::new(None),
            decode_jobs: VecDeque::new(),
            jobs_away: 0,
            next_job: 0,
        }
    }

    /// Says hello and requests `items` (by id or name).
    pub fn request(&mut self, now: Instant, items: Vec<ItemSel>) {
        self.outbox.push_back(ClientMsg::Hello {
            name: self.cfg.name.clone(),
            token: self.cfg.token.clone(),
        });
        self.ask(now, items);
    }

    /// Requests `items` (by id or name) of a server already greeted (the
    /// endpoint says hello itself, and asks once it can hear the groups).
    pub fn ask(&mut self, _now: Instant, items: Vec<ItemSel>) {
        self.items.reserve(items.len());
        for sel in &items {
            match sel {
                ItemSel::Id(id) => {
                    self.items.get_or_insert(*id);
                }
                ItemSel::Name(_) => self.pending_names += 1,
            }
        }
        self.outbox.push_back(ClientMsg::Request { items });
    }

    /// Counters so far.
    pub fn stats(&self) -> ClientStats {
        self.stats
    }

    /// The server's session, once welcomed.
    pub fn session(&self) -> Option<SessionId> {
        self.session
    }

    /// Whether the server confirmed the whole request.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Whether every item is complete or failed (nothing more to wait for).
    pub fn is_finished(&self) -> bool {
        self.pending_names == 0
            && self
                .items
                .values()
                .all(|i| matches!(i.phase, ItemPhase::Complete | ItemPhase::Failed))
    }

    /// Items still being received.
    pub fn outstanding(&self) -> usize {
        self.items
            .values()
            .filter(|i| !matches!(i.phase, ItemPhase::Complete | ItemPhase::Failed))
            .count()
    }

    /// The next message for the request connection.
    pub fn poll_transmit(&mut self) -> Option<ClientMsg> {
        self.outbox.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// Whether a driver has anything to collect after the last input: a
    /// message, an event, or a timer that may have moved. When false,
    /// `poll_transmit`, `poll_event` and `poll_timeout` would return what
    /// they returned before (nothing, nothing, the same deadline), so a
    /// driver handling many receivers may skip them.
    pub fn has_pending(&self) -> bool {
        !self.outbox.is_empty()
            || !self.events.is_empty()
            || !self.replay.is_empty()
            || self.deadline.get().is_none()
    }

    /// The earliest timer: a NAK due, or a transmission's end deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.replay.is_empty() {
            return Some(Instant::ZERO); // early data to replay: due now
        }
        if let Some(d) = self.deadline.get() {
            return d;
        }
        let d = (self.timed.iter())
            .filter_map(|e| self.items.at(e.1))
            .flat_map(|i| {
                let l = i
                    .listening
                    .as_ref()
                    .filter(|l| !l.ended)
                    .map(|l| l.deadline);
                [i.report_due.map(|r| r.0), l]
            })
            .flatten()
            .min();
        self.deadline.set(Some(d));
        d
    }

    /// Marks a block as already held (verified on disk by a resume journal)
    /// so it is neither decoded again nor asked for.
    pub fn resume_block(&mut self, item: ItemId, block: u32) {
        if let Some(it) = self.items.get_mut(&item) {
            if let Some(d) = it.decoded.get_mut(block as usize).filter(|d| !**d) {
                *d = true;
                it.blocks_left -= 1;
                it.decoders[block as usize] = None;
            }
            if it.blocks_left == 0 && it.phase == ItemPhase::Receiving {
                self.assembled(item);
            }
        }
    }

    /// A decoded block of `item` failed its hash (its symbols screened, or
    /// gone): counted, and the item fails once more than [`corrupt_limit`]
    /// have.
    pub(super) fn block_corrupt(&mut self, item: ItemId) {
        self.stats.corrupt_blocks += 1;
        let Some(it) = self.items.get_mut(&item) else {
            return;
        };
        it.corrupt_blocks += 1;
        let n = it.corrupt_blocks;
        if self.cfg.fail_on_forgery && n > corrupt_limit(it.decoded.len() as u32) {
            self.abandon(
                item,
                format!(
                    "{n} decoded blocks failed their hash: forged symbols on the data \
                     group (a sender with --sign-symbols keeps them out)"
                ),
            );
        }
    }

    /// The driver gives up on `item` (its name is unsafe, its file cannot
    /// be written): it fails with `reason` and is no longer received.
    pub fn abandon(&mut self, item: ItemId, reason: String) {
        let Some(it) = self.items.get_mut(&item) else {
            return;
        };
        if matches!(it.phase, ItemPhase::Complete | ItemPhase::Failed) {
            return;
        }
        it.phase = ItemPhase::Failed;
        it.listening = None;
        it.report_due = None;
        it.decoders.clear();
        self.deadline.set(None);
        let name = it
            .manifest
            .as_ref()
            .map(|m| m.name.clone())
            .unwrap_or_default();
        self.events.push_back(ClientEvent::ItemFailed {
            item: Some(item),
            name,
            reason,
        });
        self.push_check_done();
    }

    /// The driver's verdict on an assembled item's whole hash.
    pub fn confirm_item(&mut self, _now: Instant, item: ItemId, verified: bool) {
        let Some(it) = self
            .items
            .get_mut(&item)
            .filter(|i| i.phase == ItemPhase::Assembled)
        else {
            return;
        };
        it.report_due = None;
        if verified {
            it.phase = ItemPhase::Complete;
            let report = it.done_report.take();
            if !self.push {
                self.outbox.extend(report);
            }
            self.events.push_back(ClientEvent::ItemComplete(item));
            self.push_check_done();
        } else {
            let name = it
                .manifest
                .as_ref()
                .map(|m| m.name.clone())
                .unwrap_or_default();
            it.phase = ItemPhase::Failed;
            self.events.push_back(ClientEvent::ItemFailed {
                item: Some(item),
                name,
                reason: "whole-item hash mismatch".into(),
            });
            self.push_check_done();
        }
    }

    /// A control message from the server.
    pub fn handle_server_msg(&mut self, now: Instant, msg: ServerMsg) {
        match msg {
            ServerMsg::Welcome {
                session, channels, ..
            } => {
                self.session = Some(session);
                self.events.push_back(ClientEvent::Welcome(channels));
            }
            // Keys are the endpoint's business.
            ServerMsg::Catalogue { .. } | ServerMsg::Progress { .. } | ServerMsg::Rekey { .. } => {}
            ServerMsg::Manifest {
                entry,
                next_transmission,
            } => self.on_manifest(now, entry, next_transmission),
            ServerMsg::Notify(a) => {
                if self
                    .items
                    .get(&a.item)
                    .is_some_and(|i| i.phase == ItemPhase::Receiving)
                {
                    self.listen(now, &a);
                }
            }
            ServerMsg::Failed { item, name, reason } => {
                match item.and_then(|i| self.items.get_mut(&i)) {
                    // Every block is in and verified: the whole-item check
                    // decides, not a server that gave up waiting for the
                    // done report (a slow disk's finish job holds it).
                    Some(it) if matches!(it.phase, ItemPhase::Assembled | ItemPhase::Complete) => {
                        return;
                    }
                    Some(it) => it.phase = ItemPhase::Failed,
                    None => self.pending_names = self.pending_names.saturating_sub(1),
                }
                self.events
                    .push_back(ClientEvent::ItemFailed { item, name, reason });
            }
            ServerMsg::Done => {
                self.done = true;
                self.events.push_back(ClientEvent::Done);
            }
        }
    }

    fn on_manifest(
        &mut self,
        now: Instant,
        entry: crate::wire::ManifestEntry,
        from: TransmissionId,
    ) {
        let item = entry.item;
        let Some(layout) = self.layout_of(&entry) else {
            return;
        };
        if self.cfg.payloads && entry.block_hashes.len() != layout.blocks() as usize {
            self.events.push_back(ClientEvent::ItemFailed {
                item: Some(item),
                name: entry.name,
                reason: "manifest has the wrong number of block hashes".into(),
            });
            return;
        }
        let it = match self.items.get_mut(&item) {
            Some(it) if it.phase == ItemPhase::Requested => it,
            Some(_) => return,
            None if self.pending_names > 0 => {
                self.pending_names -= 1;
                self.items.get_or_insert(item)
            }
            None => return,
        };
        it.set_manifest(entry.clone(), layout, from);
        self.events.push_back(ClientEvent::Manifest(entry));
        if layout.blocks() == 0 {
            self.assembled(item);
            return;
        }
        // An announcement (and data) that overtook our manifest still count.
        if let Some(a) = self.last_announce.clone() {
            if a.item == item && a.kind != AnnounceKind::End && a.transmission >= from {
                self.listen(now, &a);
            }
        }
        // Replayed at the next input, after the driver has seen the
        // Manifest event (and resumed what it already holds).
        if self.early.iter().any(|p| p.item == item) {
            self.replay.push(item);
        }
    }

    /// The block layout a manifest describes; an unusable one fails the
    /// item (an event says why).
    pub(super) fn layout_of(&mut self, entry: &crate::wire::ManifestEntry) -> Option<Layout> {
        let layout = Layout::new(entry.size, &entry.fec).ok();
        if layout.is_none() {
            self.events.push_back(ClientEvent::ItemFailed {
                item: Some(entry.item),
                name: entry.name.clone(),
                reason: "manifest layout too large".into(),
            });
        }
        layout
    }

    /// Timers: sends NAKs that are due, ends transmissions whose end
    /// announcement never came. Early calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.flush_replay(now);
        self.deadline.set(None);
        // Only items with a timer can have one due (in id order, as NAKs
        // go out in a fixed order).
        let timed = std::mem::take(&mut self.timed);
        for &(id, slot) in &timed {
            let grace = self.cfg.end_grace;
            let Some(it) = self.items.at_mut(slot) else {
                continue;
            };
            if let Some(l) = it
                .listening
                .as_mut()
                .filter(|l| !l.ended && l.deadline <= now)
            {
                if l.last_heard + grace > now {
                    // Still hearing it (the server runs slower than it
                    // announced, or the announcement was lost): wait on.
                    l.deadline = l.last_heard + grace;
                } else {
                    self.end_listening(now, id, Some(0));
                }
            }
            let Some(it) = self.items.at_mut(slot) else {
                continue;
            };
            if let Some((_, tid)) = it.report_due.filter(|r| r.0 <= now) {
                it.report_due = None;
                if it.phase == ItemPhase::Assembled {
                    // Still being put in place ([`placing`]).
                    self.placing_report(id, tid);
                    continue;
                }
                if it.phase != ItemPhase::Receiving {
                    continue;
                }
                let needs = it.needs();
                if needs.is_empty() && !it.decoding.is_empty() {
                    // Every block not verified is out being decoded: the
                    // report says it needs nothing, and the server waits
                    // for the done report. One that comes back failed is
                    // asked for then (`decode::recheck`).
                    it.recheck = Some(tid);
                }
                let (received, expected) = it
                    .listening
                    .as_ref()
                    .map_or((0, 0), |l| (l.received, l.expected()));
                let nak = NakRepr {
                    transmission: tid,
                    item: id,
                    received,
                    expected,
                    needs,
                };
                self.stats.naks += 1;
                self.outbox.push_back(ClientMsg::Nak(nak));
            }
        }
        // Keep the items that still hold a timer (and any added meanwhile).
        let added = std::mem::replace(&mut self.timed, timed);
        for e in added {
            if let Err(at) = self.timed.binary_search_by_key(&e.0, |x| x.0) {
                self.timed.insert(at, e);
            }
        }
        let items = &self.items;
        self.timed.retain(|e| {
            items.at(e.1).is_some_and(|i| {
                i.report_due.is_some() || i.listening.as_ref().is_some_and(|l| !l.ended)
            })
        });
    }

    /// All blocks are in: report done (leaving the transmission early) and
    /// ask the driver for the whole-item check (accounting mode: complete).
    fn assembled(&mut self, item: ItemId) {
        let payloads = self.cfg.payloads;
        let Some(it) = self.items.get_mut(&item) else {
            return;
        };
        it.report_due = None;
        let (tid, received, expected) = it
            .listening
            .as_ref()
            .map_or((TransmissionId(0), 0, 0), |l| {
                (l.id, l.received, l.expected())
            });
        it.listening = None;
        self.deadline.set(None);
        let done = ClientMsg::ItemDone {
            item,
            transmission: tid,
            received,
            expected,
        };
        if payloads {
            it.phase = ItemPhase::Assembled;
            it.done_report = Some(done);
            self.events.push_back(ClientEvent::ItemAssembled(item));
        } else {
            it.phase = ItemPhase::Complete;
            self.events.push_back(ClientEvent::ItemComplete(item));
            if !self.push {
                self.outbox.push_back(done);
            }
            self.push_check_done();
        }
    }
}
