//! Fcast sending order for push-mode passes (SPEC 3.6).
//!
//! A pass plans some symbols of every block of an item. Instead of one
//! block after another, round r sends the r-th planned symbol of every
//! block, in an order shuffled afresh each round, so periodic loss does
//! not always hit the same block and a receiver that tunes in anywhere
//! gains on every block at the same pace. The blocks are taken in spans
//! of at most `span_bytes` of item data, every round of one span before
//! the next, and the server keeps at most a span's worth of encoders
//! ([`super::encoders`]; a file of any size is sent in bounded memory).
//! When a whole item fits in one span, its encoders outlive the pass, and
//! the pass prepares them for the next one's repair symbols, one block
//! every half block of packets. The server's
//! [`super::transmission::Transmission`] asks this order which planned
//! symbol comes next.

use super::encoders::EncoderCache;
use super::transmission::Segment;
use crate::ItemId;
use crate::fec::layout::Layout;
use crate::rng::Rng;
use std::ops::Range;

/// The order of a pass in progress.
pub struct Fcast {
    /// Spans of consecutive segments, in plan order.
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
    /// Encoders of the span on air (and of earlier passes).
    pub encoders: EncoderCache,
    /// The item, whose encoders this pass prepares (None: it does not fit
    /// one span, so they would not outlive the pass).
    prepare: Option<ItemId>,
    /// Packets between two preparations (half the largest block's).
    prepare_gap: u64,
    taken: u64,
}

impl Fcast {
    /// The order over `plan` (segments of `item` laid out by `layout`),
    /// spans of at most `span_bytes`, shuffles from `rng`, encoders kept in
    /// `encoders`.
    pub fn new(
        item: ItemId,
        plan: &[Segment],
        layout: &Layout,
        span_bytes: u64,
        rng: Rng,
        encoders: EncoderCache,
    ) -> Self {
        let mut spans = Vec::new();
        let (mut from, mut bytes) = (0, 0u64);
        for (i, s) in plan.iter().enumerate() {
            let b = layout.block_len(s.block);
            if i > from && bytes + b > span_bytes {
                spans.push(from..i);
                (from, bytes) = (i, 0);
            }
            bytes += b;
        }
        if from < plan.len() {
            spans.push(from..plan.len());
        }
        let lens: Vec<u32> = plan.iter().map(|s| s.esis_len()).collect();
        let mut f = Fcast {
            prepare: (spans.len() == 1).then_some(item),
            prepare_gap: (lens.iter().copied().max().unwrap_or(0) as u64 / 2).max(1),
            taken: 0,
            spans,
            span: 0,
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
            self.encoders.prepare_one(item);
        }
        Some(p)
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
