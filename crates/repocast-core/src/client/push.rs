//! Push mode on the client: no request connection, no back channel. The
//! client is given the manifests of the documents it wants (a real receiver
//! reads them from the announced catalogue), listens to the server's
//! carousel, keeps symbols across passes, never sends a NAK, and finishes
//! on its own once every document is complete.

use super::{Client, ClientEvent};
use crate::Instant;
use crate::TransmissionId;
use crate::wire::ManifestEntry;

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

    /// In push mode nobody tells the client it is done: it says so itself
    /// once every document is complete or failed.
    pub(super) fn push_check_done(&mut self) {
        if self.push && !self.done && self.is_finished() {
            self.done = true;
            self.events.push_back(ClientEvent::Done);
        }
    }
}
