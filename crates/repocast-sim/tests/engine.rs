//! The simulator's accounting engine ([`Harness`]: the core's state
//! machines without payload bytes): every code runs the same protocol
//! without bytes; lost announcements are survived; measured loss and
//! late joiners with and without notify; push mode without a back channel;
//! tree links; MFTP-style exact repairs; the same seed gives the same run.
//! Payload runs of the same schemes are in `tests/end_to_end.rs`.
//! Replay a failing seed with `REPOCAST_SEED=<n>`.

mod common;

use repocast_core::fec::CodeKind;
use repocast_core::loss::{LossModel, LossSpec};
use repocast_core::policy::Scheme;
use repocast_core::sched::SchedulerKind;
use repocast_core::server::ServerConfig;
use repocast_core::{Instant, ItemId};
use repocast_sim::engine::{ClientSpec, Harness};
use std::time::Duration;

const T: u16 = 64;

fn seed() -> u64 {
    common::seed_or(7)
}

/// Sizes: empty, one symbol minus/exactly/plus one byte, and larger ones
/// spanning several blocks.
const SIZES: [u64; 7] = [0, T as u64 - 1, T as u64, T as u64 + 1, 1500, 3000, 700];

fn config(scheme: &str, code: CodeKind, seed: u64) -> ServerConfig {
    ServerConfig {
        scheme: scheme.parse::<Scheme>().expect("scheme"),
        code,
        symbol_size: T,
        max_block_symbols: code.default_block_symbols().min(20),
        packet_interval: Duration::from_millis(1),
        seed,
        ..ServerConfig::default()
    }
}

fn ids(v: &[u32]) -> Vec<ItemId> {
    v.iter().map(|&i| ItemId(i)).collect()
}

/// Four clients' requests and link loss: 0-50% (one bursty), overlapping.
fn plan() -> [(Vec<u32>, LossSpec); 4] {
    [
        (vec![0, 1, 4, 5], LossSpec::NONE),
        (vec![1, 2, 3, 5, 6], LossSpec::Bernoulli { p: 0.1 }),
        (vec![4, 5, 6], LossSpec::bursty(0.25, 4.0)),
        (vec![0, 2, 5], LossSpec::Bernoulli { p: 0.5 }),
    ]
}

/// Adds the `plan`'s clients, joining `spacing_ms` apart.
fn add_clients(h: &mut Harness, spacing_ms: u64) {
    for (i, (want, loss)) in plan().iter().enumerate() {
        h.add_client(ClientSpec {
            items: ids(want),
            loss: *loss,
            join_at: Instant::from_millis(i as u64 * spacing_ms),
        });
    }
}

/// The `plan`'s four clients on `cfg`; all must end complete, without
/// failures, with Done.
fn run_all_complete(cfg: ServerConfig, announce_loss: Option<f64>, spacing_ms: u64) -> Harness {
    let seed = cfg.seed;
    let what = format!("{} {:?} seed {seed}", cfg.scheme, cfg.code);
    let mut h = Harness::accounting(cfg, &SIZES, LossSpec::NONE).expect("harness");
    h.announce_loss = announce_loss.map(|p| LossModel::new(LossSpec::Bernoulli { p }, seed));
    add_clients(&mut h, spacing_ms);
    assert!(
        h.run(Instant::from_millis(3_600_000)),
        "{what}: did not go idle at {:?}",
        h.now
    );
    for (i, (rep, (want, _))) in h.reports().iter().zip(plan()).enumerate() {
        assert!(
            rep.failures.is_empty(),
            "{what}: client {i} failed {:?}",
            rep.failures
        );
        assert_eq!(rep.completed, want.len(), "{what}: client {i} incomplete");
        assert!(rep.delay.is_some(), "{what}: client {i} never got Done");
    }
    h
}

