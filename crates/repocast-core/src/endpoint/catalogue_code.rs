//! A coded catalogue: push mode's catalogue pieces as the source symbols
//! of a RaptorQ block, so a listener needs about a copy's worth of any
//! pieces and repairs instead of every piece.
//!
//! Without it, a listener at loss p that wants the whole catalogue waits
//! for the unluckiest of its N pieces: about log(N) / log(1/p) copies (11
//! copies of a 10,000-file catalogue at 50% loss, each copy held to a
//! share of the rate). With it, every copy after the first of each pair
//! is repair pieces with fresh symbol ids, and any N or so pieces and
//! repairs give the whole catalogue: about 1 / (1 - p) copies.
//!
//! A piece's code symbol is its signed bytes (without the signature)
//! after their 2-byte length, zero-padded to the symbol size. The pusher
//! ([`CatalogueCoder`], used by [`super::push`]) signs each repair piece
//! like a piece ([`crate::wire::catalogue::CatalogueRepair`]); the
//! listener ([`CatalogueDecoder`], used by [`super::listen`]) feeds it the
//! pieces and repairs whose signatures it checked, and the pieces it
//! decodes are taken like pieces heard, since everything they came from
//! was signed by the same key.

use crate::auth::{self, Identity};
use crate::fec::{BlockDecoder, BlockEncoder, CodeKind, IdSet};
use crate::rng::Rng;
use crate::wire::catalogue::{CataloguePiece, CatalogueRepair, MAX_PIECE_SYMBOL};
use crate::wire::data::MAX_SYMBOL_ID;

/// Most pieces a coded catalogue has (about 50,000 small files). A larger
/// catalogue goes uncoded: its block would cost the pusher tens of
/// milliseconds to prepare on its sending path, and a listener its
/// memory twice.
pub const MAX_CODED_PIECES: u32 = 4096;

/// The symbol size for coding `pieces` (one copy, in order), or 0 if they
/// are not coded: a single piece, more than [`MAX_CODED_PIECES`], or one
/// longer than [`MAX_PIECE_SYMBOL`] allows.
pub fn symbol_size(pieces: &[CataloguePiece]) -> u16 {
    if pieces.len() < 2 || pieces.len() > MAX_CODED_PIECES as usize {
        return 0;
    }
    let mut buf = Vec::new();
    let longest = (pieces.iter())
        .map(|p| {
            buf.clear();
            p.emit(&mut buf);
            buf.len()
        })
        .max()
        .unwrap_or(0);
    u16::try_from(longest + 2)
        .ok()
        .filter(|t| *t <= MAX_PIECE_SYMBOL)
        .unwrap_or(0)
}

/// Piece `body`'s code symbol: its length, its bytes, zeros.
fn symbol_of(body: &[u8], t: usize) -> Vec<u8> {
    let mut s = Vec::with_capacity(t);
    s.extend_from_slice(&(body.len() as u16).to_be_bytes());
    s.extend_from_slice(body);
    s.resize(t, 0);
    s
}

/// The pusher's side: repair pieces of one version's catalogue.
pub struct CatalogueCoder {
    repair: CatalogueRepair,
    encoder: Box<dyn BlockEncoder>,
}

impl CatalogueCoder {
    /// A coder over the signed bytes (without signatures) of a copy's
    /// pieces, all of `first`'s version with its symbol size; `None` if
    /// they are not coded.
    pub fn new(first: &CataloguePiece, bodies: &[Vec<u8>]) -> Option<Self> {
        let t = first.symbol_size;
        if t == 0 || bodies.len() != first.count as usize {
            return None;
        }
        let mut data = Vec::with_capacity(bodies.len() * t as usize);
        for b in bodies {
            data.extend(symbol_of(b, t as usize));
        }
        let encoder = CodeKind::RaptorQ.encoder(first.count, t, data).ok()?;
        Some(CatalogueCoder {
            repair: CatalogueRepair {
                signer: first.signer,
                version: first.version,
                session: first.session,
                count: first.count,
                symbol_size: t,
                id: first.count,
                symbol: Vec::new(),
            },
            encoder,
        })
    }

    /// The `n`th repair piece, signed, into `buf`: symbol ids climb from
    /// the piece count and wrap within the code's id space.
    pub fn repair(&mut self, n: u64, identity: &Identity, buf: &mut Vec<u8>) {
        let count = self.repair.count;
        let span = (MAX_SYMBOL_ID + 1 - count) as u64;
        self.repair.id = count + (n % span) as u32;
        self.encoder.symbol(self.repair.id, &mut self.repair.symbol);
        buf.clear();
        self.repair.emit(buf);
        auth::sign_catalogue(identity, buf);
    }
}

/// The listener's side: one version's pieces and repairs until they
/// decode.
pub struct CatalogueDecoder {
    version: u64,
    count: u32,
    symbol_size: u16,
    decoder: Box<dyn BlockDecoder>,
    /// Pieces taken, by index.
    have: IdSet,
    done: bool,
}

impl CatalogueDecoder {
    /// A decoder of `version`'s catalogue of `count` pieces coded with
    /// symbols of `symbol_size` (not 0).
    pub fn new(version: u64, count: u32, symbol_size: u16) -> Self {
        // The RNG only draws the accounting model's failures, which a
        // real decoder does not have.
        let decoder = CodeKind::RaptorQ.decoder(count, symbol_size, true, &mut Rng::new(0));
        CatalogueDecoder {
            version,
            count,
            symbol_size,
            decoder,
            have: IdSet::default(),
            done: false,
        }
    }

