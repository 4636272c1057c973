//! Packs: the small files of a push set coded together.
//!
//! With no back channel, a pusher sends each item's blocks with enough
//! repair symbols that a listener at the loss it plans for has the item
//! after one pass ([`crate::policy::odds`]). A file of a few symbols needs
//! several times its size for those odds, and a set of many such files
//! needs it for every one of them, so a web site or update set of small
//! files took listeners several times the time its bytes need. Packed, the
//! same files share blocks: a pack is one item on the data channel (one
//! block, at most the pusher's block size), its bytes the members' end to
//! end, and it needs the odds of one large block instead of many tiny ones.
//!
//! [`plan`] decides the packs and hashes them (it reads the members'
//! bytes through the driver's [`BlockSource`]; the driver runs it where
//! it scans the folder, off its sending path). The push endpoint sends
//! each pack as an item and describes it and its members in the catalogue
//! ([`crate::wire::catalogue::HeadKind`]); a listener receives the pack
//! and cuts out the members it selected ([`super::store::BlockStore::unpack`]).
//!
//! How large a pack: a block, so that a listener at high loss, which needs
//! several passes of each pack, rarely needs one more for its unluckiest
//! pack (the count it receives of a pass varies by the square root of the
//! pack: of packs of 160 symbols a 50% listener of a 600-file site took
//! 1.43-1.65x the ideal, of blocks of 1,250 1.06x). But when the pusher
//! has popularity weights (`--popularity`, with either scheduler), its
//! listeners are visitors after a few files each: a pack is then at most
//! [`SET_SHARE`] of the whole set's bytes, so a visitor after one small
//! file waits at most that share of a cycle longer for its pack than for
//! the file alone
//! (and at least [`MIN_PACK_SYMBOLS`], or a small set would gain nothing).
//!
//! Which files share a pack: files smaller than half a pack and than
//! [`SMALL_SHARE`] of a block, in the order of the set (by name, so a
//! folder's files share packs), hottest first when there are popularity
//! weights (so a pack's files are about as popular as each other). A pack is closed when the next
//! file would not fit, or once it is half full after a file whose name's
//! hash says so (a cut that depends on names, not positions: a file added
//! or removed changes its own pack and rarely the next, not every pack
//! after it, so a satellite listener receives little again). A pack of one
//! file stays a file.

use super::push::PushItem;
use crate::ItemId;
use crate::fec::layout::Layout;
use crate::server::{BlockSource, ItemInfo, SourceError};
use crate::wire::FecParams;

/// Files smaller than this share of a block's bytes are packed (1/8: 156
/// symbols of a 1,250-symbol block, 220 KiB at 1,440-byte symbols), if
/// they are also under half a pack.
pub const SMALL_SHARE: u64 = 8;
/// With popularity weights, a pack is at most this share of the set's
/// bytes (1/128: 64 KiB of an 8 MiB set; a block from 220 MiB on). Of the
/// web-log benchmark's 670 KiB site, packs of 32 KiB (1/32) cut a 5%
/// visitor's mean latency by 10-23% but raised a 20% visitor's by 17-29%
/// (a pass of a pack is sized for 5% loss, while a file of a few symbols
/// alone gets odds that carry it through 20%); packs of 8 KiB cut the
/// first by 5-12% and raise the second by 1-2% (virtual LAN).
pub const SET_SHARE: u64 = 128;
/// A pack may always reach this many symbols.
pub const MIN_PACK_SYMBOLS: u64 = 16;

/// One in this many names closes a half-full pack.
const CUT_ONE_IN: u8 = 4;

/// One pack: its members and the item it is on the data channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pack {
    /// Members, as indices of the set's files, in the pack's order.
    pub members: Vec<usize>,
    /// Where each member starts in the pack.
    pub offsets: Vec<u64>,
    /// The pack as an item: its size, hash and block hashes (its name is
    /// for logs only).
    pub info: ItemInfo,
}

