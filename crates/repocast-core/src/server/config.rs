//! The server's configuration and the values it exchanges with its driver.

use crate::fec::CodeKind;
use crate::policy::Scheme;
use crate::sched::SchedulerKind;
use crate::wire::{AnnounceRepr, DataRepr, ServerMsg};
use crate::{ClientId, ItemId, SessionId, TransmissionId};
use std::time::Duration;

/// Everything the server state machine needs to know up front.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Session id stamped on every packet.
    pub session: SessionId,
    /// Reliability scheme, e.g. `FEC(0.01R)+R(0)`.
    pub scheme: Scheme,
    /// Which item next.
    pub scheduler: SchedulerKind,
    /// Request mode: of items the scheduler scores equal, the smallest
    /// goes first (then the lowest id), so a request that a small item
    /// completes is not kept behind a large one it ties with. Off: the
    /// lowest id (the study's setting; SPEC 3.1 asks only for a
    /// deterministic tie-break).
    pub size_ties: bool,
    /// Erasure code for every item.
    pub code: CodeKind,
    /// Bytes per symbol (even); an item of one block gets symbols fitted
    /// to it, no longer than this ([`ServerConfig::item_fec`]).
    pub symbol_size: u16,
    /// Largest source block in symbols.
    pub max_block_symbols: u32,
    /// Larger blocks for large items (push; `None`: every item's blocks
    /// are at most [`ServerConfig::max_block_symbols`]). See
    /// [`ServerConfig::item_fec`].
    pub block_growth: Option<crate::fec::layout::BlockGrowth>,
    /// Time to send one data packet of [`ServerConfig::symbol_size`] at
    /// the configured rate (a shorter one takes its share: `pacing`).
    pub packet_interval: Duration,
    /// Packets that may go out back to back after an idle spell.
    pub burst: u32,
    /// What [`ServerConfig::set_rate`] was last given (rate, IPv6) and the
    /// packet interval it set. While that interval stands, the server
    /// paces the rate again when it is built, so a field the interval
    /// rests on that is set afterwards (the session key's tag, the symbol
    /// size) still counts; an interval set by hand is left as it is.
    pub rate_set: Option<(u64, bool, Duration)>,
    /// What an idle link's first transmission may send at once (at most
    /// `burst` packets' time): the driver's timer granularity. A driver
    /// whose timers fire about once a millisecond sends that much time's
    /// packets back to back anyway once a transmission runs; without it a
    /// transmission on an idle link sends one packet, then waits a whole
    /// tick for its second, which is most of a small item's time. Zero:
    /// one packet (the study's setting, and exact virtual time).
    pub start_credit: Duration,
    /// NAK delay window, base case.
    pub nak_window: (Duration, Duration),
    /// NAKs per transmission above which the window doubles (0: never).
    pub nak_widen_threshold: u32,
    /// Largest window the server widens to.
    pub nak_window_cap: Duration,
    /// Listeners the NAK window is spread for: a transmission with fewer
    /// receivers waiting on it announces a window that much narrower (its
    /// lower end stays), so a lone receiver NAKs almost at once rather than
    /// waiting a random share of a window meant to spread many NAKs. None:
    /// every transmission announces the whole window (the study's setting).
    pub nak_spread_listeners: Option<u32>,
    /// Request mode: a scheduled send to receivers of very different loss
    /// goes in two tiers, every block's share for the lower-loss receivers
    /// first, then the rest for the lossiest ([`crate::policy::tiers`]).
    /// Off: block after block (the study's setting).
    pub loss_tiers: bool,
    /// Request mode: symbols a receiver lacks go sooner in the send on
    /// air, the same symbols in another order ([`Transmission::hasten`]):
    /// a repair sends its smaller needs first, and a send takes a
    /// receiver's short-block hint (`server::early`). Off: every plan goes
    /// block after block (the study's setting).
    ///
    /// [`Transmission::hasten`]: super::transmission::Transmission::hasten
    pub hasten: bool,
    /// Request mode: a short repair, or a short send of the scheduler's
    /// next item, may interrupt a long scheduled send (which then resumes
    /// where it stopped) when that saves its receivers more waiting than
    /// it costs the send's (`server/preempt.rs`). Off: one transmission runs to its end
    /// before the next starts (the study's setting).
    pub preempt: bool,
    /// Request mode: a NAK asking for more than this share of its item's
    /// symbols (and for at least `server::preempt::MIN_LEFT`: a short
    /// transmission either way) is not repaired at once: its receiver heard
    /// too little (it joined late, or lost a burst) for the repair to be
    /// short, so it goes back to the scheduler's queue with its needs, like
    /// a new request, and is served with whoever else waits for the item.
    /// Repairs, which go before any scheduled send, stay short. None: the
    /// retransmit policy alone decides (the study's setting).
    pub repair_share: Option<f64>,
    /// Request mode: FEC for a link with time to spare ([`IdleFec`]).
    /// None: the FEC policy alone (the study's setting).
    pub idle_fec: Option<IdleFec>,
    /// Whether real symbol bytes are produced (false: accounting only).
    pub payloads: bool,
    /// Seed for every random choice the server makes.
    pub seed: u64,
    /// How long past a transmission's end plus the NAK window the server
    /// waits for a receiver's report before rescheduling the item for it.
    pub report_timeout: Duration,
    /// The longest the server waits for a receiver whose reports have come
    /// later than `report_timeout` allows ([`super::lag`]): twice its
    /// smoothed lateness plus four deviations, up to this. None:
    /// `report_timeout` for everyone (the study's setting).
    pub report_timeout_max: Option<Duration>,
    /// Size each repair so the NAKing client is expected to finish in one
    /// round (its need divided by its estimated delivery rate, plus one),
    /// instead of the study's "largest NAK" exactly. Off by default (the
    /// simulator reproduces the study); the network server turns it on.
    pub loss_aware_repairs: bool,
    /// ARM sender parameters (used with the `ARM` scheme).
    pub arm: crate::policy::arm::ArmParams,
    /// ARM's round-trip estimate before the first probe echo.
    pub arm_initial_rtt: Duration,
    /// Where the driver sends data and announcements (told to clients in
    /// `Welcome`; the core does not use it otherwise).
    pub channels: crate::wire::control::Channels,
    /// The key that tags this session's data packets and announcements,
    /// handed to each client in `Welcome` (over the TLS connection).
    /// `None` runs unauthenticated (the simulator's studies). Tags make
    /// packets longer: a rate set before the key is paced again for it
    /// when the server is built ([`ServerConfig::rate_set`]).
    pub session_key: Option<crate::auth::SessionKey>,
    /// Encrypt the symbol bytes of data packets under the session key
    /// (`serve --encrypt`; nothing without a session key), so that only
    /// clients the server welcomed can read them.
    pub encrypt: bool,
    /// Vouch for every data packet in signed batches (`serve
    /// --sign-symbols`, `push --sign-symbols`; `endpoint::signing`), so
    /// that not even a client holding the session key can forge a symbol
    /// others accept. Needs the endpoint's identity key; about 2.9% of the
    /// rate with the default [`ServerConfig::sign_copies`].
    pub sign_symbols: bool,
    /// With `sign_symbols`: in how many batches each packet is listed
    /// (`--sign-copies`; more costs rate, fewer loses more packets at high
    /// loss: `endpoint::signing`).
    pub sign_copies: u8,
    /// Repairs and scheduled sends take turns when both are waiting, so no
    /// one client's repairs starve everybody else's requests (the study
    /// sends repairs first, always).
    pub share_repairs: bool,
    /// When the last client a transmission or queued repair is for leaves,
    /// drop the work (the study lets it run to its end).
    pub drop_orphans: bool,
    /// Most symbols one client may ask for in NAKs per item, as a multiple
    /// of the item's source symbols; past it its NAKs for the item are
    /// refused and the item fails for it with a reason. Also the most
    /// transmissions of an item in a row a client may leave without a
    /// report (each is sent again for it) before the item fails for it
    /// (None: no limit).
    pub repair_budget: Option<u32>,
    /// Most of one client's requested items the server works on at a
    /// time (manifest sent, not yet done or failed for it): half in the
    /// order asked, the rest waiting their turn, and half for joining
    /// scheduled sends of items still waiting (`server::window`). None:
    /// all at once (the study's setting).
    pub request_window: Option<u32>,
    /// Push mode: the budget of item data whose encoders the server keeps
    /// between passes; a larger item is streamed, about this many bytes of
    /// its repair symbols made ahead (`server::encoders`; every pass still
    /// interleaves all its blocks, SPEC 3.6).
    pub push_span_bytes: u64,
    /// Push mode: how many symbols a pass of an item gives each block
    /// (`None`: its source count, SPEC 3.1's MAD page count). See
    /// [`PassOdds`].
    pub push_pass_odds: Option<PassOdds>,
    /// Push mode: the most bytes of a streamed item's repair symbols made
    /// ahead that the server keeps in the driver's spool
    /// ([`BlockSource::spool`]; `push --spool-mib`), so each block is read
    /// and encoded about once per pass whatever the item's size. Zero (the
    /// default here; [`crate::profile::Profile::Push`] ships
    /// [`crate::profile::PUSH_SPOOL_BYTES`]): no spool.
    pub push_spool_bytes: u64,
    /// Request mode: the budget of item data whose encoders the server
    /// keeps after a transmission has used them, least recently used out
    /// first (`server::encoders`), so a repair or a send soon after finds
    /// them built: a fountain encoder's first repair symbol costs its
    /// block's whole intermediate-symbol computation, a stall of the
    /// sending path. Zero (the default here; [`crate::profile::Profile::Lan`]
    /// ships [`REQUEST_ENCODER_BYTES`]): one encoder at a time, dropped
    /// when the transmission moves to another block.
    pub encoder_cache_bytes: u64,
    /// The most blocks whose encoders are prepared off the sending path at
    /// once, as jobs the driver runs on another thread
    /// ([`crate::server::Server::poll_prepare`],
    /// `server::encoders::prepare`): in request mode (with an encoder
    /// cache) while a send gives a block's source symbols, in push mode
    /// one block every half block of a pass. Zero (the default here;
    /// [`crate::profile::Profile::Lan`] and
    /// [`crate::profile::Profile::Push`] ship [`PREPARE_JOBS`]): on the
    /// sending path, at a block's first repair symbol in request mode, in
    /// the pass's own time in push mode.
    pub prepare_jobs: usize,
    /// Request mode: the batching hold's cap (`serve --batch-hold MS`;
    /// `crate::sched::hold`). An item waits up to this long, in proportion
    /// to the work queued beside it, behind items asked for earlier, so
    /// more requests join its transmission. `None` (the default here;
    /// [`crate::profile::Profile::Lan`] ships 4 s): the scheduler alone decides.
    pub batch_hold: Option<Duration>,
    /// Request mode: the hold engages only once the server has had work
    /// (requests waiting for a send or a repair, on air, or owing a report
    /// on what was sent) without a break for this long (`serve
    /// --batch-hold-after MS`), so a server under light load, or a burst
    /// on an idle one, is served as without the hold. Zero: from the first
    /// request.
    pub batch_hold_after: Duration,
    /// Request mode: when every waiting item is held, the link idles until
    /// the first hold ends (`serve --batch-hold-idle`: fewer bytes, more
    /// delay). Off (the default): the scheduler's best item goes anyway, so
    /// the hold only puts items asked for long ago before those just asked
    /// for, and the link never idles while anyone waits.
    pub batch_hold_idle: bool,
}

