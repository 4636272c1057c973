//! Where a client endpoint puts what it receives: the [`BlockStore`] trait,
//! implemented on disk by `repocast get` and `repocast listen` (temporary
//! files, a resume journal, partial blocks' symbols in place, atomic
//! rename) and in memory here ([`MemoryStore`]) for tests and the
//! simulator's payload runs. The endpoint decides what to
//! write and when; the store only keeps bytes and answers what it holds.

use crate::ItemId;
use crate::fec::layout::{Layout, LayoutError};
use crate::hash::FastMap;
use crate::wire::ManifestEntry;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// How an item stands when its manifest arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// The final file is already there and verified: nothing to receive.
    Complete,
    /// These blocks are verified in the store already (possibly none).
    Blocks(Vec<u32>),
}

/// Why a store could not do what the endpoint asked; the item fails with it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The item's name would leave the destination or touch the store's
    /// own state.
    #[error("refusing item name {name:?}: {why}")]
    UnsafeName {
        /// The name as the server sent it.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A different file is already where the item goes (replaced only when
    /// the user says so: `get --overwrite`).
    #[error("{path} exists and differs from the item (use --overwrite to replace it)")]
    Exists {
        /// The existing file.
        path: String,
    },
    /// The endpoint used an item it had not opened (a bug, not input).
    #[error("{0} of an item that was not opened")]
    NotOpen(&'static str),
    /// The manifest's layout is unusable.
    #[error("manifest layout: {0}")]
    Layout(#[from] LayoutError),
}

impl StoreError {
    /// An I/O error on `path`.
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        StoreError::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}

/// A selected file inside a pack, as the store cuts it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackMember {
    /// Its name (checked by the store as any item's).
    pub name: String,
    /// Where it starts in the pack.
    pub offset: u64,
    /// Its size.
    pub size: u64,
    /// BLAKE3 of its bytes.
    pub hash: [u8; 32],
    /// Unix permission bits.
    pub mode: u32,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
}

/// A pack's members cut out on another thread: one result per member, as
/// [`BlockStore::unpack`] gives them.
pub type UnpackWork = Box<dyn FnOnce() -> Vec<Result<bool, StoreError>> + Send>;

/// An item's last I/O on another thread (the fsync, the whole hash's
/// check, the rename into place): whether its bytes matched, as
/// [`BlockStore::finish`] gives it.
pub type FinishWork = Box<dyn FnOnce() -> Result<bool, StoreError> + Send>;

/// Symbols of a partly received block: (symbol id, bytes).
pub type Symbols = Vec<(u32, Vec<u8>)>;

/// What a store holds of an item from an interrupted run, found by name
/// before the manifest comes (told to the server in a `Have`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The whole item's hash the blocks belong to.
    pub hash: [u8; 32],
    /// Blocks held (verified when they were written; checked again when
    /// the manifest opens the item).
    pub blocks: Vec<u32>,
}

impl Held {
    /// The blocks as the `Have` message's bitmap.
    pub fn bitmap(&self) -> Vec<u8> {
        crate::wire::control::held_bitmap(&self.blocks)
    }
}

