//! The listen endpoint's catalogue intake: signed pieces (and, for a
//! coded catalogue, repairs) from the announcement group, each checked
//! alone (signature, pinned or first signer, version no older than the
//! newest seen) and assembled ([`crate::endpoint::assembly`]) until the
//! selected items of a version are described; then the endpoint takes
//! that version, once no older pack cut could land over one of its files.

use super::{ListenEndpoint, ListenEvent};
use crate::Instant;
use crate::auth::{self, PublicKey};
use crate::endpoint::assembly::{Assembly, AssemblyError};
use crate::endpoint::catalogue_code::CatalogueDecoder;
use crate::endpoint::select::selects;
use crate::endpoint::store::BlockStore;
use crate::wire::ManifestEntry;
use crate::wire::catalogue::{CataloguePiece, CatalogueRepair, HeadKind, ItemHead, Peek};
use crate::wire::kind;

impl<S: BlockStore> ListenEndpoint<S> {
    /// A datagram from the announcement group: a catalogue piece, or a
    /// repair of a coded catalogue.
    pub(super) fn on_piece(&mut self, now: Instant, bytes: &[u8]) {
        // What could be of no use even if genuine is dropped before its
        // signature is checked (about 50 µs each; a large catalogue's
        // pieces outnumber what `verified` remembers, and repairs never
        // repeat): the version being received, a piece of the coded
        // version in assembly already held, and a repair of an older
        // version or of one decoded.
        if let Some(k) = Peek::of(bytes) {
            let active = self.active.as_ref().is_some_and(|a| a.0 == k.version);
            let held = |c: &CatalogueDecoder| {
                c.version() == k.version && (c.is_done() || !k.repair && c.has(k.index))
            };
            let stale = k.repair && k.version < self.newest();
            if active || stale || self.coded.as_ref().is_some_and(held) {
                if stale {
                    self.stats.stale += 1;
                }
                return;
            }
        }
        let (key, body) = match auth::open_catalogue(&self.verified, bytes) {
            Ok(x) => x,
            Err(_) => {
                // Not a signed piece (or a forged one): nothing from it.
                self.stats.forged += 1;
                return;
            }
        };
        match self.signer {
            Some(s) if s != key => {
                self.stats.foreign += 1;
                return;
            }
            Some(_) => {}
            None => {
                self.signer = Some(key);
                self.events
                    .push_back(ListenEvent::Signer { key, pinned: false });
            }
        }
        if crate::wire::kind_of(body) == Some(kind::CATALOGUE_REPAIR) {
            let Ok(r) = CatalogueRepair::parse(body) else {
                self.stats.malformed += 1;
                return;
            };
            // A repair of an older version, or of the one received, was
            // dropped above (the peek read these same bytes).
            self.stats.repairs += 1;
            if let Some(c) = self.code(r.version, r.count, r.symbol_size) {
                c.add_repair(&r);
            }
            self.decode_catalogue(now, key);
            return;
        }
        let p = match CataloguePiece::parse(body) {
            Ok(p) => p,
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        if p.symbol_size != 0 && self.fresh(p.version) {
            if let Some(c) = self.code(p.version, p.count, p.symbol_size) {
                c.add_piece(p.index, body);
            }
        }
        self.take_piece(now, p);
        self.decode_catalogue(now, key);
    }

    /// The newest version seen (or the floor a restarted listener keeps).
    pub(super) fn newest(&self) -> u64 {
        (self.assembly.as_ref().map(|a| a.version))
            .max(self.active.as_ref().map(|a| a.0))
            .unwrap_or(0)
            .max(self.cfg.min_version)
    }

    /// Whether a piece of `version` is of use: no older than the newest
    /// seen, and not the version being received.
    fn fresh(&self, version: u64) -> bool {
        version >= self.newest() && self.active.as_ref().map(|a| a.0) != Some(version)
    }

    /// The decoder of `version`'s coded catalogue (a newer version's
    /// replaces an older one's), unless its coding disagrees with what
    /// came first or it would hold more than a quarter of the memory
    /// budget (then its pieces are assembled one by one, uncoded).
    fn code(
        &mut self,
        version: u64,
        count: u32,
        symbol_size: u16,
    ) -> Option<&mut CatalogueDecoder> {
        let bytes = count as u64 * symbol_size as u64;
        if bytes > self.cfg.memory_budget / 4 {
            return None;
        }
        if self.coded.as_ref().is_none_or(|c| c.version() < version) {
            self.coded = Some(CatalogueDecoder::new(version, count, symbol_size));
        }
        self.coded
            .as_mut()
            .filter(|c| c.fits(version, count, symbol_size))
    }

    /// The pieces a coded catalogue decoded to, once it has: each taken
    /// like a piece heard. They are the signer's own signed bytes (every
    /// piece and repair they came from was checked under `key`).
    fn decode_catalogue(&mut self, now: Instant, key: PublicKey) {
        let Some(bodies) = self.coded.as_mut().and_then(CatalogueDecoder::decode) else {
            return;
        };
        for b in bodies {
            match CataloguePiece::parse(&b) {
                Ok(p) if p.signer == key.to_bytes() => {
                    self.stats.decoded_pieces += 1;
                    self.take_piece(now, p);
                }
                _ => self.stats.malformed += 1,
            }
        }
    }

    /// Takes a checked piece (signature, signer) into the assembly of its
    /// version, and starts receiving once the selected items are in.
    fn take_piece(&mut self, now: Instant, p: CataloguePiece) {
        if !self.fresh(p.version) {
            if p.version < self.newest() {
                self.stats.stale += 1;
            }
            return;
        }
        if self.assembly.as_ref().is_none_or(|a| a.version < p.version) {
            self.assembly = Some(Assembly::new(&p));
        }
        let select = &self.cfg.select;
        let Some(a) = self.assembly.as_mut() else {
            return;
        };
        let wanted = |name: &str| select.is_empty() || select.iter().any(|g| selects(g, name));
        match a.add(&p, wanted) {
            Ok(()) => {}
            Err(AssemblyError::TooLarge) => {
                return self.end(AssemblyError::TooLarge.to_string());
            }
            Err(_) => self.stats.malformed += 1,
        }
        if a.is_complete(select) && self.held != Some(a.version) {
            self.take_when_clear(now);
        }
    }

    /// Takes the complete version in assembly, unless it must wait for
    /// older cuts still out: one of its files sent alone has a name an
    /// older version's pack job is cutting with other content (taken now,
    /// the new file could land first and the older content over it). Then
    /// it is held (its data kept, as before a catalogue is complete) and
    /// taken once those jobs are back.
    pub(super) fn take_when_clear(&mut self, now: Instant) {
        let Some(a) = self.assembly.as_ref() else {
            return;
        };
        let clash = |(m, h): &(ManifestEntry, ItemHead)| {
            h.kind != HeadKind::Pack && self.cuts.carries_other(&m.name, &m.hash)
        };
        if self.cuts.busy() && a.selected().iter().any(clash) {
            self.held = Some(a.version);
            return;
        }
        self.held = None;
        if let Some(a) = self.assembly.take() {
            self.activate(now, a);
        }
    }
}
