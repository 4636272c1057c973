//! `repocast demo`, the README's first command: generates a sample
//! repository (50 files, three of 12 MiB), serves it on loopback multicast
//! and runs four clients with 2%, 5%, 20% and 50% emulated loss asking for
//! overlapping subsets; shows progress and ends with a table of each
//! client's delay, loss and symbols, and whether every file verified.
//! Exits 0 only if every file verified. `--virtual` runs the same story on
//! the core's in-process harness instead of sockets.

use crate::progress::Display;
use crate::virtual_demo::VirtualArgs;
use repocast_core::loss::LossSpec;
use repocast_core::rng::Rng;
use repocast_net::client::{self, GetOptions, Progress};
use repocast_net::server::{self, ServeOptions};
use repocast_net::socket::Interface;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// Options of `repocast demo`.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Run on the core's in-process harness (virtual time) instead of sockets.
    #[arg(long)]
    pub r#virtual: bool,
    /// Reliability scheme.
    #[arg(long, default_value = "FEC(maxloss+0.02)+R(inf)+notify")]
    pub scheme: String,
    /// Seed for the repository, the requests and the loss.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Data rate cap (bit/s).
    #[arg(long, default_value = "400M")]
    pub rate: String,
}

impl Default for DemoArgs {
    fn default() -> Self {
        DemoArgs {
            r#virtual: false,
            scheme: "FEC(maxloss+0.02)+R(inf)+notify".into(),
            seed: 1,
            rate: "400M".into(),
        }
    }
}

impl DemoArgs {
    pub fn virtual_args(&self) -> VirtualArgs {
        let rate_mbps =
            repocast_net::addr::parse_rate(&self.rate).map_or(100.0, |b| b as f64 / 1e6);
        VirtualArgs {
            scheme: self.scheme.clone(),
            seed: self.seed,
            rate_mbps,
        }
    }
}

const LOSSES: [f64; 4] = [0.02, 0.05, 0.20, 0.50];

