//! Push-mode helpers shared by the push test binaries: files, the
//! shipped pusher and listener settings, and listeners timed against the
//! ideal on a virtual LAN.
#![allow(dead_code)] // not every push test binary uses every helper

use repocast_core::Instant;
use repocast_core::auth::Identity;
use repocast_core::endpoint::push::PushConfig;
use repocast_core::profile::Profile;
use repocast_core::rng::Rng;
use repocast_sim::push_lan::{PushLan, PushListener, PushReport};

pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut r = Rng::new(seed);
    (0..len).map(|_| r.next_u64() as u8).collect()
}

pub fn config() -> PushConfig {
    repocast_sim::push_lan::shipped_pusher()
}

pub fn listener(loss: f64, join_s: f64) -> PushListener {
    PushListener::shipped(Identity::from_seed([7; 32]).public(), loss, secs(join_s))
}

pub fn secs(s: f64) -> Instant {
    Instant::from_nanos((s * 1e9) as u64)
}

pub fn check_files(r: &PushReport, files: &[(String, Vec<u8>)]) {
    assert!(
        r.outcomes.iter().all(|o| o.result.is_ok()),
        "{:?}",
        r.outcomes
    );
    assert_eq!(r.outcomes.len(), files.len());
    for (n, b) in files {
        assert!(r.files.get(n) == Some(b), "{n} differs");
    }
}

/// Source symbols of `files` under the push profile.
pub fn symbols(files: &[(String, Vec<u8>)]) -> u64 {
    let t = Profile::Push.server().symbol_size as u64;
    files.iter().map(|f| (f.1.len() as u64).div_ceil(t)).sum()
}

/// `n` listeners at `loss` of `files`, the i-th joining at `i * gap_s`
/// with seed `seed_base + i`, for `run_s` seconds: each one's time to its
/// verified files over the ideal, k packets / (1 - loss) at `cfg`'s rate.
pub fn delay_ratios(
    cfg: PushConfig,
    files: &[(String, Vec<u8>)],
    loss: f64,
    n: u64,
    gap_s: f64,
    seed_base: u64,
    run_s: f64,
) -> Vec<f64> {
    let packet = cfg.server.packet_interval.as_secs_f64();
    let mut lan = PushLan::new(cfg, Identity::from_seed([7; 32]), 1, files).expect("lan");
    for i in 0..n {
        lan.listener(listener(loss, gap_s * i as f64), seed_base + i);
    }
    lan.run(secs(run_s));
    let ideal = packet * symbols(files) as f64 / (1.0 - loss);
    (lan.reports().iter())
        .map(|r| {
            check_files(r, files);
            r.delay.expect("finished").as_secs_f64() / ideal
        })
        .collect()
}

/// `n` files `site/pNNN.html` of 500 bytes to 50 KB, log-uniform (about a
/// quarter of them one symbol), drawn from `seed`.
pub fn tiny_site(seed: u64, n: u64) -> Vec<(String, Vec<u8>)> {
    let mut r = Rng::new(seed);
    (0..n)
        .map(|i| {
            let len = (500.0 * 100f64.powf((r.next_u64() % 1000) as f64 / 1000.0)) as usize;
            (format!("site/p{i:03}.html"), bytes(len, seed + i))
        })
        .collect()
}

/// The FEC parameters the shipped pusher gives a file.
pub fn fec() -> repocast_core::wire::FecParams {
    Profile::Push.server().base_fec()
}
