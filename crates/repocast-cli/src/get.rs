//! `repocast get` and `repocast ls`: options in, [`repocast_net::client`] out.

use crate::progress::Display;
use crate::progress::shown;
use crate::progress::signing_note;
use repocast_core::endpoint::select;
use repocast_core::loss::LossSpec;
use repocast_net::addr;
use repocast_net::client::{self, GetOptions};
use repocast_net::host;
use repocast_net::socket::Interface;
use repocast_net::tls::{self, Trust};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Options of `repocast get`.
#[derive(clap::Args, Debug)]
pub struct GetArgs {
    /// The server: HOST[:PORT] (default port 4700).
    #[arg(long)]
    pub server: String,
    /// Interface to join the groups on: an IPv4 address or a name.
    #[arg(long)]
    pub interface: Option<String>,
    /// Output folder.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// Fetch the whole catalogue.
    #[arg(long, conflicts_with_all = ["items", "from"])]
    pub all: bool,
    /// Items to fetch: names (relative paths), patterns (`*` within a
    /// folder, `**` across, `?` one character; quote them from the shell)
    /// or folders (ending in `/`: everything under them).
    #[arg(required_unless_present_any = ["all", "from"])]
    pub items: Vec<String>,
    /// Read more items to fetch from FILE (`-`: standard input), one name,
    /// pattern or folder a line; blank lines and lines starting with `#`
    /// are skipped.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// Emulated loss on received datagrams: a probability (0.2), or
    /// Gilbert-Elliott bursts as ge:MEAN:BURST (ge:0.1:8).
    #[arg(long)]
    pub emulate_loss: Option<String>,
    /// Seed of the loss emulation and NAK delays.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Join groups any-source even if the server names its source.
    #[arg(long)]
    pub no_ssm: bool,
    /// Give up after this many seconds without hearing anything useful.
    #[arg(long, default_value_t = 60)]
    pub idle_timeout: u64,
    /// Give up after this many seconds in which the server, though heard,
    /// sent nothing for this request (it is overloaded, or lost the
    /// request); 0: wait as long as the server is heard.
    #[arg(long, default_value_t = repocast_core::endpoint::client::STALL_TIMEOUT.as_secs())]
    pub stall_timeout: u64,
    /// Replace existing files that differ from the items.
    #[arg(long)]
    pub overwrite: bool,
    /// Receive alone, not through the host's shared receiver (the one
    /// process that receives for every `get` of this user from the same
    /// server; the first starts it, it stops 10 s after the last).
    #[arg(long)]
    pub no_share: bool,
    /// Print a JSON summary (every item's outcome and the counters)
    /// instead of the text one, and no progress.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub trust: TrustArgs,
}

/// Options of `repocast host-receiver` (started by `get`; not for users).
#[derive(clap::Args, Debug)]
pub struct HostArgs {
    /// The server's request address.
    #[arg(long)]
    pub server: std::net::SocketAddr,
    /// The interface the `get`s join on.
    #[arg(long)]
    pub interface: Option<String>,
    /// Any-source joins.
    #[arg(long)]
    pub no_ssm: bool,
}

