//! The listen endpoint taking a complete version: a receiver
//! ([`ClientEndpoint`] in push mode) for the selected items of its
//! catalogue, the old version's partly received blocks carried over to
//! unchanged content, packs whose members are all in place skipped, and
//! the data kept while the catalogue was coming handed in.

use super::{ListenEndpoint, ListenEvent};
use crate::Instant;
use crate::endpoint::Channel;
use crate::endpoint::assembly::Assembly;
use crate::endpoint::client::{ClientEndpoint, ClientEndpointConfig, Want};
use crate::endpoint::store::{BlockStore, PackMember};
use crate::wire::DataRepr;
use crate::wire::catalogue::HeadKind;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

impl<S: BlockStore> ListenEndpoint<S> {
    /// Starts receiving a complete version.
    pub(super) fn activate(&mut self, now: Instant, a: Assembly) {
        self.coded = self.coded.take().filter(|c| c.version() > a.version);
        self.cuts.next_version();
        let jobs = self.inner.as_ref().map(ClientEndpoint::jobs_out);
        let selected = a.selected();
        // Partly received blocks go over to the same content in the new
        // version, unless it vouches for every symbol and the old one did
        // not (forged ones could be among them).
        let mut partials = Vec::new();
        let store = match self.inner.take() {
            Some(mut i) => {
                if self.active_signed || !a.signed_symbols {
                    partials = i.take_partials();
                    // Blocks spilled to the store go over through it.
                    i.keep_spilled();
                }
                // The old version's items in progress: kept on disk for
                // the new version (same name and content resume; the
                // store drops a name's older content when it opens the
                // newer), released; those it no longer has (a file
                // removed, a pack regrouped) are dropped, or they would
                // stay on disk for good.
                let mut s = i.into_store();
                let still: BTreeSet<&str> =
                    (selected.iter()).map(|(m, _)| m.name.as_str()).collect();
                for (item, name) in &self.names {
                    if still.contains(name.as_str()) {
                        s.close(*item);
                    } else {
                        s.discard(*item);
                    }
                }
                s
            }
            None => match self.spare.take() {
                Some(s) => s,
                None => return,
            },
        };
        let mut client = self.cfg.client.clone();
        // A satellite listener waits an attack of forged symbols out.
        client.fail_on_forgery &= !self.cfg.satellite;
        let mut cfg = ClientEndpointConfig::new(client, Want::Items(Vec::new()));
        cfg.memory_budget = self.cfg.memory_budget;
        // The carousel comes round to what it wants; `timeout` bounds it.
        cfg.stall_timeout = None;
        cfg.idle_timeout = if self.cfg.satellite {
            // A satellite listener waits for the pusher however long.
            Duration::from_secs(100 * 365 * 86_400)
        } else {
            self.cfg.timeout
        };
        let mut inner = ClientEndpoint::new(now, cfg, store);
        // Blocks of the old version out as decode jobs come back here.
        inner.carry_jobs(jobs.unwrap_or_default());
        if let (true, Some(k)) = (a.signed_symbols, self.signer()) {
            inner.expect_signed_symbols(k, a.session);
        }
        let items = a.files();
        let member = |h: &crate::wire::catalogue::ItemHead| PackMember {
            name: h.name.clone(),
            offset: match h.kind {
                HeadKind::Member { offset, .. } => offset,
                _ => 0,
            },
            size: h.size,
            hash: h.hash,
            mode: h.mode,
            mtime: h.mtime,
        };
        self.packs = (selected.iter())
            .filter(|(_, h)| h.kind == HeadKind::Pack)
            .map(|(m, _)| {
                (
                    m.item,
                    a.members(m.item).iter().map(|(_, h)| member(h)).collect(),
                )
            })
            .collect();
        // What the user sees: files, whether sent alone or in a pack.
        let mut visible: Vec<(String, [u8; 32], u64)> = (selected.iter())
            .filter(|(_, h)| h.kind != HeadKind::Pack)
            .map(|(m, _)| (m.name.clone(), m.hash, m.size))
            .collect();
        visible.extend((self.packs.values().flatten()).map(|m| (m.name.clone(), m.hash, m.size)));
        let orphans = a.orphans();
        visible.extend(orphans.iter().map(|n| (n.clone(), [0; 32], 0)));
        let older = std::mem::replace(
            &mut self.hashes,
            (visible.iter())
                .map(|(n, h, size)| (n.clone(), (*h, *size)))
                .collect(),
        );
        self.follow_changes(&older);
        self.names = (selected.iter())
            .map(|(m, _)| (m.item, m.name.clone()))
            .collect();
        let names = visible.iter().map(|(n, _, _)| n.clone()).collect();
        for n in orphans {
            self.record(
                n,
                Err("the catalogue puts it in an item that is no pack".into()),
            );
        }
        // Files settled with the same content are not received again; nor
        // is a pack whose selected members all are, or are in place
        // already.
        let mut todo = Vec::new();
        for (m, h) in selected {
            let Some(members) = self.packs.get(&m.item) else {
                if !self.settled(&m.name, &m.hash) {
                    todo.push((m, h));
                }
                continue;
            };
            let store = inner.store_mut();
            let have = |p: &PackMember| {
                self.settled(&p.name, &p.hash) || store.has_file(&p.name, p.size, &p.hash)
            };
            if members.iter().all(have) {
                for p in members.clone() {
                    if !self.settled(&p.name, &p.hash) {
                        self.record(p.name, Ok(()));
                    }
                }
            } else {
                store.mark_pack(m.item);
                todo.push((m, h));
            }
        }
        let receiving = (todo.iter())
            .map(|(m, _)| self.packs.get(&m.item).map_or(1, Vec::len))
            .sum();
        for (m, h) in todo.iter().filter(|(_, h)| h.kind != HeadKind::Pack) {
            inner.store_mut().set_attributes(m.item, h.mode, h.mtime);
            self.events.push_back(ListenEvent::Attributes {
                item: m.item,
                mode: h.mode,
                mtime: h.mtime,
            });
        }
        self.events.push_back(ListenEvent::Version {
            version: a.version,
            items,
            receiving,
        });
        let by_hash: BTreeMap<[u8; 32], crate::ItemId> =
            todo.iter().rev().map(|(m, _)| (m.hash, m.item)).collect();
        inner.subscribe(now, todo.into_iter().map(|(m, _)| m).collect());
        for p in partials {
            if let Some(&item) = by_hash.get(&p.manifest.hash) {
                self.stats.carried_blocks += inner.adopt_partial(item, p) as u64;
            }
        }
        // Data that came before the catalogue was complete, each datagram
        // freed as it is taken (the copy and its symbols never both held).
        while let Some(b) = self.early.pop_front() {
            if DataRepr::peek_session(&b) == Some(a.session) {
                inner.handle_datagram(now, Channel::Data, &b);
            }
        }
        self.early.shrink_to_fit();
        self.early_bytes = 0;
        self.unresolved = (self.hashes.keys())
            .filter(|n| !self.results.contains_key(*n))
            .count();
        self.active = Some((a.version, a.session, names));
        self.active_signed = a.signed_symbols;
        self.inner = Some(inner);
        self.drain();
    }
}
