//! `repocast serve DIR`: options in, [`repocast_net::server`] out.

use repocast_core::fec::CodeKind;
use repocast_core::policy::Scheme;
use repocast_core::sched::SchedulerKind;
use repocast_net::addr;
use repocast_net::server::{self, ServeOptions};
use repocast_net::socket::Interface;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `repocast serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The repository: every regular file under it is an item (or `dir` in --config).
    pub dir: Option<PathBuf>,
    /// A TOML file with any of these settings (flags given here win).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Data rate cap in bit/s (100M, 1G, 250k).
    #[arg(long, default_value = "100M")]
    pub rate: String,
    /// Interface to send on: an IPv4 address or a name (eth0).
    #[arg(long)]
    pub interface: Option<String>,
    /// TCP address for request connections.
    #[arg(long, default_value_t = SocketAddr::from(([0, 0, 0, 0], addr::REQUEST_PORT)))]
    pub listen: SocketAddr,
    /// Data channel group:port (IPv6 groups work too, e.g. [ff15::4701]:4701).
    #[arg(long, default_value_t = SocketAddr::from((addr::DATA_GROUP_V4, addr::DATA_PORT)))]
    pub data_group: SocketAddr,
    /// Announcement channel group:port.
    #[arg(long, default_value_t = SocketAddr::from((addr::ANNOUNCE_GROUP_V4, addr::ANNOUNCE_PORT)))]
    pub announce_group: SocketAddr,
    /// Multicast TTL (hop limit).
    #[arg(long, default_value_t = 1)]
    pub ttl: u32,
    /// Whole scheme in one string, e.g. "FEC(0.01R)+R(0)+notify" or "ARM".
    /// Default "FEC(maxloss+0.02)+R(inf)+notify", unless --fec,
    /// --retransmit or --notify build one.
    #[arg(long, conflicts_with_all = ["fec", "retransmit", "notify"])]
    pub scheme: Option<String>,
    /// FEC policy: 0.1, 0.01R, 0.2/R, maxloss+0.05, or arm (default maxloss+0.02).
    #[arg(long)]
    pub fec: Option<String>,
    /// Retransmission: inf, 0 (reschedule only) or a symbol count p (default inf).
    #[arg(long)]
    pub retransmit: Option<String>,
    /// Tell late joiners about the transmission in progress (with --fec/--retransmit).
    #[arg(long)]
    pub notify: bool,
    /// Scheduler: rq, rq-fill, fifo, popular, rxw, mad, flat.
    #[arg(long, default_value = "rq")]
    pub scheduler: String,
    /// Erasure code: raptorq, rs, xor, exact.
    #[arg(long, default_value = "raptorq")]
    pub code: String,
    /// Bytes per symbol (even; 1280 fits a 1500-byte MTU).
    #[arg(long, default_value_t = 1280)]
    pub symbol_size: u16,
    /// Largest source block in symbols (default: the code's).
    #[arg(long)]
    pub block_symbols: Option<u32>,
    /// HTTP address for /metrics and /status.
    #[arg(long, default_value_t = SocketAddr::from(([0, 0, 0, 0], addr::METRICS_PORT)))]
    pub metrics: SocketAddr,
    /// Do not serve /metrics and /status.
    #[arg(long)]
    pub no_metrics: bool,
    /// This server's address, for clients' source-specific joins.
    #[arg(long)]
    pub source: Option<IpAddr>,
    /// Seed for the server's random choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Turns the flags into options, or a message for the user.
pub fn options(a: &ServeArgs) -> Result<ServeOptions, String> {
    let scheme: Scheme = match (&a.scheme, &a.fec, &a.retransmit, a.notify) {
        (Some(s), ..) => s.parse().map_err(|e| format!("{e}"))?,
        (None, None, None, false) => server::default_scheme(),
        (None, fec, r, notify) => {
            let fec = fec.as_deref().unwrap_or("maxloss+0.02");
            let r = r.as_deref().unwrap_or("inf");
            let n = if notify { "+notify" } else { "" };
            let text = if fec.eq_ignore_ascii_case("arm") {
                format!("ARM+R({r}){n}")
            } else {
                format!("FEC({fec})+R({r}){n}")
            };
            text.parse().map_err(|e| format!("{e}"))?
        }
    };
    let scheduler = SchedulerKind::from_name(&a.scheduler).ok_or_else(|| {
        format!(
            "unknown scheduler {:?} (rq, rq-fill, fifo, popular, rxw, mad, flat)",
            a.scheduler
        )
    })?;
    let code = CodeKind::from_name(&a.code)
        .ok_or_else(|| format!("unknown code {:?} (raptorq, rs, xor, exact)", a.code))?;
    let dir = a
        .dir
        .clone()
        .ok_or("give the repository folder (DIR, or dir in --config)")?;
    let mut o = ServeOptions::new(dir);
    o.rate_bps = addr::parse_rate(&a.rate).map_err(|e| e.to_string())?;
    o.interface = Interface::parse(a.interface.as_deref()).map_err(|e| e.to_string())?;
    o.listen = a.listen;
    o.data_group = a.data_group;
    o.announce_group = a.announce_group;
    o.ttl = a.ttl;
    o.scheme = scheme;
    o.scheduler = scheduler;
    o.code = code;
    o.symbol_size = a.symbol_size;
    o.max_block = a.block_symbols;
    o.metrics = (!a.no_metrics).then_some(a.metrics);
    o.source = a.source;
    o.seed = a.seed;
    Ok(o)
}

pub async fn run(mut a: ServeArgs, matches: Option<clap::ArgMatches>) -> ExitCode {
    if let (Some(path), Some(m)) = (a.config.clone(), matches.as_ref()) {
        if let Err(e) = crate::config::apply(&path, &mut a, m) {
            eprintln!("repocast serve: {e}");
            return ExitCode::from(2);
        }
    }

    let opts = match options(&a) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("repocast serve: {e}");
            return ExitCode::from(2);
        }
    };
    let srv = match server::start(opts).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("repocast serve: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", srv.banner);
    wait_for_signal().await;
    eprintln!("repocast serve: shutting down");
    match srv.stop().await {
        Ok(s) => {
            println!(
                "served {} transmissions ({} repair), {} symbols ({} repair), {} NAKs, {} rescheduled, {} items done",
                s.transmissions,
                s.repair_transmissions,
                s.data_packets,
                s.repair_packets,
                s.naks,
                s.rescheduled,
                s.items_done
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("repocast serve: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = ctrl_c.await;
        }
    }
}
