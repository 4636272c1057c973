//! Request-mode schedulers: score every item with demand, send the best.
//!
//! R/Q (SPEC 3.1's default), R/(Q/fill), FIFO, most-requested and RxW. Each
//! is one scoring function over the [`DemandTable`]; [`best`] runs the scan
//! over every eligible item, [`best_of_groups`] over one per group of items
//! with the same waiters (for scores of R and Q alone), and both break ties
//! by the smallest item ([`DemandTable::tie_size`]), then the lowest id.

use super::{DemandTable, QKey, Scheduler};
use crate::{Instant, ItemId};

/// The eligible item with the largest score (ties: the smallest item,
/// then the lowest id).
pub fn best(table: &DemandTable, score: impl FnMut(ItemId) -> f64) -> Option<ItemId> {
    best_of(table, table.eligible(), score)
}

/// [`best`] for a score that depends only on who waits for an item (R,
/// Q): the same item, from one candidate per group of items with the same
/// waiters, so a client waiting for thousands of items costs one.
pub fn best_of_groups(table: &DemandTable, score: impl FnMut(ItemId) -> f64) -> Option<ItemId> {
    best_of(table, table.group_firsts(), score)
}

/// The candidate with the largest score; ties to the smallest item
/// ([`DemandTable::tie_size`]), then the lowest id, in whatever order the
/// candidates come.
fn best_of(
    table: &DemandTable,
    candidates: impl Iterator<Item = ItemId>,
    mut score: impl FnMut(ItemId) -> f64,
) -> Option<ItemId> {
    let mut top: Option<(f64, u64, ItemId)> = None;
    for item in candidates {
        let (s, size) = (score(item), table.tie_size(item));
        if top.is_none_or(|(b, z, i)| s > b || (s == b && (size < z || size == z && item < i))) {
            top = Some((s, size, item));
        }
    }
    top.map(|(_, _, i)| i)
}

fn r_over_q(table: &DemandTable, item: ItemId) -> f64 {
    table.r(item) as f64 / table.q(item).unwrap_or(1.0).max(1e-9)
}

/// Largest R_i / Q_i, Q_i = fewest outstanding items among the waiters.
#[derive(Debug, Clone, Copy, Default)]
pub struct RQ;

impl Scheduler for RQ {
    fn select(&mut self, t: &DemandTable, _now: Instant) -> Option<ItemId> {
        best_of_groups(t, |i| r_over_q(t, i))
    }
}

/// Largest R_i / (Q_i / fill): Q is the smallest expected completion time.
#[derive(Debug, Clone, Copy, Default)]
pub struct RQFill;

impl Scheduler for RQFill {
    fn q_key(&self) -> QKey {
        QKey::CountOverFill
    }
    fn select(&mut self, t: &DemandTable, _now: Instant) -> Option<ItemId> {
        best_of_groups(t, |i| r_over_q(t, i))
    }
}

/// The item of the oldest outstanding request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fifo;

impl Scheduler for Fifo {
    fn select(&mut self, t: &DemandTable, _now: Instant) -> Option<ItemId> {
        best(t, |i| {
            -(t.oldest_request(i).map_or(0, |x| x.as_micros()) as f64)
        })
    }
}

/// Largest R_i.
#[derive(Debug, Clone, Copy, Default)]
pub struct MostRequested;

impl Scheduler for MostRequested {
    fn select(&mut self, t: &DemandTable, _now: Instant) -> Option<ItemId> {
        best_of_groups(t, |i| t.r(i) as f64)
    }
}

/// Largest R_i x W_i, W_i = wait of the oldest outstanding request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rxw;

impl Scheduler for Rxw {
    fn select(&mut self, t: &DemandTable, now: Instant) -> Option<ItemId> {
        best(t, |i| {
            let w = t.oldest_request(i).map_or(0.0, |x| (now - x).as_secs_f64());
            // +1 µs so a fresh request still counts by R.
            t.r(i) as f64 * (w + 1e-6)
        })
    }
}