/// Storage for one client's items.
pub trait BlockStore {
    /// Blocks held of the item called `name` from an earlier run, if any.
    fn held(&self, name: &str) -> Option<Held> {
        let _ = name;
        None
    }
    /// Prepares to receive `m` and says what is already held.
    fn open(&mut self, m: &ManifestEntry) -> Result<Resume, StoreError>;
    /// Keeps a verified block at its offset.
    fn write_block(
        &mut self,
        item: ItemId,
        block: u32,
        offset: u64,
        data: &[u8],
    ) -> Result<(), StoreError>;
    /// Every block is in: checks the whole item's hash and, if it matches,
    /// puts it in its final place. Returns whether it matched.
    fn finish(&mut self, item: ItemId) -> Result<bool, StoreError>;
    /// [`BlockStore::finish`]'s I/O as a job to run on another thread
    /// ([`super::finish`]), or `None` to have `finish` do it here. The
    /// store hands the item's file over to it; [`BlockStore::finished`]
    /// takes its result back.
    fn finish_work(&mut self, _item: ItemId) -> Option<FinishWork> {
        None
    }
    /// The job of [`BlockStore::finish_work`] is back: `ok` is whether it
    /// put the item in place (what `finish` does after its I/O).
    fn finished(&mut self, _item: ItemId, _ok: bool) {}
    /// The item failed: drop what is held of it.
    fn discard(&mut self, item: ItemId);
    /// Stops receiving an item but keeps what is durable of it for a later
    /// resume (push mode moving to a new catalogue version): releases what
    /// the item holds open, and forgets that it was a pack.
    fn close(&mut self, _item: ItemId) {}
    /// Unix mode and modification time the item's file gets once verified
    /// (push mode; a store that keeps no files ignores them).
    fn set_attributes(&mut self, _item: ItemId, _mode: u32, _mtime: i64) {}
    /// Push mode: `item` is a pack of small files
    /// ([`crate::endpoint::pack`]), not a file: the store keeps it in its
    /// own state, never in place under its name, until
    /// [`BlockStore::unpack`]. Called before the item is opened.
    fn mark_pack(&mut self, _item: ItemId) {}
    /// Push mode: the pack `item` has verified ([`BlockStore::finish`]
    /// returned true). Puts each member in place as a file of its own,
    /// checked against its own hash and given its attributes, then drops
    /// the pack. One result per member, in order: `Ok(false)` when its
    /// bytes do not match its hash.
    fn unpack(&mut self, item: ItemId, members: &[PackMember]) -> Vec<Result<bool, StoreError>>;
    /// [`BlockStore::unpack`]'s work as a job to run on another thread
    /// (the pack's files moved into it: the store forgets the pack), or
    /// `None` to have `unpack` do it here ([`super::unpack`]).
    fn unpack_work(&mut self, _item: ItemId, _members: &[PackMember]) -> Option<UnpackWork> {
        None
    }
    /// Whether the file `name` is in place already with this size and
    /// hash (a pack whose selected members all are is not received).
    fn has_file(&self, _name: &str, _size: u64, _hash: &[u8; 32]) -> bool {
        false
    }
    /// Keeps a partly received block's symbols out of memory.
    fn spill(
        &mut self,
        item: ItemId,
        block: u32,
        symbols: &[(u32, Vec<u8>)],
    ) -> Result<(), StoreError>;
    /// Whether a block's symbols are spilled.
    fn is_spilled(&self, item: ItemId, block: u32) -> bool;
    /// Takes a spilled block's symbols back.
    fn unspill(&mut self, item: ItemId, block: u32) -> Result<Symbols, StoreError>;
    /// The run stops short of `item` and will not go on with it (a stop,
    /// the idle timeout, a new catalogue version closing it): keeps what
    /// [`BlockStore::spill`] holds of its partly received blocks for a
    /// later run, which finds it when it opens the same content laid out
    /// the same way ([`BlockStore::spilled_counts`]), also past
    /// [`BlockStore::close`].
    /// (A store on disk keeps its spill past a kill anyway; a close
    /// without this drops it.) A store that keeps nothing past its run
    /// does nothing.
    fn keep_spilled(&mut self, _item: ItemId) -> Result<(), StoreError> {
        Ok(())
    }
    /// After [`BlockStore::open`]: blocks of `item` whose symbols an
    /// earlier run kept ([`BlockStore::keep_spilled`]), with how many
    /// symbols each; they are spilled blocks of this run from now on.
    fn spilled_counts(&self, _item: ItemId) -> Vec<(u32, u32)> {
        Vec::new()
    }
}

/// One store's verified blocks of an item, lent to another
/// ([`MemoryStore::lend`]).
#[derive(Debug, Clone)]
pub struct Lent {
    /// The item's manifest.
    pub entry: ManifestEntry,
    /// Its bytes (the blocks not in are zeros).
    pub bytes: Vec<u8>,
    /// Which blocks are in.
    pub written: Vec<bool>,
}

