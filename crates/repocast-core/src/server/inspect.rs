//! What a driver may read of the server without changing it: counters,
//! its settings, a client's summary, the queue, the NAK window, and the
//! manifests and catalogue it hands to clients. Part of [`super::Server`].

use super::{ClientSummary, Server, ServerConfig, ServerStats};
use crate::wire::ManifestEntry;
use crate::wire::control::CatalogueEntry;
use crate::{ClientId, ItemId};
use std::time::Duration;

impl Server {
    /// Counters so far.
    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// The settings it runs with (a push endpoint's data packet interval
    /// leaves room for the catalogue).
    pub fn config(&self) -> &ServerConfig {
        &self.cfg
    }

    /// What the server knows of `client`.
    pub fn client_summary(&self, client: ClientId) -> Option<ClientSummary> {
        let c = self.clients.get(&client)?;
        Some(ClientSummary {
            requested: c.requested.len() as u32,
            done: c.done.len() as u32,
            loss: c.loss(),
            naks: c.naks,
        })
    }

    /// Connected clients.
    pub fn client_count(&self) -> usize {
        self.clients.len()
    }

    /// Items waiting for a scheduled send (by anybody).
    pub fn queue_len(&self) -> usize {
        self.demand.active().count()
    }

    /// The current NAK window.
    pub fn nak_window(&self) -> (Duration, Duration) {
        (self.cfg.nak_window.0, self.nak_window_max)
    }

    /// The manifest entry of `item`.
    pub fn manifest(&self, item: ItemId) -> Option<ManifestEntry> {
        let st = self.items.get(item.0 as usize)?;
        Some(ManifestEntry {
            item,
            name: st.info.name.clone(),
            size: st.info.size,
            hash: st.info.hash,
            fec: st.fec,
            block_hashes: st.info.block_hashes.clone(),
        })
    }

    /// The BLAKE3 hash of `item`'s bytes.
    pub fn item_hash(&self, item: ItemId) -> Option<[u8; 32]> {
        self.items.get(item.0 as usize).map(|st| st.info.hash)
    }

    /// The whole catalogue, for `ListCatalogue`.
    pub fn catalogue(&self) -> Vec<CatalogueEntry> {
        self.items
            .iter()
            .enumerate()
            .map(|(i, s)| CatalogueEntry {
                item: ItemId(i as u32),
                name: s.info.name.clone(),
                size: s.info.size,
            })
            .collect()
    }
}
