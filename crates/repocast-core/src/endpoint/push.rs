//! The push endpoint: `repocast push` as bytes out, no back channel.
//!
//! It wraps the [`Server`] state machine in push mode (the scheduler and
//! the Fcast passes of [`crate::profile::Profile::Push`], the same code the
//! simulator runs) and adds what a listener with no back channel needs:
//! the signed catalogue of the file set ([`crate::wire::catalogue`]), its
//! pieces spread over each catalogue period on the announcement group so a
//! listener tuning in at any moment has it within about a period (every
//! other copy repair pieces, when the catalogue is coded:
//! [`super::catalogue_code`]), and a stop after a target redundancy. Data packets go out untagged (there is
//! no secret to share without a back channel); a listener checks every
//! decoded block against the signed catalogue's block hash.
//!
//! A driver calls [`PushEndpoint::poll_transmit`] until `None`, sleeps
//! until [`PushEndpoint::poll_timeout`], and on a changed file set calls
//! [`PushEndpoint::replace`] with a higher version.

use super::Dest;
use super::catalogue_code::{self, CatalogueCoder};
use super::pack::{PushSet, Unit, UnitSource};
use super::signing::BatchSigner;
use crate::auth::{self, Identity, PublicKey};
use crate::fec::layout::Layout;
use crate::sched::SchedulerKind;
use crate::server::{
    BlockSource, ItemInfo, ResumePoint, Server, ServerConfig, ServerError, ServerEvent, Transmit,
};
use crate::wire::FecParams;
use crate::wire::catalogue::{
    CataloguePiece, HeadKind, ItemHead, MAX_PIECES, MAX_PUSH_ITEMS, pack, split_item,
};
use crate::{Instant, SessionId};
use std::collections::VecDeque;
use std::time::Duration;

/// Longest time between two copies of the catalogue, unless its share of
/// the rate ([`catalogue_share`]) forces a longer one.
pub const CATALOGUE_PERIOD: Duration = Duration::from_millis(250);
/// Shortest time between two copies of the catalogue.
pub const MIN_CATALOGUE_PERIOD: Duration = Duration::from_millis(20);
/// Copies of the catalogue per cycle of the file set (one pass of every
/// item at the rate), between [`MIN_CATALOGUE_PERIOD`] and
/// [`CATALOGUE_PERIOD`]: a listener takes nothing until it has the
/// catalogue, so for a set that takes less than a few periods to send,
/// the wait for a copy that gets through its loss would be most of its
/// time.
pub const CATALOGUE_COPIES_PER_CYCLE: f64 = 8.0;
/// Share of the rate a catalogue may always take; a larger catalogue is
/// repeated less often, unless it is a large part of what a listener
/// needs ([`catalogue_share`]).
pub const CATALOGUE_SHARE: f64 = 0.05;
/// Share of the rate a catalogue never exceeds, however large it is
/// beside its files' data.
pub const MAX_CATALOGUE_SHARE: f64 = 0.5;

/// Largest share of the rate a catalogue of `bytes` takes beside a file
/// set whose one pass takes `cycle` at `data_bps`: its share of the two
/// together (a listener needs a copy of the catalogue and a pass of the
/// data, so they take about as long as each other), within
/// [`CATALOGUE_SHARE`]..[`MAX_CATALOGUE_SHARE`]. A set of many tiny files
/// has a catalogue about as large as its data: at a fixed 5% of the rate,
/// a copy took several times as long as the data.
pub fn catalogue_share(bytes: u64, cycle: Duration, data_bps: f64) -> f64 {
    let catalogue = bytes as f64 * 8.0;
    let data = cycle.as_secs_f64() * data_bps.max(0.0);
    (catalogue / (catalogue + data).max(1.0)).clamp(CATALOGUE_SHARE, MAX_CATALOGUE_SHARE)
}

/// Time between two copies of a catalogue of `bytes` (IP and UDP headers
/// counted) for a file set whose one pass takes `cycle`, with data sent
/// at `data_bps`: [`CATALOGUE_COPIES_PER_CYCLE`] a cycle within
/// [`MIN_CATALOGUE_PERIOD`]..[`CATALOGUE_PERIOD`], and never more than
/// [`catalogue_share`] of the rate.
pub fn catalogue_period(bytes: u64, cycle: Duration, data_bps: f64) -> Duration {
    let wanted = (cycle.as_secs_f64() / CATALOGUE_COPIES_PER_CYCLE).clamp(
        MIN_CATALOGUE_PERIOD.as_secs_f64(),
        CATALOGUE_PERIOD.as_secs_f64(),
    );
    let share = catalogue_share(bytes, cycle, data_bps);
    let at_share = bytes as f64 * 8.0 / (data_bps.max(1.0) * share);
    Duration::from_secs_f64(wanted.max(at_share).min(3600.0))
}