/// Items kept in memory: what tests and the simulator's payload runs use.
/// Finished items stay readable through [`MemoryStore::file`].
#[derive(Debug, Default)]
pub struct MemoryStore {
    open: FastMap<ItemId, (ManifestEntry, Vec<u8>, Vec<bool>)>,
    done: BTreeMap<String, Vec<u8>>,
    /// Finished items' manifests, by name (what [`MemoryStore::lend`]
    /// lends with them).
    finished: BTreeMap<String, ManifestEntry>,
    spilled: FastMap<(ItemId, u32), Symbols>,
    /// Spilled symbols kept for a later run ([`BlockStore::keep_spilled`],
    /// [`MemoryStore::crash`]), by the content they belong to.
    kept: BTreeMap<Content, BTreeMap<u32, Symbols>>,
    /// Items opened with kept symbols: their blocks and counts.
    found: FastMap<ItemId, Vec<(u32, u32)>>,
    /// Items that are packs; verified packs' bytes until unpacked.
    packs: FastMap<ItemId, Option<Vec<u8>>>,
    /// Blocks written so far (a test's measure of resume).
    pub blocks_written: u64,
    /// Hand each pack's cutting out as a job
    /// ([`BlockStore::unpack_work`]), as a store on disk does: its members
    /// are in place only once the job has run.
    pub unpack_as_jobs: bool,
    /// Members cut out by jobs, not yet taken into `done`
    /// ([`MemoryStore::land`]).
    landing: Arc<Mutex<Files>>,
    /// Hand each item's whole-hash check out as a job
    /// ([`BlockStore::finish_work`]), as a store on disk does its fsync
    /// and rename: the item is in only once the job is back.
    pub finish_as_jobs: bool,
    /// Items out being finished by a job, until [`BlockStore::finished`].
    finishing: FastMap<ItemId, (ManifestEntry, Arc<Vec<u8>>)>,
}

/// Files by name, with their bytes.
type Files = Vec<(String, Vec<u8>)>;

/// What kept symbols belong to: an item's hash, size and FEC parameters
/// (code, symbol size, largest block), so they go only to the same
/// content laid out the same way.
type Content = ([u8; 32], u64, u8, u16, u32);

fn content(m: &ManifestEntry) -> Content {
    let f = m.fec;
    (
        m.hash,
        m.size,
        f.code.to_u8(),
        f.symbol_size,
        f.max_block_symbols,
    )
}

/// The members of a pack's `bytes` that match their hashes, and each
/// member's outcome.
fn cut_members(
    bytes: Option<&Vec<u8>>,
    members: &[PackMember],
) -> (Vec<Result<bool, StoreError>>, Files) {
    let mut cut = Vec::new();
    let results = (members.iter())
        .map(|m| {
            let b = bytes
                .and_then(|b| b.get(m.offset as usize..(m.offset.checked_add(m.size)?) as usize))
                .ok_or(StoreError::NotOpen("unpack"))?;
            let ok = blake3::hash(b).as_bytes() == &m.hash;
            if ok {
                cut.push((m.name.clone(), b.to_vec()));
            }
            Ok(ok)
        })
        .collect();
    (results, cut)
}

impl MemoryStore {
    /// Takes the members that unpack jobs have cut out since into the
    /// finished files (the store does so whenever it is used).
    pub fn land(&mut self) {
        let landed = match self.landing.lock() {
            Ok(mut l) => std::mem::take(&mut *l),
            Err(_) => return,
        };
        self.done.extend(landed);
    }

    /// A finished item's bytes, by name (members cut out by a job since
    /// the store was last used: after [`MemoryStore::land`]).
    pub fn file(&self, name: &str) -> Option<&[u8]> {
        self.done.get(name).map(Vec::as_slice)
    }