#[test]
fn accounting_mode_runs_the_same_protocol_without_bytes() {
    for code in CodeKind::ALL {
        for scheme in ["FEC(0.05R)+R(0)", "FEC(0)+R(inf)", "ARM+R(2)+notify"] {
            let h = run_all_complete(config(scheme, code, seed()), None, 3);
            assert!(h.server.stats().data_packets > 0);
        }
    }
}

#[test]
fn lost_announcements_are_survived_by_joining_on_data_and_timing_out() {
    for scheme in [
        "FEC(0)+R(inf)",
        "FEC(0.05R)+R(0)",
        "FEC(0.1)+R(3)+notify",
        "ARM",
    ] {
        for code in [CodeKind::RaptorQ, CodeKind::Exact] {
            run_all_complete(config(scheme, code, seed()), Some(0.3), 3);
        }
    }
}

#[test]
fn metrics_count_naks_and_the_loss_each_link_measured() {
    let h = run_all_complete(config("FEC(0)+R(inf)", CodeKind::RaptorQ, seed()), None, 3);
    let s = h.server.stats();
    assert!(s.naks > 0 && s.repair_packets > 0, "{s:?}");
    let reps = h.reports();
    assert_eq!(reps[0].stats.naks, 0);
    assert_eq!(reps[0].measured_loss, 0.0);
    assert!(reps[3].stats.naks > 0);
    // It hears only the few dozen packets of its 3 items: a wide band.
    let m = reps[3].measured_loss;
    assert!(m > 0.25 && m < 0.75, "{m}");
    assert!(reps[0].delay.is_some_and(|d| d > Duration::ZERO));
}

#[test]
fn same_seed_same_run() {
    let cfg = config("FEC(0.1)+R(2)", CodeKind::RaptorQ, seed());
    let a = run_all_complete(cfg.clone(), None, 3);
    let b = run_all_complete(cfg, None, 3);
    assert_eq!(a.server.stats(), b.server.stats());
    assert_eq!(a.reports(), b.reports());
    assert_eq!(a.events(), b.events());
}

/// Client B asks for a 200-packet item while its first transmission is
/// half sent. Returns B's delay and the packets sent.
fn late_joiner(notify: bool) -> (Duration, u64) {
    let scheme = if notify {
        "FEC(0)+R(0)+notify"
    } else {
        "FEC(0)+R(0)"
    };
    let mut cfg = config(scheme, CodeKind::RaptorQ, 3);
    cfg.max_block_symbols = 200;
    let mut h = Harness::accounting(cfg, &[200 * T as u64], LossSpec::NONE).expect("harness");
    for join in [0, 100] {
        h.add_client(ClientSpec {
            items: ids(&[0]),
            loss: LossSpec::NONE,
            join_at: Instant::from_millis(join),
        });
    }
    assert!(h.run(Instant::from_millis(60_000)));
    let reps = h.reports();
    // A: 200 packets at 1 ms plus the request's and the done's 5 ms trips.
    let a = reps[0].delay.expect("A done");
    assert!(
        a >= Duration::from_millis(205) && a <= Duration::from_millis(220),
        "{a:?}"
    );
    (
        reps[1].delay.expect("B done"),
        h.server.stats().data_packets,
    )
}

#[test]
fn late_joiner_with_notify_keeps_what_it_catches() {
    let (with, sent_with) = late_joiner(true);
    let (without, sent_without) = late_joiner(false);
    // Without notify B waits out the first send and gets a whole second one
    // (200 + 200 packets); with notify it keeps the ~100 it caught and the
    // rescheduled send carries only what it still needs.
    assert_eq!(sent_without, 400);
    assert!(sent_with < 320, "{sent_with}");
    assert!(without >= Duration::from_millis(100 + 200), "{without:?}");
    // With notify: the rest of the first send, its NAK delay (at most the
    // 210 ms window), about 100 packets and the trips.
    assert!(
        with <= Duration::from_millis(100 + 210 + 110 + 20),
        "{with:?}"
    );
}

