//! Where a client puts what it receives. Each verified block is written at
//! its offset in a temporary file under `OUT/.repocast/partial/` and named
//! at once in a journal, so a client killed at any point resumes with every
//! block it had verified (all but an item's last block: that one is
//! followed at once by the rename, so an item of one block never needs a
//! journal). Nothing on the receiving path waits for the disk:
//! the block's writeback is started, not awaited, and a resume checks every
//! block the journal names against its hash before keeping it (a block a
//! power loss took is simply received again). When every block is in, the
//! whole file is hashed, fsynced and renamed into place: no unverified
//! byte ever sits at a final path. A folder is fsynced (so its renames
//! last) once no item still open will be renamed into it: once per
//! folder of a request, not once per file. Symbols of partly received
//! blocks the endpoint moves out of memory go in their block's own place
//! in that temporary file (the crowd pool), a side file taking only what
//! does not fit; a log of them beside the partial file (`store/kept.rs`)
//! lets the next run go on with them, so a listener stopped in the middle
//! of a large file goes on with what it received, not only with the
//! blocks it verified.
//!
//! What the server sends is untrusted: names are checked so no path leaves
//! the output folder (nor passes through a symlink in it); an existing file
//! that differs is replaced only with `overwrite`. Two `get`s into one
//! folder never share a partial file: each holds an exclusive lock on the
//! partial files it writes (on the file itself: an item costs one file
//! created, however it ends), and a second one wanting the same item uses
//! its own. Opening a name with new content removes its older content's
//! partial files (`store/sweep.rs`).
//!
//! Requests run by the host's shared receiver lend each other what they
//! have verified ([`share`]).

use crate::NetError;
use crate::repo::STATE_DIR;
use kept::Spilled;
use repocast_core::ItemId;
use repocast_core::endpoint::store::{BlockStore, FinishWork, Held, Resume, StoreError, Symbols};
use repocast_core::fec::layout::Layout;
use repocast_core::hex;
use repocast_core::wire::control::MAX_HAVE_BYTES;
use repocast_core::wire::{FecParams, ManifestEntry};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

mod kept;
mod lock;
mod paths;
mod place;
pub mod share;
mod sweep;
mod unpack;
use lock::{lock_part, try_lock};
pub use paths::{MAX_DEPTH, safe_path};
use paths::{already_in_place, check_parents, file_is};
pub use share::Source;

struct Partial {
    /// The item's name.
    name: String,
    final_path: PathBuf,
    tmp: PathBuf,
    journal_path: PathBuf,
    /// The partial file, locked while this store writes it (`None`: the
    /// final file was already in place).
    file: Option<File>,
    /// Made when the first block that does not finish the item is written.
    journal: Option<File>,
    hash: [u8; 32],
    size: u64,
    fec: FecParams,
    /// The item's blocks (where a spilled block's symbols go).
    layout: Option<Layout>,
    /// Blocks verified in the partial file (resumed or written).
    verified: Vec<u32>,
    /// Symbols of partial blocks kept on disk, per block.
    spilled: BTreeMap<u32, Spilled>,
    /// Symbols that did not fit in their block's place: file, and its
    /// length.
    spill: Option<(PathBuf, File)>,
    spill_len: u64,
    /// The log of `spilled` beside the partial file (`kept`).
    spill_log: Option<kept::Log>,
    /// The log could not be written: none is kept this run.
    log_off: bool,
    /// The run stops short ([`BlockStore::keep_spilled`]): the spill and
    /// its log outlive the item's close, for a later run.
    kept: bool,
    /// Blocks found with an earlier run's kept symbols, and how many.
    found: Vec<(u32, u32)>,
    /// A log of the spill may be on disk (made this run, or found).
    log_on_disk: bool,
}

/// Starts writing `len` bytes at `offset` of `f` back to the disk without
/// waiting for it (so the final fsync has little left to do). Advisory: a
/// failure changes nothing but that.
fn start_writeback(f: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return;
    };
    // SAFETY: the fd is open for the call; sync_file_range takes no memory.
    unsafe {
        libc::sync_file_range(f.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE);
    }
}

