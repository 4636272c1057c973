//! The log of a partial file's spilled symbols (the crowd pool's index),
//! kept beside it so a later run goes on with them: which symbol ids sit
//! in each partly received block's own place in the partial file, and
//! which records of the side file belong to it. Every spill appends an
//! entry after its bytes are written, and a block taken back into memory
//! appends a drop, so the log is true whenever the process ends: a
//! SIGKILL keeps every symbol the memory bound had moved to disk, and a
//! stop ([`BlockStore::keep_spilled`] after the endpoint moved every
//! partly received block there) keeps them all. A torn last entry (a
//! power loss) is cut off; the log is rewritten as one entry a block when
//! it grows to several times that. The next run opening the same content
//! replays it and goes on appending. It sits in the output folder, which
//! is not ours alone: the header must be this content and layout, and an
//! entry must name a block of the item, go on where the block's ids end,
//! fit in its place, and point within the side file, or the replay stops
//! there. A symbol's bytes are not checked here: a block decoded from a
//! wrong one fails its hash and starts over, as with a forged packet.
//!
//! [`BlockStore::keep_spilled`]: repocast_core::endpoint::store::BlockStore::keep_spilled

use super::Partial;
use repocast_core::fec::layout::Layout;
use repocast_core::wire::{FecParams, ManifestEntry};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::PathBuf;

/// What a log starts with.
const MAGIC: &[u8; 8] = b"rcspill1";
/// Bytes of a header: magic, hash, size, code, symbol size, largest block.
const HEADER: usize = 8 + 32 + 8 + 1 + 2 + 4;
/// The largest log read.
pub const MAX_LOG: u64 = 256 << 20;
/// A log is rewritten (one entry a block) once it is past this and four
/// times what the rewrite would be (small in tests, to exercise it).
const COMPACT_AFTER: u64 = if cfg!(test) { 4 << 10 } else { 8 << 20 };
/// Entry tags.
const SPILL: u8 = 1;
const DROP: u8 = 2;
/// Bytes of entries gathered before they are written: one write for many
/// spills (a kill loses at most this much of the log's end, whose
/// symbols are then received again).
const LOG_BUFFER: usize = 64 << 10;

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

/// What a log is of: an item's hash, size and FEC parameters.
pub type Content = ([u8; 32], u64, FecParams);

/// An open log: its writer, its length, and the length at which a
/// rewrite is next weighed (not on every append: that sums the spill).
pub struct Log {
    w: BufWriter<File>,
    len: u64,
    weigh_at: u64,
}

impl Log {
    fn new(f: File, len: u64) -> Log {
        Log {
            w: BufWriter::with_capacity(LOG_BUFFER, f),
            len,
            weigh_at: COMPACT_AFTER,
        }
    }
}

/// A log's header.
pub fn header(c: &Content) -> Vec<u8> {
    let (hash, size, fec) = c;
    let mut out = Vec::with_capacity(HEADER);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(hash);
    out.extend_from_slice(&size.to_le_bytes());
    out.push(fec.code.to_u8());
    out.extend_from_slice(&fec.symbol_size.to_le_bytes());
    out.extend_from_slice(&fec.max_block_symbols.to_le_bytes());
    out
}

/// The entry for symbols `ids` written in block `block`'s place from its
/// `start`-th symbol on, and `side` records in the side file.
pub fn spill_entry(block: u32, start: usize, ids: &[u32], side: &[(u64, u32)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(17 + 4 * ids.len() + 12 * side.len());
    out.push(SPILL);
    out.extend_from_slice(&block.to_le_bytes());
    out.extend_from_slice(&(start as u32).to_le_bytes());
    out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
    for id in ids {
        out.extend_from_slice(&id.to_le_bytes());
    }
    out.extend_from_slice(&(side.len() as u32).to_le_bytes());
    for (off, len) in side {
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
    }
    out
}

/// The entry for block `block` taken back into memory.
pub fn drop_entry(block: u32) -> Vec<u8> {
    let mut out = vec![DROP];
    out.extend_from_slice(&block.to_le_bytes());
    out
}

/// A log holding `spilled` alone: its header and one entry a block.
pub fn snapshot(c: &Content, spilled: &BTreeMap<u32, Spilled>) -> Vec<u8> {
    let mut out = header(c);
    for (b, s) in spilled {
        out.extend(spill_entry(*b, 0, &s.ids, &s.side));
    }
    out
}

/// Reads little-endian fields off the front of a log.
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
    /// A count of items of `each` bytes: never more than the bytes left
    /// hold.
    fn count(&mut self, each: usize) -> Option<usize> {
        let n = self.u32()? as usize;
        (n <= self.0.len() / each).then_some(n)
    }
}

