//! An in-memory [`BlockSource`] for the payload runs ([`crate::lan`], [`crate::push_lan`]) and tests,
//! with an in-memory spool for a push server's symbols made ahead.

use repocast_core::ItemId;
use repocast_core::fec::layout::Layout;
use repocast_core::server::spool::{MemorySpool, SymbolSpool};
use repocast_core::server::{BlockSource, ItemInfo, ServerError, SourceError};
use repocast_core::wire::FecParams;

/// Items held in memory, by item id.
pub struct MemorySource {
    items: Vec<Vec<u8>>,
    /// Where a push server spools symbols made ahead (`push`'s spool file).
    pub spool: MemorySpool,
    /// Bytes read so far (what a server's reads would cost a disk).
    pub read_bytes: u64,
}

impl MemorySource {
    /// A source over `items` (index = item id).
    pub fn new(items: Vec<Vec<u8>>) -> Self {
        MemorySource {
            items,
            spool: MemorySpool::new(),
            read_bytes: 0,
        }
    }

    /// The [`ItemInfo`] of `bytes`: size, whole hash and block hashes.
    pub fn item_info(name: &str, bytes: &[u8], fec: &FecParams) -> Result<ItemInfo, ServerError> {
        let layout =
            Layout::new(bytes.len() as u64, fec).map_err(|source| ServerError::Layout {
                name: name.to_string(),
                source,
            })?;
        let block_hashes = (0..layout.blocks())
            .map(|b| {
                let off = layout.block_offset(b) as usize;
                *blake3::hash(&bytes[off..off + layout.block_len(b) as usize]).as_bytes()
            })
            .collect();
        Ok(ItemInfo {
            name: name.to_owned(),
            size: bytes.len() as u64,
            hash: *blake3::hash(bytes).as_bytes(),
            block_hashes,
        })
    }
}

impl BlockSource for MemorySource {
    fn read(
        &mut self,
        item: ItemId,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), SourceError> {
        let data = self.items.get(item.0 as usize).ok_or(SourceError::NoItem)?;
        let s = usize::try_from(offset).map_err(|_| SourceError::PastEnd)?;
        let chunk = data
            .get(s..s.saturating_add(len))
            .ok_or(SourceError::PastEnd)?;
        out.extend_from_slice(chunk);
        self.read_bytes += chunk.len() as u64;
        Ok(())
    }

    fn spool(&mut self) -> Option<&mut dyn SymbolSpool> {
        Some(&mut self.spool)
    }
}
