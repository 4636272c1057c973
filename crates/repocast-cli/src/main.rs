//! # repocast: the command-line entry point (thin)
//!
//! Parses arguments and hands off. Today: `demo`, which runs the protocol
//! core's own server and client state machines in process (the core's
//! harness), with real bytes, emulated loss and a virtual clock. `serve`,
//! `get`, `ls` and `sim` arrive with `repocast-net` and `repocast-sim`.

mod demo;

use clap::{Parser, Subcommand};

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
    /// Serve a generated repository to four lossy clients, in process.
    Demo(demo::DemoArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Demo(a)) => demo::run(&a),
        None => demo::run(&demo::DemoArgs::default()),
    }
}
