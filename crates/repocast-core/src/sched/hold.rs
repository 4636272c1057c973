//! The batching hold (`serve --batch-hold MS`,
//! [`crate::server::ServerConfig::batch_hold`]): on a busy server, items
//! just asked for wait behind items asked for long ago.
//!
//! Without it the server is work-conserving and the scheduler (R/Q by
//! default) alone picks what goes next: under sustained load it keeps
//! choosing the items with the most requests per byte, and a request for
//! an unpopular item can wait a long time (the tail of delays). Holding an
//! item back a little lets more requests for it arrive and share one
//! transmission ("batching", as video-on-demand servers do), and lets the
//! items waiting longest go first.
//!
//! The rule: an item becomes eligible once its oldest request has waited
//! `min(cap, HOLD_SHARE x the one-copy link time of the other waiting
//! items)`. So a request alone is never held (nothing else waits), an
//! item waits longer the more work is queued beside it, and never more
//! than `cap`. The scheduler chooses among the eligible items only.
//!
//! Two settings around the rule, both in the server:
//! - the gate ([`crate::server::ServerConfig::batch_hold_after`]): the
//!   rule applies only once the server has had work without a break for
//!   that long, so light load and a burst on an idle server are served
//!   exactly as without it;
//! - idling ([`crate::server::ServerConfig::batch_hold_idle`]): when every
//!   waiting item is held, the link idles until the first hold ends (fewer
//!   bytes, more delay); without it (as shipped) the scheduler's best goes
//!   anyway, and the link never idles while anyone waits.
//!
//! Repairs are never held. What each setting costs and gains is measured
//! in `docs/benchmarks.md`.

use super::DemandTable;
use crate::Instant;
use std::collections::BTreeSet;
use std::time::Duration;

/// The share of the other waiting items' one-copy link time an item is
/// held for (before the cap).
pub const HOLD_SHARE: f64 = 0.75;

/// Marks in `table` the waiting items still held at `now` (the scheduler
/// skips them) and returns when the earliest of those holds ends, or
/// `None` if no item is held. An item's one-copy link time is
/// [`DemandTable::link_ns`]: its packets by their bytes on the wire.
pub fn apply(table: &mut DemandTable, cap: Duration, now: Instant) -> Option<Instant> {
    // A hold ends at most `cap` after the item's oldest request: once the
    // latest request is that old, nothing is held, and only the items
    // asked for within `cap` are looked at (when thousands of small files
    // wait, a pass over all of them per send was most of a server's time).
    if table.latest_request().is_none_or(|l| l + cap <= now) {
        table.set_held(BTreeSet::new());
        return None;
    }
    let total = Duration::from_nanos(table.active_link_ns());
    let mut held = BTreeSet::new();
    let mut wake: Option<Instant> = None;
    for (oldest, item) in table.requested_since(now.saturating_sub(cap)) {
        let own = Duration::from_nanos(table.link_ns(item));
        let others = total.saturating_sub(own).mul_f64(HOLD_SHARE);
        let due = oldest + others.min(cap);
        if due > now {
            held.insert(item);
            wake = Some(wake.map_or(due, |w| w.min(due)));
        }
    }
    table.set_held(held);
    wake
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::QKey;
    use crate::{ClientId, ItemId};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn at(n: u64) -> Instant {
        Instant::ZERO + ms(n)
    }

    /// `n` milliseconds of link time, in nanoseconds.
    fn ns(n: u64) -> u64 {
        n * 1_000_000
    }

    #[test]
    fn a_lone_request_is_never_held() {
        let mut t = DemandTable::new(4, QKey::Count);
        t.set_link_times(vec![ns(800); 4], false);
        t.add_wait(ClientId(1), ItemId(2), at(0));
        assert_eq!(apply(&mut t, ms(4000), at(0)), None);
        assert_eq!(t.eligible().collect::<Vec<_>>(), vec![ItemId(2)]);
    }

    #[test]
    fn nothing_is_held_once_the_latest_request_is_a_cap_old() {
        let mut t = DemandTable::new(4, QKey::Count);
        t.add_wait(ClientId(1), ItemId(0), at(0));
        t.add_wait(ClientId(2), ItemId(1), at(100));
        t.set_link_times(vec![ns(2000); 4], false);
        // Item 1 is held until 100 + min(0.75 x 2,000, 1,000).
        assert_eq!(apply(&mut t, ms(1000), at(500)), Some(at(1000)));
        assert_eq!(t.latest_request(), Some(at(100)));
        assert_eq!(apply(&mut t, ms(1000), at(1100)), None);
        assert_eq!(t.eligible().count(), 2);
    }

    #[test]
    fn items_wait_for_a_share_of_the_others_up_to_the_cap() {
        let mut t = DemandTable::new(4, QKey::Count);
        // Item 0 (400 ms a copy) and item 1 (2,000 ms) asked for at 0.
        t.add_wait(ClientId(1), ItemId(0), at(0));
        t.add_wait(ClientId(2), ItemId(1), at(0));
        t.set_link_times(vec![ns(400), ns(2000), 0, 0], false);
        // Item 0 waits 0.75 x 2,000 = 1,500 ms, item 1 0.75 x 400 = 300.
        assert_eq!(apply(&mut t, ms(4000), at(0)), Some(at(300)));
        assert_eq!(t.eligible().count(), 0);
        assert_eq!(apply(&mut t, ms(4000), at(300)), Some(at(1500)));
        assert_eq!(t.eligible().collect::<Vec<_>>(), vec![ItemId(1)]);
        assert_eq!(apply(&mut t, ms(4000), at(1500)), None);
        assert_eq!(t.eligible().count(), 2);
        // A 1 s cap bounds the longer hold.
        assert_eq!(apply(&mut t, ms(1000), at(0)), Some(at(300)));
        assert_eq!(apply(&mut t, ms(1000), at(300)), Some(at(1000)));
    }

    #[test]
    fn the_hold_counts_from_the_oldest_request() {
        let mut t = DemandTable::new(4, QKey::Count);
        t.add_wait(ClientId(1), ItemId(0), at(0));
        t.add_wait(ClientId(2), ItemId(1), at(900));
        t.add_wait(ClientId(3), ItemId(0), at(950));
        t.set_link_times(vec![ns(1000); 4], false);
        // Item 0's hold (750 ms) ran out at 750 ms; item 1's ends at 1,650.
        assert_eq!(apply(&mut t, ms(4000), at(1000)), Some(at(1650)));
        assert_eq!(t.eligible().collect::<Vec<_>>(), vec![ItemId(0)]);
    }
}