/// A file set as the push endpoint sends it: files, and packs of some of
/// them.
#[derive(Debug, Clone, Default)]
pub struct PushSet {
    /// Every file, packed or not, in the driver's order (its
    /// [`BlockSource`] reads file `i` as item `i`).
    pub files: Vec<PushItem>,
    /// Packs of small files.
    pub packs: Vec<Pack>,
    /// Files [`plan`] meant to pack but sent alone: they did not read as
    /// the scan hashed them (changed since, or unreadable). The driver
    /// scans again.
    pub left_out: Vec<usize>,
}

impl From<Vec<PushItem>> for PushSet {
    /// Every file sent alone.
    fn from(files: Vec<PushItem>) -> Self {
        PushSet {
            files,
            packs: Vec::new(),
            left_out: Vec::new(),
        }
    }
}

/// Where the bytes of one item on the data channel come from.
#[derive(Debug, Clone)]
pub(crate) enum Unit {
    /// A file sent alone (its index in the set).
    File(usize),
    /// A pack: its members' (file index, length), in order.
    Pack(Vec<(usize, u64)>),
}

impl PushSet {
    /// The items on the data channel, in their item order: files sent
    /// alone first (in the set's order), then packs.
    pub(crate) fn units(&self) -> Vec<Unit> {
        let mut packed = vec![false; self.files.len()];
        for p in &self.packs {
            for &m in &p.members {
                if let Some(x) = packed.get_mut(m) {
                    *x = true;
                }
            }
        }
        let alone = (0..self.files.len())
            .filter(|&i| !packed[i])
            .map(Unit::File);
        let packs = self.packs.iter().map(|p| {
            Unit::Pack(
                (p.members.iter())
                    .filter_map(|&m| Some((m, self.files.get(m)?.info.size)))
                    .collect(),
            )
        });
        alone.chain(packs).collect()
    }
}

/// A [`BlockSource`] over the items on the data channel, reading the
/// driver's source by file.
pub(crate) struct UnitSource<'a> {
    pub(crate) inner: &'a mut dyn BlockSource,
    pub(crate) units: &'a [Unit],
}

impl BlockSource for UnitSource<'_> {
    fn read(
        &mut self,
        item: ItemId,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), SourceError> {
        match self.units.get(item.0 as usize) {
            None => Err(SourceError::NoItem),
            Some(Unit::File(f)) => self.inner.read(ItemId(*f as u32), offset, len, out),
            Some(Unit::Pack(members)) => read_pack(self.inner, members, offset, len, out),
        }
    }

    fn spool(&mut self) -> Option<&mut dyn crate::server::spool::SymbolSpool> {
        self.inner.spool()
    }
}

/// Reads `len` bytes at `offset` of the pack of `members` from `source`.
fn read_pack(
    source: &mut dyn BlockSource,
    members: &[(usize, u64)],
    offset: u64,
    len: usize,
    out: &mut Vec<u8>,
) -> Result<(), SourceError> {
    let end = offset.checked_add(len as u64).ok_or(SourceError::PastEnd)?;
    let mut start = 0u64;
    let mut done = 0u64;
    for &(f, size) in members {
        let (from, to) = (offset.max(start), end.min(start + size));
        if from < to {
            source.read(ItemId(f as u32), from - start, (to - from) as usize, out)?;
            done += to - from;
        }
        start += size;
    }
    if done == len as u64 {
        Ok(())
    } else {
        Err(SourceError::PastEnd)
    }
}

/// Whether `weights` say anything (not all equal: `push` without
/// `--popularity` gives every file the same).
fn has_weights(weights: &[f64]) -> bool {
    weights.iter().any(|w| Some(w) != weights.first())
}

/// Whether a pack at least half full closes after the file `name`.
fn cut_after(name: &str) -> bool {
    blake3::hash(name.as_bytes()).as_bytes()[0] < u8::MAX / CUT_ONE_IN
}

