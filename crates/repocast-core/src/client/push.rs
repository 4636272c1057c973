//! Push mode on the client: no request connection, no back channel. The
//! client is given the manifests of the documents it wants (a real receiver
//! reads them from the announced catalogue), listens to the server's
//! carousel, keeps symbols across passes, never sends a NAK, and finishes
//! on its own once every document is complete.
//!
//! A listener's next catalogue version starts a new client; the partly
//! received blocks of a document the new version carries unchanged (the
//! same bytes, hashes and FEC layout) go over to it
//! ([`Client::take_partials`], [`Client::adopt_partial`]), so a file set
//! that changes around a large file does not make its listeners start
//! that file's blocks again. The pusher goes on with the symbol ids it had
//! not sent (`PushEndpoint::replace`), so what they hold stays useful.

use super::item::ItemPhase;
use super::{Client, ClientEvent};
use crate::fec::BlockDecoder;
use crate::wire::ManifestEntry;
use crate::{Instant, ItemId, TransmissionId};

/// A document's partly received blocks, each with its decoder (the
/// symbols it holds), to go over to the same content in a newer version.
pub struct Partial {
    /// The document's manifest in the version they were received in.
    pub manifest: ManifestEntry,
    /// (block, decoder) for every block begun and not decoded.
    pub blocks: Vec<(u32, Box<dyn BlockDecoder>)>,
}

impl Partial {
    /// Whether `m` has the same content in the same layout: the same
    /// size, hash, block hashes and FEC parameters (the name and item id
    /// may differ), so every symbol id stands for the same bytes. Never
    /// without block hashes (a simulation without payloads has none).
    pub fn fits(&self, m: &ManifestEntry) -> bool {
        !self.manifest.block_hashes.is_empty() && self.manifest.same_content(m)
    }
}

impl Client {
    /// Tunes in to a push-mode carousel for these documents. Entries whose
    /// layout is unusable fail at once (an event says why).
    pub fn subscribe(&mut self, _now: Instant, entries: Vec<ManifestEntry>) {
        self.push = true;
        // Empty documents are complete at once, but only once every entry
        // is in: completing one earlier could look like the last.
        let mut empty = Vec::new();
        for entry in entries {
            let item = entry.item;
            let Some(layout) = self.layout_of(&entry) else {
                continue;
            };
            let it = self.items.get_or_insert(item);
            if it.manifest.is_some() {
                continue;
            }
            // Any pass of the carousel will do.
            it.set_manifest(entry.clone(), layout, TransmissionId(0));
            self.events.push_back(ClientEvent::Manifest(entry));
            if layout.blocks() == 0 {
                empty.push(item);
            }
        }
        for item in empty {
            self.assembled(item);
        }
        self.push_check_done();
    }

    /// Takes out the partly received blocks of every document still being
    /// received: blocks begun, neither decoded, nor out as a decode job,
    /// nor evicted to the driver's spill (those start again).
    pub fn take_partials(&mut self) -> Vec<Partial> {
        let mut out = Vec::new();
        for it in self.items.values_mut() {
            let Some(m) = it
                .manifest
                .clone()
                .filter(|_| it.phase == ItemPhase::Receiving)
            else {
                continue;
            };
            let mut blocks = Vec::new();
            for (b, slot) in (0u32..).zip(it.decoders.iter_mut()) {
                let done = it.decoded.get(b as usize).is_none_or(|d| *d);
                if done || it.evicted.contains_key(&b) || it.decoding.contains_key(&b) {
                    continue;
                }
                if let Some(d) = slot.take() {
                    blocks.push((b, d));
                }
            }
            if !blocks.is_empty() {
                out.push(Partial {
                    manifest: m,
                    blocks,
                });
            }
        }
        out
    }

    /// Gives `item` (receiving, with the same content as `p`:
    /// [`Partial::fits`]) the blocks of `p` it has not begun or verified.
    /// Returns the blocks taken.
    pub fn adopt_partial(&mut self, item: ItemId, p: Partial) -> Vec<u32> {
        let mut taken = Vec::new();
        let Some(it) = self.items.get_mut(&item) else {
            return taken;
        };
        let fits = it.manifest.as_ref().is_some_and(|m| p.fits(m));
        if !fits || it.phase != ItemPhase::Receiving {
            return taken;
        }
        for (b, d) in p.blocks {
            let i = b as usize;
            let free = it.decoded.get(i) == Some(&false)
                && it.decoders.get(i).is_some_and(Option::is_none)
                && !it.evicted.contains_key(&b)
                && !it.decoding.contains_key(&b);
            if let (true, Some(slot)) = (free, it.decoders.get_mut(i)) {
                *slot = Some(d);
                taken.push(b);
            }
        }
        taken
    }

    /// In push mode nobody tells the client it is done: it says so itself
    /// once every document is complete or failed.
    pub(super) fn push_check_done(&mut self) {
        if self.push && !self.done && self.is_finished() {
            self.done = true;
            self.events.push_back(ClientEvent::Done);
        }
    }
}