/// Copies of the catalogue a pusher with a target redundancy sends before
/// it stops.
pub const MIN_CATALOGUE_COPIES: u64 = 4;

/// One file of the pushed set.
#[derive(Debug, Clone)]
pub struct PushItem {
    /// Name, size, hashes.
    pub info: ItemInfo,
    /// Unix permission bits.
    pub mode: u32,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
}

/// Push endpoint settings.
#[derive(Debug, Clone)]
pub struct PushConfig {
    /// The state machine's settings (from [`crate::profile::Profile::Push`];
    /// its session is replaced by one derived from each version).
    pub server: ServerConfig,
    /// Stop once every item has been sent this many times its size
    /// (`None`: run until stopped).
    pub redundancy: Option<f64>,
    /// Small files travel in packs ([`super::pack`]); `push --no-packs`
    /// sends every file alone.
    pub packs: bool,
    /// Popularity weights by file (`push --popularity`, with either
    /// scheduler; empty: none, or MAD's if it has them): what packs are
    /// sized and ordered by.
    pub popularity: Vec<f64>,
}

impl PushConfig {
    /// What `repocast push` runs: [`crate::profile::Profile::Push`] with
    /// the FEC layout `fec` (blocks grown by `growth` for large items),
    /// `scheduler`, the block-order `seed` and a rate cap of `rate_bps`
    /// (the catalogue included). The simulator's replays of real runs
    /// build their pusher here too.
    pub fn shipped(
        fec: &FecParams,
        growth: Option<crate::fec::layout::BlockGrowth>,
        scheduler: crate::sched::SchedulerKind,
        seed: u64,
        rate_bps: u64,
        ipv6: bool,
        redundancy: Option<f64>,
    ) -> Result<Self, ServerError> {
        let mut server = crate::profile::Profile::Push.server();
        server.code = fec.code;
        server.symbol_size = fec.symbol_size;
        server.max_block_symbols = fec.max_block_symbols;
        server.block_growth = growth;
        server.seed = seed;
        server.scheduler = scheduler;
        server.set_rate(rate_bps, ipv6)?;
        Ok(PushConfig {
            server,
            redundancy,
            packs: true,
            popularity: Vec::new(),
        })
    }

    /// The set to push for `files` ([`plan_set`] with this config's
    /// blocks, packs, popularity and scheduler). Drivers run it where they
    /// scan the folder, off the sending path.
    pub fn plan(
        &self,
        files: Vec<PushItem>,
        source: &mut dyn BlockSource,
    ) -> Result<PushSet, ServerError> {
        let s = &self.server;
        plan_set(
            &s.base_fec(),
            self.packs,
            &self.popularity,
            &s.scheduler,
            files,
            source,
        )
    }
}

/// The set to push for `files`: with `packs`, its small files packed
/// ([`super::pack::plan`]) by the `popularity` weights, or else by the
/// MAD `scheduler`'s if it has them; each pack hashed through `source`,
/// which reads file `i` as item `i`.
pub fn plan_set(
    fec: &FecParams,
    packs: bool,
    popularity: &[f64],
    scheduler: &SchedulerKind,
    files: Vec<PushItem>,
    source: &mut dyn BlockSource,
) -> Result<PushSet, ServerError> {
    if !packs {
        return Ok(files.into());
    }
    let weights = match scheduler {
        _ if !popularity.is_empty() => popularity,
        SchedulerKind::Mad { weights } => &weights[..],
        _ => &[],
    };
    super::pack::plan(fec, weights, files, source).map_err(|e| ServerError::Pack(e.to_string()))
}

/// Counters of the push endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PushStats {
    /// Catalogue pieces sent.
    pub catalogue_pieces: u64,
    /// Data packets sent.
    pub data_packets: u64,
    /// Full passes over items begun.
    pub passes: u64,
    /// Catalogue versions published.
    pub versions: u64,
    /// Signed symbol batch datagrams sent (repeats included).
    pub batches: u64,
}

