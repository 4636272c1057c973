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

use super::{PARTIAL_SUFFIXES, name_key, try_lock};
use std::collections::BTreeSet;
use std::fs::{self, OpenOptions};
use std::path::Path;

/// Removes from `dir` the partial files of `name` whose key is not of
/// content `own` (the `partial_key` of the content being opened), unless
/// another store holds them. Returns how many partial files went.
pub(super) fn superseded(dir: &Path, name: &str, own: &str) -> usize {
    let prefix = format!("{}-", name_key(name));
    let Ok(listing) = fs::read_dir(dir) else {
        return 0;
    };
    // The keys of this name's files (a key and its suffixes: `-PID` and
    // `-PID-N` for a second store on the same content).
    let keys: BTreeSet<String> = (listing.flatten())
        .filter_map(|e| {
            let f = e.file_name().into_string().ok()?;
            let (key, ext) = f.rsplit_once('.')?;
            (key.starts_with(&prefix) && PARTIAL_SUFFIXES.contains(&ext)).then(|| key.to_owned())
        })
        .filter(|key| key != own && !key.starts_with(&format!("{own}-")))
        .collect();
    let mut removed = 0;
    for key in keys {
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
        removed += usize::from(lock.is_some());
        tracing::debug!("removed the partial files of {name}'s older content ({key})");
    }
    removed
}
