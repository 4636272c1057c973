//! Payload runs of every reliability scheme and code, through the endpoints'
//! byte interfaces on the virtual LAN (the study's profile with the scheme
//! and code under test): four overlapping requests at 0-50% loss (one
//! bursty) all end verified and byte-identical; ARM grows a transmission to
//! what the worst receiver needs; repair and rescheduling show in the
//! counters. The accounting engine's own runs are in `tests/engine.rs`.
//! Replay a failing seed with `REPOCAST_SEED=<n>`.

mod common;

use repocast_core::Instant;
use repocast_core::endpoint::client::Want;
use repocast_core::fec::CodeKind;
use repocast_core::loss::LossSpec;
use repocast_core::policy::Scheme;
use repocast_core::profile::Profile;
use repocast_core::rng::Rng;
use repocast_core::server::ServerConfig;
use repocast_sim::lan::{LanClient, VirtualLan};
use std::time::Duration;

const T: u16 = 64;

fn seed() -> u64 {
    common::seed_or(7)
}

/// Items: empty, one symbol minus/exactly/plus one byte, and larger ones
/// spanning several blocks.
fn items(seed: u64) -> Vec<(String, Vec<u8>)> {
    let mut r = Rng::new(seed);
    let sizes = [
        0usize,
        T as usize - 1,
        T as usize,
        T as usize + 1,
        1500,
        3000,
        700,
    ];
    (sizes.iter().enumerate())
        .map(|(i, &n)| {
            let bytes = (0..n).map(|_| r.next_u64() as u8).collect();
            (format!("item{i}"), bytes)
        })
        .collect()
}

/// The study's settings with this scheme and code, small symbols and
/// blocks, a packet a millisecond.
fn tweak(scheme: &str, code: CodeKind, seed: u64) -> impl FnOnce(&mut ServerConfig) {
    let scheme: Scheme = scheme.parse().expect("scheme");
    move |c| {
        c.scheme = scheme;
        c.code = code;
        c.symbol_size = T;
        c.max_block_symbols = code.default_block_symbols().min(20);
        c.packet_interval = Duration::from_millis(1);
        c.seed = seed;
    }
}

fn want(ids: &[usize]) -> Want {
    Want::Items(ids.iter().map(|i| format!("item{i}")).collect())
}

/// Four clients' requests and link loss: 0-50% (one bursty), overlapping.
fn plan() -> [(Vec<usize>, LossSpec); 4] {
    [
        (vec![0, 1, 4, 5], LossSpec::NONE),
        (vec![1, 2, 3, 5, 6], LossSpec::Bernoulli { p: 0.1 }),
        (vec![4, 5, 6], LossSpec::bursty(0.25, 4.0)),
        (vec![0, 2, 5], LossSpec::Bernoulli { p: 0.5 }),
    ]
}

/// The `plan`'s four clients, 3 ms apart; every one must end with every
/// item verified and byte-identical.
fn run_all_verified(scheme: &str, code: CodeKind) -> VirtualLan {
    let seed = seed();
    let data = items(seed);
    let mut h = VirtualLan::new(
        Profile::Study,
        tweak(scheme, code, seed),
        data.clone(),
        LossSpec::NONE,
    )
    .expect("server");
    h.control_delay = Duration::from_millis(5);
    let plan = plan();
    for (i, (ids, loss)) in plan.iter().enumerate() {
        h.add_client(LanClient {
            want: want(ids),
            loss: *loss,
            join_at: Instant::from_millis(i as u64 * 3),
            crash_at: None,
            stop_at: None,
            host: None,
        });
    }
    let done = h.run(Instant::from_millis(3_600_000));
    let reps = h.reports();
    assert!(
        done,
        "{scheme} {code:?} seed {seed}: did not finish at {:?}",
        h.now
    );
    for (i, (r, (ids, _))) in reps.iter().zip(&plan).enumerate() {
        assert_eq!(
            r.outcomes.len(),
            ids.len(),
            "{scheme} {code:?} seed {seed}: client {i}"
        );
        common::assert_all_verified(
            &format!("{scheme} {code:?} seed {seed}: client {i}"),
            r,
            &data,
        );
        assert!(
            r.delay.is_some(),
            "{scheme} seed {seed}: client {i} never finished"
        );
    }
    h
}

