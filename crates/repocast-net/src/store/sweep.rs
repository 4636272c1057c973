//! Partial files a folder no longer needs: those of a name's older
//! content. Partial files are named by the item's name and content
//! (`partial_key`), and stay after a run that stops short so a rerun
//! resumes. When the same name opens with other content (the server's
//! file changed between two `get`s, a pusher's new catalogue version
//! changed a file a listener was receiving), the older content's partial
//! file, journal and kept spill can never be used again in this folder,
//! and would stay there for good, as large as the file: a listener that
//! runs for months would fill its disk. Opening an item removes them.
//!
//! Only files nobody holds: a `.part` is removed under its lock (another
//! `get` receiving that older content into this folder keeps it), and a
//! store taking a lock checks it still has the file at that path
//! (`lock_part`), so it never writes to one removed under it.
//!
//! The store lists the folder once, when it is made, and adds each key it
//! takes, so an open costs no listing (a listener opens thousands of
//! items a version).

use super::{PARTIAL_SUFFIXES, try_lock};
use std::collections::BTreeSet;
use std::fs::{self, OpenOptions};
use std::path::Path;

/// A partial file's name as its key and suffix, if it is one of
/// [`PARTIAL_SUFFIXES`].
pub(super) fn partial_key_of(file: &str) -> Option<(&str, &str)> {
    file.rsplit_once('.')
        .filter(|(_, ext)| PARTIAL_SUFFIXES.contains(ext))
}

/// Removes from `dir` the partial files of the keys in `keys` (one name's,
/// as the store knows them) that are not of content `own` (the
/// `partial_key` being opened: its own key, and `own-PID[-N]` of a second
/// store on that content), unless another store holds them; those removed
/// leave `keys`.
pub(super) fn superseded(dir: &Path, keys: &mut BTreeSet<String>, own: &str) {
    let older: Vec<String> = (keys.iter())
        .filter(|key| *key != own && !key.starts_with(&format!("{own}-")))
        .cloned()
        .collect();
    for key in older {
        let part = dir.join(format!("{key}.part"));
        // Held under its lock while the rest goes; no `.part` (a journal
        // left alone): nobody can be writing it.
        let lock = OpenOptions::new().read(true).write(true).open(&part).ok();
        if lock.as_ref().is_some_and(|f| !try_lock(f)) {
            continue;
        }
        for ext in PARTIAL_SUFFIXES {
            let _ = fs::remove_file(dir.join(format!("{key}.{ext}")));
        }
        keys.remove(&key);
        tracing::debug!("removed the partial files of an older content ({key})");
    }
}
