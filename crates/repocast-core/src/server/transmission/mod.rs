//! One transmission on the data channel: its plan and its packets.
//!
//! A plan is a list of segments (a block and the symbol ids to send from
//! it), sent in order. Its encoders come from the server's cache of recent
//! blocks ([`super::encoders::EncoderCache`], bounded by
//! `ServerConfig::encoder_cache_bytes`) when it has one, so a repair soon
//! after a send finds them built; without one, one encoder is alive at a
//! time and the server holds at most one block of item data. A scheduled
//! send may come in two loss tiers ([`crate::policy::tiers`]): every
//! block's first-tier segment, then every block's tail. A plan is sent to
//! its end, though a long scheduled send may be put aside for a short one
//! and resume where it stopped ([`super::preempt`]).

mod edit;

use super::config::BlockSource;
use super::encoders::EncoderCache;
use crate::fec::layout::Layout;
use crate::fec::{BlockEncoder, CodeKind};
use crate::wire::{AnnounceKind, DataRepr};
use crate::{BlockId, ItemId, SessionId, TransmissionId};

/// Symbol ids to send from one block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Esis {
    /// `count` ids from `start`, wrapping at `space`.
    Range { start: u32, count: u32, space: u32 },
    /// Exactly these ids (exact-packet repair).
    List(Vec<u32>),
}

impl Esis {
    fn len(&self) -> u32 {
        match self {
            Esis::Range { count, .. } => *count,
            Esis::List(v) => v.len() as u32,
        }
    }

    /// Takes the first `n` ids (all if fewer) off `self` and returns them.
    fn split_front(&mut self, n: u32) -> Esis {
        match self {
            Esis::Range {
                start,
                count,
                space,
            } => {
                let take = n.min(*count);
                let piece = Esis::Range {
                    start: *start,
                    count: take,
                    space: *space,
                };
                *start = ((*start as u64 + take as u64) % (*space).max(1) as u64) as u32;
                *count -= take;
                piece
            }
            Esis::List(v) => {
                let rest = v.split_off((n as usize).min(v.len()));
                Esis::List(std::mem::replace(v, rest))
            }
        }
    }

    fn get(&self, i: u32) -> u32 {
        match self {
            Esis::Range { start, space, .. } => {
                ((*start as u64 + i as u64) % (*space).max(1) as u64) as u32
            }
            Esis::List(v) => v.get(i as usize).copied().unwrap_or(0),
        }
    }
}

/// A block and the ids to send from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The block.
    pub block: u32,
    /// Ids to send.
    pub esis: Esis,
}

impl Segment {
    /// How many ids it sends.
    pub fn esis_len(&self) -> u32 {
        self.esis.len()
    }
}

/// A transmission in progress.
pub struct Transmission {
    pub id: TransmissionId,
    pub item: ItemId,
    pub kind: AnnounceKind,
    pub total: u32,
    pub first_block: u32,
    pub block_count: u32,
    plan: Vec<Segment>,
    /// Where the tail tier starts in `plan` (its length: no tail).
    tail_start: usize,
    seg: usize,
    pos: u32,
    seq: u32,
    /// Its own encoders when the server lends it no cache: one block at a
    /// time (a budget of 0 keeps only the last one built).
    own: EncoderCache,
    /// Present for an ARM transmission (interleaved, open-ended).
    pub arm: Option<ArmTx>,
    /// Present for a scheduled send sized by `FEC(maxloss+x)`: how, so
    /// the blocks not yet sent can grow on an early loss report.
    pub growth: Option<Growth>,
    /// Present for a push pass: the Fcast order of its planned symbols.
    fcast: Option<super::fcast::Fcast>,
    /// Packets of repairs that have pre-empted it so far
    /// ([`super::preempt`]).
    pub preempted: u64,
}

