//! The request window (`server::window`): the server works on at most
//! half of `request_window` of one client's items at a time in the order
//! asked, the rest waiting their turn, so a receiver of thousands of
//! small files is never sent more than it can take in; the other half is
//! for joining sends that others cause of items it waits for. A request
//! within half the window, or another client's, is served as without
//! one.

use repocast_core::server::Server;
use repocast_core::wire::{AnnounceKind, ClientMsg, ItemSel, ServerMsg};
use repocast_core::{ClientId, Instant, ItemId, TransmissionId};
use std::time::Duration;

#[allow(dead_code)] // not every test file uses every helper
mod common;
use common::{drain, nak_whole, small_items};

const ITEMS: u32 = 10;

/// Ten items of 640 bytes (10 packets each, one a millisecond), FEC off,
/// accounting mode, with the given window and repair budget.
fn server(window: Option<u32>, budget: Option<u32>) -> Server {
    small_items(ITEMS, |c| {
        c.request_window = window;
        c.repair_budget = budget;
    })
}

fn ask(s: &mut Server, now: Instant, items: impl IntoIterator<Item = u32>) -> ClientId {
    let c = s.handle_connect(now);
    let items = items.into_iter().map(|i| ItemSel::Id(ItemId(i))).collect();
    s.handle_client_msg(now, c, ClientMsg::Request { items });
    c
}

/// What a millisecond of the server brought: the transmissions that
/// ended, and the control messages, per client.
#[derive(Default)]
struct Log {
    ends: Vec<(ItemId, TransmissionId)>,
    ctl: Vec<(ClientId, ServerMsg)>,
    /// Items each reporter reported done.
    reported: Vec<(ClientId, ItemId)>,
}

impl Log {
    fn manifests(&self, c: ClientId) -> Vec<ItemId> {
        self.listens(c).into_iter().map(|(i, _)| i).collect()
    }

    /// The items whose manifest `c` was sent, and the first transmission
    /// of each it listens to.
    fn listens(&self, c: ClientId) -> Vec<(ItemId, TransmissionId)> {
        (self.ctl.iter())
            .filter_map(|(to, m)| match m {
                ServerMsg::Manifest {
                    entry,
                    next_transmission,
                } if *to == c => Some((entry.item, *next_transmission)),
                _ => None,
            })
            .collect()
    }

    fn dones(&self, c: ClientId) -> usize {
        (self.ctl.iter())
            .filter(|(to, m)| *to == c && matches!(m, ServerMsg::Done))
            .count()
    }
}

/// Runs the server a millisecond at a time from `from` for `ms`; each
/// transmission that ends is reported done at once by each of
/// `reporters` that listens to it (it was sent the item's manifest
/// naming it or an earlier one).
fn run(s: &mut Server, from: Instant, ms: u64, reporters: &[ClientId], log: &mut Log) {
    for i in 0..ms {
        let now = from + Duration::from_millis(i);
        s.handle_timeout(now);
        let (ann, ctl, _) = drain(s, now);
        log.ctl.extend(ctl);
        for a in ann.iter().filter(|a| a.kind == AnnounceKind::End) {
            if log.ends.contains(&(a.item, a.transmission)) {
                continue;
            }
            log.ends.push((a.item, a.transmission));
            let listening: Vec<ClientId> = (reporters.iter().copied())
                .filter(|&c| {
                    !log.reported.contains(&(c, a.item))
                        && (log.listens(c).iter()).any(|&(i, t)| i == a.item && t <= a.transmission)
                })
                .collect();
            for c in listening {
                log.reported.push((c, a.item));
                let done = ClientMsg::ItemDone {
                    item: a.item,
                    transmission: a.transmission,
                    received: 10,
                    expected: 10,
                };
                s.handle_client_msg(now, c, done);
            }
        }
    }
}

#[test]
fn a_client_is_sent_at_most_the_window_of_its_items_at_a_time_in_the_order_asked() {
    let mut s = server(Some(6), None);
    let c = ask(&mut s, Instant::ZERO, 0..ITEMS);
    let mut log = Log::default();
    // It never reports: only the first three items are started, however
    // long it takes.
    run(&mut s, Instant::ZERO, 200, &[], &mut log);
    assert_eq!(log.manifests(c), [ItemId(0), ItemId(1), ItemId(2)]);
    let sent: Vec<ItemId> = log.ends.iter().map(|e| e.0).collect();
    assert_eq!(sent, [ItemId(0), ItemId(1), ItemId(2)]);
    // Its reports, when they come, let the rest in, in the order asked,
    // until all ten are done; the request is done once, at the end.
    let mut s = server(Some(6), None);
    let c = ask(&mut s, Instant::ZERO, 0..ITEMS);
    let mut log = Log::default();
    run(&mut s, Instant::ZERO, 400, &[c], &mut log);
    let order: Vec<ItemId> = (0..ITEMS).map(ItemId).collect();
    assert_eq!(log.manifests(c), order);
    assert_eq!(log.ends.len(), ITEMS as usize, "each sent once");
    assert_eq!(log.dones(c), 1);
    assert_eq!(s.stats().items_done, u64::from(ITEMS));
}

