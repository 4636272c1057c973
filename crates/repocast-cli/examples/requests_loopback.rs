//! Issue 12's request workload on real sockets: `serve` and one `get` per
//! request (each with its own sockets, its own emulated loss and its own
//! output folder), started at the request's arrival time, in one process
//! on loopback multicast. Compare with the same workload through the same
//! endpoints in virtual time (`cargo run --release -p repocast-sim
//! --example requests`): the difference is what the real driver, the
//! sockets and the CPU add.
//!
//!     cargo run --release -p repocast-cli --example requests_loopback -- [SEED] [LOSS] [HOSTS] [RATE_MBPS] [DURATION_S]

use repocast_core::loss::LossSpec;
use repocast_core::rng::Rng;
use repocast_net::client::{self, GetOptions};
use repocast_net::server::{self, ServeOptions};
use repocast_net::socket::Interface;
use repocast_sim::requests::{RequestWorkload, from_args, summary};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// CPU seconds this process has used (utime + stime from /proc, in the
/// kernel's usual 100 ticks a second).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let tick = 100.0;
    let ut: f64 = f.get(11).and_then(|s| s.parse().ok()).unwrap_or(0.0);
    let st: f64 = f.get(12).and_then(|s| s.parse().ok()).unwrap_or(0.0);
    (ut + st) / tick
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (params, losses, rate_mbps) = from_args(&args);
    let (seed, hosts) = (params.seed, params.hosts);
    let w = RequestWorkload::generate(&params);
    let Ok(work) = tempfile::tempdir() else {
        eprintln!("no temporary folder");
        return;
    };
    let repo = work.path().join("repo");
    let mut rng = Rng::new(seed ^ 0xf11e);
    let mut names = Vec::new();
    for (i, &n) in w.sizes.iter().enumerate() {
        let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
        let name = format!("f{i:02}.bin");
        if std::fs::create_dir_all(&repo)
            .and_then(|_| std::fs::write(repo.join(&name), bytes))
            .is_err()
        {
            eprintln!("cannot write the repository");
            return;
        }
        names.push(name);
    }
    let lo = Interface {
        v4: Some(Ipv4Addr::LOCALHOST),
        ..Default::default()
    };
    let mut so = ServeOptions::new(repo.clone());
    so.listen = (Ipv4Addr::LOCALHOST, 0).into();
    so.data_group = SocketAddr::from((Ipv4Addr::new(239, 255, 47, 131), 4731));
    so.announce_group = SocketAddr::from((Ipv4Addr::new(239, 255, 47, 132), 4732));
    so.interface = lo.clone();
    so.rate_bps = (rate_mbps * 1e6) as u64;
    so.metrics = None;
    so.seed = seed;
    let srv = match server::start(so).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("serve: {e}");
            return;
        }
    };
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let mut jobs = Vec::new();
    for (k, r) in w.requests.iter().enumerate() {
        let items = r.files.iter().map(|&f| names[f].clone()).collect();
        let mut g = GetOptions::new(srv.request_addr, work.path().join(format!("r{k}")), items);
        g.interface = lo.clone();
        g.trust = repocast_net::tls::Trust::Key(srv.key);
        g.loss = (losses.get(r.host % losses.len().max(1)).copied()).unwrap_or(LossSpec::NONE);
        g.seed = seed * 1000 + k as u64;
        g.idle_timeout = Duration::from_secs(120);
        let at = t0 + Duration::from_secs_f64(r.at_s);
        jobs.push(tokio::spawn(async move {
            tokio::time::sleep_until(at.into()).await;
            client::get(g, None).await
        }));
    }
    let (mut delays, mut failed, mut datagrams) = (Vec::new(), 0, 0u64);
    for j in jobs {
        match j.await {
            Ok(Ok(rep)) if rep.all_ok() => {
                delays.push(rep.elapsed.as_secs_f64());
                datagrams += rep.datagrams;
            }
            _ => failed += 1,
        }
    }
    let (cpu, wall) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    let st = match srv.stop().await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("stop: {e}");
            return;
        }
    };
    let (mean, med, p95, max) = summary(&delays);
    // A data packet's own header and IPv4 and UDP's, beside its symbol.
    let headers = (repocast_core::wire::data::DATA_OVERHEAD + 28) as f64;
    println!(
        "seed {seed}, {hosts} hosts, loss {}, {rate_mbps} Mbit/s, loopback: {} requests, {:.0} MiB requested",
        repocast_sim::requests::loss_list(&losses),
        w.requests.len(),
        w.requested_bytes() as f64 / 1048576.0
    );
    println!(
        "| repocast (real sockets, loopback) | {}/{} | {mean:.2} s | {med:.2} s | {p95:.2} s | {max:.2} s |",
        w.requests.len() - failed,
        w.requests.len()
    );
    println!(
        "scheduled sends {} ({:.2} item-requests per send), repairs {}, report timeouts {}, wire bytes {:.2}x requested; datagrams read by all gets {datagrams} (server sent {}); CPU {cpu:.1} s in {wall:.1} s",
        st.transmissions - st.repair_transmissions,
        w.item_requests() as f64 / (st.transmissions - st.repair_transmissions).max(1) as f64,
        st.repair_transmissions,
        st.report_timeouts,
        (st.data_packets as f64 * headers + st.symbol_bytes as f64) / w.requested_bytes() as f64,
        st.data_packets,
    );
}
