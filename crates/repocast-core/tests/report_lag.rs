//! A receiver whose reports come late is waited for, not sent its items
//! again (`server::lag`): the server learns how late each receiver's
//! reports come and waits that long, up to `report_timeout_max`; a
//! receiver that reports on time, or a server without the cap (the
//! study's setting), keeps the fixed wait.

use repocast_core::server::Server;
use repocast_core::wire::{AnnounceKind, ClientMsg, ItemSel, ServerMsg};
use repocast_core::{ClientId, Instant, ItemId, TransmissionId};
use std::time::Duration;

#[allow(dead_code)] // not every test file uses every helper
mod common;
use common::{drain, nak_whole, small_items};

const CAP: Duration = Duration::from_secs(10);

/// Three items of 640 bytes (10 packets each, one a millisecond), FEC
/// off, accounting mode; the fixed wait is the NAK window (210 ms) plus
/// 2 s.
fn server(cap: Option<Duration>) -> Server {
    budgeted_server(cap, None)
}

/// [`server`], with a repair budget.
fn budgeted_server(cap: Option<Duration>, budget: Option<u32>) -> Server {
    small_items(3, |c| {
        c.report_timeout_max = cap;
        c.repair_budget = budget;
    })
}

/// One client asks for all three items at 0; they are sent, one after
/// the other. Returns the client, when the last one ended, and each
/// item's transmission.
fn send_all(s: &mut Server) -> (ClientId, Instant, Vec<(ItemId, TransmissionId)>) {
    let c = s.handle_connect(Instant::ZERO);
    let items = (0..3).map(|i| ItemSel::Id(ItemId(i))).collect();
    s.handle_client_msg(Instant::ZERO, c, ClientMsg::Request { items });
    let (mut now, mut ends, mut sent) = (Instant::ZERO, Vec::new(), Vec::new());
    while ends.len() < 3 {
        let (ann, _, _) = drain(s, now);
        for a in ann.iter().filter(|a| a.kind == AnnounceKind::End) {
            if !sent.contains(&(a.item, a.transmission)) {
                sent.push((a.item, a.transmission));
                ends.push(now);
            }
        }
        now = now + Duration::from_millis(1);
        assert!(
            now < Instant::from_millis(1_000),
            "all three sent in a second"
        );
    }
    (c, now, sent)
}

fn done(item: ItemId, t: TransmissionId) -> ClientMsg {
    ClientMsg::ItemDone {
        item,
        transmission: t,
        received: 10,
        expected: 10,
    }
}

/// Runs the server's timers from `from` to `to`, a millisecond apart.
fn run_timers(s: &mut Server, from: Instant, to: Instant) {
    let mut now = from;
    while now <= to {
        s.handle_timeout(now);
        drain(s, now);
        now = now + Duration::from_millis(1);
    }
}

/// [`send_all`], then the receiver's first report, on the first item,
/// comes 1.5 s after the last item went out: within the fixed wait
/// (2.21 s), but it says this receiver is behind. Returns the client,
/// when the last item ended, when the report came, and the items'
/// transmissions.
fn first_report_late(
    s: &mut Server,
) -> (ClientId, Instant, Instant, Vec<(ItemId, TransmissionId)>) {
    let (c, t0, sent) = send_all(s);
    let late = t0 + Duration::from_millis(1_500);
    run_timers(s, t0, late);
    s.handle_client_msg(late, c, done(sent[0].0, sent[0].1));
    (c, t0, late, sent)
}

#[test]
fn a_receiver_that_reports_late_is_waited_for() {
    let mut s = server(Some(CAP));
    let (c, t0, late, sent) = first_report_late(&mut s);
    // Past the fixed wait, the other two are not counted missing...
    let after = t0 + Duration::from_millis(3_000);
    run_timers(&mut s, late, after);
    assert_eq!(s.stats().report_timeouts, 0);
    assert_eq!(s.queue_len(), 0, "nothing sent again");
    // ...and their reports, when they come, end the request.
    s.handle_client_msg(after, c, done(sent[1].0, sent[1].1));
    s.handle_client_msg(after, c, done(sent[2].0, sent[2].1));
    run_timers(&mut s, after, after + CAP + CAP);
    assert_eq!(s.stats().report_timeouts, 0);
    assert_eq!(s.queue_len(), 0);
    assert_eq!(s.poll_timeout(), None, "nothing owed, nothing to send");
}

#[test]
fn a_late_receiver_that_stays_silent_is_counted_missing_by_the_cap() {
    let mut s = server(Some(CAP));
    let (_, t0, late, _) = first_report_late(&mut s);
    // It never reports on the other two: they are sent again once its
    // own wait (twice its lateness plus four deviations: 6 s) has
    // passed, never later than the cap.
    run_timers(&mut s, late, t0 + Duration::from_millis(5_500));
    assert_eq!(s.stats().report_timeouts, 0);
    run_timers(&mut s, t0 + Duration::from_millis(5_501), t0 + CAP);
    assert_eq!(s.stats().report_timeouts, 2);
    assert!(s.stats().transmissions > 3, "sent again");
}

