//! Putting a verified item in place: the fsync, the whole file's hash, the
//! rename, and what the store keeps track of around them.
//!
//! The I/O ([`Placing::place`]) can run on another thread: `get` hands it
//! out as a finish job ([`repocast_core::endpoint::finish`]), so its
//! receiving loop never waits for the disk's fsync (about 0.35 ms a file on
//! the lab's disk: 4 s of a 15 s request for 20,000 small files). While it
//! is out the item counts as open in its folder, so the folder's own fsync
//! still waits for its rename.

use super::share::Source;
use super::{Store, check_parents, hash_open, set_attributes};
use repocast_core::ItemId;
use repocast_core::endpoint::store::StoreError;
use std::fs::{self, File};
use std::path::PathBuf;

/// An item's partial file and where it goes.
pub(super) struct Placing {
    pub(super) file: File,
    pub(super) tmp: PathBuf,
    final_path: PathBuf,
    pub(super) journal_path: PathBuf,
    /// A journal was written (it goes once the file is in place).
    journaled: bool,
    size: u64,
    hash: [u8; 32],
    /// Mode and mtime to give the file (push mode).
    attrs: Option<(u32, i64)>,
    root: PathBuf,
}

impl Placing {
    /// Fsyncs the partial file and checks its whole hash. `false`: its
    /// bytes do not match, and it and its journal are gone.
    pub(super) fn check(&self) -> Result<bool, StoreError> {
        let f = &self.file;
        f.sync_all().map_err(|e| StoreError::io(&self.tmp, e))?;
        let ok = f.metadata().is_ok_and(|m| m.len() == self.size)
            && hash_open(f, self.size).map_err(|e| StoreError::io(&self.tmp, e))? == self.hash;
        if !ok {
            let _ = fs::remove_file(&self.tmp);
            let _ = fs::remove_file(&self.journal_path);
        }
        Ok(ok)
    }

    /// [`Placing::check`], then renames the file into place (the partial
    /// stays open, and so locked, until then). Whether it matched.
    pub(super) fn place(self) -> Result<bool, StoreError> {
        if !self.check()? {
            return Ok(false);
        }
        // The folders were checked at open; check again just before the
        // rename (the folder may have changed meanwhile), and make the
        // item's folder only if it is missing.
        if !check_parents(&self.root, &self.final_path)? {
            if let Some(parent) = self.final_path.parent() {
                fs::create_dir_all(parent).map_err(|e| StoreError::io(parent, e))?;
            }
            check_parents(&self.root, &self.final_path)?;
        }
        if let Some((mode, mtime)) = self.attrs {
            set_attributes(&self.tmp, mode, mtime)?;
        }
        fs::rename(&self.tmp, &self.final_path).map_err(|e| StoreError::io(&self.final_path, e))?;
        if self.journaled {
            let _ = fs::remove_file(&self.journal_path);
        }
        Ok(true)
    }
}

/// What the store does once an item's placing is over.
pub(super) struct Pending {
    /// The folder it is renamed into.
    folder: Option<PathBuf>,
    /// What the store can lend of it once it is in place.
    lent: Option<Source>,
}

impl Store {
    /// Takes `item` out of the open items to be put in place. `None`: its
    /// final file was already there and verified (nothing to do).
    pub(super) fn take_placing(&mut self, item: ItemId) -> Result<Option<Placing>, StoreError> {
        // Out of the open items, but still counted in its folder until
        // `placed`.
        let mut p = (self.items.remove(&item)).ok_or(StoreError::NotOpen("finish"))?;
        let lent = Source::finished(&p);
        if let Some((path, _)) = &p.spill {
            let _ = fs::remove_file(path);
        }
        p.drop_log();
        let folder = p.final_path.parent().map(PathBuf::from);
        let Some(file) = p.file else {
            if let Some(d) = &folder {
                self.uncount_open(d);
            }
            self.keep_lent(lent);
            self.sync_folders(false);
            return Ok(None);
        };
        self.placing.insert(item, Pending { folder, lent });
        Ok(Some(Placing {
            file,
            tmp: p.tmp,
            final_path: p.final_path,
            journal_path: p.journal_path,
            journaled: p.journal.is_some(),
            size: p.size,
            hash: p.hash,
            attrs: self.attrs.remove(&item),
            root: self.root.clone(),
        }))
    }

    /// `item`'s placing is over; `in_place`: its file is at its final
    /// path now.
    pub(super) fn placed(&mut self, item: ItemId, in_place: bool) {
        let Some(done) = self.placing.remove(&item) else {
            return;
        };
        if let Some(d) = &done.folder {
            self.uncount_open(d);
            if in_place {
                self.unsynced.insert(d.clone());
            }
        }
        if in_place {
            self.keep_lent(done.lent);
        }
        self.sync_folders(false);
    }

    /// Whether `item` is open with a partial file of its own, and not a
    /// pack: what a finish job can take.
    pub(super) fn can_place_away(&self, item: ItemId) -> bool {
        !self.packs.contains_key(&item) && self.items.get(&item).is_some_and(|p| p.file.is_some())
    }
}