impl ServerConfig {
    /// The FEC parameters every item starts from: the code, the symbol
    /// size and the largest block.
    pub fn base_fec(&self) -> crate::wire::FecParams {
        crate::wire::FecParams {
            code: self.code,
            symbol_size: self.symbol_size,
            max_block_symbols: self.max_block_symbols,
        }
    }

    /// The FEC parameters of an item of `size` bytes: [`Self::base_fec`]
    /// with [`Self::block_growth`] applied. The driver hashes the item's
    /// blocks with these, and listeners learn them from the catalogue.
    pub fn item_fec(&self, size: u64) -> crate::wire::FecParams {
        crate::fec::layout::item_fec(&self.base_fec(), self.block_growth, size)
    }
}

/// What `serve` keeps of recent blocks' encoders
/// ([`ServerConfig::encoder_cache_bytes`]): 32 MiB of block data (each
/// kept encoder holds its block and about as many bytes of intermediate
/// symbols again).
pub const REQUEST_ENCODER_BYTES: u64 = 32 << 20;

/// What `serve` and `push` ship for [`ServerConfig::prepare_jobs`]: a
/// block is prepared in a few milliseconds, and a send takes about 100 ms
/// over its source symbols (a push pass offers one every half block of
/// packets), so one job is nearly always enough; a second covers a repair
/// that loads a block while a send's job runs.
pub const PREPARE_JOBS: usize = 2;

