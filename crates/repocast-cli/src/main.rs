//! # repocast: the command-line entry point (thin)
//!
//! Parses arguments and hands off: `serve`, `get`, `ls`, `push`, `listen`, `keygen`, `demo` and `bench`
//! to `repocast-net` (real UDP multicast and TCP); `demo --virtual` to the
//! simulator's virtual LAN (the same endpoints, virtual time). No protocol logic lives here.

// The flags' doc comments are their `--help` text, which shows defaults
// and choices in brackets (`[100M]`, `[mad]`); rustdoc would read those as
// links, and escaping them would put backslashes in `--help`.
#![allow(rustdoc::broken_intra_doc_links)]

mod bench;
mod config;
mod demo;
mod get;
mod keygen;
mod progress;
mod push;
mod serve;
mod sim;
mod summary;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "repocast",
    version,
    about = "Reliable multicast repository server"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve every regular file under DIR by multicast.
    Serve(Box<serve::ServeArgs>),
    /// Fetch items from a server into a folder, verified.
    Get(get::GetArgs),
    /// Push every file under DIR round and round (no back channel): Fcast
    /// carousel, MAD or flat, signed in-band catalogue.
    Push(Box<push::PushArgs>),
    /// Receive pushed files: tune in, download, verify, drop out (or stay
    /// tuned with --satellite).
    Listen(push::ListenArgs),
    /// List a server's catalogue.
    Ls(get::LsArgs),
    /// Create a server identity key (and its .pub) for `serve --key`.
    Keygen(keygen::KeygenArgs),
    /// A server and four lossy clients on loopback multicast (no flags needed).
    Demo(demo::DemoArgs),
    /// Loss-free goodput of one receiver on loopback.
    Bench(bench::BenchArgs),
    /// Run a simulation scenario (a sweep of schemes over a variable).
    Sim(sim::SimArgs),
    /// The host's shared receiver for `get` (started by `get` itself).
    #[command(hide = true)]
    HostReceiver(get::HostArgs),
}

/// The runtime for `command`: one thread for the host's shared receiver
/// (its work is one task's; a pool would only add wake-ups between
/// threads), a pool for the rest (a `get` on one thread finished its
/// single-file lab runs about 1% later).
fn runtime(command: &Command) -> Result<tokio::runtime::Runtime, ExitCode> {
    let mut b = if matches!(command, Command::HostReceiver(_)) {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    b.enable_all().build().map_err(|e| {
        eprintln!("repocast: cannot start the runtime: {e}");
        ExitCode::FAILURE
    })
}

fn main() -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("REPOCAST_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let command = cli
        .command
        .unwrap_or(Command::Demo(demo::DemoArgs::default()));
    if let Command::Sim(a) = command {
        return sim::run(a);
    }
    if let Command::Keygen(a) = command {
        return keygen::run(a);
    }
    if let Command::Demo(a) = &command {
        if a.r#virtual {
            return demo::run_virtual(a);
        }
    }
    if matches!(
        command,
        Command::Get(_) | Command::Listen(_) | Command::HostReceiver(_)
    ) {
        // Receivers decode blocks on other threads than they receive on.
        repocast_net::one_malloc_arena();
    }
    // A server's connections and a receiver's open items need more open
    // files than a shell's usual 1,024 allows.
    repocast_net::fd_limit::raise();
    let rt = match runtime(&command) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(async move {
        match command {
            Command::Serve(a) => serve::run(*a).await,
            Command::Get(a) => get::run(a).await,
            Command::Ls(a) => get::ls(a).await,
            Command::Push(a) => push::run(*a).await,
            Command::Listen(a) => push::listen(a).await,
            Command::Demo(a) => demo::run(a).await,
            Command::Bench(a) => bench::run(a).await,
            Command::HostReceiver(a) => get::host_receiver(a).await,
            Command::Sim(_) | Command::Keygen(_) => ExitCode::SUCCESS,
        }
    })
}
