//! One requested item on the client: its manifest, block decoders, and the
//! transmission of it the client is listening to.

use crate::fec::BlockDecoder;
use crate::fec::layout::Layout;
use crate::rng::Rng;
use crate::wire::{BlockNeed, ManifestEntry};
use crate::{BlockId, Instant, TransmissionId};

/// Where the item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemPhase {
    /// Requested; no manifest yet.
    Requested,
    /// Receiving.
    Receiving,
    /// Every block verified; waiting for the driver's whole-item check.
    Assembled,
    /// Verified and complete.
    Complete,
    /// Failed (see the event's reason).
    Failed,
}

/// The transmission being listened to.
#[derive(Debug, Clone)]
pub struct Listening {
    pub id: TransmissionId,
    pub total: u32,
    pub first_seq: Option<u32>,
    pub last_seq: u32,
    pub received: u32,
    /// When the last packet of it arrived.
    pub last_heard: Instant,
    pub deadline: Instant,
    pub ended: bool,
    /// Ended without its end announcement (a newer transmission began, or
    /// its deadline passed), and taken back up if more of it comes with at
    /// least this many packets left: another transmission may interrupt a send
    /// (`server::preempt`). `None`: it is over.
    pub reopen_left: Option<u32>,
    /// Packets seen (from its first one heard) at which its next early
    /// loss report goes out: [`super::LOSS_REPORT_AFTER`], then twice as
    /// many each time, so a long send is reported on a few times, each
    /// on twice the packets, and at most 22 times in all.
    pub next_report: u32,
    /// The block of the packets heard last, and how many in a row.
    pub run: (u32, u32),
    /// Short-block hints sent on it (at most [`super::max_hints`]) and
    /// the blocks they were for.
    pub hinted: (u32, Vec<u32>),
}

impl Listening {
    /// Packets the client should have seen (from its first packet on).
    pub fn expected(&self) -> u32 {
        let first = self.first_seq.unwrap_or(0);
        // Sequence numbers come from the wire: u32::MAX must not overflow.
        let next = self.last_seq.saturating_add(1);
        let last = if self.ended {
            self.total.max(next)
        } else {
            next
        };
        last.saturating_sub(first).max(self.received)
    }
}

/// Receive state of one item.
pub struct ItemRx {
    pub phase: ItemPhase,
    pub manifest: Option<ManifestEntry>,
    pub layout: Option<Layout>,
    pub listen_from: TransmissionId,
    pub decoders: Vec<Option<Box<dyn BlockDecoder>>>,
    pub decoded: Vec<bool>,
    pub blocks_left: u32,
    pub listening: Option<Listening>,
    /// NAK due for this transmission at this time.
    pub report_due: Option<(Instant, TransmissionId)>,
    pub corrupt_blocks: u32,
    /// Screenings of rejected blocks' symbols that found the bad share,
    /// and those that did not (`Client::may_screen`).
    pub screens_won: u32,
    pub screens_lost: u32,
    /// Item-done report held until the driver confirms the whole hash.
    pub done_report: Option<crate::wire::ClientMsg>,
    /// Symbols held by blocks the driver evicted to disk, per block.
    pub evicted: crate::hash::FastMap<u32, u32>,
    /// Blocks out as decode jobs (`client::decode`), with the job's id.
    pub decoding: crate::hash::FastMap<u32, u64>,
    /// The transmission whose report said it needed nothing while blocks
    /// were out being decoded: if one comes back failed, it is asked for
    /// then (`Client::recheck`). A newer transmission clears it.
    pub recheck: Option<TransmissionId>,
}

impl Default for ItemRx {
    fn default() -> Self {
        Self::new()
    }
}

impl ItemRx {
    /// A requested item without its manifest yet.
    pub fn new() -> Self {
        ItemRx {
            phase: ItemPhase::Requested,
            manifest: None,
            layout: None,
            listen_from: TransmissionId(u32::MAX),
            decoders: Vec::new(),
            decoded: Vec::new(),
            blocks_left: 0,
            listening: None,
            report_due: None,
            corrupt_blocks: 0,
            screens_won: 0,
            screens_lost: 0,
            done_report: None,
            evicted: Default::default(),
            decoding: Default::default(),
            recheck: None,
        }
    }

    /// Whether it takes transmission `t` as one to listen to: it is
    /// being received, and `t` is not older than its manifest.
    pub fn listens_to(&self, t: TransmissionId) -> bool {
        self.phase == ItemPhase::Receiving && t >= self.listen_from
    }

    /// Installs the manifest and layout.
    pub fn set_manifest(&mut self, m: ManifestEntry, layout: Layout, listen_from: TransmissionId) {
        let n = layout.blocks() as usize;
        self.decoders = (0..n).map(|_| None).collect();
        self.decoded = vec![false; n];
        self.blocks_left = layout.blocks();
        self.manifest = Some(m);
        self.layout = Some(layout);
        self.listen_from = listen_from;
        self.decoding.clear();
        self.phase = ItemPhase::Receiving;
    }

    /// The decoder of block `b`, created on first use.
    #[inline]
    pub fn decoder(
        &mut self,
        b: u32,
        payloads: bool,
        rng: &mut Rng,
    ) -> Option<&mut Box<dyn BlockDecoder>> {
        let slot = self.decoders.get_mut(b as usize)?;
        if slot.is_none() {
            let (layout, m) = (self.layout?, self.manifest.as_ref()?);
            let k = layout.block_symbols(b);
            *slot = Some(m.fec.code.decoder(k, layout.symbol_size(), payloads, rng));
        }
        slot.as_mut()
    }

    /// Per-block needs for a NAK.
    pub fn needs(&self) -> Vec<BlockNeed> {
        let blocks = self.layout.map_or(0, |l| l.blocks());
        (0..blocks).filter_map(|b| self.block_need(b)).collect()
    }

    /// What block `b` still needs, if it is not decoded.
    pub fn block_need(&self, b: u32) -> Option<BlockNeed> {
        let (Some(layout), Some(m)) = (self.layout, self.manifest.as_ref()) else {
            return None;
        };
        // A block out as a decode job has what it needs.
        if self.decoded.get(b as usize).is_none_or(|d| *d) || self.decoding.contains_key(&b) {
            return None;
        }
        let lists = m.fec.code.naks_list_ids();
        let k = layout.block_symbols(b);
        let (count, missing) = match self.decoders.get(b as usize)? {
            Some(d) => (d.needed(), if lists { d.missing() } else { Vec::new() }),
            None => {
                let held = self.evicted.get(&b).copied().unwrap_or(0);
                (
                    k.saturating_sub(held),
                    if lists { (0..k).collect() } else { Vec::new() },
                )
            }
        };
        Some(BlockNeed {
            block: BlockId(b),
            count,
            missing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Instant, TransmissionId};

    #[test]
    fn expected_packets_do_not_overflow_at_the_last_sequence_number() {
        let l = Listening {
            id: TransmissionId(1),
            total: 10,
            first_seq: Some(u32::MAX - 1),
            last_seq: u32::MAX,
            received: 2,
            last_heard: Instant::ZERO,
            deadline: Instant::ZERO,
            ended: true,
            reopen_left: None,
            next_report: crate::client::LOSS_REPORT_AFTER,
            run: (0, 0),
            hinted: (0, Vec::new()),
        };
        assert_eq!(l.expected(), 2);
    }
}