/// The spill `bytes` (a log for `m`'s item laid out as `layout`, whose
/// side file holds `side_file` bytes) describes, and how many of its bytes
/// are whole, sound entries: `None` unless its header is this content's.
/// The replay stops at the first entry that is cut short or does not fit
/// (a block of the item, going on where its ids end, within its place,
/// side records within the side file).
pub fn replay(
    bytes: &[u8],
    m: &ManifestEntry,
    layout: &Layout,
    side_file: u64,
) -> Option<(BTreeMap<u32, Spilled>, usize)> {
    let head = bytes.get(..HEADER)?;
    if head != header(&(m.hash, m.size, m.fec)) {
        return None;
    }
    let t = u64::from(layout.symbol_size()).max(1);
    let mut out: BTreeMap<u32, Spilled> = BTreeMap::new();
    let mut r = Fields(&bytes[HEADER..]);
    let mut sound = HEADER;
    loop {
        let entry = || -> Option<(u32, Option<Spilled>, usize)> {
            let mut e = Fields(r.0);
            let tag = e.take::<1>()?[0];
            let b = e.u32()?;
            if b >= layout.blocks() {
                return None;
            }
            if tag == DROP {
                return Some((b, None, r.0.len() - e.0.len()));
            }
            if tag != SPILL {
                return None;
            }
            let start = e.u32()? as usize;
            let had = out.get(&b).map_or(0, |s| s.ids.len());
            let n = e.count(4)?;
            if start != had || (had + n) as u64 > layout.block_len(b) / t {
                return None;
            }
            let mut s = out.get(&b).cloned().unwrap_or_default();
            for _ in 0..n {
                s.ids.push(e.u32()?);
            }
            for _ in 0..e.count(12)? {
                let (off, len) = (e.u64()?, e.u32()?);
                let end = off.checked_add(u64::from(len))?;
                if end > side_file {
                    return None;
                }
                s.side.push((off, len));
            }
            Some((b, Some(s), r.0.len() - e.0.len()))
        };
        let Some((b, s, used)) = entry() else {
            break;
        };
        match s {
            Some(s) => out.insert(b, s),
            None => out.remove(&b),
        };
        r.0 = &r.0[used..];
        sound += used;
    }
    Some((out, sound))
}

impl Partial {
    /// Where the log of the spill is kept.
    pub(super) fn log_path(&self) -> PathBuf {
        self.tmp.with_extension("kept")
    }

    /// The spill's content for its log.
    fn content(&self) -> Content {
        (self.hash, self.size, self.fec)
    }

    /// Appends `entry` to the log (made, with its header, on the first).
    /// A log that cannot be written is removed and no longer kept this
    /// run: a log missing an entry would be false.
    pub(super) fn log(&mut self, entry: &[u8]) {
        if self.log_off || self.file.is_none() {
            return;
        }
        let written = match self.spill_log.as_mut() {
            Some(log) => log
                .w
                .write_all(entry)
                .map(|()| log.len += entry.len() as u64),
            None => {
                self.log_on_disk = true;
                OpenOptions::new()
                    .create(true)
                    .truncate(true)
                    .write(true)
                    .open(self.log_path())
                    .and_then(|f| {
                        let mut log = Log::new(f, 0);
                        let mut first = header(&self.content());
                        first.extend_from_slice(entry);
                        log.w.write_all(&first)?;
                        log.len = first.len() as u64;
                        self.spill_log = Some(log);
                        Ok(())
                    })
            }
        };
        match written {
            Ok(()) => self.compact(),
            Err(e) => self.give_up_log(e),
        }
    }

