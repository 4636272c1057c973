//! Cutting a verified pack's members out into files of their own (push
//! mode, [`repocast_core::endpoint::pack`]).
//!
//! A pack is received like any item, into a partial file under
//! `OUT/.repocast/partial/`, but never put in place: once it verifies, each
//! selected member is copied out of it into a temporary file of its own,
//! checked against its own hash, fsynced, given its attributes and
//! renamed into place, with the same name checks and overwrite rule as a
//! file received alone. Then the pack's partial file and journal go.

use super::{Store, check_parents, safe_path, set_attributes, sync_dir};
use repocast_core::ItemId;
use repocast_core::endpoint::store::{PackMember, StoreError};
use std::fs;
use std::io::Write;
use std::os::unix::fs::FileExt;

impl Store {
    /// Whether `name` is in place with this size and hash.
    pub(super) fn in_place(
        &self,
        name: &str,
        size: u64,
        hash: &[u8; 32],
    ) -> Result<bool, StoreError> {
        let path = safe_path(&self.root, name)?;
        Ok(
            fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() == size)
                && super::hash_file(&path, size)? == *hash,
        )
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
        let results = members.iter().map(|m| self.cut(&pack, m)).collect();
        drop(pack);
        let _ = fs::remove_file(&tmp);
        let _ = fs::remove_file(&journal);
        let dirs: Vec<_> = std::mem::take(&mut self.unsynced).into_iter().collect();
        for d in dirs {
            sync_dir(&d);
        }
        results
    }

    /// Puts one member of `pack` in place.
    fn cut(&mut self, pack: &fs::File, m: &PackMember) -> Result<bool, StoreError> {
        let path = safe_path(&self.root, &m.name)?;
        check_parents(&self.root, &path)?;
        if fs::symlink_metadata(&path).is_ok() {
            if self.in_place(&m.name, m.size, &m.hash)? {
                return Ok(true);
            }
            if !self.overwrite {
                return Err(StoreError::Exists {
                    path: path.display().to_string(),
                });
            }
        }
        let len = usize::try_from(m.size).map_err(|_| StoreError::NotOpen("member size"))?;
        let mut bytes = vec![0u8; len];
        let partial = self.partial_dir.join("pack");
        pack.read_exact_at(&mut bytes, m.offset)
            .map_err(|e| StoreError::io(&partial, e))?;
        if blake3::hash(&bytes).as_bytes() != &m.hash {
            return Ok(false);
        }
        let key = super::partial_key(&m.name, &m.hash, m.size);
        let tmp = self.partial_dir.join(format!("{key}.unpack"));
        let write = || -> std::io::Result<()> {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()
        };
        if let Err(e) = write() {
            let _ = fs::remove_file(&tmp);
            return Err(StoreError::io(&tmp, e));
        }
        let placed = (|| {
            set_attributes(&tmp, m.mode, m.mtime)?;
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).map_err(|e| StoreError::io(parent, e))?;
            }
            // The folders were checked above; again just before the rename.
            check_parents(&self.root, &path)?;
            fs::rename(&tmp, &path).map_err(|e| StoreError::io(&path, e))
        })();
        if let Err(e) = placed {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        if let Some(parent) = path.parent() {
            self.unsynced.insert(parent.to_path_buf());
        }
        Ok(true)
    }
}