/// How a scheduled send under `FEC(maxloss+x)` was sized.
#[derive(Debug, Clone)]
pub struct Growth {
    /// Receivers it was planned for (the policy's R).
    pub listeners: u32,
    /// The largest loss estimate the counts were computed with.
    pub max_loss: f64,
    /// The loss its first tier was sized for, if it has two.
    pub first_loss: Option<f64>,
    /// Each block's need (symbols before redundancy), by block number.
    pub needs: Vec<u32>,
    /// The odds of decoding its first tier was sized for on a link with
    /// time to spare (`ServerConfig::idle_fec`), if any.
    pub odds: Option<f64>,
    /// The same for the whole send (its lossiest receivers), if any.
    pub tail_odds: Option<f64>,
}

/// State of an ARM transmission (SPEC 3.5): interleaved blocks, round r
/// sends symbol `bases[b] + r` of every block b, until `maxseq + relax`.
pub struct ArmTx {
    /// Last symbol the sender plans to send.
    pub maxseq: u32,
    /// Extra symbols after maxseq.
    pub relax: u32,
    /// Decrease of maxseq after a probe without NAK.
    pub decrease: u32,
    /// Ceiling on maxseq (forged NAKs cannot make it endless).
    pub cap: u32,
    /// Round-trip estimate.
    pub rtt: std::time::Duration,
    bases: Vec<u32>,
    spaces: Vec<u32>,
    encoders: std::collections::HashMap<u32, Box<dyn BlockEncoder>>,
    first_probe: u32,
    next_probe: u32,
    /// The last probe's time and whether a NAK answered it.
    last_probe: Option<(crate::Instant, bool)>,
}

impl ArmTx {
    /// ARM state over blocks whose fresh ids start at `bases`.
    pub fn new(
        bases: Vec<u32>,
        spaces: Vec<u32>,
        maxseq: u32,
        params: crate::policy::arm::ArmParams,
        rtt: std::time::Duration,
    ) -> Self {
        ArmTx {
            cap: maxseq.saturating_mul(20).max(64),
            maxseq,
            relax: params.relax,
            decrease: params.decrease,
            rtt,
            bases,
            spaces,
            encoders: Default::default(),
            first_probe: (maxseq / 5).max(1),
            next_probe: (maxseq / 5).max(1),
            last_probe: None,
        }
    }

    /// A receiver asked for `want`; `rtt` measured from its echo.
    pub fn on_nak(&mut self, want: u32, rtt: Option<std::time::Duration>) {
        self.maxseq = self.maxseq.max(want.min(self.cap));
        if let Some(p) = self.last_probe.as_mut() {
            p.1 = true;
        }
        if let Some(r) = rtt {
            // EWMA with gain 1/8, as TCP does.
            self.rtt = (self.rtt * 7 + r) / 8;
        }
    }

    /// Each block's next fresh symbol id after `sent` packets (round r of
    /// block b is packet r x blocks + b).
    pub fn next_bases(&self, sent: u32) -> Vec<u32> {
        let g = self.bases.len() as u32;
        (0..g)
            .map(|b| {
                let rounds = (sent + g - 1 - b) / g;
                let space = self.spaces[b as usize].max(1) as u64;
                ((self.bases[b as usize] as u64 + rounds as u64) % space) as u32
            })
            .collect()
    }

    /// Ends the transmission at `seq` (every receiver has decoded).
    pub fn stop(&mut self, seq: u32) {
        self.maxseq = seq;
        self.relax = 0;
    }
}

/// Why a packet could not be produced.
#[derive(Debug)]
pub struct ReadFailed(pub super::SourceError);

impl Transmission {
    /// A transmission of `plan` (segments with no ids are dropped).
    pub fn new(id: TransmissionId, item: ItemId, kind: AnnounceKind, plan: Vec<Segment>) -> Self {
        let plan: Vec<Segment> = plan.into_iter().filter(|s| s.esis.len() > 0).collect();
        // Counts come from NAKs: the total saturates rather than wrapping.
        let total = plan
            .iter()
            .fold(0u32, |t, s| t.saturating_add(s.esis.len()));
        let first_block = plan.iter().map(|s| s.block).min().unwrap_or(0);
        let last = plan.iter().map(|s| s.block).max().unwrap_or(0);
        Transmission {
            id,
            item,
            kind,
            total,
            first_block,
            block_count: if plan.is_empty() {
                0
            } else {
                last - first_block + 1
            },
            tail_start: plan.len(),
            plan,
            seg: 0,
            pos: 0,
            seq: 0,
            own: EncoderCache::new(0, 0),
            arm: None,
            growth: None,
            fcast: None,
            preempted: 0,
        }
    }