#[test]
fn without_the_cap_or_for_a_receiver_on_time_the_wait_is_fixed() {
    // The study's setting: the same late receiver is counted missing at
    // the fixed wait.
    let mut s = server(None);
    let (_, t0, late, _) = first_report_late(&mut s);
    run_timers(&mut s, late, t0 + Duration::from_millis(2_300));
    assert_eq!(s.stats().report_timeouts, 2);
    // With the cap, a receiver whose first report was on time is counted
    // missing at the fixed wait too.
    let mut s = server(Some(CAP));
    let (c, t0, sent) = send_all(&mut s);
    s.handle_client_msg(t0, c, done(sent[2].0, sent[2].1));
    run_timers(&mut s, t0, t0 + Duration::from_millis(2_300));
    assert_eq!(s.stats().report_timeouts, 2);
}

/// Runs the server a millisecond at a time from `from` to `to`: its
/// timers, then everything it sends. Returns each transmission that ended
/// (with when) and every control message.
fn run(
    s: &mut Server,
    from: Instant,
    to: Instant,
) -> (Vec<(TransmissionId, Instant)>, Vec<ServerMsg>) {
    let (mut now, mut ends, mut ctl) = (from, Vec::new(), Vec::new());
    while now <= to {
        s.handle_timeout(now);
        let (ann, msgs, _) = drain(s, now);
        for a in ann.iter().filter(|a| a.kind == AnnounceKind::End) {
            if !ends.iter().any(|&(t, _)| t == a.transmission) {
                ends.push((a.transmission, now));
            }
        }
        ctl.extend(msgs.into_iter().map(|(_, m)| m));
        now = now + Duration::from_millis(1);
    }
    (ends, ctl)
}

/// The shipped repair budget's limit on sends in a row without a report.
const BUDGET: u32 = repocast_core::profile::REPAIR_BUDGET;

fn budgeted() -> Server {
    budgeted_server(Some(CAP), Some(BUDGET))
}

fn failures(ctl: &[ServerMsg]) -> Vec<(Option<ItemId>, String)> {
    ctl.iter()
        .filter_map(|m| match m {
            ServerMsg::Failed { item, reason, .. } => Some((*item, reason.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_client_that_never_reports_is_sent_each_item_at_most_the_budget_then_told() {
    let mut s = budgeted();
    let c = s.handle_connect(Instant::ZERO);
    let items = (0..3).map(|i| ItemSel::Id(ItemId(i))).collect();
    s.handle_client_msg(Instant::ZERO, c, ClientMsg::Request { items });
    // It says nothing, ever. Each item goes out the budget's number of
    // times (a wait of 2.21 s after each), then fails for it with a
    // reason, and the server goes quiet: no loop.
    let end = Instant::from_millis(120_000);
    let (ends, ctl) = run(&mut s, Instant::ZERO, end);
    assert_eq!(ends.len(), 3 * BUDGET as usize, "{ends:?}");
    let failed = failures(&ctl);
    assert_eq!(failed.len(), 3, "{failed:?}");
    for (item, reason) in &failed {
        assert!(item.is_some());
        assert!(reason.contains("no report from this client"), "{reason}");
    }
    assert_eq!(s.stats().unreported_failures, 3);
    assert_eq!(s.stats().report_timeouts, 3 * u64::from(BUDGET));
    assert_eq!(s.poll_timeout(), None, "nothing owed, nothing to send");
    // Without a budget (the study's setting) it is sent again for as long
    // as it stays connected.
    let mut s = server(Some(CAP));
    let c = s.handle_connect(Instant::ZERO);
    let items = vec![ItemSel::Id(ItemId(0))];
    s.handle_client_msg(Instant::ZERO, c, ClientMsg::Request { items });
    let (ends, ctl) = run(&mut s, Instant::ZERO, end);
    assert!(ends.len() > 2 * BUDGET as usize, "{}", ends.len());
    assert!(failures(&ctl).is_empty());
}

#[test]
fn a_report_even_a_late_one_starts_the_count_of_silent_sends_again() {
    let mut s = budgeted();
    let c = s.handle_connect(Instant::ZERO);
    let item = ItemId(0);
    let items = vec![ItemSel::Id(item)];
    s.handle_client_msg(Instant::ZERO, c, ClientMsg::Request { items });
    // It misses the report on budget - 1 sends in a row...
    let mut now = Instant::ZERO;
    let mut ends = Vec::new();
    while ends.len() < BUDGET as usize - 1 {
        let next = now + Duration::from_millis(100);
        ends.extend(run(&mut s, now, next).0);
        now = next + Duration::from_millis(1);
    }
    // ...then reports on the last of them, after its wait ran out (that
    // send has been counted missing and the item queued again).
    let (last, _) = *ends.last().expect("a send");
    let (more, _) = run(&mut s, now, now + Duration::from_millis(2_500));
    now = now + Duration::from_millis(2_501);
    s.handle_client_msg(now, c, nak_whole(last, item));
    // Silent again, it gets up to budget more sends before the item fails:
    // well past the budget in all.
    let (after, ctl) = run(&mut s, now, now + Duration::from_millis(120_000));
    let sends = ends.len() + more.len() + after.len();
    assert!(sends > BUDGET as usize + 4, "{sends}");
    let failed = failures(&ctl);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(s.stats().unreported_failures, 1);
}
