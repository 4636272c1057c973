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
//! each, for a pack of a hundred files), and only then is each renamed
//! into place. The pack's partial file and journal go last.
//!
//! The work runs off the receiving path ([`Store::unpack_job`], run by the
//! listen driver on its blocking pool; `repocast_core::endpoint::unpack`):
//! creating a small file costs about half a millisecond on the lab's disk,
//! so a pack of a hundred files held the receiving loop for 100-150 ms.

use super::{Store, already_in_place, check_parents, safe_path, set_file_attributes, sync_dir};
use repocast_core::ItemId;
use repocast_core::endpoint::store::{PackMember, StoreError, UnpackWork};
use std::collections::BTreeSet;
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

/// One verified pack to cut: its file (still locked), that file's path and
/// its journal's, and where the members go.
struct Cutter {
    pack: fs::File,
    pack_path: PathBuf,
    journal: PathBuf,
    root: PathBuf,
    partial_dir: PathBuf,
    overwrite: bool,
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

    /// The verified pack `item` as a cutter (the store forgets it).
    fn cutter(&mut self, item: ItemId) -> Option<Cutter> {
        let (pack, pack_path, journal) = self.packs.remove(&item)??;
        Some(Cutter {
            pack,
            pack_path,
            journal,
            root: self.root.clone(),
            partial_dir: self.partial_dir.clone(),
            overwrite: self.overwrite,
        })
    }

    /// The cutting of the verified pack `item`'s `members`, as work to run
    /// anywhere ([`repocast_core::endpoint::store::BlockStore::unpack`]
    /// runs it here, `unpack_work` hands it out).
    pub(super) fn unpack_job(&mut self, item: ItemId, members: &[PackMember]) -> UnpackWork {
        let members = members.to_vec();
        match self.cutter(item) {
            Some(c) => Box::new(move || c.run(&members)),
            None => Box::new(move || not_open(&members)),
        }
    }
}

fn not_open(members: &[PackMember]) -> Vec<Result<bool, StoreError>> {
    (members.iter())
        .map(|_| Err(StoreError::NotOpen("unpack")))
        .collect()
}

impl Cutter {
    /// Cuts `members` out: one result per member, in order.
    fn run(self, members: &[PackMember]) -> Vec<Result<bool, StoreError>> {
        let cuts: Vec<Result<Written, StoreError>> =
            members.iter().map(|m| self.write_member(m)).collect();
        if cuts.iter().any(|c| matches!(c, Ok(Written::Cut(_)))) {
            self.sync_data();
        }
        let mut dirs = BTreeSet::new();
        let results = (cuts.into_iter())
            .map(|c| match c? {
                Written::Cut(cut) => self.place(cut, &mut dirs).map(|()| true),
                Written::InPlace => Ok(true),
                Written::Mismatch => Ok(false),
            })
            .collect();
        let Cutter {
            pack,
            pack_path,
            journal,
            ..
        } = self;
        drop(pack);
        let _ = fs::remove_file(&pack_path);
        let _ = fs::remove_file(&journal);
        for d in dirs {
            sync_dir(&d);
        }
        results
    }

    /// Writes one member of the pack to a temporary file with its
    /// attributes, unless it is in place already or does not match.
    fn write_member(&self, m: &PackMember) -> Result<Written, StoreError> {
        let path = safe_path(&self.root, &m.name)?;
        check_parents(&self.root, &path)?;
        if already_in_place(&path, m.size, &m.hash, self.overwrite)? {
            return Ok(Written::InPlace);
        }
        let len = usize::try_from(m.size).map_err(|_| StoreError::NotOpen("member size"))?;
        let mut bytes = vec![0u8; len];
        (self.pack)
            .read_exact_at(&mut bytes, m.offset)
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

    /// Renames a durable member into place; its folder is fsynced at the
    /// end.
    fn place(&self, c: Cut, dirs: &mut BTreeSet<PathBuf>) -> Result<(), StoreError> {
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
            dirs.insert(parent.to_path_buf());
        }
        placed
    }
}