    /// Every finished item, by name.
    pub fn files(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.done
    }

    /// Blocks of an open item that were written (what a journal would hold
    /// after a crash), to seed another store with.
    pub fn written_blocks(&self, item: ItemId) -> Vec<u32> {
        self.open.get(&item).map_or(Vec::new(), |(_, _, w)| {
            (0..w.len() as u32).filter(|&b| w[b as usize]).collect()
        })
    }

    /// What this store can lend another of item `name` (the simulator's
    /// model of the host's shared receiver, whose requests lend each other
    /// their verified blocks): its manifest, bytes and which blocks are
    /// in. A finished item whole, an open one if any block is in.
    pub fn lend(&self, name: &str) -> Option<Lent> {
        if let (Some(m), Some(b)) = (self.finished.get(name), self.done.get(name)) {
            let blocks = Layout::new(m.size, &m.fec).map_or(0, |l| l.blocks());
            return Some(Lent {
                entry: m.clone(),
                bytes: b.clone(),
                written: vec![true; blocks as usize],
            });
        }
        let (m, b, w) = self
            .open
            .values()
            .find(|(m, _, w)| m.name == name && w.iter().any(|&x| x))?;
        Some(Lent {
            entry: m.clone(),
            bytes: b.clone(),
            written: w.clone(),
        })
    }

    /// How many blocks of item `name` [`MemoryStore::lend`] would lend
    /// (without copying them).
    pub fn lendable(&self, name: &str) -> usize {
        if let Some(m) = self.finished.get(name) {
            return Layout::new(m.size, &m.fec).map_or(0, |l| l.blocks() as usize);
        }
        (self.open.values())
            .filter(|(m, _, _)| m.name == name)
            .map(|(_, _, w)| w.iter().filter(|&&x| x).count())
            .max()
            .unwrap_or(0)
    }

    /// Takes `lent`'s blocks as written (before the endpoint is made, so
    /// its `Have` names them); an item already open here is left as it is.
    pub fn seed(&mut self, lent: Lent) {
        if self.done.contains_key(&lent.entry.name)
            || self
                .open
                .values()
                .any(|(m, _, _)| m.name == lent.entry.name)
        {
            return;
        }
        self.open
            .insert(lent.entry.item, (lent.entry, lent.bytes, lent.written));
    }

    /// Moves the partial items of `self` into a fresh store, as a restarted
    /// client finds them in its journal, with the symbols spilled of them
    /// (a store on disk logs each spill as it writes it, so a kill keeps
    /// them; what was in memory is lost).
    pub fn crash(mut self) -> MemoryStore {
        let items: Vec<ItemId> = self.open.keys().copied().collect();
        for item in items {
            let _ = self.keep_spilled(item);
        }
        MemoryStore {
            open: self.open,
            done: self.done,
            finished: self.finished,
            kept: self.kept,
            ..Default::default()
        }
    }
}

impl BlockStore for MemoryStore {
    fn held(&self, name: &str) -> Option<Held> {
        let (m, _, written) = self.open.values().find(|(m, _, _)| m.name == name)?;
        let blocks: Vec<u32> = (0..written.len() as u32)
            .filter(|&b| written[b as usize])
            .collect();
        (!blocks.is_empty()).then_some(Held {
            hash: m.hash,
            blocks,
        })
    }

