//! The listen endpoint's outcomes, one per selected file of the version
//! it receives: the receiver's events turned into them (a verified pack
//! cut into its members' outcomes), a new version's changed files taken
//! up again, and a TIDDO listener giving up a file that never holds still.

use super::{ListenEndpoint, ListenEvent, MAX_CHANGES_FOLLOWED};
use crate::endpoint::client::{Event, Outcome};
use crate::endpoint::store::{BlockStore, PackMember, StoreError};
use std::collections::BTreeMap;

impl<S: BlockStore> ListenEndpoint<S> {
    /// A new version's files against the version before (`older`): an
    /// outcome for other content than the new version's, or a failure, is
    /// no outcome of this version (the file is received again); a TIDDO
    /// listener gives up a file changed more than [`MAX_CHANGES_FOLLOWED`]
    /// times. Outcomes of files the new version no longer has are
    /// forgotten, so a satellite listener that runs for months remembers
    /// the files on air, not every name it ever saw (a file that comes
    /// back is found in place by its hash, `Resume::Complete`).
    pub(super) fn follow_changes(&mut self, older: &BTreeMap<String, ([u8; 32], u64)>) {
        let hashes = &self.hashes;
        (self.results).retain(|n, (h, o)| {
            (hashes.get(n)).is_some_and(|(now, _)| now == h && o.result.is_ok())
        });
        if self.cfg.satellite {
            return;
        }
        let mut restless = Vec::new();
        for (n, (h, _)) in hashes {
            if older.get(n).is_some_and(|(was, _)| was != h) {
                let c = self.changes.entry(n.clone()).or_insert(0);
                *c += 1;
                if *c > MAX_CHANGES_FOLLOWED {
                    restless.push((n.clone(), *c));
                }
            }
        }
        for (n, c) in restless {
            self.record(
                n,
                Err(format!(
                    "changed in {c} catalogue versions while this listener ran: \
                     it does not hold still long enough to be received \
                     (--satellite follows every change)"
                )),
            );
        }
    }

    /// Whether the file `name` with this hash needs nothing more from a
    /// new version: verified already (satellite mode across versions), or
    /// being cut out of an older version's pack (its job gives its
    /// outcome).
    pub(super) fn settled(&self, name: &str, hash: &[u8; 32]) -> bool {
        let verified = (self.results.get(name)).is_some_and(|(h, o)| h == hash && o.result.is_ok());
        verified || self.cuts.carries(name, hash)
    }

    /// Records the outcome of the file `name` (of the active version).
    pub(super) fn record(&mut self, name: String, result: Result<(), String>) {
        let (hash, size) = self.hashes.get(&name).copied().unwrap_or(([0; 32], 0));
        self.record_as(name, hash, size, result);
    }

    /// Records the outcome of the file `name` with this hash and size (not
    /// at all if the active version holds other content for that name: an
    /// older version's job came back late).
    pub(super) fn record_as(
        &mut self,
        name: String,
        hash: [u8; 32],
        size: u64,
        result: Result<(), String>,
    ) {
        let active = self.hashes.get(&name).map(|(h, _)| *h);
        if active.is_some_and(|h| h != hash) {
            return;
        }
        let o = Outcome {
            name: name.clone(),
            size,
            result,
        };
        if self.results.insert(name, (hash, o)).is_none() && active.is_some() {
            self.unresolved = self.unresolved.saturating_sub(1);
        }
    }

    /// The pack received as `name`, if it is one (a file of that name is
    /// the file: a pusher cannot make a file's failure a pack's).
    pub(super) fn pack_named(&self, name: &str) -> Option<crate::ItemId> {
        if self.hashes.contains_key(name) {
            return None;
        }
        (self.names.iter())
            .find(|(i, n)| n.as_str() == name && self.packs.contains_key(i))
            .map(|(i, _)| *i)
    }

    /// An item's outcome (the item, or only its name): a file's own, or
    /// each selected member's of a pack (a verified pack is cut into its
    /// members here).
    pub(super) fn outcome(
        &mut self,
        item: Option<crate::ItemId>,
        name: String,
        result: Result<(), String>,
    ) {
        let Some(pack) = item.or_else(|| self.pack_named(&name)) else {
            return self.record(name, result);
        };
        let Some(members) = self.packs.remove(&pack) else {
            return self.record(name, result);
        };
        let results = match (&result, self.inner.as_mut()) {
            (Ok(()), Some(inner)) => {
                let store = inner.store_mut();
                match store.unpack_work(pack, &members) {
                    Some(work) => {
                        return self.cuts.queue(pack, members, work);
                    }
                    None => store.unpack(pack, &members),
                }
            }
            _ => Vec::new(),
        };
        self.cut(&result, members, results);
    }

    /// Records each member's outcome: the pack's failure, or what cutting
    /// it out gave (one result per member, in order).
    pub(super) fn cut(
        &mut self,
        result: &Result<(), String>,
        members: Vec<PackMember>,
        results: Vec<Result<bool, StoreError>>,
    ) {
        for (i, m) in members.into_iter().enumerate() {
            let r = match (result, results.get(i)) {
                (Err(e), _) => Err(e.clone()),
                (Ok(()), Some(Ok(true))) => Ok(()),
                (Ok(()), Some(Ok(false))) => Err("does not match its hash in the pack".into()),
                (Ok(()), Some(Err(e))) => Err(e.to_string()),
                (Ok(()), None) => Err("not cut from its pack".into()),
            };
            if let Err(reason) = &r {
                self.events.push_back(ListenEvent::Item(Event::Failed {
                    name: m.name.clone(),
                    reason: reason.clone(),
                }));
            }
            self.cuts.landed(&m.name, &m.hash);
            // Its own hash: a job back after a newer version came says
            // what it put in place, not what the new version holds.
            self.record_as(m.name, m.hash, m.size, r);
        }
    }

    /// Moves the receiver's events out, recording outcomes.
    pub(super) fn drain(&mut self) {
        let Some(inner) = self.inner.as_mut() else {
            return;
        };
        let mut events = Vec::new();
        while let Some(ev) = inner.poll_event() {
            events.push(ev);
        }
        let ended = inner.ended().is_some().then(|| inner.outcomes());
        for ev in events {
            match &ev {
                Event::Complete { item } => {
                    if let Some(n) = self.names.get(item).cloned() {
                        self.outcome(Some(*item), n, Ok(()));
                    }
                }
                Event::Failed { name, reason } => {
                    self.outcome(None, name.clone(), Err(reason.clone()));
                }
                _ => {}
            }
            self.events.push_back(ListenEvent::Item(ev));
        }
        // The receiver gave up (idle): what is left fails with its reason.
        for o in ended.into_iter().flatten() {
            if !self.results.contains_key(&o.name) && o.result.is_err() {
                self.outcome(None, o.name, o.result);
            }
        }
    }
}
