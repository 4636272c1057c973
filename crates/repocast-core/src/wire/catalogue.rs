//! Push mode's in-band catalogue: signed pieces on the announcement group.
//!
//! With no back channel, a listener learns the file set from the pusher's
//! announcement group alone. The catalogue of one version is cut into
//! pieces, each a datagram that stands on its own: it names the signer,
//! the catalogue version and the session its data packets carry, how many
//! items the version has, and carries entries, each one part of one item:
//! part 0 carries the item's head (name, size, hash, FEC parameters, mode
//! and mtime) and the first block hashes, later parts the rest of its
//! block hashes. A piece packs as many entries as fit a datagram, so a
//! set of many small files takes a few pieces per copy of its catalogue,
//! not one per file. Every piece ends with the signer's Ed25519 signature
//! over all that comes before it ([`crate::auth::sign_catalogue`]), so a
//! listener checks each piece alone, accepts nothing forged, and takes
//! nothing from a version older than one it has seen. The byte layout is
//! in `docs/protocol.md`.
//!
//! Small files travel in packs ([`HeadKind`]): a pack is an item on the
//! data channel like a file, coded as one, but it is no file of its own;
//! its bytes are those of its members, end to end, and each member is
//! described by a head of its own that names the pack and where in it the
//! member starts. A listener that wants a member receives its pack, checks
//! it against the pack's signed hashes, and cuts the member out.

use super::codec::{Reader, Writer, check_max};
use super::manifest::{FecParams, MAX_BLOCKS, MAX_ITEM_SIZE, MAX_NAME_LEN};
use super::{WireError, kind};
use crate::auth::SIGNATURE_LEN;
use crate::{ItemId, SessionId};

/// Most items one catalogue version may list.
pub const MAX_PUSH_ITEMS: u32 = 1 << 20;
/// Bytes a piece or repair piece aims at, its signature included (it
/// fits a 1,500-byte MTU with IPv6 and UDP headers); only a piece whose
/// item name is very long, or a repair of a catalogue with one, is larger.
pub const PIECE_TARGET: usize = 1400;
/// Bytes of a piece before its entries: header, signer, version,
/// session, item count, flags, its place and the copy's piece count, the
/// code's symbol size, entry count.
pub const PIECE_FIXED: usize = 4 + 32 + 8 + 4 + 4 + 1 + 4 + 4 + 2 + 2;
/// Bytes of a repair piece besides its symbol and signature: header,
/// signer, version, session, piece count, symbol size, symbol id.
pub const REPAIR_FIXED: usize = 4 + 32 + 8 + 4 + 4 + 2 + 4;
/// Bytes pieces are packed to: a repair piece of a coded catalogue is
/// its longest piece and [`REPAIR_FIXED`] and the symbol's 2-byte length,
/// so repairs too stay within [`PIECE_TARGET`].
const PACKED_TARGET: usize = PIECE_TARGET - REPAIR_FIXED - 2;
/// Most pieces in one copy of a catalogue.
pub const MAX_PIECES: u32 = 1 << 20;
/// Largest code symbol of a coded catalogue: a piece's signed bytes and
/// their 2-byte length (a piece with a very long name may exceed
/// [`PIECE_TARGET`]; see [`MAX_NAME_LEN`]).
pub const MAX_PIECE_SYMBOL: u16 = 8192;
/// Bytes of an entry before its head and hashes: item, part, parts, first
/// block, flags, hash count.
pub const ENTRY_FIXED: usize = 4 + 2 + 2 + 4 + 1 + 2;

/// What an item of the catalogue is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadKind {
    /// A file, sent as its own item.
    File,
    /// A pack of small files: sent as an item, written as its members.
    /// Its name is empty, its mode and mtime zero.
    Pack,
    /// A file inside a pack: no data of its own, no block hashes.
    Member {
        /// The pack.
        pack: ItemId,
        /// Where the member's bytes start in the pack.
        offset: u64,
    },
}

/// An item's description in the catalogue (part 0 of its entries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemHead {
    /// File, pack or member of a pack.
    pub kind: HeadKind,
    /// Its relative path.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// BLAKE3 of the whole item.
    pub hash: [u8; 32],
    /// FEC parameters (the block layout follows from them and the size).
    pub fec: FecParams,
    /// Unix permission bits.
    pub mode: u32,
    /// Modification time, seconds since the Unix epoch.
    pub mtime: i64,
}

