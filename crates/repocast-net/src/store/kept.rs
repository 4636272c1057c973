//! The record of a partial file's spilled symbols kept for a later run
//! (`BlockStore::keep_spilled`): which symbol ids sit in each partly
//! received block's own place in the partial file, and which records of
//! the side file belong to it. Written whole beside the partial file when
//! a run stops short; read, checked and removed when the next run opens
//! the same content. It sits in the output folder, which is not ours
//! alone: everything in it is checked against the item's manifest and the
//! side file's length, and a record that does not fit is read as none
//! (its symbols are received again). A symbol's bytes are not checked
//! here: a block decoded from a wrong one fails its hash and starts over,
//! as with a forged packet.

use super::Partial;
use repocast_core::fec::layout::Layout;
use repocast_core::wire::{FecParams, ManifestEntry};
use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::path::PathBuf;

/// What a record starts with.
const MAGIC: &[u8; 8] = b"rckept1\0";
/// The largest record read: a block's ids, at most 4 bytes a symbol of
/// the file, and its side records.
pub const MAX_RECORD: u64 = 64 << 20;

/// A partly received block's symbols on disk: the first ones in its own
/// place in the partial file (a "crowd" near where the block will be
/// written, SPEC 3.6; ids here), any more in the side file as records of
/// id u32, length u32, bytes (offset and length of each batch here).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Spilled {
    pub ids: Vec<u32>,
    pub side: Vec<(u64, u32)>,
}

impl Spilled {
    /// About how many symbols the block holds on disk (side records are
    /// counted as whole symbols of `t` bytes).
    pub fn count(&self, t: usize) -> u32 {
        let side: u64 = self.side.iter().map(|s| u64::from(s.1)).sum();
        let side = side / (8 + t as u64).max(1);
        (self.ids.len() as u64 + side).min(u64::from(u32::MAX)) as u32
    }
}

/// What a record is of: an item's hash, size and FEC parameters.
pub type Content = ([u8; 32], u64, FecParams);

/// The record of `spilled` (blocks of an item of content `c`), with the
/// side file's length.
pub fn encode(c: &Content, side_len: u64, spilled: &BTreeMap<u32, Spilled>) -> Vec<u8> {
    let (hash, size, fec) = c;
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(hash);
    out.extend_from_slice(&size.to_le_bytes());
    out.push(fec.code.to_u8());
    out.extend_from_slice(&fec.symbol_size.to_le_bytes());
    out.extend_from_slice(&fec.max_block_symbols.to_le_bytes());
    out.extend_from_slice(&side_len.to_le_bytes());
    out.extend_from_slice(&(spilled.len() as u32).to_le_bytes());
    for (b, s) in spilled {
        out.extend_from_slice(&b.to_le_bytes());
        out.extend_from_slice(&(s.ids.len() as u32).to_le_bytes());
        for id in &s.ids {
            out.extend_from_slice(&id.to_le_bytes());
        }
        out.extend_from_slice(&(s.side.len() as u32).to_le_bytes());
        for (off, len) in &s.side {
            out.extend_from_slice(&off.to_le_bytes());
            out.extend_from_slice(&len.to_le_bytes());
        }
    }
    out
}

/// Reads little-endian fields off the front of a record.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    /// A count of items of at least `each` bytes: never more than the
    /// bytes left hold.
    fn count(&mut self, each: usize) -> Option<usize> {
        let n = self.u32()? as usize;
        (n <= self.0.len() / each).then_some(n)
    }
}