#[test]
fn every_fec_and_retransmission_combination_delivers_byte_identical_items() {
    for fec in ["0", "0.1", "0.05R", "0.2/R", "maxloss+0.05"] {
        for r in ["inf", "5", "0"] {
            let scheme = format!("FEC({fec})+R({r})");
            run_all_verified(&scheme, CodeKind::RaptorQ);
            run_all_verified(&format!("{scheme}+notify"), CodeKind::RaptorQ);
        }
    }
}

#[test]
fn arm_delivers_alone_and_with_rescheduling() {
    for scheme in ["ARM", "ARM+R(0)", "ARM+R(2)+notify"] {
        run_all_verified(scheme, CodeKind::RaptorQ);
    }
}

#[test]
fn every_code_delivers_under_repair_and_rescheduling() {
    for code in [CodeKind::ReedSolomon, CodeKind::Xor, CodeKind::Exact] {
        for scheme in ["FEC(0)+R(inf)", "FEC(0.1)+R(0)", "FEC(0.02R)+R(3)"] {
            run_all_verified(scheme, code);
        }
    }
}

#[test]
fn repair_draws_naks_from_lossy_clients_only() {
    let h = run_all_verified("FEC(0)+R(inf)", CodeKind::RaptorQ);
    let s = h.server().server().stats();
    assert!(s.naks > 0, "lossy clients must NAK");
    assert!(
        s.repair_packets > 0 && s.repair_packets < s.data_packets,
        "{s:?}"
    );
    assert!(s.repair_transmissions > 0);
    let reps = h.reports();
    // The lossless client sent no NAK; the 50% one did.
    assert_eq!(reps[0].client.naks, 0);
    assert!(reps[3].client.naks > 0);
}

#[test]
fn rescheduling_never_retransmits_and_r_inf_never_reschedules() {
    let h = run_all_verified("FEC(0)+R(0)", CodeKind::RaptorQ);
    let s = h.server().server().stats();
    assert_eq!(s.repair_packets, 0);
    assert!(s.rescheduled > 0);
    let h = run_all_verified("FEC(0)+R(inf)", CodeKind::RaptorQ);
    assert_eq!(h.server().server().stats().rescheduled, 0);
}

/// ARM on one 500-symbol file to 14 receivers at 0-30% loss: the first
/// transmission grows past K through probes and NAKs, stops once the last
/// receiver decodes, and sends far less than a worst-case fixed expansion.
#[test]
fn arm_grows_the_transmission_to_what_the_worst_receiver_needs() {
    let k = 500usize;
    let mut r = Rng::new(11);
    let file: Vec<u8> = (0..k * T as usize).map(|_| r.next_u64() as u8).collect();
    let mut h = VirtualLan::new(
        Profile::Study,
        |c| {
            tweak("ARM", CodeKind::RaptorQ, 11)(c);
            c.max_block_symbols = 1000;
            c.arm_initial_rtt = Duration::from_millis(20);
        },
        vec![("f".into(), file.clone())],
        LossSpec::NONE,
    )
    .expect("server");
    h.control_delay = Duration::from_millis(5);
    for i in 0..14 {
        h.add_client(LanClient {
            want: Want::Items(vec!["f".into()]),
            loss: LossSpec::Bernoulli {
                p: 0.3 * i as f64 / 13.0,
            },
            join_at: Instant::ZERO,
            crash_at: None,
            stop_at: None,
            host: None,
        });
    }
    assert!(h.run(Instant::from_millis(600_000)));
    let s = h.server().server().stats();
    for (i, rep) in h.reports().iter().enumerate() {
        assert!(
            rep.files.get("f") == Some(&file),
            "receiver {i} differs: {s:?} {:?}",
            rep.outcomes
        );
    }
    eprintln!("ARM, 14 receivers 0-30% loss, K=500: {s:?}");
    // The worst receiver needs about 500 / 0.7 = 714 packets.
    assert!(s.naks > 0, "probes must draw NAKs");
    assert!(s.data_packets > 650, "{s:?}");
    assert!(s.data_packets < 900, "{s:?}");
    assert!(
        s.repair_packets < 60,
        "ARM should leave little for repair: {s:?}"
    );
}