/// Packs the small files of `files` for blocks of `fec` (the base
/// layout: a pack is at most one block; see the module's notes for its
/// size and which files go in), ordered hottest first by the popularity
/// `weights` of the files (by index; empty: none), and hashes each pack
/// through `source` (which reads file `i` as item `i`).
pub fn plan(
    fec: &FecParams,
    weights: &[f64],
    files: Vec<PushItem>,
    source: &mut dyn BlockSource,
) -> Result<PushSet, SourceError> {
    let t = fec.symbol_size as u64;
    let block = fec.max_block_symbols as u64 * t;
    let total: u64 = files.iter().map(|f| f.info.size).sum();
    let cap = if has_weights(weights) {
        (total / SET_SHARE).max(MIN_PACK_SYMBOLS * t).min(block)
    } else {
        block
    };
    let small = (cap / 2).min(block / SMALL_SHARE);
    let mut order: Vec<usize> = (0..files.len())
        .filter(|&i| (1..small).contains(&files[i].info.size))
        .collect();
    let w = |i: usize| weights.get(i).copied().unwrap_or(0.0);
    order.sort_by(|&a, &b| w(b).total_cmp(&w(a)).then(a.cmp(&b)));
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let (mut cur, mut bytes) = (Vec::new(), 0u64);
    for i in order {
        let size = files[i].info.size;
        if bytes + size > cap && !cur.is_empty() {
            groups.push(std::mem::take(&mut cur));
            bytes = 0;
        }
        cur.push(i);
        bytes += size;
        if bytes >= cap / 2 && cut_after(&files[i].info.name) {
            groups.push(std::mem::take(&mut cur));
            bytes = 0;
        }
    }
    groups.push(cur);
    let (mut packs, mut left_out) = (Vec::new(), Vec::new());
    for group in groups.into_iter().filter(|g| g.len() >= 2) {
        // Each member read and checked against its hash from the scan: a
        // file that changed since (or cannot be read) goes alone, where
        // the server's block check fails it with a reason until the
        // driver's next scan, and the rest of its pack is sent.
        let (mut members, mut offsets, mut bytes) = (Vec::new(), Vec::new(), Vec::new());
        for m in group {
            let start = bytes.len();
            let f = &files[m].info;
            let read = source.read(ItemId(m as u32), 0, f.size as usize, &mut bytes);
            if read.is_ok()
                && bytes.len() == start + f.size as usize
                && blake3::hash(&bytes[start..]).as_bytes() == &f.hash
            {
                members.push(m);
                offsets.push(start as u64);
            } else {
                bytes.truncate(start);
                left_out.push(m);
            }
        }
        if members.len() < 2 {
            continue;
        }
        let at = bytes.len() as u64;
        let layout = Layout::new(at, fec).map_err(|_| SourceError::PastEnd)?;
        let block_hashes: Vec<[u8; 32]> = (0..layout.blocks())
            .map(|b| {
                let from = layout.block_offset(b) as usize;
                let to = from + layout.block_len(b) as usize;
                *blake3::hash(&bytes[from..to]).as_bytes()
            })
            .collect();
        // A pack of one block hashes as its block does.
        let hash = match &block_hashes[..] {
            [one] => *one,
            _ => *blake3::hash(&bytes).as_bytes(),
        };
        packs.push(Pack {
            info: ItemInfo {
                name: format!("(pack of {} files)", members.len()),
                size: at,
                hash,
                block_hashes,
            },
            members,
            offsets,
        });
    }
    left_out.sort_unstable();
    Ok(PushSet {
        files,
        packs,
        left_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fec::CodeKind;

    struct Mem(Vec<Vec<u8>>);
    impl BlockSource for Mem {
        fn read(
            &mut self,
            item: ItemId,
            offset: u64,
            len: usize,
            out: &mut Vec<u8>,
        ) -> Result<(), SourceError> {
            let f = self.0.get(item.0 as usize).ok_or(SourceError::NoItem)?;
            let b = f
                .get(offset as usize..offset as usize + len)
                .ok_or(SourceError::PastEnd)?;
            out.extend_from_slice(b);
            Ok(())
        }
    }

    fn set(sizes: &[u64]) -> (Vec<PushItem>, Mem) {
        let bytes: Vec<Vec<u8>> = (sizes.iter().enumerate())
            .map(|(i, &s)| (0..s).map(|j| (i as u64 * 7 + j) as u8).collect())
            .collect();
        let items = (sizes.iter().enumerate())
            .map(|(i, &s)| PushItem {
                info: ItemInfo {
                    name: format!("f{i:04}"),
                    size: s,
                    hash: *blake3::hash(&bytes[i]).as_bytes(),
                    block_hashes: Vec::new(),
                },
                mode: 0o644,
                mtime: 0,
            })
            .collect();
        (items, Mem(bytes))
    }

    const FEC: FecParams = FecParams {
        code: CodeKind::RaptorQ,
        symbol_size: 1000,
        max_block_symbols: 100,
    };

    #[test]
    fn small_files_share_packs_of_at_most_a_block_and_large_ones_stay_alone() {
        // A block is 100,000 bytes; files under 12,500 are small. The set
        // is 3.2 MB, so packs may be a whole block.
        let mut sizes: Vec<u64> = (0..300).map(|i| 200 + (i * 37) % 9_000).collect();
        sizes.extend([12_500, 50_000, 0, 2_000_000]);
        let (items, mut src) = set(&sizes);
        let s = plan(&FEC, &[], items, &mut src).expect("plan");
        let mut seen = vec![0; sizes.len()];
        for p in &s.packs {
            assert!(p.members.len() >= 2);
            assert!(p.info.size <= 100_000, "{}", p.info.size);
            assert_eq!(p.info.block_hashes.len(), 1);
            // The pack's bytes are its members', end to end.
            let mut bytes = Vec::new();
            for (&m, &o) in p.members.iter().zip(&p.offsets) {
                assert_eq!(o as usize, bytes.len());
                bytes.extend_from_slice(&src.0[m]);
                seen[m] += 1;
            }
            assert_eq!(p.info.hash, *blake3::hash(&bytes).as_bytes());
        }
        // Every small file is in exactly one pack, at most one of them
        // alone (the last pack's file); the large and empty ones in none.
        let alone = (0..300).filter(|&i| seen[i] == 0).count();
        assert!(alone <= 1, "{alone}");
        assert!(seen[..300].iter().all(|&n| n <= 1));
        assert_eq!(&seen[300..], &[0, 0, 0, 0]);
        // 1.4 MB of small files: 14 blocks' worth, in at most twice that
        // many packs (each closes at least half full, but the last).
        let n = s.packs.len();
        assert!((14..=29).contains(&n), "{n} packs");
        // Items on the channel: the files alone, then the packs.
        let units = s.units();
        assert_eq!(units.len(), 4 + alone + n);
    }

    #[test]
    fn with_popularity_a_pack_is_a_small_share_of_a_large_set() {
        // 1,000 files of 1-9 KB (5 MB). Packs are blocks, but with
        // popularity weights at most SET_SHARE of the set; next to one file
        // of 60 MB, blocks again.
        let mut sizes: Vec<u64> = (0..1000).map(|i| 1_000 + (i * 71) % 8_000).collect();
        let small_total: u64 = sizes.iter().sum();
        let largest = |sizes: &[u64], weighted: bool| {
            let (items, mut src) = set(sizes);
            let w: Vec<f64> = (0..sizes.len())
                .map(|i| if weighted { 1.0 + (i % 3) as f64 } else { 2.0 })
                .collect();
            let s = plan(&FEC, &w, items, &mut src).expect("plan");
            s.packs.iter().map(|p| p.info.size).max().unwrap_or(0)
        };
        let block = |x: u64| x > 90_000 && x <= 100_000;
        assert!(block(largest(&sizes, false)));
        let weighted = largest(&sizes, true);
        assert!(weighted <= small_total / SET_SHARE, "{weighted}");
        assert!(weighted > small_total / SET_SHARE / 2, "{weighted}");
        sizes.push(60_000_000);
        assert!(block(largest(&sizes, true)));
    }

    #[test]
    fn a_file_changed_since_its_scan_goes_alone_and_its_pack_goes_on() {
        // Five small files; the second was rewritten after the scan hashed
        // it, the fourth was cut short. They go alone (where the server
        // fails them with a reason) and the other three are one pack.
        let (items, mut src) = set(&[3_000, 5_000, 4_000, 2_000, 1_000]);
        src.0[1][10] ^= 1;
        src.0[3].truncate(1_500);
        let s = plan(&FEC, &[], items, &mut src).expect("plan");
        assert_eq!(s.left_out, vec![1, 3]);
        assert_eq!(s.packs.len(), 1);
        let p = &s.packs[0];
        assert_eq!(p.members, vec![0, 2, 4]);
        assert_eq!(p.offsets, vec![0, 3_000, 7_000]);
        let bytes = [&src.0[0][..], &src.0[2], &src.0[4]].concat();
        assert_eq!(p.info.size, 8_000);
        assert_eq!(p.info.hash, *blake3::hash(&bytes).as_bytes());
        // On the channel: the two files alone, then the pack.
        assert_eq!(s.units().len(), 3);
        // Only one member left readable as its scan said: no pack at all.
        let (items, mut src) = set(&[3_000, 5_000]);
        src.0[0][0] ^= 1;
        let s = plan(&FEC, &[], items, &mut src).expect("plan");
        assert!(s.packs.is_empty());
        assert_eq!(s.left_out, vec![0]);
    }

    #[test]
    fn a_pack_reads_across_its_members() {
        let (items, mut src) = set(&[3_000, 5_000, 4_000]);
        let s = plan(&FEC, &[], items, &mut src).expect("plan");
        assert_eq!(s.packs.len(), 1);
        let units = s.units();
        let mut us = UnitSource {
            inner: &mut src,
            units: &units,
        };
        let mut out = Vec::new();
        us.read(ItemId(0), 2_500, 6_000, &mut out).expect("read");
        let mut want = us_bytes(&[3_000, 5_000, 4_000]);
        want = want[2_500..8_500].to_vec();
        assert_eq!(out, want);
        let mut past = Vec::new();
        assert!(us.read(ItemId(0), 11_000, 2_000, &mut past).is_err());
        assert!(us.read(ItemId(1), 0, 1, &mut past).is_err());
    }

    fn us_bytes(sizes: &[u64]) -> Vec<u8> {
        set(sizes).1.0.concat()
    }

    #[test]
    fn mad_packs_hot_files_together_and_a_new_file_moves_few_packs() {
        let sizes: Vec<u64> = (0..400).map(|i| 500 + (i * 53) % 5_000).collect();
        let weights: Vec<f64> = (0..400)
            .map(|i| if i % 2 == 0 { 10.0 } else { 1.0 })
            .collect();
        let (items, mut src) = set(&sizes);
        let s = plan(&FEC, &weights, items, &mut src).expect("plan");
        // The hot (even) files come first and share packs with each other.
        let mixed = (s.packs.iter())
            .filter(|p| {
                let hot = p.members.iter().filter(|&&m| m % 2 == 0).count();
                hot != 0 && hot != p.members.len()
            })
            .count();
        assert!(mixed <= 1, "{mixed} packs mix hot and cold files");

        // One file more in the middle of the names: most packs keep their
        // exact members.
        let (items, mut src) = set(&sizes);
        let before = plan(&FEC, &[], items, &mut src).expect("plan");
        let mut grown = sizes.clone();
        grown.insert(200, 3_000);
        let (mut items, mut src) = set(&grown);
        for (i, it) in items.iter_mut().enumerate() {
            // Same names as before for the same files; the new one between.
            it.info.name = match i {
                0..200 => format!("f{i:04}"),
                200 => "f0199a".into(),
                _ => format!("f{:04}", i - 1),
            };
        }
        let after = plan(&FEC, &[], items, &mut src).expect("plan");
        let names = |s: &PushSet, p: &Pack| -> Vec<String> {
            p.members
                .iter()
                .map(|&m| s.files[m].info.name.clone())
                .collect()
        };
        let old: Vec<_> = before.packs.iter().map(|p| names(&before, p)).collect();
        let kept = (after.packs.iter())
            .filter(|p| old.contains(&names(&after, p)))
            .count();
        assert!(
            kept + 3 >= before.packs.len(),
            "{kept} of {} packs kept",
            before.packs.len()
        );
    }
}
