//! Cutting a verified pack's members out into files of their own (push
//! mode, [`repocast_core::endpoint::pack`]).
//!
//! A pack is received like any item, into a partial file under
//! `OUT/.repocast/partial/`, but never put in place: once it verifies, each
//! selected member is copied out of it into a temporary file of its own
//! (checked against its own hash, given its attributes), with the same
//! name checks and overwrite rule as a file received alone; then the
//! members' data is made durable at once (one `syncfs` of the folder's file
//! system, where an `fsync` per file cost about a third of a millisecond
//! each, on the receiving path, for a pack of a hundred files), and only
//! then is each renamed into place. The pack's partial file and journal
//! go last.

use super::{Store, check_parents, safe_path, set_file_attributes, sync_dir};
use repocast_core::ItemId;
use repocast_core::endpoint::store::{PackMember, StoreError};
use std::fs;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// A member written out, waiting for its rename.
struct Cut {
    tmp: PathBuf,
    path: PathBuf,
}

/// What became of a member before the renames.
enum Written {
    /// Written to a temporary file.
    Cut(Cut),
    /// Already in place, the same bytes.
    InPlace,
    /// Its bytes in the pack do not match its hash.
    Mismatch,
}

impl Store {
    /// Whether `name` is in place with this size and hash.
    pub(super) fn in_place(
        &self,
        name: &str,
        size: u64,
        hash: &[u8; 32],
    ) -> Result<bool, StoreError> {
        super::file_is(&safe_path(&self.root, name)?, size, hash)
    }

    /// [`repocast_core::endpoint::store::BlockStore::unpack`].
    pub(super) fn unpack_members(
        &mut self,
        item: ItemId,
        members: &[PackMember],
    ) -> Vec<Result<bool, StoreError>> {
        let Some(Some((pack, tmp, journal))) = self.packs.remove(&item) else {
            return (members.iter())
                .map(|_| Err(StoreError::NotOpen("unpack")))
                .collect();
        };
        let cuts: Vec<Result<Written, StoreError>> = members
            .iter()
            .map(|m| self.write_member(&pack, m))
            .collect();
        if cuts.iter().any(|c| matches!(c, Ok(Written::Cut(_)))) {
            self.sync_data();
        }
        let results = (cuts.into_iter())
            .map(|c| match c? {
                Written::Cut(cut) => self.place(cut).map(|()| true),
                Written::InPlace => Ok(true),
                Written::Mismatch => Ok(false),
            })
            .collect();
        drop(pack);
        let _ = fs::remove_file(&tmp);
        let _ = fs::remove_file(&journal);
        let dirs: Vec<_> = std::mem::take(&mut self.unsynced).into_iter().collect();
        for d in dirs {
            sync_dir(&d);
        }
        results
    }

    /// Writes one member of `pack` to a temporary file with its
    /// attributes, unless it is in place already or does not match.
    fn write_member(&self, pack: &fs::File, m: &PackMember) -> Result<Written, StoreError> {
        let path = safe_path(&self.root, &m.name)?;
        check_parents(&self.root, &path)?;
        if self.already_in_place(&path, m.size, &m.hash)? {
            return Ok(Written::InPlace);
        }
        let len = usize::try_from(m.size).map_err(|_| StoreError::NotOpen("member size"))?;
        let mut bytes = vec![0u8; len];
        pack.read_exact_at(&mut bytes, m.offset)
            .map_err(|e| StoreError::io(&self.partial_dir, e))?;
        if blake3::hash(&bytes).as_bytes() != &m.hash {
            return Ok(Written::Mismatch);
        }
        let key = super::partial_key(&m.name, &m.hash, m.size);
        let tmp = self.partial_dir.join(format!("{key}.unpack"));
        let written = (|| {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)
                .map_err(|e| StoreError::io(&tmp, e))?;
            f.write_all(&bytes).map_err(|e| StoreError::io(&tmp, e))?;
            set_file_attributes(&f, &tmp, m.mode, m.mtime)
        })();
        match written {
            Ok(()) => Ok(Written::Cut(Cut { tmp, path })),
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// Makes the members written so far durable: one `syncfs` of the
    /// partial folder's file system.
    fn sync_data(&self) {
        use std::os::fd::AsRawFd;
        if let Ok(d) = fs::File::open(&self.partial_dir) {
            // SAFETY: the fd is open for the call; syncfs takes no memory.
            unsafe {
                libc::syncfs(d.as_raw_fd());
            }
        }
    }

    /// Renames a durable member into place.
    fn place(&mut self, c: Cut) -> Result<(), StoreError> {
        let placed = (|| {
            if let Some(parent) = c.path.parent() {
                fs::create_dir_all(parent).map_err(|e| StoreError::io(parent, e))?;
            }
            // The folders were checked when it was written; again just
            // before the rename.
            check_parents(&self.root, &c.path)?;
            fs::rename(&c.tmp, &c.path).map_err(|e| StoreError::io(&c.path, e))
        })();
        if placed.is_err() {
            let _ = fs::remove_file(&c.tmp);
        }
        if let Some(parent) = c.path.parent() {
            self.unsynced.insert(parent.to_path_buf());
        }
        placed
    }
}
