//! The stall bound of a request: a server that is alive but sends this
//! request nothing fails it after [`ClientEndpointConfig::stall_timeout`].
//!
//! The idle timeout ([`ClientEndpointConfig::idle_timeout`]) ends a
//! request only when nothing at all comes from the server, and every
//! announcement of the server's session counts: a server busy with other
//! requests keeps it waiting. So a request the server lost, or one it
//! never serves (a server bug, a hostile or overloaded server), would
//! wait as long as the server sends to anyone. Here the request's own
//! progress is watched instead: a useful symbol, a manifest, a catalogue
//! page, an item settled, a block or item back from the driver's jobs.
//! Each of those moves [`Mark`]; no move for the stall timeout ends the
//! request with a reason. A trickle of progress is not a stall, but it
//! ends too: genuine symbols complete what a request needs, which is
//! finite, and forged ones fail the item past the corrupt-block limit
//! (`Client::block_corrupt`).
//!
//! [`ClientEndpointConfig::stall_timeout`]: super::ClientEndpointConfig::stall_timeout
//! [`ClientEndpointConfig::idle_timeout`]: super::ClientEndpointConfig::idle_timeout

use super::ClientEndpoint;
use crate::Instant;
use crate::endpoint::store::BlockStore;
use std::time::Duration;

/// How far a request has come: any change is progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Mark {
    useful: u64,
    manifests: usize,
    catalogue: usize,
    settled: usize,
    away: usize,
}

/// When the request last moved, and where it was then.
#[derive(Debug, Clone)]
pub(super) struct Stall {
    limit: Option<Duration>,
    mark: Mark,
    since: Instant,
}

impl Stall {
    pub(super) fn new(now: Instant, limit: Option<Duration>) -> Self {
        Stall {
            limit,
            mark: Mark::default(),
            since: now,
        }
    }

    /// Notes the request at `mark` at `now`. While work is out with the
    /// driver the request waits on this side, not on the server.
    pub(super) fn observe(&mut self, now: Instant, mark: Mark) {
        if mark != self.mark || mark.away > 0 {
            self.mark = mark;
            self.since = now;
        }
    }

    /// When the request counts as stalled if it does not move.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.limit.map(|l| self.since + l)
    }

    /// The seconds without progress, once past the limit.
    pub(super) fn stalled(&self, now: Instant) -> Option<f64> {
        (self.deadline().is_some_and(|d| now >= d))
            .then(|| now.saturating_since(self.since).as_secs_f64())
    }
}

impl<S: BlockStore> ClientEndpoint<S> {
    /// Notes where the request stands at `now` ([`Stall::observe`]).
    pub(super) fn note_progress(&mut self, now: Instant) {
        let mark = self.mark();
        self.stall.observe(now, mark);
    }

    /// Where the request stands, for [`Stall`].
    fn mark(&self) -> Mark {
        Mark {
            useful: self.client.stats().useful,
            manifests: self.symbol_sizes.len(),
            catalogue: self.catalogue.len(),
            settled: self.settled,
            away: self.client.decodes_away() + self.finishes_away(),
        }
    }
}
