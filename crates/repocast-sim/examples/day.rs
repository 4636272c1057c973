//! One simulated day of the SPEC 5 base case through the core's state
//! machines in accounting mode (no payload bytes), on the in-process
//! harness: 100 items of 60 packets of 512 bytes, a client every 4 s on
//! average (Poisson) asking for 1-17 items (mean 9, uniform), 5% client
//! loss, 80 ms per packet, 100 ms control delay, FEC(0.01R)+R(0).
//! Prints the wall time, packets and clients. Not the simulator (that is
//! `repocast-sim`); this measures what the core costs per packet.
//!
//! `cargo run --release -p repocast-sim --example day [scheme] [seed]`

#![allow(clippy::disallowed_methods)] // wall-clock timing of the run itself

use repocast_core::fec::CodeKind;
use repocast_core::loss::LossSpec;
use repocast_core::rng::Rng;
use repocast_core::server::ServerConfig;
use repocast_core::{Instant, ItemId};
use repocast_sim::engine::{ClientSpec, Harness};
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let scheme = args.get(1).map_or("FEC(0.01R)+R(0)", String::as_str);
    let seed: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let cfg = ServerConfig {
        scheme: scheme.parse().expect("scheme"),
        code: CodeKind::RaptorQ,
        symbol_size: 512,
        max_block_symbols: 1000,
        packet_interval: Duration::from_millis(80),
        burst: 1,
        seed,
        ..ServerConfig::default()
    };
    let mut h = Harness::accounting(cfg, &[60 * 512; 100], LossSpec::NONE).expect("harness");
    h.control_delay = Duration::from_millis(100);
    let mut rng = Rng::new(seed);
    let day = 86_400_000_000u64;
    let mut t = 0u64;
    let mut clients = 0;
    loop {
        // Exponential inter-arrival, mean 4 s.
        t += (-(1.0 - rng.next_f64()).ln() * 4e6) as u64;
        if t >= day {
            break;
        }
        let n = rng.range_u64(1, 18) as usize;
        let mut want: Vec<u32> = (0..100).collect();
        rng.shuffle(&mut want);
        want.truncate(n);
        h.add_client(ClientSpec {
            items: want.into_iter().map(ItemId).collect(),
            loss: LossSpec::Bernoulli { p: 0.05 },
            join_at: Instant::from_micros(t),
        });
        clients += 1;
    }
    let start = std::time::Instant::now();
    h.run(Instant::from_micros(day));
    let wall = start.elapsed();
    let s = h.server.stats();
    let reps = h.reports();
    let done: Vec<f64> = reps
        .iter()
        .filter_map(|r| r.delay.map(|d| d.as_secs_f64()))
        .collect();
    let useful: u64 = reps.iter().map(|r| r.stats.useful).sum();
    let useless: u64 = reps.iter().map(|r| r.stats.useless).sum();
    println!(
        "{} events; deliveries {useful} useful, {useless} useless",
        h.events()
    );
    println!(
        "{scheme}: {clients} clients ({} complete), {} data packets, {} NAKs, avg delay {:.0} s, wall {:.3} s ({:.2} M packets/s)",
        done.len(),
        s.data_packets,
        s.naks,
        done.iter().sum::<f64>() / done.len().max(1) as f64,
        wall.as_secs_f64(),
        s.data_packets as f64 / wall.as_secs_f64() / 1e6
    );
}