/// One part of one item's description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PieceEntry {
    /// The item it describes.
    pub item: ItemId,
    /// Which of the item's parts this is.
    pub part: u16,
    /// How many parts the item has.
    pub parts: u16,
    /// The block whose hash comes first in `hashes`.
    pub first_block: u32,
    /// The item's head (part 0 only).
    pub head: Option<ItemHead>,
    /// Block hashes from `first_block` on. An item of one block carries
    /// none: its block's hash is the item's.
    pub hashes: Vec<[u8; 32]>,
}

/// One signed piece of a catalogue version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CataloguePiece {
    /// The signer's Ed25519 public key (checked against the signature).
    pub signer: [u8; 32],
    /// The catalogue version (higher is newer).
    pub version: u64,
    /// The session the version's data packets carry.
    pub session: SessionId,
    /// Items in this version.
    pub items: u32,
    /// The version's data packets are vouched for by symbol batches the
    /// signer signs (`crate::wire::batch`): a listener takes no other.
    pub signed_symbols: bool,
    /// This piece's place in a copy of the catalogue (below `count`).
    pub index: u32,
    /// Pieces in one copy of the catalogue.
    pub count: u32,
    /// The size of the code symbols the copy's pieces are coded with
    /// ([`CatalogueRepair`]; each piece's symbol is its signed bytes after
    /// their 2-byte length, zero-padded), or 0: the catalogue is not coded.
    pub symbol_size: u16,
    /// Parts of items' descriptions: at least one, none only in an empty
    /// version's one piece.
    pub entries: Vec<PieceEntry>,
}

/// A signed repair piece of a coded catalogue: a RaptorQ repair symbol
/// over the version's pieces, so a listener needs about `count` of any
/// of a version's pieces and repairs rather than each piece (SPEC 3.6's
/// carousel, applied to the catalogue; `crate::endpoint::catalogue_code`).
/// What it decodes to is the pieces' own signed bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogueRepair {
    /// The signer's Ed25519 public key (checked against the signature).
    pub signer: [u8; 32],
    /// The catalogue version.
    pub version: u64,
    /// The session the version's data packets carry.
    pub session: SessionId,
    /// Pieces in one copy of the catalogue (the code's source symbols).
    pub count: u32,
    /// Bytes of each code symbol.
    pub symbol_size: u16,
    /// The repair symbol's id (at least `count`).
    pub id: u32,
    /// The symbol, `symbol_size` bytes.
    pub symbol: Vec<u8>,
}

/// What a catalogue piece or repair piece says of itself, read before
/// its signature is checked: only for dropping what would be of no use
/// even if it were genuine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peek {
    /// A repair piece (else a piece).
    pub repair: bool,
    /// The version it names.
    pub version: u64,
    /// A piece's index, a repair's symbol id.
    pub index: u32,
}

impl Peek {
    /// Peeks at a datagram of the announcement group; `None` if it is
    /// neither kind or too short.
    pub fn of(datagram: &[u8]) -> Option<Peek> {
        let repair = match super::kind_of(datagram)? {
            kind::CATALOGUE_PIECE => false,
            kind::CATALOGUE_REPAIR => true,
            _ => return None,
        };
        let at = if repair { 54 } else { 53 };
        let v: [u8; 8] = datagram.get(36..44)?.try_into().ok()?;
        let index: [u8; 4] = datagram.get(at..at + 4)?.try_into().ok()?;
        Some(Peek {
            repair,
            version: u64::from_be_bytes(v),
            index: u32::from_be_bytes(index),
        })
    }
}