    /// The log cannot be written: it is removed and not kept this run (a
    /// log missing an entry would be false).
    fn give_up_log(&mut self, e: std::io::Error) {
        let path = self.log_path();
        tracing::warn!("{}: {e}; partly received blocks not kept", path.display());
        self.drop_log();
        self.log_off = true;
    }

    /// Writes out the entries gathered (a stop keeps the spill).
    pub(super) fn flush_log(&mut self) {
        let Some(log) = self.spill_log.as_mut() else {
            return;
        };
        if let Err(e) = log.w.flush() {
            self.give_up_log(e);
        }
    }

    /// Removes the log (nothing spilled any more, or the item ends).
    pub(super) fn drop_log(&mut self) {
        self.spill_log = None;
        if self.file.is_some() && std::mem::take(&mut self.log_on_disk) {
            let _ = fs::remove_file(self.log_path());
        }
    }

    /// Rewrites a log grown past [`COMPACT_AFTER`] and four times its
    /// spill's size as one entry a block (whole, or not at all). The size
    /// is weighed only once the log reaches the length last found worth
    /// weighing at, so an append costs no walk over the spill.
    fn compact(&mut self) {
        let Some(log) = self.spill_log.as_mut() else {
            return;
        };
        if log.len < log.weigh_at {
            return;
        }
        let size: u64 = HEADER as u64
            + (self.spilled.values())
                .map(|s| 17 + 4 * s.ids.len() as u64 + 12 * s.side.len() as u64)
                .sum::<u64>();
        if log.len < 4 * size {
            log.weigh_at = 4 * size;
            return;
        }
        let path = self.log_path();
        let bytes = snapshot(&self.content(), &self.spilled);
        let reopened = crate::state_file::write_whole(&path, &bytes)
            .and_then(|()| OpenOptions::new().append(true).open(&path));
        match reopened {
            Ok(f) => self.spill_log = Some(Log::new(f, bytes.len() as u64)),
            Err(e) => self.give_up_log(e),
        }
    }