/// The sending side of push mode as datagrams out.
pub struct PushEndpoint {
    cfg: PushConfig,
    identity: Identity,
    server: Server,
    version: u64,
    pieces: Vec<Vec<u8>>,
    /// Repair pieces of a coded catalogue.
    coder: Option<CatalogueCoder>,
    piece_at: Instant,
    piece_gap: Duration,
    /// Data packets sent and source symbols, per item on the channel.
    sent: Vec<(u64, u64)>,
    /// Where each item on the channel reads its bytes.
    units: Vec<Unit>,
    /// Catalogue pieces sent of this version (the next is this one
    /// modulo their count).
    pieces_sent: u64,
    current: Vec<PushItem>,
    /// Vouches for the version's data packets (`sign_symbols`).
    signer: Option<BatchSigner>,
    /// Items of this version the server failed (a file that no longer
    /// reads as scanned), until the driver takes them; and every item
    /// reported so (the server fails it again each time it comes round).
    failed: VecDeque<PushFailure>,
    reported: std::collections::BTreeSet<crate::ItemId>,
    stats: PushStats,
}

/// An item the pusher stopped sending in this version: its file, or the
/// files of its pack, no longer read as the scan hashed them (changed, or
/// rewritten with size and time kept). The driver scans again, hashing
/// them afresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushFailure {
    /// The file's name, or each member's of a pack.
    pub names: Vec<String>,
    /// Why (the server's reason).
    pub reason: String,
}