impl CatalogueRepair {
    /// Parses a repair piece's signed bytes (without its signature).
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(buf);
        let (signer, version, session) = signed_head(&mut r, kind::CATALOGUE_REPAIR)?;
        let count = r.u32()?;
        let symbol_size = r.u16()?;
        let id = r.u32()?;
        check_coding(count, symbol_size, 0)?;
        if symbol_size == 0 || id < count || id > crate::wire::data::MAX_SYMBOL_ID {
            return Err(WireError::OutOfRange {
                field: "repair piece",
                value: id as u64,
            });
        }
        let symbol = r.bytes(symbol_size as usize)?.to_vec();
        r.finish()?;
        Ok(CatalogueRepair {
            signer,
            version,
            session,
            count,
            symbol_size,
            id,
            symbol,
        })
    }

    /// Appends the repair piece's bytes (to be signed) to `buf`.
    pub fn emit(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::with_header(buf, kind::CATALOGUE_REPAIR);
        w.bytes(&self.signer)
            .u64(self.version)
            .u32(self.session.0)
            .u32(self.count)
            .u16(self.symbol_size)
            .u32(self.id)
            .bytes(&self.symbol);
    }
}

/// The fields every piece and repair piece starts with, after a header of
/// `kind`: signer, version, session.
fn signed_head(r: &mut Reader<'_>, kind: u8) -> Result<([u8; 32], u64, SessionId), WireError> {
    let k = r.header()?;
    if k != kind {
        return Err(WireError::UnknownKind(k));
    }
    let mut signer = [0u8; 32];
    signer.copy_from_slice(r.bytes(32)?);
    Ok((signer, r.u64()?, SessionId(r.u32()?)))
}

/// The checks on a copy's piece count and symbol size shared by pieces
/// and repairs; `body` is a piece's signed length (0 for a repair), which
/// with its 2-byte length must fit a symbol.
fn check_coding(count: u32, symbol_size: u16, body: usize) -> Result<(), WireError> {
    if count == 0 || count > MAX_PIECES {
        return Err(WireError::OutOfRange {
            field: "catalogue pieces",
            value: count as u64,
        });
    }
    if symbol_size > MAX_PIECE_SYMBOL
        || symbol_size != 0 && (count < 2 || body + 2 > symbol_size as usize)
    {
        return Err(WireError::OutOfRange {
            field: "catalogue symbol size",
            value: symbol_size as u64,
        });
    }
    Ok(())
}

/// Entry flags: the entry carries its item's head.
const FLAG_HEAD: u8 = 1;
/// Entry flags: the head is a pack's.
const FLAG_PACK: u8 = 2;
/// Entry flags: the head is a pack member's (pack and offset follow).
const FLAG_MEMBER: u8 = 4;
/// Piece flags: the version's data packets are signed in batches.
const FLAG_SIGNED_SYMBOLS: u8 = 2;

impl CataloguePiece {
    /// Parses a piece's signed bytes (the datagram without its
    /// signature: see [`crate::auth::open_catalogue`]).
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(buf);
        let (signer, version, session) = signed_head(&mut r, kind::CATALOGUE_PIECE)?;
        let items = r.u32()?;
        check_max("items", items as u64, MAX_PUSH_ITEMS as u64)?;
        let flags = r.u8()?;
        if flags & !FLAG_SIGNED_SYMBOLS != 0 {
            return Err(WireError::OutOfRange {
                field: "piece flags",
                value: flags as u64,
            });
        }
        let index = r.u32()?;
        let count = r.u32()?;
        let symbol_size = r.u16()?;
        check_coding(count, symbol_size, buf.len())?;
        if index >= count {
            return Err(WireError::OutOfRange {
                field: "piece index",
                value: index as u64,
            });
        }
        let n = r.u16()? as usize;
        // An empty version is one piece with no entries; any other piece
        // has at least one, each at least ENTRY_FIXED bytes.
        if (items == 0) != (n == 0) || n.saturating_mul(ENTRY_FIXED) > r.remaining() {
            return Err(WireError::OutOfRange {
                field: "piece entries",
                value: n as u64,
            });
        }
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            entries.push(parse_entry(&mut r, items)?);
        }
        r.finish()?;
        Ok(CataloguePiece {
            signer,
            version,
            session,
            items,
            signed_symbols: flags & FLAG_SIGNED_SYMBOLS != 0,
            index,
            count,
            symbol_size,
            entries,
        })
    }

    /// Appends the piece's bytes (to be signed) to `buf`.
    pub fn emit(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::with_header(buf, kind::CATALOGUE_PIECE);
        let flags = if self.signed_symbols {
            FLAG_SIGNED_SYMBOLS
        } else {
            0
        };
        let n = self.entries.len().min(u16::MAX as usize);
        w.bytes(&self.signer)
            .u64(self.version)
            .u32(self.session.0)
            .u32(self.items)
            .u8(flags)
            .u32(self.index)
            .u32(self.count)
            .u16(self.symbol_size)
            .u16(n as u16);
        for e in &self.entries[..n] {
            w.u32(e.item.0).u16(e.part).u16(e.parts).u32(e.first_block);
            match &e.head {
                None => {
                    w.u8(0);
                }
                Some(h) => {
                    let flags = FLAG_HEAD
                        | match h.kind {
                            HeadKind::File => 0,
                            HeadKind::Pack => FLAG_PACK,
                            HeadKind::Member { .. } => FLAG_MEMBER,
                        };
                    w.u8(flags).string(&h.name).u64(h.size).bytes(&h.hash);
                    h.fec.emit_body(&mut w);
                    w.u32(h.mode).u64(h.mtime as u64);
                    if let HeadKind::Member { pack, offset } = h.kind {
                        w.u32(pack.0).u64(offset);
                    }
                }
            }
            w.u16(e.hashes.len().min(u16::MAX as usize) as u16);
            for h in e.hashes.iter().take(u16::MAX as usize) {
                w.bytes(h);
            }
        }
    }
}

