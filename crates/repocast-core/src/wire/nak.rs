//! NAKs: after a transmission, how many more symbols a client needs.
//!
//! A NAK carries, per block still undecoded, the count of further symbols
//! the client needs, plus how many packets of the transmission it received
//! out of how many it expected (the server's loss estimate). Only for the
//! exact-packet and XOR-parity baselines does it also list the missing
//! source symbol ids. NAKs travel on the reliable request connection.

use super::WireError;
use super::codec::{Reader, Writer, check_max};
use crate::{BlockId, ItemId, TransmissionId};

/// Most blocks one NAK may name.
pub const MAX_NAK_BLOCKS: u32 = 1 << 20;
/// Most missing symbol ids one NAK may list (exact-packet baselines).
pub const MAX_NAK_MISSING: u32 = 1 << 22;

/// One block's need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockNeed {
    /// The block.
    pub block: BlockId,
    /// Further symbols needed to decode it.
    pub count: u32,
    /// Missing source symbol ids (exact-packet and XOR baselines only).
    pub missing: Vec<u32>,
}

/// A parsed NAK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NakRepr {
    /// The transmission the NAK answers.
    pub transmission: TransmissionId,
    /// The item.
    pub item: ItemId,
    /// Packets of the transmission the client received.
    pub received: u32,
    /// Packets of the transmission the client expected.
    pub expected: u32,
    /// Per-block needs, blocks ascending.
    pub needs: Vec<BlockNeed>,
}

impl NakRepr {
    /// Sum of the per-block counts.
    pub fn total_needed(&self) -> u64 {
        self.needs.iter().map(|n| n.count as u64).sum()
    }

    pub(crate) fn parse_body(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let transmission = TransmissionId(r.u32()?);
        let item = ItemId(r.u32()?);
        let received = r.u32()?;
        let expected = r.u32()?;
        let n = r.count("nak blocks", MAX_NAK_BLOCKS, 12)?;
        let mut needs = Vec::with_capacity(n);
        let mut total_missing = 0u64;
        for _ in 0..n {
            let block = BlockId(r.u32()?);
            let count = r.u32()?;
            let m = r.count("nak missing", MAX_NAK_MISSING, 4)?;
            total_missing += m as u64;
            check_max("nak missing total", total_missing, MAX_NAK_MISSING as u64)?;
            let mut missing = Vec::with_capacity(m);
            for _ in 0..m {
                missing.push(r.u32()?);
            }
            needs.push(BlockNeed {
                block,
                count,
                missing,
            });
        }
        Ok(NakRepr {
            transmission,
            item,
            received,
            expected,
            needs,
        })
    }

    pub(crate) fn emit_body(&self, w: &mut Writer<'_>) {
        w.u32(self.transmission.0)
            .u32(self.item.0)
            .u32(self.received)
            .u32(self.expected)
            .count(self.needs.len());
        for n in &self.needs {
            w.u32(n.block.0).u32(n.count).count(n.missing.len());
            for &m in &n.missing {
                w.u32(m);
            }
        }
    }
}
