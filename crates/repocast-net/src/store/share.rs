//! What the requests of the host's shared receiver lend each other
//! (`crate::host`): a request starting on a host where another one has
//! already verified blocks of an item it wants, or the whole item, takes
//! copies of them into its own folder before it asks the server, and
//! tells the server it holds them (the same `Have` a resumed `get`
//! sends), so only the rest is sent for it.
//!
//! Lending goes through the resume path: a seeded block is one the
//! journal names, and it is checked against the manifest's block hash
//! like any resumed block when the item opens, so a source changed
//! meanwhile (a file edited in the other request's folder, another version
//! of the item) costs only its being received after all.

use super::{Partial, Store, lock_part, open_journal, partial_key, read_journal, safe_path};
use repocast_core::endpoint::store::StoreError;
use repocast_core::fec::layout::Layout;
use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// Verified blocks of one version of an item, and the file holding them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The item's name.
    pub name: String,
    /// Its whole hash (the version the blocks belong to).
    pub hash: [u8; 32],
    /// Its size.
    pub size: u64,
    /// Its blocks.
    pub layout: Layout,
    /// The file the blocks are in, each at its own offset.
    pub path: PathBuf,
    /// The verified blocks, sorted.
    pub blocks: Vec<u32>,
}

impl Source {
    /// What an item finished in place lends: all of it, from its final
    /// path. None if its layout is unknown.
    pub(super) fn finished(p: &Partial) -> Option<Source> {
        let layout = p.layout?;
        Some(Source {
            name: p.name.clone(),
            hash: p.hash,
            size: p.size,
            layout,
            path: p.final_path.clone(),
            blocks: (0..layout.blocks()).collect(),
        })
    }
}

impl Store {
    /// What this store can lend of item `name`: a finished item whole, or
    /// the blocks verified so far of one being received. None if it holds
    /// none.
    pub fn lend(&self, name: &str) -> Option<Source> {
        if let Some(s) = self.done.get(name) {
            return Some(s.clone());
        }
        let p = self
            .items
            .values()
            .find(|p| p.name == name && p.file.is_some())?;
        let layout = p.layout?;
        let mut blocks = p.verified.clone();
        blocks.sort_unstable();
        blocks.dedup();
        if blocks.is_empty() {
            return None;
        }
        Some(Source {
            name: p.name.clone(),
            hash: p.hash,
            size: p.size,
            layout,
            path: p.tmp.clone(),
            blocks,
        })
    }

    pub(super) fn keep_lent(&mut self, lent: Option<Source>) {
        if let Some(s) = lent {
            self.done.insert(s.name.clone(), s);
        }
    }

    /// Copies `src`'s blocks into this store's partial file of the same
    /// item version and names them in its journal, so that
    /// [`repocast_core::endpoint::store::BlockStore::held`] reports them
    /// (call before the endpoint is made). Returns how many blocks it
    /// added: none if the item is already in place here, or another
    /// request owns the partial.
    pub fn seed(&mut self, src: &Source) -> Result<usize, StoreError> {
        let final_path = safe_path(&self.root, &src.name)?;
        if fs::symlink_metadata(&final_path).is_ok() {
            return Ok(0);
        }
        let key = partial_key(&src.name, &src.hash, src.size);
        let tmp = self.partial_dir.join(format!("{key}.part"));
        let Some(to) = lock_part(&tmp, src.size)? else {
            return Ok(0);
        };
        let journal_path = self.partial_dir.join(format!("{key}.journal"));
        let listed = match fs::read(&journal_path) {
            Ok(j) => match read_journal(&j) {
                Some((hash, size, blocks)) if hash == src.hash && size == src.size => blocks,
                // Not this version's journal after all: leave it alone.
                Some(_) => return Ok(0),
                None => Vec::new(),
            },
            Err(_) => Vec::new(),
        };
        let from = File::open(&src.path).map_err(|e| StoreError::io(&src.path, e))?;
        let mut journal = open_journal(&journal_path, &src.hash, src.size)?;
        let mut buf = Vec::new();
        let mut added = Vec::new();
        for &b in src.blocks.iter().filter(|b| !listed.contains(b)) {
            if b >= src.layout.blocks() {
                continue;
            }
            let at = src.layout.block_offset(b);
            buf.resize(src.layout.block_len(b) as usize, 0);
            from.read_exact_at(&mut buf, at)
                .map_err(|e| StoreError::io(&src.path, e))?;
            to.write_all_at(&buf, at)
                .map_err(|e| StoreError::io(&tmp, e))?;
            journal
                .write_all(&b.to_le_bytes())
                .map_err(|e| StoreError::io(&journal_path, e))?;
            added.push(b);
        }
        let n = added.len();
        self.seeded
            .entry(journal_path.clone())
            .or_default()
            .extend(added);
        let known = self.journals.entry(super::name_key(&src.name)).or_default();
        known.retain(|p| *p != journal_path);
        known.insert(0, journal_path);
        Ok(n)
    }

