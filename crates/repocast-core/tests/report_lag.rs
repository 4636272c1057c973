//! A receiver whose reports come late is waited for, not sent its items
//! again (`server::lag`): the server learns how late each receiver's
//! reports come and waits that long, up to `report_timeout_max`; a
//! receiver that reports on time, or a server without the cap (the
//! study's setting), keeps the fixed wait.

use repocast_core::fec::CodeKind;
use repocast_core::server::{ItemInfo, Server, ServerConfig};
use repocast_core::wire::{AnnounceKind, ClientMsg, ItemSel};
use repocast_core::{ClientId, Instant, ItemId, TransmissionId};
use std::time::Duration;

#[allow(dead_code)] // not every test file uses every helper
mod common;
use common::drain;

const CAP: Duration = Duration::from_secs(10);

/// Three items of 640 bytes (10 packets each, one a millisecond), FEC
/// off, accounting mode; the fixed wait is the NAK window (210 ms) plus
/// 2 s.
fn server(cap: Option<Duration>) -> Server {
    let cfg = ServerConfig {
        scheme: "FEC(0)+R(inf)".parse().expect("scheme"),
        code: CodeKind::RaptorQ,
        symbol_size: 64,
        max_block_symbols: 100,
        packet_interval: Duration::from_millis(1),
        payloads: false,
        report_timeout_max: cap,
        ..ServerConfig::default()
    };
    let items = (0..3)
        .map(|i| ItemInfo {
            name: format!("f{i}"),
            size: 640,
            hash: [0; 32],
            block_hashes: vec![],
        })
        .collect();
    Server::new(cfg, items).expect("server")
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
