//! What a client endpoint hands its driver besides packets: blocks to
//! decode off the receiving path (decode jobs), and, between the
//! endpoints of two catalogue versions, the decode jobs out and the partly
//! received blocks of unchanged items. Part of [`super::ClientEndpoint`].

use super::ClientEndpoint;
use crate::client::{Partial, decode};
use crate::endpoint::store::BlockStore;
use crate::{Instant, ItemId};

impl<S: BlockStore> ClientEndpoint<S> {
    /// The next block to decode off the receiving path
    /// (`client::decode`): run it on any thread, then hand it back with
    /// [`ClientEndpoint::decoded`]. Only with `decode_jobs` set.
    pub fn poll_decode(&mut self) -> Option<decode::DecodeJob> {
        self.client.poll_decode()
    }

    /// A job from [`ClientEndpoint::poll_decode`], run (or not: it is run
    /// here then).
    ///
    /// A job back after the run ended still counts: a block it verifies is
    /// written (and may complete its item), and one still short is kept
    /// with the rest ([`ClientEndpoint::suspend`]), so a driver that takes
    /// its jobs back before it lets go of the endpoint loses none of them.
    pub fn decoded(&mut self, now: Instant, job: decode::DecodeJob) {
        self.client.decoded(job);
        self.process(now);
        if self.ended.is_some() {
            self.suspend();
        }
    }

    /// Decode jobs handed out or waiting to be, not yet back: a driver
    /// that lets go of a finished endpoint waits for these first.
    pub fn decodes_away(&self) -> usize {
        self.client.decodes_away()
    }

    /// Runs the decode jobs waiting, here and now, and hands them back (a
    /// driver with no other thread to give them to: the simulator).
    pub fn decode_here(&mut self, now: Instant) {
        while let Some(mut job) = self.poll_decode() {
            job.run();
            self.decoded(now, job);
        }
    }

    /// The decode jobs out, for an endpoint that replaces this one.
    pub fn jobs_out(&self) -> decode::JobsOut {
        self.client.jobs_out()
    }

    /// Takes over the decode jobs another endpoint handed out (see
    /// [`crate::client::Client::carry_jobs`]).
    pub fn carry_jobs(&mut self, j: decode::JobsOut) {
        self.client.carry_jobs(j);
    }

    /// Takes out the partly received blocks of every item still being
    /// received, for an endpoint of a newer catalogue version that carries
    /// some unchanged ([`crate::client::Client::take_partials`]).
    pub fn take_partials(&mut self) -> Vec<Partial> {
        let out = self.client.take_partials();
        for p in &out {
            for (b, _) in &p.blocks {
                self.lru.remove(&(p.manifest.item, *b));
            }
        }
        out
    }

    /// Gives `item` the blocks of `p` (the same content, from an older
    /// version) it has not begun or verified; they count against the
    /// memory budget from now on. Returns how many it took.
    pub fn adopt_partial(&mut self, item: ItemId, p: Partial) -> usize {
        let taken = self.client.adopt_partial(item, p);
        for b in &taken {
            self.lru.insert((item, *b), self.tick);
            self.stats.adopted_symbols += self.client.held_symbols(item, *b) as u64;
        }
        taken.len()
    }
}
