//! # repocast: the command-line entry point (thin)
//!
//! Parses arguments and hands off to `repocast-net` (serve, get, ls, demo)
//! or `repocast-sim` (sim). Today only `demo` exists: it runs the protocol
//! core's in-process harness, server and clients with emulated loss.

mod demo;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None | Some("demo") => demo::run(),
        Some("--help") | Some("-h") | Some("help") => {
            println!(
                "usage: repocast demo\n\nOnly the in-process demo exists yet; serve, get, ls and sim come with the network and simulator crates."
            );
            std::process::ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("repocast: unknown command {other:?} (try `repocast --help`)");
            std::process::ExitCode::from(2)
        }
    }
}
