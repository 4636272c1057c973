//! Scratch storage for a push-mode server's repair symbols made ahead.
//!
//! A streamed item ([`super::encoders`]) makes each block's repair symbols
//! a batch at a time, and each batch costs a read and encode of the whole
//! block. Held in memory, a batch is the memory budget shared among the
//! item's blocks, so a large item's batches are small and its encodes
//! many. Given a spool, the server writes its batches there instead, up
//! to a block's worth of symbols per batch within the spool's own (disk)
//! budget, so each block is read and encoded about once per pass whatever
//! the item's size. The driver provides the spool through
//! [`super::BlockSource::spool`] (a temporary file on disk in the tokio
//! layer, [`MemorySpool`] in the simulator and tests); the core only says
//! which bytes go where.

/// Where the server may keep symbols it made ahead, by byte offset; the
/// server never asks for bytes it did not write, nor past its
/// [`crate::server::ServerConfig::push_spool_bytes`].
pub trait SymbolSpool {
    /// Stores `bytes` at `offset`.
    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> Result<(), SpoolError>;
    /// Appends the `len` bytes stored at `offset` to `out`.
    fn read_at(&mut self, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<(), SpoolError>;
}

/// The spool failed; the server falls back to holding a memory budget's
/// worth of symbols, and counts it.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// The driver's storage failed.
    #[error("symbol spool: {0}")]
    Io(#[from] std::io::Error),
    /// The bytes asked for were never written.
    #[error("symbol spool: {len} bytes at {offset} were never written")]
    Unwritten {
        /// Where.
        offset: u64,
        /// How many.
        len: usize,
    },
}

/// A spool in memory, for the simulator and tests (it holds what the
/// server writes, so it bounds nothing).
#[derive(Debug, Default)]
pub struct MemorySpool {
    bytes: Vec<u8>,
    /// Bytes written, all told.
    pub written: u64,
    /// Bytes read, all told.
    pub read: u64,
}

impl MemorySpool {
    /// An empty spool.
    pub fn new() -> Self {
        Self::default()
    }

    /// The highest offset written to, plus one: the disk a file spool
    /// would take.
    pub fn extent(&self) -> u64 {
        self.bytes.len() as u64
    }
}

impl SymbolSpool for MemorySpool {
    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> Result<(), SpoolError> {
        let at = usize::try_from(offset).map_err(|_| SpoolError::Unwritten {
            offset,
            len: bytes.len(),
        })?;
        let end = at + bytes.len();
        if self.bytes.len() < end {
            self.bytes.resize(end, 0);
        }
        self.bytes[at..end].copy_from_slice(bytes);
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn read_at(&mut self, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<(), SpoolError> {
        let slice = usize::try_from(offset)
            .ok()
            .and_then(|at| self.bytes.get(at..at.checked_add(len)?))
            .ok_or(SpoolError::Unwritten { offset, len })?;
        out.extend_from_slice(slice);
        self.read += len as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memory_spool_gives_back_what_was_written_and_refuses_the_rest() {
        let mut s = MemorySpool::new();
        s.write_at(10, b"abc").expect("write");
        let mut out = vec![1];
        s.read_at(10, 3, &mut out).expect("read");
        assert_eq!(out, [1, b'a', b'b', b'c']);
        assert_eq!(s.extent(), 13);
        assert!(matches!(
            s.read_at(12, 2, &mut out),
            Err(SpoolError::Unwritten { offset: 12, len: 2 })
        ));
        assert_eq!((s.written, s.read), (3, 3));
    }
}