    fn open(&mut self, m: &ManifestEntry) -> Result<Resume, StoreError> {
        self.land();
        let layout = Layout::new(m.size, &m.fec)?;
        if let Some(b) = self
            .done
            .get(&m.name)
            .filter(|b| b.len() as u64 == m.size && blake3::hash(b).as_bytes() == &m.hash)
        {
            // Held whole: finishing it again re-checks and keeps it.
            let all = vec![true; layout.blocks() as usize];
            self.open.insert(m.item, (m.clone(), b.clone(), all));
            return Ok(Resume::Complete);
        }
        self.found.remove(&m.item);
        let kept = self.kept.remove(&content(m)).unwrap_or_default();
        let mut found = Vec::new();
        let resumed = match self.open.get(&m.item) {
            Some((old, _, written)) if old.hash == m.hash && old.size == m.size => {
                Some(written.clone())
            }
            _ => None,
        };
        for (b, syms) in kept {
            let verified = resumed
                .as_ref()
                .is_some_and(|w| w.get(b as usize) == Some(&true));
            if b < layout.blocks() && !verified && !syms.is_empty() {
                found.push((b, syms.len() as u32));
                self.spilled.insert((m.item, b), syms);
            }
        }
        if !found.is_empty() {
            self.found.insert(m.item, found);
        }
        if let Some(written) = resumed {
            let held = (0..written.len() as u32)
                .filter(|&b| written[b as usize])
                .collect();
            return Ok(Resume::Blocks(held));
        }
        let bytes = vec![0; m.size as usize];
        let written = vec![false; layout.blocks() as usize];
        self.open.insert(m.item, (m.clone(), bytes, written));
        Ok(Resume::Blocks(Vec::new()))
    }

    fn write_block(
        &mut self,
        item: ItemId,
        block: u32,
        offset: u64,
        data: &[u8],
    ) -> Result<(), StoreError> {
        let (_, bytes, written) = self
            .open
            .get_mut(&item)
            .ok_or(StoreError::NotOpen("block"))?;
        let start = (offset as usize).min(bytes.len());
        let end = (start + data.len()).min(bytes.len());
        bytes[start..end].copy_from_slice(&data[..end - start]);
        if let Some(w) = written.get_mut(block as usize) {
            *w = true;
        }
        self.blocks_written += 1;
        Ok(())
    }

    fn finish(&mut self, item: ItemId) -> Result<bool, StoreError> {
        self.land();
        let (m, bytes, _) = self
            .open
            .remove(&item)
            .ok_or(StoreError::NotOpen("finish"))?;
        let ok = blake3::hash(&bytes).as_bytes() == &m.hash;
        if ok {
            if let Some(p) = self.packs.get_mut(&item) {
                *p = Some(bytes);
                return Ok(true);
            }
            self.done.insert(m.name.clone(), bytes);
            self.finished.insert(m.name.clone(), m);
        }
        Ok(ok)
    }

    fn finish_work(&mut self, item: ItemId) -> Option<FinishWork> {
        if !self.finish_as_jobs || self.packs.contains_key(&item) {
            return None;
        }
        let (m, bytes, _) = self.open.remove(&item)?;
        let (bytes, hash) = (Arc::new(bytes), m.hash);
        let theirs = Arc::clone(&bytes);
        self.finishing.insert(item, (m, bytes));
        Some(Box::new(move || {
            Ok(blake3::hash(&theirs).as_bytes() == &hash)
        }))
    }

    fn finished(&mut self, item: ItemId, ok: bool) {
        let Some((m, bytes)) = self.finishing.remove(&item) else {
            return;
        };
        if ok {
            let bytes = Arc::try_unwrap(bytes).unwrap_or_else(|b| (*b).clone());
            self.done.insert(m.name.clone(), bytes);
            self.finished.insert(m.name.clone(), m);
        }
    }

    fn mark_pack(&mut self, item: ItemId) {
        self.packs.insert(item, None);
    }

    fn unpack(&mut self, item: ItemId, members: &[PackMember]) -> Vec<Result<bool, StoreError>> {
        self.land();
        let bytes = self.packs.remove(&item).flatten();
        let (results, cut) = cut_members(bytes.as_ref(), members);
        self.done.extend(cut);
        results
    }

    fn unpack_work(&mut self, item: ItemId, members: &[PackMember]) -> Option<UnpackWork> {
        if !self.unpack_as_jobs {
            return None;
        }
        self.land();
        let bytes = self.packs.remove(&item).flatten();
        let (members, landing) = (members.to_vec(), Arc::clone(&self.landing));
        Some(Box::new(move || {
            let (results, cut) = cut_members(bytes.as_ref(), &members);
            if let Ok(mut l) = landing.lock() {
                l.extend(cut);
            }
            results
        }))
    }

