//! The push endpoint: `repocast push` as bytes out, no back channel.
//!
//! It wraps the [`Server`] state machine in push mode (the scheduler and
//! the Fcast passes of [`crate::profile::Profile::Push`], the same code the
//! simulator runs) and adds what a listener with no back channel needs:
//! the signed catalogue of the file set ([`crate::wire::catalogue`]), its
//! pieces spread over each catalogue period on the announcement group so a
//! listener tuning in at any moment has it within about a period (every
//! other copy repair pieces, when the catalogue is coded:
//! [`super::catalogue_code`]; how often: `push/catalogue_rate.rs`), and a
//! stop after a target redundancy. Each file set is a version
//! (`push/version.rs`). Data packets go out untagged (there is no secret
//! to share without a back channel); a listener checks every decoded
//! block against the signed catalogue's block hash.
//!
//! A driver calls [`PushEndpoint::poll_transmit`] until `None`, sleeps
//! until [`PushEndpoint::poll_timeout`], and on a changed file set calls
//! [`PushEndpoint::replace`] with a higher version.

mod catalogue_rate;
mod version;

pub use catalogue_rate::{
    CATALOGUE_COPIES_PER_CYCLE, CATALOGUE_PERIOD, CATALOGUE_SHARE, MAX_CATALOGUE_SHARE,
    MIN_CATALOGUE_PERIOD, catalogue_period, catalogue_share,
};

use super::Dest;
use super::catalogue_code::CatalogueCoder;
use super::pack::{PushSet, Unit, UnitSource};
use super::signing::BatchSigner;
use crate::auth::{Identity, PublicKey};
use crate::sched::SchedulerKind;
use crate::server::{
    BlockSource, ItemInfo, ResumePoint, Server, ServerConfig, ServerError, ServerEvent, Transmit,
};
use crate::wire::FecParams;
use crate::{Instant, SessionId};
use std::collections::VecDeque;
use std::time::Duration;

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