    /// Takes back what an earlier run left in this item's spill (blocks
    /// not verified since) and goes on with its log; a log of other
    /// content, or unreadable, is removed.
    pub(super) fn take_kept(&mut self, m: &ManifestEntry) {
        let (Some(layout), true) = (self.layout, self.file.is_some()) else {
            return;
        };
        let path = self.log_path();
        let bytes = match crate::state_file::read_bounded(&path, MAX_LOG) {
            Ok(Some(b)) => {
                self.log_on_disk = true;
                b
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("{}: {e}; not read", path.display());
                let _ = fs::remove_file(&path);
                return;
            }
        };
        let side_path = self.tmp.with_extension("spill");
        let side = OpenOptions::new().read(true).write(true).open(&side_path);
        let side_file = (side.as_ref().ok())
            .and_then(|f| f.metadata().ok())
            .map_or(0, |md| md.len());
        let Some((mut blocks, sound)) = replay(&bytes, m, &layout, side_file) else {
            tracing::warn!("{}: not a log of this file; not used", path.display());
            let _ = fs::remove_file(&path);
            return;
        };
        // Appends go on after the last sound entry.
        let log = (OpenOptions::new().append(true).open(&path))
            .and_then(|f| f.set_len(sound as u64).map(|()| f));
        let Ok(log) = log else {
            let _ = fs::remove_file(&path);
            return;
        };
        self.spill_log = Some(Log::new(log, sound as u64));
        let verified: Vec<u32> = (blocks.keys())
            .filter(|b| self.verified.contains(b))
            .copied()
            .collect();
        for b in &verified {
            blocks.remove(b);
        }
        let t = layout.symbol_size() as usize;
        self.found = (blocks.iter())
            .map(|(b, s)| (*b, s.count(t)))
            .filter(|(_, n)| *n > 0)
            .collect();
        if let Ok(f) = side {
            self.spill = Some((side_path, f));
            self.spill_len = side_file;
        }
        // The spill is this run's before the log goes on (a rewrite of
        // the log is made from it).
        self.spilled = blocks;
        for b in verified {
            self.log(&drop_entry(b));
        }
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

    fn content(m: &ManifestEntry) -> Content {
        (m.hash, m.size, m.fec)
    }

    /// A log of spills and a drop, with where each entry ends.
    fn log(m: &ManifestEntry) -> (Vec<u8>, Vec<usize>) {
        let mut bytes = header(&content(m));
        let mut ends = vec![bytes.len()];
        for e in [
            spill_entry(0, 0, &[0, 3], &[]),
            spill_entry(2, 0, &[1, 2], &[(0, 48)]),
            spill_entry(0, 2, &[11], &[]),
            spill_entry(1, 0, &[4], &[]),
            drop_entry(1),
            spill_entry(2, 2, &[3, 4, 5], &[(48, 24)]),
        ] {
            bytes.extend(e);
            ends.push(bytes.len());
        }
        (bytes, ends)
    }

    fn state() -> BTreeMap<u32, Spilled> {
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
    fn a_log_replays_to_the_spill_it_recorded() {
        let (m, layout) = entry();
        assert_eq!(layout.blocks(), 3);
        let (bytes, ends) = log(&m);
        assert_eq!(
            replay(&bytes, &m, &layout, 72),
            Some((state(), bytes.len()))
        );
        assert_eq!(state()[&2].count(16), 5 + 3);
        // A snapshot of the state replays to it too.
        let snap = snapshot(&content(&m), &state());
        assert_eq!(replay(&snap, &m, &layout, 72), Some((state(), snap.len())));
        // Cut anywhere (a power loss): the whole entries before the cut.
        for cut in HEADER..bytes.len() {
            let whole = *ends.iter().filter(|&&e| e <= cut).max().expect("header");
            let (_, sound) = replay(&bytes[..cut], &m, &layout, 72).expect("header");
            assert_eq!(sound, whole, "cut at {cut}");
        }
        for cut in 0..HEADER {
            assert_eq!(replay(&bytes[..cut], &m, &layout, 72), None);
        }
    }

    #[test]
    fn a_log_stops_at_what_does_not_fit() {
        let (m, layout) = entry();
        let (bytes, ends) = log(&m);
        // Another content or layout: none.
        for change in 0..4 {
            let mut other = m.clone();
            match change {
                0 => other.hash[0] ^= 1,
                1 => other.size -= 1,
                2 => other.fec.symbol_size = 32,
                _ => other.fec.code = CodeKind::ReedSolomon,
            }
            assert_eq!(replay(&bytes, &other, &layout, 72), None, "change {change}");
        }
        // A side file shorter than the last entry's record: the entries
        // before it.
        assert_eq!(replay(&bytes, &m, &layout, 71).map(|r| r.1), Some(ends[5]));
        let stops = |entry: Vec<u8>| {
            let mut b = header(&content(&m));
            b.extend(spill_entry(0, 0, &[9], &[]));
            let sound = b.len();
            b.extend(entry);
            b.extend(spill_entry(0, 1, &[10], &[]));
            let (s, n) = replay(&b, &m, &layout, 72).expect("header");
            assert_eq!(n, sound);
            assert_eq!(s[&0].ids, vec![9]);
        };
        let room = (layout.block_len(2) / 16) as usize;
        stops(spill_entry(3, 0, &[1], &[])); // no such block
        stops(drop_entry(7));
        stops(spill_entry(0, 0, &[1], &[])); // not where block 0's ids end
        stops(spill_entry(0, 5, &[1], &[]));
        stops(spill_entry(2, 0, &vec![1; room + 1], &[])); // past its place
        stops(spill_entry(2, 0, &[], &[(u64::MAX, 2)]));
        stops(vec![9, 0, 0, 0, 0]); // no such entry
        let mut huge = spill_entry(2, 0, &[], &[]);
        huge[9..13].copy_from_slice(&u32::MAX.to_le_bytes());
        stops(huge);
    }

    #[test]
    fn random_bytes_after_a_header_do_not_panic() {
        let (m, layout) = entry();
        let mut rng = repocast_core::rng::Rng::new(9);
        for _ in 0..5000 {
            let mut b = header(&content(&m));
            let n = (rng.next_u64() % 96) as usize;
            b.extend((0..n).map(|_| (rng.next_u64() % 4) as u8));
            let (_, sound) = replay(&b, &m, &layout, 72).expect("header");
            assert!(sound <= b.len());
        }
    }
}
