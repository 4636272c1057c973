//! A listener's assembly of one catalogue version from its signed pieces.
//!
//! Pieces arrive in any order, repeated, some lost. The assembly keeps
//! every item's head (name, size, hash, layout, attributes) and, for the
//! items the listener selected, their block hashes, within a byte bound;
//! it is complete once every selected item has all its block hashes and
//! either every head is in or every file the listener named without
//! wildcards has been found. Pieces have been checked (signature, signer, version)
//! by [`super::listen`] before they get here.
//!
//! A selected file that is a pack's member ([`HeadKind::Member`]) makes
//! its pack selected: the listener receives the pack and cuts the member
//! out. A pack is never selected by a name of its own (it has none).

use crate::endpoint::select::is_pattern;
use crate::fec::layout::Layout;
use crate::wire::ManifestEntry;
use crate::wire::catalogue::{CataloguePiece, HeadKind, ItemHead, PieceEntry};
use crate::{ItemId, SessionId};
use std::collections::BTreeMap;

/// Most bytes of names and block hashes one assembly holds.
pub const MAX_ASSEMBLY_BYTES: usize = 64 << 20;

/// Why a piece could not be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssemblyError {
    /// The piece disagrees with others of its version (item count,
    /// session, block count).
    #[error("inconsistent catalogue piece: {0}")]
    Inconsistent(&'static str),
    /// The catalogue is larger than [`MAX_ASSEMBLY_BYTES`].
    #[error("the catalogue is larger than {} MiB", MAX_ASSEMBLY_BYTES >> 20)]
    TooLarge,
}

/// Block hashes of a selected item, as they come in.
struct Hashes {
    hashes: Vec<[u8; 32]>,
    have: Vec<bool>,
    left: usize,
}

/// One version in assembly.
pub struct Assembly {
    /// The version.
    pub version: u64,
    /// Its data packets' session.
    pub session: SessionId,
    /// Its data packets are vouched for by signed symbol batches.
    pub signed_symbols: bool,
    items: u32,
    heads: BTreeMap<ItemId, ItemHead>,
    wanted: BTreeMap<ItemId, Hashes>,
    /// Selected pack members, by their pack.
    members: BTreeMap<ItemId, Vec<ItemId>>,
    bytes: usize,
}

/// The name a pack is received under (it has none of its own): from its
/// hash, so a restarted listener resumes the same pack.
pub fn pack_name(hash: &[u8; 32]) -> String {
    format!("(pack {})", crate::hex::encode(&hash[..8]))
}

impl Assembly {
    /// An empty assembly of the version `first` belongs to.
    pub fn new(first: &CataloguePiece) -> Self {
        Assembly {
            version: first.version,
            session: first.session,
            signed_symbols: first.signed_symbols,
            items: first.items,
            heads: BTreeMap::new(),
            wanted: BTreeMap::new(),
            members: BTreeMap::new(),
            bytes: 0,
        }
    }

    /// Takes a piece of this version; `select` says whether a name is
    /// wanted.
    pub fn add(
        &mut self,
        p: &CataloguePiece,
        select: impl Fn(&str) -> bool,
    ) -> Result<(), AssemblyError> {
        if p.items != self.items
            || p.session != self.session
            || p.signed_symbols != self.signed_symbols
        {
            return Err(AssemblyError::Inconsistent(
                "item count, session or signing",
            ));
        }
        for e in &p.entries {
            self.add_entry(e, &select)?;
        }
        Ok(())
    }

    /// Takes one entry of a piece.
    fn add_entry(
        &mut self,
        e: &PieceEntry,
        select: &impl Fn(&str) -> bool,
    ) -> Result<(), AssemblyError> {
        if let Some(h) = &e.head {
            if !self.heads.contains_key(&e.item) {
                let cost = h.name.len() + 64;
                if self.bytes + cost > MAX_ASSEMBLY_BYTES {
                    return Err(AssemblyError::TooLarge);
                }
                self.bytes += cost;
                self.heads.insert(e.item, h.clone());
                // A head that does not fit (its layout, its pack) is
                // forgotten: the version waits for a good one and, if none
                // comes, a listener ends for want of a whole catalogue
                // rather than leave a selected file out unsaid.
                if let Err(x) = self.take_head(e.item, h.kind, select(&h.name)) {
                    self.forget(e.item);
                    return Err(x);
                }
            }
        }
        // Hashes of an item whose head has not come yet are dropped: they
        // come again with the next copy of the catalogue.
        if let Some(w) = self.wanted.get_mut(&e.item) {
            let from = e.first_block as usize;
            if from + e.hashes.len() > w.hashes.len() {
                return Err(AssemblyError::Inconsistent("block count"));
            }
            for (i, h) in e.hashes.iter().enumerate() {
                if !w.have[from + i] {
                    w.have[from + i] = true;
                    w.hashes[from + i] = *h;
                    w.left -= 1;
                }
            }
        }
        Ok(())
    }

