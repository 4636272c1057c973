//! What a client endpoint asks of the server: the names it was given,
//! or what the catalogue says [`Want::All`] and [`Want::Select`] name, sent
//! as one request once the driver listens on the groups (with what a
//! resumed run already holds first). Part of [`super::ClientEndpoint`].

use super::{BlockStore, ClientEndpoint, Event, Outcome, Want};
use crate::Instant;
use crate::endpoint::select;
use crate::wire::{ClientMsg, ItemSel};
use std::collections::HashMap;

impl<S: BlockStore> ClientEndpoint<S> {
    /// Records `names` as this run's request; it is sent once the driver
    /// listens on the groups ([`Self::ask`]).
    pub(super) fn request(&mut self, now: Instant, names: Vec<String>) {
        self.record(names);
        self.ask(now);
    }

    /// The catalogue is in: what [`Want::All`] or [`Want::Select`] asks
    /// for is known, and so is its total.
    pub(super) fn request_from_catalogue(&mut self, now: Instant) {
        let (names, unmatched) = match &self.cfg.want {
            Want::All => (
                self.catalogue.iter().map(|e| e.name.clone()).collect(),
                Vec::new(),
            ),
            Want::Select(sels) => {
                select::resolve(sels, self.catalogue.iter().map(|e| e.name.as_str()))
            }
            Want::Items(_) | Want::Catalogue => (Vec::new(), Vec::new()),
        };
        if !names.is_empty() {
            let sizes: HashMap<&str, u64> = (self.catalogue.iter())
                .map(|e| (e.name.as_str(), e.size))
                .collect();
            self.events.push_back(Event::Requested {
                items: names.len() as u64,
                bytes: names.iter().filter_map(|n| sizes.get(n.as_str())).sum(),
            });
        }
        let mut all = names;
        all.extend(unmatched.iter().cloned());
        self.record(all);
        for name in unmatched {
            let reason = "names no item in the server's catalogue".to_owned();
            self.events.push_back(Event::Failed {
                name: name.clone(),
                reason: reason.clone(),
            });
            self.settle(Outcome {
                name,
                size: 0,
                result: Err(reason),
            });
        }
        self.ask(now);
    }

    fn record(&mut self, names: Vec<String>) {
        self.requested = names.iter().cloned().collect();
        self.unasked = !names.is_empty();
        self.names = Some(names);
    }

    /// Sends the recorded request, if the driver has joined the groups.
    pub(super) fn ask(&mut self, now: Instant) {
        if !(self.listening && self.unasked) {
            return;
        }
        self.unasked = false;
        // Those with an outcome already (a pattern that named nothing)
        // are not the server's to answer.
        let names: Vec<String> = (self.names.iter().flatten())
            .filter(|n| !self.outcomes.contains_key(*n))
            .cloned()
            .collect();
        if names.is_empty() {
            return;
        }
        // Resuming: say what is held first, so only the rest is sent.
        for name in &names {
            if let Some(h) = self.store.held(name) {
                self.out.push_back(ClientMsg::Have {
                    name: name.clone(),
                    hash: h.hash,
                    held: h.bitmap(),
                });
            }
        }
        let sels = names.into_iter().map(ItemSel::Name).collect();
        self.client.ask(now, sels);
    }
}
