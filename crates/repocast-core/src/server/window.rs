//! The request window: how many of one client's items the server works on
//! at a time ([`super::ServerConfig::request_window`]).
//!
//! A request for thousands of small files would otherwise have every
//! manifest sent at once and every item put on air at the link's rate,
//! while the receiver takes in each manifest (a file to create) and each
//! item (a file to write and hash) at its own, slower pace: its reports
//! then come seconds late, are counted missing, and the items go again,
//! which puts it further behind (measured: `docs/benchmarks.md`, session
//! 53). With a window, the server sends the manifests of, and schedules,
//! only some of a client's requested items; each item that ends for the
//! client (done, or failed for it) lets the next one in.
//!
//! Half the window is for the items in the order the client asked. The
//! rest is for sends that others cause: when a scheduled send of an item
//! starts, every client that has the item waiting in its backlog and room
//! in its window joins it (its manifest goes then), so two clients asking
//! for the same large set a moment apart share the sends of what the
//! first one is at, instead of each being served alone at its own place in
//! the set. A request of up to half the window is served exactly as
//! without one. Sits between [`super::reports`] (which takes requests and
//! reports in), [`super::sends`] (which starts sends) and the demand table.

use super::{Server, ServerMsg};
use crate::wire::AnnounceKind;
use crate::{ClientId, Instant, ItemId, TransmissionId};

/// The part of a window of `w` items for the items in the order asked:
/// half, at least one.
fn in_order(w: u32) -> usize {
    (w as usize / 2).max(1)
}

impl Server {
    /// Lets client `client`'s waiting items in while its window has room:
    /// each gets its manifest, and joins its transmission on air or waits
    /// for one (the waits are added to `waits`, filed by the caller).
    pub(super) fn release(&mut self, client: ClientId, waits: &mut Vec<ItemId>) {
        let room = self.cfg.request_window.map_or(usize::MAX, in_order);
        loop {
            let Some(c) = self.clients.get_mut(&client) else {
                return;
            };
            if c.open.len() >= room {
                return;
            }
            let Some(item) = c.backlog.pop_front() else {
                return;
            };
            // Joined a send meanwhile, failed since it was asked for (the
            // client was told then; its `queued` was cleared), or reported
            // done already: nothing to start.
            let st = &mut self.items[item.0 as usize];
            if !st.queued.remove(&client) || c.done.contains(&item) {
                continue;
            }
            c.open.insert(item);
            self.start_item(client, item, waits);
        }
    }

    /// A scheduled send of `item` is about to start: the clients that
    /// have it in their backlog and room in their whole window join it.
    /// Each is sent the manifest, naming this send, and is returned to be
    /// counted among the send's receivers (unless it holds every block
    /// already, from a `Have`: it completes from those).
    pub(super) fn join_from_backlogs(&mut self, item: ItemId) -> Vec<ClientId> {
        let Some(window) = self.cfg.request_window else {
            return Vec::new();
        };
        let st = &self.items[item.0 as usize];
        if st.queued.is_empty() {
            return Vec::new();
        }
        let starts = st.starts;
        let joining: Vec<ClientId> = (st.queued.iter())
            .copied()
            .filter(|c| (self.clients.get(c)).is_some_and(|s| s.open.len() < window as usize))
            .collect();
        let mut listeners = Vec::with_capacity(joining.len());
        for client in joining {
            self.items[item.0 as usize].queued.remove(&client);
            let Some(c) = self.clients.get_mut(&client) else {
                continue;
            };
            if c.done.contains(&item) {
                continue;
            }
            c.open.insert(item);
            // It has heard no send of the item: the send may start from
            // the first ids (`Server::restart_ids_if_unheard`).
            c.unheard.insert(item, starts);
            self.send_manifest(client, item);
            if !self.resume_from_have(client, item) {
                listeners.push(client);
            }
        }
        listeners
    }

    /// Item `item` has ended for client `client` (done, or failed for
    /// it): its place in the window goes to the next item it asked for.
    pub(super) fn close_in_window(&mut self, now: Instant, client: ClientId, item: ItemId) {
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        if !c.open.remove(&item) || c.backlog.is_empty() {
            return;
        }
        let mut waits = Vec::new();
        self.release(client, &mut waits);
        self.demand.add_waits(client, &waits, now);
    }

    /// Sends the manifest of `item`, just let into the window, to
    /// `client`, and has it listen to the item's transmission on air or
    /// wait for one.
    fn start_item(&mut self, client: ClientId, item: ItemId, waits: &mut Vec<ItemId>) {
        let blocks = self.items[item.0 as usize].layout.blocks();
        self.send_manifest(client, item);
        if blocks == 0 {
            // An empty item: nothing to send; the client completes it from
            // the manifest alone and reports it done.
            return;
        }
        if self.resume_from_have(client, item) {
            return;
        }
        let on_air = self.unfinished_sends().find(|t| t.item == item);
        let joinable = (on_air)
            .filter(|t| t.kind != AnnounceKind::End)
            .map(|t| self.announce(t, t.kind));
        if on_air.is_none() {
            let starts = self.items[item.0 as usize].starts;
            if let Some(c) = self.clients.get_mut(&client) {
                c.unheard.insert(item, starts);
            }
        }
        match joinable {
            Some(a) if self.cfg.scheme.notify => {
                self.items[item.0 as usize].in_flight.insert(client);
                self.send(client, ServerMsg::Notify(a));
            }
            _ => waits.push(item),
        }
    }

    /// What `client` said it holds of `item` (its `Have`) becomes its
    /// need: every block it lacks. True when it holds them all: it
    /// completes from its own blocks and reports done.
    fn resume_from_have(&mut self, client: ClientId, item: ItemId) -> bool {
        let Some(needs) = self.held_needs(client, item) else {
            return false;
        };
        self.stats.resumed_requests += 1;
        let all_held = needs.is_empty();
        if let Some(c) = self.clients.get_mut(&client) {
            c.needs.insert(item, needs);
        }
        all_held
    }

    /// Sends `client` the manifest of `item`, naming the next
    /// transmission as the first it listens to.
    fn send_manifest(&mut self, client: ClientId, item: ItemId) {
        let next_transmission = TransmissionId(self.next_tid);
        if let Some(entry) = self.manifest(item) {
            self.send(
                client,
                ServerMsg::Manifest {
                    entry,
                    next_transmission,
                },
            );
        }
    }
}