/// The client's files.
pub struct Store {
    root: PathBuf,
    partial_dir: PathBuf,
    items: HashMap<ItemId, Partial>,
    overwrite: bool,
    /// Journals left by earlier runs, by their item's name key (listed
    /// once at start, for [`BlockStore::held`]).
    journals: HashMap<String, Vec<PathBuf>>,
    /// The partial keys in the folder, by their name key: listed once at
    /// start, and each this store takes added (`sweep`).
    partials: HashMap<String, BTreeSet<String>>,
    /// Mode and mtime to give items' files (push mode).
    attrs: HashMap<ItemId, (u32, i64)>,
    /// Items finished in place, by name: what this store can lend
    /// ([`Store::lend`]).
    done: HashMap<String, Source>,
    /// Blocks seeded from another request, by the journal naming them
    /// ([`Store::seed`]), until their item opens.
    seeded: HashMap<PathBuf, Vec<u32>>,
    /// Seeded blocks that verified when their item opened.
    lent: u64,
    /// Folders items were renamed into since they were last fsynced.
    unsynced: std::collections::BTreeSet<PathBuf>,
    /// Open items by the folder they will be renamed into, so a folder's
    /// fsync waits for its last item without a scan of every open item
    /// per item (a request for 20,000 files took minutes of CPU in it).
    open_in: HashMap<PathBuf, usize>,
    /// Items that are packs (push mode), and verified packs until they
    /// are unpacked: their partial file (still locked), its path and its
    /// journal's.
    packs: HashMap<ItemId, Option<(File, PathBuf, PathBuf)>>,
    /// Hand each item's fsync and rename out as a finish job
    /// ([`BlockStore::finish_work`]; `get`, whose driver runs them).
    finish_away: bool,
    /// Items out being put in place ([`place`]).
    placing: HashMap<ItemId, place::Pending>,
}

/// BLAKE3 of an open file's bytes (`len`, its expected length, sizes
/// the buffer: a small file does not cost a megabyte of fresh pages).
fn hash_open(f: &File, len: u64) -> std::io::Result<[u8; 32]> {
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; len.clamp(4096, 1 << 20) as usize];
    let mut at = 0;
    loop {
        let n = f.read_at(&mut buf, at)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok(*h.finalize().as_bytes())
}

fn hash_file(path: &Path, len: u64) -> Result<[u8; 32], StoreError> {
    let f = File::open(path).map_err(|e| StoreError::io(path, e))?;
    hash_open(&f, len).map_err(|e| StoreError::io(path, e))
}

/// How an item's name starts its partial files' names.
fn name_key(name: &str) -> String {
    hex::encode(&blake3::hash(name.as_bytes()).as_bytes()[..8])
}

/// The partial files' name of an item's version: keyed by name and
/// content, so two items with equal bytes never share a temporary file,
/// and a rerun finds its own journal.
fn partial_key(name: &str, hash: &[u8; 32], size: u64) -> String {
    format!("{}-{}-{}", name_key(name), hex::encode(&hash[..8]), size)
}

/// Bytes at the start of a journal: the item's hash and size.
const JOURNAL_HEADER: usize = 40;