    /// Blocks lent by other requests ([`Store::seed`]) that verified when
    /// their items opened.
    pub fn lent_blocks(&self) -> u64 {
        self.lent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use repocast_core::ItemId;
    use repocast_core::endpoint::store::{BlockStore, Resume};
    use repocast_core::wire::ManifestEntry;

    fn item() -> (Vec<u8>, ManifestEntry, Layout) {
        super::super::tests::fixture::two_blocks(ItemId(1))
    }

    fn write(st: &mut Store, data: &[u8], layout: &Layout, b: u32) {
        let bytes = super::super::tests::fixture::block(data, layout, b);
        st.write_block(ItemId(1), b, layout.block_offset(b), bytes)
            .expect("written");
    }

    /// A request part-way through an item lends the blocks it verified;
    /// another store seeded with them reports them held (for its `Have`)
    /// and keeps them when the item opens; once the first finishes, it
    /// lends the whole item from its final file.
    #[test]
    fn verified_blocks_are_lent_and_seeded_as_held() {
        let (data, m, layout) = item();
        let (a_dir, b_dir, c_dir) = (
            tempfile::tempdir().expect("tmp"),
            tempfile::tempdir().expect("tmp"),
            tempfile::tempdir().expect("tmp"),
        );
        let mut a = Store::new(a_dir.path()).expect("store");
        assert_eq!(a.lend("d/f"), None, "nothing opened");
        assert!(matches!(a.open(&m), Ok(Resume::Blocks(b)) if b.is_empty()));
        assert_eq!(a.lend("d/f"), None, "nothing verified yet");
        write(&mut a, &data, &layout, 1);
        let part = a.lend("d/f").expect("lends block 1");
        assert_eq!(part.blocks, vec![1]);
        assert_eq!(a.lend("other"), None);

        let mut b = Store::new(b_dir.path()).expect("store");
        assert_eq!(b.seed(&part).expect("seeded"), 1);
        assert_eq!(b.seed(&part).expect("again"), 0, "already named");
        let held = b.held("d/f").expect("held");
        assert_eq!((held.hash, held.blocks), (m.hash, vec![1]));
        assert!(matches!(b.open(&m), Ok(Resume::Blocks(bs)) if bs == vec![1]));
        assert_eq!(b.lent_blocks(), 1);
        write(&mut b, &data, &layout, 0);
        assert!(b.finish(ItemId(1)).expect("finish"), "verified");
        assert_eq!(fs::read(b_dir.path().join("d/f")).expect("file"), data);

        write(&mut a, &data, &layout, 0);
        assert!(a.finish(ItemId(1)).expect("finish"));
        let whole = a.lend("d/f").expect("lends the finished item");
        assert_eq!(whole.blocks, vec![0, 1]);
        assert_eq!(whole.path, a_dir.path().join("d/f"));
        let mut c = Store::new(c_dir.path()).expect("store");
        assert_eq!(c.seed(&whole).expect("seeded"), 2);
        assert!(matches!(c.open(&m), Ok(Resume::Blocks(bs)) if bs == vec![0, 1]));
        // Seeding never touches a folder that has the item in place.
        assert_eq!(b.seed(&whole).expect("in place"), 0);
    }

    /// A lent block whose bytes changed at the source (the file was
    /// edited) is named by the seeded journal but not kept when the item
    /// opens: it is received again. A source that cannot be read seeds
    /// nothing and fails nothing.
    #[test]
    fn a_changed_source_is_not_kept() {
        let (data, m, layout) = item();
        let (a_dir, b_dir) = (
            tempfile::tempdir().expect("tmp"),
            tempfile::tempdir().expect("tmp"),
        );
        let mut a = Store::new(a_dir.path()).expect("store");
        a.open(&m).expect("open");
        write(&mut a, &data, &layout, 0);
        write(&mut a, &data, &layout, 1);
        assert!(a.finish(ItemId(1)).expect("finish"));
        let src = a.lend("d/f").expect("lends");
        let mut edited = data.clone();
        edited[3] ^= 0xff;
        fs::write(&src.path, &edited).expect("edit");
        let mut b = Store::new(b_dir.path()).expect("store");
        assert_eq!(b.seed(&src).expect("seeded"), 2);
        assert!(matches!(b.open(&m), Ok(Resume::Blocks(bs)) if bs == vec![1]));
        assert_eq!(b.lent_blocks(), 1, "only the block that verified");

        let gone = Source {
            path: a_dir.path().join("no such file"),
            ..src
        };
        let c_dir = tempfile::tempdir().expect("tmp");
        let mut c = Store::new(c_dir.path()).expect("store");
        assert!(c.seed(&gone).is_err());
        assert!(c.held("d/f").is_none());
    }
}
