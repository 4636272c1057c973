//! Manifest entries: what a client must know to receive and verify an item.
//!
//! An entry gives the item's size, the BLAKE3 hash of the whole item, a
//! BLAKE3 hash per source block (so a client verifies each block before it
//! writes it, and a resume journal can trust what is on disk) and the FEC
//! parameters from which both sides derive the same block layout
//! ([`crate::fec::layout`]).

use super::WireError;
use super::codec::{Reader, Writer, check_max};
use crate::ItemId;
use crate::fec::CodeKind;

/// Longest item name, in bytes.
pub const MAX_NAME_LEN: usize = 4096;
/// Largest item accepted, in bytes (1 TiB).
pub const MAX_ITEM_SIZE: u64 = 1 << 40;
/// Most block hashes in one manifest entry.
pub const MAX_BLOCKS: u32 = 1 << 20;
/// Smallest symbol size accepted.
pub const MIN_SYMBOL_SIZE: u16 = 16;

/// FEC parameters of an item; the block layout follows from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FecParams {
    /// The erasure code.
    pub code: CodeKind,
    /// Bytes per symbol (even, at least [`MIN_SYMBOL_SIZE`]).
    pub symbol_size: u16,
    /// Largest source block, in symbols.
    pub max_block_symbols: u32,
}

impl FecParams {
    pub(crate) fn parse_body(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let code = CodeKind::from_u8(r.u8()?).ok_or(WireError::OutOfRange {
            field: "code",
            value: 0,
        })?;
        let symbol_size = r.u16()?;
        if symbol_size < MIN_SYMBOL_SIZE
            || symbol_size % 2 != 0
            || symbol_size as usize > super::data::MAX_SYMBOL_SIZE
        {
            return Err(WireError::OutOfRange {
                field: "symbol size",
                value: symbol_size as u64,
            });
        }
        let max_block_symbols = r.u32()?;
        if max_block_symbols == 0 || max_block_symbols > code.max_block_symbols() {
            return Err(WireError::OutOfRange {
                field: "block symbols",
                value: max_block_symbols as u64,
            });
        }
        Ok(FecParams {
            code,
            symbol_size,
            max_block_symbols,
        })
    }

    pub(crate) fn emit_body(&self, w: &mut Writer<'_>) {
        w.u8(self.code.to_u8())
            .u16(self.symbol_size)
            .u32(self.max_block_symbols);
    }
}

/// A parsed manifest entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEntry {
    /// The item.
    pub item: ItemId,
    /// Its relative path in the repository.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// BLAKE3 of the whole item.
    pub hash: [u8; 32],
    /// FEC parameters.
    pub fec: FecParams,
    /// BLAKE3 of each source block's bytes (empty when running without
    /// payloads, in the simulator).
    pub block_hashes: Vec<[u8; 32]>,
}

impl ManifestEntry {
    /// Whether `other` describes the same content laid out the same way
    /// (size, hash, FEC parameters and block hashes), under any name or
    /// item id: what a new push catalogue version carries over.
    pub fn same_content(&self, other: &ManifestEntry) -> bool {
        (self.size, self.hash, self.fec, &self.block_hashes)
            == (other.size, other.hash, other.fec, &other.block_hashes)
    }

    pub(crate) fn parse_body(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let item = ItemId(r.u32()?);
        let name = r.string("item name", MAX_NAME_LEN)?;
        let size = r.u64()?;
        check_max("item size", size, MAX_ITEM_SIZE)?;
        let hash = r.hash()?;
        let fec = FecParams::parse_body(r)?;
        let n = r.count("block hashes", MAX_BLOCKS, 32)?;
        let mut block_hashes = Vec::with_capacity(n);
        for _ in 0..n {
            block_hashes.push(r.hash()?);
        }
        Ok(ManifestEntry {
            item,
            name,
            size,
            hash,
            fec,
            block_hashes,
        })
    }

    pub(crate) fn emit_body(&self, w: &mut Writer<'_>) {
        w.u32(self.item.0)
            .string(&self.name)
            .u64(self.size)
            .bytes(&self.hash);
        self.fec.emit_body(w);
        w.count(self.block_hashes.len());
        for h in &self.block_hashes {
            w.bytes(h);
        }
    }
}