/// `repocast host-receiver`: serves this host's `get`s until idle.
pub async fn host_receiver(a: HostArgs) -> ExitCode {
    let key = host::HostKey {
        server: a.server,
        interface: a.interface,
        ssm: !a.no_ssm,
    };
    match host::run_receiver(key).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("repocast host-receiver: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Which server keys a client accepts.
#[derive(clap::Args, Debug)]
pub struct TrustArgs {
    /// Accept only this server key: `ed25519:...` or a `.pub` file
    /// [the key recorded for the server in the known-servers file; the
    /// first key seen is recorded].
    #[arg(long, value_name = "KEY")]
    pub trust: Option<String>,
    /// The known-servers file [~/.config/repocast/known_servers].
    #[arg(long, value_name = "FILE")]
    pub known_servers: Option<PathBuf>,
    /// A file holding the access token for a server that requires one
    /// (`serve --tokens`) [the REPOCAST_TOKEN environment variable, if set].
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

impl TrustArgs {
    fn trust(&self) -> Result<Trust, String> {
        Ok(match (&self.trust, &self.known_servers) {
            (Some(k), _) => {
                Trust::Key(repocast_net::keys::parse_trust(k).map_err(|e| e.to_string())?)
            }
            (None, Some(f)) => Trust::KnownServers(f.clone()),
            (None, None) => Trust::KnownServers(tls::default_known_servers()),
        })
    }

    /// The access token to present, if any: from `--token-file`, else
    /// from `REPOCAST_TOKEN` (never a flag's value: it would show in `ps`).
    fn token(&self) -> Result<Option<String>, String> {
        match &self.token_file {
            Some(f) => repocast_net::keys::read_token(f)
                .map(Some)
                .map_err(|e| e.to_string()),
            None => Ok(std::env::var("REPOCAST_TOKEN")
                .ok()
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())),
        }
    }
}

/// Options of `repocast ls`.
#[derive(clap::Args, Debug)]
pub struct LsArgs {
    /// The server: HOST[:PORT].
    #[arg(long)]
    pub server: String,
    /// List only these: names, patterns or folders, as `get` takes them
    /// [all].
    pub items: Vec<String>,
    #[command(flatten)]
    pub trust: TrustArgs,
}

/// Whether `ls` lists `name`: it is named, or matched by a pattern or
/// folder, or nothing was named.
fn listed(sels: &[String], name: &str) -> bool {
    sels.is_empty() || sels.iter().any(|s| select::selects(s, name))
}

/// Parses `--emulate-loss` (`LossSpec`'s one spelling).
pub fn parse_loss(s: &str) -> Result<LossSpec, String> {
    s.parse()
        .map_err(|e: repocast_core::loss::BadLoss| e.to_string())
}

/// The items of `--from FILE`: one a line, blank lines and lines
/// starting with `#` skipped; `-` reads standard input.
fn read_items(f: &std::path::Path) -> Result<Vec<String>, String> {
    let text = if f.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(f)
    }
    .map_err(|e| format!("--from {}: {e}", f.display()))?;
    Ok(parse_items(&text))
}

fn parse_items(text: &str) -> Vec<String> {
    // Names are kept as written (a name may begin or end with a space);
    // only a Windows line end is taken off.
    (text.lines())
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

fn options(a: &GetArgs) -> Result<GetOptions, String> {
    let server = addr::resolve_server(&a.server).map_err(|e| e.to_string())?;
    let mut items = a.items.clone();
    if let Some(f) = &a.from {
        let more = read_items(f)?;
        if more.is_empty() && items.is_empty() {
            return Err(format!("--from {}: no items in it", f.display()));
        }
        items.extend(more);
    }
    let mut o = GetOptions::new(server, a.out.clone(), items);
    o.all = a.all;
    o.interface = Interface::parse(a.interface.as_deref()).map_err(|e| e.to_string())?;
    o.loss = match &a.emulate_loss {
        Some(s) => parse_loss(s)?,
        None => LossSpec::NONE,
    };
    o.seed = a.seed;
    o.ssm = !a.no_ssm;
    o.idle_timeout = Duration::from_secs(a.idle_timeout.max(1));
    o.stall_timeout = (a.stall_timeout > 0).then(|| Duration::from_secs(a.stall_timeout));
    o.trust = a.trust.trust()?;
    o.token = a.trust.token()?;
    o.overwrite = a.overwrite;
    Ok(o)
}

pub async fn run(a: GetArgs) -> ExitCode {
    let opts = match options(&a) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("repocast get: {e}");
            return ExitCode::from(2);
        }
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let exe = std::env::current_exe().ok();
    let job = if a.no_share {
        tokio::spawn(client::get_until(opts, Some(tx), Some(stop)))
    } else {
        tokio::spawn(
            async move { host::get_until(opts, Some(tx), exe.as_deref(), Some(stop)).await },
        )
    };
    let mut display = Display::new("", !a.json, !a.json);
    // A first Ctrl-C or SIGTERM stops the run cleanly (what was received
    // is kept, the summary follows); a second ends the process at once.
    let signal = crate::serve::wait_for_signal();
    tokio::pin!(signal);
    let mut signalled = false;
    loop {
        tokio::select! {
            p = rx.recv() => match p {
                Some(p) => display.show(&p),
                None => break,
            },
            _ = &mut signal => {
                if signalled {
                    display.finish();
                    eprintln!("repocast get: stopped at once");
                    std::process::exit(130);
                }
                signalled = true;
                let _ = stop_tx.send(true);
                eprintln!("repocast get: stopping, keeping what was received (again to quit at once)");
                // The next signal (the future fired: a fresh one).
                signal.set(crate::serve::wait_for_signal());
            }
        }
    }
    display.finish();
    let rep = match job.await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            eprintln!("repocast get: {e}");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("repocast get: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (ok, bytes) = crate::summary::verified(&rep.items);
    if a.json {
        print_json(&rep, ok, bytes);
    } else {
        print_text(&rep, ok, bytes);
    }
    crate::summary::print_failed(&rep.items);
    if rep.all_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn print_json(rep: &client::GetReport, ok: usize, bytes: u64) {
    let summary = serde_json::json!({
        "verified": ok,
        "items": crate::summary::items(&rep.items),
        "bytes": bytes,
        "elapsed_s": rep.elapsed.as_secs_f64(),
        "datagrams": rep.datagrams,
        "naks": rep.stats.naks,
        "resumed_blocks": rep.resumed_blocks,
        "lent_blocks": rep.lent_blocks,
        "kept_blocks": rep.kept_blocks,
        "kept_symbols": rep.kept_symbols,
        "spilled_blocks": rep.spilled_blocks,
        "emulated_losses": rep.emulated_losses,
        "malformed": rep.malformed,
        "forged": rep.forged,
        "signed_batches": rep.signing.batches,
        "unlisted_dropped": rep.signing.unsigned_dropped,
        "shared": rep.shared,
    });
    println!("{summary}");
}

fn print_text(rep: &client::GetReport, ok: usize, bytes: u64) {
    println!(
        "{ok} of {} items verified ({:.1} MiB) in {:.2} s; {} datagrams, {} NAKs, {} blocks resumed{}{}{}{}{}{}",
        rep.items.len(),
        bytes as f64 / (1 << 20) as f64,
        rep.elapsed.as_secs_f64(),
        rep.datagrams,
        rep.stats.naks,
        rep.resumed_blocks,
        if rep.lent_blocks > 0 {
            format!(" ({} lent by another get on this host)", rep.lent_blocks)
        } else {
            String::new()
        },
        crate::progress::kept_note(rep.kept_blocks, rep.kept_symbols),
        if rep.emulated_losses > 0 {
            format!(", {} dropped by --emulate-loss", rep.emulated_losses)
        } else {
            String::new()
        },
        if rep.forged > 0 {
            format!(", {} forged datagrams dropped", rep.forged)
        } else {
            String::new()
        },
        signing_note(&rep.signing),
        if rep.shared {
            "; through the host's shared receiver"
        } else {
            ""
        },
    );
}

pub async fn ls(a: LsArgs) -> ExitCode {
    let (server, trust, token) = match addr::resolve_server(&a.server)
        .map_err(|e| e.to_string())
        .and_then(|s| Ok((s, a.trust.trust()?, a.trust.token()?)))
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("repocast ls: {e}");
            return ExitCode::from(2);
        }
    };
    match client::list(server, &trust, token).await {
        Ok(mut entries) => {
            entries.retain(|e| listed(&a.items, &e.name));
            for e in &entries {
                println!("{:>14}  {}", e.size, shown(&e.name));
            }
            let total: u64 = entries.iter().map(|e| e.size).sum();
            println!("{} items, {} bytes", entries.len(), total);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("repocast ls: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{listed, parse_items};

    #[test]
    fn ls_lists_what_its_selectors_name() {
        let sels: Vec<String> = vec!["docs/".into(), "*.iso".into(), "b.txt".into()];
        let names = ["a.iso", "b.txt", "c.txt", "docs/x", "docs/d/y", "d/a.iso"];
        let shown: Vec<&str> = names.into_iter().filter(|n| listed(&sels, n)).collect();
        assert_eq!(shown, ["a.iso", "b.txt", "docs/x", "docs/d/y"]);
        assert!(listed(&[], "anything"));
    }

    #[test]
    fn a_list_of_items_skips_blank_lines_and_comments_and_keeps_names_as_written() {
        let text = "a.txt\r\n\n# a comment\n  \ndocs/\n*.iso\n name with spaces \n";
        assert_eq!(
            parse_items(text),
            ["a.txt", "docs/", "*.iso", " name with spaces "]
        );
    }
}
