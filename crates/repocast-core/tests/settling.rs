//! A NAK that needs nothing says the receiver holds what it needs of the
//! item and is checking it or putting it in place (`client::placing`; its
//! blocks out being decoded, session 61). The server then waits for its
//! done report, or a NAK for a block that failed, however long that
//! takes: it sets no report wait on the receiver for the item, whether
//! the NAK came while the transmission was on air or after its end, and
//! sends it nothing more. Before session 62, one that came while the
//! transmission was on air was taken as a hint, and the report then
//! counted missing at the end sent the item again to every receiver.

use repocast_core::server::Server;
use repocast_core::wire::{AnnounceKind, BlockNeed, ClientMsg, ItemSel, NakRepr};
use repocast_core::{BlockId, ClientId, Instant, ItemId, TransmissionId};
use std::time::Duration;

#[allow(dead_code)] // not every test file uses every helper
mod common;
use common::{drain, small_items};

fn nak(t: TransmissionId, item: ItemId, count: u32) -> ClientMsg {
    let needs = match count {
        0 => vec![],
        n => vec![BlockNeed {
            block: BlockId(0),
            count: n,
            missing: vec![],
        }],
    };
    ClientMsg::Nak(NakRepr {
        transmission: t,
        item,
        received: 0,
        expected: 0,
        needs,
    })
}

/// A server of one item of 10 packets (one a millisecond, fixed report
/// wait) and one client that asked for it at 0.
fn start() -> (Server, ClientId) {
    let mut s = small_items(1, |c| c.report_timeout_max = None);
    let c = s.handle_connect(Instant::ZERO);
    let items = vec![ItemSel::Id(ItemId(0))];
    s.handle_client_msg(Instant::ZERO, c, ClientMsg::Request { items });
    (s, c)
}

/// Runs timers and sends a millisecond at a time over `[from, to)`;
/// returns the kinds and transmissions announced, in order.
fn run(s: &mut Server, from: Instant, to: Instant) -> Vec<(AnnounceKind, TransmissionId)> {
    let mut seen = Vec::new();
    let mut now = from;
    while now < to {
        s.handle_timeout(now);
        let (ann, _, _) = drain(s, now);
        for a in ann {
            if !seen.contains(&(a.kind, a.transmission)) {
                seen.push((a.kind, a.transmission));
            }
        }
        now = now + Duration::from_millis(1);
    }
    seen
}

fn done(t: TransmissionId) -> ClientMsg {
    ClientMsg::ItemDone {
        item: ItemId(0),
        transmission: t,
        received: 10,
        expected: 10,
    }
}

#[test]
fn a_nak_needing_nothing_while_the_send_is_on_air_leaves_no_report_wait() {
    let (mut s, c) = start();
    let at = Instant::from_millis(5);
    let seen = run(&mut s, Instant::ZERO, at);
    let t = seen[0].1;
    assert_eq!(seen, [(AnnounceKind::First, t)], "on air");
    s.handle_client_msg(at, c, nak(t, ItemId(0), 0));
    // Long past the fixed wait (NAK window and report timeout: 2.21 s).
    let later = Instant::from_millis(10_000);
    let seen = run(&mut s, at, later);
    assert_eq!(seen, [(AnnounceKind::End, t)], "sent once: {seen:?}");
    let st = s.stats();
    assert_eq!(
        (st.report_timeouts, st.empty_naks, st.early_naks),
        (0, 1, 0)
    );
    assert_eq!(s.queue_len(), 0);
    // Its done report ends the request.
    s.handle_client_msg(later, c, done(t));
    assert_eq!(s.stats().items_done, 1);
    drain(&mut s, later);
    assert_eq!(s.poll_timeout(), None, "nothing owed, nothing to send");
}

#[test]
fn without_it_the_report_is_counted_missing_and_the_item_sent_again() {
    // The same run with no NAK: what the one above is spared.
    let (mut s, _) = start();
    let seen = run(&mut s, Instant::ZERO, Instant::from_millis(10_000));
    assert!(seen.len() > 2, "sent again: {seen:?}");
    assert!(s.stats().report_timeouts >= 1);
}

#[test]
fn a_nak_needing_nothing_after_a_timeout_takes_back_the_new_send() {
    let (mut s, c) = start();
    // The report is counted missing at about 2.22 s and the item waits
    // for a new send (not yet begun: the server has not been polled)...
    let due = Instant::from_millis(2_300);
    let mut now = Instant::ZERO;
    let mut t = None;
    while now < due {
        s.handle_timeout(now);
        if s.stats().report_timeouts == 1 {
            break;
        }
        let (ann, _, _) = drain(&mut s, now);
        t = t.or(ann.first().map(|a| a.transmission));
        now = now + Duration::from_millis(1);
    }
    let t = t.expect("sent");
    assert_eq!(s.stats().report_timeouts, 1);
    assert_eq!(s.queue_len(), 1, "waits for a new send");
    // ...when the late report says it holds the item: nothing is sent.
    s.handle_client_msg(now, c, nak(t, ItemId(0), 0));
    assert_eq!(s.queue_len(), 0);
    let seen = run(&mut s, now, Instant::from_millis(10_000));
    assert!(seen.is_empty(), "{seen:?}");
    // A block that then fails its check is asked for, and sent.
    let at = Instant::from_millis(10_000);
    s.handle_client_msg(at, c, nak(t, ItemId(0), 10));
    assert_eq!(s.queue_len(), 1, "waits again");
    let seen = run(&mut s, at, Instant::from_millis(10_100));
    assert!(
        seen.iter()
            .any(|&(k, x)| k == AnnounceKind::First && x != t),
        "{seen:?}"
    );
}
