//! `tests/netlab.sh`'s workload on the virtual LAN: a 32 MiB file and five
//! small ones (37,000 to 185,000 bytes) plus an empty one, fetched whole
//! by three receivers that start together, through the shipped settings
//! (`Profile::Lan`, what `serve` and `get` run) at 100 Mbit/s. Prints each
//! receiver's time to its last file verified over the ideal the netlab
//! test prints (the bytes over the rate times one minus its loss) and the
//! server's counters: what the lab run should show, less its process
//! start-up and scheduling noise. Deterministic: same arguments, same
//! numbers.
//!
//!     cargo run --release -p repocast-sim --example netlab_single -- [SEED] [LOSSES]
//!
//! LOSSES: a comma list, one receiver each [0.05,0.05,0.5, as the test];
//! each a probability or `ge:MEAN:BURST` (bursts, as the lab's links take).
//! With `EVENTS` set in the environment, the server's events go to
//! stderr (`event SECONDS EVENT`).

use repocast_core::Instant;
use repocast_core::endpoint::client::Want;
use repocast_core::loss::LossSpec;
use repocast_core::profile::Profile;
use repocast_core::rng::Rng;
use repocast_sim::lan::{LanClient, VirtualLan};
use std::process::ExitCode;

/// Bytes of the large file.
const BIG: usize = 32 << 20;
/// The rate the test serves at.
const RATE_BPS: f64 = 100e6;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seed = match args.first().map(|s| s.parse::<u64>()) {
        None => 1,
        Some(Ok(s)) => s,
        Some(Err(e)) => return fail(&format!("SEED: {e}")),
    };
    let losses: Result<Vec<LossSpec>, _> = match args.get(1) {
        None => Ok([0.05, 0.05, 0.5]
            .map(|p| LossSpec::Bernoulli { p })
            .to_vec()),
        Some(s) => s.split(',').map(str::parse).collect(),
    };
    let losses = match losses {
        Ok(l) if !l.is_empty() && l.iter().all(|p| p.mean_loss() < 1.0) => l,
        _ => return fail("LOSSES: a comma list of losses below 1 (P or ge:MEAN:BURST)"),
    };
    let mut r = Rng::new(seed);
    let mut bytes = |n: usize| (0..n).map(|_| r.next_u64() as u8).collect::<Vec<u8>>();
    let mut data = vec![("big.bin".to_string(), bytes(BIG))];
    for i in 1..=5usize {
        data.push((format!("docs/f{i}"), bytes(i * 37_000)));
    }
    data.push(("docs/empty".into(), Vec::new()));
    let total: usize = data.iter().map(|d| d.1.len()).sum();
    let mut lan = match VirtualLan::new(Profile::Lan, |c| c.seed = seed, data, LossSpec::NONE) {
        Ok(l) => l,
        Err(e) => return fail(&format!("server: {e}")),
    };
    for (i, &loss) in losses.iter().enumerate() {
        lan.add_client(LanClient {
            want: Want::All,
            loss,
            // Started together, a few microseconds apart.
            join_at: Instant::from_micros(i as u64 * 10),
            crash_at: None,
            stop_at: None,
            host: None,
        });
    }
    if std::env::var_os("EVENTS").is_some() {
        lan.server_events = Some(Vec::new());
    }
    if !lan.run(Instant::from_micros(600_000_000)) {
        return fail("unfinished after 600 simulated seconds");
    }
    let names: Vec<String> = losses.iter().map(LossSpec::to_string).collect();
    println!("seed {seed}, {total} bytes, losses {}", names.join(","));
    for (i, (rep, loss)) in lan.reports().iter().zip(&losses).enumerate() {
        let Some(d) = rep.delay else {
            println!("c{} loss {loss}: failed: {:?}", i + 1, rep.outcomes);
            continue;
        };
        let ideal = total as f64 * 8.0 / (RATE_BPS * (1.0 - loss.mean_loss()));
        let d = d.as_secs_f64();
        println!("c{} loss {loss}: {d:.3} s, ratio {:.3}", i + 1, d / ideal);
    }
    for (t, e) in lan.server_events.iter().flatten() {
        eprintln!("event {:.4} {e:?}", t.as_micros() as f64 / 1e6);
    }
    let st = lan.server().server().stats();
    println!(
        "server: {} data packets ({} repair), {} grown and {} trimmed on early reports, {} NAKs, {} symbols sooner on {} hints, {} transmissions",
        st.data_packets,
        st.repair_packets,
        st.grown_packets,
        st.trimmed_packets,
        st.naks,
        st.hastened,
        st.early_naks,
        st.transmissions
    );
    ExitCode::SUCCESS
}

fn fail(why: &str) -> ExitCode {
    eprintln!("netlab_single: {why}");
    ExitCode::FAILURE
}