/// A journal's item hash and size, and the blocks it lists (sorted, each
/// once).
fn read_journal(j: &[u8]) -> Option<([u8; 32], u64, Vec<u32>)> {
    let hash: [u8; 32] = j.get(..32)?.try_into().ok()?;
    let size = u64::from_le_bytes(j.get(32..JOURNAL_HEADER)?.try_into().ok()?);
    let mut blocks: Vec<u32> = j[JOURNAL_HEADER..]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    blocks.sort_unstable();
    blocks.dedup();
    Some((hash, size, blocks))
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

impl Store {
    /// A store writing under `root` (created if missing).
    pub fn new(root: &Path) -> Result<Store, NetError> {
        let partial_dir = root.join(STATE_DIR).join("partial");
        fs::create_dir_all(&partial_dir).map_err(|e| NetError::file(&partial_dir, e))?;
        let mut journals: HashMap<String, Vec<PathBuf>> = HashMap::new();
        let mut partials: HashMap<String, BTreeSet<String>> = HashMap::new();
        let listing = fs::read_dir(&partial_dir).map_err(|e| NetError::file(&partial_dir, e))?;
        for e in listing.flatten() {
            let name = e.file_name();
            if let Some((key, _)) = name.to_str().and_then(sweep::partial_key_of) {
                let by_name = key.split_once('-').map_or(key, |k| k.0);
                (partials.entry(by_name.to_owned()).or_default()).insert(key.to_owned());
            }
            let Some(key) = (name.to_str())
                .filter(|f| f.ends_with(".journal"))
                .and_then(|f| f.split_once('-'))
                .map(|(k, _)| k.to_owned())
            else {
                continue;
            };
            journals.entry(key).or_default().push(e.path());
        }
        Ok(Store {
            journals,
            partials,
            root: root.to_path_buf(),
            partial_dir,
            items: HashMap::new(),
            overwrite: false,
            attrs: HashMap::new(),
            done: HashMap::new(),
            seeded: HashMap::new(),
            lent: 0,
            unsynced: Default::default(),
            open_in: HashMap::new(),
            packs: HashMap::new(),
            finish_away: false,
            placing: HashMap::new(),
        })
    }

    /// Hand each item's fsync, hash check and rename out as a finish job
    /// ([`BlockStore::finish_work`]), for a driver that runs them on
    /// another thread.
    pub fn finish_away(mut self, yes: bool) -> Self {
        self.finish_away = yes;
        self
    }

    /// Replace existing files that differ from the item (`--overwrite`).
    pub fn overwrite(mut self, yes: bool) -> Self {
        self.overwrite = yes;
        self
    }

    /// Fsyncs the folders renamed into that no open item will be renamed
    /// into (all of them with `all`), so each folder is synced once its
    /// items are in rather than once per item.
    fn sync_folders(&mut self, all: bool) {
        let ready: Vec<PathBuf> = (self.unsynced.iter())
            .filter(|d| all || !self.open_in.contains_key(d.as_path()))
            .cloned()
            .collect();
        for d in ready {
            sync_dir(&d);
            self.unsynced.remove(&d);
        }
    }

    /// Holds `p` as `item`'s open partial, counted in its folder.
    fn put_item(&mut self, item: ItemId, p: Partial) {
        if let Some(d) = p.final_path.parent() {
            self.count_open(d);
        }
        if let Some(old) = self.items.insert(item, p) {
            self.uncount(&old);
        }
    }

    /// Takes `item`'s open partial, if any, off its folder's count.
    fn take_item(&mut self, item: ItemId) -> Option<Partial> {
        let p = self.items.remove(&item)?;
        self.uncount(&p);
        Some(p)
    }

    fn uncount(&mut self, p: &Partial) {
        if let Some(d) = p.final_path.parent() {
            self.uncount_open(d);
        }
    }

    /// One more item will be renamed into `dir`.
    fn count_open(&mut self, dir: &Path) {
        *self.open_in.entry(dir.to_path_buf()).or_default() += 1;
    }

    /// One item fewer will be renamed into `dir`.
    fn uncount_open(&mut self, dir: &Path) {
        if let Some(n) = self.open_in.get_mut(dir) {
            *n -= 1;
            if *n == 0 {
                self.open_in.remove(dir);
            }
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.sync_folders(true);
    }
}

/// The files of one partial key: the file, its journal, its spill's log
/// and the spill's side file.
const PARTIAL_SUFFIXES: [&str; 4] = ["part", "journal", "kept", "spill"];

/// Opens (creating) a journal for appending blocks, starting it with the
/// item's hash and size unless it has its header already.
fn open_journal(path: &Path, hash: &[u8; 32], size: u64) -> Result<File, StoreError> {
    let mut j = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| StoreError::io(path, e))?;
    if j.metadata().map(|x| x.len()).unwrap_or(0) < JOURNAL_HEADER as u64 {
        let mut head = hash.to_vec();
        head.extend_from_slice(&size.to_le_bytes());
        j.set_len(0)
            .and_then(|()| j.write_all(&head))
            .map_err(|e| StoreError::io(path, e))?;
    }
    Ok(j)
}

impl BlockStore for Store {
    /// The blocks a journal from an earlier run lists for `name` (checked
    /// against their hashes when the manifest opens the item).
    fn held(&self, name: &str) -> Option<Held> {
        for path in self.journals.get(&name_key(name))? {
            let Some((hash, _, mut blocks)) = fs::read(path).ok().as_deref().and_then(read_journal)
            else {
                continue;
            };
            blocks.retain(|&b| (b as usize) < MAX_HAVE_BYTES * 8);
            if !blocks.is_empty() {
                return Some(Held { hash, blocks });
            }
        }
        None
    }

    /// Prepares to receive `m`: checks its name, and says what is already
    /// on disk (a verified final file, or blocks in the journal that still
    /// match their hashes).
    fn open(&mut self, m: &ManifestEntry) -> Result<Resume, StoreError> {
        // A pack is never in place: it lives in the partial folder until
        // its members are cut out (its name is the listener's, not the
        // pusher's).
        let pack = self.packs.contains_key(&m.item);
        let final_path = if pack {
            PathBuf::new()
        } else {
            safe_path(&self.root, &m.name)?
        };
        check_parents(&self.root, &final_path)?;
        let layout = Layout::new(m.size, &m.fec)?;
        let mut p = Partial {
            name: m.name.clone(),
            final_path,
            tmp: PathBuf::new(),
            journal_path: PathBuf::new(),
            file: None,
            journal: None,
            hash: m.hash,
            size: m.size,
            fec: m.fec,
            layout: Some(layout),
            verified: Vec::new(),
            spilled: BTreeMap::new(),
            spill: None,
            spill_len: 0,
            spill_log: None,
            log_off: false,
            kept: false,
            found: Vec::new(),
            log_on_disk: false,
        };
        // This name's older content: never of use here again.
        let own = partial_key(&m.name, &m.hash, m.size);
        if let Some(keys) = self.partials.get_mut(&name_key(&m.name)) {
            sweep::superseded(&self.partial_dir, keys, &own);
        }
        if !pack && already_in_place(&p.final_path, m.size, &m.hash, self.overwrite)? {
            self.put_item(m.item, p);
            return Ok(Resume::Complete);
        }
        // The partial file's lock says who owns it (`store/lock.rs`).
        let (key, tmp, file) = lock::take_part(&self.partial_dir, &own, m.size)?;
        (self.partials.entry(name_key(&m.name)).or_default()).insert(key.clone());
        p.tmp = tmp;
        p.journal_path = self.partial_dir.join(format!("{key}.journal"));
        let mut have = Vec::new();
        let journal = fs::read(&p.journal_path).ok();
        if let Some(j) = &journal {
            let mut buf = Vec::new();
            let listed = match read_journal(j) {
                Some((hash, size, blocks)) if hash == m.hash && size == m.size => blocks,
                _ => Vec::new(),
            };
            for b in listed {
                let Some(h) = m.block_hashes.get(b as usize) else {
                    continue;
                };
                buf.resize(layout.block_len(b) as usize, 0);
                if file.read_exact_at(&mut buf, layout.block_offset(b)).is_ok()
                    && blake3::hash(&buf).as_bytes() == h
                {
                    have.push(b);
                }
            }
        }
        if let Some(seeded) = self.seeded.remove(&p.journal_path) {
            self.lent += have.iter().filter(|b| seeded.contains(b)).count() as u64;
        }
        if have.is_empty() {
            if journal.is_some() {
                let _ = fs::remove_file(&p.journal_path);
            }
        } else {
            p.journal = Some(open_journal(&p.journal_path, &m.hash, m.size)?);
        }
        p.file = Some(file);
        p.verified.clone_from(&have);
        p.take_kept(m);
        self.put_item(m.item, p);
        Ok(Resume::Blocks(have))
    }

    /// Writes a verified block and records it in the journal (all but the
    /// item's last block: [`BlockStore::finish`] follows that one at once).
    fn write_block(
        &mut self,
        item: ItemId,
        block: u32,
        offset: u64,
        data: &[u8],
    ) -> Result<(), StoreError> {
        let p = self
            .items
            .get_mut(&item)
            .ok_or(StoreError::NotOpen("block"))?;
        // The spill's log stays true: the block is not spilled (a spilled
        // one comes back before it can decode), and the journal, read
        // first, names it.
        let Some(f) = p.file.as_ref() else {
            return Ok(());
        };
        f.write_all_at(data, offset)
            .map_err(|e| StoreError::io(&p.tmp, e))?;
        start_writeback(f, offset, data.len() as u64);
        p.verified.push(block);
        if p.layout
            .is_some_and(|l| p.verified.len() >= l.blocks() as usize)
        {
            return Ok(());
        }
        let j = match p.journal.as_mut() {
            Some(j) => j,
            None => p
                .journal
                .insert(open_journal(&p.journal_path, &p.hash, p.size)?),
        };
        j.write_all(&block.to_le_bytes())
            .map_err(|e| StoreError::io(&p.journal_path, e))?;
        Ok(())
    }

    /// Keeps the symbols of a partially received block on disk: in the
    /// block's own place in the partial file while they fit (whole symbols
    /// within the block's length; the block is written there once it
    /// decodes), the rest in the side file.
    fn spill(
        &mut self,
        item: ItemId,
        block: u32,
        symbols: &[(u32, Vec<u8>)],
    ) -> Result<(), StoreError> {
        let p = self
            .items
            .get_mut(&item)
            .ok_or(StoreError::NotOpen("spill"))?;
        let rec = p.spilled.entry(block).or_default();
        let start = rec.ids.len();
        let (Some(f), Some(l)) = (p.file.as_ref(), p.layout) else {
            return Ok(());
        };
        let t = l.symbol_size() as usize;
        let room = l.block_len(block) as usize / t.max(1);
        let at = l.block_offset(block) + (rec.ids.len() * t) as u64;
        let mut here = Vec::new();
        let mut side = Vec::new();
        for (esi, bytes) in symbols {
            if rec.ids.len() < room && bytes.len() == t {
                rec.ids.push(*esi);
                here.extend_from_slice(bytes);
            } else {
                side.extend_from_slice(&esi.to_le_bytes());
                side.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                side.extend_from_slice(bytes);
            }
        }
        f.write_all_at(&here, at)
            .map_err(|e| StoreError::io(&p.tmp, e))?;
        let ids = rec.ids[start..].to_vec();
        if side.is_empty() {
            p.log(&kept::spill_entry(block, start, &ids, &[]));
            return Ok(());
        }
        if p.spill.is_none() {
            let path = p.tmp.with_extension("spill");
            let f = OpenOptions::new()
                .create(true)
                .truncate(true)
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|e| StoreError::io(&path, e))?;
            p.spill = Some((path, f));
            p.spill_len = 0;
        }
        let Some((path, f)) = p.spill.as_mut() else {
            return Ok(());
        };
        f.write_all_at(&side, p.spill_len)
            .map_err(|e| StoreError::io(&*path, e))?;
        let record = (p.spill_len, side.len() as u32);
        p.spilled.entry(block).or_default().side.push(record);
        p.spill_len += side.len() as u64;
        p.log(&kept::spill_entry(block, start, &ids, &[record]));
        Ok(())
    }

    fn close(&mut self, item: ItemId) {
        // Item ids are a version's: the next may give this one to a file.
        self.packs.remove(&item);
        if let Some(mut p) = self.take_item(item) {
            // The journal already names every written block; the lock and
            // handles go, the spill (symbols in memory's stead) and its log
            // too unless they are kept for a later run.
            if !p.kept {
                p.drop_log();
                if let Some((path, _)) = p.spill.as_ref() {
                    let _ = fs::remove_file(path);
                }
            }
        }
        self.sync_folders(false);
    }

    fn discard(&mut self, item: ItemId) {
        self.packs.remove(&item);
        if let Some(mut p) = self.take_item(item) {
            p.drop_log();
            if p.file.is_some() {
                let _ = fs::remove_file(&p.tmp);
                let _ = fs::remove_file(&p.journal_path);
            }
            if let Some((path, _)) = p.spill {
                let _ = fs::remove_file(path);
            }
        }
        self.sync_folders(false);
    }

    /// Whether block `block` of `item` has symbols on disk.
    fn is_spilled(&self, item: ItemId, block: u32) -> bool {
        self.items
            .get(&item)
            .is_some_and(|p| p.spilled.contains_key(&block))
    }

    /// Reads back (and forgets) the spilled symbols of a block.
    fn unspill(&mut self, item: ItemId, block: u32) -> Result<Symbols, StoreError> {
        let Some(p) = self.items.get_mut(&item) else {
            return Ok(Vec::new());
        };
        let Some(rec) = p.spilled.remove(&block) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(rec.ids.len());
        if let (Some(f), Some(l), false) = (p.file.as_ref(), p.layout, rec.ids.is_empty()) {
            let t = l.symbol_size() as usize;
            let mut buf = vec![0u8; rec.ids.len() * t];
            f.read_exact_at(&mut buf, l.block_offset(block))
                .map_err(|e| StoreError::io(&p.tmp, e))?;
            out.extend(
                rec.ids
                    .iter()
                    .zip(buf.chunks_exact(t))
                    .map(|(&e, b)| (e, b.to_vec())),
            );
        }
        if let Some((path, f)) = p.spill.as_ref() {
            for (off, len) in rec.side {
                let mut buf = vec![0u8; len as usize];
                f.read_exact_at(&mut buf, off)
                    .map_err(|e| StoreError::io(path, e))?;
                let mut i = 0;
                while i + 8 <= buf.len() {
                    let esi = u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
                    let n = u32::from_le_bytes([buf[i + 4], buf[i + 5], buf[i + 6], buf[i + 7]])
                        as usize;
                    let Some(bytes) = buf.get(i + 8..i + 8 + n) else {
                        break;
                    };
                    out.push((esi, bytes.to_vec()));
                    i += 8 + n;
                }
            }
        }
        if p.spilled.is_empty() {
            // Nothing on disk is needed any more: the side file starts
            // over and the log goes (its entries name side records, so
            // the side file is not reused while it lives).
            p.drop_log();
            p.spill_len = 0;
        } else {
            p.log(&kept::drop_entry(block));
        }
        Ok(out)
    }

    /// The spill's log is true after every spill already: this keeps it
    /// (and the side file) past the item's close, and says whether it
    /// could be written.
    fn keep_spilled(&mut self, item: ItemId) -> Result<(), StoreError> {
        let Some(p) = self.items.get_mut(&item).filter(|p| p.file.is_some()) else {
            return Ok(());
        };
        p.kept = true;
        p.flush_log();
        if p.log_off && !p.spilled.is_empty() {
            let why = std::io::Error::other("the log of partly received blocks failed");
            return Err(StoreError::io(p.log_path(), why));
        }
        Ok(())
    }

    fn spilled_counts(&self, item: ItemId) -> Vec<(u32, u32)> {
        self.items
            .get(&item)
            .map(|p| p.found.clone())
            .unwrap_or_default()
    }

    fn mark_pack(&mut self, item: ItemId) {
        self.packs.insert(item, None);
    }

    fn unpack(
        &mut self,
        item: ItemId,
        members: &[repocast_core::endpoint::store::PackMember],
    ) -> Vec<Result<bool, StoreError>> {
        self.unpack_job(item, members)()
    }

    fn unpack_work(
        &mut self,
        item: ItemId,
        members: &[repocast_core::endpoint::store::PackMember],
    ) -> Option<repocast_core::endpoint::store::UnpackWork> {
        Some(self.unpack_job(item, members))
    }

    fn has_file(&self, name: &str, size: u64, hash: &[u8; 32]) -> bool {
        self.in_place(name, size, hash).unwrap_or(false)
    }

    fn set_attributes(&mut self, item: ItemId, mode: u32, mtime: i64) {
        self.attrs.insert(item, (mode, mtime));
    }

    /// Every block is in: checks the whole hash, then fsyncs and renames the
    /// file into place (`store/place.rs`). Returns whether it verified (a
    /// mismatch discards the temporary file and journal).
    fn finish(&mut self, item: ItemId) -> Result<bool, StoreError> {
        let is_pack = self.packs.contains_key(&item);
        let Some(placing) = self.take_placing(item)? else {
            return Ok(true); // the final file was already there and verified
        };
        if is_pack {
            // Kept here, still locked, until it is unpacked.
            let ok = placing.check();
            self.placed(item, false);
            if ok? {
                let kept = (placing.file, placing.tmp, placing.journal_path);
                self.packs.insert(item, Some(kept));
                return Ok(true);
            }
            return Ok(false);
        }
        let placed = placing.place();
        self.placed(item, matches!(placed, Ok(true)));
        placed
    }

    fn finish_work(&mut self, item: ItemId) -> Option<FinishWork> {
        if !(self.finish_away && self.can_place_away(item)) {
            return None;
        }
        let placing = self.take_placing(item).ok().flatten()?;
        Some(Box::new(move || placing.place()))
    }

    fn finished(&mut self, item: ItemId, ok: bool) {
        self.placed(item, ok);
    }
}

/// Gives a verified file the pusher's permission bits (read and write
/// bits only: a pusher cannot make a set-user-id or executable-by-surprise
/// file beyond what its mode says for owner, group and others) and mtime.
fn set_attributes(path: &Path, mode: u32, mtime: i64) -> Result<(), StoreError> {
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| StoreError::io(path, e))?;
    set_file_attributes(&f, path, mode, mtime)
}

/// [`set_attributes`] on an open file (`path` names it in errors).
fn set_file_attributes(f: &File, path: &Path, mode: u32, mtime: i64) -> Result<(), StoreError> {
    use std::os::unix::fs::PermissionsExt;
    let when = if mtime >= 0 {
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(mtime as u64)
    } else {
        std::time::UNIX_EPOCH
    };
    f.set_modified(when).map_err(|e| StoreError::io(path, e))?;
    // Owner read and write always, so the listener can update it later.
    let bits = (mode & 0o777) | 0o600;
    f.set_permissions(fs::Permissions::from_mode(bits))
        .map_err(|e| StoreError::io(path, e))
}

#[cfg(test)]
mod tests;
