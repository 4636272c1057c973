//! Push-mode schedulers: cycle the whole catalogue, no back channel.
//!
//! MAD sends the document with the largest (s_i + 1)^2 p_i, s_i the time
//! since it was last sent in packet slots (documents differ in length);
//! with equal p_i it degenerates into a flat cycle. [`Flat`] sends every item once per cycle, in id order.

use super::{DemandTable, Scheduler};
use crate::{Instant, ItemId};

/// Multi-disk-style scheduler by access probability.
#[derive(Debug, Clone)]
pub struct Mad {
    weights: Vec<f64>,
}

impl Mad {
    /// `weights[i]` is p_i; items without a weight get the mean weight.
    pub fn new(weights: Vec<f64>) -> Self {
        Mad { weights }
    }
}

impl Scheduler for Mad {
    fn select(&mut self, t: &DemandTable, _now: Instant) -> Option<ItemId> {
        let n = t.item_count();
        let mean = if self.weights.is_empty() {
            1.0
        } else {
            self.weights.iter().sum::<f64>() / self.weights.len() as f64
        };
        let mut top: Option<(f64, ItemId)> = None;
        for i in 0..n {
            let item = ItemId(i);
            // Never sent: as if sent just before the start, lower ids
            // first (older than anything sent since).
            let s = (t.since_sent(item)).unwrap_or(t.slots() + n as u64 - i as u64) as f64;
            let p = self.weights.get(i as usize).copied().unwrap_or(mean);
            let score = (s + 1.0) * (s + 1.0) * p;
            if top.is_none_or(|(b, _)| score > b) {
                top = Some((score, item));
            }
        }
        top.map(|(_, i)| i)
    }
}

/// Flat carousel: items in id order, forever.
#[derive(Debug, Clone, Default)]
pub struct Flat {
    next: u32,
}

impl Scheduler for Flat {
    fn select(&mut self, t: &DemandTable, _now: Instant) -> Option<ItemId> {
        let n = t.item_count();
        if n == 0 {
            return None;
        }
        let item = ItemId(self.next % n);
        self.next = (self.next + 1) % n;
        Some(item)
    }
}
