//! Announcements due together (a transmission's end and the next one's
//! start) travel as one signed datagram (`wire::announce`, kind 7), through
//! the shipped endpoints (`Profile::Lan`: session key, signed
//! announcements, pinned server key) on the virtual LAN: a request for
//! many small items, each one packet, costs its receiver about one
//! signature check per item, not two, and every item still verifies, at
//! 0% and 20% loss. A send no longer than the shortest NAK delay is
//! announced once, a longer one three times (`endpoint::server`).
//! Replay a seed with `REPOCAST_SEED=<n>`.

mod common;

use repocast_core::Instant;
use repocast_core::endpoint::client::Want;
use repocast_core::loss::LossSpec;
use repocast_core::profile::Profile;
use repocast_core::rng::Rng;
use repocast_sim::lan::{LanClient, VirtualLan};

/// `n` items of 0 to 1,200 bytes (one packet each; every tenth empty).
fn small_items(seed: u64, n: usize) -> Vec<(String, Vec<u8>)> {
    let mut r = Rng::new(seed);
    (0..n)
        .map(|i| {
            let len = if i % 10 == 0 {
                0
            } else {
                (r.next_u64() % 1200) as usize
            };
            let bytes = (0..len).map(|_| r.next_u64() as u8).collect();
            (format!("src/f{i}.c"), bytes)
        })
        .collect()
}

/// One client asking for every item at `loss`: signatures it checked, and
/// announcement datagrams it heard, per item.
fn run(seed: u64, data: &[(String, Vec<u8>)], loss: f64) -> (f64, f64) {
    let mut h = VirtualLan::new(
        Profile::Lan,
        |c| {
            c.seed = seed;
            c.set_rate(20_000_000, false).expect("rate");
        },
        data.to_vec(),
        LossSpec::NONE,
    )
    .expect("server");
    h.add_client(LanClient {
        want: Want::All,
        loss: LossSpec::Bernoulli { p: loss },
        join_at: Instant::ZERO,
        crash_at: None,
        stop_at: None,
        host: None,
    });
    assert!(
        h.run(Instant::from_micros(120_000_000)),
        "seed {seed}: unfinished"
    );
    let r = &h.reports()[0];
    common::assert_all_verified(&format!("seed {seed}, loss {loss}"), r, data);
    let data_heard = r.client.useful + r.client.useless;
    let announcements = r.stats.datagrams.saturating_sub(data_heard);
    let n = data.len() as f64;
    (h.signatures().0 as f64 / n, announcements as f64 / n)
}

#[test]
fn small_items_cost_one_announcement_datagram_and_signature_each() {
    let s = common::seed_or(5);
    let data = small_items(s, 300);
    for loss in [0.0, 0.2] {
        let (sigs, heard) = run(s, &data, loss);
        // One bundle per item (end of the last, start of this one), sent
        // once: no send is longer than the shortest NAK delay, so the
        // next bundle stands in for a lost one (three copies of each
        // before session 65, 2.67 heard per item at 0%; separately, six:
        // 5.4 per item heard before bundles, seed 5 at 0%).
        assert!(
            heard <= (1.0 - loss) + 0.15,
            "seed {s}, loss {loss}: {heard:.2} announcement datagrams per item"
        );
        // The start of each item's send is checked, once; its end rides
        // in the next start's datagram.
        assert!(
            sigs <= 1.05,
            "seed {s}, loss {loss}: {sigs:.2} signatures checked per item"
        );
    }
}

#[test]
fn sends_longer_than_the_shortest_nak_delay_are_announced_three_times() {
    let s = common::seed_or(5);
    // 60,000 bytes at 20 Mbit/s: about 25 ms a send, against the shipped
    // NAK window's 5 ms floor.
    let data: Vec<(String, Vec<u8>)> = (0..20u8)
        .map(|i| (format!("big/f{i}"), vec![i; 60_000]))
        .collect();
    let (_, heard) = run(s, &data, 0.0);
    assert!(
        heard >= 2.9,
        "seed {s}: {heard:.2} announcement datagrams per item"
    );
}
