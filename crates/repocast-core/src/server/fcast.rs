//! Fcast sending order for push-mode passes (SPEC 3.6).
//!
//! A pass plans some symbols of every block of an item. Instead of one
//! block after another, round r sends the r-th planned symbol of every
//! block, in an order shuffled afresh each round, so periodic loss does
//! not always hit the same block and a receiver that tunes in anywhere
//! gains on every block at the same pace. The blocks are taken in spans
//! of at most `span_bytes` of item data, every round of one span before
//! the next: the encoders of one span are all the server holds of an
//! item (a file of any size is sent in bounded memory). The server's
//! [`super::transmission::Transmission`] asks this order which planned
//! symbol comes next.

use super::transmission::Segment;
use crate::fec::BlockEncoder;
use crate::fec::layout::Layout;
use crate::rng::Rng;
use std::collections::HashMap;
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
    /// Encoders of the span on air, by block.
    pub encoders: HashMap<u32, Box<dyn BlockEncoder>>,
}

impl Fcast {
    /// The order over `plan` (segments of one item laid out by `layout`),
    /// spans of at most `span_bytes`, shuffles from `rng`.
    pub fn new(plan: &[Segment], layout: &Layout, span_bytes: u64, rng: Rng) -> Self {
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
        let mut f = Fcast {
            spans,
            span: 0,
            round: 0,
            order: Vec::new(),
            lens: plan.iter().map(|s| s.esis_len()).collect(),
            rng,
            pending: None,
            encoders: HashMap::new(),
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
                // The span is done: its encoders go.
                self.span += 1;
                self.round = 0;
                self.encoders.clear();
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
        self.encoders.clear();
    }
}
