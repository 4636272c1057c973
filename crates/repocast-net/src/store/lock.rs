//! Who owns a partial file: the store writing it holds an exclusive
//! `flock` on the file itself for as long as it writes it. Another `get`
//! into the same folder after the same item (another process, or another
//! request of the host's shared receiver) finds it locked and takes a name
//! of its own (`KEY-PID`, then `KEY-PID-N`), and the sweep of an older
//! content's files (`store/sweep.rs`) removes only files it could lock.

use repocast_core::endpoint::store::StoreError;
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};

/// Other names a partial takes when its own is locked, before giving up.
const PARTIAL_NAMES: u32 = 64;

/// Opens (creating) a partial file for reading and writing, keeping what
/// it holds, and takes its lock: `None` if another store holds it. Once
/// locked it is sized to `size` bytes.
pub(super) fn lock_part(path: &Path, size: u64) -> Result<Option<File>, StoreError> {
    // A file removed between the open and the lock (`sweep`: an older
    // content's, under its lock) is not the path's any more: once again.
    for _ in 0..2 {
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| StoreError::io(path, e))?;
        if !try_lock(&f) {
            return Ok(None);
        }
        if is_at(&f, path) {
            f.set_len(size).map_err(|e| StoreError::io(path, e))?;
            return Ok(Some(f));
        }
    }
    Ok(None)
}

/// The first of key `own`'s partial file names in `dir` that this store
/// can lock: its key, the file (locked, sized to `size`) and its path.
/// An error if they are all taken.
pub(super) fn take_part(
    dir: &Path,
    own: &str,
    size: u64,
) -> Result<(String, PathBuf, File), StoreError> {
    let mut base = None;
    for n in 0..=PARTIAL_NAMES {
        let key = match n {
            0 => own.to_owned(),
            _ => {
                let base = base.get_or_insert_with(|| format!("{own}-{}", std::process::id()));
                match n {
                    1 => base.clone(),
                    _ => format!("{base}-{}", n - 1),
                }
            }
        };
        let tmp = dir.join(format!("{key}.part"));
        if let Some(f) = lock_part(&tmp, size)? {
            return Ok((key, tmp, f));
        }
    }
    let busy = std::io::Error::new(
        std::io::ErrorKind::WouldBlock,
        "too many requests are receiving this item into this folder",
    );
    Err(StoreError::io(dir, busy))
}

/// Whether `path` names the open file `f` (not another, nor nothing).
pub(super) fn is_at(f: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (f.metadata(), fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Takes an exclusive lock on `f` without waiting: false if another
/// process holds it.
pub(super) fn try_lock(f: &File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor this `File` owns; no memory is
    // passed.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}