    /// Sends the plan in Fcast order (round by round over the blocks,
    /// shuffled by `rng`; spans of at most `span_bytes` when the item can
    /// be neither kept nor streamed) instead of block after block, with
    /// its symbols from `encoders` (handed back by
    /// [`Transmission::take_encoders`]).
    pub fn interleave(
        &mut self,
        layout: &Layout,
        span_bytes: u64,
        rng: crate::rng::Rng,
        encoders: EncoderCache,
    ) {
        if self.arm.is_none() {
            self.fcast = Some(super::fcast::Fcast::new(
                self.item, &self.plan, layout, span_bytes, rng, encoders,
            ));
        }
    }

    /// For a push pass in progress: each block's first planned id not yet
    /// sent, as (block, id), for the blocks it has one for.
    pub fn unsent_ids(&self) -> Vec<(u32, u32)> {
        let Some(f) = self.fcast.as_ref() else {
            return Vec::new();
        };
        let mut out: Vec<(u32, u32)> = Vec::new();
        for (seg, taken) in self.plan.iter().zip(f.taken_per_segment()) {
            let Esis::Range {
                start,
                count,
                space,
            } = seg.esis
            else {
                continue;
            };
            if taken < count && !out.iter().any(|&(b, _)| b == seg.block) {
                let id = (start as u64 + taken as u64) % space.max(1) as u64;
                out.push((seg.block, id as u32));
            }
        }
        out
    }

    /// The encoder cache of an interleaved transmission.
    pub fn encoders(&self) -> Option<&EncoderCache> {
        self.fcast.as_ref().map(|f| &f.encoders)
    }

    /// The same, to change.
    pub fn encoders_mut(&mut self) -> Option<&mut EncoderCache> {
        self.fcast.as_mut().map(|f| &mut f.encoders)
    }

    /// The encoder cache of an interleaved transmission, for the next.
    pub fn take_encoders(&mut self) -> Option<EncoderCache> {
        self.fcast.take().map(|f| f.encoders)
    }

    /// An ARM transmission of `blocks` blocks, `arm.maxseq` packets planned.
    pub fn arm(id: TransmissionId, item: ItemId, blocks: u32, arm: ArmTx) -> Self {
        let mut t = Transmission::new(id, item, AnnounceKind::First, Vec::new());
        t.total = arm.maxseq + arm.relax;
        t.block_count = blocks;
        t.arm = Some(arm);
        t
    }

    /// A scheduled send in two loss tiers: `first` (every block sized for
    /// the lower-loss receivers), then `tail` (the rest each block needs
    /// for the lossiest).
    pub fn tiered(
        id: TransmissionId,
        item: ItemId,
        kind: AnnounceKind,
        first: Vec<Segment>,
        tail: Vec<Segment>,
    ) -> Self {
        let tail_start = first.iter().filter(|s| s.esis.len() > 0).count();
        let mut t = Transmission::new(id, item, kind, first.into_iter().chain(tail).collect());
        t.tail_start = tail_start;
        t
    }

    /// Ends the transmission after the packets produced so far (nobody is
    /// left to receive the rest).
    pub fn cancel(&mut self) {
        self.seg = self.plan.len();
        if let Some(f) = self.fcast.as_mut() {
            f.cancel();
        }
        let seq = self.seq;
        if let Some(a) = self.arm.as_mut() {
            a.maxseq = seq;
            a.relax = 0;
        }
    }

