//! Validation against SPEC 3.6's Fcast formula: the chance that a receiver
//! at loss r completes an item of G blocks of k symbols after one carousel
//! pass sending k + x symbols per block is
//! P = (sum_{j<=x} C(k+x, j) r^j (1-r)^(k+x-j))^G.
//! Measured through the same engine the simulator uses (the core's harness,
//! push-mode flat carousel, Reed-Solomon blocks) with 400 receivers.

use repocast_core::fec::CodeKind;
use repocast_core::harness::{ClientSpec, Harness};
use repocast_core::loss::LossSpec;
use repocast_core::sched::SchedulerKind;
use repocast_core::server::ServerConfig;
use repocast_core::{Instant, ItemId};
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
        payloads: false,
        seed,
        ..ServerConfig::default()
    };
    let item = vec![0u8; (k * g) as usize * t as usize];
    let mut h = Harness::new(cfg, vec![("f".into(), item)], LossSpec::NONE).expect("harness");
    let n = 400;
    for _ in 0..n {
        h.add_client(ClientSpec {
            items: vec![ItemId(0)],
            loss: LossSpec::Bernoulli { p: r },
            join_at: Instant::ZERO,
        });
    }
    // Pass 1 (in progress when they join) is skipped: no notify. Stop just
    // before pass 3's first packet and count who has the item: exactly the
    // receivers that decoded every block from pass 2's k + x symbols.
    let pass_us = (g * (k + x)) as u64 * 1000;
    h.run(Instant::from_micros(2 * pass_us - 500));
    let done_in_pass_2 = h.reports().iter().filter(|c| c.completed == 1).count();
    done_in_pass_2 as f64 / n as f64
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