/// How a push pass sizes each block: enough symbols that a listener at
/// `loss` that hears one pass of every item of the set has them all with
/// `odds` (each block gets the B-th root of `odds`, B the blocks of the
/// whole set; [`crate::policy::odds`]). With no back channel, a listener
/// short of one symbol of an item waits a whole cycle of the set for its
/// next pass; with passes of exactly k symbols, a listener of a set of
/// many small files at 5% loss found nearly every cycle left some item
/// short, and took two cycles. A pass's extra symbols are fresh ones,
/// so a listener at a higher loss uses them too; for a set of one file
/// they only lengthen the pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PassOdds {
    /// The loss the pass is sized for.
    pub loss: f64,
    /// The least odds, over the whole set, that such a listener needs no
    /// second pass of any item (a set whose blocks make higher odds cheap
    /// gets them: [`crate::policy::odds::best_set_odds`]).
    pub odds: f64,
}

/// What [`crate::profile::Profile::Push`] ships: a listener at 5% loss
/// has every item of the set after one pass of each, with 90% odds.
pub const PUSH_PASS_ODDS: PassOdds = PassOdds {
    loss: 0.05,
    odds: 0.9,
};

/// Default [`ServerConfig::push_span_bytes`]: 32 MiB.
pub const PUSH_SPAN_BYTES: u64 = 32 << 20;