/// The session a version's data carries: from the signer and the version,
/// so two versions (and two pushers) never share one.
pub fn session_of(key: &PublicKey, version: u64) -> SessionId {
    let mut h = blake3::Hasher::new();
    h.update(&key.to_bytes()).update(&version.to_be_bytes());
    let b = h.finalize();
    let b = b.as_bytes();
    SessionId(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

impl PushEndpoint {
    /// Pushes `items` (files, and packs of them: [`super::pack::plan`]) as
    /// catalogue `version`, signed by `identity`.
    pub fn new(
        now: Instant,
        cfg: PushConfig,
        identity: Identity,
        version: u64,
        items: impl Into<PushSet>,
    ) -> Result<Self, ServerError> {
        let server = Server::new(cfg.server.clone(), Vec::new())?;
        let mut e = PushEndpoint {
            cfg,
            identity,
            server,
            version,
            pieces: Vec::new(),
            coder: None,
            piece_at: now,
            piece_gap: CATALOGUE_PERIOD,
            sent: Vec::new(),
            units: Vec::new(),
            pieces_sent: 0,
            current: Vec::new(),
            signer: None,
            failed: VecDeque::new(),
            reported: Default::default(),
            stats: PushStats::default(),
        };
        e.replace(now, version, items)?;
        Ok(e)
    }

    /// Publishes a new file set as `version` (higher than the last): a new
    /// catalogue and session; the pass on air is dropped.
    pub fn replace(
        &mut self,
        now: Instant,
        version: u64,
        items: impl Into<PushSet>,
    ) -> Result<(), ServerError> {
        let set: PushSet = items.into();
        let units = set.units();
        let members: usize = set.packs.iter().map(|p| p.members.len()).sum();
        let heads = units.len() + members;
        if heads > MAX_PUSH_ITEMS as usize {
            return Err(ServerError::TooManyItems {
                got: heads,
                max: MAX_PUSH_ITEMS,
            });
        }
        let key = self.identity.public();
        let session = session_of(&key, version);
        let base = CataloguePiece {
            signer: key.to_bytes(),
            version,
            session,
            items: heads as u32,
            signed_symbols: self.cfg.server.sign_symbols,
            index: 0,
            count: 1,
            symbol_size: 0,
            entries: Vec::new(),
        };
        let mut entries = Vec::new();
        let mut sent = Vec::with_capacity(units.len());
        let mut infos = Vec::with_capacity(units.len());
        let head = |kind, info: &ItemInfo, mode, mtime| ItemHead {
            kind,
            name: match kind {
                HeadKind::Pack => String::new(),
                _ => info.name.clone(),
            },
            size: info.size,
            hash: info.hash,
            fec: self.cfg.server.item_fec(info.size),
            mode,
            mtime,
        };
        let mut packs = set.packs.iter();
        let mut member_id = units.len();
        for (i, u) in units.iter().enumerate() {
            let id = crate::ItemId(i as u32);
            let info = match u {
                Unit::File(f) => {
                    let Some(it) = set.files.get(*f) else { break };
                    let h = head(HeadKind::File, &it.info, it.mode, it.mtime);
                    entries.extend(split_item(id, h, &it.info.block_hashes));
                    &it.info
                }
                Unit::Pack(_) => {
                    let Some(p) = packs.next() else { break };
                    let h = head(HeadKind::Pack, &p.info, 0, 0);
                    entries.extend(split_item(id, h, &p.info.block_hashes));
                    for (&m, &offset) in p.members.iter().zip(&p.offsets) {
                        let Some(it) = set.files.get(m) else { continue };
                        let kind = HeadKind::Member { pack: id, offset };
                        let h = head(kind, &it.info, it.mode, it.mtime);
                        let mid = crate::ItemId(member_id as u32);
                        entries.extend(split_item(mid, h, &[]));
                        member_id += 1;
                    }
                    &p.info
                }
            };
            let symbols = Layout::new(info.size, &self.cfg.server.item_fec(info.size))
                .map(|l| l.symbols())
                .unwrap_or(0);
            sent.push((0, symbols));
            infos.push(info.clone());
        }
        // Many small files share a piece; an empty folder is a version
        // too, one piece with no entries: listeners learn the signer and
        // that there is nothing to fetch.
        let mut pieces = pack(&base, entries);
        if pieces.len() > MAX_PIECES as usize {
            return Err(ServerError::TooManyPieces {
                got: pieces.len(),
                max: MAX_PIECES,
            });
        }
        // A catalogue of a few pieces or more is coded (`catalogue_code`).
        let symbol = catalogue_code::symbol_size(&pieces);
        let bodies: Vec<Vec<u8>> = (pieces.iter_mut())
            .map(|p| {
                p.symbol_size = symbol;
                let mut buf = Vec::new();
                p.emit(&mut buf);
                buf
            })
            .collect();
        let coder = (pieces.first()).and_then(|first| CatalogueCoder::new(first, &bodies));
        let pieces: Vec<Vec<u8>> = (bodies.into_iter())
            .map(|mut buf| {
                auth::sign_catalogue(&self.identity, &mut buf);
                buf
            })
            .collect();
        let mut cfg = self.cfg.server.clone();
        cfg.session = session;
        // MAD's weights are the files'; a pack is wanted by whoever wants
        // any of its members.
        // (No weights at all: every item counts as equal, as before.)
        let weights = match &cfg.scheduler {
            crate::sched::SchedulerKind::Mad { weights } if !weights.is_empty() => Some(weights),
            _ => None,
        };
        if let Some(weights) = weights {
            let w = |f: &usize| weights.get(*f).copied().unwrap_or(0.0);
            let by_unit = (units.iter())
                .map(|u| match u {
                    Unit::File(f) => w(f),
                    Unit::Pack(m) => m.iter().map(|(f, _)| w(f)).sum(),
                })
                .collect();
            cfg.scheduler = crate::sched::SchedulerKind::Mad { weights: by_unit };
        }
        // The catalogue's bytes come out of the data rate, and it is sent
        // at most its catalogue_share of it.
        let bytes: u64 = pieces.iter().map(|p| p.len() as u64 + 28).sum();
        let data_bps = crate::profile::packet_bits(cfg.symbol_size, false, false) as f64
            / cfg.packet_interval.as_secs_f64().max(1e-9);
        let symbols: u64 = sent.iter().map(|&(_, k)| k).sum();
        let cycle = cfg
            .packet_interval
            .saturating_mul(symbols.min(u32::MAX as u64) as u32);
        let period = catalogue_period(bytes, cycle, data_bps).as_secs_f64();
        let share = bytes as f64 * 8.0 / period / data_bps.max(1.0);
        let share = share.min(MAX_CATALOGUE_SHARE);
        cfg.packet_interval = cfg.packet_interval.mul_f64(1.0 / (1.0 - share));
        self.signer = (cfg.sign_symbols).then(|| BatchSigner::new(session, cfg.sign_copies));
        let mut server = Server::new(cfg, infos)?;
        self.go_on(&mut server);
        self.server = server;
        self.current = set.files;
        self.units = units;
        self.failed.clear();
        self.reported.clear();
        self.piece_gap = Duration::from_secs_f64(period / pieces.len().max(1) as f64);
        self.sent = sent;
        self.pieces = pieces;
        self.coder = coder;
        self.pieces_sent = 0;
        self.piece_at = now;
        self.version = version;
        self.stats.versions += 1;
        Ok(())
    }

    /// Items of the next version (`next`) with the same content and
    /// layout as one of this version's go on where they were
    /// (`server::carry`): a listener's partly received blocks of them stay
    /// useful (it carries them over: `client::push`), no id repeats, and
    /// the items new to the version go first.
    fn go_on(&mut self, next: &mut Server) {
        let mut old = std::collections::HashMap::new();
        for i in (0..self.units.len() as u32).map(crate::ItemId) {
            if let Some(h) = self.server.item_hash(i) {
                old.entry(h).or_insert(i);
            }
        }
        let mut kept = Vec::new();
        let mut i = crate::ItemId(0);
        while let Some(m) = next.manifest(i) {
            let same = (old.get(&m.hash))
                .and_then(|&o| self.server.manifest(o))
                .filter(|o| o.same_content(&m));
            if let Some(o) = same {
                kept.push((i, o.item));
            }
            i = crate::ItemId(i.0 + 1);
        }
        next.go_on_from(&mut self.server, &kept);
    }

    /// Where each item on the data channel stands (its blocks' next symbol
    /// ids): what the driver keeps for the next run on the same folder
    /// ([`Server::resume_points`]).
    pub fn resume_points(&self) -> Vec<ResumePoint> {
        self.server.resume_points()
    }

    /// Goes on from a run before this one (`points`, its
    /// [`PushEndpoint::resume_points`]): each item with the same content
    /// and layout as one of them takes its next symbol ids, so listeners
    /// still holding part of it from that run get fresh ones. Call it
    /// before the first `poll_transmit`. Returns the items that went on.
    pub fn resume(&mut self, points: &[ResumePoint]) -> usize {
        self.server.resume_from(points)
    }

    /// The settings it runs (the server's session is the current
    /// version's; the FEC parameters are what the next file set is hashed
    /// and announced with: [`ServerConfig::item_fec`]).
    ///
    /// [`ServerConfig::item_fec`]: crate::server::ServerConfig::item_fec
    pub fn config(&self) -> &PushConfig {
        &self.cfg
    }

    /// The file set on air.
    pub fn items(&self) -> &[PushItem] {
        &self.current
    }

    /// The items on the data channel, in item order: each one's size and
    /// the files it carries (indices of the set: one for a file sent
    /// alone, the members of a pack).
    pub fn channel_items(&self) -> Vec<(u64, Vec<usize>)> {
        (self.units.iter())
            .map(|u| match u {
                Unit::File(f) => {
                    let size = self.current.get(*f).map_or(0, |it| it.info.size);
                    (size, vec![*f])
                }
                Unit::Pack(m) => (
                    m.iter().map(|(_, s)| s).sum(),
                    m.iter().map(|(f, _)| *f).collect(),
                ),
            })
            .collect()
    }

    /// The scheduler the next [`PushEndpoint::replace`] uses (MAD weights
    /// are by item id, so they change with the file set).
    pub fn set_scheduler(&mut self, s: crate::sched::SchedulerKind) {
        self.cfg.server.scheduler = s;
    }

    /// The catalogue version on air.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Pieces in one copy of the catalogue on air.
    pub fn catalogue_len(&self) -> usize {
        self.pieces.len()
    }

    /// The signer's public key.
    pub fn key(&self) -> PublicKey {
        self.identity.public()
    }

    /// The state machine (for its counters).
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// An item this version no longer sends, and why
    /// ([`PushFailure`]).
    pub fn poll_failed(&mut self) -> Option<PushFailure> {
        self.failed.pop_front()
    }

    /// Counters.
    pub fn stats(&self) -> PushStats {
        self.stats
    }

    /// How many times its size each item has been sent so far (the least
    /// of all items; 0 with no items).
    pub fn redundancy_sent(&self) -> f64 {
        (self.sent.iter())
            .map(|&(n, k)| {
                if k == 0 {
                    f64::INFINITY
                } else {
                    n as f64 / k as f64
                }
            })
            .fold(f64::INFINITY, f64::min)
            .min(if self.sent.is_empty() {
                0.0
            } else {
                f64::INFINITY
            })
    }

    /// How far behind `now` the catalogue's schedule is kept: the data
    /// pacer's burst.
    fn catch_up(&self) -> Duration {
        let s = &self.cfg.server;
        s.packet_interval.saturating_mul(s.burst.max(1))
    }

    /// Whether the target redundancy of data has been sent (never
    /// without one).
    fn data_done(&self) -> bool {
        self.cfg
            .redundancy
            .is_some_and(|r| !self.sent.is_empty() && self.redundancy_sent() >= r)
    }

    /// Whether the pusher is done: the target redundancy sent, and the
    /// catalogue at least [`MIN_CATALOGUE_COPIES`] times (a listener keeps
    /// data that came before the catalogue, so a short push of small files
    /// is still received).
    pub fn is_finished(&self) -> bool {
        self.data_done()
            && self.pieces_sent >= MIN_CATALOGUE_COPIES * self.pieces.len() as u64
            && self.signer.as_ref().is_none_or(|s| s.next_due().is_none())
    }

    /// When to call [`PushEndpoint::poll_transmit`] next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_finished() {
            return None;
        }
        let data = if !self.sent.is_empty() && !self.data_done() {
            self.server.poll_timeout()
        } else {
            None
        };
        let piece = (!self.pieces.is_empty()).then_some(self.piece_at);
        let batches = self.signer.as_ref().and_then(BatchSigner::next_due);
        [data, piece, batches].into_iter().flatten().min()
    }

    /// The next block encoder to prepare off the sending path
    /// ([`Server::poll_prepare`]): run it on any thread, then hand it back
    /// with [`PushEndpoint::prepared`].
    pub fn poll_prepare(&mut self) -> Option<crate::server::encoders::PrepareJob> {
        self.server.poll_prepare()
    }

    /// A job from [`PushEndpoint::poll_prepare`], run.
    pub fn prepared(&mut self, job: crate::server::encoders::PrepareJob) {
        self.server.prepared(job);
    }

    /// The next datagram due at `now` into `buf` (replacing its bytes) and
    /// where it goes; call until `None`.
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        source: &mut dyn BlockSource,
        buf: &mut Vec<u8>,
    ) -> Option<Dest> {
        buf.clear();
        if self.is_finished() {
            return None;
        }
        if now >= self.piece_at && !self.pieces.is_empty() {
            // Copies alternate: the pieces, then as many repair pieces
            // with fresh ids (a coded catalogue), and so on.
            let n = self.pieces.len() as u64;
            let (copy, i) = (self.pieces_sent / n, self.pieces_sent % n);
            match self.coder.as_mut() {
                Some(c) if copy % 2 == 1 => c.repair(copy / 2 * n + i, &self.identity, buf),
                _ => buf.extend_from_slice(&self.pieces[i as usize]),
            }
            // A driver that wakes late (timer granularity, a busy CPU)
            // still owes the pieces it missed, up to the data's burst, as
            // the data pacer does: with pieces a fraction of a millisecond
            // apart, going on from `now` would send one piece per wake-up.
            let next = self.piece_at + self.piece_gap;
            let floor = now
                .as_nanos()
                .saturating_sub(self.catch_up().as_nanos() as u64);
            self.piece_at = next.max(Instant::from_nanos(floor));
            self.stats.catalogue_pieces += 1;
            self.pieces_sent += 1;
            return Some(Dest::Announce);
        }
        // Once the redundancy is sent, the last packets' batch goes at once.
        let due = if self.data_done() {
            Instant::from_micros(u64::MAX)
        } else {
            now
        };
        if let Some(b) = (self.signer.as_mut()).and_then(|s| s.poll_due(due, &self.identity)) {
            self.server.take_slot(now);
            buf.extend_from_slice(&b);
            self.stats.batches += 1;
            return Some(Dest::Data);
        }
        if self.sent.is_empty() || self.data_done() {
            return None;
        }
        let mut source = UnitSource {
            inner: source,
            units: &self.units,
        };
        loop {
            let t = self.server.poll_transmit(now, &mut source);
            let failed = (&mut self.failed, &mut self.reported);
            take_events(&mut self.server, &self.units, &self.current, failed);
            match t? {
                Transmit::Data(d) => {
                    if let Some(s) = self.sent.get_mut(d.item.0 as usize) {
                        s.0 += 1;
                    }
                    d.emit(buf);
                    if let Some(s) = self.signer.as_mut() {
                        s.add(now, buf, &self.identity);
                    }
                    self.stats.data_packets += 1;
                    return Some(Dest::Data);
                }
                // Listeners need no announcements: every data packet names
                // its item, block and symbol, and the catalogue the rest.
                Transmit::Announce(a) => {
                    if a.kind == crate::wire::AnnounceKind::Carousel {
                        self.stats.passes += 1;
                    }
                }
                Transmit::Control(..) => {}
            }
        }
    }
}