/// The blocks of `bytes`, a record for `m`'s item laid out as `layout`
/// whose side file holds `side_file` bytes: `None` unless it is a whole
/// record of this content (hash, size and FEC parameters), every block is
/// of the item and named once, its ids fit in its own place, and its side
/// records lie within what the record says the side file held and the
/// side file holds.
pub fn decode(
    bytes: &[u8],
    m: &ManifestEntry,
    layout: &Layout,
    side_file: u64,
) -> Option<BTreeMap<u32, Spilled>> {
    let mut r = Fields(bytes);
    let ok = r.take::<8>()? == *MAGIC
        && r.take::<32>()? == m.hash
        && r.u64()? == m.size
        && r.take::<1>()?[0] == m.fec.code.to_u8()
        && u16::from_le_bytes(r.take()?) == m.fec.symbol_size
        && r.u32()? == m.fec.max_block_symbols;
    let side_len = r.u64()?;
    if !ok || side_len > side_file {
        return None;
    }
    let t = u64::from(layout.symbol_size()).max(1);
    let mut out = BTreeMap::new();
    for _ in 0..r.count(12)? {
        let b = r.u32()?;
        if b >= layout.blocks() || out.contains_key(&b) {
            return None;
        }
        let n = r.count(4)?;
        if n as u64 > layout.block_len(b) / t {
            return None;
        }
        let ids = (0..n).map(|_| r.u32()).collect::<Option<Vec<u32>>>()?;
        let side = (0..r.count(12)?)
            .map(|_| {
                let (off, len) = (r.u64()?, r.u32()?);
                let end = off.checked_add(u64::from(len))?;
                (end <= side_len).then_some((off, len))
            })
            .collect::<Option<Vec<_>>>()?;
        out.insert(b, Spilled { ids, side });
    }
    r.0.is_empty().then_some(out)
}

impl Partial {
    /// Where a record of the spill is kept for a later run.
    pub(super) fn record_path(&self) -> PathBuf {
        self.tmp.with_extension("kept")
    }

    /// The spill is about to change: a record of it kept for a later run
    /// would no longer be true.
    pub(super) fn unkeep(&mut self) {
        if std::mem::take(&mut self.kept) {
            let _ = fs::remove_file(self.record_path());
        }
    }

    /// Takes back what an earlier run kept of this item's spill (blocks
    /// not verified since), and removes the record: from now on the spill
    /// is this run's.
    pub(super) fn take_kept(&mut self, m: &ManifestEntry) {
        let (Some(layout), true) = (self.layout, self.file.is_some()) else {
            return;
        };
        let path = self.record_path();
        let bytes = match crate::state_file::read_bounded(&path, MAX_RECORD) {
            Ok(Some(b)) => b,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("{}: {e}; not read", path.display());
                let _ = fs::remove_file(&path);
                return;
            }
        };
        let _ = fs::remove_file(&path);
        let side_path = self.tmp.with_extension("spill");
        let side = OpenOptions::new().read(true).write(true).open(&side_path);
        let side_file = (side.as_ref().ok())
            .and_then(|f| f.metadata().ok())
            .map_or(0, |md| md.len());
        let Some(mut blocks) = decode(&bytes, m, &layout, side_file) else {
            tracing::warn!("{}: not a record of this file; not used", path.display());
            return;
        };
        blocks.retain(|b, _| !self.verified.contains(b));
        let t = layout.symbol_size() as usize;
        self.found = (blocks.iter())
            .map(|(b, s)| (*b, s.count(t)))
            .filter(|(_, n)| *n > 0)
            .collect();
        if let Ok(f) = side {
            self.spill = Some((side_path, f));
            self.spill_len = side_file;
        }
        self.spilled = blocks;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use repocast_core::ItemId;
    use repocast_core::fec::CodeKind;

    fn entry() -> (ManifestEntry, Layout) {
        let fec = FecParams {
            code: CodeKind::RaptorQ,
            symbol_size: 16,
            max_block_symbols: 10,
        };
        let size = 16 * 25; // three blocks
        let m = ManifestEntry {
            item: ItemId(3),
            name: "f".into(),
            size,
            hash: [7; 32],
            fec,
            block_hashes: vec![[0; 32]; 3],
        };
        let layout = Layout::new(size, &fec).expect("layout");
        (m, layout)
    }