#[test]
fn push_mode_delivers_without_a_back_channel() {
    for (scheduler, scheme, code) in [
        (SchedulerKind::Flat, "FEC(0)+R(0)", CodeKind::RaptorQ),
        (SchedulerKind::Flat, "FEC(0)+R(0)", CodeKind::Exact),
        (
            SchedulerKind::Mad {
                weights: vec![0.3, 0.05, 0.05, 0.05, 0.3, 0.2, 0.05],
            },
            "FEC(0.2)+R(0)",
            CodeKind::ReedSolomon,
        ),
    ] {
        let mut cfg = config(scheme, code, seed());
        cfg.scheduler = scheduler.clone();
        let h = run_all_complete(cfg, None, 7);
        for rep in h.reports() {
            assert!(rep.first_useful.is_some_and(|f| Some(f) <= rep.delay));
            assert_eq!(rep.stats.naks, 0, "push mode never NAKs");
        }
        let st = h.server.stats();
        assert_eq!((st.naks, st.repair_packets), (0, 0), "{scheduler:?}");
    }
}

#[test]
fn tree_links_lose_each_packet_for_every_receiver_below_them() {
    let mut cfg = config("FEC(0)+R(inf)", CodeKind::RaptorQ, seed());
    cfg.max_block_symbols = 100;
    let mut h = Harness::accounting(cfg, &[400 * T as u64], LossSpec::NONE).expect("harness");
    let shared = h.add_link(LossSpec::Bernoulli { p: 0.3 });
    for _ in 0..3 {
        h.add_client(ClientSpec {
            items: ids(&[0]),
            loss: LossSpec::NONE,
            join_at: Instant::ZERO,
        });
    }
    h.set_path(0, vec![shared], Duration::from_millis(20));
    h.set_path(1, vec![shared], Duration::from_millis(40));
    assert!(h.run(Instant::from_millis(3_600_000)));
    let r = h.reports();
    assert!(r.iter().all(|c| c.completed == 1));
    // Both receivers below the lossy link see its loss; the one beside it,
    // none. The farther one hears its repairs later.
    for c in &r[..2] {
        assert!((c.measured_loss - 0.3).abs() < 0.06, "{}", c.measured_loss);
    }
    assert_eq!(r[2].measured_loss, 0.0);
    assert!(r[2].delay < r[0].delay && r[0].delay <= r[1].delay);
}

/// MFTP's repair (exact packets, R(inf)): NAKs that arrive while a repair
/// is on air add the ids it lacks, and receivers listening to a newer
/// transmission are not timed out on the older one (both bugs made a
/// 1,000-packet file cost several whole passes).
#[test]
fn exact_packet_repairs_resend_the_union_without_report_timeouts() {
    for code in [CodeKind::Exact, CodeKind::RaptorQ, CodeKind::Xor] {
        let mut cfg = config("FEC(0)+R(inf)", code, seed());
        cfg.symbol_size = 512;
        cfg.max_block_symbols = code.default_block_symbols();
        cfg.packet_interval = Duration::from_millis(80);
        let mut h = Harness::accounting(cfg, &[1000 * 512], LossSpec::NONE).expect("harness");
        h.control_delay = Duration::from_millis(80);
        for _ in 0..3 {
            h.add_client(ClientSpec {
                items: ids(&[0]),
                loss: LossSpec::Bernoulli { p: 0.1 },
                join_at: Instant::ZERO,
            });
        }
        assert!(h.run(Instant::from_millis(86_400_000)));
        let st = h.server.stats();
        assert!(h.reports().iter().all(|r| r.completed == 1));
        assert_eq!(st.report_timeouts, 0, "{code:?}: {st:?}");
        // One pass plus the union of three 10% receivers' losses (about
        // 27%) and a little more for the rounds after.
        assert!(st.data_packets < 1_450, "{code:?}: {st:?}");
    }
}
