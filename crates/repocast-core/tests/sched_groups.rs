//! The demand table's indexes (groups of items with the same waiters, the
//! items by oldest request, the waiting link time) give every answer exactly
//! as a scan over every waiting item does, over random histories of waits,
//! removals, fills, sizes and holds.

use proptest::prelude::*;
use repocast_core::sched::scores::{best, best_of_groups};
use repocast_core::sched::{DemandTable, QKey};
use repocast_core::{ClientId, Instant, ItemId};
use std::collections::BTreeSet;

const ITEMS: u32 = 12;

#[derive(Debug, Clone)]
enum Op {
    Wait(u32, Vec<u32>, u64),
    Done(u32, u32),
    Leave(u32),
    Fill(u32, f64),
    Hold(Vec<u32>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..6u32, prop::collection::vec(0..ITEMS + 1, 1..5), 0..100u64)
            .prop_map(|(c, i, t)| Op::Wait(c, i, t)),
        3 => (0..6u32, 0..ITEMS).prop_map(|(c, i)| Op::Done(c, i)),
        1 => (0..6u32).prop_map(Op::Leave),
        1 => (0..6u32, 0.01..1.0f64).prop_map(|(c, f)| Op::Fill(c, f)),
        1 => prop::collection::vec(0..ITEMS, 0..4).prop_map(Op::Hold),
    ]
}

/// Symbols waited for by a client not among `item`'s waiters, item by item.
fn others_by_scan(t: &DemandTable, item: ItemId) -> Option<u64> {
    let mine = t.waiters(item);
    let others: Vec<ItemId> = (t.active())
        .filter(|&i| i != item && !t.waiters(i).iter().all(|c| mine.contains(c)))
        .collect();
    (!others.is_empty()).then(|| others.iter().map(|&i| t.link_ns(i)).sum())
}

proptest! {
    #[test]
    fn groups_answer_as_a_scan_of_every_item(
        fill_keys in any::<bool>(),
        ties in any::<bool>(),
        sizes_first in any::<bool>(),
        sizes in prop::collection::vec(0..5u64, ITEMS as usize),
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let mode = if fill_keys { QKey::CountOverFill } else { QKey::Count };
        let mut t = DemandTable::new(ITEMS, mode);
        if sizes_first {
            t.set_link_times(sizes.clone(), ties);
        }
        for (n, op) in ops.into_iter().enumerate() {
            match op {
                Op::Wait(c, items, at) => {
                    let items: Vec<ItemId> = items.into_iter().map(ItemId).collect();
                    t.add_waits(ClientId(c), &items, Instant::from_millis(at));
                }
                Op::Done(c, i) => t.remove_wait(ClientId(c), ItemId(i)),
                Op::Leave(c) => t.remove_client(ClientId(c)),
                Op::Fill(c, f) => t.set_fill(ClientId(c), f),
                Op::Hold(items) => t.set_held(items.into_iter().map(ItemId).collect::<BTreeSet<_>>()),
            }
            if !sizes_first && n == 10 {
                t.set_link_times(sizes.clone(), ties);
            }
            let rq = |i: ItemId| t.r(i) as f64 / t.q(i).unwrap_or(1.0).max(1e-9);
            prop_assert_eq!(best_of_groups(&t, rq), best(&t, rq));
            let r = |i: ItemId| f64::from(t.r(i));
            prop_assert_eq!(best_of_groups(&t, r), best(&t, r));
            let total: u64 = t.active().map(|i| t.link_ns(i)).sum();
            prop_assert_eq!(t.active_link_ns(), total);
            let since = Instant::from_millis(50);
            let mut recent: Vec<_> = (t.active())
                .filter_map(|i| Some((t.oldest_request(i)?, i)))
                .filter(|&(at, _)| at >= since)
                .collect();
            recent.sort();
            prop_assert_eq!(t.requested_since(since).collect::<Vec<_>>(), recent);
            for item in 0..ITEMS {
                let item = ItemId(item);
                prop_assert_eq!(t.link_time_waited_by_others(item, u64::MAX, usize::MAX), others_by_scan(&t, item));
                let active = t.active().any(|i| i == item);
                prop_assert_eq!(t.r(item) > 0, active);
            }
        }
    }
}
