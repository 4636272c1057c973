//! A listener's assembly of one catalogue version from its signed pieces.
//!
//! Pieces arrive in any order, repeated, some lost. The assembly keeps
//! every item's head (name, size, hash, layout, attributes) and, for the
//! items the listener selected, their block hashes, within a byte bound;
//! it is complete once every selected item has all its block hashes and
//! either every head is in or every file the listener named without
//! wildcards has been found. Pieces have been checked (signature, signer, version)
//! by [`super::listen`] before they get here.

use crate::fec::layout::Layout;
use crate::wire::ManifestEntry;
use crate::wire::catalogue::{CataloguePiece, ItemHead, PieceEntry};
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
    bytes: usize,
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
                let wanted = select(&h.name);
                let blocks = match Layout::new(h.size, &h.fec) {
                    Ok(l) => l.blocks() as usize,
                    Err(_) => return Err(AssemblyError::Inconsistent("layout")),
                };
                let cost = h.name.len() + 64 + if wanted { blocks * 33 } else { 0 };
                if self.bytes + cost > MAX_ASSEMBLY_BYTES {
                    return Err(AssemblyError::TooLarge);
                }
                self.bytes += cost;
                self.heads.insert(e.item, h.clone());
                if wanted {
                    let mut w = Hashes {
                        hashes: vec![[0; 32]; blocks],
                        have: vec![false; blocks],
                        left: blocks,
                    };
                    // An item of one block: its block's hash is the item's
                    // (the pusher sends no other).
                    if blocks == 1 {
                        w.hashes[0] = h.hash;
                        w.have[0] = true;
                        w.left = 0;
                    }
                    self.wanted.insert(e.item, w);
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

    /// Whether the listener can start: every selected item's hashes are
    /// in, and either every head is (so every item `select` matches is
    /// known) or `select` names files without wildcards and each of them
    /// has been found (the rest of the catalogue cannot add to them; a
    /// listener after two named files need not wait for every piece).
    pub fn is_complete(&self, select: &[String]) -> bool {
        if !self.wanted.values().all(|w| w.left == 0) {
            return false;
        }
        if self.heads.len() == self.items as usize {
            return true;
        }
        let literal = |g: &String| !g.contains(['*', '?']);
        !select.is_empty()
            && select.iter().all(literal)
            && select.iter().all(|g| {
                (self.wanted.keys()).any(|i| self.heads.get(i).is_some_and(|h| &h.name == g))
            })
    }

    /// Heads received so far, of the items in the version.
    pub fn progress(&self) -> (usize, u32) {
        (self.heads.len(), self.items)
    }

    /// The selected items' manifests and heads (once complete).
    pub fn selected(&self) -> Vec<(ManifestEntry, ItemHead)> {
        (self.wanted.iter())
            .filter_map(|(item, w)| {
                let h = self.heads.get(item)?;
                let m = ManifestEntry {
                    item: *item,
                    name: h.name.clone(),
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

/// Whether `name` matches the shell-style `pattern`: `*` is any run of
/// characters but `/`, `**` any run at all, `?` one character but `/`.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Dynamic programming over (pattern position, name position): no
    // backtracking blow-up on hostile patterns.
    let mut cur = vec![false; n.len() + 1];
    cur[0] = true;
    let mut i = 0;
    while i < p.len() {
        let mut next = vec![false; n.len() + 1];
        if p[i] == '*' {
            let deep = p.get(i + 1) == Some(&'*');
            for j in 0..=n.len() {
                if cur[j] {
                    next[j] = true;
                    let mut k = j;
                    while k < n.len() && (deep || n[k] != '/') {
                        k += 1;
                        next[k] = true;
                    }
                }
            }
            i += if deep { 2 } else { 1 };
        } else {
            for j in 0..n.len() {
                if cur[j] && (p[i] == n[j] || (p[i] == '?' && n[j] != '/')) {
                    next[j + 1] = true;
                }
            }
            i += 1;
        }
        cur = next;
    }
    cur[n.len()]
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs_match_as_a_shell_does() {
        assert!(glob_match("a.txt", "a.txt"));
        assert!(!glob_match("a.txt", "b.txt"));
        assert!(glob_match("*.txt", "a.txt"));
        assert!(!glob_match("*.txt", "d/a.txt"));
        assert!(glob_match("**.txt", "d/a.txt"));
        assert!(glob_match("d/*", "d/a"));
        assert!(!glob_match("d/*", "d/e/a"));
        assert!(glob_match("d/**", "d/e/a"));
        assert!(glob_match("?.bin", "x.bin"));
        assert!(!glob_match("?.bin", "xy.bin"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("", "a"));
    }
}