    /// What a new head of `kind` (its name selected or not) makes wanted.
    fn take_head(
        &mut self,
        item: ItemId,
        kind: HeadKind,
        selected: bool,
    ) -> Result<(), AssemblyError> {
        match kind {
            HeadKind::File if selected => self.want(item)?,
            HeadKind::File | HeadKind::Member { .. } if !selected => {}
            HeadKind::Pack => {
                if self.members.contains_key(&item) {
                    self.want(item)?;
                }
            }
            HeadKind::Member { pack, .. } => {
                self.members.entry(pack).or_default().push(item);
                let is_pack = self.heads.get(&pack).map(|p| p.kind) == Some(HeadKind::Pack);
                if is_pack && !self.wanted.contains_key(&pack) {
                    self.want(pack)?;
                }
            }
            HeadKind::File => {}
        }
        self.check_members(item)
    }

    /// Drops the head of `item` and what it made wanted.
    fn forget(&mut self, item: ItemId) {
        self.heads.remove(&item);
        self.wanted.remove(&item);
        for ms in self.members.values_mut() {
            ms.retain(|m| *m != item);
        }
        self.members.retain(|_, ms| !ms.is_empty());
    }

    /// Starts collecting the block hashes of `item`, whose head is in.
    fn want(&mut self, item: ItemId) -> Result<(), AssemblyError> {
        let Some(h) = self.heads.get(&item) else {
            return Ok(());
        };
        let blocks = match Layout::new(h.size, &h.fec) {
            Ok(l) => l.blocks() as usize,
            Err(_) => return Err(AssemblyError::Inconsistent("layout")),
        };
        let cost = blocks * 33;
        if self.bytes + cost > MAX_ASSEMBLY_BYTES {
            return Err(AssemblyError::TooLarge);
        }
        self.bytes += cost;
        let mut w = Hashes {
            hashes: vec![[0; 32]; blocks],
            have: vec![false; blocks],
            left: blocks,
        };
        // An item of one block: its block's hash is the item's (the
        // pusher sends no other).
        if blocks == 1 {
            w.hashes[0] = h.hash;
            w.have[0] = true;
            w.left = 0;
        }
        self.wanted.insert(item, w);
        Ok(())
    }

    /// Checks that the selected members of the pack `item` names (or of
    /// `item` itself, if it is a pack) lie inside a pack.
    fn check_members(&self, item: ItemId) -> Result<(), AssemblyError> {
        let pack = match self.heads.get(&item).map(|h| h.kind) {
            Some(HeadKind::Member { pack, .. }) => pack,
            _ => item,
        };
        let (Some(p), Some(ms)) = (self.heads.get(&pack), self.members.get(&pack)) else {
            return Ok(());
        };
        for m in ms {
            let inside = match self.heads.get(m) {
                Some(ItemHead {
                    kind: HeadKind::Member { offset, .. },
                    size,
                    ..
                }) => offset.checked_add(*size).is_some_and(|end| end <= p.size),
                _ => false,
            };
            if p.kind != HeadKind::Pack || !inside {
                return Err(AssemblyError::Inconsistent("pack member"));
            }
        }
        Ok(())
    }

    /// Whether the listener can start: every selected item's hashes are
    /// in, and either every head is (so every item `select` matches is
    /// known) or `select` holds exact names only (no pattern or folder)
    /// and each of them has been found (the rest of the catalogue cannot
    /// add to them; a listener after two named files need not wait for
    /// every piece).
    pub fn is_complete(&self, select: &[String]) -> bool {
        if !self.wanted.values().all(|w| w.left == 0)
            || !(self.members.keys()).all(|p| {
                // A member of an item that is no pack never completes: it
                // fails ([`Assembly::orphans`]) rather than hold the rest up.
                self.wanted.contains_key(p)
                    || self.heads.get(p).is_some_and(|h| h.kind != HeadKind::Pack)
            })
        {
            return false;
        }
        if self.heads.len() == self.items as usize {
            return true;
        }
        let literal = |g: &String| !is_pattern(g);
        !select.is_empty()
            && select.iter().all(literal)
            && select.iter().all(|g| {
                let members = self.members.values().flatten();
                (self.wanted.keys().chain(members))
                    .any(|i| self.heads.get(i).is_some_and(|h| &h.name == g))
            })
    }