/// One entry of a piece of a version of `items` items.
fn parse_entry(r: &mut Reader<'_>, items: u32) -> Result<PieceEntry, WireError> {
    let item = r.u32()?;
    if item >= items {
        return Err(WireError::OutOfRange {
            field: "item",
            value: item as u64,
        });
    }
    let (part, parts) = (r.u16()?, r.u16()?);
    if part >= parts {
        return Err(WireError::OutOfRange {
            field: "part",
            value: part as u64,
        });
    }
    let first_block = r.u32()?;
    check_max("first block", first_block as u64, MAX_BLOCKS as u64)?;
    let flags = r.u8()?;
    let bad_flags = WireError::OutOfRange {
        field: "entry flags",
        value: flags as u64,
    };
    // Pack and member are kinds of head: only with a head, never both.
    if flags & !(FLAG_HEAD | FLAG_PACK | FLAG_MEMBER) != 0
        || flags & (FLAG_PACK | FLAG_MEMBER) != 0 && flags & FLAG_HEAD == 0
        || flags & FLAG_PACK != 0 && flags & FLAG_MEMBER != 0
    {
        return Err(bad_flags);
    }
    let head = match flags & FLAG_HEAD {
        0 => None,
        _ => {
            let name = r.string("item name", MAX_NAME_LEN)?;
            let size = r.u64()?;
            check_max("item size", size, MAX_ITEM_SIZE)?;
            let hash = r.hash()?;
            let fec = FecParams::parse_body(r)?;
            let mode = r.u32()?;
            let mtime = r.u64()? as i64;
            let kind = if flags & FLAG_PACK != 0 {
                if !name.is_empty() {
                    return Err(WireError::OutOfRange {
                        field: "pack name",
                        value: name.len() as u64,
                    });
                }
                HeadKind::Pack
            } else if flags & FLAG_MEMBER != 0 {
                let pack = r.u32()?;
                let offset = r.u64()?;
                // A member lies inside a pack that is another item.
                if pack >= items || pack == item {
                    return Err(WireError::OutOfRange {
                        field: "member's pack",
                        value: pack as u64,
                    });
                }
                check_max("member offset", offset.saturating_add(size), MAX_ITEM_SIZE)?;
                HeadKind::Member {
                    pack: ItemId(pack),
                    offset,
                }
            } else {
                HeadKind::File
            };
            Some(ItemHead {
                kind,
                name,
                size,
                hash,
                fec,
                mode,
                mtime,
            })
        }
    };
    // Part 0, and only part 0, carries the head.
    if (part == 0) != head.is_some() {
        return Err(WireError::OutOfRange {
            field: "piece head",
            value: part as u64,
        });
    }
    let n = r.u16()? as usize;
    // A member has no blocks of its own, so one part and no hashes.
    let member = matches!(head.as_ref().map(|h| h.kind), Some(HeadKind::Member { .. }));
    if member && (n > 0 || parts != 1) {
        return Err(WireError::OutOfRange {
            field: "member's block hashes",
            value: n as u64,
        });
    }
    if n.saturating_mul(32) > r.remaining() {
        return Err(WireError::OutOfRange {
            field: "block hashes",
            value: n as u64,
        });
    }
    let mut hashes = Vec::with_capacity(n);
    for _ in 0..n {
        hashes.push(r.hash()?);
    }
    check_max(
        "block hashes",
        first_block as u64 + n as u64,
        MAX_BLOCKS as u64,
    )?;
    Ok(PieceEntry {
        item: ItemId(item),
        part,
        parts,
        first_block,
        head,
        hashes,
    })
}

