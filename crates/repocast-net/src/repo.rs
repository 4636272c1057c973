//! The repository on disk: every regular file under DIR is an item, named by
//! its relative path; BLAKE3 hashes (whole item and per block) computed once
//! and cached in `DIR/.repocast/hashes.v2`, each under the file's size,
//! modification and change times and inode (a file rewritten with its size
//! and modification time kept has a new change time, which no user can
//! set); blocks read on demand, so the server's memory does not grow with
//! the repository.

use crate::NetError;
use repocast_core::ItemId;
use repocast_core::fec::layout::{BlockGrowth, Layout, item_fec};
use repocast_core::hex;
use repocast_core::server::{BlockSource, ItemInfo, SourceError};
use repocast_core::wire::FecParams;
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// Folder (under the repository) holding repocast's own state; never served.
pub const STATE_DIR: &str = ".repocast";
/// The hash cache. `hashes.v1` keyed a file by its size and modification
/// time alone, so a file rewritten with both kept kept its old hash; it is
/// no longer read (every file is hashed once more after an upgrade).
const CACHE_FILE: &str = "hashes.v2";

/// One file of the repository.
#[derive(Debug, Clone)]
pub struct RepoFile {
    /// Absolute path.
    pub path: PathBuf,
    /// Size and modification time when scanned (a change fails the item).
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: u128,
    /// Unix permission bits.
    pub mode: u32,
    /// What the core needs to know.
    pub info: ItemInfo,
}

/// The scanned repository.
pub struct Repository {
    /// Files by item id (sorted by name).
    pub files: Vec<RepoFile>,
    /// How many files were hashed now (not taken from the cache).
    pub hashed: usize,
    /// Files left out because they could not be read.
    pub skipped: usize,
}

fn mtime_ns(m: &fs::Metadata) -> u128 {
    m.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos())
}

/// What the hash cache keys a file by beside its name and size: its
/// modification time, change time and inode. Any write to a file moves
/// its change time, and so does a chmod or a new hard link (a file is then
/// hashed again, which costs a read and is never wrong).
pub(crate) fn stamp(m: &fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!(
        "{}:{}.{:09}:{}",
        mtime_ns(m),
        m.ctime(),
        m.ctime_nsec(),
        m.ino()
    )
}

fn walk(
    root: &Path,
    dir: &Path,
    out: &mut Vec<(String, PathBuf, fs::Metadata)>,
) -> Result<(), NetError> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if dir == root => return Err(NetError::file(dir, e)),
        Err(e) => {
            tracing::warn!("skipping {}: {e}", dir.display());
            return Ok(());
        }
    };
    for entry in rd {
        let Ok(entry) = entry else {
            continue;
        };
        let path = entry.path();
        // Never follow symlinks: a link could point outside the repository.
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let Ok(rel) = path.strip_prefix(root) else {
            continue;
        };
        let Some(name) = rel
            .to_str()
            .map(|s| s.replace(std::path::MAIN_SEPARATOR, "/"))
        else {
            tracing::warn!("skipping {}: name is not UTF-8", path.display());
            continue;
        };
        if name == STATE_DIR || name.starts_with(&format!("{STATE_DIR}/")) {
            continue;
        }
        if meta.is_dir() {
            walk(root, &path, out)?;
        } else if meta.is_file() {
            out.push((name, path, meta));
        }
    }
    Ok(())
}

/// Hashes a file: BLAKE3 of the whole and of each block of `layout`.
fn hash_file(path: &Path, layout: &Layout) -> Result<([u8; 32], Vec<[u8; 32]>), NetError> {
    let mut f = open_regular(path).map_err(|e| NetError::file(path, e))?;
    let mut whole = blake3::Hasher::new();
    let mut blocks = Vec::with_capacity(layout.blocks() as usize);
    let mut buf = Vec::new();
    for b in 0..layout.blocks() {
        buf.resize(layout.block_len(b) as usize, 0);
        f.read_exact(&mut buf)
            .map_err(|e| NetError::file(path, e))?;
        whole.update(&buf);
        blocks.push(*blake3::hash(&buf).as_bytes());
    }
    Ok((*whole.finalize().as_bytes(), blocks))
}