    fn rec(m: &ManifestEntry, side_len: u64, s: &BTreeMap<u32, Spilled>) -> Vec<u8> {
        encode(&(m.hash, m.size, m.fec), side_len, s)
    }

    fn spilled() -> BTreeMap<u32, Spilled> {
        let mut s = BTreeMap::new();
        s.insert(
            0,
            Spilled {
                ids: vec![0, 3, 11],
                side: vec![],
            },
        );
        s.insert(
            2,
            Spilled {
                ids: vec![1, 2, 3, 4, 5],
                side: vec![(0, 48), (48, 24)],
            },
        );
        s
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let (m, layout) = entry();
        assert_eq!(layout.blocks(), 3);
        let bytes = rec(&m, 72, &spilled());
        assert_eq!(decode(&bytes, &m, &layout, 72), Some(spilled()));
        assert_eq!(decode(&bytes, &m, &layout, 100), Some(spilled()));
        assert_eq!(spilled()[&2].count(16), 5 + 3);
    }

    #[test]
    fn a_record_that_does_not_fit_is_none() {
        let (m, layout) = entry();
        let bytes = rec(&m, 72, &spilled());
        // Cut anywhere, or a byte too long.
        for cut in 0..bytes.len() {
            assert_eq!(decode(&bytes[..cut], &m, &layout, 72), None, "cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(decode(&long, &m, &layout, 72), None);
        // A side file shorter than the record says.
        assert_eq!(decode(&bytes, &m, &layout, 71), None);
        // Other content or layout.
        for change in 0..4 {
            let mut other = m.clone();
            match change {
                0 => other.hash[0] ^= 1,
                1 => other.size -= 1,
                2 => other.fec.symbol_size = 32,
                _ => other.fec.code = CodeKind::ReedSolomon,
            }
            assert_eq!(decode(&bytes, &other, &layout, 72), None, "change {change}");
        }
        // A block past the item, named twice, with more ids than its
        // place holds, or a side record past the side file.
        let mut bad = spilled();
        bad.insert(3, Spilled::default());
        assert_eq!(decode(&rec(&m, 72, &bad), &m, &layout, 72), None);
        let room = (layout.block_len(2) / 16) as u32;
        let mut full = spilled();
        full.entry(2).or_default().ids = (0..room).collect();
        assert_eq!(
            decode(&rec(&m, 72, &full), &m, &layout, 72),
            Some(full.clone())
        );
        full.entry(2).or_default().ids.push(room);
        assert_eq!(decode(&rec(&m, 72, &full), &m, &layout, 72), None);
        let mut bad = spilled();
        bad.entry(0).or_default().side.push((u64::MAX, 2));
        assert_eq!(decode(&rec(&m, 72, &bad), &m, &layout, 72), None);
        let mut twice = rec(&m, 72, &spilled());
        let at = 8 + 32 + 8 + 1 + 2 + 4 + 8;
        twice[at..at + 4].copy_from_slice(&3u32.to_le_bytes());
        twice.extend_from_slice(&2u32.to_le_bytes());
        twice.extend_from_slice(&0u32.to_le_bytes());
        twice.extend_from_slice(&0u32.to_le_bytes());
        assert_eq!(decode(&twice, &m, &layout, 72), None);
    }

    #[test]
    fn a_huge_count_is_refused_without_allocating() {
        let (m, layout) = entry();
        let mut bytes = rec(&m, 0, &BTreeMap::new());
        let at = bytes.len() - 4;
        bytes[at..].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode(&bytes, &m, &layout, 0), None);
        // Random bytes after a sound header: no panic.
        let mut rng = repocast_core::rng::Rng::new(9);
        for _ in 0..2000 {
            let mut b = rec(&m, 72, &BTreeMap::new());
            b.truncate(b.len() - 4);
            let n = (rng.next_u64() % 64) as usize;
            b.extend((0..n).map(|_| rng.next_u64() as u8));
            let _ = decode(&b, &m, &layout, 72);
        }
    }
}