    /// Whether every packet has been produced.
    pub fn finished(&self) -> bool {
        match &self.arm {
            Some(a) => self.seq >= a.maxseq.saturating_add(a.relax) || a.bases.is_empty(),
            None => match &self.fcast {
                Some(f) => f.finished(),
                None => self.seg >= self.plan.len(),
            },
        }
    }

    /// Packets produced so far.
    pub fn sent(&self) -> u32 {
        self.seq
    }

    /// Produces the next data packet (payload only when `source` is given),
    /// from the plan or, for ARM, from the interleaved open-ended rounds.
    /// A planned transmission takes its encoders from `kept` if given (and
    /// leaves them there), else holds one at a time.
    #[allow(clippy::too_many_arguments)]
    pub fn next(
        &mut self,
        now: crate::Instant,
        interval: std::time::Duration,
        session: SessionId,
        layout: &Layout,
        code: CodeKind,
        source: Option<&mut dyn BlockSource>,
        kept: Option<&mut EncoderCache>,
    ) -> Result<Option<DataRepr>, ReadFailed> {
        if self.arm.is_some() {
            self.next_arm_packet(now, interval, session, layout, code, source)
        } else {
            self.next_planned(session, layout, code, source, kept)
        }
    }

    fn next_planned(
        &mut self,
        session: SessionId,
        layout: &Layout,
        code: CodeKind,
        source: Option<&mut dyn BlockSource>,
        kept: Option<&mut EncoderCache>,
    ) -> Result<Option<DataRepr>, ReadFailed> {
        let (seg_i, pos) = match self.fcast.as_mut() {
            Some(f) => match f.next() {
                Some(p) => p,
                None => return Ok(None),
            },
            None => (self.seg, self.pos),
        };
        let Some(seg) = self.plan.get(seg_i) else {
            return Ok(None);
        };
        let (block, esi) = (seg.block, seg.esis.get(pos));
        let mut payload = Vec::new();
        if let Some(src) = source {
            let item = self.item;
            match self.fcast.as_mut() {
                Some(f) => {
                    f.encoders
                        .symbol(item, block, esi, layout, code, src, &mut payload)?;
                    if f.ahead_due() {
                        f.encoders.make_ahead(item, layout, code, src)?;
                    }
                }
                None => {
                    let cache = match kept {
                        Some(c) => c,
                        None => &mut self.own,
                    };
                    let bytes = super::encoders::charge(layout, code, block);
                    let mut loaded = false;
                    let load = || {
                        loaded = true;
                        load_encoder(item, block, layout, code, src)
                    };
                    cache
                        .get_or_load(item, block, bytes, load)?
                        .symbol(esi, &mut payload);
                    // A block loaded (or a segment begun) to send source
                    // symbols before repair ones is prepared off the
                    // sending path meanwhile, if the cache offloads, it
                    // is not prepared yet, and it is large enough for a
                    // job to be back in time.
                    let k = layout.block_symbols(block);
                    if (loaded || pos == 0)
                        && esi < k
                        && k >= super::encoders::MIN_JOB_SYMBOLS
                        && cache.offloads()
                        && (pos..seg.esis.len()).any(|i| seg.esis.get(i) >= k)
                    {
                        cache.offer_job(item, block);
                    }
                }
            }
        }
        let pkt = DataRepr {
            session,
            transmission: self.id,
            item: self.item,
            block: BlockId(block),
            symbol: esi,
            seq: self.seq,
            probe: None,
            payload,
            tag: Vec::new(),
            encrypted: false,
        };
        self.seq += 1;
        if self.fcast.is_none() {
            self.pos += 1;
            if self.pos >= seg.esis.len() {
                self.seg += 1;
                self.pos = 0;
            }
        }
        if self.finished() {
            self.own = EncoderCache::new(0, 0);
        }
        Ok(Some(pkt))
    }
}

