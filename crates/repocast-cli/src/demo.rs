//! `repocast demo`, the README's first command: generates a sample
//! repository (50 files, three of 12 MiB), serves it and runs four clients
//! with 2%, 5%, 20% and 50% emulated loss asking for overlapping subsets;
//! shows progress and ends with a table of each client's delay, datagrams
//! and NAKs, and whether every file verified and is byte-identical. Exits 0
//! only if every file did. By default on loopback multicast (real sockets);
//! with `--virtual` the same story, the same endpoints and the same
//! settings run on the simulator's virtual LAN (virtual time, no sockets).

use crate::progress::Display;
use repocast_core::Instant;
use repocast_core::endpoint::client::{Outcome, Want};
use repocast_core::loss::LossSpec;
use repocast_core::policy::Scheme;
use repocast_core::profile::Profile;
use repocast_core::rng::Rng;
use repocast_core::server::ServerStats;
use repocast_net::client::{self, GetOptions, Progress};
use repocast_net::server::{self, ServeOptions};
use repocast_net::socket::Interface;
use repocast_sim::lan::{LanClient, VirtualLan};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// Options of `repocast demo`.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Run on the simulator's virtual LAN (virtual time) instead of sockets.
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

const LOSSES: [f64; 4] = [0.02, 0.05, 0.20, 0.50];

/// 50 files: three of 12 MiB, the rest 1 KiB to 1.2 MiB.
fn repository(seed: u64) -> Vec<(String, Vec<u8>)> {
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
        files.push((name, bytes));
    }
    files
}

fn write_repository(dir: &Path, files: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    for (name, bytes) in files {
        let p = dir.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, bytes)?;
    }
    Ok(())
}

/// Client c wants big file c % 3 and 20 small files overlapping its
/// neighbours'.
fn wants(c: usize) -> Vec<usize> {
    let mut v = vec![c % 3];
    v.extend((0..20).map(|k| 3 + (c * 9 + k) % 47));
    v
}

/// One client's line of the table.
struct Row {
    elapsed: Duration,
    datagrams: u64,
    naks: u64,
    /// Every item verified and equal to the original.
    ok: bool,
    failures: Vec<Outcome>,
}

/// Parses the flags: the scheme and the rate, or the exit code to leave with.
fn settings(a: &DemoArgs) -> Result<(Scheme, u64), ExitCode> {
    let Ok(scheme) = a.scheme.parse() else {
        eprintln!("repocast demo: invalid scheme {:?}", a.scheme);
        return Err(ExitCode::from(2));
    };
    match repocast_net::addr::parse_rate(&a.rate) {
        Ok(r) => Ok((scheme, r)),
        Err(e) => {
            eprintln!("repocast demo: {e}");
            Err(ExitCode::from(2))
        }
    }
}

fn names(files: &[(String, Vec<u8>)], c: usize) -> Vec<String> {
    wants(c).into_iter().map(|i| files[i].0.clone()).collect()
}

/// `repocast demo --virtual`: the story on the simulator's virtual LAN.
pub fn run_virtual(a: &DemoArgs) -> ExitCode {
    let (scheme, rate) = match settings(a) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let files = repository(a.seed);
    print_intro(&files, "on a virtual LAN (virtual time)");
    let tweak = |c: &mut repocast_core::server::ServerConfig| {
        c.scheme = scheme;
        c.seed = a.seed;
        let _ = c.set_rate(rate, false);
    };
    let mut lan = match VirtualLan::new(Profile::Lan, tweak, files.clone(), LossSpec::NONE) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("repocast demo: {e}");
            return ExitCode::from(2);
        }
    };
    for (c, &p) in LOSSES.iter().enumerate() {
        lan.add_client(LanClient {
            want: Want::Items(names(&files, c)),
            loss: LossSpec::Bernoulli { p },
            join_at: Instant::ZERO,
            crash_at: None,
            stop_at: None,
            host: None,
        });
    }
    lan.run(Instant::from_micros(3_600_000_000));
    let rows = (lan.reports().into_iter().enumerate())
        .map(|(c, r)| {
            let identical = wants(c)
                .iter()
                .all(|&i| r.files.get(&files[i].0) == Some(&files[i].1));
            let ok = identical && r.outcomes.iter().all(|o| o.result.is_ok());
            Row {
                elapsed: r.delay.unwrap_or_default(),
                datagrams: r.datagrams,
                naks: r.client.naks,
                ok,
                failures: r
                    .outcomes
                    .into_iter()
                    .filter(|o| o.result.is_err())
                    .collect(),
            }
        })
        .collect();
    summary(&files, rows, lan.server().server().stats())
}