    /// The version it decodes.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Whether pieces of `version` with this coding belong here.
    pub fn fits(&self, version: u64, count: u32, symbol_size: u16) -> bool {
        (self.version, self.count, self.symbol_size) == (version, count, symbol_size)
    }

    /// Whether it has decoded (the rest of the version's pieces and
    /// repairs are of no use to it).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Whether piece `index` has been taken.
    pub fn has(&self, index: u32) -> bool {
        self.have.contains(index)
    }

    /// Takes a piece heard (checked, of this version and coding) by its
    /// signed bytes.
    pub fn add_piece(&mut self, index: u32, body: &[u8]) {
        if !self.done && index < self.count && body.len() + 2 <= self.symbol_size as usize {
            self.have.insert(index);
            let s = symbol_of(body, self.symbol_size as usize);
            self.decoder.add(index, Some(&s));
        }
    }

    /// Takes a repair piece heard (checked, of this version and coding).
    pub fn add_repair(&mut self, r: &CatalogueRepair) {
        if !self.done {
            self.decoder.add(r.id, Some(&r.symbol));
        }
    }

    /// Every piece's signed bytes, once enough pieces and repairs are in
    /// (once: afterwards `None`). A symbol whose length does not fit is
    /// left out (only a pusher coding wrongly makes one).
    pub fn decode(&mut self) -> Option<Vec<Vec<u8>>> {
        if self.done || !self.decoder.ready() {
            return None;
        }
        let block = self.decoder.try_decode()?;
        self.done = true;
        let t = self.symbol_size as usize;
        Some(
            (block.chunks(t))
                .filter_map(|s| {
                    let len = u16::from_be_bytes([*s.first()?, *s.get(1)?]) as usize;
                    s.get(2..2 + len).map(<[u8]>::to_vec)
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Identity;
    use crate::wire::FecParams;
    use crate::wire::catalogue::{HeadKind, ItemHead, pack, split_item};
    use crate::{ItemId, SessionId};

    /// A copy of a catalogue of `files` files, coded.
    fn copy(files: u32) -> (Vec<CataloguePiece>, Vec<Vec<u8>>) {
        let base = CataloguePiece {
            signer: Identity::from_seed([1; 32]).public().to_bytes(),
            version: 9,
            session: SessionId(3),
            items: files,
            signed_symbols: false,
            index: 0,
            count: 1,
            symbol_size: 0,
            entries: Vec::new(),
        };
        let entries = (0..files)
            .flat_map(|i| {
                let head = ItemHead {
                    kind: HeadKind::File,
                    name: format!("dir/file-{i:05}.html"),
                    size: 1000 + i as u64,
                    hash: [i as u8; 32],
                    fec: FecParams {
                        code: CodeKind::RaptorQ,
                        symbol_size: 1440,
                        max_block_symbols: 1000,
                    },
                    mode: 0o644,
                    mtime: 1,
                };
                split_item(ItemId(i), head, &[])
            })
            .collect();
        let mut pieces = pack(&base, entries);
        let t = symbol_size(&pieces);
        let bodies = (pieces.iter_mut())
            .map(|p| {
                p.symbol_size = t;
                let mut b = Vec::new();
                p.emit(&mut b);
                b
            })
            .collect();
        (pieces, bodies)
    }

    #[test]
    fn any_copys_worth_of_pieces_and_repairs_gives_every_piece() {
        let (pieces, bodies) = copy(600);
        let n = pieces.len() as u32;
        assert!(n > 20, "{n} pieces");
        let first = &pieces[0];
        assert!(first.symbol_size > 0);
        let id = Identity::from_seed([1; 32]);
        let mut coder = CatalogueCoder::new(first, &bodies).expect("coded");
        let mut dec = CatalogueDecoder::new(first.version, n, first.symbol_size);
        // Every other piece lost; the rest made up with repairs (also
        // every other one lost).
        for (i, b) in bodies.iter().enumerate().step_by(2) {
            dec.add_piece(i as u32, b);
        }
        let mut buf = Vec::new();
        let mut r = 0;
        let got = loop {
            if let Some(got) = dec.decode() {
                break got;
            }
            assert!(r < 4 * n as u64, "no decode after {r} repairs");
            coder.repair(r, &id, &mut buf);
            r += 1;
            if r % 2 == 0 {
                continue;
            }
            let (key, body) = auth::open_catalogue(&auth::Verified::new(), &buf).expect("signed");
            assert_eq!(key, id.public());
            let rep = CatalogueRepair::parse(body).expect("parses");
            assert!(dec.fits(rep.version, rep.count, rep.symbol_size));
            dec.add_repair(&rep);
        };
        assert_eq!(got, bodies);
        // About half a copy of repairs was heard (any n symbols, or one
        // or two more).
        assert!(r <= n as u64 + 8, "{r} repairs sent for {n} pieces");
        assert!(dec.is_done() && dec.decode().is_none());
        // What it decoded parses as the pieces themselves.
        assert_eq!(CataloguePiece::parse(&got[5]).expect("parses"), pieces[5]);
    }

    #[test]
    fn one_piece_or_too_many_go_uncoded() {
        let (pieces, _) = copy(3);
        assert_eq!(pieces.len(), 1);
        assert_eq!(symbol_size(&pieces), 0);
        let many = vec![pieces[0].clone(); MAX_CODED_PIECES as usize + 1];
        assert_eq!(symbol_size(&many), 0);
        assert!(symbol_size(&many[..2]) > 0);
    }
}