/// Reads symbol `esi` (a source symbol, `esi` < k) of `block` of `item`
/// from `src` into `out`, zero-padded to the symbol size past the block's
/// end, as the block's encoder would give it.
pub(super) fn read_source_symbol(
    item: ItemId,
    block: u32,
    esi: u32,
    layout: &Layout,
    src: &mut dyn BlockSource,
    out: &mut Vec<u8>,
) -> Result<(), ReadFailed> {
    let t = layout.symbol_size() as usize;
    let from = esi as u64 * t as u64;
    let len = layout.block_len(block).saturating_sub(from).min(t as u64) as usize;
    out.clear();
    src.read(item, layout.block_offset(block) + from, len, out)
        .map_err(ReadFailed)?;
    if out.len() != len {
        return Err(ReadFailed(super::SourceError::Short(block)));
    }
    out.resize(t, 0);
    Ok(())
}

/// Reads block `block` of `item` from `src` and builds its encoder.
pub(super) fn load_encoder(
    item: ItemId,
    block: u32,
    layout: &Layout,
    code: CodeKind,
    src: &mut dyn BlockSource,
) -> Result<Box<dyn BlockEncoder>, ReadFailed> {
    let k = layout.block_symbols(block);
    let t = layout.symbol_size() as usize;
    let mut data = Vec::with_capacity(k as usize * t);
    src.read(
        item,
        layout.block_offset(block),
        layout.block_len(block) as usize,
        &mut data,
    )
    .map_err(ReadFailed)?;
    if data.len() as u64 != layout.block_len(block) {
        return Err(ReadFailed(super::SourceError::Short(block)));
    }
    data.resize(k as usize * t, 0);
    code.encoder(k, layout.symbol_size(), data)
        .map_err(|e| ReadFailed(e.into()))
}

impl Transmission {
    /// Produces the next packet of an ARM transmission: interleaved blocks,
    /// probes piggy-backed from K/5 on, one per RTT; maxseq lowered by d
    /// after a probe that drew no NAK within 2 RTT. Encoders for every block
    /// stay alive for the whole transmission (ARM holds the item's blocks).
    #[allow(clippy::too_many_arguments)]
    fn next_arm_packet(
        &mut self,
        now: crate::Instant,
        interval: std::time::Duration,
        session: SessionId,
        layout: &Layout,
        code: CodeKind,
        source: Option<&mut dyn BlockSource>,
    ) -> Result<Option<DataRepr>, ReadFailed> {
        if self.finished() {
            return Ok(None);
        }
        let seq = self.seq;
        let Some(a) = self.arm.as_mut() else {
            return Ok(None);
        };
        if let Some((t, answered)) = a.last_probe {
            if !answered && now >= t + a.rtt * 2 {
                a.maxseq = a.maxseq.saturating_sub(a.decrease).max(seq);
                a.last_probe = None;
            } else if answered {
                a.last_probe = None;
            }
        }
        let g = a.bases.len() as u32;
        let (block, round) = (seq % g, seq / g);
        let esi = ((a.bases[block as usize] as u64 + round as u64)
            % a.spaces[block as usize].max(1) as u64) as u32;
        let probe = if seq >= a.first_probe && seq >= a.next_probe {
            let per_rtt = (a.rtt.as_nanos() / interval.as_nanos().max(1)).max(1) as u32;
            a.next_probe = seq + per_rtt;
            a.last_probe = Some((now, false));
            Some(crate::wire::Probe {
                pts: a.maxseq.saturating_sub(seq),
                timestamp_us: now.as_micros(),
            })
        } else {
            None
        };
        let mut payload = Vec::new();
        if let Some(src) = source {
            let enc = match a.encoders.entry(block) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(load_encoder(self.item, block, layout, code, src)?)
                }
            };
            enc.symbol(esi, &mut payload);
        }
        self.seq += 1;
        self.total = self.total.max(self.seq);
        Ok(Some(DataRepr {
            session,
            transmission: self.id,
            item: self.item,
            block: BlockId(block),
            symbol: esi,
            seq,
            probe,
            payload,
            tag: Vec::new(),
            encrypted: false,
        }))
    }
}