    /// Heads received so far, of the items in the version.
    pub fn progress(&self) -> (usize, u32) {
        (self.heads.len(), self.items)
    }

    /// Selected members whose pack is no pack (a pusher's error): their
    /// names.
    pub fn orphans(&self) -> Vec<String> {
        (self.members.iter())
            .filter(|(p, _)| self.heads.get(p).is_none_or(|h| h.kind != HeadKind::Pack))
            .flat_map(|(_, ms)| {
                ms.iter()
                    .filter_map(|m| Some(self.heads.get(m)?.name.clone()))
            })
            .collect()
    }

    /// Files in the version: its items but its packs (of the heads in so
    /// far).
    pub fn files(&self) -> u32 {
        let packs = self.heads.values().filter(|h| h.kind == HeadKind::Pack);
        self.items.saturating_sub(packs.count() as u32)
    }

    /// The selected members of the pack `pack`: their ids and heads.
    pub fn members(&self, pack: ItemId) -> Vec<(ItemId, ItemHead)> {
        (self.members.get(&pack).into_iter().flatten())
            .filter_map(|m| Some((*m, self.heads.get(m)?.clone())))
            .collect()
    }

    /// The selected items' manifests and heads (once complete): files,
    /// and the packs of selected members (named by [`pack_name`]).
    pub fn selected(&self) -> Vec<(ManifestEntry, ItemHead)> {
        (self.wanted.iter())
            .filter_map(|(item, w)| {
                let h = self.heads.get(item)?;
                let m = ManifestEntry {
                    item: *item,
                    name: match h.kind {
                        HeadKind::Pack => pack_name(&h.hash),
                        _ => h.name.clone(),
                    },
                    size: h.size,
                    hash: h.hash,
                    fec: h.fec,
                    block_hashes: w.hashes.clone(),
                };
                Some((m, h.clone()))
            })
            .collect()
    }
}

#[cfg(test)]
mod pack_tests {
    use super::*;
    use crate::fec::CodeKind;
    use crate::wire::FecParams;
    use crate::wire::catalogue::split_item;

    fn head(kind: HeadKind, name: &str, size: u64) -> ItemHead {
        ItemHead {
            kind,
            name: name.into(),
            size,
            hash: [size as u8; 32],
            fec: FecParams {
                code: CodeKind::RaptorQ,
                symbol_size: 1000,
                max_block_symbols: 100,
            },
            mode: 0o644,
            mtime: 0,
        }
    }

    fn piece(entries: Vec<PieceEntry>) -> CataloguePiece {
        CataloguePiece {
            signer: [1; 32],
            version: 1,
            session: SessionId(1),
            items: 4,
            signed_symbols: false,
            index: 0,
            count: 1,
            symbol_size: 0,
            entries,
        }
    }

    fn member(pack: u32, offset: u64, name: &str, size: u64) -> ItemHead {
        let kind = HeadKind::Member {
            pack: ItemId(pack),
            offset,
        };
        head(kind, name, size)
    }

    /// A file "b" alone (item 0), a pack (1) of "a/x" and "a/y" (2, 3):
    /// selecting "a/*" wants the pack, and only its selected members; a
    /// member reaching past its pack is refused, and the version is not
    /// complete without it.
    #[test]
    fn a_selected_member_wants_its_pack_and_a_bad_one_holds_the_version() {
        let all = |m3: ItemHead| {
            let mut e = split_item(ItemId(0), head(HeadKind::File, "b", 10), &[]);
            e.extend(split_item(ItemId(1), head(HeadKind::Pack, "", 30), &[]));
            e.extend(split_item(ItemId(2), member(1, 0, "a/x", 10), &[]));
            e.extend(split_item(ItemId(3), m3, &[]));
            piece(e)
        };
        let select = |n: &str| crate::endpoint::select::glob_match("a/*", n);
        let mut a = Assembly::new(&all(member(1, 10, "a/y", 20)));
        a.add(&all(member(1, 10, "a/y", 20)), select).expect("good");
        assert!(a.is_complete(&["a/*".into()]));
        let sel = a.selected();
        assert_eq!(sel.len(), 1);
        assert_eq!(sel[0].0.name, pack_name(&[30; 32]));
        let names: Vec<String> = a.members(ItemId(1)).into_iter().map(|m| m.1.name).collect();
        assert_eq!(names, ["a/x", "a/y"]);
        assert_eq!(a.files(), 3);

        let bad = all(member(1, 15, "a/y", 20));
        let mut a = Assembly::new(&bad);
        assert!(a.add(&bad, select).is_err());
        assert!(!a.is_complete(&["a/*".into()]));
        assert!(a.members(ItemId(1)).iter().all(|m| m.1.name != "a/y"));
    }
}