/// FEC for a link with time to spare: when no repair is queued and what
/// the other waiting items need would take less than `backlog` to send, a
/// first send carries at least the symbols per block that give a receiver
/// at the largest loss estimated among its listeners `odds` of decoding
/// the block without a NAK round ([`crate::policy::odds`]: nothing above
/// 50% loss, never more than twice the policy's count). A NAK round
/// costs a receiver more than a small item's whole transmission; the few
/// extra symbols cost a loaded link's other items little.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IdleFec {
    /// The odds of decoding each block from the first send.
    pub odds: f64,
    /// How much waiting work still counts as a link with time to spare.
    pub backlog: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            session: SessionId(1),
            scheme: Scheme::default(),
            scheduler: SchedulerKind::Rq,
            code: CodeKind::RaptorQ,
            symbol_size: 1280,
            max_block_symbols: CodeKind::RaptorQ.default_block_symbols(),
            block_growth: None,
            packet_interval: Duration::from_micros(100),
            burst: 16,
            start_credit: Duration::ZERO,
            nak_window: (Duration::from_millis(30), Duration::from_millis(210)),
            nak_widen_threshold: 64,
            nak_window_cap: Duration::from_secs(5),
            nak_spread_listeners: None,
            idle_fec: None,
            payloads: true,
            seed: 1,
            report_timeout: Duration::from_secs(2),
            report_timeout_max: None,
            loss_aware_repairs: false,
            arm: Default::default(),
            arm_initial_rtt: Duration::from_millis(100),
            channels: Default::default(),
            rate_set: None,
            session_key: None,
            encrypt: false,
            sign_symbols: false,
            sign_copies: crate::endpoint::signing::DEFAULT_COPIES,
            share_repairs: false,
            drop_orphans: false,
            repair_budget: None,
            request_window: None,
            push_span_bytes: PUSH_SPAN_BYTES,
            push_pass_odds: None,
            push_spool_bytes: 0,
            encoder_cache_bytes: 0,
            prepare_jobs: 0,
            loss_tiers: false,
            hasten: false,
            size_ties: false,
            preempt: false,
            repair_share: None,
            batch_hold: None,
            batch_hold_after: Duration::ZERO,
            batch_hold_idle: false,
        }
    }
}

/// An item of the repository as the driver describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemInfo {
    /// Relative path.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// BLAKE3 of the whole item (zeros in accounting mode).
    pub hash: [u8; 32],
    /// BLAKE3 of each source block (empty in accounting mode).
    pub block_hashes: Vec<[u8; 32]>,
}

/// Where the server gets block bytes: implemented by the driver (files on
/// disk, or memory in tests), so the core never does I/O and never holds
/// whole items.
pub trait BlockSource {
    /// Writes `len` bytes of `item` starting at `offset` into `out`.
    fn read(
        &mut self,
        item: ItemId,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), SourceError>;

    /// Push mode: where the server may keep repair symbols it made ahead
    /// (`super::spool`), up to [`ServerConfig::push_spool_bytes`]; `None`
    /// (the default): it holds them in memory.
    fn spool(&mut self) -> Option<&mut dyn super::spool::SymbolSpool> {
        None
    }
}