fn print_intro(files: &[(String, Vec<u8>)], place: &str) {
    let total: usize = files.iter().map(|f| f.1.len()).sum();
    println!(
        "repocast demo: {} files ({:.1} MiB), served {place}",
        files.len(),
        total as f64 / (1 << 20) as f64,
    );
}

/// The table, the server's counters and the verdict.
fn summary(files: &[(String, Vec<u8>)], rows: Vec<Row>, stats: ServerStats) -> ExitCode {
    println!(
        "\n| client | emulated loss | items | MiB | delay (s) | datagrams | NAKs | verified |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut all_ok = true;
    let mut delays = Vec::new();
    for (c, r) in rows.iter().enumerate() {
        all_ok &= r.ok;
        delays.push(r.elapsed.as_secs_f64());
        let want = wants(c);
        let mib: usize = want.iter().map(|&i| files[i].1.len()).sum();
        println!(
            "| c{c} | {:.0}% | {} | {:.1} | {:.2} | {} | {} | {} |",
            LOSSES[c] * 100.0,
            want.len(),
            mib as f64 / (1 << 20) as f64,
            r.elapsed.as_secs_f64(),
            r.datagrams,
            r.naks,
            if r.ok { "yes" } else { "NO" }
        );
        for o in &r.failures {
            println!("    {}: {:?}", o.name, o.result);
        }
    }
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
        delays.iter().sum::<f64>() / delays.len().max(1) as f64
    );
    if all_ok && rows.len() == LOSSES.len() {
        println!("every requested file verified (BLAKE3) and byte-identical at every client");
        ExitCode::SUCCESS
    } else {
        println!("some files did not verify");
        ExitCode::FAILURE
    }
}

/// `repocast demo`: the story on loopback multicast.
pub async fn run(a: DemoArgs) -> ExitCode {
    let fail = |e: String| {
        eprintln!("repocast demo: {e}");
        ExitCode::FAILURE
    };
    let (scheme, rate) = match settings(&a) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let Ok(work) = tempfile::tempdir() else {
        return fail("cannot make a temporary folder".into());
    };
    let repo = work.path().join("repo");
    let files = repository(a.seed);
    if let Err(e) = write_repository(&repo, &files) {
        return fail(format!("writing the sample repository: {e}"));
    }
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
    print_intro(
        &files,
        &format!("from {} on loopback multicast", repo.display()),
    );
    let srv = match server::start(so).await {
        Ok(s) => s,
        Err(e) => return fail(e.to_string()),
    };
    println!("{}", srv.banner);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Progress)>();
    let mut jobs = Vec::new();
    for (c, &p) in LOSSES.iter().enumerate() {
        let mut g = GetOptions::new(
            srv.request_addr,
            work.path().join(format!("client{c}")),
            names(&files, c),
        );
        g.interface = lo.clone();
        g.trust = repocast_net::tls::Trust::Key(srv.key);
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
    let mut rows = Vec::new();
    for (c, job) in jobs.into_iter().enumerate() {
        let rep = match job.await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return fail(format!("client {c}: {e}")),
            Err(e) => return fail(format!("client {c}: {e}")),
        };
        let out = work.path().join(format!("client{c}"));
        let identical = wants(c)
            .iter()
            .all(|&i| std::fs::read(out.join(&files[i].0)).ok().as_ref() == Some(&files[i].1));
        rows.push(Row {
            elapsed: rep.elapsed,
            datagrams: rep.datagrams,
            naks: rep.stats.naks,
            ok: rep.all_ok() && identical,
            failures: rep
                .items
                .into_iter()
                .filter(|o| o.result.is_err())
                .collect(),
        });
    }
    match srv.stop().await {
        Ok(stats) => summary(&files, rows, stats),
        Err(e) => fail(e.to_string()),
    }
}