/// Bytes of an item's head in an entry.
fn head_len(h: &ItemHead) -> usize {
    let member = if matches!(h.kind, HeadKind::Member { .. }) {
        4 + 8
    } else {
        0
    };
    2 + h.name.len().min(MAX_NAME_LEN) + 8 + 32 + 7 + 4 + 8 + member
}

/// Bytes of an entry in a piece.
pub fn entry_len(e: &PieceEntry) -> usize {
    ENTRY_FIXED + e.head.as_ref().map_or(0, head_len) + 32 * e.hashes.len()
}

/// Cuts one item's description into entries that each fit a piece of
/// about `PACKED_TARGET` bytes alone: the head and as many block hashes
/// as fit, then the rest of the hashes. An item of one block carries no
/// block hash (its block's is the item's).
pub fn split_item(item: ItemId, head: ItemHead, hashes: &[[u8; 32]]) -> Vec<PieceEntry> {
    let one = hashes.len() == 1 && hashes[0] == head.hash;
    let hashes = if one || matches!(head.kind, HeadKind::Member { .. }) {
        &[][..]
    } else {
        hashes
    };
    let room = |with_head: bool| {
        let used =
            PIECE_FIXED + SIGNATURE_LEN + ENTRY_FIXED + if with_head { head_len(&head) } else { 0 };
        (PACKED_TARGET.saturating_sub(used) / 32).max(1)
    };
    let first = room(true).min(hashes.len());
    let mut cuts = vec![(0, first)];
    let mut at = first;
    while at < hashes.len() {
        let n = room(false).min(hashes.len() - at);
        cuts.push((at, n));
        at += n;
    }
    let parts = cuts.len().min(u16::MAX as usize) as u16;
    (cuts.into_iter().take(parts as usize).enumerate())
        .map(|(i, (from, n))| PieceEntry {
            item,
            part: i as u16,
            parts,
            first_block: from as u32,
            head: (i == 0).then(|| head.clone()),
            hashes: hashes[from..from + n].to_vec(),
        })
        .collect()
}

/// Packs `entries`, in order, into pieces of at most `PACKED_TARGET`
/// bytes with their signature (an entry too large for one alone gets a
/// piece of its own), numbered in order. `base` gives every other field;
/// with no entries, it is the one piece of an empty version.
pub fn pack(base: &CataloguePiece, entries: Vec<PieceEntry>) -> Vec<CataloguePiece> {
    let room = PACKED_TARGET.saturating_sub(PIECE_FIXED + SIGNATURE_LEN);
    let mut pieces: Vec<CataloguePiece> = Vec::new();
    let mut used = usize::MAX;
    for e in entries {
        let len = entry_len(&e);
        let full = pieces
            .last()
            .is_none_or(|p| p.entries.len() >= u16::MAX as usize);
        if full || used.saturating_add(len) > room {
            pieces.push(CataloguePiece {
                entries: Vec::new(),
                ..base.clone()
            });
            used = 0;
        }
        used += len;
        if let Some(p) = pieces.last_mut() {
            p.entries.push(e);
        }
    }
    if pieces.is_empty() {
        pieces.push(CataloguePiece {
            entries: Vec::new(),
            ..base.clone()
        });
    }
    // More than MAX_PIECES is the caller's to refuse (`count` saturates).
    let count = u32::try_from(pieces.len()).unwrap_or(u32::MAX);
    for (i, p) in pieces.iter_mut().enumerate() {
        (p.index, p.count) = (i as u32, count);
    }
    pieces
}