/// 50 files: three of 12 MiB, the rest 1 KiB to 1.2 MiB.
fn make_repository(dir: &Path, seed: u64) -> std::io::Result<Vec<(String, u64)>> {
    let mut rng = Rng::new(seed);
    let mut files = Vec::new();
    for i in 0..50 {
        let (name, size) = if i < 3 {
            (format!("big/image{i}.bin"), 12 << 20)
        } else {
            (
                format!("docs/page{i:02}.html"),
                1024 + rng.range_u64(0, 1_200_000) as usize,
            )
        };
        let mut bytes = vec![0u8; size];
        for chunk in bytes.chunks_mut(8) {
            let v = rng.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        let p = dir.join(&name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, &bytes)?;
        files.push((name, size as u64));
    }
    Ok(files)
}

/// Client c wants big file c % 3 and 20 small files overlapping its
/// neighbours'.
fn wants(c: usize) -> Vec<usize> {
    let mut v = vec![c % 3];
    v.extend((0..20).map(|k| 3 + (c * 9 + k) % 47));
    v
}

pub async fn run(a: DemoArgs) -> ExitCode {
    let fail = |e: String| {
        eprintln!("repocast demo: {e}");
        ExitCode::FAILURE
    };
    let Ok(scheme) = a.scheme.parse() else {
        eprintln!("repocast demo: invalid scheme {:?}", a.scheme);
        return ExitCode::from(2);
    };
    let rate = match repocast_net::addr::parse_rate(&a.rate) {
        Ok(r) => r,
        Err(e) => return fail(e.to_string()),
    };
    let Ok(work) = tempfile::tempdir() else {
        return fail("cannot make a temporary folder".into());
    };
    let repo = work.path().join("repo");
    let files = match make_repository(&repo, a.seed) {
        Ok(f) => f,
        Err(e) => return fail(format!("writing the sample repository: {e}")),
    };
    let lo = Interface {
        v4: Some(Ipv4Addr::LOCALHOST),
        ..Default::default()
    };
    let mut so = ServeOptions::new(repo.clone());
    so.listen = (Ipv4Addr::LOCALHOST, 0).into();
    so.data_group = SocketAddr::from((Ipv4Addr::new(239, 255, 47, 101), 4711));
    so.announce_group = SocketAddr::from((Ipv4Addr::new(239, 255, 47, 102), 4712));
    so.interface = lo.clone();
    so.rate_bps = rate;
    so.metrics = Some((Ipv4Addr::LOCALHOST, 0).into());
    so.scheme = scheme;
    so.seed = a.seed;
    let total: u64 = files.iter().map(|f| f.1).sum();
    println!(
        "repocast demo: {} files ({:.1} MiB) in {}, served on loopback multicast",
        files.len(),
        total as f64 / (1 << 20) as f64,
        repo.display()
    );
    let srv = match server::start(so).await {
        Ok(s) => s,
        Err(e) => return fail(e.to_string()),
    };
    println!("{}", srv.banner);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Progress)>();
    let mut jobs = Vec::new();
    for (c, &p) in LOSSES.iter().enumerate() {
        let names: Vec<String> = wants(c).into_iter().map(|i| files[i].0.clone()).collect();
        let mut g = GetOptions::new(
            srv.request_addr,
            work.path().join(format!("client{c}")),
            names,
        );
        g.interface = lo.clone();
        g.loss = LossSpec::Bernoulli { p };
        g.seed = a.seed * 10 + c as u64;
        g.idle_timeout = Duration::from_secs(30);
        let (ctx, mut crx) = tokio::sync::mpsc::unbounded_channel();
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(p) = crx.recv().await {
                let _ = tx.send((c, p));
            }
        });
        jobs.push(tokio::spawn(client::get(g, Some(ctx))));
    }
    drop(tx);
    let mut displays: Vec<Display> = (0..LOSSES.len())
        .map(|c| Display::new(&format!("c{c} "), c == 0, false))
        .collect();
    while let Some((c, p)) = rx.recv().await {
        // One set of bars (client 0) on a terminal; failures from all.
        if c == 0 || matches!(p, Progress::Failed { .. }) {
            displays[c].show(&p);
        }
    }
    for d in &mut displays {
        d.finish();
    }
    println!(
        "\n| client | emulated loss | items | MiB | delay (s) | datagrams | NAKs | verified |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut all_ok = true;
    let mut delays = Vec::new();
    for (c, job) in jobs.into_iter().enumerate() {
        let rep = match job.await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return fail(format!("client {c}: {e}")),
            Err(e) => return fail(format!("client {c}: {e}")),
        };
        let want = wants(c);
        let identical = want.iter().all(|&i| {
            let name = &files[i].0;
            std::fs::read(repo.join(name)).ok()
                == std::fs::read(work.path().join(format!("client{c}")).join(name)).ok()
        });
        let ok = rep.all_ok() && identical;
        all_ok &= ok;
        delays.push(rep.elapsed.as_secs_f64());
        let mib: u64 = want.iter().map(|&i| files[i].1).sum();
        println!(
            "| c{c} | {:.0}% | {} | {:.1} | {:.2} | {} | {} | {} |",
            LOSSES[c] * 100.0,
            want.len(),
            mib as f64 / (1 << 20) as f64,
            rep.elapsed.as_secs_f64(),
            rep.datagrams,
            rep.stats.naks,
            if ok { "yes" } else { "NO" }
        );
        for o in rep.items.iter().filter(|o| o.result.is_err()) {
            println!("    {}: {:?}", o.name, o.result);
        }
    }
    let stats = match srv.stop().await {
        Ok(s) => s,
        Err(e) => return fail(e.to_string()),
    };
    println!(
        "\nserver: {} transmissions ({} repair), {} symbols sent ({} repair), {} NAKs, {} rescheduled",
        stats.transmissions,
        stats.repair_transmissions,
        stats.data_packets,
        stats.repair_packets,
        stats.naks,
        stats.rescheduled
    );
    println!(
        "average client delay {:.2} s",
        delays.iter().sum::<f64>() / delays.len() as f64
    );
    if all_ok {
        println!("every requested file verified (BLAKE3) and byte-identical at every client");
        ExitCode::SUCCESS
    } else {
        println!("some files did not verify");
        ExitCode::FAILURE
    }
}