    fn has_file(&self, name: &str, size: u64, hash: &[u8; 32]) -> bool {
        let is = |b: &Vec<u8>| b.len() as u64 == size && blake3::hash(b).as_bytes() == hash;
        let landed = |l: &Files| {
            (l.iter().rev())
                .find(|(n, _)| n == name)
                .is_some_and(|(_, b)| is(b))
        };
        self.done.get(name).is_some_and(is) || self.landing.lock().is_ok_and(|l| landed(&l))
    }

    fn discard(&mut self, item: ItemId) {
        self.open.remove(&item);
        self.packs.remove(&item);
        self.spilled.retain(|k, _| k.0 != item);
        self.found.remove(&item);
    }

    fn close(&mut self, item: ItemId) {
        // Item ids are a version's: the next may give this one to a file
        // (what is written of an open item stays, for a resume by name).
        // Symbols spilled and not kept go, as a store on disk drops its
        // side file.
        self.packs.remove(&item);
        self.spilled.retain(|k, _| k.0 != item);
        self.found.remove(&item);
    }

    fn spill(
        &mut self,
        item: ItemId,
        block: u32,
        symbols: &[(u32, Vec<u8>)],
    ) -> Result<(), StoreError> {
        self.spilled
            .entry((item, block))
            .or_default()
            .extend(symbols.iter().cloned());
        Ok(())
    }

    fn is_spilled(&self, item: ItemId, block: u32) -> bool {
        self.spilled.contains_key(&(item, block))
    }

    fn unspill(&mut self, item: ItemId, block: u32) -> Result<Symbols, StoreError> {
        Ok(self.spilled.remove(&(item, block)).unwrap_or_default())
    }

    fn keep_spilled(&mut self, item: ItemId) -> Result<(), StoreError> {
        let Some((m, _, _)) = self.open.get(&item) else {
            return Ok(());
        };
        let key = content(m);
        let blocks: Vec<u32> = (self.spilled.keys())
            .filter(|k| k.0 == item)
            .map(|k| k.1)
            .collect();
        for b in blocks {
            if let Some(syms) = self.spilled.remove(&(item, b)) {
                let kept = self.kept.entry(key).or_default().entry(b).or_default();
                kept.extend(syms);
            }
        }
        Ok(())
    }

    fn spilled_counts(&self, item: ItemId) -> Vec<(u32, u32)> {
        self.found.get(&item).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Item ids are a catalogue version's: an id that was a pack in one
    /// version and is a file in the next is stored as a file once the old
    /// version's items are closed.
    #[test]
    fn a_pack_mark_goes_with_its_version() {
        let bytes = vec![5u8; 250];
        let hash = *blake3::hash(&bytes).as_bytes();
        let m = ManifestEntry {
            item: ItemId(0),
            name: "f".into(),
            size: 250,
            hash,
            fec: crate::wire::FecParams {
                code: crate::fec::CodeKind::RaptorQ,
                symbol_size: 100,
                max_block_symbols: 10,
            },
            block_hashes: vec![hash],
        };
        let mut s = MemoryStore::default();
        s.mark_pack(ItemId(0));
        s.close(ItemId(0));
        s.open(&m).expect("open");
        s.write_block(ItemId(0), 0, 0, &bytes).expect("write");
        assert!(s.finish(ItemId(0)).expect("finish"));
        assert_eq!(s.file("f"), Some(&bytes[..]));
        // Marked and not closed, it is a pack: kept for unpacking.
        let mut p = MemoryStore::default();
        p.mark_pack(ItemId(0));
        p.open(&m).expect("open");
        p.write_block(ItemId(0), 0, 0, &bytes).expect("write");
        assert!(p.finish(ItemId(0)).expect("finish"));
        assert_eq!(p.file("f"), None);
    }
}
