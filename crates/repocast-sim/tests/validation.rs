//! Validation against SPEC 3.6's Fcast formula: the chance that a receiver
//! at loss r completes an item of G blocks of k symbols after one carousel
//! pass sending k + x symbols per block is
//! P = (sum_{j<=x} C(k+x, j) r^j (1-r)^(k+x-j))^G.
//! Measured through the same engine the simulator uses (the core's harness,
//! push-mode flat carousel, Reed-Solomon blocks) with 400 receivers.

use repocast_core::fec::CodeKind;
use repocast_core::loss::LossSpec;
use repocast_core::sched::SchedulerKind;
use repocast_core::server::ServerConfig;
use repocast_core::{Instant, ItemId};
use repocast_sim::engine::{ClientSpec, Harness};
use std::time::Duration;

fn binom(n: u64, j: u64) -> f64 {
    (0..j).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

fn fcast_p(k: u64, x: u64, g: i32, r: f64) -> f64 {
    let per_block: f64 = (0..=x)
        .map(|j| binom(k + x, j) * r.powi(j as i32) * (1.0 - r).powi((k + x - j) as i32))
        .sum();
    per_block.powi(g)
}

/// Fraction of receivers that complete from the first whole pass they hear.
fn measured(k: u32, x: u32, g: u32, r: f64, seed: u64) -> f64 {
    let t = 64u16;
    let cfg = ServerConfig {
        scheme: format!("FEC({})+R(0)", x as f64 / k as f64)
            .parse()
            .expect("scheme"),
        scheduler: SchedulerKind::Flat,
        code: CodeKind::ReedSolomon,
        symbol_size: t,
        max_block_symbols: k,
        packet_interval: Duration::from_millis(1),
        burst: 1,
        seed,
        ..ServerConfig::default()
    };
    let size = (k * g) as u64 * t as u64;
    let mut h = Harness::accounting(cfg, &[size], LossSpec::NONE).expect("harness");
    let n = 400;
    for _ in 0..n {
        h.add_client(ClientSpec {
            items: vec![ItemId(0)],
            loss: LossSpec::Bernoulli { p: r },
            join_at: Instant::ZERO,
        });
    }
    // Push-mode receivers tune in at time 0, as pass 1 starts. Stop just
    // before pass 2's first packet and count who has the item: exactly the
    // receivers that decoded every block from pass 1's k + x symbols.
    let pass_us = (g * (k + x)) as u64 * 1000;
    h.run(Instant::from_micros(pass_us - 500));
    let done_in_pass_1 = h.reports().iter().filter(|c| c.completed == 1).count();
    done_in_pass_1 as f64 / n as f64
}

#[test]
fn carousel_completion_matches_the_fcast_formula() {
    for (k, x, g, r) in [
        (32u32, 4u32, 8u32, 0.05),
        (32, 6, 4, 0.1),
        (20, 2, 10, 0.02),
    ] {
        let p = fcast_p(k as u64, x as u64, g as i32, r);
        let m = measured(
            k,
            x,
            g,
            r,
            std::env::var("REPOCAST_SEED")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(17),
        );
        // 400 receivers: standard error at most 0.025.
        assert!(
            (m - p).abs() < 0.08,
            "k {k} x {x} G {g} r {r}: formula {p:.3}, measured {m:.3}"
        );
        eprintln!("k {k} x {x} G {g} r {r}: formula {p:.3}, measured {m:.3}");
    }
}

/// SPEC 4's MSMDD expectations for a flat schedule of period `s` slots and
/// an object of `g` pages with gaps `a_i` between its runs, in slots:
/// (seek, transfer, latency).
fn msmdd(s: f64, g: f64, gaps: &[f64]) -> (f64, f64, f64) {
    let sq: f64 = gaps.iter().map(|a| a * a).sum();
    let l = s - 0.5 + g / (2.0 * s) - sq / (2.0 * s);
    let seek = s + 1.0 - l;
    (seek, s + 1.0 - 2.0 * seek, l)
}

/// A flat carousel of documents (one page per packet, no FEC, no loss);
/// one receiver arrives at the start of every slot of the second cycle and
/// wants `object`. Returns the mean (seek, transfer, latency) in slots:
/// seek ends with the first page of the object received, latency with the
/// last.
fn flat_measured(pages: &[u32], object: &[u32]) -> (f64, f64, f64) {
    let t = 32u16;
    let slot = Duration::from_millis(10);
    let cfg = ServerConfig {
        scheme: "FEC(0)+R(0)".parse().expect("scheme"),
        scheduler: SchedulerKind::Flat,
        code: CodeKind::Exact,
        symbol_size: t,
        max_block_symbols: 1000,
        packet_interval: slot,
        burst: 1,
        seed: 3,
        ..ServerConfig::default()
    };
    let sizes: Vec<u64> = pages.iter().map(|&g| g as u64 * t as u64).collect();
    let mut h = Harness::accounting(cfg, &sizes, LossSpec::NONE).expect("harness");
    let s: u32 = pages.iter().sum();
    for j in 0..s {
        h.add_client(ClientSpec {
            items: object.iter().map(|&i| ItemId(i)).collect(),
            loss: LossSpec::NONE,
            join_at: Instant::ZERO + slot * (s + j),
        });
    }
    assert!(h.run(Instant::ZERO + slot * (10 * s)), "run did not finish");
    let (mut seek, mut lat) = (0.0, 0.0);
    for r in h.reports() {
        let to_slots = |d: Duration| d.as_secs_f64() / slot.as_secs_f64() + 1.0;
        seek += to_slots(r.first_useful.expect("heard the object"));
        lat += to_slots(r.delay.expect("completed"));
    }
    let n = s as f64;
    (seek / n, (lat - seek) / n, lat / n)
}

#[test]
fn flat_schedule_seek_transfer_and_latency_match_the_msmdd_formulas() {
    // Documents of these many pages, in carousel order; objects as sets of
    // documents (runs of adjacent documents merge; gaps are what lies
    // between the runs, cyclically).
    let pages = [3u32, 5, 2, 7, 1, 4, 6];
    let cases: [(&[u32], &[f64]); 4] = [
        (&[1], &[23.0]),
        (&[0, 3], &[5.0 + 2.0, 1.0 + 4.0 + 6.0]),
        (&[1, 2, 6], &[3.0, 7.0 + 1.0 + 4.0]),
        (&[0, 2, 4, 6], &[5.0, 7.0, 4.0]),
    ];
    let s: u32 = pages.iter().sum();
    for (object, gaps) in cases {
        let g: u32 = object.iter().map(|&i| pages[i as usize]).sum();
        assert_eq!(g as f64 + gaps.iter().sum::<f64>(), s as f64);
        let want = msmdd(s as f64, g as f64, gaps);
        let got = flat_measured(&pages, object);
        eprintln!("object {object:?}: formula {want:?}, measured {got:?}");
        for (w, m) in [(want.0, got.0), (want.1, got.1), (want.2, got.2)] {
            assert!(
                (w - m).abs() < 1e-9,
                "object {object:?}: formula {want:?}, measured {got:?}"
            );
        }
    }
}