#[test]
fn a_request_within_the_window_and_other_clients_are_served_as_without_one() {
    // The same two requests with a window of six (three in order) and with none: the
    // same messages and the same transmissions, millisecond by
    // millisecond.
    let trace = |window| {
        let mut s = server(window, None);
        let a = ask(&mut s, Instant::ZERO, [4, 1, 7]);
        let mut log = Log::default();
        run(&mut s, Instant::ZERO, 5, &[a], &mut log);
        let b = ask(&mut s, Instant::from_millis(5), [7, 2]);
        run(&mut s, Instant::from_millis(5), 100, &[a], &mut log);
        (log.ends, log.ctl, a, b)
    };
    let with = trace(Some(6));
    let without = trace(None);
    assert_eq!(with.0, without.0);
    assert_eq!(with.1, without.1);
    let (a, b) = (with.2, with.3);
    let log = Log {
        ends: with.0,
        ctl: with.1,
        ..Log::default()
    };
    assert_eq!(log.manifests(a), [ItemId(4), ItemId(1), ItemId(7)]);
    assert_eq!(log.manifests(b), [ItemId(7), ItemId(2)]);
    // A client whose window is full in the order it asked does not hold
    // back another's request, and joins its send of an item it waits for.
    let mut s = server(Some(4), None);
    let big = ask(&mut s, Instant::ZERO, 0..ITEMS);
    let small = ask(&mut s, Instant::ZERO, [9]);
    let mut log = Log::default();
    run(&mut s, Instant::ZERO, 60, &[], &mut log);
    assert_eq!(log.manifests(big), [ItemId(0), ItemId(1), ItemId(9)]);
    assert_eq!(log.manifests(small), [ItemId(9)]);
    let nines: Vec<_> = log.ends.iter().filter(|e| e.0 == ItemId(9)).collect();
    assert_eq!(
        nines.len(),
        1,
        "one send of item 9 for both: {:?}",
        log.ends
    );
}

#[test]
fn an_item_that_fails_for_a_client_makes_room_for_the_next() {
    // A client that never reports: each item in its window fails for it
    // after the budget's sends (here 2), and the next comes in, until
    // every item has ended, each with a reason; then the server is quiet.
    let mut s = server(Some(4), Some(2));
    let c = ask(&mut s, Instant::ZERO, 0..ITEMS);
    let mut log = Log::default();
    run(&mut s, Instant::ZERO, 60_000, &[], &mut log);
    let order: Vec<ItemId> = (0..ITEMS).map(ItemId).collect();
    assert_eq!(log.manifests(c), order);
    let failed = (log.ctl.iter())
        .filter(|(_, m)| matches!(m, ServerMsg::Failed { item: Some(_), .. }))
        .count();
    assert_eq!(failed, ITEMS as usize);
    assert_eq!(log.ends.len(), 2 * ITEMS as usize);
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn a_client_asking_a_moment_later_joins_the_sends_of_what_the_first_is_at() {
    // Both ask for all ten, the second once the first is three items in;
    // both report every send they listen to. With the window, the second
    // joins the first's sends of items it still has waiting, and its own
    // first items go alone: fewer sends than one series each.
    let mut s = server(Some(4), None);
    let a = ask(&mut s, Instant::ZERO, 0..ITEMS);
    let mut log = Log::default();
    run(&mut s, Instant::ZERO, 25, &[a], &mut log);
    assert_eq!(log.ends.len(), 2, "{:?}", log.ends);
    let b = ask(&mut s, Instant::from_millis(25), 0..ITEMS);
    run(&mut s, Instant::from_millis(25), 2_000, &[a, b], &mut log);
    assert_eq!(s.stats().items_done, 2 * u64::from(ITEMS), "both complete");
    assert_eq!(log.dones(a), 1);
    assert_eq!(log.dones(b), 1);
    let sends = log.ends.len();
    assert!(sends <= ITEMS as usize + 4, "{sends} sends: {:?}", log.ends);
    // The second joined sends of items that were not the first two it
    // asked for (its own order's room was full).
    let joined = (log.listens(b).iter()).filter(|&&(i, _)| i.0 >= 2).count();
    assert!(joined >= 4, "{:?}", log.listens(b));
}

#[test]
fn an_item_refused_before_its_turn_is_never_started() {
    // A client NAKs an item still waiting its turn, past the repair
    // budget: it fails for it at once, and is not started when its turn
    // would have come.
    let mut s = server(Some(2), Some(2));
    let c = ask(&mut s, Instant::ZERO, 0..3);
    let nak = nak_whole(TransmissionId(0), ItemId(2));
    for _ in 0..3 {
        s.handle_client_msg(Instant::ZERO, c, nak.clone());
    }
    assert_eq!(s.stats().over_budget, 1);
    let mut log = Log::default();
    run(&mut s, Instant::ZERO, 1_000, &[c], &mut log);
    assert_eq!(log.manifests(c), [ItemId(0), ItemId(1)]);
    let sent: Vec<ItemId> = log.ends.iter().map(|e| e.0).collect();
    assert_eq!(sent, [ItemId(0), ItemId(1)]);
}
