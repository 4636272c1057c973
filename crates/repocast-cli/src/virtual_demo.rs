//! `repocast demo --virtual`: a generated repository, one server and four clients at
//! 2%, 5%, 20% and 50% loss with overlapping requests, run through the
//! core's in-process harness (real encoding, decoding and BLAKE3
//! verification; virtual time at the chosen rate). Prints each client's
//! delay and a summary; exits non-zero unless every file verified.

use repocast_core::fec::CodeKind;
use repocast_core::loss::LossSpec;
use repocast_core::policy::Scheme;
use repocast_core::rng::Rng;
use repocast_core::server::ServerConfig;
use repocast_core::{Instant, ItemId};
use repocast_sim::engine::{ClientSpec, Harness};
use std::process::ExitCode;
use std::time::Duration;

/// Options of `repocast demo --virtual`.
#[derive(Debug, Clone)]
pub struct VirtualArgs {
    /// Reliability scheme, e.g. "FEC(0.01R)+R(0)", "FEC(0)+R(inf)", "ARM".
    pub scheme: String,
    /// Seed for the repository, the requests and the loss.
    pub seed: u64,
    /// Channel rate in Mbit/s (sets the virtual time per packet).
    pub rate_mbps: f64,
}

impl Default for VirtualArgs {
    fn default() -> Self {
        VirtualArgs {
            scheme: "FEC(maxloss+0.02)+R(inf)".into(),
            seed: 1,
            rate_mbps: 100.0,
        }
    }
}

const SYMBOL: u16 = 1280;

/// 40 files, 1 KiB to 3 MiB (two of 3 MiB), about 20 MiB in all.
fn repository(rng: &mut Rng) -> Vec<(String, Vec<u8>)> {
    (0..40)
        .map(|i| {
            let size = match i {
                0 | 1 => 3 << 20,
                _ => 1024 + rng.range_u64(0, 900 << 10) as usize,
            };
            let bytes = (0..size).map(|_| rng.next_u64() as u8).collect();
            (format!("sample/file{i:02}.bin"), bytes)
        })
        .collect()
}

pub fn run(a: &VirtualArgs) -> ExitCode {
    let scheme: Scheme = match a.scheme.parse() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("repocast demo: {e}");
            return ExitCode::from(2);
        }
    };
    if !(a.rate_mbps > 0.0 && a.rate_mbps.is_finite()) {
        eprintln!("repocast demo: --rate-mbps must be positive");
        return ExitCode::from(2);
    }
    let mut rng = Rng::new(a.seed);
    let repo = repository(&mut rng);
    let total: usize = repo.iter().map(|(_, b)| b.len()).sum();
    let packet_bits = (SYMBOL as f64 + 31.0 + 28.0) * 8.0;
    let cfg = ServerConfig {
        scheme,
        code: CodeKind::RaptorQ,
        symbol_size: SYMBOL,
        packet_interval: Duration::from_secs_f64(packet_bits / (a.rate_mbps * 1e6)),
        seed: a.seed,
        ..ServerConfig::default()
    };
    println!(
        "repocast demo: {} files, {:.1} MiB, scheme {scheme}, {} Mbit/s (virtual time), seed {}",
        repo.len(),
        total as f64 / (1 << 20) as f64,
        a.rate_mbps,
        a.seed
    );
    let mut h = match Harness::new(cfg, repo.clone(), LossSpec::NONE) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("repocast demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    let losses = [0.02, 0.05, 0.20, 0.50];
    let mut wants = Vec::new();
    for (c, &p) in losses.iter().enumerate() {
        // Overlapping subsets: every client wants the two big files' first or
        // second, and a window of the rest that overlaps its neighbours'.
        let mut items: Vec<u32> = vec![(c % 2) as u32];
        items.extend((2 + c as u32 * 6..2 + c as u32 * 6 + 14).map(|i| 2 + (i - 2) % 38));
        let loss = if c == 2 {
            LossSpec::bursty(p, 4.0)
        } else {
            LossSpec::Bernoulli { p }
        };
        h.add_client(ClientSpec {
            items: items.iter().map(|&i| ItemId(i)).collect(),
            loss,
            join_at: Instant::from_millis(c as u64 * 50),
        });
        wants.push(items);
    }
    let wall = std::time::Instant::now();
    let idle = h.run(Instant::from_millis(3_600_000));
    let wall = wall.elapsed();
    println!("\n| client | loss | items | MiB | delay (s) | packets heard | NAKs | verified |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut all_ok = idle;
    let mut delays = Vec::new();
    for (c, rep) in h.reports().iter().enumerate() {
        let want = &wants[c];
        let ok = rep.failures.is_empty()
            && want
                .iter()
                .all(|&i| rep.files.get(&ItemId(i)) == Some(&repo[i as usize].1));
        all_ok &= ok && rep.delay.is_some();
        let mib: usize = want.iter().map(|&i| repo[i as usize].1.len()).sum();
        if let Some(d) = rep.delay {
            delays.push(d.as_secs_f64());
        }
        println!(
            "| c{c} | {:.0}%{} | {} | {:.1} | {} | {} | {} | {} |",
            losses[c] * 100.0,
            if c == 2 { " bursty" } else { "" },
            want.len(),
            mib as f64 / (1 << 20) as f64,
            rep.delay
                .map_or("-".into(), |d| format!("{:.2}", d.as_secs_f64())),
            rep.stats.useful + rep.stats.useless,
            rep.stats.naks,
            if ok { "yes" } else { "NO" }
        );
        for f in &rep.failures {
            println!("    failed: {f}");
        }
    }
    let s = h.server.stats();
    let avg = delays.iter().sum::<f64>() / delays.len().max(1) as f64;
    println!(
        "\nserver: {} transmissions ({} repair), {} data packets ({} repair), {} NAKs, {} rescheduled",
        s.transmissions,
        s.repair_transmissions,
        s.data_packets,
        s.repair_packets,
        s.naks,
        s.rescheduled
    );
    println!(
        "average client delay {avg:.2} s (virtual); ran in {:.2} s of wall time",
        wall.as_secs_f64()
    );
    if all_ok {
        println!("every requested file verified (BLAKE3) at every client");
        ExitCode::SUCCESS
    } else {
        println!("some files did not verify");
        ExitCode::FAILURE
    }
}