/// Opens `path` for reading without blocking (a FIFO or device put in a
/// file's place cannot stall the caller) and refuses anything but a
/// regular file.
fn open_regular(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(f)
}

type CacheKey = (String, u64, String, String);

fn params_key(fec: &FecParams) -> String {
    format!(
        "{}:{}:{}",
        fec.code.name(),
        fec.symbol_size,
        fec.max_block_symbols
    )
}

fn load_cache(path: &Path) -> HashMap<CacheKey, ([u8; 32], Vec<[u8; 32]>)> {
    let mut m = HashMap::new();
    let Ok(text) = fs::read_to_string(path) else {
        return m;
    };
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [name, size, stamp, params, hash, blocks] = f[..] else {
            continue;
        };
        let (Ok(size), Some(hash)) = (size.parse(), hex::decode32(hash)) else {
            continue;
        };
        let bh: Option<Vec<[u8; 32]>> = (0..blocks.len() / 64)
            .map(|i| hex::decode32(blocks.get(64 * i..64 * i + 64)?))
            .collect();
        if let Some(bh) = bh {
            m.insert(
                (name.to_owned(), size, stamp.to_owned(), params.to_owned()),
                (hash, bh),
            );
        }
    }
    m
}

impl Repository {
    /// Scans `root` for `fec`'s layout (each file's blocks grown by `growth`
    /// as [`item_fec`] says), reusing cached hashes of files whose size,
    /// times and inode are unchanged (`stamp`).
    pub fn scan(
        root: &Path,
        fec: &FecParams,
        growth: Option<BlockGrowth>,
    ) -> Result<Repository, NetError> {
        Self::scan_fresh(root, fec, growth, &Default::default())
    }

    /// [`Repository::scan`], hashing the files named in `fresh` whatever
    /// the cache says (they did not read as it says: rewritten within the
    /// same tick of the file system's clock as their last scan, or a cache
    /// copied from elsewhere).
    pub fn scan_fresh(
        root: &Path,
        fec: &FecParams,
        growth: Option<BlockGrowth>,
        fresh: &std::collections::HashSet<String>,
    ) -> Result<Repository, NetError> {
        let meta = fs::metadata(root).map_err(|e| NetError::file(root, e))?;
        if !meta.is_dir() {
            return Err(NetError::NotADirectory(root.display().to_string()));
        }
        let mut found = Vec::new();
        walk(root, root, &mut found)?;
        found.sort_by(|a, b| a.0.cmp(&b.0));
        let cache_path = root.join(STATE_DIR).join(CACHE_FILE);
        let cache = load_cache(&cache_path);
        let (mut files, mut hashed, mut lines) = (Vec::new(), 0, String::new());
        let mut skipped = 0;
        for (name, path, meta) in found {
            let (size, mtime) = (meta.len(), mtime_ns(&meta));
            let fec = item_fec(fec, growth, size);
            let pk = params_key(&fec);
            let layout = match Layout::new(size, &fec) {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!("not serving {name}: {e}");
                    skipped += 1;
                    continue;
                }
            };
            let st = stamp(&meta);
            let key = (name.clone(), size, st.clone(), pk.clone());
            let (hash, block_hashes) = match cache.get(&key) {
                Some(v) if v.1.len() == layout.blocks() as usize && !fresh.contains(&name) => {
                    v.clone()
                }
                _ => match hash_file(&path, &layout) {
                    Ok(h) => {
                        hashed += 1;
                        h
                    }
                    Err(e) => {
                        tracing::warn!("not serving {name}: {e}");
                        skipped += 1;
                        continue;
                    }
                },
            };
            if !name.contains(['\t', '\n']) {
                let bh: String = block_hashes.iter().map(|h| hex::encode(h)).collect();
                lines.push_str(&format!(
                    "{name}\t{size}\t{st}\t{pk}\t{}\t{bh}\n",
                    hex::encode(&hash)
                ));
            }
            files.push(RepoFile {
                path,
                size,
                mtime_ns: mtime,
                mode: std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777,
                info: ItemInfo {
                    name,
                    size,
                    hash,
                    block_hashes,
                },
            });
        }
        if hashed > 0 {
            if let Err(e) = crate::state_file::write_whole(&cache_path, lines) {
                tracing::warn!("could not cache hashes in {}: {e}", cache_path.display());
            }
        }
        Ok(Repository {
            files,
            hashed,
            skipped,
        })
    }

    /// The items, for the server state machine.
    pub fn infos(&self) -> Vec<ItemInfo> {
        self.files.iter().map(|f| f.info.clone()).collect()
    }

    /// A block source over these files.
    pub fn source(&self) -> FileSource {
        FileSource {
            files: self
                .files
                .iter()
                .map(|f| (f.path.clone(), f.size, f.mtime_ns))
                .collect(),
            open: None,
            spool: None,
        }
    }
}