/// Takes the server's events: in push mode nobody else does, and a pass a
/// second would pile up. A failed item is kept for
/// [`PushEndpoint::poll_failed`] once a version.
fn take_events(
    server: &mut Server,
    units: &[Unit],
    files: &[PushItem],
    (failed, reported): (
        &mut VecDeque<PushFailure>,
        &mut std::collections::BTreeSet<crate::ItemId>,
    ),
) {
    let name = |f: &usize| {
        files
            .get(*f)
            .map_or_else(String::new, |f| f.info.name.clone())
    };
    while let Some(ev) = server.poll_event() {
        let ServerEvent::ItemFailed { item, reason } = ev else {
            continue;
        };
        if !reported.insert(item) {
            continue;
        }
        let names = match units.get(item.0 as usize) {
            Some(Unit::File(f)) => vec![name(f)],
            Some(Unit::Pack(members)) => members.iter().map(|(f, _)| name(f)).collect(),
            None => continue,
        };
        failed.push_back(PushFailure { names, reason });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(d: Duration) -> f64 {
        d.as_secs_f64() * 1e3
    }

    #[test]
    fn the_catalogue_comes_several_times_a_cycle_within_its_bounds() {
        let (piece, rate) = (1_000u64, 100e6);
        // One pass of the set: 1 MiB, 4 MiB and 32 MiB at 100 Mbit/s.
        let cycle = |mib: f64| Duration::from_secs_f64(mib * 8.0 * 1.048_576 / 100.0);
        assert_eq!(ms(catalogue_period(piece, cycle(1.0), rate)), 20.0);
        let four = ms(catalogue_period(piece, cycle(4.0), rate));
        assert!((four - 335.5 / 8.0).abs() < 1.0, "{four}");
        assert_eq!(ms(catalogue_period(piece, cycle(32.0), rate)), 250.0);
        // A large catalogue takes at most CATALOGUE_SHARE of the rate
        // beside a set of many times its bytes.
        for mib in [32.0, 1e6] {
            let p = catalogue_period(1_000_000, cycle(mib), rate);
            assert!((ms(p) - 1600.0).abs() < 1e-6, "{p:?}");
        }
        // Beside a set of about its own bytes, its share of the two: a
        // copy takes about as long as a pass. Never more than half.
        let (c, one) = (1_048_576u64, cycle(1.0));
        assert!((catalogue_share(c, one, rate) - 0.5).abs() < 1e-9);
        let p = catalogue_period(c, cycle(3.0), rate);
        let pass = cycle(3.0).as_secs_f64() * 1e3;
        assert!(
            (ms(p) - pass * 4.0 / 3.0).abs() < 1.0,
            "{p:?} for a pass of {pass} ms"
        );
        let huge = catalogue_period(10 * c, cycle(0.5), rate);
        assert!((ms(huge) - 10.0 * 8.0 * 1.048_576 / 100.0 * 1e3 / 0.5).abs() < 1e-6);
        // So does a small one on a slow link: 1,000 bytes at 1 Mbit/s
        // beside a pass of 1 s.
        let slow = catalogue_period(piece, Duration::from_secs(1), 1e6);
        assert!((ms(slow) - 160.0).abs() < 1e-6, "{slow:?}");
        // With no data at all, half the rate.
        let empty = catalogue_period(piece, Duration::ZERO, 1e6);
        assert!((ms(empty) - 20.0).abs() < 1e-6, "{empty:?}");
        let alone = catalogue_period(100 * piece, Duration::ZERO, 1e6);
        assert!((ms(alone) - 1600.0).abs() < 1e-6, "{alone:?}");
        // No rate at all is a long period, not a panic.
        assert!(catalogue_period(piece, cycle(1.0), 0.0) >= CATALOGUE_PERIOD);
    }
}
