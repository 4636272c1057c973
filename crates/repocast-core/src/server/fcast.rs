//! Fcast sending order for push-mode passes (SPEC 3.6).
//!
//! A pass plans some symbols of every block of an item. Instead of one
//! block after another, round r sends the r-th planned symbol of every
//! block, in an order shuffled afresh each round, so periodic loss does
//! not always hit the same block and a receiver that tunes in anywhere
//! gains on every block at the same pace, whatever the item's size. The
//! symbols come from [`super::encoders`]: when the item's blocks fit its
//! budget, their encoders outlive the pass, and the pass prepares them for
//! the next one's repair symbols, one block every half block of packets;
//! a larger item is streamed, its repair symbols made ahead a block at a
//! time, one batch every quarter batch of packets. The server's
//! [`super::transmission::Transmission`] asks this order which planned
//! symbol comes next.

use super::encoders::EncoderCache;
use super::transmission::Segment;
use crate::ItemId;
use crate::fec::layout::Layout;
use crate::rng::Rng;

/// The order of a pass in progress.
pub struct Fcast {
    round: u32,
    /// Segments of this round not yet sent, in sending order (reversed).
    order: Vec<usize>,
    /// Planned ids per segment.
    lens: Vec<u32>,
    rng: Rng,
    /// The next (segment, position), if any is left.
    pending: Option<(usize, u32)>,
    /// Where the symbols come from (kept encoders, or a streamed item's
    /// symbols made ahead), handed from pass to pass.
    pub encoders: EncoderCache,
    /// The item, whose kept encoders this pass prepares (None: it is
    /// streamed).
    prepare: Option<ItemId>,
    /// Packets between two preparations (half the largest block's).
    prepare_gap: u64,
    /// Packets between two batches made ahead (streamed items only).
    ahead_gap: Option<u64>,
    taken: u64,
}

impl Fcast {
    /// The order over `plan` (segments of `item` laid out by `layout`),
    /// shuffles from `rng`, symbols from `encoders`.
    pub fn new(
        item: ItemId,
        plan: &[Segment],
        layout: &Layout,
        rng: Rng,
        mut encoders: EncoderCache,
    ) -> Self {
        let lens: Vec<u32> = plan.iter().map(|s| s.esis_len()).collect();
        let fits = encoders.fits_or_stream(item, layout);
        let mut f = Fcast {
            prepare: fits.then_some(item),
            prepare_gap: (lens.iter().copied().max().unwrap_or(0) as u64 / 2).max(1),
            ahead_gap: encoders.ahead_gap(item),
            taken: 0,
            round: 0,
            order: Vec::new(),
            lens,
            rng,
            pending: None,
            encoders,
        };
        f.fill_round();
        f.pending = f.advance();
        f
    }

    /// The segments with a symbol in the current round, shuffled.
    fn fill_round(&mut self) {
        let round = self.round;
        self.order = (0..self.lens.len())
            .filter(|&s| self.lens[s] > round)
            .collect();
        self.rng.shuffle(&mut self.order);
    }

    fn advance(&mut self) -> Option<(usize, u32)> {
        loop {
            if let Some(s) = self.order.pop() {
                return Some((s, self.round));
            }
            self.round += 1;
            self.fill_round();
            if self.order.is_empty() {
                return None;
            }
        }
    }

    /// The next planned (segment, position), moving on; `None` at the end.
    pub fn next(&mut self) -> Option<(usize, u32)> {
        let p = self.pending?;
        self.pending = self.advance();
        self.taken += 1;
        if let Some(item) = self.prepare.filter(|_| self.taken % self.prepare_gap == 0) {
            self.encoders.prepare_one(item);
        }
        Some(p)
    }

    /// Whether the symbol just taken is the one after which a streamed
    /// item's next batch is made ahead.
    pub fn ahead_due(&self) -> bool {
        self.ahead_gap.is_some_and(|g| self.taken % g == 0)
    }

    /// Whether every planned symbol has been taken.
    pub fn finished(&self) -> bool {
        self.pending.is_none()
    }

    /// Ends the pass now.
    pub fn cancel(&mut self) {
        self.pending = None;
        self.order.clear();
    }
}
