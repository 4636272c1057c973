//! One transmission on the data channel: its plan and its packets.
//!
//! A plan is a list of segments (a block and the symbol ids to send from
//! it); blocks are sent in order, one encoder alive at a time, so the server
//! holds at most one block of item data. Transmissions are non-preemptive:
//! once started, a plan is sent to the end.

use super::config::{BlockSource, ItemInfo};
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

/// A transmission in progress.
pub struct Transmission {
    pub id: TransmissionId,
    pub item: ItemId,
    pub kind: AnnounceKind,
    pub total: u32,
    pub first_block: u32,
    pub block_count: u32,
    plan: Vec<Segment>,
    seg: usize,
    pos: u32,
    seq: u32,
    encoder: Option<(u32, Box<dyn BlockEncoder>)>,
}

/// Why a packet could not be produced.
#[derive(Debug)]
pub struct ReadFailed(pub String);

impl Transmission {
    /// A transmission of `plan` (segments with no ids are dropped).
    pub fn new(id: TransmissionId, item: ItemId, kind: AnnounceKind, plan: Vec<Segment>) -> Self {
        let plan: Vec<Segment> = plan.into_iter().filter(|s| s.esis.len() > 0).collect();
        let total = plan.iter().map(|s| s.esis.len()).sum();
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
            plan,
            seg: 0,
            pos: 0,
            seq: 0,
            encoder: None,
        }
    }

    /// Whether every packet has been produced.
    pub fn finished(&self) -> bool {
        self.seg >= self.plan.len()
    }

    /// Packets produced so far.
    pub fn sent(&self) -> u32 {
        self.seq
    }

    /// Produces the next data packet (payload only when `source` is given).
    pub fn next_packet(
        &mut self,
        session: SessionId,
        info: &ItemInfo,
        layout: &Layout,
        code: CodeKind,
        source: Option<&mut dyn BlockSource>,
    ) -> Result<Option<DataRepr>, ReadFailed> {
        let Some(seg) = self.plan.get(self.seg) else {
            return Ok(None);
        };
        let (block, esi) = (seg.block, seg.esis.get(self.pos));
        let mut payload = Vec::new();
        if let Some(src) = source {
            if self.encoder.as_ref().is_none_or(|(b, _)| *b != block) {
                self.encoder = None;
                let k = layout.block_symbols(block);
                let t = layout.symbol_size() as usize;
                let mut data = Vec::with_capacity(k as usize * t);
                src.read(
                    self.item,
                    layout.block_offset(block),
                    layout.block_len(block) as usize,
                    &mut data,
                )
                .map_err(ReadFailed)?;
                if data.len() as u64 != layout.block_len(block) {
                    return Err(ReadFailed(format!(
                        "{}: short read of block {block}",
                        info.name
                    )));
                }
                data.resize(k as usize * t, 0);
                let enc = code
                    .encoder(k, layout.symbol_size(), data)
                    .map_err(|e| ReadFailed(e.to_string()))?;
                self.encoder = Some((block, enc));
            }
            if let Some((_, enc)) = self.encoder.as_mut() {
                enc.symbol(esi, &mut payload);
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
        };
        self.seq += 1;
        self.pos += 1;
        if self.pos >= seg.esis.len() {
            self.seg += 1;
            self.pos = 0;
        }
        if self.finished() {
            self.encoder = None;
        }
        Ok(Some(pkt))
    }
}