/// Why block bytes could not be read; every request for the item fails
/// with it.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The source has no such item.
    #[error("no such item")]
    NoItem,
    /// The range is past the item's end.
    #[error("read past the end of the item")]
    PastEnd,
    /// The file is not what was scanned (size or time changed).
    #[error("{path} changed on disk since it was scanned")]
    Changed {
        /// The file.
        path: String,
    },
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Fewer bytes came than the block holds.
    #[error("short read of block {0}")]
    Short(u32),
    /// The code refused the block.
    #[error("{0}")]
    Code(#[from] crate::fec::FecError),
    /// Accounting runs have no bytes.
    #[error("no payloads in accounting mode")]
    NoPayloads,
}

/// A source for accounting mode: never called.
pub struct NoPayload;

impl BlockSource for NoPayload {
    fn read(&mut self, _: ItemId, _: u64, _: usize, _: &mut Vec<u8>) -> Result<(), SourceError> {
        Err(SourceError::NoPayloads)
    }
}

/// Something the driver must send.
#[derive(Debug, Clone, PartialEq)]
pub enum Transmit {
    /// On the multicast data channel.
    Data(DataRepr),
    /// On the announcement channel.
    Announce(AnnounceRepr),
    /// On one client's request connection.
    Control(ClientId, ServerMsg),
}

/// Something the driver may want to know.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    /// A transmission started.
    TransmissionStarted {
        /// Its id.
        id: TransmissionId,
        /// The item.
        item: ItemId,
        /// Repair (true) or a scheduled send.
        repair: bool,
        /// Data packets it will send.
        packets: u32,
    },
    /// A client holds every item it asked for.
    ClientComplete(ClientId),
    /// An item could not be read; its requests failed.
    ItemFailed {
        /// The item.
        item: ItemId,
        /// Why.
        reason: String,
    },
}

/// Counters the server keeps (for metrics and results).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Transmissions started (scheduled sends and repairs).
    pub transmissions: u64,
    /// Of which repairs.
    pub repair_transmissions: u64,
    /// Data packets sent.
    pub data_packets: u64,
    /// Bytes of the symbols those packets carried (a small item's are
    /// fitted to it, so shorter than the configured symbol size).
    pub symbol_bytes: u64,
    /// Data packets sent in repair transmissions.
    pub repair_packets: u64,
    /// NAKs received.
    pub naks: u64,
    /// NAKs answered by rescheduling.
    pub rescheduled: u64,
    /// Item-done reports received.
    pub items_done: u64,
    /// Control messages that made no sense (unknown item, wrong state).
    pub bad_requests: u64,
    /// Item requests resumed from a `Have` (only missing blocks sent).
    pub resumed_requests: u64,
    /// Transmissions cut short or repairs dropped because every client
    /// they were for had left.
    pub cancelled: u64,
    /// NAKs refused because the client was past its repair budget.
    pub over_budget: u64,
    /// Reports that never came (items rescheduled for silent receivers).
    pub report_timeouts: u64,
    /// Items failed for a client that reported on none of the repair
    /// budget's number of their transmissions in a row.
    pub unreported_failures: u64,
    /// Data packets added to scheduled sends after early loss reports.
    pub grown_packets: u64,
    /// Data packets taken off scheduled sends after early loss reports
    /// (every receiver heard from, with less loss than the send was sized
    /// for).
    pub trimmed_packets: u64,
    /// Times the link went idle because the batching hold kept back every
    /// waiting item.
    pub holds: u64,
    /// Microseconds the link spent idle that way.
    pub hold_idle_us: u64,
    /// Repairs that interrupted a scheduled send.
    pub preemptions: u64,
    /// NAKs for a transmission still on air or interrupted, left for the
    /// report at its end (short-block hints among them).
    pub early_naks: u64,
    /// Reports that needed nothing (the client was decoding what it had):
    /// taken as reports, no repair.
    pub empty_naks: u64,
    /// Symbols sent sooner on short-block hints (`server::early`).
    pub hastened: u64,
}

/// What the server knows about one client.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientSummary {
    /// Items requested.
    pub requested: u32,
    /// Items reported done.
    pub done: u32,
    /// Estimated loss rate from its reports.
    pub loss: f64,
    /// NAKs it sent.
    pub naks: u64,
}
