//! Fcast sending order for push-mode passes (SPEC 3.6).
//!
//! A pass plans some symbols of every block of an item. Instead of one
//! block after another, round r sends the r-th planned symbol of every
//! block, in an order shuffled afresh each round, so periodic loss does
//! not always hit the same block and a receiver that tunes in anywhere
//! gains on every block at the same pace. The symbols come from
//! [`super::encoders`]: when the item's blocks fit its budget, their
//! encoders outlive the pass, and the pass prepares them for the next
//! one's repair symbols, one block every half block of packets (as a job
//! the driver runs on another thread, when it runs them:
//! [`super::encoders`]'s `prepare`); a larger
//! item is streamed, its repair symbols made ahead a block at a time, one
//! batch every quarter batch of packets (in memory, or in the driver's
//! spool); only an item too large to stream at the sending rate is taken
//! in spans of the budget, every round of one span before the next. The server's
//! [`super::transmission::Transmission`] asks this order which planned
//! symbol comes next.

use super::encoders::{EncoderCache, Fit};
use super::transmission::Segment;
use crate::ItemId;
use crate::fec::layout::Layout;
use crate::rng::Rng;
use std::ops::Range;

/// The order of a pass in progress.
pub struct Fcast {
    /// Spans of consecutive segments, in plan order (one unless the item
    /// is sent in spans).
    spans: Vec<Range<usize>>,
    span: usize,
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
    /// streamed or in spans).
    prepare: Option<ItemId>,
    /// Packets between two preparations (half the largest block's).
    prepare_gap: u64,
    /// Packets between two batches made ahead (streamed items only).
    ahead_gap: Option<u64>,
    taken: u64,
}

impl Fcast {
    /// The order over `plan` (segments of `item` laid out by `layout`),
    /// shuffles from `rng`, symbols from `encoders` (spans of at most
    /// `span_bytes` if they can neither keep nor stream the item).
    pub fn new(
        item: ItemId,
        plan: &[Segment],
        layout: &Layout,
        span_bytes: u64,
        rng: Rng,
        mut encoders: EncoderCache,
    ) -> Self {
        let lens: Vec<u32> = plan.iter().map(|s| s.esis_len()).collect();
        let fit = encoders.fit(item, layout);
        let mut spans = Vec::new();
        let (mut from, mut bytes) = (0, 0u64);
        for (i, s) in plan.iter().enumerate() {
            let b = layout.block_len(s.block);
            if fit == Fit::Spans && i > from && bytes + b > span_bytes {
                spans.push(from..i);
                (from, bytes) = (i, 0);
            }
            bytes += b;
        }
        if from < plan.len() {
            spans.push(from..plan.len());
        }
        let mut f = Fcast {
            spans,
            span: 0,
            prepare: (fit == Fit::Kept).then_some(item),
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
        let Some(span) = self.spans.get(self.span) else {
            return;
        };
        let round = self.round;
        self.order = span.clone().filter(|&s| self.lens[s] > round).collect();
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
                // The span is done (the cache's budget lets its encoders
                // go as the next span's come in).
                self.span += 1;
                self.round = 0;
                if self.span >= self.spans.len() {
                    return None;
                }
                self.fill_round();
            }
        }
    }

    /// The next planned (segment, position), moving on; `None` at the end.
    pub fn next(&mut self) -> Option<(usize, u32)> {
        let p = self.pending?;
        self.pending = self.advance();
        self.taken += 1;
        if let Some(item) = self.prepare.filter(|_| self.taken % self.prepare_gap == 0) {
            // On another thread if the driver runs jobs, else here.
            if self.encoders.offloads() {
                self.encoders.offer_next_job(item);
            } else {
                self.encoders.prepare_one(item);
            }
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

    /// How many planned symbols of each segment have been taken, in plan
    /// order: all of a span done, none of one to come, and in the current
    /// span the round's (one more for a segment this round has passed).
    pub fn taken_per_segment(&self) -> Vec<u32> {
        let Some((next, round)) = self.pending else {
            return self.lens.clone();
        };
        let mut ahead = vec![false; self.lens.len()];
        for &s in self.order.iter().chain([&next]) {
            if let Some(a) = ahead.get_mut(s) {
                *a = true;
            }
        }
        let mut taken = vec![0; self.lens.len()];
        for (i, span) in self.spans.iter().enumerate() {
            for s in span.clone() {
                let len = self.lens.get(s).copied().unwrap_or(0);
                taken[s] = match i.cmp(&self.span) {
                    std::cmp::Ordering::Less => len,
                    std::cmp::Ordering::Greater => 0,
                    std::cmp::Ordering::Equal => (round + u32::from(!ahead[s])).min(len),
                };
            }
        }
        taken
    }

    /// Ends the pass now.
    pub fn cancel(&mut self) {
        self.pending = None;
        self.order.clear();
    }
}