/// Reads blocks from the repository's files (one open file at a time),
/// with the pusher's spool if it has one.
pub struct FileSource {
    files: Vec<(PathBuf, u64, u128)>,
    open: Option<(ItemId, File)>,
    /// Where a pusher keeps symbols made ahead (`push::spool`).
    pub spool: Option<crate::push::spool::FileSpool>,
}

impl BlockSource for FileSource {
    fn read(
        &mut self,
        item: ItemId,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), SourceError> {
        let (path, size, mtime) = self.files.get(item.0 as usize).ok_or(SourceError::NoItem)?;
        let io = |source| SourceError::Io {
            path: path.display().to_string(),
            source,
        };
        if self.open.as_ref().is_none_or(|(i, _)| *i != item) {
            self.open = None;
            self.open = Some((item, open_regular(path).map_err(io)?));
        }
        let Some((_, f)) = &self.open else {
            return Err(SourceError::NoItem);
        };
        // One fstat per block read: a file rewritten while it is served
        // fails its item here (the core's block hash check catches the rest).
        let m = f.metadata().map_err(io)?;
        if m.len() != *size || mtime_ns(&m) != *mtime {
            self.open = None;
            return Err(SourceError::Changed {
                path: path.display().to_string(),
            });
        }
        let start = out.len();
        out.resize(start + len, 0);
        f.read_exact_at(&mut out[start..], offset).map_err(io)
    }

    fn spool(&mut self) -> Option<&mut dyn repocast_core::server::spool::SymbolSpool> {
        (self.spool.as_mut()).map(|s| s as &mut dyn repocast_core::server::spool::SymbolSpool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use repocast_core::fec::CodeKind;

    fn fec() -> FecParams {
        FecParams {
            code: CodeKind::RaptorQ,
            symbol_size: 1_000,
            max_block_symbols: 100,
        }
    }

    fn hash_of(r: &Repository, name: &str) -> [u8; 32] {
        (r.files.iter())
            .find(|f| f.info.name == name)
            .map(|f| f.info.hash)
            .expect("scanned")
    }

    #[test]
    fn a_file_rewritten_with_its_size_and_time_kept_is_hashed_again() {
        let dir = tempfile::tempdir().expect("tmp");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        fs::write(&a, vec![1u8; 5_000]).expect("write");
        fs::write(&b, vec![2u8; 5_000]).expect("write");
        let first = Repository::scan(dir.path(), &fec(), None).expect("scan");
        assert_eq!(first.hashed, 2);
        // Unchanged: both from the cache.
        let again = Repository::scan(dir.path(), &fec(), None).expect("scan");
        assert_eq!(again.hashed, 0);
        assert_eq!(
            hash_of(&again, "a"),
            *blake3::hash(&[1u8; 5_000]).as_bytes()
        );
        // `a` rewritten, its size and modification time put back (as a
        // restore or `touch -r` does): hashed again, as it now reads.
        let mtime = fs::metadata(&a).and_then(|m| m.modified()).expect("mtime");
        fs::write(&a, vec![7u8; 5_000]).expect("rewrite");
        File::options()
            .write(true)
            .open(&a)
            .and_then(|f| f.set_modified(mtime))
            .expect("keep the time");
        let now = Repository::scan(dir.path(), &fec(), None).expect("scan");
        assert_eq!(now.hashed, 1);
        assert_eq!(hash_of(&now, "a"), *blake3::hash(&[7u8; 5_000]).as_bytes());
        assert_eq!(hash_of(&now, "b"), *blake3::hash(&[2u8; 5_000]).as_bytes());
    }
}
